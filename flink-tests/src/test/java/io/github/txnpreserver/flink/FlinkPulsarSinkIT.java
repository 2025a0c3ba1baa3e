package io.github.txnpreserver.flink;

import static org.assertj.core.api.Assertions.assertThat;

import io.github.txnpreserver.it.AdminHttp;
import io.github.txnpreserver.it.LocalPulsar;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicLong;
import org.apache.flink.api.common.eventtime.WatermarkStrategy;
import org.apache.flink.api.common.functions.MapFunction;
import org.apache.flink.api.common.restartstrategy.RestartStrategies;
import org.apache.flink.api.common.serialization.SimpleStringSchema;
import org.apache.flink.api.common.time.Time;
import org.apache.flink.api.connector.source.lib.NumberSequenceSource;
import org.apache.flink.api.common.state.CheckpointListener;
import org.apache.flink.connector.base.DeliveryGuarantee;
import org.apache.flink.runtime.state.FunctionInitializationContext;
import org.apache.flink.runtime.state.FunctionSnapshotContext;
import org.apache.flink.streaming.api.checkpoint.CheckpointedFunction;
import org.apache.flink.connector.pulsar.sink.PulsarSink;
import org.apache.flink.connector.pulsar.sink.PulsarSinkOptions;
import org.apache.flink.streaming.api.environment.StreamExecutionEnvironment;
import org.apache.pulsar.PulsarVersion;
import org.apache.pulsar.client.api.Consumer;
import org.apache.pulsar.client.api.Message;
import org.apache.pulsar.client.api.PulsarClient;
import org.apache.pulsar.client.api.Schema;
import org.apache.pulsar.client.api.SubscriptionInitialPosition;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

/**
 * Flink's own {@code PulsarSink} (flink-connector-pulsar 4.1.0-1.18, Flink 1.18.1, a local
 * MiniCluster, the connector's pulsar-client-all 3.0.0) with {@link DeliveryGuarantee#EXACTLY_ONCE}
 * against real brokers of the official 4.0.8 distribution.
 *
 * <p>What Flink's committer ({@code PulsarCommitter}) does with each answer: success ends the
 * committable; {@code TransactionNotFound} on a first try is a "known failure" (logged at
 * error, the committable dropped), on a retry "committed"; {@code InvalidTxnStatus} is taken
 * as "already committed" whatever the status.
 */
class FlinkPulsarSinkIT {

    private static final int RECORDS = 400;
    /** Per record: the job runs about 8 s, several checkpoints. */
    private static final long RECORD_DELAY_MILLIS = 20;
    /**
     * The transaction the failed attempt was writing is never ended by Flink: it stays open
     * until the coordinator aborts it on timeout, and until then a consumer reads nothing
     * written after it (Pulsar's transaction buffer holds reads at the first open
     * transaction). Flink's default is 3 h; the tests use 15 s.
     */
    private static final Duration DANGLING_TRANSACTION_TIMEOUT = Duration.ofSeconds(15);
    /** What PulsarCommitter logs for a first commit answered TransactionNotFound (then drops it). */
    private static final String COMMITTER_NOT_FOUND = "because it's not found on Pulsar broker";
    /** What PulsarCommitter logs for InvalidTxnStatus (then takes it as committed). */
    private static final String COMMITTER_INVALID_STATE = "because it's in an invalid state";

    @BeforeAll
    static void runsWithTheConnectorsClient() {
        assertThat(PulsarVersion.getVersion()).isEqualTo("3.0.0");
    }

    @Test
    void aRestoredCheckpointsCommitsAreRetriedAndAnsweredSuccessAndEveryRecordLandsOnce() throws Exception {
        try (LocalPulsar pulsar = LocalPulsar.start("flink-restore", Map.of("transactionMetaPersistCount", "100"))) {
            String topic = "persistent://public/default/flink-restore-" + System.nanoTime();
            FailOnceAfterACommit.reset();

            long logStart = logLength();
            runJob(pulsar, topic, DANGLING_TRANSACTION_TIMEOUT, Fault.FAIL_AFTER_A_COMMIT);

            assertThat(FailOnceAfterACommit.FAILED.get()).as("the job failed once after a committed checkpoint")
                    .isTrue();
            assertThat(awaitAll(pulsar, topic)).as("every record exactly once").hasSize(RECORDS)
                    .containsExactlyInAnyOrderElementsOf(expected());
            assertThat(logSince(logStart)).as("Flink's committer")
                    .doesNotContain(COMMITTER_NOT_FOUND).doesNotContain(COMMITTER_INVALID_STATE);
            // The restored checkpoint's transactions were committed again: the coordinator
            // answered those retries success from their kept outcomes (stock: TransactionNotFound).
            assertThat(metric(pulsar, "pulsar_txn_preserver_retries_answered_total", "outcome=\"committed\""))
                    .as("retried commits answered success").isGreaterThanOrEqualTo(1);
        }
    }

