package io.github.txnpreserver.it;

import static org.assertj.core.api.Assertions.assertThat;

import io.github.txnpreserver.preserver.kept.BlockRecordCodec;
import io.github.txnpreserver.statetopic.proto.OutcomeBlockRecord;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import org.apache.pulsar.client.admin.PulsarAdmin;
import org.apache.pulsar.client.admin.PulsarAdminException;
import org.apache.pulsar.client.api.MessageId;
import org.apache.pulsar.client.api.Producer;
import org.apache.pulsar.client.api.ProducerAccessMode;
import org.apache.pulsar.client.api.PulsarClient;
import org.apache.pulsar.client.api.Schema;
import org.apache.pulsar.client.api.transaction.TxnID;
import org.awaitility.Awaitility;
import org.junit.jupiter.api.DisplayName;
import org.junit.jupiter.api.Test;

/**
 * A coordinator restores ten million kept outcomes (39063 block records of 256 outcomes) from
 * its state topic on a real broker. The restore runs in the background: the coordinator
 * serves new transactions right after a restart, and retries of restored transactions wait
 * for the restore and get their outcome. Times are printed, not asserted: the benchmark
 * ({@code benchmarks/run.sh}) is where they are measured.
 *
 * <p>A restore keeps no block past the highest sequence the coordinator's log has allocated,
 * so the broker runs with the test hooks' sequence floor: its log starts as if
 * {@code FIRST_SEQUENCE + OUTCOMES} transactions had been opened.
 */
@DisplayName("Restore of ten million kept outcomes")
class RestoreAtScaleIT {

    private static final String STATE_TOPIC = "persistent://pulsar/system/__terminated_txn_state_0";
    private static final int OUTCOMES = 10_000_000;
    private static final int BLOCK = 256;
    /** The block records the outcomes take: every block full but the last, half full. */
    private static final int BLOCK_RECORDS = (OUTCOMES + BLOCK - 1) / BLOCK;
    /** The first of its block; the log's sequence floor is set past the seeded ones. */
    private static final long FIRST_SEQUENCE = 1_000_000_000L;
    /** Block end times count seconds from 2020-01-01 UTC (OutcomeIndex.TIME_EPOCH_MILLIS). */
    private static final long TIME_EPOCH_MILLIS = 1_577_836_800_000L;
    private static final Pattern RESTORED = Pattern.compile(
            "restored (\\d+) kept transaction outcomes from (\\d+) state-topic records in (\\d+) ms");

    @Test
    void tenMillionOutcomesAreRestoredInTheBackgroundAndAnswerRetries() throws Exception {
        // 10 M outcomes take about 30 MB in the plugin, within the default memory bound (64 MB).
        try (LocalPulsar pulsar = LocalPulsar.startWithTestHooks("restore-10m", Map.of(),
                "-Xms1g -Xmx1g -Dtxnpreserver.testhooks.sequenceFloor=" + (FIRST_SEQUENCE + OUTCOMES))) {
            long writeStart = System.nanoTime();
            writeBlocks(pulsar);
            System.out.printf("wrote %d outcomes in %d block records in %.2f s%n", OUTCOMES, BLOCK_RECORDS,
                    (System.nanoTime() - writeStart) / 1e9);

            pulsar.stop();
            pulsar.start();
            long started = System.nanoTime();

            try (PulsarClient client = Txns.client(pulsar);
                 RetryingEndClient retry = RetryingEndClient.connect(pulsar.serviceUrl())) {
                TxnID fresh;
                try (Producer<String> producer = Txns.producer(client, Txns.uniqueTopic("after-restore"))) {
                    fresh = Txns.committed(client, producer, "fresh");
                }
                double freshSeconds = (System.nanoTime() - started) / 1e9;
                System.out.printf("a new transaction opened and committed %.2f s after the broker was healthy%n",
                        freshSeconds);
                assertThat(freshSeconds).as("new transactions do not wait for the restore").isLessThan(30);

                assertThat(retry.commit(new TxnID(0, FIRST_SEQUENCE))).isEqualTo(EndAnswer.SUCCESS);
                System.out.printf("a retry of a restored transaction answered %.2f s after the broker was healthy%n",
                        (System.nanoTime() - started) / 1e9);
                assertThat(retry.commit(new TxnID(0, FIRST_SEQUENCE + OUTCOMES / 2))).isEqualTo(EndAnswer.SUCCESS);
                assertThat(retry.abort(new TxnID(0, FIRST_SEQUENCE + OUTCOMES - 1)))
                        .isEqualTo(EndAnswer.REFUSED_AS_COMMITTED);
                assertThat(retry.commit(new TxnID(0, FIRST_SEQUENCE + OUTCOMES))).isEqualTo(EndAnswer.NOT_FOUND);
                assertThat(retry.commit(fresh)).isEqualTo(EndAnswer.SUCCESS);
                assertThat(fresh.getMostSigBits()).as("fresh, on the coordinator restored").isZero();
            }
            // What the restore read and kept, as the plugin reports it: every record written, each
            // outcome of them, none skipped.
            assertThat(BrokerMetrics.ofCoordinatorZero(pulsar, "pulsar_txn_preserver_restore_records"))
                    .as("records the restore read").isEqualTo(BLOCK_RECORDS);
            assertThat(BrokerMetrics.ofCoordinatorZero(pulsar, "pulsar_txn_preserver_restore_malformed_records"))
                    .as("records the restore skipped").isZero();
            // Gauges are refreshed every second.
            Awaitility.await("the kept outcomes: the restored ones and fresh").atMost(Duration.ofSeconds(15))
                    .pollInterval(Duration.ofSeconds(1)).untilAsserted(() -> assertThat(BrokerMetrics
                            .ofCoordinatorZero(pulsar, "pulsar_txn_preserver_kept_outcomes"))
                            .isEqualTo(OUTCOMES + 1));
            System.out.printf("restore of %d outcomes on a real broker (metric): %.2f s%n", OUTCOMES,
                    BrokerMetrics.ofCoordinatorZero(pulsar, "pulsar_txn_preserver_restore_duration_seconds"));
            Matcher logged = restoreLogLine(pulsar);
            System.out.println("broker log: " + logged.group());
            assertThat(Long.parseLong(logged.group(2))).as("records restored, as logged").isEqualTo(BLOCK_RECORDS);
            // fresh ended before the restore's merge or after it: kept then, or merged in later.
            assertThat(Long.parseLong(logged.group(1))).as("outcomes restored, as logged")
                    .isBetween((long) OUTCOMES, OUTCOMES + 1L);
        }
    }

