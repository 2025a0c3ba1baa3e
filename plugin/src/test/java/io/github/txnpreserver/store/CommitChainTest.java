package io.github.txnpreserver.store;

import static io.github.txnpreserver.testing.Futures.await;
import static io.github.txnpreserver.testing.Futures.failureOf;
import static org.assertj.core.api.Assertions.assertThat;
import static org.awaitility.Awaitility.await;

import io.github.txnpreserver.preserver.PreserverInspection;
import io.github.txnpreserver.preserver.TransactionMetadataPreserver;
import io.github.txnpreserver.preserver.kept.KeptOutcome;
import io.github.txnpreserver.preserver.kept.Outcome;
import io.github.txnpreserver.resolution.Resolution;
import io.github.txnpreserver.testing.CoordinatorHarness;
import java.time.Duration;
import java.util.List;
import java.util.Set;
import java.util.concurrent.CompletableFuture;
import org.apache.pulsar.client.api.transaction.TxnID;
import org.apache.pulsar.transaction.coordinator.exceptions.CoordinatorException.InvalidTxnStatusException;
import org.apache.pulsar.transaction.coordinator.exceptions.CoordinatorException;
import org.apache.pulsar.transaction.coordinator.proto.TxnStatus;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.DisplayName;
import org.junit.jupiter.api.Nested;
import org.junit.jupiter.api.Test;

/**
 * The order of the commit chain: the decided outcome is kept before the terminal log entry,
 * its record is written after the decision (never before), the transaction's log entries are
 * released only once the record is durable, and concurrent, failing or crashing ends neither
 * lose it nor multiply it.
 */
@DisplayName("The commit chain")
class CommitChainTest {

    private static final String ALICE = "alice";
    private static final String PARTITION = "persistent://public/default/payments-partition-0";

    private final CoordinatorHarness coordinator = CoordinatorHarness.start(10, 1000);

    @AfterEach
    void close() {
        coordinator.close();
    }

    private TxnID openWithPartition() {
        TxnID txn = coordinator.open(ALICE);
        coordinator.produce(txn, PARTITION);
        return txn;
    }

    @Test
    void keepsTheOutcomeBeforeTheTerminalEntryAndReleasesTheLogOnlyOnceItsRecordIsDurable() {
        TxnID txn = openWithPartition();
        String key = CoordinatorHarness.key(txn);
        coordinator.stateTopic().holdWrites();
        coordinator.transactionLog().holdAppends(op -> op.equals("COMMITTED"));

        CompletableFuture<Void> commit = coordinator.commit(txn, ALICE);
        await().atMost(Duration.ofSeconds(5)).until(() -> coordinator.transactionLog().heldAppendCount() == 1);
        assertThat(coordinator.kept(txn)).as("kept before the terminal entry")
                .isEqualTo(new KeptOutcome(txn, Outcome.COMMITTED, ALICE, coordinator.clock().millis() / 1000 * 1000));
        assertThat(coordinator.resolution(txn)).as("still live")
                .isEqualTo(Resolution.FINISHING);
        coordinator.transactionLog().releaseHeldAppends();
        await(commit);

        assertThat(coordinator.callLog().calls()).as("the commit does not wait for the state topic")
                .containsSubsequence("log COMMITTING " + key, "marker COMMIT " + PARTITION + " " + key,
                        "log COMMITTED " + key)
                .doesNotContain("log released " + key);
        assertThat(coordinator.resolution(txn)).isEqualTo(Resolution.KEPT);
        await(coordinator.commit(txn, ALICE));

        coordinator.stateTopic().releaseHeldWrites();

        coordinator.awaitRecordDurable(txn);
        assertThat(coordinator.callLog().calls()).containsSubsequence("state-write " + key, "log released " + key);
        assertThat(coordinator.callLog().count("state-write " + key)).isEqualTo(1);
    }

