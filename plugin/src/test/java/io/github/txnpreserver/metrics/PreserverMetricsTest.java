package io.github.txnpreserver.metrics;

import static org.assertj.core.api.Assertions.assertThat;

import io.github.txnpreserver.config.PreserverConfig;
import io.github.txnpreserver.preserver.OutcomeMemoryBudget;
import io.github.txnpreserver.preserver.TransactionMetadataPreserver;
import io.github.txnpreserver.preserver.kept.Outcome;
import io.github.txnpreserver.testing.Ends;
import io.github.txnpreserver.testing.InMemoryStateTopic;
import io.github.txnpreserver.testing.ManualScheduler;
import io.prometheus.client.Collector.MetricFamilySamples.Sample;
import io.prometheus.client.Collector.MetricFamilySamples;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import org.apache.pulsar.client.api.transaction.TxnID;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.DisplayName;
import org.junit.jupiter.api.Nested;
import org.junit.jupiter.api.Test;

/**
 * The exported metrics of preservers on a {@link ManualScheduler}: every task runs on the
 * test's thread when the test steps time, so nothing here waits. The figures of the kept
 * outcomes are what each preserver's thread publishes every second and at the restore's end,
 * read after a step of one second. (The metrics of a coordinator driven through its commit
 * chain: {@link PreserverMetricsOfACoordinatorTest}.)
 */
@DisplayName("Preserver metrics")
class PreserverMetricsTest {

    /** A whole second, so that stored end times (whole seconds, rounded up) are exact. */
    private static final long START_MILLIS = 1_700_000_000_000L;
    private static final Duration FIGURES_INTERVAL = Duration.ofSeconds(1);

    static double value(PreserverMetrics metrics, String coordinator, String sampleName,
                        String... extraLabelValues) {
        for (MetricFamilySamples family : metrics.collect()) {
            for (Sample sample : family.samples) {
                if (sample.name.equals(sampleName) && sample.labelValues.subList(2, sample.labelValues.size())
                        .equals(List.of(extraLabelValues))) {
                    assertThat(sample.labelValues.subList(0, 2)).containsExactly("test-cluster", coordinator);
                    return sample.value;
                }
            }
        }
        throw new AssertionError("no sample " + sampleName + " " + List.of(extraLabelValues));
    }

    static PreserverMetrics.BrokerLabels labels(String cluster) {
        return new PreserverMetrics.BrokerLabels(cluster, "1.2.3-SNAPSHOT", "0123456789ab", "4.0.8", 3L << 20, 1800.0);
    }

    /** The one sample of a broker-level family, with its labels. */
    static Sample brokerSample(List<MetricFamilySamples> families, String sampleName) {
        List<Sample> samples = families.stream().flatMap(family -> family.samples.stream())
                .filter(sample -> sample.name.equals(sampleName)).toList();
        assertThat(samples).as(sampleName).hasSize(1);
        return samples.get(0);
    }

    /**
     * Writes land at once, and the topic reads empty. Without positions: no block can go to
     * the cold tier, so the memory bound evicts, which the eviction figures count.
     */
    private static InMemoryStateTopic durableAtOnce() {
        return InMemoryStateTopic.keepingNothing().withoutPositions();
    }

    private static <T> T done(CompletableFuture<T> future) {
        assertThat(future).as("completed by the tasks run so far").isDone();
        return future.join();
    }

    /** One coordinator's preserver over a state topic whose writes land at once. */
    private static final class Preserver {
        final ManualScheduler scheduler = new ManualScheduler(START_MILLIS);
        final TransactionMetadataPreserver preserver;

        Preserver(long coordinator, int perClient, int floorCap, Duration persistTime, Duration expireCheck,
                  OutcomeMemoryBudget budget) {
            preserver = new TransactionMetadataPreserver(coordinator,
                    new PreserverConfig(perClient, floorCap, persistTime, expireCheck, Duration.ofSeconds(60)),
                    durableAtOnce(), scheduler, budget, Duration.ZERO);
        }

