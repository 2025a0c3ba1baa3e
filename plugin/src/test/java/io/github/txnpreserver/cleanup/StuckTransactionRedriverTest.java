package io.github.txnpreserver.cleanup;

import static io.github.txnpreserver.testing.Futures.await;
import static io.github.txnpreserver.testing.Futures.failureOf;
import static org.assertj.core.api.Assertions.assertThat;
import static org.awaitility.Awaitility.await;

import io.github.txnpreserver.preserver.Outcome;
import io.github.txnpreserver.preserver.TransactionMetadataPreserver;
import io.github.txnpreserver.resolution.Resolution;
import io.github.txnpreserver.testing.CoordinatorHarness;
import java.time.Duration;
import org.apache.pulsar.client.api.transaction.TxnID;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.DisplayName;
import org.junit.jupiter.api.Test;

@DisplayName("The background re-drive of stuck transactions")
class StuckTransactionRedriverTest {

    private static final String PARTITION = "persistent://public/default/stuck-partition-0";
    private static final Duration STUCK_AFTER = Duration.ofSeconds(60);

    private final CoordinatorHarness coordinator = CoordinatorHarness.start(10, 100);
    private final StuckTransactionRedriver redriver = new StuckTransactionRedriver(CoordinatorHarness.TC_ID,
            coordinator.store()::finishingTransactions, coordinator.store()::isEndActive,
            coordinator::endThroughBroker, coordinator.clock(), STUCK_AFTER, coordinator.preserver().stats(),
            Runnable::run);

    @AfterEach
    void close() {
        coordinator.close();
    }

    private Resolution resolutionOf(TxnID txn) {
        return coordinator.store().resolver().resolve(txn).resolution();
    }

    /** A committing transaction whose partition refused its marker: the broker gave up on it. */
    private TxnID stuckCommit() {
        TxnID txn = coordinator.open("alice");
        coordinator.produce(txn, PARTITION);
        coordinator.refuseMarkers(PARTITION);
        assertThat(failureOf(coordinator.commit(txn, "alice"))).hasMessageContaining("refused");
        assertThat(resolutionOf(txn)).isEqualTo(Resolution.FINISHING);
        return txn;
    }

    @Test
    void finishesAStuckTransactionOncePartitionsTakeMarkersAgainWithoutAClientRetry() {
        TxnID txn = stuckCommit();
        redriver.scan();
        coordinator.acceptMarkers(PARTITION);

        coordinator.clock().advance(STUCK_AFTER);
        redriver.scan();

        await().atMost(Duration.ofSeconds(20)).until(() -> resolutionOf(txn) == Resolution.KEPT);
        assertThat(coordinator.markerCount("COMMIT", PARTITION, txn)).isEqualTo(1);
        assertThat(coordinator.preserver().stats().stuckRedrives.sum()).isEqualTo(1);
        await(coordinator.commit(txn, "alice"));
    }

    @Test
    void waitsUntilATransactionHasBeenFinishingForTheConfiguredTime() {
        TxnID txn = stuckCommit();
        coordinator.acceptMarkers(PARTITION);
        redriver.scan();

        coordinator.clock().advance(STUCK_AFTER.minusSeconds(1));
        redriver.scan();

        assertThat(coordinator.preserver().stats().stuckRedrives.sum()).isZero();
        assertThat(resolutionOf(txn)).isEqualTo(Resolution.FINISHING);
    }

    @Test
    void retriesWithExponentialBackoffWhileThePartitionStillRefuses() {
        TxnID txn = stuckCommit();
        redriver.scan();
        coordinator.clock().advance(STUCK_AFTER);

        redriver.scan();
        await().atMost(Duration.ofSeconds(20)).until(() -> coordinator.callLog()
                .count("marker refused COMMIT " + PARTITION + " " + CoordinatorHarness.key(txn)) == 2);
        redriver.scan();
        assertThat(coordinator.preserver().stats().stuckRedrives.sum()).as("backing off").isEqualTo(1);

        coordinator.clock().advance(Duration.ofSeconds(1));
        redriver.scan();
        assertThat(coordinator.preserver().stats().stuckRedrives.sum()).isEqualTo(2);

        coordinator.acceptMarkers(PARTITION);
        coordinator.clock().advance(Duration.ofSeconds(1));
        redriver.scan();
        assertThat(coordinator.preserver().stats().stuckRedrives.sum()).as("next backoff is 2 s").isEqualTo(2);
        coordinator.clock().advance(Duration.ofSeconds(1));
        redriver.scan();

        await().atMost(Duration.ofSeconds(20)).until(() -> resolutionOf(txn) == Resolution.KEPT);
        assertThat(coordinator.markerCount("ABORT", PARTITION, txn)).isZero();
    }