    @Test
    void onStockPulsarTheSameRestoreFinishesWithEveryRecordOnceButTheCommitterIsToldNotFound() throws Exception {
        try (LocalPulsar pulsar = LocalPulsar.startStock("flink-restore-stock",
                Map.of("transactionCoordinatorEnabled", "true"))) {
            String topic = "persistent://public/default/flink-restore-stock-" + System.nanoTime();
            FailOnceAfterACommit.reset();

            long logStart = logLength();
            runJob(pulsar, topic, DANGLING_TRANSACTION_TIMEOUT, Fault.FAIL_AFTER_A_COMMIT);

            assertThat(FailOnceAfterACommit.FAILED.get()).isTrue();
            // Flink drops the committable as a known failure; its data was committed the first time.
            assertThat(awaitAll(pulsar, topic)).hasSize(RECORDS).containsExactlyInAnyOrderElementsOf(expected());
            assertThat(logSince(logStart)).as("Flink's committer, told TransactionNotFound")
                    .contains(COMMITTER_NOT_FOUND);
        }
    }

    @Test
    void aTransactionTheCoordinatorAbortedOnTimeoutIsLostSilentlyWithThePluginToo() throws Exception {
        try (LocalPulsar pulsar = LocalPulsar.start("flink-timeout", Map.of("transactionMetaPersistCount", "100"))) {
            String topic = "persistent://public/default/flink-timeout-" + System.nanoTime();
            FailOnceAfterACommit.reset();

            // Transactions time out after 5 s (each lives about 2 s, one checkpoint interval);
            // the first checkpoint with records takes 8 s to snapshot, after the sink has
            // handed its transaction to the committer: the coordinator aborts that
            // transaction before Flink commits it.
            long logStart = logLength();
            runJob(pulsar, topic, Duration.ofSeconds(5), Fault.SLOW_FIRST_SNAPSHOT);

            assertThat(FailOnceAfterACommit.RESTORED.get()).as("the job ran once, without a restore").isFalse();
            List<String> read = readAll(pulsar, topic);
            // The timed-out transactions' records are lost, the others landed once each.
            assertThat(read).as("records of the committed transactions").isNotEmpty().doesNotHaveDuplicates()
                    .isSubsetOf(expected()).hasSizeLessThan(RECORDS);
            // Flink was told the truth, and took it for "already committed"; the broker counted it.
            assertThat(logSince(logStart)).contains(COMMITTER_INVALID_STATE)
                    .contains("was aborted on its timeout at");
            assertThat(metric(pulsar, "pulsar_txn_timeout_total", "")).as("the coordinator's timeout-aborts")
                    .isGreaterThanOrEqualTo(1);
            assertThat(metric(pulsar, "pulsar_txn_preserver_commits_after_timeout_abort_total", ""))
                    .as("the commits the broker refused because it had aborted them on their timeout")
                    .isGreaterThanOrEqualTo(1);
            assertThat(pulsar.output()).as("the broker's warning").contains("refused: the coordinator aborted it at");
            System.out.printf("timed-out transactions: the job finished, %d of %d records landed%n", read.size(),
                    RECORDS);
        }
    }

    private enum Fault { FAIL_AFTER_A_COMMIT, SLOW_FIRST_SNAPSHOT }

    private static void runJob(LocalPulsar pulsar, String topic, Duration transactionTimeout, Fault fault)
            throws Exception {
        StreamExecutionEnvironment env = StreamExecutionEnvironment.getExecutionEnvironment();
        env.setParallelism(1);
        // 2 s between checkpoints: the failure, 0.5 s after a checkpoint's completion was
        // notified (and its transactions committed), comes before the next one completes, so
        // the restore is from that checkpoint.
        env.enableCheckpointing(2000);
        env.setRestartStrategy(RestartStrategies.fixedDelayRestart(3, Time.seconds(1)));
        PulsarSink<String> sink = PulsarSink.builder()
                .setServiceUrl(pulsar.serviceUrl())
                .setAdminUrl(pulsar.httpUrl())
                .setProducerName("flink-it-%s")
                .setTopics(topic)
                .setSerializationSchema(new SimpleStringSchema())
                .setDeliveryGuarantee(DeliveryGuarantee.EXACTLY_ONCE)
                .setConfig(PulsarSinkOptions.PULSAR_WRITE_TRANSACTION_TIMEOUT, transactionTimeout.toMillis())
                .build();
        env.fromSource(new NumberSequenceSource(0, RECORDS - 1), WatermarkStrategy.noWatermarks(), "numbers")
                .map(new Slowly())
                .map(new FailOnceAfterACommit(fault))
                .sinkTo(sink);
        env.execute("pulsar-sink-" + topic);
    }

    /** Spreads the records over several checkpoints. */
    private static final class Slowly implements MapFunction<Long, Long> {
        @Override
        public Long map(Long value) throws InterruptedException {
            Thread.sleep(RECORD_DELAY_MILLIS);
            return value;
        }
    }

