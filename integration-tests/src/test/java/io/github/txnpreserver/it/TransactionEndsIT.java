package io.github.txnpreserver.it;

import static org.assertj.core.api.Assertions.assertThat;

import io.github.txnpreserver.client.TransactionEnds;
import io.github.txnpreserver.client.TransactionOutcome;
import java.time.Duration;
import java.time.Instant;
import java.util.Map;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import org.apache.pulsar.PulsarVersion;
import org.apache.pulsar.client.api.Producer;
import org.apache.pulsar.client.api.PulsarClient;
import org.apache.pulsar.client.api.Schema;
import org.apache.pulsar.client.api.transaction.Transaction;
import org.apache.pulsar.client.api.transaction.TxnID;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

/**
 * The client helper against real brokers, through the stock client. Runs twice (see the
 * failsafe executions of this module): with the 4.0.8 client, and with the 3.0.0
 * {@code pulsar-client-all} that Flink's Pulsar connector brings. So it uses only client API
 * that both have, and nothing of this module's other test code.
 */
class TransactionEndsIT {

    @BeforeAll
    static void runsWithTheClientItIsMeantFor() {
        String expected = System.getProperty("txnpreserver.expected.client.version", "4.0.8");
        System.out.println("TransactionEndsIT with Pulsar client " + PulsarVersion.getVersion());
        assertThat(PulsarVersion.getVersion()).isEqualTo(expected);
    }

    @Test
    void withThePluginEveryEndAnswersTheTransactionsOutcome() throws Exception {
        try (LocalPulsar pulsar = LocalPulsar.start("client-helper", Map.of("transactionMetaPersistCount", "100"))) {
            String topic = "persistent://public/default/client-helper-" + System.nanoTime();
            TxnID committed;
            TxnID aborted;
            TxnID timedOut;
            TxnID endedByTheHelper;
            try (PulsarClient client = client(pulsar); Producer<String> producer = producer(client, topic)) {
                TransactionEnds ends = TransactionEnds.of(client);
                committed = transactionWith(client, producer, "committed", Duration.ofMinutes(5));
                aborted = transactionWith(client, producer, "aborted", Duration.ofMinutes(5));
                timedOut = transactionWith(client, producer, "timed-out", Duration.ofSeconds(2));
                endedByTheHelper = transactionWith(client, producer, "committed-by-the-helper", Duration.ofMinutes(5));
                assertThat(ends.commit(committed).get(1, TimeUnit.MINUTES)).isEqualTo(TransactionOutcome.COMMITTED);
                assertThat(ends.abort(aborted).get(1, TimeUnit.MINUTES)).isEqualTo(TransactionOutcome.ABORTED);
                awaitAbortedOnTimeout(pulsar, timedOut);

                // The same requests again, and the other end: each answers the outcome.
                assertThat(ends.commit(committed).get(1, TimeUnit.MINUTES)).isEqualTo(TransactionOutcome.COMMITTED);
                assertThat(ends.abort(committed).get(1, TimeUnit.MINUTES)).isEqualTo(TransactionOutcome.COMMITTED);
                assertThat(ends.commit(aborted).get(1, TimeUnit.MINUTES)).isEqualTo(TransactionOutcome.ABORTED);
                assertThat(ends.abort(aborted).get(1, TimeUnit.MINUTES)).isEqualTo(TransactionOutcome.ABORTED);
                assertThat(ends.commit(timedOut).get(1, TimeUnit.MINUTES)).isEqualTo(TransactionOutcome.ABORTED);
                assertThat(ends.commit(new TxnID(0, 987_654_321L)).get(1, TimeUnit.MINUTES))
                        .isEqualTo(TransactionOutcome.UNKNOWN);
                // An open transaction is ended by the request.
                assertThat(ends.commit(endedByTheHelper).get(1, TimeUnit.MINUTES))
                        .isEqualTo(TransactionOutcome.COMMITTED);

                // Sent while the broker is down: sent again until it is back, then answered.
                pulsar.kill();
                CompletableFuture<TransactionOutcome> duringTheOutage = ends.commit(committed);
                CompletableFuture<TransactionOutcome> abortDuringTheOutage = ends.abort(aborted);
                pulsar.start();
                assertThat(duringTheOutage.get(3, TimeUnit.MINUTES)).isEqualTo(TransactionOutcome.COMMITTED);
                assertThat(abortDuringTheOutage.get(3, TimeUnit.MINUTES)).isEqualTo(TransactionOutcome.ABORTED);
            }
            try (PulsarClient client = client(pulsar)) {
                assertThat(Txns.readAll(client, topic)).containsExactlyInAnyOrder("committed", "committed-by-the-helper");
            }
        }
    }

    @Test
    void onStockPulsarAnEndedTransactionIsUnknown() throws Exception {
        try (LocalPulsar pulsar = LocalPulsar.startStock("client-helper-stock",
                Map.of("transactionCoordinatorEnabled", "true"))) {
            String topic = "persistent://public/default/client-helper-stock-" + System.nanoTime();
            try (PulsarClient client = client(pulsar); Producer<String> producer = producer(client, topic)) {
                TransactionEnds ends = TransactionEnds.of(client);
                TxnID committed = transactionWith(client, producer, "committed", Duration.ofMinutes(5));
                assertThat(ends.commit(committed).get(1, TimeUnit.MINUTES)).isEqualTo(TransactionOutcome.COMMITTED);

                assertThat(ends.commit(committed).get(1, TimeUnit.MINUTES)).isEqualTo(TransactionOutcome.UNKNOWN);
            }
        }
    }

    private static PulsarClient client(LocalPulsar pulsar) throws Exception {
        return PulsarClient.builder().serviceUrl(pulsar.serviceUrl()).enableTransaction(true)
                .operationTimeout(30, TimeUnit.SECONDS).build();
    }

    private static Producer<String> producer(PulsarClient client, String topic) throws Exception {
        return client.newProducer(Schema.STRING).topic(topic).sendTimeout(0, TimeUnit.SECONDS).create();
    }

    private static TxnID transactionWith(PulsarClient client, Producer<String> producer, String value,
                                         Duration timeout) throws Exception {
        Transaction txn = client.newTransaction().withTransactionTimeout(timeout.toMillis(), TimeUnit.MILLISECONDS)
                .build().get(1, TimeUnit.MINUTES);
        producer.newMessage(txn).value(value).send();
        return txn.getTxnID();
    }

    /** Until the coordinator's timeout has aborted it (admin shows it aborting, aborted, or kept as aborted). */
    private static void awaitAbortedOnTimeout(LocalPulsar pulsar, TxnID txnId) throws InterruptedException {
        Instant deadline = Instant.now().plus(Duration.ofMinutes(1));
        String path = "/admin/v3/transactions/transactionMetadata/" + txnId.getMostSigBits() + "/"
                + txnId.getLeastSigBits();
        while (Instant.now().isBefore(deadline)) {
            String metadata = AdminHttp.get(pulsar.httpUrl(), path, null);
            if (metadata != null && metadata.contains("\"ABORT")) {
                return;
            }
            Thread.sleep(200);
        }
        throw new AssertionError("The coordinator did not abort " + txnId + " on its timeout");
    }
}