        /** Restored (from an empty topic) and started: its periodic tasks run as time is stepped. */
        Preserver opened() {
            CompletableFuture<Void> restored = preserver.startRestore(() -> Long.MAX_VALUE);
            scheduler.runReady();
            done(restored);
            preserver.start();
            return this;
        }

        /** Ends a transaction and runs its flush: its outcome is durable on return. */
        void preserve(long sequence, String owner) {
            CompletableFuture<Void> durable = Ends.preserve(preserver, new TxnID(preserver.coordinatorId(), sequence),
                    Outcome.COMMITTED, owner);
            scheduler.runReady();
            done(durable);
        }

        void close() {
            preserver.closeAsync();
            scheduler.runReady();
        }
    }

    @Nested
    @DisplayName("of a coordinator")
    class OfACoordinator {

        /** Kept an hour, checked every minute: stepping past it runs a few thousand tasks, not 300 000. */
        private final Preserver coordinator = new Preserver(0, 2, 100, Duration.ofHours(1),
                Duration.ofSeconds(60), new OutcomeMemoryBudget(1 << 20)).opened();
        private final PreserverMetrics metrics = new PreserverMetrics(labels("test-cluster"),
                List.of(coordinator.preserver));

        @AfterEach
        void close() {
            coordinator.close();
        }

        private double value(String sampleName, String... extraLabelValues) {
            return PreserverMetricsTest.value(metrics, "0", sampleName, extraLabelValues);
        }

        @Test
        void countExpirations() {
            coordinator.preserve(0, "alice");
            coordinator.scheduler.advance(FIGURES_INTERVAL);
            assertThat(value("pulsar_txn_preserver_kept_outcomes")).isEqualTo(1);

            // The expiry check runs every minute: the first one past the time-to-live drops it.
            coordinator.scheduler.advance(Duration.ofHours(1).plusSeconds(60));

            assertThat(value("pulsar_txn_preserver_expirations_total")).isEqualTo(1);
            assertThat(value("pulsar_txn_preserver_kept_outcomes")).isZero();
            assertThat(value("pulsar_txn_preserver_floor_outcomes")).isZero();
        }

        @Test
        void countersAreExportedWithoutTheTotalSuffixInTheirFamilyName() {
            assertThat(metrics.collect()).extracting(family -> family.name)
                    .contains("pulsar_txn_preserver_retries_answered", "pulsar_txn_preserver_evictions",
                            "pulsar_txn_preserver_kept_outcomes", "pulsar_txn_preserver_window_seconds",
                            "pulsar_txn_preserver_kept_bytes", "pulsar_txn_preserver_floor_outcomes");
        }
    }

    @Nested
    @DisplayName("of the limits")
    class OfTheLimits {

        private final List<Preserver> preservers = new ArrayList<>();

        @AfterEach
        void close() {
            preservers.forEach(Preserver::close);
        }

        private Preserver preserver(long coordinator, int perClient, int floorCap, OutcomeMemoryBudget budget) {
            Preserver preserver = new Preserver(coordinator, perClient, floorCap, Duration.ofHours(72),
                    Duration.ofSeconds(300), budget).opened();
            preservers.add(preserver);
            return preserver;
        }

        @Test
        void evictionsByTheMemoryBoundKeptBytesAndTheWindow() {
            OutcomeMemoryBudget budget = new OutcomeMemoryBudget(4096);
            Preserver bounded = preserver(1, 1, 100, budget);
            for (int i = 0; i < 20; i++) {
                bounded.preserve(256L * i, "alice");
            }
            bounded.scheduler.advance(Duration.ofSeconds(90));
            PreserverMetrics metrics = new PreserverMetrics(labels("test-cluster"), List.of(bounded.preserver));

            double kept = value(metrics, "1", "pulsar_txn_preserver_kept_outcomes");
            assertThat(kept).isPositive();
            assertThat(value(metrics, "1", "pulsar_txn_preserver_evictions_total", "memory")).isPositive()
                    .isEqualTo(20 - kept);
            assertThat(value(metrics, "1", "pulsar_txn_preserver_evictions_total", "floor")).isZero();
            assertThat(value(metrics, "1", "pulsar_txn_preserver_kept_bytes")).isPositive().isLessThanOrEqualTo(4096);
            assertThat(value(metrics, "1", "pulsar_txn_preserver_window_seconds")).as("ended 90 s ago")
                    .isEqualTo(90.0);
        }

