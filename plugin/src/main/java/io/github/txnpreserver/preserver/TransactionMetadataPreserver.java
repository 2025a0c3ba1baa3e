package io.github.txnpreserver.preserver;

import io.github.txnpreserver.config.PreserverConfig;
import io.github.txnpreserver.statetopic.CoordinatorMovedException;
import io.github.txnpreserver.statetopic.WriterFencedException;
import io.github.txnpreserver.statetopic.MalformedRecordException;
import io.github.txnpreserver.statetopic.StateRecordCodec;
import io.github.txnpreserver.statetopic.StateRecordCodec.StoredRecord;
import io.github.txnpreserver.statetopic.StateTopic;
import java.time.Clock;
import java.time.Duration;
import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.Iterator;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.Executor;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.RejectedExecutionException;
import java.util.concurrent.ScheduledExecutorService;
import java.util.concurrent.ScheduledFuture;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.function.Supplier;
import org.apache.pulsar.client.api.transaction.TxnID;
import org.apache.pulsar.common.util.FutureUtil;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * Keeps the outcomes of one coordinator's ended transactions (PIP-255's
 * TransactionMetadataPreserver): in memory ({@link KeptOutcomes}: by time, under the
 * broker's memory bound, with a per-client floor) and durable in the coordinator's
 * compacted state topic, one key per block of 256 sequences.
 *
 * <h2>Writing: one flush at a time</h2>
 * Every change marks its block dirty. One flush at a time sends every dirty block whole,
 * on this coordinator's executor; the changes made while it is in flight go out together
 * in the next one. Under load one message thus carries the ends of many transactions
 * (group commit), and alone each end costs one message. The state a block had when it was
 * sent is durable once its send lands; a failed send puts the block back (it is sent again,
 * with backoff), and whoever waited for it is told so, to retry.
 *
 * <h2>Restoring: in the background</h2>
 * When the coordinator opens, the state topic is read on a thread of its own while the
 * coordinator already serves: new transactions need none of it. A lookup of a transaction
 * that is not live waits until the restore is done ({@link #restored}), and blocks that
 * may hold outcomes not read yet are not written until then. Outcomes in earlier formats
 * are written into their blocks, and their keys deleted only once those blocks are durable.
 */
public final class TransactionMetadataPreserver implements OutcomeMemoryBudget.Member {

    private static final Logger log = LoggerFactory.getLogger(TransactionMetadataPreserver.class);
    private static final long FIRST_RETRY_DELAY_MILLIS = 100;
    /** Short, so that once the state topic is back every waiting end completes within seconds. */
    private static final long MAX_RETRY_DELAY_MILLIS = 5_000;
    /**
     * Ended transactions whose log entries wait for their outcome to be durable (about 250
     * bytes each), beyond which a new end is refused at once with a retryable error (the
     * broker retries it every second): a minute at 800 txn/s of a state topic unavailable.
     */
    public static final int MAX_UNDURABLE_ENDS = 50_000;
    /**
     * How long a change waits for others before its block is written: the write is off every
     * request's path (the log holds the outcome meanwhile), so under load one message carries
     * the ends of this interval, and a single end costs one message. Not shorter: each write
     * (with the log releases that follow it) shares the bookie journal and the broker's
     * threads with the commits; at 50 ms a single client's sequential commits measured p50
     * +9 % and p90 +16 % over stock, at 1 s +2 % and +0 % (docs/DESIGN.md).
     */
    public static final Duration GROUP_COMMIT_INTERVAL = Duration.ofSeconds(1);
    /** How often to check that the state topic was not deleted and created again empty. */
    static final Duration TOPIC_CHECK_INTERVAL = Duration.ofSeconds(5);
    private static final long REPORT_INTERVAL_SECONDS = 60;

    private final long coordinatorId;
    private final PreserverConfig config;
    private final StateTopic stateTopic;
    private final Clock clock;
    private final ScheduledExecutorService executor;
    private final OutcomeMemoryBudget budget;
    private final KeptOutcomes kept;
    private final PreserverStats stats = new PreserverStats();
    private final List<ScheduledFuture<?>> periodicTasks = new CopyOnWriteArrayList<>();
    private final CompletableFuture<Void> restored = new CompletableFuture<>();
    /** Actions waiting for the changes made before them to be durable, in the order they came. */
    private final ArrayDeque<AfterDurable> afterDurable = new ArrayDeque<>();
    /**
     * Actions that wait for changes held back while restoring (guarded by {@link #afterDurable}):
     * once the restore is done they wait, in {@link #afterDurable}, for every change made by then.
     */
    private final ArrayDeque<Runnable> afterRestore = new ArrayDeque<>();
    /** On the executor only: every change up to this generation is durable in the state topic. */
    private long durableThrough;
    /**
     * On the executor only: flushes drained before this generation cannot vouch for anything
     * (the state topic was created again, and lost what they wrote).
     */
    private long vouchFrom;
    /** On the executor only: the generation the flush in flight vouches for once it lands whole, or -1. */
    private long inFlightThrough = -1;
    private final long groupCommitMillis;
    private final AtomicBoolean flushScheduled = new AtomicBoolean();
    private final RateLimitedLog writeFailures = new RateLimitedLog(REPORT_INTERVAL_SECONDS, TimeUnit.SECONDS);
    private final RateLimitedLog memoryEvictions = new RateLimitedLog(REPORT_INTERVAL_SECONDS, TimeUnit.SECONDS);
    /** On the executor only. */
    private final CompactionPacing compactionPacing = new CompactionPacing();
    private final RateLimitedLog compactionThresholdFailures =
            new RateLimitedLog(REPORT_INTERVAL_SECONDS, TimeUnit.SECONDS);
    /** Written on the executor only; read by {@link #requestFlush} so that a flush in flight is not woken for. */
    private volatile boolean flushInFlight;
    /** On the executor only: the writer is being replaced, no flush starts meanwhile. */
    private boolean replacingWriter;
    /** On the executor only: the coordinator is being closed here (its writer was fenced); nothing is written. */
    private boolean releasing;
    /** On the executor only: a writer replacement waits for the restore to be done. */
    private boolean replaceAfterRestore;
    private long writerRetryDelayMillis;
    private final RateLimitedLog writerReplacements = new RateLimitedLog(REPORT_INTERVAL_SECONDS, TimeUnit.SECONDS);
    private final RateLimitedLog writerReplacementFailures =
            new RateLimitedLog(REPORT_INTERVAL_SECONDS, TimeUnit.SECONDS);
    private volatile Supplier<CompletableFuture<Void>> onCoordinatorMoved =
            () -> CompletableFuture.completedFuture(null);
    private long flushRetryDelayMillis;
    private long flushNotBeforeNanos;
    private volatile boolean closed;

    /** A preserver with a memory bound of its own that writes each change at once (tests, tools). */
    public TransactionMetadataPreserver(long coordinatorId, PreserverConfig config, StateTopic stateTopic,
                                        Clock clock, ScheduledExecutorService executor) {
        this(coordinatorId, config, stateTopic, clock, executor, new OutcomeMemoryBudget(config.maxMemoryBytes()),
                Duration.ZERO);
    }

    /** @param groupCommit how long a change waits for others before it is written ({@link #GROUP_COMMIT_INTERVAL}) */
    public TransactionMetadataPreserver(long coordinatorId, PreserverConfig config, StateTopic stateTopic,
                                        Clock clock, ScheduledExecutorService executor, OutcomeMemoryBudget budget,
                                        Duration groupCommit) {
        this.groupCommitMillis = groupCommit.toMillis();
        this.coordinatorId = coordinatorId;
        this.config = config;
        this.stateTopic = stateTopic;
        this.clock = clock;
        this.executor = executor;
        this.budget = budget;
        this.kept = new KeptOutcomes(coordinatorId, config.persistCountPerClient(),
                config.maxKeptPerCoordinator(), config.persistTime().toMillis());
        budget.register(this);
    }

    private record AfterDurable(long generation, Runnable action) {
    }

    // ---- opening

    /**
     * Starts reading the state topic in the background. Blocks up to the one of
     * {@code frontierSequence} (the highest sequence the transaction log has allocated) are
     * not written until it is done.
     *
     * @return completes once the restore is done (never fails: a failed read is retried)
     */
    public CompletableFuture<Void> startRestore(long frontierSequence) {
        kept.beginRestore(frontierSequence);
        readStateTopic(FIRST_RETRY_DELAY_MILLIS);
        return restored;
    }

    /** Restores everything before serving anything (tests and tools): no block is written until it is done. */
    public CompletableFuture<Void> restore() {
        return startRestore(Long.MAX_VALUE);
    }

    /** Completes once the restore is done; fails if the coordinator closed first. */
    public CompletableFuture<Void> restored() {
        return restored;
    }

    public boolean isRestoring() {
        return !restored.isDone();
    }

    /**
     * Starts the periodic expiry, the periodic check that the state topic was not created
     * again, and the pacing of its compaction.
     */
    public void start() {
        scheduleWithFixedDelay(this::expire, config.expireCheckInterval());
        scheduleWithFixedDelay(this::checkTopicCreatedAgain, TOPIC_CHECK_INTERVAL);
        scheduleWithFixedDelay(this::paceCompaction, CompactionPacing.CHECK_INTERVAL);
    }

    /**
     * Runs a task periodically on this coordinator's preserver executor until close; a task
     * that throws is logged and runs again at its next time.
     */
    public void scheduleWithFixedDelay(Runnable task, Duration interval) {
        long millis = interval.toMillis();
        periodicTasks.add(executor.scheduleWithFixedDelay(() -> runSafely(task), millis, millis,
                TimeUnit.MILLISECONDS));
    }

    /**
     * How to close the coordinator here, once its state-topic writer was fenced by another
     * or this broker no longer owns it: its clients then look it up again.
     */
    public void releaseCoordinatorWith(Supplier<CompletableFuture<Void>> release) {
        onCoordinatorMoved = release;
    }

    /** The single thread on which this coordinator's periodic work and writes run. */
    public Executor executor() {
        return executor;
    }

    // ---- the commit chain

    /**
     * Keeps the decided outcome of an end (its finishing entry is durable) in memory, before
     * its terminal entry; it is written with the next group. Called again (a retried
     * terminal step), it changes nothing.
     *
     * @return fails at once, changing nothing, while {@link #MAX_UNDURABLE_ENDS} ended
     *     transactions wait for the state topic (the caller's retry comes back later)
     */
    public CompletableFuture<Void> decide(TxnID txnId, Outcome outcome, String owner) {
        if (closed) {
            return CompletableFuture.failedFuture(new IllegalStateException("coordinator " + coordinatorId
                    + " closed"));
        }
        int waiting = afterDurableCount();
        if (waiting >= MAX_UNDURABLE_ENDS) {
            stats.endsRefusedWhileWaiting.increment();
            return CompletableFuture.failedFuture(new IllegalStateException(waiting + " ended transactions of"
                    + " coordinator " + coordinatorId + " wait for the state topic " + stateTopic + "; retry later"));
        }
        kept.decide(txnId, outcome, owner, clock.millis());
        changed();
        return CompletableFuture.completedFuture(null);
    }

    /**
     * The outcome of a terminal entry that the transaction log still holds, met while the
     * coordinator replays it: its record may not have landed before the coordinator stopped.
     */
    public void keepFromLog(TxnID txnId, Outcome outcome, String owner, long endMillis) {
        kept.decide(txnId, outcome, owner, endMillis);
        kept.ended(txnId);
        changed();
    }

    /** The transaction's terminal entry is durable: the outcome is kept like any other. */
    public void ended(TxnID txnId) {
        kept.ended(txnId);
    }

    /** Decides, ends and makes durable in one step (tests and tools: no log between). */
    public CompletableFuture<Void> preserve(TxnID txnId, Outcome outcome, String owner) {
        return decide(txnId, outcome, owner).thenCompose(kept -> {
            ended(txnId);
            CompletableFuture<Void> durable = new CompletableFuture<>();
            afterChangesDurable(() -> durable.complete(null));
            return durable;
        });
    }

    /**
     * Runs {@code action} once every change made so far is durable in the state topic (or
     * superseded: a dropped block's tombstone landed), on this coordinator's executor.
     * Actions still waiting when the coordinator closes never run.
     */
    public void afterChangesDurable(Runnable action) {
        enqueue(action, -1);
    }

    /**
     * Runs {@code action} once the outcome of a transaction that ended here (kept, or kept
     * from the log) is durable in the state topic, on this coordinator's executor: the
     * transaction log releases the transaction's entries through it. Only an outcome in a
     * block held back while restoring waits for the restore. Actions still waiting when the
     * coordinator closes never run: the log keeps those entries, and the next owner replays them.
     */
    public void afterOutcomeDurable(long sequence, Runnable action) {
        enqueue(action, sequence);
    }

    /** @param sequence the transaction whose outcome the action waits for, or -1 for every change */
    private void enqueue(Runnable action, long sequence) {
        boolean idle;
        synchronized (afterDurable) {
            if (closed) {
                return;
            }
            // Checked under the lock the restore's end takes to move what waits for it.
            long generation = kept.generationUnlessHeldBack(sequence);
            if (generation < 0) {
                afterRestore.add(action);
                return;
            }
            afterDurable.add(new AfterDurable(generation, action));
            idle = !flushInFlight && !flushScheduled.get();
        }
        if (idle) {
            runOnExecutor(this::runDurableActions);
        }
    }

    /**
     * Releases waiting for the state topic. Those waiting for the restore do not count: the
     * replay queues one per ended transaction the log still holds, and they must not refuse
     * the ends of new transactions while the restore reads.
     */
    private int afterDurableCount() {
        synchronized (afterDurable) {
            return afterDurable.size();
        }
    }

    /** A change was made: its block goes out with the next group. */
    private void changed() {
        if (kept.hasDirty()) {
            requestFlush();
            budget.reclaim();
        }
    }

    /** The kept outcome of a transaction, or null if none is kept. Never blocks. */
    public KeptOutcome find(TxnID txnId) {
        return kept.get(txnId);
    }

    /** The kept outcome of a transaction the coordinator no longer has live, counted as a lookup. */
    public KeptOutcome lookUp(TxnID txnId) {
        KeptOutcome keptOutcome = kept.get(txnId);
        if (keptOutcome != null) {
            stats.keptLookups.increment();
        }
        return keptOutcome;
    }

    /** Drops the outcomes past their time-to-live, from memory and from the state topic. */
    public void expire() {
        kept.expire(clock.millis());
        if (kept.hasDirty()) {
            requestFlush();
        }
    }

    public long keptCount() {
        return kept.size();
    }

    public KeptOutcomes keptOutcomes() {
        return kept;
    }

    public PreserverStats stats() {
        return stats;
    }

    public long coordinatorId() {
        return coordinatorId;
    }

    public Clock clock() {
        return clock;
    }

    /** Age of the oldest outcome kept in the window, by this preserver's clock. */
    public long windowMillis() {
        return kept.windowMillis(clock.millis());
    }

    public OutcomeMemoryBudget budget() {
        return budget;
    }

    /**
     * A state topic deleted under its writer comes back empty when the producer reconnects,
     * with no failed write to tell: every kept block is written into it again.
     */
    void checkTopicCreatedAgain() {
        if (closed || replacingWriter || isRestoring()) {
            return;
        }
        stateTopic.checkCreatedAgain().whenComplete((createdAgain, error) -> {
            if (error != null) {
                log.debug("Coordinator {}: could not check state topic {}: {}", coordinatorId, stateTopic,
                        error.toString());
            } else if (createdAgain) {
                runOnExecutor(() -> {
                    rewriteEveryBlock();
                    requestFlush();
                });
            }
        });
    }

    /**
     * Sets the state topic's compaction threshold to the size of its compacted view, when
     * {@link CompactionPacing} says it no longer fits. Runs on the executor.
     */
    void paceCompaction() {
        if (closed || releasing || isRestoring()) {
            return;
        }
        CompactionPacing.Request request = compactionPacing.nextRequest(kept.keyCount());
        if (request == null) {
            return;
        }
        CompletableFuture<Boolean> answer;
        try {
            answer = stateTopic.setCompactionThreshold(request.bytes());
        } catch (RuntimeException e) {
            answer = CompletableFuture.failedFuture(e);
        }
        answer.whenComplete((set, error) -> runOnExecutor(() -> compactionThresholdAnswered(request, set, error)));
    }

    private void compactionThresholdAnswered(CompactionPacing.Request request, Boolean set, Throwable error) {
        if (error != null) {
            if (compactionPacing.failed(request)) {
                compactionThresholdFailures.occurred(1, count -> log.warn("Coordinator {}: could not set the"
                        + " compaction threshold of state topic {} ({} times in the last {} s; last: {}); asked"
                        + " again later, the broker compacts it every minute meanwhile", coordinatorId,
                        stateTopic, count, REPORT_INTERVAL_SECONDS, error.toString()));
            }
        } else if (set) {
            if (compactionPacing.applied(request)) {
                log.info("Coordinator {}: state topic {} is compacted once {} MiB of new records have accumulated"
                        + " (its compacted view: about {} KiB in {} records)", coordinatorId, stateTopic,
                        request.bytes() >> 20, compactionPacing.estimatedViewBytes(kept.keyCount()) >> 10,
                        kept.keyCount());
            }
        } else if (compactionPacing.unsupported(request)) {
            log.warn("Coordinator {}: state topic {} takes no compaction threshold (topic-level policies are off:"
                    + " topicLevelPoliciesEnabled or systemTopicEnabled is false), so the broker compacts it every"
                    + " brokerServiceCompactionMonitorIntervalInSeconds it has new records, each time reading and"
                    + " rewriting every kept block", coordinatorId, stateTopic);
        }
    }

    /** The compaction threshold set on the state topic, or -1 if none was set. */
    long compactionThreshold() {
        return compactionPacing.applied();
    }

    /** The state topic was created again and has lost its records: every kept block is written into it. */
    private void rewriteEveryBlock() {
        compactionPacing.reset();
        int blocks = kept.markAllDirty();
        // What flushes wrote before is gone: only the rewrite vouches for it again.
        vouchFrom = kept.generation();
        log.warn("Coordinator {}: state topic {} was created again; writing its {} kept blocks into it",
                coordinatorId, stateTopic, blocks);
    }

    // ---- the memory bound

    @Override
    public long keptBytes() {
        return kept.bytes();
    }

    @Override
    public Long oldestEvictableMillis() {
        return closed ? null : kept.oldestEvictableMillis();
    }

    @Override
    public boolean evictOldestForMemory() {
        int dropped = kept.evictOldest();
        if (dropped < 0) {
            return false;
        }
        requestFlush();
        if (dropped > 0) {
            memoryEvictions.occurred(dropped, count -> log.warn("Coordinator {}: the memory bound of {} MiB"
                    + " ({} in broker.conf) dropped {} kept outcomes in the last {} s before their time-to-live;"
                    + " retries of transactions that ended more than {} s ago may now get TransactionNotFound",
                    coordinatorId, budget.limitBytes() >> 20, PreserverConfig.MAX_MEMORY_IN_MB, count,
                    REPORT_INTERVAL_SECONDS, kept.windowMillis(clock.millis()) / 1000));
        }
        return true;
    }

    public CompletableFuture<Void> closeAsync() {
        closed = true;
        periodicTasks.forEach(task -> task.cancel(false));
        executor.shutdown();
        budget.unregister(this);
        IllegalStateException closing = new IllegalStateException("coordinator " + coordinatorId + " closed");
        restored.completeExceptionally(closing);
        synchronized (afterDurable) {
            // Never run: the log keeps those entries, and the next owner replays them.
            afterDurable.clear();
            afterRestore.clear();
        }
        kept.clear();
        return stateTopic.closeAsync();
    }

    // ---- flushing

    private void requestFlush() {
        // A flush in flight looks for dirty blocks when it lands (the change was made first).
        if (closed || flushInFlight || !flushScheduled.compareAndSet(false, true)) {
            return;
        }
        try {
            if (groupCommitMillis > 0) {
                executor.schedule(this::flush, groupCommitMillis, TimeUnit.MILLISECONDS);
            } else {
                executor.execute(this::flush);
            }
        } catch (RejectedExecutionException shuttingDown) {
            flushScheduled.set(false);
        }
    }

    /**
     * Runs the actions whose changes are all durable. When no flush is in flight and no block
     * is dirty, every change made so far has landed. Runs on the executor.
     */
    private void runDurableActions() {
        if (closed) {
            return;
        }
        if (!flushInFlight) {
            vouch(kept.generationIfDrained());
        }
        List<Runnable> ready = new ArrayList<>();
        synchronized (afterDurable) {
            while (!afterDurable.isEmpty() && afterDurable.peekFirst().generation() <= durableThrough) {
                ready.add(afterDurable.pollFirst().action());
            }
        }
        ready.forEach(this::runSafely);
    }

    /** Every change up to {@code through} is durable (-1: nothing to vouch for). */
    private void vouch(long through) {
        if (through >= vouchFrom) {
            durableThrough = Math.max(durableThrough, through);
        }
    }

    /** Sends every dirty block; runs on the executor, one flush at a time. */
    private void flush() {
        flushScheduled.set(false);
        if (closed || flushInFlight || replacingWriter || releasing) {
            return;
        }
        long waitNanos = flushNotBeforeNanos - System.nanoTime();
        if (waitNanos > 0) {
            if (flushScheduled.compareAndSet(false, true)) {
                executor.schedule(this::flush, waitNanos, TimeUnit.NANOSECONDS);
            }
            return;
        }
        List<KeptOutcomes.BlockWrite> batch = kept.drainDirty();
        if (batch.isEmpty()) {
            runDurableActions();
            return;
        }
        // Blocks held back while restoring stay dirty: what waits for them waits for the restore.
        inFlightThrough = kept.lastDrainGeneration();
        flushInFlight = true;
        long startNanos = System.nanoTime();
        List<CompletableFuture<Void>> sends = new ArrayList<>(batch.size());
        for (KeptOutcomes.BlockWrite write : batch) {
            String key = StateRecordCodec.blockKey(write.blockIndex());
            CompletableFuture<Void> send;
            try {
                if (write.recordOrNull() == null) {
                    send = stateTopic.delete(key);
                } else {
                    byte[] record = StateRecordCodec.encodeBlock(write.recordOrNull());
                    compactionPacing.recordSeen(record.length);
                    send = stateTopic.write(key, record);
                }
            } catch (RuntimeException e) {
                // Handled as a failed send: the block is put back and written again.
                send = CompletableFuture.failedFuture(e);
            }
            sends.add(send);
        }
        stateTopic.flush();
        CompletableFuture.allOf(sends.toArray(new CompletableFuture[0])).whenComplete((ignored, error) -> {
            try {
                executor.execute(() -> flushed(batch, sends, startNanos));
            } catch (RejectedExecutionException shuttingDown) {
                log.debug("Coordinator {}: closed while a flush was in flight", coordinatorId);
            }
        });
    }

    private void flushed(List<KeptOutcomes.BlockWrite> batch, List<CompletableFuture<Void>> sends, long startNanos) {
        flushInFlight = false;
        stats.stateWriteLatency.recordNanos(System.nanoTime() - startNanos);
        Throwable failure = null;
        for (int i = 0; i < batch.size(); i++) {
            KeptOutcomes.BlockWrite write = batch.get(i);
            CompletableFuture<Void> send = sends.get(i);
            if (send.isCompletedExceptionally()) {
                failure = FutureUtil.unwrapCompletionException(send.handle((ok, e) -> e).join());
                kept.failed(write);
                stats.recordWriteFailures.increment();
            }
        }
        if (failure == null) {
            vouch(inFlightThrough);
        }
        inFlightThrough = -1;
        runDurableActions();
        StateTopic.WriteFailure kind = worstFailure(sends);
        if (kind == StateTopic.WriteFailure.FENCED) {
            releaseCoordinator(failure);
            return;
        }
        if (kind == StateTopic.WriteFailure.LOST || kind == StateTopic.WriteFailure.STUCK) {
            replaceWriter(failure);
            return;
        }
        if (failure != null) {
            flushRetryDelayMillis = flushRetryDelayMillis == 0 ? FIRST_RETRY_DELAY_MILLIS
                    : Math.min(2 * flushRetryDelayMillis, MAX_RETRY_DELAY_MILLIS);
            flushNotBeforeNanos = System.nanoTime() + TimeUnit.MILLISECONDS.toNanos(flushRetryDelayMillis);
            Throwable reported = failure;
            writeFailures.occurred(1, count -> log.warn("Coordinator {}: {} state-topic flushes failed in the last"
                    + " {} s (last: {}); the blocks are written again, ends wait for them", coordinatorId, count,
                    REPORT_INTERVAL_SECONDS, reported.toString()));
        } else {
            flushRetryDelayMillis = 0;
        }
        if (kept.hasDirty()) {
            requestFlush();
        }
    }

    /**
     * The writer can write no more, or is wedged: it is replaced (after checking that this
     * broker still owns the coordinator), and the blocks are sent again with the new one;
     * all of them if the topic had to be created again. Runs on the executor.
     */
    private void replaceWriter(Throwable cause) {
        if (closed || replacingWriter || releasing) {
            return;
        }
        if (isRestoring()) {
            // The topic may be terminated: it is read first, then replaced (deleted and
            // created again), so that nothing it holds is lost.
            if (!replaceAfterRestore) {
                replaceAfterRestore = true;
                restored.whenComplete((done, error) -> runOnExecutor(() -> {
                    replaceAfterRestore = false;
                    replaceWriter(cause);
                }));
            }
            return;
        }
        startReplacingWriter(cause, false);
    }

    /**
     * The restore's barrier could not be written because the writer was lost: the restore
     * cannot end without a new one, and the replacement that other failures ask for waits
     * for the restore. Replaced now, in the way that deletes nothing not read yet.
     */
    private void replaceWriterToRestore(Throwable cause) {
        if (closed || replacingWriter || releasing || !isRestoring()) {
            return;
        }
        startReplacingWriter(cause, true);
    }

    private void startReplacingWriter(Throwable cause, boolean unread) {
        replacingWriter = true;
        stats.writerReplacements.increment();
        writerReplacements.occurred(1, count -> log.warn("Coordinator {}: replacing the writer of state topic {}"
                + " ({} time(s) in the last {} s; last cause: {})", coordinatorId, stateTopic, count,
                REPORT_INTERVAL_SECONDS, FutureUtil.unwrapCompletionException(cause).toString()));
        CompletableFuture<Boolean> reopened;
        try {
            reopened = stateTopic.reopen(unread);
        } catch (RuntimeException e) {
            reopened = CompletableFuture.failedFuture(e);
        }
        reopened.whenComplete((recreated, error) -> runOnExecutor(() -> writerReplaced(recreated, error)));
    }

    private void writerReplaced(Boolean recreated, Throwable error) {
        replacingWriter = false;
        if (closed) {
            return;
        }
        if (error == null) {
            writerRetryDelayMillis = 0;
            flushRetryDelayMillis = 0;
            flushNotBeforeNanos = 0;
            if (recreated) {
                rewriteEveryBlock();
            }
            requestFlush();
            return;
        }
        Throwable cause = FutureUtil.unwrapCompletionException(error);
        if (cause instanceof CoordinatorMovedException || cause instanceof WriterFencedException) {
            releaseCoordinator(cause);
            return;
        }
        retryReplacingWriter(cause);
    }

    /**
     * Another writer took the state topic over, or this broker no longer owns the
     * coordinator: the coordinator closes here, as the broker closes it when a new owner
     * fences its transaction log. Its clients' retries get "coordinator not found", look
     * it up again and reconnect: to the new owner, or to this broker, which then opens the
     * coordinator again through the broker's own path (fencing the other writer in turn,
     * restoring, re-driving what was finishing). Fencing back from here could fence a new
     * owner that this broker does not know of yet.
     */
    private void releaseCoordinator(Throwable cause) {
        if (closed || releasing) {
            return;
        }
        releasing = true;
        stats.writerReplacements.increment();
        log.warn("Coordinator {}: the writer of state topic {} can write no more ({}); closing the coordinator"
                + " here, to be opened again where it is owned", coordinatorId, stateTopic,
                FutureUtil.unwrapCompletionException(cause).toString());
        askToRelease(cause);
    }

    private void askToRelease(Throwable cause) {
        if (closed) {
            return;
        }
        CompletableFuture<Void> released;
        try {
            released = onCoordinatorMoved.get();
        } catch (RuntimeException e) {
            released = CompletableFuture.failedFuture(e);
        }
        released.whenComplete((ignored, error) -> {
            if (error != null) {
                // The broker was busy with the coordinator (loading it): ask again shortly;
                // nothing is written meanwhile.
                retry(() -> askToRelease(cause));
            }
        });
    }

    private void retry(Runnable task) {
        try {
            executor.schedule(task, FIRST_RETRY_DELAY_MILLIS * 10, TimeUnit.MILLISECONDS);
        } catch (RejectedExecutionException shuttingDown) {
            log.debug("Coordinator {}: closed", coordinatorId);
        }
    }

    private void retryReplacingWriter(Throwable cause) {
        writerRetryDelayMillis = writerRetryDelayMillis == 0 ? FIRST_RETRY_DELAY_MILLIS
                : Math.min(2 * writerRetryDelayMillis, MAX_RETRY_DELAY_MILLIS);
        writerReplacementFailures.occurred(1, count -> log.warn("Coordinator {}: could not replace the writer of state"
                + " topic {} ({} time(s) in the last {} s; last: {}); trying again", coordinatorId, stateTopic,
                count, REPORT_INTERVAL_SECONDS, cause.toString()));
        try {
            executor.schedule(() -> replaceWriter(cause), writerRetryDelayMillis, TimeUnit.MILLISECONDS);
        } catch (RejectedExecutionException shuttingDown) {
            log.debug("Coordinator {}: not replacing the writer, closed", coordinatorId);
        }
    }

    /**
     * What the failed sends of a flush say, the gravest first: one fenced send means the
     * writer was fenced, whatever the others say.
     */
    private StateTopic.WriteFailure worstFailure(List<CompletableFuture<Void>> sends) {
        StateTopic.WriteFailure worst = null;
        for (CompletableFuture<Void> send : sends) {
            if (send.isCompletedExceptionally()) {
                StateTopic.WriteFailure kind = stateTopic.classify(send.handle((ok, e) -> e).join());
                if (worst == null || kind.ordinal() > worst.ordinal()) {
                    worst = kind;
                }
            }
        }
        return worst;
    }

    // ---- restoring

    private void readStateTopic(long retryDelayMillis) {
        if (closed || releasing) {
            return;
        }
        long startNanos = System.nanoTime();
        RestoredOutcomes read = new RestoredOutcomes();
        long[] records = new long[1];
        /* Block records read, and their bytes: the mean size of a record, for the compaction's pacing. */
        long[] blockRecords = new long[2];
        ExecutorService reader = Executors.newSingleThreadExecutor(runnable -> {
            Thread thread = new Thread(runnable, "txn-preserver-restore-" + coordinatorId);
            thread.setDaemon(true);
            return thread;
        });
        stateTopic.readToEnd((key, value) -> {
            records[0]++;
            if (value != null && key != null && StateRecordCodec.isBlockKey(key)) {
                blockRecords[0]++;
                blockRecords[1] += value.length;
            }
            collect(read, key, value);
        }, reader).whenComplete((ignored, error) -> {
            reader.shutdown();
            if (error == null) {
                runOnExecutor(() -> finishRestore(read, records[0], blockRecords, startNanos));
                return;
            }
            if (closed) {
                return;
            }
            log.warn("Coordinator {}: could not read its state topic {}; retrying in {} ms (lookups of ended"
                    + " transactions wait): {}", coordinatorId, stateTopic, retryDelayMillis,
                    FutureUtil.unwrapCompletionException(error).toString());
            StateTopic.WriteFailure kind = stateTopic.classify(error);
            if (kind == StateTopic.WriteFailure.FENCED) {
                runOnExecutor(() -> releaseCoordinator(error));
                return;
            }
            if (kind != StateTopic.WriteFailure.TRANSIENT) {
                runOnExecutor(() -> replaceWriterToRestore(error));
            }
            try {
                executor.schedule(() -> readStateTopic(Math.min(2 * retryDelayMillis, MAX_RETRY_DELAY_MILLIS)),
                        retryDelayMillis, TimeUnit.MILLISECONDS);
            } catch (RejectedExecutionException shuttingDown) {
                log.debug("Coordinator {}: not retrying the restore, closed", coordinatorId);
            }
        });
    }

    private void finishRestore(RestoredOutcomes read, long records, long[] blockRecords, long startNanos) {
        if (closed) {
            return;
        }
        List<KeptOutcomes.BlockWrite> migrated = kept.mergeRestored(read, clock.millis());
        synchronized (afterDurable) {
            // The held-back blocks are written from now on: what waited for them waits for
            // everything made by now.
            long now = kept.generation();
            afterRestore.forEach(action -> afterDurable.add(new AfterDurable(now, action)));
            afterRestore.clear();
        }
        List<String> legacyKeys = read.legacyKeys();
        stats.restoredRecords = records;
        stats.restoreMillis = TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - startNanos);
        restored.complete(null);
        kept.expire(clock.millis());
        requestFlush();
        budget.reclaim();
        compactionPacing.recordsRead(blockRecords[0], blockRecords[1]);
        if (!legacyKeys.isEmpty()) {
            // Copied first, deleted after: a crash in between leaves both, and the next
            // restore reads the same outcomes from either.
            afterChangesDurable(() -> legacyKeys.forEach(key -> deleteUntilDurable(key, FIRST_RETRY_DELAY_MILLIS)));
        }
        log.info("Coordinator {}: restored {} kept transaction outcomes from {} state-topic records in {} ms"
                + " ({} malformed records skipped, {} outcomes of earlier formats moved into {} blocks)",
                coordinatorId, kept.size(), records, stats.restoreMillis, stats.malformedRecords.sum(),
                legacyKeys.size(), migrated.size());
        paceCompaction();
    }

    private void collect(RestoredOutcomes read, String key, byte[] value) {
        try {
            if (key == null || key.isEmpty()) {
                throw new MalformedRecordException("entry has no key");
            }
            if (StateRecordCodec.isBlockKey(key)) {
                long index = StateRecordCodec.blockIndexOf(key);
                if (value == null) {
                    read.blockDeleted(index);
                } else {
                    try {
                        read.block(StateRecordCodec.decodeBlock(key, value, coordinatorId));
                    } catch (MalformedRecordException e) {
                        read.blockDeleted(index);
                        throw e;
                    }
                }
                return;
            }
            if (value == null) {
                read.legacyDeleted(key);
                return;
            }
            try {
                StoredRecord restored = StateRecordCodec.decode(key, value);
                if (restored.outcome().txnId().getMostSigBits() != coordinatorId) {
                    throw new MalformedRecordException("record under key '" + key + "' is of "
                            + restored.outcome().txnId() + ", not of coordinator " + coordinatorId);
                }
                read.legacy(key, restored.outcome());
            } catch (MalformedRecordException e) {
                read.legacyDeleted(key);
                throw e;
            }
        } catch (MalformedRecordException e) {
            stats.malformedRecords.increment();
            log.warn("Coordinator {}: skipping malformed state-topic record: {}", coordinatorId, e.getMessage());
        } catch (RuntimeException e) {
            // A record this reader cannot apply must not stop the restore (it would be read
            // again at every retry): skipped like a malformed one.
            stats.malformedRecords.increment();
            log.warn("Coordinator {}: skipping state-topic record under key '{}' that could not be applied: {}",
                    coordinatorId, key, e.toString());
        }
    }

    private void runOnExecutor(Runnable task) {
        try {
            executor.execute(() -> runSafely(task));
        } catch (RejectedExecutionException shuttingDown) {
            log.debug("Coordinator {}: closed", coordinatorId);
        }
    }

    private void runSafely(Runnable task) {
        try {
            task.run();
        } catch (RuntimeException e) {
            log.error("Coordinator {}: periodic task failed", coordinatorId, e);
        }
    }

    /** Deletes a key of an earlier format, retrying with backoff until the tombstone lands. */
    private void deleteUntilDurable(String key, long nextDelayMillis) {
        if (closed) {
            return;
        }
        stateTopic.delete(key).exceptionally(error -> {
            stats.tombstoneWriteRetries.increment();
            if (closed) {
                return null;
            }
            try {
                executor.schedule(() -> deleteUntilDurable(key, Math.min(nextDelayMillis * 2, MAX_RETRY_DELAY_MILLIS)),
                        nextDelayMillis, TimeUnit.MILLISECONDS);
            } catch (RejectedExecutionException shuttingDown) {
                log.debug("Coordinator {}: not retrying the tombstone of {}, closed", coordinatorId, key);
            }
            return null;
        });
        stateTopic.flush();
    }
}
