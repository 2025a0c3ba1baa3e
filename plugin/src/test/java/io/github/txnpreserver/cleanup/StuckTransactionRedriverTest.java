package io.github.txnpreserver.cleanup;

import static io.github.txnpreserver.testing.Futures.await;
import static io.github.txnpreserver.testing.Futures.failureOf;
import static org.assertj.core.api.Assertions.assertThat;
import static org.awaitility.Awaitility.await;

import io.github.txnpreserver.preserver.TransactionMetadataPreserver;
import io.github.txnpreserver.preserver.kept.Outcome;
import io.github.txnpreserver.resolution.Resolution;
import io.github.txnpreserver.testing.CoordinatorHarness;
import java.time.Duration;
import org.apache.pulsar.client.api.transaction.TxnID;
import org.apache.pulsar.transaction.coordinator.exceptions.CoordinatorException;
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
            coordinator.preserver()::refusesEnds, coordinator::endThroughBroker, coordinator.preserver().thread(), STUCK_AFTER, coordinator.preserver().stats());

    @AfterEach
    void close() {
        coordinator.close();
    }

    /** One pass of the re-drive, on the coordinator's thread as in the broker. */
    private void scan() {
        coordinator.scheduler().execute(redriver::scan);
        coordinator.settle();
    }

    private Resolution resolutionOf(TxnID txn) {
        return coordinator.resolution(txn);
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
        scan();
        coordinator.acceptMarkers(PARTITION);

        coordinator.clock().advance(STUCK_AFTER);
        scan();

        await().atMost(Duration.ofSeconds(5)).until(() -> resolutionOf(txn) == Resolution.KEPT);
        assertThat(coordinator.markerCount("COMMIT", PARTITION, txn)).isEqualTo(1);
        assertThat(coordinator.preserver().stats().stuckRedrives.sum()).isEqualTo(1);
        await(coordinator.commit(txn, "alice"));
    }

    @Test
    void waitsUntilATransactionHasBeenFinishingForTheConfiguredTime() {
        TxnID txn = stuckCommit();
        coordinator.acceptMarkers(PARTITION);
        scan();

        coordinator.clock().advance(STUCK_AFTER.minusSeconds(1));
        scan();

        assertThat(coordinator.preserver().stats().stuckRedrives.sum()).isZero();
        assertThat(resolutionOf(txn)).isEqualTo(Resolution.FINISHING);
    }

    @Test
    void retriesWithExponentialBackoffWhileThePartitionStillRefuses() {
        TxnID txn = stuckCommit();
        scan();
        coordinator.clock().advance(STUCK_AFTER);

        scan();
        await().atMost(Duration.ofSeconds(5)).until(() -> coordinator.callLog()
                .count("marker refused COMMIT " + PARTITION + " " + CoordinatorHarness.key(txn)) == 2);
        scan();
        assertThat(coordinator.preserver().stats().stuckRedrives.sum()).as("backing off").isEqualTo(1);

        coordinator.clock().advance(Duration.ofSeconds(1));
        scan();
        assertThat(coordinator.preserver().stats().stuckRedrives.sum()).isEqualTo(2);

        coordinator.acceptMarkers(PARTITION);
        coordinator.clock().advance(Duration.ofSeconds(1));
        scan();
        assertThat(coordinator.preserver().stats().stuckRedrives.sum()).as("next backoff is 2 s").isEqualTo(2);
        coordinator.clock().advance(Duration.ofSeconds(1));
        scan();

        await().atMost(Duration.ofSeconds(5)).until(() -> resolutionOf(txn) == Resolution.KEPT);
        assertThat(coordinator.markerCount("ABORT", PARTITION, txn)).isZero();
    }

    @Test
    void reDrivesAnAbortAsAnAbortNeverAsACommit() {
        TxnID txn = coordinator.open("alice");
        coordinator.produce(txn, PARTITION);
        coordinator.refuseMarkers(PARTITION);
        failureOf(coordinator.timeoutAbort(txn));
        coordinator.acceptMarkers(PARTITION);
        scan();

        coordinator.clock().advance(STUCK_AFTER);
        scan();

        await().atMost(Duration.ofSeconds(5)).until(() -> resolutionOf(txn) == Resolution.KEPT);
        assertThat(coordinator.markerCount("ABORT", PARTITION, txn)).isEqualTo(1);
        assertThat(coordinator.markerCount("COMMIT", PARTITION, txn)).isZero();
    }

    @Test
    void leavesATransactionWhoseEndIsInFlightAlone() {
        TxnID txn = coordinator.open("alice");
        coordinator.produce(txn, PARTITION);
        coordinator.transactionLog().holdAppends(op -> op.equals("COMMITTED"));
        coordinator.commit(txn, "alice");
        await().atMost(Duration.ofSeconds(5)).until(() -> coordinator.store().isEndActive(txn));
        scan();

        coordinator.clock().advance(STUCK_AFTER.multipliedBy(2));
        scan();

        assertThat(coordinator.preserver().stats().stuckRedrives.sum()).isZero();
        coordinator.transactionLog().releaseHeldAppends();
        await().atMost(Duration.ofSeconds(5)).until(() -> resolutionOf(txn) == Resolution.KEPT);
        scan();
        assertThat(redriver.trackedCount()).isZero();
    }

    /**
     * Review of 22cce46, finding 5: with the bound of ended transactions waiting for the
     * state topic reached, the terminal step was refused with an error the broker retries
     * every second, for ever, and each client retry of the end started one more such loop,
     * each sending the end markers again. Now the refusal is "coordinator not found": the
     * client retries it, the broker does not loop, and the one re-drive per transaction
     * finishes it once the topic is back.
     */
    @Test
    void aTerminalStepRefusedForWantOfTheStateTopicStartsNoBrokerLoopAndTheRedriveFinishesIt() {
        TxnID txn = coordinator.open("alice");
        coordinator.produce(txn, PARTITION);
        coordinator.stateTopic().failNextWrites(Integer.MAX_VALUE);
        coordinator.preserver().keepFromLog(new TxnID(CoordinatorHarness.TC_ID, 1_000), Outcome.COMMITTED, null,
                CoordinatorHarness.START_MILLIS);
        for (int i = 0; i < TransactionMetadataPreserver.MAX_UNDURABLE_ENDS; i++) {
            coordinator.preserver().afterOutcomeDurable(1_000, () -> { });
        }
        // The bound is read as the coordinator's thread last published it.
        coordinator.settle();
        for (int retry = 0; retry < 3; retry++) {
            assertThat(failureOf(coordinator.commit(txn, "alice")))
                    .isInstanceOf(CoordinatorException.CoordinatorNotFoundException.class);
        }
        assertThat(coordinator.preserver().stats().endsRefusedWhileWaiting.sum()).isEqualTo(3);
        long markers = coordinator.markerCount("COMMIT", PARTITION, txn);
        assertThat(markers).as("one round per client request").isEqualTo(3);

        coordinator.clock().advance(Duration.ofSeconds(30));
        coordinator.scheduler().advance(Duration.ofSeconds(30));
        assertThat(coordinator.markerCount("COMMIT", PARTITION, txn)).as("no broker loop").isEqualTo(markers);
        assertThat(resolutionOf(txn)).isEqualTo(Resolution.FINISHING);
        scan();

        coordinator.stateTopic().failNextWrites(0);
        coordinator.clock().advance(STUCK_AFTER);
        coordinator.scheduler().advance(Duration.ofSeconds(10));
        scan();
        await().atMost(Duration.ofSeconds(5)).until(() -> resolutionOf(txn) == Resolution.KEPT);
        assertThat(coordinator.preserver().stats().stuckRedrives.sum()).isEqualTo(1);
    }

    /**
     * Review of 3e78710 (issue 38): after a state-topic outage every refused transaction was
     * stuck at once and every one re-driven at once, each sending its markers to all its
     * partitions. Now at most the bound are in flight, the longest stuck first; the rest wait
     * for the next pass.
     */
    @Test
    void reDrivesAtMostTheBoundAtOnceTheLongestStuckFirst() {
        int stuck = StuckTransactionRedriver.MAX_CONCURRENT_REDRIVES + 3;
        // Opened in one order, stuck in the other: the longest stuck is the newest transaction.
        java.util.List<TxnID> opened = new java.util.ArrayList<>();
        for (int i = 0; i < stuck; i++) {
            TxnID txn = coordinator.open("alice");
            coordinator.produce(txn, PARTITION);
            opened.add(txn);
        }
        coordinator.refuseMarkers(PARTITION);
        java.util.List<TxnID> txns = new java.util.ArrayList<>(opened);
        java.util.Collections.reverse(txns);
        for (TxnID txn : txns) {
            assertThat(failureOf(coordinator.commit(txn, "alice"))).hasMessageContaining("refused");
            scan();
            coordinator.clock().advance(Duration.ofSeconds(1));
        }
        coordinator.acceptMarkers(PARTITION);
        coordinator.holdMarkers(PARTITION);
        coordinator.clock().advance(STUCK_AFTER);

        scan();
        scan();

        assertThat(coordinator.preserver().stats().stuckRedrives.sum()).isEqualTo(
                StuckTransactionRedriver.MAX_CONCURRENT_REDRIVES);
        assertThat(coordinator.heldMarkerCount()).isEqualTo(StuckTransactionRedriver.MAX_CONCURRENT_REDRIVES);
        for (int i = 0; i < stuck; i++) {
            assertThat(coordinator.markerCount("COMMIT", PARTITION, txns.get(i)))
                    .as("transaction %d, %s", i, i < StuckTransactionRedriver.MAX_CONCURRENT_REDRIVES
                            ? "among the longest stuck" : "waiting for a free slot")
                    .isEqualTo(i < StuckTransactionRedriver.MAX_CONCURRENT_REDRIVES ? 1 : 0);
        }

        coordinator.releaseMarkers(PARTITION);
        for (int i = 0; i < StuckTransactionRedriver.MAX_CONCURRENT_REDRIVES; i++) {
            TxnID first = txns.get(i);
            await().atMost(Duration.ofSeconds(5)).until(() -> resolutionOf(first) == Resolution.KEPT);
        }
        scan();

        for (int i = StuckTransactionRedriver.MAX_CONCURRENT_REDRIVES; i < stuck; i++) {
            TxnID rest = txns.get(i);
            await().atMost(Duration.ofSeconds(5)).until(() -> resolutionOf(rest) == Resolution.KEPT);
            assertThat(coordinator.markerCount("COMMIT", PARTITION, rest)).isEqualTo(1);
        }
        assertThat(coordinator.preserver().stats().stuckRedrives.sum()).isEqualTo(stuck);
    }

    /**
     * Review of 3e78710 (issue 38): while terminal steps are refused (too many ends wait for the
     * state topic), a re-drive sends its markers only for its terminal step to be refused again.
     * None starts then; once the topic takes writes again, they do.
     */
    @Test
    void startsNoReDriveWhileTerminalStepsAreRefused() {
        TxnID txn = stuckCommit();
        coordinator.acceptMarkers(PARTITION);
        scan();
        coordinator.stateTopic().failNextWrites(Integer.MAX_VALUE);
        coordinator.preserver().keepFromLog(new TxnID(CoordinatorHarness.TC_ID, 1_000), Outcome.COMMITTED, null,
                CoordinatorHarness.START_MILLIS);
        for (int i = 0; i < TransactionMetadataPreserver.MAX_UNDURABLE_ENDS; i++) {
            coordinator.preserver().afterOutcomeDurable(1_000, () -> { });
        }
        coordinator.settle();
        assertThat(coordinator.preserver().refusesEnds()).isTrue();

        coordinator.clock().advance(STUCK_AFTER.multipliedBy(3));
        scan();
        scan();

        assertThat(coordinator.preserver().stats().stuckRedrives.sum()).isZero();
        assertThat(coordinator.markerCount("COMMIT", PARTITION, txn)).as("no marker sent (the client's was refused)")
                .isZero();
        assertThat(resolutionOf(txn)).isEqualTo(Resolution.FINISHING);

        coordinator.stateTopic().failNextWrites(0);
        coordinator.scheduler().advance(Duration.ofSeconds(10));
        coordinator.settle();
        assertThat(coordinator.preserver().refusesEnds()).isFalse();
        scan();

        await().atMost(Duration.ofSeconds(5)).until(() -> resolutionOf(txn) == Resolution.KEPT);
        assertThat(coordinator.preserver().stats().stuckRedrives.sum()).isEqualTo(1);
        assertThat(coordinator.markerCount("COMMIT", PARTITION, txn)).isEqualTo(1);
    }
}