    /**
     * One record carries a group's ends: their entries leave the log in one cursor delete
     * once it landed, not one per transaction in a burst beside the commits in flight.
     */
    @Test
    void theEndsOneRecordMakesDurableLeaveTheLogInOneDelete() {
        TxnID first = openWithPartition();
        TxnID second = openWithPartition();
        TxnID third = openWithPartition();
        coordinator.stateTopic().holdWrites();
        await(coordinator.commit(first, ALICE));
        await().atMost(Duration.ofSeconds(5)).until(() -> coordinator.stateTopic().heldWriteCount() == 1);
        // Ended while the first one's record is in flight: both go out in the next record.
        await(coordinator.commit(second, ALICE));
        await(coordinator.commit(third, ALICE));
        assertThat(coordinator.callLog().calls()).as("nothing released before its record")
                .noneMatch(call -> call.startsWith("log released"));

        coordinator.stateTopic().releaseHeldWrites();
        coordinator.awaitRecordDurable(second);
        coordinator.awaitRecordDurable(third);

        String secondKey = CoordinatorHarness.key(second);
        String thirdKey = CoordinatorHarness.key(third);
        assertThat(coordinator.callLog().calls()).as("the second record carries both")
                .containsSubsequence("state-write c0", "state-write " + secondKey, "state-write " + thirdKey,
                        "log released " + secondKey);
        assertThat(coordinator.transactionLog().deletes())
                .containsExactly(Set.of(CoordinatorHarness.key(first)), Set.of(secondKey, thirdKey));
    }

    /**
     * Found by DuplicateEndsIT (16 concurrent commits, one answered NOT_FOUND): the broker saw
     * the transaction OPEN for one commit, then another commit of it finished the whole end
     * before this one's finishing step ran on the stock store's executor, which no longer
     * found it. That step is now answered from the kept outcome, as a retry is.
     */
    @Test
    void aFinishingStepWhoseTransactionAConcurrentEndFinishedMeanwhileIsAnsweredFromTheKeptOutcome() {
        TxnID txn = openWithPartition();
        await(coordinator.commit(txn, ALICE));

        await(coordinator.store().updateTxnStatus(txn, TxnStatus.COMMITTING, TxnStatus.OPEN, false));
        assertThat(failureOf(coordinator.store().updateTxnStatus(txn, TxnStatus.ABORTING, TxnStatus.OPEN, false)))
                .isInstanceOf(InvalidTxnStatusException.class);
        assertThat(failureOf(coordinator.store().updateTxnStatus(new TxnID(txn.getMostSigBits(), 999),
                TxnStatus.COMMITTING, TxnStatus.OPEN, false)))
                .as("a transaction never opened is still not found")
                .isInstanceOf(CoordinatorException.TransactionNotFoundException.class);
    }

    /**
     * A concurrent end answered at its finishing step goes on to its terminal step, which is
     * answered too: the request is one answered retry, counted once.
     */
    @Test
    void aConcurrentEndAnsweredAtItsFinishingStepCountsAsOneAnsweredRetry() {
        TxnID txn = openWithPartition();
        await(coordinator.commit(txn, ALICE));
        long before = coordinator.store().preserver().stats().retriesAnsweredCommitted.sum();

        await(coordinator.store().updateTxnStatus(txn, TxnStatus.COMMITTING, TxnStatus.OPEN, false));
        await(coordinator.store().updateTxnStatus(txn, TxnStatus.COMMITTED, TxnStatus.COMMITTING, false));

        assertThat(coordinator.store().preserver().stats().retriesAnsweredCommitted.sum() - before).isEqualTo(1);
    }

    @Test
    void aConcurrentAbortAnsweredAtItsFinishingStepCountsAsOneAnsweredRetry() {
        TxnID txn = openWithPartition();
        await(coordinator.abort(txn, ALICE));
        long before = coordinator.store().preserver().stats().retriesAnsweredAborted.sum();

        await(coordinator.store().updateTxnStatus(txn, TxnStatus.ABORTING, TxnStatus.OPEN, false));
        await(coordinator.store().updateTxnStatus(txn, TxnStatus.ABORTED, TxnStatus.ABORTING, false));

        assertThat(coordinator.store().preserver().stats().retriesAnsweredAborted.sum() - before).isEqualTo(1);
        assertThat(coordinator.store().preserver().stats().retriesAnsweredCommitted.sum()).isZero();
    }

