# An image that only carries the plugin's jar, for the Helm chart's init container
# (values-init-container.yaml). Build from the repository root, after
# `mvn -B -pl plugin -am package -DskipTests`:
#   docker build -f deploy/helm/jar-image.Dockerfile -t registry.example.com/txn-preserver-jar:0.7.0-SNAPSHOT .
# or from an unpacked release bundle:
#   docker build -f deploy/helm/jar-image.Dockerfile --build-arg PLUGIN_JAR=pulsar-txn-preserver-<version>.jar -t ... .
FROM busybox:1.36
ARG PLUGIN_VERSION=0.7.0-SNAPSHOT
ARG PLUGIN_JAR=plugin/target/pulsar-txn-preserver-${PLUGIN_VERSION}.jar
COPY ${PLUGIN_JAR} /txn-preserver.jar