        @Test
        void evictionsByTheFloorCap() {
            Preserver capped = preserver(2, 1, 2, new OutcomeMemoryBudget(1 << 20));
            long sequence = 0;
            for (String owner : List.of("alice", "bob", "carol")) {
                capped.scheduler.advance(Duration.ofSeconds(1));
                capped.preserve(sequence++, owner);
            }
            capped.scheduler.advance(FIGURES_INTERVAL);
            PreserverMetrics metrics = new PreserverMetrics(labels("test-cluster"), List.of(capped.preserver));

            assertThat(value(metrics, "2", "pulsar_txn_preserver_evictions_total", "floor")).isEqualTo(1);
            assertThat(value(metrics, "2", "pulsar_txn_preserver_evictions_total", "memory")).isZero();
            assertThat(value(metrics, "2", "pulsar_txn_preserver_floor_outcomes")).isEqualTo(2);
            assertThat(value(metrics, "2", "pulsar_txn_preserver_clients")).isEqualTo(2);
            assertThat(value(metrics, "2", "pulsar_txn_preserver_kept_outcomes")).as("all three, by time")
                    .isEqualTo(3);
        }
    }

    @Test
    void aBrokerExportsItsBoundItsRetentionAndItsBuildOnce() {
        Preserver first = new Preserver(0, 2, 100, Duration.ofHours(1), Duration.ofSeconds(60),
                new OutcomeMemoryBudget(1 << 20)).opened();
        Preserver second = new Preserver(1, 2, 100, Duration.ofHours(1), Duration.ofSeconds(60),
                new OutcomeMemoryBudget(1 << 20)).opened();
        try {
            List<MetricFamilySamples> families = new PreserverMetrics(labels("test-cluster"),
                    List.of(first.preserver, second.preserver)).collect();

            Sample bound = brokerSample(families, "pulsar_txn_preserver_memory_bound_bytes");
            assertThat(bound.labelNames).containsExactly("cluster");
            assertThat(bound.labelValues).containsExactly("test-cluster");
            assertThat(bound.value).isEqualTo(3L << 20);
            assertThat(brokerSample(families, "pulsar_txn_preserver_retention_seconds").value).isEqualTo(1800.0);
            Sample build = brokerSample(families, "pulsar_txn_preserver_build_info");
            assertThat(build.labelNames).containsExactly("cluster", "version", "commit", "pulsar_version");
            assertThat(build.labelValues).containsExactly("test-cluster", "1.2.3-SNAPSHOT", "0123456789ab", "4.0.8");
            assertThat(build.value).isEqualTo(1);
        } finally {
            first.close();
            second.close();
        }
    }

    /** Two brokers of one JVM with the same cluster and build: a repeated series would make the whole scrape fail. */
    @Test
    void twoBrokersOfOneJvmWithTheSameBuildExportItsSeriesOnce() {
        Preserver first = new Preserver(0, 2, 100, Duration.ofHours(72), Duration.ofSeconds(300),
                new OutcomeMemoryBudget(1 << 20)).opened();
        Preserver second = new Preserver(1, 2, 100, Duration.ofHours(72), Duration.ofSeconds(300),
                new OutcomeMemoryBudget(1 << 20)).opened();
        Object brokerA = new Object();
        Object brokerB = new Object();
        try {
            PreserverMetrics.register(brokerA, labels("one-cluster"), List.of(first.preserver));
            PreserverMetrics.register(brokerB, labels("one-cluster"), List.of(second.preserver));
            List<MetricFamilySamples> families = java.util.Collections.list(
                    io.prometheus.client.CollectorRegistry.defaultRegistry.metricFamilySamples());

            assertThat(brokerSample(families, "pulsar_txn_preserver_build_info").labelValues)
                    .containsExactly("one-cluster", "1.2.3-SNAPSHOT", "0123456789ab", "4.0.8");
            assertThat(families.stream().flatMap(family -> family.samples.stream())
                    .filter(sample -> sample.name.equals("pulsar_txn_preserver_kept_outcomes")))
                    .as("each broker's coordinator").hasSize(2);
        } finally {
            PreserverMetrics.unregister(brokerA);
            PreserverMetrics.unregister(brokerB);
            first.close();
            second.close();
        }
    }

