package io.github.txnpreserver.store;

import static io.github.txnpreserver.testing.Futures.await;
import static io.github.txnpreserver.testing.Futures.failureOf;
import static org.assertj.core.api.Assertions.assertThat;
import static org.awaitility.Awaitility.await;

import io.github.txnpreserver.config.PreserverConfig;
import io.github.txnpreserver.preserver.OutcomeMemoryBudget;
import io.github.txnpreserver.preserver.PreserverInspection;
import io.github.txnpreserver.preserver.TransactionMetadataPreserver;
import io.github.txnpreserver.preserver.kept.KeptOutcome;
import io.github.txnpreserver.preserver.kept.Outcome;
import io.github.txnpreserver.resolution.TransactionState;
import io.github.txnpreserver.testing.CallLog;
import io.github.txnpreserver.testing.CoordinatorHarness;
import io.github.txnpreserver.testing.InMemoryStateTopic;
import io.github.txnpreserver.testing.InMemoryTransactionLog;
import io.github.txnpreserver.testing.ManualScheduler;
import java.time.Duration;
import java.util.concurrent.CompletableFuture;
import org.apache.bookkeeper.mledger.Position;
import org.apache.pulsar.client.api.transaction.TxnID;
import org.apache.pulsar.transaction.coordinator.TransactionCoordinatorID;
import org.apache.pulsar.transaction.coordinator.TransactionLogReplayCallback;
import org.apache.pulsar.transaction.coordinator.exceptions.CoordinatorException.InvalidTxnStatusException;
import org.apache.pulsar.transaction.coordinator.exceptions.CoordinatorException.TransactionNotFoundException;
import org.apache.pulsar.transaction.coordinator.impl.MLTransactionLogImpl;
import org.apache.pulsar.transaction.coordinator.proto.TransactionMetadataEntry.TransactionMetadataOp;
import org.apache.pulsar.transaction.coordinator.proto.TransactionMetadataEntry;
import org.apache.pulsar.transaction.coordinator.proto.TxnStatus;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.DisplayName;
import org.junit.jupiter.api.Nested;
import org.junit.jupiter.api.Test;

/**
 * A transaction the coordinator aborted on its timeout, through the broker's own end chain:
 * kept as its own outcome, an abort retry answered as for any abort, a commit refused as
 * stock refuses it but with a message naming the timeout, counted; and the two meanings of
 * "not found" told apart.
 */
@DisplayName("A timeout-abort, and what a not-found says")
class TimeoutAbortTest {

    private static final String ALICE = "alice";
    private static final String PARTITION = "persistent://public/default/orders-partition-0";

    private final CoordinatorHarness coordinator = CoordinatorHarness.start(10, 1000);

    @AfterEach
    void close() {
        coordinator.close();
    }

    /** What a transaction of alice's aborted on its timeout keeps, ended at {@code endMillis} (kept rounded up to the second). */
    private KeptOutcome timedOutAt(TxnID txn, long endMillis) {
        return new KeptOutcome(txn, Outcome.TIMED_OUT, ALICE, (endMillis + 999) / 1000 * 1000);
    }

    private TxnID timedOut() {
        TxnID txn = coordinator.open(ALICE);
        coordinator.produce(txn, PARTITION);
        await(coordinator.timeoutAbort(txn));
        return txn;
    }

    private void awaitFinishingEntry(TxnID txn) {
        await().atMost(Duration.ofSeconds(5)).until(() ->
                coordinator.callLog().count("log ABORTING " + CoordinatorHarness.key(txn)) == 1);
    }

    /**
     * Returns once whatever the last call set off has run. Its steps alternate between the
     * coordinator's thread (settled: what is due runs, and what that hands over) and the stock
     * store's thread (a transaction opened there queues behind the step before it); an end
     * takes at most two turns on the stock store's thread.
     */
    private void afterWhatItSetOff() {
        for (int turn = 0; turn < 2; turn++) {
            coordinator.settle();
            coordinator.open(ALICE);
        }
        coordinator.settle();
    }

