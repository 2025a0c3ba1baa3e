package io.github.txnpreserver.it;

import static org.assertj.core.api.Assertions.assertThat;

import io.github.txnpreserver.statetopic.StateRecordCodec;
import io.github.txnpreserver.statetopic.proto.TerminatedTxnRecord;
import io.github.txnpreserver.statetopic.proto.TxnOutcome;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import org.apache.pulsar.client.api.Producer;
import org.apache.pulsar.client.api.ProducerAccessMode;
import org.apache.pulsar.client.api.PulsarClient;
import org.apache.pulsar.client.api.Schema;
import org.apache.pulsar.client.api.transaction.TxnID;
import org.junit.jupiter.api.DisplayName;
import org.junit.jupiter.api.Test;

/**
 * A client's outcomes live in {@code transactionMetaPersistCount} slots of the state topic.
 * When the count changes, or records were written one per transaction by version 0.1, the
 * restore keeps the newest and moves them into the new slots, once.
 */
@DisplayName("Kept outcomes across a change of transactionMetaPersistCount and an upgrade from 0.1")
class CountChangeIT {

    private static final String STATE_TOPIC = "persistent://pulsar/system/__terminated_txn_state_0";
    /** Far above any sequence the coordinator hands out in this test. */
    private static final TxnID ENDED_UNDER_01 = new TxnID(0, 1_000_000_000L);

    @Test
    void aSmallerCountKeepsTheNewestOutcomesInItsSlots() throws Exception {
        List<TxnID> txns = new ArrayList<>();
        try (LocalPulsar pulsar = LocalPulsar.start("count-change", Map.of("transactionMetaPersistCount", "5"))) {
            try (PulsarClient client = Txns.client(pulsar);
                 Producer<String> producer = Txns.producer(client, Txns.uniqueTopic("count-change"))) {
                for (int i = 0; i < 8; i++) {
                    txns.add(Txns.committed(client, producer, "m" + i));
                }
                assertThat(StateTopicReader.liveRecords(client, STATE_TOPIC)).as("one record per slot, 8 in 5 slots")
                        .containsOnlyKeys("s0", "s1", "s2", "s3", "s4");
                writeAsVersion01(client, ENDED_UNDER_01);
            }

            pulsar.stop();
            pulsar.reconfigure(Map.of("transactionMetaPersistCount", "3"));
            pulsar.start();

            try (PulsarClient client = Txns.client(pulsar);
                 RetryingEndClient retry = RetryingEndClient.connect(pulsar.serviceUrl())) {
                assertThat(retry.commit(txns.get(7))).isEqualTo(EndAnswer.SUCCESS);
                assertThat(retry.commit(txns.get(6))).isEqualTo(EndAnswer.SUCCESS);
                assertThat(retry.commit(ENDED_UNDER_01)).isEqualTo(EndAnswer.SUCCESS);
                assertThat(retry.commit(txns.get(5))).as("beyond the new count").isEqualTo(EndAnswer.NOT_FOUND);

                assertThat(StateTopicReader.liveRecords(client, STATE_TOPIC)).as("moved into the new slots")
                        .containsOnlyKeys("s0", "s1", "s2")
                        .containsValues(StateTopicReader.nameOf(txns.get(6)), StateTopicReader.nameOf(txns.get(7)),
                                StateTopicReader.nameOf(ENDED_UNDER_01));
            }
        }
    }

    /**
     * A record under its transaction's own key, as 0.1 wrote it. The writer fences the
     * coordinator's, as a new owner would; the broker restarts before the coordinator writes.
     */
    private static void writeAsVersion01(PulsarClient client, TxnID txnId) throws Exception {
        byte[] record = TerminatedTxnRecord.newBuilder()
                .setFormatVersion(StateRecordCodec.FORMAT_VERSION)
                .setTxnidMostBits(txnId.getMostSigBits())
                .setTxnidLeastBits(txnId.getLeastSigBits())
                .setOutcome(TxnOutcome.COMMITTED)
                .setEndTimeMillis(System.currentTimeMillis())
                .build().toByteArray();
        try (Producer<byte[]> writer = client.newProducer(Schema.BYTES).topic(STATE_TOPIC)
                .accessMode(ProducerAccessMode.ExclusiveWithFencing).create()) {
            writer.newMessage().key(StateRecordCodec.legacyKeyOf(txnId)).value(record).send();
        }
    }
}
