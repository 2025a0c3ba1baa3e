package io.github.txnpreserver.it;

import static org.assertj.core.api.Assertions.assertThat;

import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import java.util.stream.Stream;
import org.apache.pulsar.client.api.Producer;
import org.apache.pulsar.client.api.PulsarClient;
import org.apache.pulsar.client.api.transaction.TxnID;
import java.util.jar.JarEntry;
import java.util.jar.JarFile;
import org.junit.jupiter.api.DisplayName;
import org.junit.jupiter.api.Test;

/** What the install step puts into a broker (product code only), and the release bundle it comes in. */
@DisplayName("The jar the install step ships, and the release bundle")
class ShippedJarIT {

    @Test
    void holdsNoTestHookAndNoTestSeamClass() throws Exception {
        Path lib = PulsarDistribution.withPluginInstalled().resolve("lib");
        List<Path> plugin;
        try (var jars = Files.list(lib)) {
            plugin = jars.filter(path -> path.getFileName().toString().startsWith("io.github.txnpreserver-")).toList();
        }
        assertThat(plugin).as("only the plugin's own jar is installed").hasSize(1);
        assertThat(plugin.get(0).getFileName().toString()).doesNotContain("test-hooks");

        List<String> entries;
        try (JarFile jar = new JarFile(plugin.get(0).toFile())) {
            entries = jar.stream().map(JarEntry::getName).toList();
        }
        assertThat(entries).anyMatch(name -> name.endsWith("PreservingMetadataStoreProvider.class"));
        assertThat(entries).noneMatch(name -> name.contains("testhooks") || name.contains("CrashPoint")
                || name.contains("EndMarkerRefusal") || name.contains("Hooked"));
    }

    /**
     * The bundle {@code mvn package} builds: what an operator needs and nothing of the build;
     * its install.sh, run from the unpacked bundle with no Maven and no source tree, installs a
     * plugin that answers a retried commit from its kept outcome, and names this build.
     */
    @Test
    void theReleaseBundleInstallsFromItsOwnFolder() throws Exception {
        String version = System.getProperty("txnpreserver.version");
        Path bundle = Paths.get(System.getProperty("txnpreserver.bundle"));
        assertThat(bundle).as("built by mvn package (distribution/)").isRegularFile();
        Path unpacked = Files.createDirectories(LocalPulsar.newDir("release-bundle"));
        Process tar = new ProcessBuilder("tar", "-xzf", bundle.toString(), "-C", unpacked.toString())
                .redirectErrorStream(true).start();
        assertThat(tar.waitFor(1, TimeUnit.MINUTES)).isTrue();
        assertThat(tar.exitValue()).isZero();
        Path root = unpacked.resolve("pulsar-txn-preserver-" + version);

        List<String> files;
        try (Stream<Path> paths = Files.walk(root)) {
            files = paths.filter(Files::isRegularFile).map(path -> root.relativize(path).toString()).sorted().toList();
        }
        assertThat(files).contains("install.sh", "txn-preserver.conf", "pulsar-txn-preserver-" + version + ".jar",
                "LICENSE", "NOTICE", "INSTALL.md", "monitoring/txn-preserver-rules.yml",
                "monitoring/txn-preserver-prometheusrule.yaml", "monitoring/txn-preserver-dashboard.json",
                "deploy/docker/Dockerfile", "deploy/docker/txn-preserver.env", "deploy/helm/values-custom-image.yaml",
                "deploy/operator/pulsar-broker.yaml");
        assertThat(files).as("one jar, the plugin's").filteredOn(name -> name.endsWith(".jar"))
                .containsExactly("pulsar-txn-preserver-" + version + ".jar");
        assertThat(root.resolve("install.sh")).isExecutable();
        assertThat(Files.readString(root.resolve("INSTALL.md"))).contains("pulsar-txn-preserver " + version)
                .doesNotContain("${project.version}");
        assertThat(Files.readString(root.resolve("monitoring/txn-preserver-prometheusrule.yaml")))
                .contains("kind: PrometheusRule", "TxnPreserverCommitAfterTimeoutAbort");

        Path home = PulsarDistribution.freshCopy("install-from-bundle");
        ProcessBuilder install = new ProcessBuilder(root.resolve("install.sh").toString(), home.toString())
                .redirectErrorStream(true);
        // No source tree around it (install.sh looks beside itself, then in ../plugin/target): the bundle alone.
        assertThat(unpacked.resolve("plugin")).doesNotExist();
        Process run = install.start();
        String output = new String(run.getInputStream().readAllBytes());
        assertThat(run.waitFor(1, TimeUnit.MINUTES)).isTrue();
        assertThat(run.exitValue()).as(output).isZero();
        assertThat(Files.mismatch(home.resolve("lib/io.github.txnpreserver-pulsar-txn-preserver-" + version + ".jar"),
                root.resolve("pulsar-txn-preserver-" + version + ".jar"))).as("the bundle's jar installed").isEqualTo(-1);

        try (LocalPulsar pulsar = LocalPulsar.startFrom(home, "from-bundle", Map.of(), Map.of());
             PulsarClient client = Txns.client(pulsar);
             Producer<String> producer = Txns.producer(client, Txns.uniqueTopic("bundle"));
             RetryingEndClient retry = RetryingEndClient.connect(pulsar.serviceUrl())) {
            TxnID txn = Txns.committed(client, producer, "m");

            assertThat(retry.commit(txn)).isEqualTo(EndAnswer.SUCCESS);
            assertThat(pulsar.output()).contains("Transaction outcome preserver " + version + " (commit "
                    + PulsarDistribution.expectedCommit() + ") configured: ");
        }
    }
}