    private long timeoutAborts() {
        return coordinator.preserver().stats().timeoutAborts.sum();
    }

    private long commitsAfterTimeoutAbort() {
        return coordinator.preserver().stats().commitsAfterTimeoutAbort.sum();
    }

    @Nested
    @DisplayName("once it ended")
    class Kept {

        @Test
        void isKeptAsATimeoutAbortAndCounted() {
            long began = coordinator.clock().millis();
            TxnID txn = timedOut();

            assertThat(coordinator.kept(txn)).isEqualTo(timedOutAt(txn, began));
            assertThat(timeoutAborts()).isEqualTo(1);
            assertThat(commitsAfterTimeoutAbort()).isZero();
        }

        @Test
        void aCommitIsRefusedAsInvalidStatusNamingTheTimeoutAndCountedEachTime() {
            long began = coordinator.clock().millis();
            TxnID txn = timedOut();

            assertThat(failureOf(coordinator.commit(txn, ALICE))).isInstanceOf(InvalidTxnStatusException.class)
                    .hasMessageStartingWith("Transaction " + txn + " was aborted on its timeout at ")
                    .hasMessageContaining("its timeout of 60000 ms passed while it was open")
                    .hasMessageEndingWith("it cannot be committed");
            assertThat(failureOf(coordinator.commit(txn, ALICE))).isInstanceOf(InvalidTxnStatusException.class);

            assertThat(commitsAfterTimeoutAbort()).isEqualTo(2);
            assertThat(coordinator.markerCount("COMMIT", PARTITION, txn)).isZero();
            assertThat(coordinator.kept(txn)).as("unchanged").isEqualTo(timedOutAt(txn, began));
        }

        @Test
        void anAbortRetrySucceedsWithoutSendingAnotherMarker() {
            TxnID txn = timedOut();

            await(coordinator.abort(txn, ALICE));
            await(coordinator.abort(txn, ALICE));

            assertThat(coordinator.markerCount("ABORT", PARTITION, txn)).isEqualTo(1);
            assertThat(coordinator.preserver().stats().retriesAnsweredAborted.sum()).isEqualTo(2);
            assertThat(commitsAfterTimeoutAbort()).isZero();
        }

        @Test
        void anotherRoleLearnsNothing() {
            TxnID txn = timedOut();

            assertThat(failureOf(coordinator.commit(txn, "mallory"))).isInstanceOf(TransactionNotFoundException.class)
                    .hasMessageNotContaining("timeout");
            assertThat(failureOf(coordinator.abort(txn, "mallory"))).isInstanceOf(TransactionNotFoundException.class);
            assertThat(commitsAfterTimeoutAbort()).isZero();
        }

        @Test
        void survivesARestartFromTheStateTopic() {
            long began = coordinator.clock().millis();
            TxnID txn = timedOut();
            coordinator.awaitRecordDurable(txn);

            coordinator.restart();

            assertThat(coordinator.kept(txn)).isEqualTo(timedOutAt(txn, began));
            assertThat(failureOf(coordinator.commit(txn, ALICE))).isInstanceOf(InvalidTxnStatusException.class)
                    .hasMessageContaining("was aborted on its timeout at ")
                    .as("the timeout itself is not kept").hasMessageContaining("(its timeout passed while it was open)");
            await(coordinator.abort(txn, ALICE));
        }

        @Test
        void theTimeoutTrackerMeetingItAgainLeavesItAsItIs() {
            long began = coordinator.clock().millis();
            TxnID txn = timedOut();

            // The broker's tracker looks up every transaction at its timeout, ended or not.
            coordinator.service().endTransactionForTimeout(txn);
            afterWhatItSetOff();

            assertThat(coordinator.preserver().stats().retriesAnsweredAborted.sum()).as("not taken for a retry").isZero();
            assertThat(coordinator.callLog().count("log ABORTING " + CoordinatorHarness.key(txn))).isEqualTo(1);
            assertThat(coordinator.markerCount("ABORT", PARTITION, txn)).isEqualTo(1);
            assertThat(coordinator.kept(txn)).isEqualTo(timedOutAt(txn, began));
        }