    @Test
    void reDrivesAnAbortAsAnAbortNeverAsACommit() {
        TxnID txn = coordinator.open("alice");
        coordinator.produce(txn, PARTITION);
        coordinator.refuseMarkers(PARTITION);
        failureOf(coordinator.timeoutAbort(txn));
        coordinator.acceptMarkers(PARTITION);
        redriver.scan();

        coordinator.clock().advance(STUCK_AFTER);
        redriver.scan();

        await().atMost(Duration.ofSeconds(20)).until(() -> resolutionOf(txn) == Resolution.KEPT);
        assertThat(coordinator.markerCount("ABORT", PARTITION, txn)).isEqualTo(1);
        assertThat(coordinator.markerCount("COMMIT", PARTITION, txn)).isZero();
    }

    @Test
    void leavesATransactionWhoseEndIsInFlightAlone() {
        TxnID txn = coordinator.open("alice");
        coordinator.produce(txn, PARTITION);
        coordinator.transactionLog().holdAppends(op -> op.equals("COMMITTED"));
        coordinator.commit(txn, "alice");
        await().atMost(Duration.ofSeconds(20)).until(() -> coordinator.store().isEndActive(txn));
        redriver.scan();

        coordinator.clock().advance(STUCK_AFTER.multipliedBy(2));
        redriver.scan();

        assertThat(coordinator.preserver().stats().stuckRedrives.sum()).isZero();
        coordinator.transactionLog().releaseHeldAppends();
        await().atMost(Duration.ofSeconds(20)).until(() -> resolutionOf(txn) == Resolution.KEPT);
        redriver.scan();
        assertThat(redriver.trackedCount()).isZero();
    }

    /**
     * Issue 13: once the state topic has been unavailable long enough that the bound of ended
     * transactions waiting for it is reached, the broker retries the terminal step of each
     * finishing transaction every second; a re-drive of the same transaction would add a
     * second loop (and a second round of end markers) per transaction.
     */
    @Test
    void leavesATransactionAloneWhileTheBrokerRetriesItsTerminalStepForWantOfTheStateTopic() {
        TxnID txn = coordinator.open("alice");
        coordinator.produce(txn, PARTITION);
        coordinator.stateTopic().failNextWrites(Integer.MAX_VALUE);
        coordinator.preserver().keepFromLog(new TxnID(CoordinatorHarness.TC_ID, 1_000), Outcome.COMMITTED, null,
                CoordinatorHarness.START_MILLIS);
        for (int i = 0; i < TransactionMetadataPreserver.MAX_UNDURABLE_ENDS; i++) {
            coordinator.preserver().afterChangesDurable(() -> { });
        }
        coordinator.commit(txn, "alice");
        await().atMost(Duration.ofSeconds(20))
                .until(() -> coordinator.preserver().stats().endsRefusedWhileWaiting.sum() >= 1);
        redriver.scan();

        coordinator.clock().advance(STUCK_AFTER);
        // Two more rounds of the broker's retry (each sends the markers again): the second
        // begins once the first has failed, by the clock as it is now.
        long roundsBefore = coordinator.markerCount("COMMIT", PARTITION, txn);
        await().atMost(Duration.ofSeconds(15))
                .until(() -> coordinator.markerCount("COMMIT", PARTITION, txn) >= roundsBefore + 2);
        // The next round stops between its markers and its terminal step: no end step of the
        // plugin's own is in flight, only the broker's retry.
        coordinator.holdMarkers(PARTITION);
        await().atMost(Duration.ofSeconds(15)).until(() -> coordinator.heldMarkerCount() == 1);
        redriver.scan();

        assertThat(coordinator.preserver().stats().stuckRedrives.sum()).isZero();
        coordinator.releaseMarkers(PARTITION);
        coordinator.stateTopic().failNextWrites(0);
        await().atMost(Duration.ofSeconds(20)).until(() -> resolutionOf(txn) == Resolution.KEPT);
        assertThat(coordinator.preserver().stats().stuckRedrives.sum()).isZero();
    }
}
