package io.github.txnpreserver.preserver;

import io.github.txnpreserver.config.PreserverConfig;
import io.github.txnpreserver.preserver.durability.DurabilityQueue;
import io.github.txnpreserver.preserver.durability.LogHold;
import io.github.txnpreserver.preserver.kept.BlockRecordCodec;
import io.github.txnpreserver.preserver.kept.KeptOutcome;
import io.github.txnpreserver.preserver.kept.Outcome;
import io.github.txnpreserver.preserver.kept.OutcomeBlock;
import io.github.txnpreserver.preserver.kept.OutcomeIndex;
import io.github.txnpreserver.preserver.kept.RecentAnswers;
import io.github.txnpreserver.preserver.kept.RestoredBlocks;
import io.github.txnpreserver.preserver.restore.Restorer;
import io.github.txnpreserver.preserver.stats.PreserverStats;
import io.github.txnpreserver.preserver.thread.CoordinatorThread;
import io.github.txnpreserver.preserver.thread.PreserverUnavailableException;
import io.github.txnpreserver.preserver.writer.CompactionPacing;
import io.github.txnpreserver.preserver.writer.StateTopicCompaction;
import io.github.txnpreserver.preserver.writer.StateTopicWriter;
import io.github.txnpreserver.preserver.writer.WriterState;
import io.github.txnpreserver.statetopic.MalformedRecordException;
import io.github.txnpreserver.statetopic.RecordPosition;
import io.github.txnpreserver.statetopic.StateTopic;
import io.github.txnpreserver.time.Scheduler;
import java.time.Duration;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import java.util.function.LongSupplier;
import java.util.function.Supplier;
import org.apache.pulsar.client.api.transaction.TxnID;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * Keeps the outcomes of one coordinator's ended transactions (PIP-255's
 * TransactionMetadataPreserver): in memory ({@link OutcomeIndex}) and durable in the
 * coordinator's compacted state topic ({@link StateTopicWriter}, {@link DurabilityQueue}),
 * restored when the coordinator opens ({@link Restorer}).
 *
 * <p><b>One owner.</b> All of that state belongs to the coordinator's thread
 * ({@link CoordinatorThread}): each public method hands its work to it as one task and
 * answers through a future, so nothing here takes a lock and every interleaving is an order
 * of tasks. The only state
 * read from other threads is what it publishes: its heap bytes and oldest droppable end time
 * (for the broker's memory bound) and its {@link PreserverFigures} (for metrics).
 *
 * <p><b>Restore.</b> The state topic is read in the background while the coordinator serves
 * new transactions; a lookup of a transaction that is not live waits for the restore's end,
 * at most {@link #RESTORE_WAIT}, then is answered "unavailable" (retryable).
 */
public final class TransactionMetadataPreserver {

    private static final Logger log = LoggerFactory.getLogger(TransactionMetadataPreserver.class);
    /**
     * Ended transactions whose log entries wait for their outcome to be durable (about 250
     * bytes each), beyond which a new end is refused with a retryable error: a minute at
     * 800 txn/s of a state topic unavailable.
     */
    public static final int MAX_UNDURABLE_ENDS = 50_000;
    /**
     * How long a change waits for others before its block is written: off every request's
     * path (the log holds the outcome meanwhile), so one message carries the ends of this
     * interval. At 50 ms a single client's commits measured p50 +9 % over stock, at 1 s +2 %
     * (docs/DESIGN.md, "Cost").
     */
    public static final Duration GROUP_COMMIT_INTERVAL = Duration.ofSeconds(1);
    /** How long a lookup waits for the restore: under the client's 30 s operation timeout. */
    public static final Duration RESTORE_WAIT = Duration.ofSeconds(20);
    /**
     * How long a lookup waits for a cold block's record (a read took 7.5 ms at the median and
     * 26 ms at the 99th percentile on a real broker: docs/performance.md), after which it is
     * answered "unavailable" (the client retries).
     */
    public static final Duration COLD_READ_WAIT = Duration.ofSeconds(5);
    /** How long a cold block back in memory waits before its record is read again after a failed read. */
    static final Duration COLD_PART_RETRY = Duration.ofSeconds(1);
    static final Duration TOPIC_CHECK_INTERVAL = Duration.ofSeconds(5);
    static final Duration FIGURES_INTERVAL = Duration.ofSeconds(1);

    private final long coordinatorId;
    private final PreserverConfig config;
    private final StateTopic stateTopic;
    private final OutcomeMemoryBudget budget;
    private final PreserverStats stats = new PreserverStats();
    private final OutcomeIndex index;
    private final DurabilityQueue queue = new DurabilityQueue();
    private final CompactionPacing pacing = new CompactionPacing();
    private final StateTopicWriter writer;
    private final CompletableFuture<Void> restored = new CompletableFuture<>();
    private final MemoryShare memory;
    private final StateTopicCompaction compaction;
    private Restorer restorer;
    private final ColdReads coldReads;
    private final LookUps lookUps;
    private final RecentAnswers recentAnswers = new RecentAnswers();
    private final LogHold logHold;
    private final CoordinatorThread thread;
    private volatile PreserverFigures figures = PreserverFigures.NONE;
    private volatile long highestSequenceInStateTopic = -1;

    /**
     * @param groupCommit how long a change waits for others before it is written ({@link #GROUP_COMMIT_INTERVAL})
     */
    public TransactionMetadataPreserver(long coordinatorId, PreserverConfig config, StateTopic stateTopic,
                                        Scheduler scheduler, OutcomeMemoryBudget budget, Duration groupCommit) {
        this.coordinatorId = coordinatorId;
        this.config = config;
        this.stateTopic = stateTopic;
        this.budget = budget;
        this.thread = new CoordinatorThread(coordinatorId, scheduler);
        this.index = new OutcomeIndex(config.persistCountPerClient(), config.maxKeptPerCoordinator(),
                config.persistTime().toMillis(), queue::changed);
        this.writer = new StateTopicWriter(coordinatorId, stateTopic, thread, index, queue, stats, pacing,
                groupCommit, index::isHolding);
        this.memory = new MemoryShare(coordinatorId, index, queue::isDurable, thread, budget, this::changed);
        this.compaction = new StateTopicCompaction(coordinatorId, stateTopic, thread, pacing);
        this.coldReads = new ColdReads(coordinatorId, stateTopic, thread, stats, COLD_READ_WAIT,
                index::coldRecordOf);
        this.lookUps = new LookUps(coordinatorId, index, coldReads, thread, stats, RESTORE_WAIT);
        index.readColdWith((blockIndex, position) -> thread.execute(() -> readColdPart(blockIndex)));
        stateTopic.onRecordsMoved((key, position) -> thread.execute(() -> recordMoved(key, position)));
        this.logHold = new LogHold(coordinatorId, index, queue);
    }

    // ---- opening and closing

    /**
     * Starts reading the state topic in the background. Blocks up to the one of the highest
     * sequence the log has allocated are held (not written, not dropped) until it is done.
     *
     * @param highestSequence the highest sequence id the coordinator's log has allocated
     * @return completes once the restore is done; fails only if the coordinator closes first
     */
    public CompletableFuture<Void> startRestore(LongSupplier highestSequence) {
        thread.execute(() -> {
            if (restorer != null) {
                return;
            }
            stats.restoreStartNanos = thread.nanoTime();
            stats.restoring = true;
            index.hold(highestSequence.getAsLong());
            restorer = new Restorer(coordinatorId, stateTopic, thread, stats, highestSequence,
                    () -> Math.max(0, budget.limitBytes() - budget.usedBytes()), config.persistCountPerClient(),
                    writer, this::finishRestore);
            restorer.read();
        });
        return restored;
    }

    /**
     * Completes once the restore is done; fails only if the coordinator closes first. Tests
     * read it through {@code PreserverInspection}: the store and the provider wait on
     * {@link #startRestore}'s future.
     */
    CompletableFuture<Void> whenRestored() {
        return restored;
    }

    /** Starts the periodic expiry, the check that the topic was not created again, compaction pacing and figures. */
    public void start() {
        thread.every(config.expireCheckInterval(), () -> {
            index.expire(thread.millis());
            changed();
        });
        thread.every(TOPIC_CHECK_INTERVAL, writer::checkTopicCreatedAgain);
        thread.every(CompactionPacing.CHECK_INTERVAL, this::paceCompaction);
        thread.every(FIGURES_INTERVAL, this::publishFigures);
    }

    /** How to close the coordinator here once its writer was fenced or this broker no longer owns it. */
    public void releaseCoordinatorWith(Supplier<CompletableFuture<Void>> release) {
        writer.releaseCoordinatorWith(release);
    }

    public CompletableFuture<Void> closeAsync() {
        CompletableFuture<Void> done = thread.close(() -> {
            try {
                if (restorer != null) {
                    restorer.close();
                }
                writer.close();
                // What waits for a record never runs: the log keeps those entries, the next owner replays them.
                queue.clear();
            } finally {
                // Whatever failed above, nobody waits for ever.
                restored.completeExceptionally(thread.closedError());
                lookUps.close();
                coldReads.close();
                recentAnswers.clear();
                memory.close();
            }
        });
        // The scheduler belongs to whoever made it (the provider shuts it down once closed).
        return done.thenCompose(ignored -> stateTopic.closeAsync());
    }

    // ---- the commit chain

    /**
     * Keeps the decided outcome of an end (its finishing entry is durable), before its
     * terminal entry; it is written with the next group. Called again (a retried terminal
     * step), it changes nothing.
     *
     * @return fails with {@link PreserverUnavailableException}, changing nothing, while
     *     {@link #MAX_UNDURABLE_ENDS} ended transactions wait for the state topic, or once closed
     */
    public CompletableFuture<Void> decide(TxnID txnId, Outcome outcome, String owner) {
        long sequence;
        try {
            sequence = sequenceOf(txnId);
        } catch (IllegalArgumentException e) {
            return CompletableFuture.failedFuture(e);
        }
        if (thread.isClosed()) {
            return CompletableFuture.failedFuture(thread.closedError());
        }
        int waiting = endsWaiting();
        if (waiting >= MAX_UNDURABLE_ENDS) {
            stats.endsRefusedWhileWaiting.increment();
            return CompletableFuture.failedFuture(new PreserverUnavailableException(waiting + " ended transactions"
                    + " of coordinator " + coordinatorId + " wait for the state topic " + stateTopic + "; retry later"));
        }
        // Answered before it is applied, the caller's next step (the terminal entry) need not
        // wait for this thread: whatever reads the outcome or releases the transaction's log
        // entries is queued after it, and if it is never applied (closed first, or it fails)
        // the log keeps the entries, so the next owner replays the outcome.
        // A kept outcome can change (a stale record of a transaction that was still open is
        // replaced): not answered from RecentAnswers from now on, nor by a lookup that read it
        // before this task runs.
        recentAnswers.forget(sequence);
        boolean queued = thread.defer(() -> {
            recentAnswers.forget(sequence);
            logHold.decided(sequence, outcome, owner, thread.millis());
            changed();
        });
        return queued ? CompletableFuture.completedFuture(null) : CompletableFuture.failedFuture(thread.closedError());
    }

    /**
     * Ended transactions waiting for the state topic, held blocks' aside (their wait is the
     * restore's or a cold read's, not the topic's), as the coordinator's thread last changed
     * it: a bound, not an exact count.
     */
    public int endsWaiting() {
        // Two fields read apart from their writer: never below 0.
        return Math.max(0, queue.waiting() - queue.waitingForHeld());
    }

    /**
     * The last sequence of the highest block of this coordinator its restore read in the state
     * topic (kept or deleted), -1 if none: set once the restore is done.
     */
    public long highestSequenceInStateTopic() {
        return highestSequenceInStateTopic;
    }

    /** Terminal steps are refused now: {@link #MAX_UNDURABLE_ENDS} ended transactions wait for the state topic. */
    public boolean refusesEnds() {
        return endsWaiting() >= MAX_UNDURABLE_ENDS;
    }

    /** A restore from the state topic is in progress: lookups of ended transactions wait for it. */
    public boolean restoring() {
        return stats.restoring;
    }

    /** The last restore's duration, in seconds; while one is in progress, its time so far. */
    public double restoreSeconds() {
        return stats.restoring
                ? (thread.nanoTime() - stats.restoreStartNanos) / 1e9
                : stats.restoreMillis / 1000.0;
    }

    /** The transaction's terminal entry is durable: its outcome is kept like any other. */
    public void ended(TxnID txnId) {
        thread.defer(() -> {
            index.ended(sequenceOf(txnId));
            publish();
        });
    }

    /**
     * The outcome of a terminal entry the transaction log still holds, met while the
     * coordinator replays it: its record may not have landed before the coordinator stopped.
     */
    public void keepFromLog(TxnID txnId, Outcome outcome, String owner, long endMillis) {
        thread.defer(() -> {
            // Noted in this task if it cannot be kept: the log's release is queued behind it.
            recentAnswers.forget(txnId.getLeastSigBits());
            try {
                logHold.replayed(sequenceOf(txnId), outcome, owner, endMillis);
            } catch (IllegalArgumentException notOurs) {
                logHold.notKept(txnId.getLeastSigBits(), notOurs);
            }
            changed();
        });
    }

    /**
     * The outcome of a terminal entry the log still holds could not be kept: its entries are
     * never released here, so the next owner replays it. The log calls it for an entry it could
     * not read; the preserver for an outcome it could not keep.
     */
    public void notKept(long sequence, Throwable cause) {
        thread.execute(() -> logHold.notKept(sequence, cause));
    }

    /**
     * Runs {@code action} on this coordinator's thread once the outcome of a transaction that
     * ended here is durable in the state topic: the transaction log releases its entries
     * through it. An action still waiting when the coordinator closes never runs: the log
     * keeps those entries, and the next owner replays them.
     */
    public void afterOutcomeDurable(long sequence, Runnable action) {
        thread.defer(() -> logHold.afterDurable(sequence, action));
    }

    /**
     * Runs {@code task} on this coordinator's thread after what is queued there now, unless
     * the coordinator closed by then.
     *
     * @return false if its thread was shut down: {@code task} will not run
     */
    public boolean execute(Runnable task) {
        return thread.execute(task);
    }

    /**
     * The kept outcome of a transaction the coordinator no longer has live, or null; counted
     * as a lookup when found. While the restore reads, waits for it (at most
     * {@link #RESTORE_WAIT}); fails with {@link PreserverUnavailableException} if it does not
     * end in time, the coordinator closes, or the transaction ended here but its outcome could
     * not be kept ({@link #notKept}).
     */
    public CompletableFuture<KeptOutcome> lookUp(TxnID txnId) {
        if (txnId.getMostSigBits() == coordinatorId && !thread.isClosed()) {
            KeptOutcome recent = recentAnswers.get(txnId.getLeastSigBits(), thread.nanoTime());
            // Near its time-to-live, the thread says whether it is still kept.
            if (recent != null && thread.millis() - recent.endTimeMillis() < config.persistTime().toMillis()
                    - RecentAnswers.MAX_AGE_NANOS / 1_000_000) {
                stats.keptLookups.increment();
                return CompletableFuture.completedFuture(recent);
            }
        }
        CompletableFuture<KeptOutcome> answer = new CompletableFuture<>();
        long started = recentAnswers.startLookUp(txnId.getLeastSigBits());
        answer.thenAccept(kept -> {
            if (kept != null) {
                recentAnswers.found(txnId.getLeastSigBits(), started, kept, thread.nanoTime());
            }
        });
        // Deferred: a transaction no longer live is asked about by a client's retry, which can
        // wait 10 ms more (its later lookups are answered from RecentAnswers), and by the
        // broker's timeout tracker, once for every transaction at its timeout: waking the
        // thread for each would cost more than the lookup.
        thread.answerDeferred(answer, () -> {
            if (txnId.getMostSigBits() == coordinatorId && logHold.isNotKept(txnId.getLeastSigBits())) {
                // Ended, outcome unknown here: "not found" would be wrong; the next owner replays it from the log.
                throw new PreserverUnavailableException("the outcome of " + txnId + " could not be kept by"
                        + " coordinator " + coordinatorId + "; its next owner replays it from the log");
            }
            lookUps.lookUp(txnId, answer);
        });
        return answer;
    }

    // ---- the cold tier

    /**
     * A cold block is back in memory (an end in it): its record is read and merged, and the
     * block is written whole only then. A failed read is read again; a record missing or
     * malformed (counted) leaves the block with what memory has.
     */
    private void readColdPart(long blockIndex) {
        // Asked each time: a terminated topic's carry-over moves the record meanwhile.
        RecordPosition position = index.coldRecordOf(blockIndex);
        if (thread.isClosed() || !index.isAwaitingCold(blockIndex) || position == null) {
            return;
        }
        coldReads.read(blockIndex, position).whenComplete((decoded, error) -> {
            if (thread.isClosed() || !index.isAwaitingCold(blockIndex)) {
                return;
            }
            if (error != null) {
                log.warn("Coordinator {}: could not read the cold record of block {}, which an end brought back"
                        + " into memory; reading it again in {} ms (its ends wait): {}", coordinatorId, blockIndex,
                        COLD_PART_RETRY.toMillis(), error.toString());
                thread.schedule(() -> readColdPart(blockIndex), COLD_PART_RETRY);
                return;
            }
            if (decoded == null && !position.equals(index.coldRecordOf(blockIndex))) {
                // The record moved meanwhile (a terminated topic carried over): read where it is now.
                readColdPart(blockIndex);
                return;
            }
            coldReads.forget(blockIndex);
            index.coldPartRead(blockIndex, decoded == null ? null : decoded.block(),
                    decoded == null ? null : decoded.owners());
            queue.holdReleased(index::isHeld);
            changed();
        });
    }

    /** A terminated topic's record was carried to a new position: the index points there from now on. */
    private void recordMoved(String key, RecordPosition position) {
        long blockIndex;
        try {
            blockIndex = BlockRecordCodec.blockIndexOf(key);
        } catch (MalformedRecordException notABlock) {
            return;
        }
        coldReads.forget(blockIndex);
        index.recordMoved(blockIndex, position);
    }

    // ---- restore, expiry, pacing

    private void finishRestore(RestoredBlocks read, long records, long blockRecords, long blockBytes,
                               long highestBlock) {
        if (thread.isClosed()) {
            return;
        }
        try {
            index.merge(read, thread.millis());
        } catch (RuntimeException | Error e) {
            // A merge that threw may have left the index in part merged. The hold stays, so no
            // outcome it did not merge is written over or answered "not found" (lookups wait,
            // then get "coordinator not found"), and the coordinator is opened again from its
            // log and its state topic, with a new index.
            writer.releaseForState("could not merge what its restore read", e);
            return;
        }
        queue.holdReleased(index::isHeld);
        stats.restoredRecords = records;
        // From the restore's start, its failed reads and their waits included: what lookups waited.
        stats.restoreMillis = TimeUnit.NANOSECONDS.toMillis(thread.nanoTime() - stats.restoreStartNanos);
        stats.restoreEndMillis = thread.millis();
        highestSequenceInStateTopic = highestBlock < 0 ? -1 : OutcomeBlock.lastSequenceOf(highestBlock);
        stats.restoring = false;
        index.expire(thread.millis());
        pacing.recordsRead(blockRecords, blockBytes);
        publish();
        publishFigures();
        log.info("Coordinator {}: restored {} kept transaction outcomes from {} state-topic records in {} ms"
                + " ({} malformed records skipped)", coordinatorId, index.size(), records, stats.restoreMillis,
                stats.malformedRecords.sum());
        restored.complete(null);
        lookUps.restoreDone();
        writer.restoreDone();
        budget.reclaim();
        paceCompaction();
    }

    /** Drops the outcomes past their time-to-live, from memory and from the state topic (also periodically). */
    public void expire() {
        thread.execute(() -> {
            index.expire(thread.millis());
            changed();
        });
    }

    /** Asks for the state topic's compaction threshold when {@link CompactionPacing} says it no longer fits. */
    void paceCompaction() {
        if (!thread.isClosed() && !index.isHolding() && writer.state() != WriterState.RELEASING) {
            compaction.pace(index.keyCount());
        }
    }

    /** The compaction threshold set on the state topic, or -1 if none was set. */
    long compactionThreshold() {
        return pacing.applied();
    }

    // ---- the memory bound

    /** Heap bytes of the kept outcomes, as last published. */
    public long keptBytes() {
        return memory.keptBytes();
    }

    /** Asks this coordinator to drop its oldest droppable block, on its thread. */
    public void evictOldestForMemory() {
        memory.evictOldestForMemory();
    }

    // ---- on the coordinator's thread

    /** A change was made: blocks go out with the next group; the memory bound is checked. */
    private void changed() {
        writer.requestFlush();
        publish();
        budget.reclaim();
    }

    private void publish() {
        memory.publish();
    }

    void publishFigures() {
        figures = PreserverFigures.of(index, thread.millis());
    }

    private long sequenceOf(TxnID txnId) {
        if (txnId.getMostSigBits() != coordinatorId || txnId.getLeastSigBits() < 0) {
            throw new IllegalArgumentException("Transaction " + txnId + " is not one of coordinator " + coordinatorId);
        }
        return txnId.getLeastSigBits();
    }

    // ---- read from any thread

    /** The figures as last published (at most a second old). */
    public PreserverFigures figures() {
        return figures;
    }

    /**
     * The figures as of now: published on the coordinator's thread after what is queued there.
     * Tests read it through {@code PreserverInspection}; the broker reads {@link #figures()},
     * published every {@link #FIGURES_INTERVAL}.
     */
    CompletableFuture<PreserverFigures> currentFigures() {
        CompletableFuture<PreserverFigures> current = new CompletableFuture<>();
        thread.answer(current, () -> {
            publishFigures();
            current.complete(figures);
        });
        return current;
    }

    public PreserverStats stats() {
        return stats;
    }

    public PreserverConfig config() {
        return config;
    }

    public long coordinatorId() {
        return coordinatorId;
    }

    public CoordinatorThread thread() {
        return thread;
    }

    /** On the coordinator's thread (tests). */
    void checkTopicCreatedAgain() {
        writer.checkTopicCreatedAgain();
    }
}