        @Test
        void everyoneButTheBrokersEndChainSeesItAborting() {
            TxnID txn = timedOut();

            assertThat(await(coordinator.service().getTxnMeta(txn)).status()).as("the admin view's lookup")
                    .isEqualTo(TxnStatus.ABORTING);
            assertThat(await(coordinator.isOwner(txn, ALICE))).isTrue();
        }

        @Test
        void anAbortByItsClientStaysAPlainAbortRefusedAsStockRefusesIt() {
            TxnID txn = coordinator.open(ALICE);
            coordinator.produce(txn, PARTITION);
            await(coordinator.abort(txn, ALICE));

            assertThat(coordinator.kept(txn).outcome()).isEqualTo(Outcome.ABORTED);
            assertThat(failureOf(coordinator.commit(txn, ALICE))).isInstanceOf(InvalidTxnStatusException.class)
                    .hasMessageContaining("ABORTING").hasMessageNotContaining("timeout");
            assertThat(timeoutAborts()).isZero();
            assertThat(commitsAfterTimeoutAbort()).isZero();
        }

        @Test
        void aTimeoutThatMeetsAClientsAbortInFlightLeavesItTheClients() {
            TxnID txn = coordinator.open(ALICE);
            coordinator.produce(txn, PARTITION);
            coordinator.holdMarkers(PARTITION);
            CompletableFuture<Void> clientAbort = coordinator.abort(txn, ALICE);
            CompletableFuture<Void> timeout = coordinator.timeoutAbort(txn);
            coordinator.releaseMarkers(PARTITION);
            await(clientAbort);
            await(timeout);
            coordinator.settle();

            assertThat(coordinator.kept(txn).outcome()).isEqualTo(Outcome.ABORTED);
            assertThat(timeoutAborts()).isZero();
        }
    }

    @Nested
    @DisplayName("while its markers are on their way")
    class Finishing {

        @Test
        void aCommitIsRefusedNamingTheTimeoutWithoutAnEntryOrAMarker() {
            TxnID txn = coordinator.open(ALICE);
            coordinator.produce(txn, PARTITION);
            coordinator.holdMarkers(PARTITION);
            CompletableFuture<Void> timeout = coordinator.timeoutAbort(txn);
            awaitFinishingEntry(txn);
            java.time.Instant abortedAt = java.time.Instant.ofEpochMilli(coordinator.clock().millis())
                    .truncatedTo(java.time.temporal.ChronoUnit.SECONDS);
            coordinator.clock().advance(Duration.ofMinutes(3));

            assertThat(failureOf(coordinator.commit(txn, ALICE))).isInstanceOf(InvalidTxnStatusException.class)
                    .as("when the timeout began the abort, not when the commit came")
                    .hasMessageContaining("was aborted on its timeout at " + abortedAt + " ")
                    .hasMessageContaining("its timeout of 60000 ms");
            assertThat(coordinator.callLog().count("log COMMITTING " + CoordinatorHarness.key(txn)))
                    .as("no entry appended for the refused commit").isZero();
            assertThat(await(coordinator.service().getTxnMeta(txn)).status()).as("the admin view's lookup")
                    .isEqualTo(TxnStatus.ABORTING);
            assertThat(commitsAfterTimeoutAbort()).isEqualTo(1);

            coordinator.releaseMarkers(PARTITION);
            await(timeout);
            assertThat(coordinator.kept(txn)).as("ended at its terminal step, once its markers landed")
                    .isEqualTo(timedOutAt(txn, coordinator.clock().millis()));
            assertThat(coordinator.markerCount("COMMIT", PARTITION, txn)).isZero();
        }

