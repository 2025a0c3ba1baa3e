package io.github.txnpreserver.it;

import static org.assertj.core.api.Assertions.assertThat;

import java.time.Duration;
import java.util.List;
import java.util.Map;
import org.apache.pulsar.client.admin.PulsarAdmin;
import org.apache.pulsar.client.api.Producer;
import org.apache.pulsar.client.api.PulsarClient;
import org.apache.pulsar.client.api.transaction.Transaction;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.DisplayName;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

/**
 * N concurrent commits of one open transaction. Every one is answered success, the data is
 * delivered once, and the number of end markers that reached the partition is printed: it
 * is measured, bounded by N, not pinned (see docs/DESIGN.md, "Concurrent duplicate ends").
 * Retries after the end send no marker at all.
 */
@DisplayName("Concurrent duplicate commits")
class DuplicateEndsIT {

    private static LocalPulsar pulsar;

    @BeforeAll
    static void startBroker() throws Exception {
        pulsar = LocalPulsar.start("duplicates", Map.of("transactionMetaPersistCount", "100"));
    }

    @AfterAll
    static void stopBroker() throws Exception {
        pulsar.close();
    }

    @ParameterizedTest(name = "N = {0}")
    @ValueSource(ints = {1, 4, 16})
    void allSucceedAndTheDataIsDeliveredOnce(int concurrentCommits) throws Exception {
        String topic = Txns.uniqueTopic("duplicates-" + concurrentCommits);
        try (PulsarClient client = Txns.client(pulsar);
             PulsarAdmin admin = Txns.admin(pulsar);
             Producer<String> producer = client.newProducer(org.apache.pulsar.client.api.Schema.STRING)
                     .topic(topic).enableBatching(false).create();
             RetryingEndClient retries = RetryingEndClient.connect(pulsar.serviceUrl())) {
            Transaction txn = Txns.open(client, Duration.ofMinutes(5));
            producer.newMessage(txn).value("once").send();
            long entriesBefore = admin.topics().getInternalStats(topic).numberOfEntries;

            List<EndAnswer> answers = retries.commitConcurrently(txn.getTxnID(), concurrentCommits);

            long markers = admin.topics().getInternalStats(topic).numberOfEntries - entriesBefore;
            System.out.printf("DUPLICATE-ENDS N=%d end_markers_on_partition=%d answers=%s%n",
                    concurrentCommits, markers, answers);
            assertThat(answers).hasSize(concurrentCommits).containsOnly(EndAnswer.SUCCESS);
            assertThat(markers).isBetween(1L, (long) concurrentCommits);
            assertThat(Txns.readAll(client, topic)).containsExactly("once");

            // Retries after the end (README: "never sends a second end marker"): answered from
            // the kept outcome, with no marker at all; an abort refused, with none either.
            long entriesAfterEnd = admin.topics().getInternalStats(topic).numberOfEntries;
            for (int retry = 0; retry < 3; retry++) {
                assertThat(retries.commit(txn.getTxnID())).isEqualTo(EndAnswer.SUCCESS);
            }
            assertThat(retries.abort(txn.getTxnID())).isEqualTo(EndAnswer.REFUSED_AS_COMMITTED);
            assertThat(admin.topics().getInternalStats(topic).numberOfEntries).as("markers sent by retries after the end")
                    .isEqualTo(entriesAfterEnd);
            assertThat(Txns.readAll(client, topic)).containsExactly("once");
        }
    }
}
