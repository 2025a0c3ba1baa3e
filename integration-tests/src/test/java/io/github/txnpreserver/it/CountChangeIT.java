package io.github.txnpreserver.it;

import static org.assertj.core.api.Assertions.assertThat;

import io.github.txnpreserver.statetopic.StateRecordCodec;
import io.github.txnpreserver.statetopic.proto.TerminatedTxnRecord;
import io.github.txnpreserver.statetopic.proto.TxnOutcome;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import org.apache.pulsar.client.admin.PulsarAdmin;
import org.apache.pulsar.client.api.Producer;
import org.apache.pulsar.client.api.ProducerAccessMode;
import org.apache.pulsar.client.api.PulsarClient;
import org.apache.pulsar.client.api.Schema;
import org.apache.pulsar.client.api.transaction.TxnID;
import org.awaitility.Awaitility;
import org.junit.jupiter.api.DisplayName;
import org.junit.jupiter.api.Test;

/**
 * An upgrade: records written by 0.2 (one per client slot, {@code s<slot>[:owner]}) and by
 * 0.1 (one per transaction, {@code <most>:<least>}) are read on restore and moved into block
 * records ({@code c<blockIndex>}); their keys are deleted once the blocks are durable. A
 * change of transactionMetaPersistCount at the same restart loses no outcome: the count is
 * only a floor, retention is by time.
 */
@DisplayName("Kept outcomes across an upgrade from 0.1 and 0.2 and a change of transactionMetaPersistCount")
class CountChangeIT {

    private static final String STATE_TOPIC = "persistent://pulsar/system/__terminated_txn_state_0";
    /** Far above any sequence the coordinator hands out in this test. */
    private static final long FIRST_SYNTHETIC = 1_000_000_000L;
    private static final int SLOT_RECORDS = 3;
    private static final TxnID ENDED_UNDER_01 = new TxnID(0, FIRST_SYNTHETIC + 1_000L);

    @Test
    void recordsOfEarlierFormatsMoveIntoBlocksAndEveryOutcomeStaysAnswerable() throws Exception {
        List<TxnID> committed = new ArrayList<>();
        List<TxnID> endedUnder02 = new ArrayList<>();
        for (int slot = 0; slot < SLOT_RECORDS; slot++) {
            endedUnder02.add(new TxnID(0, FIRST_SYNTHETIC + slot));
        }
        try (LocalPulsar pulsar = LocalPulsar.start("count-change", Map.of("transactionMetaPersistCount", "5"))) {
            try (PulsarClient client = Txns.client(pulsar);
                 Producer<String> producer = Txns.producer(client, Txns.uniqueTopic("count-change"))) {
                for (int i = 0; i < 8; i++) {
                    committed.add(Txns.committed(client, producer, "m" + i));
                }
                assertThat(StateTopicReader.liveRecords(client, STATE_TOPIC)).as("block records only")
                        .isNotEmpty().allSatisfy((key, txns) -> assertThat(key).startsWith("c"));
                writeEarlierFormats(client, endedUnder02, ENDED_UNDER_01);
            }

            pulsar.stop();
            pulsar.reconfigure(Map.of("transactionMetaPersistCount", "3"));
            pulsar.start();

            List<String> expected = new ArrayList<>();
            try (PulsarClient client = Txns.client(pulsar);
                 PulsarAdmin admin = Txns.admin(pulsar);
                 RetryingEndClient retry = RetryingEndClient.connect(pulsar.serviceUrl())) {
                List<TxnID> all = new ArrayList<>(committed);
                all.addAll(endedUnder02);
                all.add(ENDED_UNDER_01);
                for (TxnID txn : all) {
                    assertThat(retry.commit(txn)).as("retry of %s after the upgrade", txn)
                            .isEqualTo(EndAnswer.SUCCESS);
                    expected.add(StateTopicReader.nameOf(txn));
                }

                Awaitility.await().atMost(Duration.ofMinutes(2)).pollInterval(Duration.ofSeconds(2))
                        .untilAsserted(() -> {
                            admin.topics().triggerCompaction(STATE_TOPIC);
                            Map<String, List<String>> live = StateTopicReader.liveRecords(client, STATE_TOPIC);
                            assertThat(live.keySet()).as("earlier formats' keys deleted after migration")
                                    .isNotEmpty().allSatisfy(key -> assertThat(key).startsWith("c"));
                            assertThat(live.values().stream().flatMap(List::stream).toList())
                                    .as("every outcome in a block").containsAll(expected);
                        });

                // Once more, after the migration: still answered from the blocks.
                for (TxnID txn : all) {
                    assertThat(retry.commit(txn)).as("retry of %s after the migration", txn)
                            .isEqualTo(EndAnswer.SUCCESS);
                }
            }
        }
    }

    /**
     * Records of 0.2 (client slots, no owner) and of 0.1 (the transaction's own key). The
     * writer fences the coordinator's, as a new owner would; the broker restarts before the
     * coordinator writes again.
     */
    private static void writeEarlierFormats(PulsarClient client, List<TxnID> under02, TxnID under01)
            throws Exception {
        long now = System.currentTimeMillis();
        try (Producer<byte[]> writer = client.newProducer(Schema.BYTES).topic(STATE_TOPIC)
                .accessMode(ProducerAccessMode.ExclusiveWithFencing).create()) {
            for (int slot = 0; slot < under02.size(); slot++) {
                writer.newMessage().key(StateRecordCodec.slotKey(null, slot))
                        .value(committedRecord(under02.get(slot), now))
                        .send();
            }
            writer.newMessage().key(StateRecordCodec.legacyKeyOf(under01))
                    .value(committedRecord(under01, now))
                    .send();
        }
    }

    /**
     * What {@code StateRecordCodec.encode} writes for a committed outcome without an owner
     * (built here: KeptOutcome's Outcome needs broker classes the client classpath lacks).
     */
    private static byte[] committedRecord(TxnID txnId, long endTimeMillis) {
        return TerminatedTxnRecord.newBuilder()
                .setFormatVersion(StateRecordCodec.FORMAT_VERSION)
                .setTxnidMostBits(txnId.getMostSigBits())
                .setTxnidLeastBits(txnId.getLeastSigBits())
                .setOutcome(TxnOutcome.COMMITTED)
                .setEndTimeMillis(endTimeMillis)
                .build().toByteArray();
    }
}