        @Test
        void theTimeoutTrackerMeetingItAgainSendsNoMarkerAndAppendsNothing() {
            TxnID txn = coordinator.open(ALICE);
            coordinator.produce(txn, PARTITION);
            coordinator.holdMarkers(PARTITION);
            CompletableFuture<Void> timeout = coordinator.timeoutAbort(txn);
            awaitFinishingEntry(txn);
            int held = coordinator.heldMarkerCount();

            coordinator.service().endTransactionForTimeout(txn);
            afterWhatItSetOff();

            assertThat(coordinator.heldMarkerCount()).as("no marker sent again").isEqualTo(held);
            assertThat(coordinator.callLog().count("log ABORTING " + CoordinatorHarness.key(txn))).isEqualTo(1);
            coordinator.releaseMarkers(PARTITION);
            await(timeout);
            assertThat(coordinator.markerCount("ABORT", PARTITION, txn)).isEqualTo(1);
            assertThat(coordinator.preserver().stats().retriesAnsweredAborted.sum()).isZero();
        }

        @Test
        void aCommitWhoseFinishingEntryLandsAfterTheTimeoutsIsRefusedNamingTheTimeout() {
            TxnID txn = coordinator.open(ALICE);
            coordinator.produce(txn, PARTITION);
            coordinator.transactionLog().holdAppends("COMMITTING"::equals);
            CompletableFuture<Void> commit = coordinator.commit(txn, ALICE);
            await().atMost(Duration.ofSeconds(5)).until(() -> coordinator.transactionLog().heldAppendCount() == 1);
            coordinator.holdMarkers(PARTITION);
            CompletableFuture<Void> timeout = coordinator.timeoutAbort(txn);
            awaitFinishingEntry(txn);
            coordinator.transactionLog().releaseHeldAppends();

            assertThat(failureOf(commit)).isInstanceOf(InvalidTxnStatusException.class)
                    .hasMessageContaining("was aborted on its timeout at ");
            coordinator.releaseMarkers(PARTITION);
            await(timeout);
            assertThat(coordinator.kept(txn)).isEqualTo(timedOutAt(txn, coordinator.clock().millis()));
            assertThat(coordinator.markerCount("COMMIT", PARTITION, txn)).isZero();
        }

        @Test
        void aTimeoutWhoseFinishingEntryLandsAfterACommitsLeavesNoMark() {
            TxnID txn = coordinator.open(ALICE);
            coordinator.produce(txn, PARTITION);
            coordinator.transactionLog().holdAppends("ABORTING"::equals);
            CompletableFuture<Void> timeout = coordinator.timeoutAbort(txn);
            await().atMost(Duration.ofSeconds(5)).until(() -> coordinator.transactionLog().heldAppendCount() == 1);
            CompletableFuture<Void> commit = coordinator.commit(txn, ALICE);
            await(commit);
            coordinator.transactionLog().releaseHeldAppends();

            assertThat(failureOf(timeout)).isInstanceOf(InvalidTxnStatusException.class);
            assertThat(coordinator.kept(txn)).isEqualTo(new KeptOutcome(txn, Outcome.COMMITTED, ALICE,
                    coordinator.clock().millis() / 1000 * 1000));
            assertThat(timeoutAborts()).isZero();
            await(coordinator.commit(txn, ALICE));
            assertThat(coordinator.markerCount("ABORT", PARTITION, txn)).isZero();
        }

        @Test
        void anAbortRetryJoinsItAndResendsTheMarkers() {
            TxnID txn = coordinator.open(ALICE);
            coordinator.produce(txn, PARTITION);
            coordinator.refuseMarkers(PARTITION);
            assertThat(failureOf(coordinator.timeoutAbort(txn))).as("the timeout's markers refused").isNotNull();
            coordinator.acceptMarkers(PARTITION);

            await(coordinator.abort(txn, ALICE));

            assertThat(coordinator.markerCount("ABORT", PARTITION, txn)).as("sent again by the retry").isEqualTo(1);
            assertThat(coordinator.kept(txn)).isEqualTo(timedOutAt(txn, coordinator.clock().millis()));
        }
    }

