# An image that only carries the plugin's jar, for the Helm chart's init container
# (values-init-container.yaml). Build from the repository root, after
# `mvn -B -pl plugin -am package -DskipTests`:
#   docker build -f deploy/helm/jar-image.Dockerfile -t registry.example.com/txn-preserver-jar:0.7.0-SNAPSHOT .
FROM busybox:1.36
ARG PLUGIN_VERSION=0.7.0-SNAPSHOT
COPY plugin/target/pulsar-txn-preserver-${PLUGIN_VERSION}.jar /txn-preserver.jar