    /** The duration counts from the restore's start: its failed first read and the wait before the next included. */
    @Test
    void aRestoreInProgressIsExportedWithItsTimeSoFarAndThenItsDuration() {
        ManualScheduler scheduler = new ManualScheduler(START_MILLIS);
        InMemoryStateTopic topic = durableAtOnce();
        topic.failNextReads(1);
        topic.holdReads();
        TransactionMetadataPreserver preserver = new TransactionMetadataPreserver(3,
                new PreserverConfig(2, 100, Duration.ofHours(1), Duration.ofSeconds(60), Duration.ofSeconds(60)),
                topic, scheduler, new OutcomeMemoryBudget(1 << 20), Duration.ZERO);
        PreserverMetrics metrics = new PreserverMetrics(labels("test-cluster"), List.of(preserver));
        try {
            assertThat(value(metrics, "3", "pulsar_txn_preserver_restore_in_progress")).as("not begun").isZero();

            CompletableFuture<Void> restored = preserver.startRestore(() -> Long.MAX_VALUE);
            scheduler.runReady();
            scheduler.advance(Duration.ofSeconds(7));

            assertThat(value(metrics, "3", "pulsar_txn_preserver_restore_in_progress")).isEqualTo(1);
            assertThat(value(metrics, "3", "pulsar_txn_preserver_restore_duration_seconds")).as("so far")
                    .isEqualTo(7.0);

            assertThat(topic.readCount()).as("read again after the failed read").isEqualTo(2);
            assertThat(value(metrics, "3", "pulsar_txn_preserver_restore_end_time_seconds")).as("none ended yet")
                    .isZero();

            topic.releaseReads();
            scheduler.runReady();
            done(restored);
            scheduler.advance(Duration.ofSeconds(30));

            assertThat(value(metrics, "3", "pulsar_txn_preserver_restore_in_progress")).isZero();
            assertThat(value(metrics, "3", "pulsar_txn_preserver_restore_duration_seconds")).as("its duration")
                    .isEqualTo(7.0);
            assertThat(value(metrics, "3", "pulsar_txn_preserver_restore_end_time_seconds"))
                    .isEqualTo((START_MILLIS + 7_000) / 1000.0);
            assertThat(value(metrics, "3", "pulsar_txn_preserver_restore_malformed_records")).isZero();
        } finally {
            preserver.closeAsync();
            scheduler.runReady();
        }
    }

    /**
     * A coordinator opened long after the broker started (an ownership move): its restore's
     * time so far and its duration count from its own start, not from the scheduler's.
     */
    @Test
    void aRestoreThatStartsLateIsTimedFromItsOwnStart() {
        ManualScheduler scheduler = new ManualScheduler(START_MILLIS);
        InMemoryStateTopic topic = durableAtOnce();
        TransactionMetadataPreserver preserver = new TransactionMetadataPreserver(3,
                new PreserverConfig(2, 100, Duration.ofHours(1), Duration.ofSeconds(60), Duration.ofSeconds(60)),
                topic, scheduler, new OutcomeMemoryBudget(1 << 20), Duration.ZERO);
        PreserverMetrics metrics = new PreserverMetrics(labels("test-cluster"), List.of(preserver));
        try {
            scheduler.advance(Duration.ofMinutes(5));
            topic.holdReads();

            CompletableFuture<Void> restored = preserver.startRestore(() -> Long.MAX_VALUE);
            scheduler.runReady();
            scheduler.advance(Duration.ofSeconds(7));

            assertThat(value(metrics, "3", "pulsar_txn_preserver_restore_duration_seconds")).as("so far")
                    .isEqualTo(7.0);
            topic.releaseReads();
            scheduler.runReady();
            done(restored);
            scheduler.advance(FIGURES_INTERVAL);
            assertThat(value(metrics, "3", "pulsar_txn_preserver_restore_duration_seconds")).as("its duration")
                    .isEqualTo(7.0);
        } finally {
            preserver.closeAsync();
            scheduler.runReady();
        }
    }