    @Nested
    @DisplayName("not found")
    class NotFound {

        @Test
        void aSequenceNeverIssuedSaysSoAndGivesTheHighestIssued() {
            TxnID issued = coordinator.open(ALICE);
            TxnID never = new TxnID(issued.getMostSigBits(), issued.getLeastSigBits() + 1);

            assertThat(failureOf(coordinator.commit(never, ALICE))).isInstanceOf(TransactionNotFoundException.class)
                    .hasMessage("Transaction " + never + " was never issued: coordinator " + issued.getMostSigBits()
                            + " has issued sequences up to " + issued.getLeastSigBits());
            assertThat(failureOf(coordinator.abort(never, null))).isInstanceOf(TransactionNotFoundException.class)
                    .hasMessageContaining("was never issued");
        }

        @Test
        void anIssuedSequenceNoLongerKeptSaysItWasForgottenAndWhereTheWindowStarts() {
            TxnID old = coordinator.open(ALICE);
            await(coordinator.commit(old, ALICE));
            // Its end is timed on the coordinator's thread: before the clock moves on.
            coordinator.settle();
            coordinator.clock().advance(Duration.ofHours(72));
            TxnID recent = coordinator.open(ALICE);
            await(coordinator.commit(recent, ALICE));
            coordinator.preserver().expire();
            coordinator.settle();
            PreserverInspection.currentFigures(coordinator.preserver()).join();

            assertThat(failureOf(coordinator.commit(old, ALICE))).isInstanceOf(TransactionNotFoundException.class)
                    .hasMessageStartingWith("Transaction " + old + " is no longer kept: its outcome is forgotten")
                    .hasMessageContaining("kept outcomes reach back to "
                            + java.time.Instant.ofEpochMilli(coordinator.clock().millis())
                            .truncatedTo(java.time.temporal.ChronoUnit.SECONDS));
            assertThat(failureOf(coordinator.abort(old, ALICE))).isInstanceOf(TransactionNotFoundException.class)
                    .hasMessageContaining("is no longer kept");
        }
    }

    @Nested
    @DisplayName("described by the outcome query, without acting")
    class Described {

        private TransactionState describe(TxnID txn) {
            return await(coordinator.store().describe(txn));
        }

        @Test
        void eachStateWithWhatApplies() {
            TxnID open = coordinator.open(ALICE);
            TxnID committed = coordinator.open(ALICE);
            await(coordinator.commit(committed, ALICE));
            TxnID aborted = coordinator.open(null);
            await(coordinator.abort(aborted, null));
            TxnID timedOut = timedOut();
            long endedAt = coordinator.clock().millis() / 1000 * 1000;
            long keptUntil = endedAt + Duration.ofHours(72).toMillis();

            assertThat(describe(open)).isEqualTo(new TransactionState(open.toString(), TransactionState.State.OPEN,
                    null, ALICE, describe(open).openedAtMillis(), 60_000, 0, 0, 0, 0));
            assertThat(describe(open).openedAtMillis()).isPositive();
            assertThat(describe(committed)).isEqualTo(new TransactionState(committed.toString(),
                    TransactionState.State.COMMITTED, null, ALICE, 0, 0, endedAt, keptUntil, 0, 0));
            assertThat(describe(aborted)).isEqualTo(new TransactionState(aborted.toString(),
                    TransactionState.State.ABORTED, TransactionState.AbortedBy.CLIENT_OR_ADMIN, null, 0, 0, endedAt,
                    keptUntil, 0, 0));
            assertThat(describe(timedOut)).isEqualTo(new TransactionState(timedOut.toString(),
                    TransactionState.State.ABORTED, TransactionState.AbortedBy.TIMEOUT, ALICE, 0, 0, endedAt,
                    keptUntil, 0, 0));
            TxnID never = new TxnID(timedOut.getMostSigBits(), timedOut.getLeastSigBits() + 1);
            assertThat(describe(never)).isEqualTo(new TransactionState(never.toString(),
                    TransactionState.State.NEVER_ISSUED, null, null, 0, 0, 0, 0, 0, timedOut.getLeastSigBits()));

            assertThat(coordinator.markerCount("COMMIT", PARTITION, timedOut)).as("nothing acted on").isZero();
            assertThat(describe(open).state()).as("still open").isEqualTo(TransactionState.State.OPEN);
        }