    @Test
    void writesNothingBeforeTheOutcomeIsDecided() {
        TxnID txn = openWithPartition();
        String key = CoordinatorHarness.key(txn);
        coordinator.holdMarkers(PARTITION);

        CompletableFuture<Void> commit = coordinator.commit(txn, ALICE);

        await().atMost(Duration.ofSeconds(5)).until(() -> coordinator.heldMarkerCount() == 1);
        assertThat(coordinator.callLog().calls()).contains("log COMMITTING " + key)
                .noneMatch(call -> call.startsWith("state-write"));
        coordinator.releaseMarkers(PARTITION);
        await(commit);
        await().atMost(Duration.ofSeconds(5)).until(() -> coordinator.callLog().calls().contains("state-write " + key));
        assertThat(coordinator.callLog().calls()).containsSubsequence("marker COMMIT " + PARTITION + " " + key,
                "state-write " + key);
    }

    /**
     * The window the log covers: the broker dies after the terminal entry, before the
     * outcome's record landed (the write is lost with it). The log still holds the
     * transaction's entries, so the restart replays the terminal entry, keeps the outcome and
     * writes its record.
     */
    @Test
    void aCrashAfterTheTerminalEntryBeforeTheRecordLandedLosesNothing() {
        TxnID committed = openWithPartition();
        TxnID aborted = coordinator.open("bob");
        coordinator.stateTopic().holdWrites();
        await(coordinator.commit(committed, ALICE));
        await(coordinator.abort(aborted, "bob"));
        await().atMost(Duration.ofSeconds(5)).until(() -> coordinator.stateTopic().heldWriteCount() >= 1);
        coordinator.stateTopic().dropHeldWrites();

        coordinator.restart();

        // Replayed from the log: each ended when its terminal entry was written (kept rounded up to the second).
        assertThat(coordinator.kept(committed)).isEqualTo(new KeptOutcome(committed, Outcome.COMMITTED, ALICE,
                (coordinator.transactionLog().entryTimeOf(committed, "COMMITTED") + 999) / 1000 * 1000));
        assertThat(coordinator.kept(aborted)).isEqualTo(new KeptOutcome(aborted, Outcome.ABORTED, "bob",
                (coordinator.transactionLog().entryTimeOf(aborted, "ABORTED") + 999) / 1000 * 1000));
        await(coordinator.commit(committed, ALICE));
        assertThat(failureOf(coordinator.abort(committed, ALICE))).isInstanceOf(InvalidTxnStatusException.class);
        await(coordinator.abort(aborted, "bob"));
        coordinator.awaitRecordDurable(committed);
        assertThat(coordinator.stateTopic().newestOutcomeOf(committed)).isEqualTo(Outcome.COMMITTED);
        assertThat(coordinator.stateTopic().newestOutcomeOf(aborted)).isEqualTo(Outcome.ABORTED);

        coordinator.restart();

        assertThat(coordinator.kept(committed).outcome()).as("from the state topic now")
                .isEqualTo(Outcome.COMMITTED);
        assertThat(coordinator.markerCount("ABORT", PARTITION, committed)).isZero();
    }

    @Test
    void aFailedRecordWriteIsWrittenAgainAndTheLogIsReleasedOnlyThen() {
        TxnID txn = openWithPartition();
        String key = CoordinatorHarness.key(txn);
        coordinator.stateTopic().failNextWrites(2);

        await(coordinator.commit(txn, ALICE));

        coordinator.awaitRecordDurable(txn);
        assertThat(coordinator.callLog().calls()).containsSubsequence("state-write failed " + key,
                "state-write failed " + key, "state-write " + key, "log released " + key);
        assertThat(coordinator.callLog().calls()).containsSubsequence("log COMMITTED " + key, "log released " + key);
        await(coordinator.commit(txn, ALICE));
    }

