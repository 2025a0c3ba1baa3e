package io.github.txnpreserver.metrics;

import static io.github.txnpreserver.testing.Futures.await;
import static org.assertj.core.api.Assertions.assertThat;

import io.github.txnpreserver.testing.CoordinatorHarness;
import io.prometheus.client.Collector.MetricFamilySamples;
import io.prometheus.client.Collector.MetricFamilySamples.Sample;
import java.util.List;
import org.apache.pulsar.client.api.transaction.TxnID;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.DisplayName;
import org.junit.jupiter.api.Test;

@DisplayName("Preserver metrics")
class PreserverMetricsTest {

    private final CoordinatorHarness coordinator = CoordinatorHarness.start(2, 100);
    private final PreserverMetrics metrics = new PreserverMetrics("test-cluster", List.of(coordinator.preserver()));

    @AfterEach
    void close() {
        coordinator.close();
    }

    private double value(String sampleName, String... extraLabelValues) {
        for (MetricFamilySamples family : metrics.collect()) {
            for (Sample sample : family.samples) {
                if (sample.name.equals(sampleName) && sample.labelValues.subList(2, sample.labelValues.size())
                        .equals(List.of(extraLabelValues))) {
                    assertThat(sample.labelValues.subList(0, 2)).containsExactly("test-cluster", "0");
                    return sample.value;
                }
            }
        }
        throw new AssertionError("no sample " + sampleName + " " + List.of(extraLabelValues));
    }

    @Test
    void countKeptOutcomesAnsweredRetriesEvictionsAndWrites() {
        TxnID first = coordinator.open("alice");
        await(coordinator.commit(first, "alice"));
        TxnID second = coordinator.open("alice");
        await(coordinator.abort(second, "alice"));
        TxnID third = coordinator.open("alice");
        await(coordinator.commit(third, "alice"));

        await(coordinator.commit(third, "alice"));
        await(coordinator.abort(second, "alice"));
        double lookupsBefore = value("pulsar_txn_preserver_kept_lookups_total");
        coordinator.abort(third, "alice").exceptionally(refused -> null).join();

        assertThat(value("pulsar_txn_preserver_kept_outcomes")).isEqualTo(2);
        assertThat(value("pulsar_txn_preserver_clients")).isEqualTo(1);
        assertThat(value("pulsar_txn_preserver_retries_answered_total", "committed")).isEqualTo(1);
        assertThat(value("pulsar_txn_preserver_retries_answered_total", "aborted")).isEqualTo(1);
        assertThat(value("pulsar_txn_preserver_kept_lookups_total")).isGreaterThan(lookupsBefore);
        assertThat(value("pulsar_txn_preserver_evictions_total", "client")).isEqualTo(1);
        assertThat(value("pulsar_txn_preserver_evictions_total", "coordinator")).isZero();
        assertThat(value("pulsar_txn_preserver_state_write_latency_seconds_count")).isEqualTo(3);
        assertThat(value("pulsar_txn_preserver_state_write_latency_seconds_bucket", "+Inf")).isEqualTo(3);
        assertThat(value("pulsar_txn_preserver_state_write_failures_total")).isZero();
    }

    @Test
    void countersAreExportedWithoutTheTotalSuffixInTheirFamilyName() {
        assertThat(metrics.collect()).extracting(family -> family.name)
                .contains("pulsar_txn_preserver_retries_answered", "pulsar_txn_preserver_kept_outcomes");
    }
}
