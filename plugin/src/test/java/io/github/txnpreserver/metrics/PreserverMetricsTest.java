package io.github.txnpreserver.metrics;

import static io.github.txnpreserver.testing.Futures.await;
import static org.assertj.core.api.Assertions.assertThat;

import io.github.txnpreserver.config.PreserverConfig;
import io.github.txnpreserver.preserver.OutcomeMemoryBudget;
import io.github.txnpreserver.preserver.Outcome;
import io.github.txnpreserver.preserver.TransactionMetadataPreserver;
import io.github.txnpreserver.testing.CallLog;
import io.github.txnpreserver.testing.CoordinatorHarness;
import io.github.txnpreserver.testing.InMemoryStateTopic;
import io.github.txnpreserver.testing.MutableClock;
import io.prometheus.client.Collector.MetricFamilySamples;
import io.prometheus.client.Collector.MetricFamilySamples.Sample;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.Executors;
import java.util.concurrent.ScheduledExecutorService;
import org.apache.pulsar.client.api.transaction.TxnID;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.DisplayName;
import org.junit.jupiter.api.Nested;
import org.junit.jupiter.api.Test;

@DisplayName("Preserver metrics")
class PreserverMetricsTest {

    private static double value(PreserverMetrics metrics, String coordinator, String sampleName,
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

    @Nested
    @DisplayName("of a coordinator")
    class OfACoordinator {

        private final CoordinatorHarness coordinator = CoordinatorHarness.start(2, 100);
        private final PreserverMetrics metrics = new PreserverMetrics("test-cluster",
                List.of(coordinator.preserver()));

        @AfterEach
        void close() {
            coordinator.close();
        }

        private double value(String sampleName, String... extraLabelValues) {
            return PreserverMetricsTest.value(metrics, "0", sampleName, extraLabelValues);
        }

        @Test
        void countKeptOutcomesAnsweredRetriesAndWrites() {
            TxnID first = coordinator.open("alice");
            await(coordinator.commit(first, "alice"));
            coordinator.awaitRecordDurable(first);
            TxnID second = coordinator.open("alice");
            await(coordinator.abort(second, "alice"));
            coordinator.awaitRecordDurable(second);
            TxnID third = coordinator.open("alice");
            await(coordinator.commit(third, "alice"));
            coordinator.awaitRecordDurable(third);

            await(coordinator.commit(third, "alice"));
            await(coordinator.abort(second, "alice"));
            double lookupsBefore = value("pulsar_txn_preserver_kept_lookups_total");
            coordinator.abort(third, "alice").exceptionally(refused -> null).join();

            assertThat(value("pulsar_txn_preserver_kept_outcomes")).as("kept by time, not by count").isEqualTo(3);
            assertThat(value("pulsar_txn_preserver_floor_outcomes")).as("alice's newest 2").isEqualTo(2);
            assertThat(value("pulsar_txn_preserver_clients")).isEqualTo(1);
            assertThat(value("pulsar_txn_preserver_retries_answered_total", "committed")).isEqualTo(1);
            assertThat(value("pulsar_txn_preserver_retries_answered_total", "aborted")).isEqualTo(1);
            assertThat(value("pulsar_txn_preserver_kept_lookups_total")).isGreaterThan(lookupsBefore);
            assertThat(value("pulsar_txn_preserver_evictions_total", "memory")).isZero();
            assertThat(value("pulsar_txn_preserver_evictions_total", "floor")).isZero();
            assertThat(value("pulsar_txn_preserver_kept_bytes")).isEqualTo(coordinator.preserver().keptBytes())
                    .isPositive();
            assertThat(value("pulsar_txn_preserver_state_write_latency_seconds_count")).as("one flush per end, each awaited before the next")
                    .isEqualTo(3);
            assertThat(value("pulsar_txn_preserver_state_write_latency_seconds_bucket", "+Inf")).isEqualTo(3);
            assertThat(value("pulsar_txn_preserver_state_write_failures_total")).isZero();
        }

        @Test
        void countExpirations() {
            TxnID txn = coordinator.open("alice");
            await(coordinator.commit(txn, "alice"));

            coordinator.clock().advance(Duration.ofHours(72));
            coordinator.preserver().expire();

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

        private final List<ScheduledExecutorService> executors = new ArrayList<>();
        /** Now, to the second: the window is measured against the wall clock. */
        private final MutableClock clock = new MutableClock(System.currentTimeMillis() / 1000 * 1000);

        @AfterEach
        void close() {
            executors.forEach(ScheduledExecutorService::shutdownNow);
        }

        private TransactionMetadataPreserver preserver(long coordinator, int perClient, int floorCap,
                                                       OutcomeMemoryBudget budget) {
            ScheduledExecutorService executor = Executors.newSingleThreadScheduledExecutor();
            executors.add(executor);
            TransactionMetadataPreserver preserver = new TransactionMetadataPreserver(coordinator,
                    new PreserverConfig(perClient, floorCap, Duration.ofHours(72), Duration.ofSeconds(300),
                            Duration.ofSeconds(60)), new InMemoryStateTopic(new CallLog()), clock, executor, budget,
                    Duration.ZERO);
            await(preserver.restore());
            return preserver;
        }

        @Test
        void evictionsByTheMemoryBoundKeptBytesAndTheWindow() {
            OutcomeMemoryBudget budget = new OutcomeMemoryBudget(4096);
            TransactionMetadataPreserver bounded = preserver(1, 1, 100, budget);
            clock.advance(Duration.ofSeconds(-90));
            for (int i = 0; i < 20; i++) {
                await(bounded.preserve(new TxnID(1, 256L * i), Outcome.COMMITTED, "alice"));
            }
            clock.advance(Duration.ofSeconds(90));
            PreserverMetrics metrics = new PreserverMetrics("test-cluster", List.of(bounded));

            double kept = value(metrics, "1", "pulsar_txn_preserver_kept_outcomes");
            assertThat(kept).isPositive();
            assertThat(value(metrics, "1", "pulsar_txn_preserver_evictions_total", "memory")).isPositive()
                    .isEqualTo(20 - kept);
            assertThat(value(metrics, "1", "pulsar_txn_preserver_evictions_total", "floor")).isZero();
            assertThat(value(metrics, "1", "pulsar_txn_preserver_kept_bytes")).isPositive().isLessThanOrEqualTo(4096);
            assertThat(value(metrics, "1", "pulsar_txn_preserver_window_seconds")).as("ended 90 s ago")
                    .isBetween(90.0, 90.0 + 60);
        }

        @Test
        void evictionsByTheFloorCap() {
            TransactionMetadataPreserver capped = preserver(2, 1, 2, new OutcomeMemoryBudget(1 << 20));
            for (String owner : List.of("alice", "bob", "carol")) {
                clock.advance(Duration.ofSeconds(1));
                await(capped.preserve(new TxnID(2, capped.keptCount()), Outcome.COMMITTED, owner));
            }
            PreserverMetrics metrics = new PreserverMetrics("test-cluster", List.of(capped));

            assertThat(value(metrics, "2", "pulsar_txn_preserver_evictions_total", "floor")).isEqualTo(1);
            assertThat(value(metrics, "2", "pulsar_txn_preserver_evictions_total", "memory")).isZero();
            assertThat(value(metrics, "2", "pulsar_txn_preserver_floor_outcomes")).isEqualTo(2);
            assertThat(value(metrics, "2", "pulsar_txn_preserver_clients")).isEqualTo(2);
            assertThat(value(metrics, "2", "pulsar_txn_preserver_kept_outcomes")).as("all three, by time")
                    .isEqualTo(3);
        }
    }

    /** Issue 14: the brokers of one JVM share the default registry; each exports its own, and one leaving keeps the others. */
    @Test
    void theBrokersOfOneJvmEachExportTheirCoordinatorsAndOneLeavingKeepsTheOthers() {
        CoordinatorHarness first = CoordinatorHarness.start(2, 100);
        CoordinatorHarness second = CoordinatorHarness.start(2, 100);
        Object brokerA = new Object();
        Object brokerB = new Object();
        try {
            PreserverMetrics.register(brokerA, "cluster-a", List.of(first.preserver()));
            PreserverMetrics.register(brokerB, "cluster-b", List.of(second.preserver()));

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
