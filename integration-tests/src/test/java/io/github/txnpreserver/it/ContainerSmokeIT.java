package io.github.txnpreserver.it;

import static org.assertj.core.api.Assertions.assertThat;

import java.nio.file.Files;
import java.nio.file.Path;
import java.util.stream.Stream;
import org.apache.pulsar.client.api.Producer;
import org.apache.pulsar.client.api.PulsarClient;
import org.apache.pulsar.client.api.transaction.TxnID;
import org.junit.jupiter.api.DisplayName;
import org.junit.jupiter.api.Test;
import org.testcontainers.containers.PulsarContainer;
import org.testcontainers.junit.jupiter.Container;
import org.testcontainers.junit.jupiter.Testcontainers;
import org.testcontainers.utility.DockerImageName;
import org.testcontainers.utility.MountableFile;

/**
 * The smoke test on the official Docker image, for machines with a Docker engine. Without
 * one it is reported as skipped, never as passed.
 */
@Testcontainers(disabledWithoutDocker = true)
@DisplayName("In the official apachepulsar/pulsar:4.0.8 image")
class ContainerSmokeIT {

    @Container
    private static final PulsarContainer PULSAR = new PulsarContainer(
            DockerImageName.parse("apachepulsar/pulsar:4.0.8"))
            .withTransactions()
            .withCopyFileToContainer(MountableFile.forHostPath(pluginJar()),
                    "/pulsar/lib/io.github.txnpreserver-pulsar-txn-preserver.jar")
            .withCopyFileToContainer(MountableFile.forHostPath(pluginJar()),
                    "/pulsar/protocols/txn-preserver.nar")
            .withEnv("transactionMetadataStoreProviderClassName",
                    "io.github.txnpreserver.broker.PreservingMetadataStoreProvider")
            // Keys the shipped configuration files lack: only the PULSAR_PREFIX_ form adds them.
            .withEnv("PULSAR_PREFIX_protocolHandlerDirectory", "/pulsar/protocols")
            .withEnv("PULSAR_PREFIX_messagingProtocols", "txn-preserver")
            .withEnv("PULSAR_PREFIX_transactionMetaPersistCount", "100");

    @Test
    void aRetriedCommitSucceedsAndAConflictingAbortIsRefused() throws Exception {
        try (PulsarClient client = PulsarClient.builder().serviceUrl(PULSAR.getPulsarBrokerUrl())
                .enableTransaction(true).build();
             Producer<String> producer = Txns.producer(client, Txns.uniqueTopic("container"));
             RetryingEndClient retry = RetryingEndClient.connect(PULSAR.getPulsarBrokerUrl())) {
            TxnID txn = Txns.committed(client, producer, "m");

            assertThat(retry.commit(txn)).isEqualTo(EndAnswer.SUCCESS);
            assertThat(retry.abort(txn)).isEqualTo(EndAnswer.REFUSED_AS_COMMITTED);
        }
    }

    private static Path pluginJar() {
        Path target = PulsarDistribution.repoRoot().resolve("plugin/target");
        try (Stream<Path> jars = Files.list(target)) {
            return jars.filter(jar -> jar.getFileName().toString().matches("pulsar-txn-preserver-[^-]+(-SNAPSHOT)?\\.jar"))
                    .findFirst().orElseThrow(() -> new IllegalStateException("plugin jar not built in " + target));
        } catch (java.io.IOException e) {
            throw new java.io.UncheckedIOException(e);
        }
    }
}