    /**
     * Review of 0.5, finding 2: the stock store appends a status change before it checks
     * it, so a refused terminal entry can sit in the log (here a COMMITTED asked for while
     * the transaction was OPEN), followed by the real end. The replay follows each
     * transaction's status as the stock store does and takes only the real end.
     */
    @Test
    void aTerminalEntryTheStockStoreRefusedIsNotTakenForTheOutcomeOnReplay() {
        TxnID txn = openWithPartition();
        coordinator.stateTopic().holdWrites();

        assertThat(failureOf(coordinator.store().updateTxnStatus(txn, TxnStatus.COMMITTED, TxnStatus.COMMITTING,
                false))).isInstanceOf(InvalidTxnStatusException.class);
        assertThat(coordinator.callLog().calls()).contains("log COMMITTED " + CoordinatorHarness.key(txn));
        await(coordinator.abort(txn, ALICE));
        await().atMost(Duration.ofSeconds(5)).until(() -> coordinator.stateTopic().heldWriteCount() >= 1);
        coordinator.stateTopic().dropHeldWrites();

        coordinator.restart();

        assertThat(coordinator.kept(txn).outcome()).isEqualTo(Outcome.ABORTED);
        await(coordinator.abort(txn, ALICE));
        assertThat(failureOf(coordinator.commit(txn, ALICE))).isInstanceOf(InvalidTxnStatusException.class);
    }

    /**
     * A state topic unavailable so long that the bound of ended transactions waiting for it
     * is reached: the terminal step is refused with an error the broker retries every
     * second, and appends nothing, until the topic is back.
     */
    @Test
    void onceTooManyEndsWaitForTheStateTopicTheTerminalStepIsRefusedUntilItIsBack() {
        TxnID txn = openWithPartition();
        coordinator.stateTopic().failNextWrites(Integer.MAX_VALUE);
        coordinator.preserver().keepFromLog(new TxnID(CoordinatorHarness.TC_ID, 1_000), Outcome.COMMITTED, null,
                CoordinatorHarness.START_MILLIS);
        for (int i = 0; i < TransactionMetadataPreserver.MAX_UNDURABLE_ENDS; i++) {
            coordinator.preserver().afterOutcomeDurable(1_000, () -> { });
        }
        // The bound is read as the coordinator's thread last published it.
        coordinator.settle();
        await(coordinator.store().updateTxnStatus(txn, TxnStatus.COMMITTING, TxnStatus.OPEN, false));

        Throwable failure = failureOf(coordinator.store().updateTxnStatus(txn, TxnStatus.COMMITTED,
                TxnStatus.COMMITTING, false));

        // Retried by the client (it looks the coordinator up again), not looped on by the broker.
        assertThat(failure).isInstanceOf(CoordinatorException.CoordinatorNotFoundException.class);
        assertThat(coordinator.callLog().calls()).doesNotContain("log COMMITTED " + CoordinatorHarness.key(txn));
        assertThat(coordinator.resolution(txn)).isEqualTo(Resolution.FINISHING);
        coordinator.stateTopic().failNextWrites(0);
        CompletableFuture<Void> back = new CompletableFuture<>();
        coordinator.preserver().afterOutcomeDurable(1_000, () -> back.complete(null));
        coordinator.scheduler().advance(Duration.ofSeconds(10));
        await(back);
        // The broker's retry.
        await(coordinator.store().updateTxnStatus(txn, TxnStatus.COMMITTED, TxnStatus.COMMITTING, false));
        await(coordinator.commit(txn, ALICE));
    }

    /**
     * What 0.4 wrote before the finishing entry was durable (a speculative record) may be
     * restored for a transaction that is still OPEN: the live state shadows it, and the
     * transaction's real end replaces it.
     */
    @Test
    void aStaleRecordOfATransactionStillOpenIsShadowedAndThenReplaced() {
        TxnID txn = openWithPartition();
        coordinator.preserver().keepFromLog(txn, Outcome.COMMITTED, ALICE, CoordinatorHarness.START_MILLIS);
        await().atMost(Duration.ofSeconds(5)).until(() -> coordinator.stateTopic().newestOutcomeOf(txn)
                == Outcome.COMMITTED);

        coordinator.restart();

        assertThat(coordinator.kept(txn).outcome()).as("restored stale record").isEqualTo(Outcome.COMMITTED);
        assertThat(coordinator.resolution(txn)).isEqualTo(Resolution.PENDING);
        await(coordinator.abort(txn, ALICE));
        assertThat(coordinator.kept(txn).outcome()).isEqualTo(Outcome.ABORTED);
        assertThat(failureOf(coordinator.commit(txn, ALICE))).isInstanceOf(InvalidTxnStatusException.class);
        coordinator.restart();
        assertThat(coordinator.kept(txn).outcome()).isEqualTo(Outcome.ABORTED);
    }

