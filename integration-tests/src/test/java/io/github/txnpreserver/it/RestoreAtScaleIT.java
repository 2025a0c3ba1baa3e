package io.github.txnpreserver.it;

import static org.assertj.core.api.Assertions.assertThat;

import io.github.txnpreserver.statetopic.StateRecordCodec;
import io.github.txnpreserver.statetopic.proto.TerminatedTxnRecord;
import io.github.txnpreserver.statetopic.proto.TxnOutcome;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import org.apache.pulsar.client.admin.PulsarAdmin;
import org.apache.pulsar.client.api.Producer;
import org.apache.pulsar.client.api.PulsarClient;
import org.apache.pulsar.client.api.Schema;
import org.apache.pulsar.client.api.transaction.TxnID;
import org.junit.jupiter.api.DisplayName;
import org.junit.jupiter.api.Test;

/**
 * A coordinator restores a million kept outcomes from its state topic on a real broker, and
 * answers retries from them. The restore time is printed, not asserted: the benchmark
 * ({@code benchmarks/run.sh}) is where it is measured.
 */
@DisplayName("Restore of a million kept outcomes")
class RestoreAtScaleIT {

    private static final String STATE_TOPIC = "persistent://pulsar/system/__terminated_txn_state_0";
    private static final int RECORDS = 1_000_000;
    /** Far above any sequence the coordinator hands out in this test. */
    private static final long FIRST_SEQUENCE = 1_000_000_000L;

    @Test
    void aMillionRecordsAreRestoredAndAnswerRetries() throws Exception {
        Map<String, String> config = Map.of(
                "transactionMetaPersistCount", Integer.toString(RECORDS + 100),
                "transactionMetaPersistMaxCountPerCoordinator", Integer.toString(RECORDS + 100));
        try (LocalPulsar pulsar = LocalPulsar.start("restore-1m", config, "-Xms1g -Xmx1g")) {
            // Written before any transactional client connects, so the coordinator is not loaded yet.
            writeRecords(pulsar);

            try (PulsarClient client = Txns.client(pulsar);
                 RetryingEndClient retry = RetryingEndClient.connect(pulsar.serviceUrl())) {
                assertThat(retry.commit(new TxnID(0, FIRST_SEQUENCE))).isEqualTo(EndAnswer.SUCCESS);
                assertThat(retry.commit(new TxnID(0, FIRST_SEQUENCE + RECORDS / 2))).isEqualTo(EndAnswer.SUCCESS);
                assertThat(retry.abort(new TxnID(0, FIRST_SEQUENCE + RECORDS - 1)))
                        .isEqualTo(EndAnswer.REFUSED_AS_COMMITTED);
                assertThat(retry.commit(new TxnID(0, FIRST_SEQUENCE + RECORDS))).isEqualTo(EndAnswer.NOT_FOUND);

                try (Producer<String> producer = Txns.producer(client, Txns.uniqueTopic("after-restore"))) {
                    TxnID fresh = Txns.committed(client, producer, "fresh");
                    assertThat(retry.commit(fresh)).isEqualTo(EndAnswer.SUCCESS);
                }
            }
            assertThat(BrokerMetrics.ofCoordinatorZero(pulsar, "pulsar_txn_preserver_restore_records"))
                    .isGreaterThanOrEqualTo(RECORDS);
            assertThat(BrokerMetrics.ofCoordinatorZero(pulsar, "pulsar_txn_preserver_kept_outcomes"))
                    .isEqualTo(RECORDS + 1);
            System.out.printf("restore of %d records on a real broker: %.2f s%n", RECORDS,
                    BrokerMetrics.ofCoordinatorZero(pulsar, "pulsar_txn_preserver_restore_duration_seconds"));
        }
    }

    private static void writeRecords(LocalPulsar pulsar) throws Exception {
        try (PulsarAdmin admin = Txns.admin(pulsar);
             PulsarClient plain = PulsarClient.builder().serviceUrl(pulsar.serviceUrl()).build()) {
            admin.topics().createNonPartitionedTopic(STATE_TOPIC);
            try (Producer<byte[]> writer = plain.newProducer(Schema.BYTES).topic(STATE_TOPIC)
                    .enableBatching(true).batchingMaxMessages(5000).batchingMaxPublishDelay(5, TimeUnit.MILLISECONDS)
                    .maxPendingMessages(50_000).blockIfQueueFull(true).create()) {
                long now = System.currentTimeMillis();
                for (long sequence = FIRST_SEQUENCE; sequence < FIRST_SEQUENCE + RECORDS; sequence++) {
                    byte[] record = TerminatedTxnRecord.newBuilder()
                            .setFormatVersion(StateRecordCodec.FORMAT_VERSION)
                            .setTxnidMostBits(0)
                            .setTxnidLeastBits(sequence)
                            .setOutcome(TxnOutcome.COMMITTED)
                            .setEndTimeMillis(now)
                            .build().toByteArray();
                    // One client (no owner), its slots in order, as the plugin writes them.
                    int slot = (int) (sequence - FIRST_SEQUENCE);
                    writer.newMessage().key(StateRecordCodec.slotKey(null, slot)).value(record).sendAsync();
                }
                writer.flush();
            }
        }
    }
}