    /** The last restore line of coordinator 0 in the broker's output or log files. */
    private static Matcher restoreLogLine(LocalPulsar pulsar) throws Exception {
        Matcher found = null;
        for (String line : pulsar.output().split("\n")) {
            Matcher matcher = RESTORED.matcher(line);
            if (line.contains("Coordinator 0:") && matcher.find()) {
                found = matcher;
            }
        }
        assertThat(found).as("the restore's line in the broker's log").isNotNull();
        return found;
    }

    /**
     * The outcomes as block records, all committed, no owner, as the plugin writes them; returns
     * once the broker has acknowledged every one.
     */
    private static void writeBlocks(LocalPulsar pulsar) throws Exception {
        int endSecond = (int) ((System.currentTimeMillis() - TIME_EPOCH_MILLIS) / 1000);
        List<CompletableFuture<MessageId>> sends = new ArrayList<>();
        try (PulsarAdmin admin = Txns.admin(pulsar);
             PulsarClient plain = PulsarClient.builder().serviceUrl(pulsar.serviceUrl()).build()) {
            try {
                admin.topics().createNonPartitionedTopic(STATE_TOPIC);
            } catch (PulsarAdminException.ConflictException alreadyThere) {
                // The coordinator opened it already; the fencing writer takes it over.
            }
            try (Producer<byte[]> writer = plain.newProducer(Schema.BYTES).topic(STATE_TOPIC)
                    .accessMode(ProducerAccessMode.ExclusiveWithFencing)
                    .enableBatching(true).batchingMaxMessages(1000).batchingMaxBytes(1024 * 1024)
                    .batchingMaxPublishDelay(5, TimeUnit.MILLISECONDS)
                    .maxPendingMessages(10_000).blockIfQueueFull(true).create()) {
                for (long sequence = FIRST_SEQUENCE; sequence < FIRST_SEQUENCE + OUTCOMES; sequence += BLOCK) {
                    int size = (int) Math.min(BLOCK, FIRST_SEQUENCE + OUTCOMES - sequence);
                    long[] kept = new long[4];
                    for (int offset = 0; offset < size; offset++) {
                        kept[offset >>> 6] |= 1L << (offset & 63);
                    }
                    long blockIndex = sequence >>> 8;
                    OutcomeBlockRecord.Builder block = OutcomeBlockRecord.newBuilder()
                            .setFormatVersion(BlockRecordCodec.FORMAT_VERSION).setCoordinatorId(0)
                            .setBlockIndex(blockIndex).setUniformOwnerRef(0);
                    for (int word = 0; word < 4; word++) {
                        block.addKept(kept[word]).addCommitted(kept[word]);
                    }
                    for (int offset = 0; offset < size; offset++) {
                        // The first end time whole, each next as the difference from the one before.
                        block.addEndSecondDeltas(offset == 0 ? endSecond : 0);
                    }
                    sends.add(writer.newMessage().key(BlockRecordCodec.key(blockIndex))
                            .value(block.build().toByteArray()).sendAsync());
                }
                writer.flush();
                // Each send's own answer: a record the broker refused would be missing from the restore.
                CompletableFuture.allOf(sends.toArray(CompletableFuture[]::new)).get(5, TimeUnit.MINUTES);
            }
        }
    }
}
