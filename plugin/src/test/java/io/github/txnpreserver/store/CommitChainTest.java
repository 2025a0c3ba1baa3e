package io.github.txnpreserver.store;

import static io.github.txnpreserver.testing.Futures.await;
import static io.github.txnpreserver.testing.Futures.failureOf;
import static org.assertj.core.api.Assertions.assertThat;
import static org.awaitility.Awaitility.await;

import io.github.txnpreserver.preserver.Outcome;
import io.github.txnpreserver.resolution.Resolution;
import io.github.txnpreserver.statetopic.proto.TxnOutcome;
import io.github.txnpreserver.testing.CoordinatorHarness;
import java.time.Duration;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import org.apache.pulsar.client.api.PulsarClientException;
import org.apache.pulsar.client.api.transaction.TxnID;
import org.apache.pulsar.transaction.coordinator.exceptions.CoordinatorException.InvalidTxnStatusException;
import org.apache.pulsar.transaction.coordinator.proto.TxnStatus;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.DisplayName;
import org.junit.jupiter.api.Test;

/**
 * The order of the commit chain: the outcome record is durable before the terminal log
 * entry, it is written in parallel with the end markers, and concurrent or failing ends
 * neither lose it nor multiply it.
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
    void writesTheRecordInParallelWithTheFinishingEntryAndTheMarkersAndBeforeTheTerminalEntry() {
        TxnID txn = openWithPartition();
        String key = CoordinatorHarness.key(txn);
        coordinator.transactionLog().holdAppends(op -> op.equals("COMMITTING"));

        CompletableFuture<Void> commit = coordinator.commit(txn, ALICE);
        await().atMost(Duration.ofSeconds(5)).until(() -> coordinator.transactionLog().heldAppendCount() == 1);
        assertThat(coordinator.callLog().calls()).as("the record does not wait for the finishing entry")
                .contains("state-write " + key);
        coordinator.transactionLog().releaseHeldAppends();
        await(commit);

        List<String> calls = coordinator.callLog().calls();
        assertThat(calls).containsSubsequence("state-write " + key, "log COMMITTED " + key);
        assertThat(calls).containsSubsequence("log COMMITTING " + key, "marker COMMIT " + PARTITION + " " + key,
                "log COMMITTED " + key);
        assertThat(coordinator.callLog().count("state-write " + key)).isEqualTo(1);
    }

    @Test
    void whenAnEndRacingTheOtherWayWroteItsRecordLastTheDecidedOutcomeIsWrittenAgainBeforeTheEnd() {
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
        assertThat(coordinator.stateTopic().newestRecordOf(txn).getOutcome())
                .isEqualTo(committed ? TxnOutcome.COMMITTED : TxnOutcome.ABORTED);

        coordinator.restart();

        assertThat(coordinator.preserver().find(txn).outcome()).isEqualTo(committed ? Outcome.COMMITTED
                : Outcome.ABORTED);
    }

    @Test
    void aSpeculativeRecordOfAnEndThatNeverHappenedIsShadowedAndThenReplaced() {
        TxnID txn = openWithPartition();
        coordinator.transactionLog().holdAppends(op -> op.equals("COMMITTING"));
        coordinator.commit(txn, ALICE);
        await().atMost(Duration.ofSeconds(5)).until(() -> coordinator.stateTopic().liveTransactions()
                .contains(CoordinatorHarness.key(txn)));

        coordinator.restart();

        assertThat(coordinator.preserver().find(txn).outcome()).as("restored stale record").isEqualTo(Outcome.COMMITTED);
        assertThat(coordinator.store().resolver().resolve(txn).resolution()).isEqualTo(Resolution.PENDING);
        await(coordinator.abort(txn, ALICE));
        assertThat(coordinator.preserver().find(txn).outcome()).isEqualTo(Outcome.ABORTED);
        assertThat(failureOf(coordinator.commit(txn, ALICE))).isInstanceOf(InvalidTxnStatusException.class);
        coordinator.restart();
        assertThat(coordinator.preserver().find(txn).outcome()).isEqualTo(Outcome.ABORTED);
    }

    @Test
    void neverAppendsTheTerminalEntryWhileTheRecordIsNotDurable() {
        TxnID txn = openWithPartition();
        String key = CoordinatorHarness.key(txn);
        coordinator.stateTopic().holdWrites();

        CompletableFuture<Void> commit = coordinator.commit(txn, ALICE);

        await().atMost(Duration.ofSeconds(5)).until(() -> coordinator.markerCount("COMMIT", PARTITION, txn) == 1);
        assertThat(coordinator.stateTopic().heldWriteCount()).isEqualTo(1);
        assertThat(coordinator.callLog().calls()).doesNotContain("log COMMITTED " + key);
        assertThat(commit).isNotDone();

        coordinator.stateTopic().releaseHeldWrites();

        await(commit);
        assertThat(coordinator.callLog().calls()).containsSubsequence("state-write " + key, "log COMMITTED " + key);
    }

    @Test
    void sendsTheMarkersWhileTheRecordIsBeingWritten() {
        TxnID txn = openWithPartition();
        coordinator.stateTopic().holdWrites();

        CompletableFuture<Void> commit = coordinator.commit(txn, ALICE);

        await().atMost(Duration.ofSeconds(5)).until(() -> coordinator.markerCount("COMMIT", PARTITION, txn) == 1);
        coordinator.stateTopic().releaseHeldWrites();
        await(commit);
    }

    @Test
    void aFailedRecordWriteFailsTheTerminalStepWithAnErrorTheBrokerRetries() {
        TxnID txn = openWithPartition();
        coordinator.stateTopic().failNextWrites(Integer.MAX_VALUE);
        await(coordinator.store().updateTxnStatus(txn, TxnStatus.COMMITTING, TxnStatus.OPEN, false));

        Throwable failure = failureOf(coordinator.store().updateTxnStatus(txn, TxnStatus.COMMITTED,
                TxnStatus.COMMITTING, false));

        assertThat(failure).isInstanceOf(PulsarClientException.BrokerPersistenceException.class);
        assertThat(coordinator.callLog().calls()).doesNotContain("log COMMITTED " + CoordinatorHarness.key(txn));
        assertThat(coordinator.store().resolver().resolve(txn).resolution()).isEqualTo(Resolution.FINISHING);
    }

    @Test
    void aFailedRecordWriteIsRetriedUntilDurableAndTheCommitThenSucceeds() {
        TxnID txn = openWithPartition();
        String key = CoordinatorHarness.key(txn);
        coordinator.stateTopic().failNextWrites(2);

        await(coordinator.commit(txn, ALICE));

        List<String> calls = coordinator.callLog().calls();
        assertThat(calls).containsSubsequence("state-write failed " + key, "state-write failed " + key,
                "state-write " + key, "log COMMITTED " + key);
        assertThat(calls.indexOf("log COMMITTED " + key)).isGreaterThan(calls.indexOf("state-write " + key));
        assertThat(coordinator.preserver().find(txn)).isNotNull();
        await(coordinator.commit(txn, ALICE));
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
        coordinator.commit(txn, ALICE);
        await().atMost(Duration.ofSeconds(5)).until(() -> coordinator.stateTopic().heldWriteCount() == 1);
        coordinator.stateTopic().dropHeldWrites();

        coordinator.restart();

        await().atMost(Duration.ofSeconds(5)).until(() -> coordinator.callLog().count("log COMMITTED " + key) == 1);
        assertThat(coordinator.store().resolver().resolve(txn).resolution()).isEqualTo(Resolution.KEPT);
        await(coordinator.commit(txn, ALICE));
        assertThat(coordinator.markerCount("ABORT", PARTITION, txn)).isZero();
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
}
