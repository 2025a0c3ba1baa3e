package io.github.txnpreserver.it;

import static org.assertj.core.api.Assertions.assertThat;

import java.time.Duration;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import org.apache.pulsar.client.api.Producer;
import org.apache.pulsar.client.api.PulsarClient;
import org.apache.pulsar.client.api.transaction.Transaction;
import org.apache.pulsar.client.api.transaction.TxnID;
import org.junit.jupiter.api.DisplayName;
import org.junit.jupiter.api.Test;

/**
 * Switching the plugin on and off on a broker with transactions in flight, with real
 * restarts: the transaction log is stock, so the other store reads it unchanged.
 */
@DisplayName("Switching the plugin on and off on a live broker")
class SwitchOnAndOffIT {

    private static final Map<String, String> STOCK = Map.of(
            "transactionMetadataStoreProviderClassName",
            "org.apache.pulsar.transaction.coordinator.impl.MLTransactionMetadataStoreProvider",
            "messagingProtocols", "");
    private static final Map<String, String> PLUGIN = Map.of(
            "transactionMetadataStoreProviderClassName",
            "io.github.txnpreserver.broker.PreservingMetadataStoreProvider",
            "messagingProtocols", "txn-preserver",
            "transactionMetaPersistCount", "10");

    @Test
    void switchingOnLosesNoTransactionInFlightAndKeepsOutcomesFromThenOn() throws Exception {
        String topic = Txns.uniqueTopic("switch-on");
        try (LocalPulsar pulsar = LocalPulsar.start("switch-on", STOCK)) {
            try (PulsarClient client = Txns.client(pulsar);
                 Producer<String> producer = Txns.producer(client, topic)) {
                Transaction inFlight = Txns.open(client, Duration.ofMinutes(10));
                producer.newMessage(inFlight).value("in-flight").send();
                TxnID endedBefore = Txns.committed(client, producer, "before");

                pulsar.reconfigure(PLUGIN);
                pulsar.stop();
                pulsar.start();

                inFlight.commit().get(Txns.REQUEST_BOUND.toMillis(), TimeUnit.MILLISECONDS);
                try (RetryingEndClient retry = RetryingEndClient.connect(pulsar.serviceUrl())) {
                    assertThat(retry.commit(inFlight.getTxnID())).isEqualTo(EndAnswer.SUCCESS);
                    assertThat(retry.abort(inFlight.getTxnID())).isEqualTo(EndAnswer.REFUSED_AS_COMMITTED);
                    assertThat(retry.commit(endedBefore)).as("ended under stock: not kept")
                            .isEqualTo(EndAnswer.NOT_FOUND);
                }
                assertThat(Txns.readAll(client, topic)).containsExactlyInAnyOrder("before", "in-flight");
            }
        }
    }

    @Test
    void switchingOffLosesNothingStockWouldHaveKept() throws Exception {
        String topic = Txns.uniqueTopic("switch-off");
        try (LocalPulsar pulsar = LocalPulsar.start("switch-off", PLUGIN)) {
            try (PulsarClient client = Txns.client(pulsar);
                 Producer<String> producer = Txns.producer(client, topic)) {
                Transaction inFlight = Txns.open(client, Duration.ofMinutes(10));
                producer.newMessage(inFlight).value("in-flight").send();
                Transaction toAbort = Txns.open(client, Duration.ofMinutes(10));
                producer.newMessage(toAbort).value("dropped").send();
                Txns.committed(client, producer, "before");

                pulsar.reconfigure(STOCK);
                pulsar.stop();
                pulsar.start();

                inFlight.commit().get(Txns.REQUEST_BOUND.toMillis(), TimeUnit.MILLISECONDS);
                toAbort.abort().get(Txns.REQUEST_BOUND.toMillis(), TimeUnit.MILLISECONDS);
                try (RetryingEndClient retry = RetryingEndClient.connect(pulsar.serviceUrl())) {
                    assertThat(retry.commit(inFlight.getTxnID())).as("stock again").isEqualTo(EndAnswer.NOT_FOUND);
                }
                assertThat(Txns.readAll(client, topic)).containsExactlyInAnyOrder("before", "in-flight");
            }
        }
    }
}