    /**
     * Fails the job once, 0.5 s after the first checkpoint that holds records completed: by
     * then the sink's committer has committed that checkpoint's transactions (it commits on the
     * same notification). Flink restores that checkpoint, whose state still lists them, and
     * commits them again. Static state: the operator is created anew at the restore.
     */
    private static final class FailOnceAfterACommit implements MapFunction<Long, String>, CheckpointListener,
            CheckpointedFunction {
        static final AtomicBoolean FAILED = new AtomicBoolean();
        static final AtomicBoolean SLOWED = new AtomicBoolean();
        static final AtomicBoolean RESTORED = new AtomicBoolean();
        static final AtomicLong COMPLETED_AT = new AtomicLong();
        static final AtomicLong SEEN = new AtomicLong();
        private final Fault fault;

        FailOnceAfterACommit(Fault fault) {
            this.fault = fault;
        }

        static void reset() {
            FAILED.set(false);
            SLOWED.set(false);
            RESTORED.set(false);
            COMPLETED_AT.set(0);
            SEEN.set(0);
        }

        /**
         * Runs after every operator's pre-barrier step, so after the sink has handed its
         * transaction over for the commit that follows the checkpoint's completion.
         */
        @Override
        public void snapshotState(FunctionSnapshotContext context) throws InterruptedException {
            if (fault == Fault.SLOW_FIRST_SNAPSHOT && SEEN.get() > 0 && SLOWED.compareAndSet(false, true)) {
                Thread.sleep(8_000);
            }
        }

        @Override
        public void initializeState(FunctionInitializationContext context) {
            if (context.isRestored()) {
                RESTORED.set(true);
            }
        }

        @Override
        public String map(Long value) {
            SEEN.incrementAndGet();
            long completedAt = COMPLETED_AT.get();
            if (fault == Fault.FAIL_AFTER_A_COMMIT && completedAt > 0 && System.currentTimeMillis() > completedAt + 500
                    && FAILED.compareAndSet(false, true)) {
                throw new IllegalStateException("injected failure after a committed checkpoint");
            }
            return Long.toString(value);
        }

        @Override
        public void notifyCheckpointComplete(long checkpointId) {
            if (SEEN.get() > 0) {
                COMPLETED_AT.compareAndSet(0, System.currentTimeMillis());
            }
        }
    }

    private static List<String> expected() {
        List<String> values = new ArrayList<>();
        for (int i = 0; i < RECORDS; i++) {
            values.add(Integer.toString(i));
        }
        return values;
    }

    private static long logLength() throws java.io.IOException {
        java.nio.file.Path log = java.nio.file.Path.of(System.getProperty("txnpreserver.flink.log"));
        return java.nio.file.Files.exists(log) ? java.nio.file.Files.size(log) : 0;
    }

    /** The test JVM's log lines written since {@code offset} (all of them go to one file). */
    private static String logSince(long offset) throws java.io.IOException {
        byte[] all = java.nio.file.Files.readAllBytes(java.nio.file.Path.of(System.getProperty("txnpreserver.flink.log")));
        return new String(all, (int) Math.min(offset, all.length), all.length - (int) Math.min(offset, all.length),
                java.nio.charset.StandardCharsets.UTF_8);
    }

    /** What a consumer reads once the failed attempt's transaction has timed out (at most a minute on). */
    private static List<String> awaitAll(LocalPulsar pulsar, String topic) throws Exception {
        long deadline = System.nanoTime() + TimeUnit.MINUTES.toNanos(1);
        List<String> read = readAll(pulsar, topic);
        while (read.size() < RECORDS && System.nanoTime() < deadline) {
            Thread.sleep(2_000);
            read = readAll(pulsar, topic);
        }
        return read;
    }

    private static List<String> readAll(LocalPulsar pulsar, String topic) throws Exception {
        List<String> values = new ArrayList<>();
        try (PulsarClient client = PulsarClient.builder().serviceUrl(pulsar.serviceUrl()).build();
             // The sink writes bytes (Flink's SimpleStringSchema): the topic's schema is BYTES.
             Consumer<byte[]> consumer = client.newConsumer(Schema.BYTES).topic(topic)
                     .subscriptionName("check-" + System.nanoTime())
                     .subscriptionInitialPosition(SubscriptionInitialPosition.Earliest).subscribe()) {
            Message<byte[]> message;
            while ((message = consumer.receive(5, TimeUnit.SECONDS)) != null) {
                values.add(new String(message.getValue(), java.nio.charset.StandardCharsets.UTF_8));
                consumer.acknowledge(message);
            }
        }
        return values;
    }

    /** The sum of a metric's series in the broker's /metrics, those whose labels contain {@code labelPart}. */
    private static double metric(LocalPulsar pulsar, String name, String labelPart) {
        String metrics = AdminHttp.get(pulsar.httpUrl(), "/metrics/", null);
        assertThat(metrics).as("the broker's /metrics").isNotNull();
        double sum = 0;
        for (String line : metrics.split("\n")) {
            if (line.startsWith(name + "{") && line.contains(labelPart)) {
                sum += Double.parseDouble(line.substring(line.lastIndexOf(' ') + 1));
            }
        }
        return sum;
    }
}