        @Test
        void aTimeoutAbortStillFinishingIsAbortingByTheTimeout() {
            TxnID txn = coordinator.open(ALICE);
            coordinator.produce(txn, PARTITION);
            coordinator.holdMarkers(PARTITION);
            CompletableFuture<Void> timeout = coordinator.timeoutAbort(txn);
            awaitFinishingEntry(txn);

            assertThat(describe(txn).state()).isEqualTo(TransactionState.State.ABORTING);
            assertThat(describe(txn).abortedBy()).isEqualTo(TransactionState.AbortedBy.TIMEOUT);
            coordinator.releaseMarkers(PARTITION);
            await(timeout);
        }

        @Test
        void aForgottenOneSaysWhereTheWindowStarts() {
            TxnID old = coordinator.open(ALICE);
            await(coordinator.commit(old, ALICE));
            // Its end is timed on the coordinator's thread: before the clock moves on.
            coordinator.settle();
            coordinator.clock().advance(Duration.ofHours(72));
            TxnID recent = coordinator.open(ALICE);
            await(coordinator.commit(recent, ALICE));
            coordinator.preserver().expire();
            coordinator.settle();
            PreserverInspection.currentFigures(coordinator.preserver()).join();

            TransactionState forgotten = describe(old);
            assertThat(forgotten.state()).isEqualTo(TransactionState.State.FORGOTTEN);
            assertThat(forgotten.windowStartMillis()).isEqualTo(coordinator.clock().millis() / 1000 * 1000);
            assertThat(forgotten.highestIssued()).isEqualTo(recent.getLeastSigBits());
            assertThat(describe(old)).as("asked again").isEqualTo(forgotten);
        }

        @Test
        void theWindowStartsAtTheEndOfTheOldestOutcomeKept() {
            TxnID old = coordinator.open(ALICE);
            await(coordinator.commit(old, ALICE));
            coordinator.settle();
            coordinator.clock().advance(Duration.ofHours(72));
            TxnID recent = coordinator.open(ALICE);
            await(coordinator.commit(recent, ALICE));
            coordinator.settle();
            long recentEndedAt = coordinator.clock().millis() / 1000 * 1000;
            coordinator.clock().advance(Duration.ofSeconds(10));
            coordinator.preserver().expire();
            coordinator.settle();
            PreserverInspection.currentFigures(coordinator.preserver()).join();

            assertThat(describe(old).windowStartMillis()).isEqualTo(recentEndedAt);
        }

        @Test
        void theHighestIssuedSequenceOnceForgottenIsForgottenNotNeverIssued() {
            TxnID only = coordinator.open(ALICE);
            await(coordinator.commit(only, ALICE));
            coordinator.settle();
            coordinator.clock().advance(Duration.ofHours(73));
            coordinator.preserver().expire();
            coordinator.settle();

            TransactionState forgotten = describe(only);

            assertThat(forgotten.state()).isEqualTo(TransactionState.State.FORGOTTEN);
            assertThat(forgotten.highestIssued()).isEqualTo(only.getLeastSigBits());
        }
    }

    /**
     * After a restart, which abort the timeout began is read from the replayed log: an abort
     * whose finishing entry is no earlier than the open time plus the timeout.
     */
    @Nested
    @DisplayName("replayed from the transaction log")
    class Replayed {

