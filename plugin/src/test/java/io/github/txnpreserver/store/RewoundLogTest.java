package io.github.txnpreserver.store;

import static io.github.txnpreserver.testing.Futures.await;
import static io.github.txnpreserver.testing.Futures.failureOf;
import static org.assertj.core.api.Assertions.assertThat;

import io.github.txnpreserver.preserver.TransactionMetadataPreserver;
import io.github.txnpreserver.preserver.kept.BlockRecordCodec;
import io.github.txnpreserver.preserver.kept.BlockRecords;
import io.github.txnpreserver.testing.CoordinatorHarness;
import java.time.Duration;
import java.util.Map;
import java.util.concurrent.CompletableFuture;
import org.apache.pulsar.client.api.transaction.TxnID;
import org.apache.pulsar.transaction.coordinator.exceptions.CoordinatorException.CoordinatorNotFoundException;
import org.apache.pulsar.transaction.coordinator.impl.MLTransactionSequenceIdGenerator;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.DisplayName;
import org.junit.jupiter.api.Test;

/**
 * A transaction log deleted and created again within the retention time: it starts over at
 * sequence 0 while the state topic keeps the old sequences' outcomes. Unguarded, a new
 * transaction got the id of a kept one, and a retry of the old one by the same role got the
 * new one's outcome.
 */
@DisplayName("A transaction log created again")
class RewoundLogTest {

    private static final String PARTITION = "persistent://public/default/rewound-0";
    private static final long MARGIN = 1L << 32;

    private final CoordinatorHarness coordinator = CoordinatorHarness.start(10, 100);

    @AfterEach
    void close() {
        coordinator.close();
    }

    private TxnID ended(String owner, boolean commit) {
        TxnID txn = coordinator.open(owner);
        coordinator.produce(txn, PARTITION);
        await(commit ? coordinator.commit(txn, owner) : coordinator.abort(txn, owner));
        coordinator.awaitRecordDurable(txn);
        return txn;
    }

    private void keptInStateTopic(String owner, long... sequences) {
        BlockRecords.committed(CoordinatorHarness.TC_ID, owner, CoordinatorHarness.START_MILLIS, sequences)
                .forEach(coordinator.stateTopic()::appendRaw);
    }

    private void assertCommitted(TxnID txn, String role) {
        await(coordinator.commit(txn, role));
        assertThat(failureOf(coordinator.abort(txn, role))).hasMessageContaining("COMMITTING");
    }

    @Test
    void issuesNoIdOfAKeptOutcomeAndAnswersTheOldTransactionsAsBefore() {
        TxnID first = ended("alice", true);
        TxnID second = ended("alice", false);

        coordinator.restartWithTheLogDeleted();
        TxnID next = coordinator.open("alice");

        assertThat(next.getLeastSigBits()).as("the first multiple of 2^32 past the kept block, not 0")
                .isEqualTo(MARGIN);
        coordinator.produce(next, PARTITION);
        await(coordinator.abort(next, "alice"));
        assertCommitted(first, "alice");
        await(coordinator.abort(second, "alice"));
        assertThat(failureOf(coordinator.commit(second, "alice"))).hasMessageContaining("ABORTING");
        assertThat(coordinator.preserver().stats().malformedRecords.sum()).isZero();
    }

    @Test
    void movesPastTheHighestBlockTheStateTopicKeepsToTheNextMultipleOfTheMargin() {
        keptInStateTopic("alice", 5 * 256 + 7, MARGIN + 3);

        coordinator.restartWithTheLogDeleted();
        TxnID next = coordinator.open("alice");

        assertThat(next.getLeastSigBits()).isEqualTo(2 * MARGIN);
        assertCommitted(new TxnID(CoordinatorHarness.TC_ID, 5 * 256 + 7), "alice");
        assertCommitted(new TxnID(CoordinatorHarness.TC_ID, MARGIN + 3), "alice");
    }

    @Test
    void aBlockEndingJustBeforeTheMarginMovesToTheMargin() {
        keptInStateTopic("alice", MARGIN - 1);

        coordinator.restartWithTheLogDeleted();

        assertThat(coordinator.open("alice").getLeastSigBits()).isEqualTo(MARGIN);
    }