    @Test
    void whenAnEndRacesTheOtherWayTheRecordThatLandsIsTheDecidedOutcome() {
        TxnID txn = openWithPartition();
        coordinator.transactionLog().holdAppends(op -> op.equals("COMMITTING") || op.equals("ABORTING"));

        CompletableFuture<Void> commit = coordinator.commit(txn, ALICE);
        await().atMost(Duration.ofSeconds(5)).until(() -> coordinator.transactionLog().heldAppendCount() == 1);
        CompletableFuture<Void> timeoutAbort = coordinator.timeoutAbort(txn);
        await().atMost(Duration.ofSeconds(5)).until(() -> coordinator.transactionLog().heldAppendCount() == 2);
        coordinator.transactionLog().releaseHeldAppends();

        boolean committed = settle(commit);
        boolean aborted = settle(timeoutAbort);
        assertThat(committed).isNotEqualTo(aborted);
        Outcome decided = committed ? Outcome.COMMITTED : Outcome.TIMED_OUT;
        await().atMost(Duration.ofSeconds(5)).until(() -> coordinator.stateTopic().newestOutcomeOf(txn) == decided);
        assertThat(coordinator.callLog().count("state-write " + CoordinatorHarness.key(txn))).isEqualTo(1);

        coordinator.restart();

        assertThat(coordinator.kept(txn).outcome()).isEqualTo(decided);
    }

    @Test
    void twoConcurrentCommitsOfOneTransactionBothSucceedWithOneRecordAndOneTerminalEntry() {
        TxnID txn = openWithPartition();
        String key = CoordinatorHarness.key(txn);
        coordinator.transactionLog().holdAppends(op -> op.equals("COMMITTING"));

        CompletableFuture<Void> first = coordinator.commit(txn, ALICE);
        CompletableFuture<Void> second = coordinator.commit(txn, ALICE);
        await().atMost(Duration.ofSeconds(5)).until(() -> coordinator.transactionLog().heldAppendCount() >= 1);
        coordinator.transactionLog().releaseHeldAppends();

        await(first);
        await(second);
        coordinator.awaitRecordDurable(txn);
        assertThat(coordinator.callLog().count("state-write " + key)).isEqualTo(1);
        assertThat(coordinator.callLog().count("log COMMITTED " + key)).isEqualTo(1);
        assertThat(coordinator.markerCount("ABORT", PARTITION, txn)).isZero();
    }

    @Test
    void aCommitRacingTheTimeoutAbortEndsOneWayAndEveryRetryAgrees() {
        TxnID txn = openWithPartition();
        coordinator.transactionLog().holdAppends(op -> op.equals("COMMITTING") || op.equals("ABORTING"));

        CompletableFuture<Void> timeoutAbort = coordinator.timeoutAbort(txn);
        CompletableFuture<Void> commit = coordinator.commit(txn, ALICE);
        await().atMost(Duration.ofSeconds(5)).until(() -> coordinator.transactionLog().heldAppendCount() >= 1);
        coordinator.transactionLog().releaseHeldAppends();

        boolean committed = settle(commit);
        boolean aborted = settle(timeoutAbort);
        assertThat(committed).isNotEqualTo(aborted);
        assertThat(coordinator.markerCount("COMMIT", PARTITION, txn)).isEqualTo(committed ? 1 : 0);
        assertThat(coordinator.markerCount("ABORT", PARTITION, txn)).isEqualTo(aborted ? 1 : 0);

        if (committed) {
            await(coordinator.commit(txn, ALICE));
            assertThat(failureOf(coordinator.abort(txn, ALICE))).isInstanceOf(InvalidTxnStatusException.class);
        } else {
            await(coordinator.abort(txn, ALICE));
            assertThat(failureOf(coordinator.commit(txn, ALICE))).isInstanceOf(InvalidTxnStatusException.class);
        }
    }

