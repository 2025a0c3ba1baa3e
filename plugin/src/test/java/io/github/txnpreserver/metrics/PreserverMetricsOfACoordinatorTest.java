package io.github.txnpreserver.metrics;

import static io.github.txnpreserver.testing.Futures.await;
import static org.assertj.core.api.Assertions.assertThat;

import io.github.txnpreserver.preserver.PreserverInspection;
import io.github.txnpreserver.testing.CoordinatorHarness;
import java.util.List;
import org.apache.pulsar.client.api.transaction.TxnID;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.DisplayName;
import org.junit.jupiter.api.Test;

/**
 * The metrics of a coordinator driven through its commit chain (the nested "of a coordinator"
 * of {@link PreserverMetricsTest}, split out because it needs {@link CoordinatorHarness}).
 *
 * <p>TODO (port to the one-thread preserver, once CoordinatorHarness is ported): the kept
 * outcomes, floor, clients, bytes, evictions and expirations are now the figures the
 * preserver's thread publishes each second and at the restore's end, so step the harness's
 * scheduler by a second before reading them. (Its other tests, which need no commit chain,
 * are in {@link PreserverMetricsTest}.)
 */
@DisplayName("Preserver metrics of a coordinator")
class PreserverMetricsOfACoordinatorTest {

    private final CoordinatorHarness coordinator = CoordinatorHarness.start(2, 100);
    private final PreserverMetrics metrics = new PreserverMetrics(PreserverMetricsTest.labels("test-cluster"),
            List.of(coordinator.preserver()));

    @AfterEach
    void close() {
        coordinator.close();
    }

    private double value(String sampleName, String... extraLabelValues) {
        PreserverInspection.currentFigures(coordinator.preserver()).join();
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
}