    /** A deleted block's sequences were issued too: its tombstone, read before compaction removes it, counts. */
    @Test
    void aDeletedHighestBlockCountsAsIssued() {
        keptInStateTopic("alice", 7);
        coordinator.stateTopic().appendRaw(BlockRecordCodec.key(BlockRecordCodec.blockOf(MARGIN + 3)), null);

        coordinator.restartWithTheLogDeleted();

        assertThat(coordinator.open("alice").getLeastSigBits()).isEqualTo(2 * MARGIN);
    }

    /** A block past any log's reach is someone else's record: skipped and counted, never followed. */
    @Test
    void aBlockPastAnyPlausibleSequenceIsNotFollowed() {
        TxnID kept = ended("alice", true);
        keptInStateTopic("mallory", BlockRecordCodec.MAX_PLAUSIBLE_SEQUENCE + 4);

        coordinator.restartWithTheLogDeleted();
        TxnID next = coordinator.open("alice");

        assertThat(next.getLeastSigBits()).isEqualTo(MARGIN);
        assertThat(coordinator.preserver().stats().malformedRecords.sum()).isEqualTo(1);
        assertCommitted(kept, "alice");
    }

    @Test
    void aNewTransactionWaitsForANewLogsRestore() {
        TxnID kept = ended("alice", true);
        coordinator.stateTopic().holdReads();

        coordinator.restartWithTheLogDeleted();
        CompletableFuture<TxnID> next = coordinator.store().newTransaction(60_000, "alice");
        coordinator.scheduler().advance(TransactionMetadataPreserver.RESTORE_WAIT.minusSeconds(1));
        assertThat(next).as("waiting for the restore").isNotDone();
        coordinator.stateTopic().releaseReads();

        assertThat(await(next).getLeastSigBits()).isEqualTo(MARGIN);
        assertCommitted(kept, "alice");
    }

    /** Answered "coordinator not found" past the wait: the client looks the coordinator up again and retries. */
    @Test
    void aNewTransactionWaitingLongerThanTheRestoreWaitIsAnsweredCoordinatorNotFound() {
        TxnID kept = ended("alice", true);
        coordinator.stateTopic().holdReads();

        coordinator.restartWithTheLogDeleted();
        CompletableFuture<TxnID> waiting = coordinator.store().newTransaction(60_000, "alice");
        coordinator.scheduler().advance(TransactionMetadataPreserver.RESTORE_WAIT);

        assertThat(failureOf(waiting)).isInstanceOf(CoordinatorNotFoundException.class)
                .hasMessageContaining("its transaction log is new");
        assertThat(coordinator.transactionLog().maxLocalTxnId()).as("nothing issued").isNegative();
        coordinator.stateTopic().releaseReads();
        await(coordinator.restored());
        assertThat(coordinator.open("alice").getLeastSigBits()).isEqualTo(MARGIN);
        assertCommitted(kept, "alice");
    }

    @Test
    void aNewTransactionWaitingWhenTheCoordinatorClosesIsAnsweredCoordinatorNotFound() {
        ended("alice", true);
        coordinator.stateTopic().holdReads();
        coordinator.restartWithTheLogDeleted();
        CompletableFuture<TxnID> waiting = coordinator.store().newTransaction(60_000, "alice");

        coordinator.store().closeAsync().join();
        coordinator.stateTopic().releaseReads();

        assertThat(failureOf(waiting)).isInstanceOf(CoordinatorNotFoundException.class)
                .hasMessageContaining("closed");
    }

    /** Opened again before it issued anything, it moves to the same place: the move is its own record. */
    @Test
    void aNewLogOpenedTwiceBeforeIssuingMovesToTheSameSequence() {
        TxnID kept = ended("alice", true);
        coordinator.restartWithTheLogDeleted();
        await(coordinator.restored());

        coordinator.restart();

        assertThat(coordinator.open("alice").getLeastSigBits()).isEqualTo(MARGIN);
        assertCommitted(kept, "alice");
    }

    /** Once moved and issuing, it is a log with sequences: its later restores take the old blocks and its own. */
    @Test
    void aMovedLogKeepsItsOldAndNewBlocksAcrossRestarts() {
        TxnID old = ended("alice", true);
        coordinator.restartWithTheLogDeleted();
        TxnID moved = ended("alice", false);

        coordinator.restart();

        assertThat(coordinator.open("alice").getLeastSigBits()).isEqualTo(MARGIN + 1);
        assertCommitted(old, "alice");
        await(coordinator.abort(moved, "alice"));
        assertThat(coordinator.preserver().stats().malformedRecords.sum()).isZero();
    }