    @Test
    void aTransactionFinishingWhenTheCoordinatorStopsIsFinishedAndKeptOnRecovery() {
        TxnID txn = openWithPartition();
        String key = CoordinatorHarness.key(txn);
        coordinator.stateTopic().holdWrites();
        coordinator.transactionLog().holdAppends(op -> op.equals("COMMITTED"));
        coordinator.commit(txn, ALICE);
        await().atMost(Duration.ofSeconds(5)).until(() -> coordinator.transactionLog().heldAppendCount() == 1);
        coordinator.transactionLog().dropHeldAppends();
        await().atMost(Duration.ofSeconds(5)).until(() -> coordinator.stateTopic().heldWriteCount() >= 1);
        coordinator.stateTopic().dropHeldWrites();

        coordinator.restart();

        await().atMost(Duration.ofSeconds(5)).until(() -> coordinator.callLog().count("log COMMITTED " + key) == 1);
        // The log notes the append before its future completes, and the outcome is kept on completion.
        await().atMost(Duration.ofSeconds(5)).until(() -> coordinator.resolution(txn)
                == Resolution.KEPT);
        await(coordinator.commit(txn, ALICE));
        assertThat(coordinator.markerCount("ABORT", PARTITION, txn)).isZero();
    }

    @Test
    void aRetryOfAnEndedTransactionDuringTheBackgroundRestoreWaitsForItAndGetsTheKeptOutcome() {
        TxnID txn = openWithPartition();
        await(coordinator.commit(txn, ALICE));
        // Released: only the state topic has it now, not the log.
        coordinator.awaitRecordDurable(txn);
        coordinator.stateTopic().holdReads();

        coordinator.restartWithRestoreInBackground();
        CompletableFuture<Void> retry = coordinator.commit(txn, ALICE);
        CompletableFuture<Void> conflicting = coordinator.abort(txn, ALICE);

        assertThat(!coordinator.restored().isDone()).isTrue();
        TxnID fresh = coordinator.open(ALICE);
        assertThat(retry).as("its outcome may be in what is not read yet").isNotDone();
        assertThat(conflicting).isNotDone();
        coordinator.stateTopic().releaseReads();

        await(retry);
        assertThat(failureOf(conflicting)).isInstanceOf(InvalidTxnStatusException.class);
        assertThat(fresh.getLeastSigBits()).isGreaterThan(txn.getLeastSigBits());
        assertThat(coordinator.markerCount("COMMIT", PARTITION, txn)).isEqualTo(1);
    }

    /**
     * Defects found in review of the slot design (d6c49da), each replayed deterministically
     * through the broker's own end-transaction chain. Each test says why it fails there.
     */
    @Nested
    @DisplayName("defects found by review")
    class ReviewDefects {

        /** Until the preserver's executor has run what is queued on it (a flush a racing end would cause). */
        private void settlePreserver() {
            coordinator.settle();
        }

        /**
         * "A retried terminal step erases its own record". In d6c49da the retry of the
         * terminal step kept the same durable record again; admitting a transaction already
         * kept vacated its slot, and the vacated slot's tombstone was the slot of its own
         * record: after a restart the commit was unknown (TransactionNotFound). Now a retried
         * decision changes nothing and writes nothing.
         */
        @Test
        void aRetriedTerminalStepKeepsItsRecord() {
            TxnID txn = openWithPartition();
            String key = CoordinatorHarness.key(txn);
            coordinator.transactionLog().failNextAppends(op -> op.equals("COMMITTED"), 1);

            await(coordinator.commit(txn, ALICE));

            assertThat(coordinator.callLog().calls()).containsSubsequence("log failed COMMITTED " + key,
                    "log COMMITTED " + key);
            coordinator.awaitRecordDurable(txn);
            assertThat(coordinator.callLog().count("state-write " + key)).isEqualTo(1);
            assertThat(coordinator.callLog().calls()).noneMatch(call -> call.startsWith("state-delete"));
            assertThat(coordinator.stateTopic().newestOutcomeOf(txn)).isEqualTo(Outcome.COMMITTED);

            coordinator.restart();

            await(coordinator.commit(txn, ALICE));
            assertThat(failureOf(coordinator.abort(txn, ALICE))).isInstanceOf(InvalidTxnStatusException.class);
        }