        private static final long TC = 3;
        private final PreserverConfig config = new PreserverConfig(10, 1000, Duration.ofHours(72),
                Duration.ofSeconds(300), Duration.ofSeconds(60));
        private final ManualScheduler scheduler = new ManualScheduler(1_700_000_000_000L);
        private final CallLog calls = new CallLog();
        private final InMemoryTransactionLog transactionLog = new InMemoryTransactionLog(calls);
        private final TransactionMetadataPreserver preserver = new TransactionMetadataPreserver(TC, config,
                new InMemoryStateTopic(calls), scheduler, new OutcomeMemoryBudget(config.maxMemoryBytes()),
                TransactionMetadataPreserver.GROUP_COMMIT_INTERVAL);
        private final TimeoutAborts timeoutAborts = new TimeoutAborts();
        private final MLTransactionLogImpl log = RecordGatedTransactionLog.gate(new TransactionCoordinatorID(TC),
                transactionLog.newMock(), preserver, timeoutAborts);

        @AfterEach
        void stop() {
            scheduler.shutdown();
        }

        private void opened(long sequence, long atMillis, long timeoutMillis) {
            log.append(new TransactionMetadataEntry().setTxnidMostBits(TC).setTxnidLeastBits(sequence)
                    .setMetadataOp(TransactionMetadataOp.NEW).setStartTime(atMillis).setTimeoutMs(timeoutMillis)
                    .setLastModificationTime(atMillis).setOwner(ALICE)).join();
        }

        private void status(long sequence, TxnStatus expected, TxnStatus next, long atMillis) {
            log.append(new TransactionMetadataEntry().setTxnidMostBits(TC).setTxnidLeastBits(sequence)
                    .setMetadataOp(TransactionMetadataOp.UPDATE).setExpectedStatus(expected).setNewStatus(next)
                    .setLastModificationTime(atMillis)).join();
        }

        private Outcome keptOutcome(long sequence) {
            CompletableFuture<io.github.txnpreserver.preserver.kept.KeptOutcome> kept =
                    preserver.lookUp(new TxnID(TC, sequence));
            scheduler.runReady();
            return await(kept).outcome();
        }

        @Test
        void anAbortBegunAtOrPastTheTimeoutIsATimeoutAbortAndOneBegunBeforeIsNot() {
            opened(1, 1_000, 500);
            status(1, TxnStatus.OPEN, TxnStatus.ABORTING, 1_500);
            status(1, TxnStatus.ABORTING, TxnStatus.ABORTED, 1_600);
            opened(2, 1_000, 500);
            status(2, TxnStatus.OPEN, TxnStatus.ABORTING, 1_499);
            status(2, TxnStatus.ABORTING, TxnStatus.ABORTED, 1_600);
            opened(3, 1_000, 500);
            status(3, TxnStatus.OPEN, TxnStatus.COMMITTING, 1_700);
            status(3, TxnStatus.COMMITTING, TxnStatus.COMMITTED, 1_800);
            opened(4, 1_000, 500);
            status(4, TxnStatus.OPEN, TxnStatus.ABORTING, 2_000);
            opened(5, 1_000, 500);
            status(5, TxnStatus.OPEN, TxnStatus.ABORTING, 1_200);

            CompletableFuture<Void> restored = preserver.startRestore(() -> Long.MAX_VALUE);
            scheduler.runReady();
            log.replayAsync(new TransactionLogReplayCallback() {
                @Override
                public void replayComplete() {
                }

                @Override
                public void handleMetadataEntry(Position position, TransactionMetadataEntry entry) {
                }
            });
            scheduler.runReady();
            assertThat(restored).isCompleted();

            assertThat(keptOutcome(1)).isEqualTo(Outcome.TIMED_OUT);
            assertThat(keptOutcome(2)).isEqualTo(Outcome.ABORTED);
            assertThat(keptOutcome(3)).isEqualTo(Outcome.COMMITTED);
            assertThat(timeoutAborts.isFinishing(4)).as("finishing past its timeout").isTrue();
            assertThat(timeoutAborts.isFinishing(5)).as("finishing, begun before its timeout").isFalse();
        }
    }
}