    /** A log with sequences issues at once, its restore in the background, as before. */
    @Test
    void aLogWithSequencesIssuesWithoutWaitingForItsRestore() {
        TxnID kept = ended("alice", true);
        coordinator.stateTopic().holdReads();

        coordinator.restartWithRestoreInBackground();
        TxnID next = coordinator.open("alice");

        assertThat(next.getLeastSigBits()).isEqualTo(kept.getLeastSigBits() + 1);
        coordinator.stateTopic().releaseReads();
        await(coordinator.restored());
        assertCommitted(kept, "alice");
    }

    /** A state topic whose highest kept sequence is 0 has issued one id: a new log moves past it too. */
    @Test
    void aStateTopicKeepingOnlySequenceZeroMovesANewLogToTheMargin() {
        MLTransactionSequenceIdGenerator generator = new MLTransactionSequenceIdGenerator();

        RewoundLogGuard.moveNewLog(CoordinatorHarness.TC_ID, 0, generator);

        assertThat(RewoundLogGuard.highestSequence(generator)).isEqualTo(MARGIN - 1);
    }

    @Test
    void aStateTopicKeepingNothingLeavesANewLogAsItIs() {
        MLTransactionSequenceIdGenerator generator = new MLTransactionSequenceIdGenerator();

        RewoundLogGuard.moveNewLog(CoordinatorHarness.TC_ID, -1, generator);

        assertThat(RewoundLogGuard.highestSequence(generator)).isEqualTo(-1);
    }

    /** The log's view of the sequences it allocated, through the properties it writes at roll-over. */
    @Test
    void theHighestSequenceIsTheLogsAndMinusOneForANewLog() {
        MLTransactionSequenceIdGenerator generator = new MLTransactionSequenceIdGenerator();
        generator.onManagedLedgerPropertiesInitialize(Map.of(MLTransactionSequenceIdGenerator.MAX_LOCAL_TXN_ID,
                "4711"));

        assertThat(RewoundLogGuard.highestSequence(generator)).isEqualTo(4711);
        assertThat(RewoundLogGuard.highestSequence(new MLTransactionSequenceIdGenerator())).isEqualTo(-1);
    }

    /**
     * The broker tells the max-active refusal by its class, unwrapped, and then sends no answer
     * (the client times out, as stock); wrapped, it would be answered as an error instead.
     */
    @Test
    void theMaxActiveRefusalReachesTheBrokerUnwrappedWhetherOrNotTheNewTransactionWaited() {
        try (CoordinatorHarness limited = CoordinatorHarness.start(
                new io.github.txnpreserver.config.PreserverConfig(10, 100, Duration.ofHours(72),
                        Duration.ofSeconds(300), Duration.ofSeconds(60)),
                (tcId, log, tracker, generator, maxActive, preserver, onClosed) ->
                        new PreservingTransactionMetadataStore(tcId, log, tracker, generator, 1, preserver,
                                onClosed))) {
            limited.open("alice");
            assertThat(refusalOf(limited.store().newTransaction(60_000, "alice"))).as("issuing at once")
                    .isInstanceOf(org.apache.pulsar.transaction.coordinator.exceptions.CoordinatorException
                            .ReachMaxActiveTxnException.class);

            limited.stateTopic().holdReads();
            limited.restartWithTheLogDeleted();
            CompletableFuture<TxnID> waited = limited.store().rewoundLogGuard().whenIssuing(() ->
                    CompletableFuture.failedFuture(new org.apache.pulsar.transaction.coordinator.exceptions
                            .CoordinatorException.ReachMaxActiveTxnException("limit")));
            assertThat(waited).isNotDone();
            limited.stateTopic().releaseReads();
            assertThat(refusalOf(waited)).as("after waiting for the restore")
                    .isInstanceOf(org.apache.pulsar.transaction.coordinator.exceptions.CoordinatorException
                            .ReachMaxActiveTxnException.class);
        }
    }

    /** What the future failed with, as the broker's {@code whenComplete} sees it. */
    private static Throwable refusalOf(CompletableFuture<TxnID> issued) {
        CompletableFuture<Throwable> seen = issued.handle((txn, error) -> error);
        return await(seen);
    }
}