        /**
         * "A losing end's record can land last". In d6c49da an end that found the
         * transaction live wrote its record whatever its status, over the winner's slot: the
         * timeout's abort, refused by the store, still wrote ABORTED after the decided
         * COMMITTED record, and after a restart the commit's retry was refused. Now an end
         * that does not find the transaction OPEN writes nothing, and a decided transaction's
         * entry takes no speculative record.
         */
        @Test
        void aTimeoutAbortLosingToACommitInItsTerminalStepWritesNothing() {
            TxnID txn = openWithPartition();
            coordinator.transactionLog().holdAppends(op -> op.equals("COMMITTED"));
            CompletableFuture<Void> commit = coordinator.commit(txn, ALICE);
            await().atMost(Duration.ofSeconds(5)).until(() -> coordinator.transactionLog().heldAppendCount() == 1);
            await().atMost(Duration.ofSeconds(5)).until(() -> coordinator.stateTopic().newestOutcomeOf(txn)
                    == Outcome.COMMITTED);
            List<String> requestsBefore = coordinator.stateTopic().requests();

            // The timeout saw the transaction OPEN before the commit began, and now asks for ABORTING from OPEN.
            Throwable refused = failureOf(coordinator.store().updateTxnStatus(txn, TxnStatus.ABORTING, TxnStatus.OPEN,
                    true));
            settlePreserver();

            assertThat(refused).isInstanceOf(InvalidTxnStatusException.class);
            assertThat(coordinator.stateTopic().requests()).as("nothing written after the decided record")
                    .isEqualTo(requestsBefore);
            coordinator.transactionLog().releaseHeldAppends();
            await(commit);
            assertThat(coordinator.stateTopic().newestOutcomeOf(txn)).isEqualTo(Outcome.COMMITTED);

            coordinator.restart();

            await(coordinator.commit(txn, ALICE));
            assertThat(failureOf(coordinator.abort(txn, ALICE))).isInstanceOf(InvalidTxnStatusException.class);
            assertThat(coordinator.markerCount("ABORT", PARTITION, txn)).isZero();
        }

        /** The reverse of the above; in d6c49da the late commit's COMMITTED record landed over the abort's. */
        @Test
        void aLateCommitLosingToTheTimeoutAbortWritesNothing() {
            TxnID txn = openWithPartition();
            coordinator.transactionLog().holdAppends(op -> op.equals("ABORTED"));
            CompletableFuture<Void> timeoutAbort = coordinator.timeoutAbort(txn);
            await().atMost(Duration.ofSeconds(5)).until(() -> coordinator.transactionLog().heldAppendCount() == 1);
            await().atMost(Duration.ofSeconds(5)).until(() -> coordinator.stateTopic().newestOutcomeOf(txn)
                    == Outcome.TIMED_OUT);
            List<String> requestsBefore = coordinator.stateTopic().requests();

            // The client's commit saw the transaction OPEN before the timeout began.
            Throwable refused = failureOf(coordinator.store().updateTxnStatus(txn, TxnStatus.COMMITTING,
                    TxnStatus.OPEN, false));
            settlePreserver();

            assertThat(refused).isInstanceOf(InvalidTxnStatusException.class);
            assertThat(coordinator.stateTopic().requests()).isEqualTo(requestsBefore);
            coordinator.transactionLog().releaseHeldAppends();
            await(timeoutAbort);

            coordinator.restart();

            await(coordinator.abort(txn, ALICE));
            assertThat(failureOf(coordinator.commit(txn, ALICE))).isInstanceOf(InvalidTxnStatusException.class);
            assertThat(coordinator.markerCount("COMMIT", PARTITION, txn)).isZero();
        }