    @Test
    void endsWaitingForTheStateTopicAgainstTheCountPastWhichTheyAreRefused() {
        ManualScheduler scheduler = new ManualScheduler(START_MILLIS);
        InMemoryStateTopic topic = durableAtOnce();
        // Never released: no end becomes durable.
        topic.holdWrites();
        TransactionMetadataPreserver preserver = new TransactionMetadataPreserver(4,
                new PreserverConfig(2, 100, Duration.ofHours(1), Duration.ofSeconds(60), Duration.ofSeconds(60)),
                topic, scheduler, new OutcomeMemoryBudget(1 << 20), Duration.ZERO);
        PreserverMetrics metrics = new PreserverMetrics(labels("test-cluster"), List.of(preserver));
        try {
            CompletableFuture<Void> restored = preserver.startRestore(() -> Long.MAX_VALUE);
            scheduler.runReady();
            done(restored);
            preserver.start();
            for (long sequence = 0; sequence < 3; sequence++) {
                Ends.preserve(preserver, new TxnID(4, sequence), Outcome.COMMITTED, "alice");
            }
            scheduler.advance(Duration.ofSeconds(1));

            assertThat(value(metrics, "4", "pulsar_txn_preserver_ends_waiting")).isEqualTo(3);
            assertThat(value(metrics, "4", "pulsar_txn_preserver_ends_waiting_limit"))
                    .isEqualTo(TransactionMetadataPreserver.MAX_UNDURABLE_ENDS);
        } finally {
            preserver.closeAsync();
            scheduler.runReady();
        }
    }

    /** Issue 14: the brokers of one JVM share the default registry; each exports its own, and one leaving keeps the others. */
    @Test
    void theBrokersOfOneJvmEachExportTheirCoordinatorsAndOneLeavingKeepsTheOthers() {
        Preserver first = new Preserver(0, 2, 100, Duration.ofHours(72), Duration.ofSeconds(300),
                new OutcomeMemoryBudget(1 << 20)).opened();
        Preserver second = new Preserver(0, 2, 100, Duration.ofHours(72), Duration.ofSeconds(300),
                new OutcomeMemoryBudget(1 << 20)).opened();
        Object brokerA = new Object();
        Object brokerB = new Object();
        try {
            PreserverMetrics.register(brokerA, labels("cluster-a"), List.of(first.preserver));
            PreserverMetrics.register(brokerB, labels("cluster-b"), List.of(second.preserver));

            assertThat(exportedClusters()).containsExactlyInAnyOrder("cluster-a", "cluster-b");
            PreserverMetrics.unregister(brokerA);
            assertThat(exportedClusters()).containsExactly("cluster-b");
            PreserverMetrics.unregister(brokerB);
            assertThat(exportedClusters()).isEmpty();
        } finally {
            PreserverMetrics.unregister(brokerA);
            PreserverMetrics.unregister(brokerB);
            first.close();
            second.close();
        }
    }

    private static List<String> exportedClusters() {
        List<String> clusters = new ArrayList<>();
        java.util.Collections.list(io.prometheus.client.CollectorRegistry.defaultRegistry.metricFamilySamples())
                .stream()
                .filter(family -> family.name.equals("pulsar_txn_preserver_kept_outcomes"))
                .flatMap(family -> family.samples.stream())
                .forEach(sample -> clusters.add(sample.labelValues.get(0)));
        return clusters;
    }
}
