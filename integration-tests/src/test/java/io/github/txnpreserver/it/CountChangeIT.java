package io.github.txnpreserver.it;

import static org.assertj.core.api.Assertions.assertThat;

import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import org.apache.pulsar.client.admin.PulsarAdmin;
import org.apache.pulsar.client.api.Producer;
import org.apache.pulsar.client.api.PulsarClient;
import org.apache.pulsar.client.api.transaction.TxnID;
import org.awaitility.Awaitility;
import org.junit.jupiter.api.DisplayName;
import org.junit.jupiter.api.Test;

/**
 * A change of transactionMetaPersistCount at a restart loses no outcome: the count is only a
 * floor, retention is by time. Every outcome stays in a block record ({@code c<blockIndex>}).
 *
 * <p>(Until the preserver was rebuilt around one owner thread, this test also wrote records of
 * 0.1 and 0.2 and checked their migration into blocks; those formats are no longer read.)
 */
@DisplayName("Kept outcomes across a change of transactionMetaPersistCount")
class CountChangeIT {

    private static final String STATE_TOPIC = "persistent://pulsar/system/__terminated_txn_state_0";

    @Test
    void aChangeOfTheCountAtARestartLosesNoOutcome() throws Exception {
        List<TxnID> committed = new ArrayList<>();
        try (LocalPulsar pulsar = LocalPulsar.start("count-change", Map.of("transactionMetaPersistCount", "5"))) {
            try (PulsarClient client = Txns.client(pulsar);
                 Producer<String> producer = Txns.producer(client, Txns.uniqueTopic("count-change"))) {
                for (int i = 0; i < 8; i++) {
                    committed.add(Txns.committed(client, producer, "m" + i));
                }
                // Records are written in groups about once a second.
                Awaitility.await().atMost(Duration.ofSeconds(30)).pollInterval(Duration.ofSeconds(1))
                        .untilAsserted(() -> assertThat(StateTopicReader.liveRecords(client, STATE_TOPIC))
                                .as("block records only").isNotEmpty()
                                .allSatisfy((key, txns) -> assertThat(key).startsWith("c")));
            }

            pulsar.stop();
            pulsar.reconfigure(Map.of("transactionMetaPersistCount", "3"));
            pulsar.start();

            List<String> expected = new ArrayList<>();
            try (PulsarClient client = Txns.client(pulsar);
                 PulsarAdmin admin = Txns.admin(pulsar);
                 RetryingEndClient retry = RetryingEndClient.connect(pulsar.serviceUrl())) {
                for (TxnID txn : committed) {
                    assertThat(retry.commit(txn)).as("retry of %s after the count changed", txn)
                            .isEqualTo(EndAnswer.SUCCESS);
                    expected.add(StateTopicReader.nameOf(txn));
                }

                Awaitility.await().atMost(Duration.ofMinutes(2)).pollInterval(Duration.ofSeconds(2))
                        .untilAsserted(() -> {
                            admin.topics().triggerCompaction(STATE_TOPIC);
                            Map<String, List<String>> live = StateTopicReader.liveRecords(client, STATE_TOPIC);
                            assertThat(live.keySet()).as("block keys only").isNotEmpty()
                                    .allSatisfy(key -> assertThat(key).startsWith("c"));
                            assertThat(live.values().stream().flatMap(List::stream).toList())
                                    .as("every outcome in a block").containsAll(expected);
                        });

                // Once more, after the compaction: still answered.
                for (TxnID txn : committed) {
                    assertThat(retry.commit(txn)).as("retry of %s after the compaction", txn)
                            .isEqualTo(EndAnswer.SUCCESS);
                }
            }
        }
    }
}