        /**
         * The same race with the commit's record not durable yet (its write held): the losing
         * abort writes nothing either, so the record that lands, and is restored, is the commit's.
         * In d6c49da the abort's record went to the same slot after the commit's.
         */
        @Test
        void aTimeoutAbortLosingToACommitWhoseRecordIsStillInFlightWritesNothing() {
            TxnID txn = openWithPartition();
            coordinator.stateTopic().holdWrites();
            coordinator.transactionLog().holdAppends(op -> op.equals("COMMITTED"));
            CompletableFuture<Void> commit = coordinator.commit(txn, ALICE);
            await().atMost(Duration.ofSeconds(5)).until(() -> coordinator.stateTopic().heldWriteCount() == 1);

            Throwable refused = failureOf(coordinator.store().updateTxnStatus(txn, TxnStatus.ABORTING, TxnStatus.OPEN,
                    true));
            settlePreserver();

            assertThat(refused).isInstanceOf(InvalidTxnStatusException.class);
            assertThat(coordinator.stateTopic().requests()).containsExactly("write c0");
            coordinator.stateTopic().releaseHeldWrites();
            coordinator.transactionLog().releaseHeldAppends();
            await(commit);

            coordinator.restart();

            await(coordinator.commit(txn, ALICE));
            assertThat(failureOf(coordinator.abort(txn, ALICE))).isInstanceOf(InvalidTxnStatusException.class);
        }
    }

    /** Defects found in review of time-window retention (45163af), replayed through the broker's chain. */
    @Nested
    @DisplayName("defects found by review of the time window")
    class WindowReviewDefects {

        /**
         * "The floor keeps a restored speculative outcome the decision contradicts". The
         * commit's speculative record (0.4) is durable, its COMMITTING entry is not when the
         * broker dies; the restore puts COMMITTED into the block and into alice's floor; the
         * transaction, still OPEN, times out and is aborted. In 45163af the abort rewrote the
         * block, not the floor entry: once the memory bound dropped the block, a lookup said
         * COMMITTED, and a retried commit succeeded of a transaction that was aborted.
         */
        @Test
        void aTimeoutAbortAfterARestoredSpeculativeCommitIsWhatTheFloorAnswersOnceTheBlockIsDropped() {
            TxnID txn = openWithPartition();
            // What 0.4 wrote as the commit began.
            coordinator.preserver().keepFromLog(txn, Outcome.COMMITTED, ALICE, CoordinatorHarness.START_MILLIS);
            await().atMost(Duration.ofSeconds(5)).until(() -> coordinator.stateTopic().newestOutcomeOf(txn)
                    == Outcome.COMMITTED);
            coordinator.restart();
            assertThat(coordinator.kept(txn).outcome()).as("restored speculative record")
                    .isEqualTo(Outcome.COMMITTED);

            await(coordinator.timeoutAbort(txn));
            coordinator.preserver().evictOldestForMemory();
            coordinator.settle();
            assertThat(PreserverInspection.currentFigures(coordinator.preserver()).join().memoryEvictions()).as("block 0 dropped, alice's floor"
                    + " keeps the outcome").isZero();

            assertThat(PreserverInspection.currentFigures(coordinator.preserver()).join().floorEntries()).isEqualTo(1);
            assertThat(coordinator.kept(txn).outcome()).isEqualTo(Outcome.TIMED_OUT);
            await(coordinator.abort(txn, ALICE));
            assertThat(failureOf(coordinator.commit(txn, ALICE))).isInstanceOf(InvalidTxnStatusException.class);
            assertThat(coordinator.markerCount("COMMIT", PARTITION, txn)).isZero();
        }
    }

    /** Whether the end succeeded; a refusal must be InvalidTxnStatus. */
    private static boolean settle(CompletableFuture<Void> end) {
        try {
            await(end);
            return true;
        } catch (RuntimeException e) {
            assertThat(failureOf(end)).isInstanceOf(InvalidTxnStatusException.class);
            return false;
        }
    }

    /**
     * The log's releases come a group after its appends: cached, its entries would make the
     * managed ledger's cache work twice as hard as stock's. Once replayed, it is never read
     * again, so its cursor is kept out of the cache.
     */
    @Test
    void onceReplayedTheTransactionLogIsKeptOutOfTheEntryCache() {
        assertThat(coordinator.callLog().calls()).contains("log cursor always inactive");
    }
}
