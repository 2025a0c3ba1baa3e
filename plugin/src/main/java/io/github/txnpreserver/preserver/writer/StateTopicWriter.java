package io.github.txnpreserver.preserver.writer;

import io.github.txnpreserver.preserver.durability.DurabilityQueue;
import io.github.txnpreserver.preserver.kept.BlockRecordCodec;
import io.github.txnpreserver.preserver.kept.OutcomeBlock;
import io.github.txnpreserver.preserver.kept.OutcomeIndex;
import io.github.txnpreserver.preserver.stats.PreserverStats;
import io.github.txnpreserver.preserver.thread.CoordinatorThread;
import io.github.txnpreserver.preserver.thread.RateLimitedLog;
import io.github.txnpreserver.statetopic.CoordinatorMovedException;
import io.github.txnpreserver.statetopic.RecordPosition;
import io.github.txnpreserver.statetopic.StateTopic;
import io.github.txnpreserver.statetopic.WriterFencedException;
import io.github.txnpreserver.time.Scheduler;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;
import java.util.function.BooleanSupplier;
import java.util.function.Supplier;
import org.apache.pulsar.common.util.FutureUtil;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * Writes a coordinator's dirty blocks to its state topic, and keeps a writer to do it with.
 *
 * <p><b>Flushes.</b> One at a time: a flush sends every block {@link DurabilityQueue} lets it
 * take, each whole; the changes made meanwhile go out with the next, a group interval later
 * (group commit: under load one message carries the ends of many transactions). What a
 * landed write makes durable, and what a failed one puts back, is the queue's business.
 *
 * <p><b>The writer's lifecycle</b> is {@link WriterState}, checked at each transition: a
 * writer that can write no more or is wedged is replaced (after the restore, if one is
 * reading: a terminated topic must be read before it is created again); a writer fenced by
 * another, or a coordinator this broker no longer owns, makes the coordinator close here.
 * Each replacement is an attempt with a number: the answer of one that was given up on is
 * ignored.
 *
 * <p>Not thread-safe: confined to its coordinator's thread; completions hop back onto it.
 */
public final class StateTopicWriter {

    private static final Logger log = LoggerFactory.getLogger(StateTopicWriter.class);
    private static final Duration RELEASE_RETRY_DELAY = Duration.ofSeconds(1);
    private static final long REPORT_INTERVAL_SECONDS = 60;
    /**
     * How long a replacement may take before it is given up on (and tried again after its
     * backoff): the topic's calls are each bounded, but a chain of them that waits on a
     * busy broker is not.
     */
    static final Duration REPLACE_TIMEOUT = Duration.ofSeconds(60);

    private final long coordinatorId;
    private final StateTopic stateTopic;
    private final CoordinatorThread thread;
    private final OutcomeIndex index;
    private final DurabilityQueue queue;
    private final PreserverStats stats;
    private final CompactionPacing pacing;
    private final Duration groupCommit;
    private final BooleanSupplier restoring;
    private final RateLimitedLog writeFailures;
    private final RateLimitedLog replacements;
    private Supplier<CompletableFuture<Void>> releaseCoordinator = () -> CompletableFuture.completedFuture(null);
    private WriterState state = WriterState.WRITING;
    private boolean flushScheduled;
    /** The scheduled flush, and when it is due (nanos), while {@link #flushScheduled}. */
    private Scheduler.Cancellable scheduledFlush;
    /** The writer's replacement in flight, if any. */
    private CompletableFuture<Boolean> replacing;
    private long scheduledFlushNanos;
    private boolean flushInFlight;
    private long attempt;
    /** A replacement waits for the restore's end. */
    private boolean replaceAfterRestore;
    /** The delay after the last failed replacement ({@link StateTopic#RETRY}); zero once one succeeded. */
    private Duration replaceRetryDelay = Duration.ZERO;

    public StateTopicWriter(long coordinatorId, StateTopic stateTopic, CoordinatorThread thread, OutcomeIndex index,
                     DurabilityQueue queue, PreserverStats stats, CompactionPacing pacing, Duration groupCommit,
                     BooleanSupplier restoring) {
        this.coordinatorId = coordinatorId;
        this.stateTopic = stateTopic;
        this.thread = thread;
        this.index = index;
        this.queue = queue;
        this.stats = stats;
        this.pacing = pacing;
        this.groupCommit = groupCommit;
        this.restoring = restoring;
        this.writeFailures = new RateLimitedLog(thread::nanoTime, REPORT_INTERVAL_SECONDS, TimeUnit.SECONDS);
        this.replacements = new RateLimitedLog(thread::nanoTime, REPORT_INTERVAL_SECONDS, TimeUnit.SECONDS);
    }

    /** How to close the coordinator here once its writer was fenced or the broker no longer owns it. */
    public void releaseCoordinatorWith(Supplier<CompletableFuture<Void>> release) {
        this.releaseCoordinator = release;
    }

    public WriterState state() {
        return state;
    }

    private void become(WriterState next) {
        if (!next.canFollow(state)) {
            throw new IllegalStateException("Coordinator " + coordinatorId + ": the writer cannot go from " + state
                    + " to " + next);
        }
        state = next;
    }

    // ---- flushes

    /** Changes were made: their blocks go out with the next flush, a group interval from now. */
    public void requestFlush() {
        assert thread.assertOwner();
        if (state != WriterState.WRITING || flushInFlight || !queue.isDirty()) {
            return;
        }
        scheduleFlush(groupCommit);
    }

    /**
     * A flush at most {@code delay} from now: one scheduled sooner stands; one scheduled
     * later (for a block's backoff) is brought forward, so that a block that backs off does
     * not delay the others' writes.
     */
    private void scheduleFlush(Duration delay) {
        long due = thread.nanoTime() + delay.toNanos();
        if (flushScheduled) {
            if (scheduledFlushNanos <= due) {
                return;
            }
            scheduledFlush.cancel();
        }
        flushScheduled = true;
        scheduledFlushNanos = due;
        scheduledFlush = thread.schedule(this::flush, delay);
    }

    private void flush() {
        flushScheduled = false;
        if (state != WriterState.WRITING || flushInFlight) {
            return;
        }
        long now = thread.nanoTime();
        List<DurabilityQueue.Write> writes = queue.drain(index::isHeld, now);
        if (writes.isEmpty()) {
            long retryAt = queue.nextRetryNanos(index::isHeld);
            if (retryAt >= 0) {
                scheduleFlush(Duration.ofNanos(Math.max(0, retryAt - now)));
            }
            return;
        }
        flushInFlight = true;
        List<CompletableFuture<RecordPosition>> sends = new ArrayList<>(writes.size());
        for (DurabilityQueue.Write write : writes) {
            sends.add(send(write));
        }
        try {
            stateTopic.flush();
        } catch (RuntimeException e) {
            log.warn("Coordinator {}: could not flush the writer of state topic {}: {}", coordinatorId, stateTopic,
                    e.toString());
        }
        CompletableFuture.allOf(sends.toArray(new CompletableFuture[0])).whenComplete((ignored, error) ->
                thread.execute(() -> flushed(writes, sends, now)));
    }

    /** Completes with where the record landed, or null for a tombstone. */
    private CompletableFuture<RecordPosition> send(DurabilityQueue.Write write) {
        try {
            String key = BlockRecordCodec.key(write.blockIndex());
            OutcomeBlock record = index.recordOf(write.blockIndex());
            if (record == null) {
                return stateTopic.delete(key).thenApply(deleted -> null);
            }
            byte[] value = BlockRecordCodec.encode(coordinatorId, record, index::ownerName);
            pacing.recordSeen(value.length);
            return stateTopic.write(key, value);
        } catch (RuntimeException e) {
            // A failed send: the block is put back and written again.
            return CompletableFuture.failedFuture(e);
        }
    }

    private void flushed(List<DurabilityQueue.Write> writes, List<CompletableFuture<RecordPosition>> sends,
                         long startNanos) {
        flushInFlight = false;
        if (state == WriterState.CLOSED) {
            return;
        }
        long now = thread.nanoTime();
        stats.stateWriteLatency.recordNanos(now - startNanos);
        StateTopic.WriteFailure worst = null;
        Throwable cause = null;
        for (int i = 0; i < writes.size(); i++) {
            CompletableFuture<RecordPosition> send = sends.get(i);
            if (!send.isCompletedExceptionally()) {
                RecordPosition position = send.join();
                if (queue.landed(writes.get(i)) && position != null) {
                    index.landed(writes.get(i).blockIndex(), position);
                }
                continue;
            }
            Throwable error = FutureUtil.unwrapCompletionException(send.handle((ok, e) -> e).join());
            queue.failed(writes.get(i), now);
            stats.recordWriteFailures.increment();
            StateTopic.WriteFailure kind = stateTopic.classify(error);
            if (worst == null || kind.ordinal() > worst.ordinal()) {
                worst = kind;
                cause = error;
            }
        }
        if (worst == StateTopic.WriteFailure.FENCED) {
            release(cause);
            return;
        }
        if (worst == StateTopic.WriteFailure.LOST || worst == StateTopic.WriteFailure.STUCK) {
            lost(cause);
            return;
        }
        if (worst != null) {
            Throwable reported = cause;
            writeFailures.occurred(1, count -> log.warn("Coordinator {}: {} state-topic flushes failed in the last"
                    + " {} s (last: {}); their blocks are written again, the ends in them wait", coordinatorId,
                    count, REPORT_INTERVAL_SECONDS, reported.toString()));
        }
        requestFlush();
    }

    // ---- the writer's lifecycle

    /** The writer can write no more, or is wedged: replaced, once the restore (if any) is done. */
    void lost(Throwable cause) {
        if (state != WriterState.WRITING) {
            return;
        }
        if (restoring.getAsBoolean()) {
            become(WriterState.REPLACE_PENDING);
            replaceAfterRestore = true;
            return;
        }
        replace(cause, false);
    }

    /**
     * The restore could not write its barrier because the writer is lost: it cannot end
     * without a new one, so the writer is replaced now, in the way that deletes nothing.
     */
    public void lostDuringRestore(Throwable cause) {
        if (state == WriterState.WRITING || state == WriterState.REPLACE_PENDING) {
            replace(cause, true);
        }
    }

    /** The restore is done: a replacement that waited for it goes ahead; blocks held for it go out. */
    public void restoreDone() {
        if (state == WriterState.REPLACE_PENDING && replaceAfterRestore) {
            replace(new IllegalStateException("writer lost while restoring"), false);
            return;
        }
        requestFlush();
    }

    private void replace(Throwable cause, boolean unread) {
        become(WriterState.REPLACING);
        replaceAfterRestore = false;
        long mine = ++attempt;
        stats.writerReplacements.increment();
        replacements.occurred(1, count -> log.warn("Coordinator {}: replacing the writer of state topic {}"
                + " ({} time(s) in the last {} s; last cause: {})", coordinatorId, stateTopic, count,
                REPORT_INTERVAL_SECONDS, FutureUtil.unwrapCompletionException(cause).toString()));
        CompletableFuture<Boolean> reopened;
        try {
            reopened = stateTopic.reopen(unread);
        } catch (RuntimeException e) {
            reopened = CompletableFuture.failedFuture(e);
        }
        CompletableFuture<Boolean> attemptDone = reopened;
        replacing = attemptDone;
        Scheduler.Cancellable[] giveUp = new Scheduler.Cancellable[1];
        giveUpUnlessProgress(attemptDone, stateTopic.replacementProgress(), giveUp);
        reopened.whenComplete((recreated, error) -> {
            giveUp[0].cancel();
            thread.execute(() -> replaced(mine, recreated, error));
        });
    }

    /**
     * Gives the attempt up (completing its future: the topic then neither fences nor installs
     * a writer for it) after {@link #REPLACE_TIMEOUT} without progress: a terminated topic's
     * records being carried over take as long as there are records.
     */
    private void giveUpUnlessProgress(CompletableFuture<Boolean> attemptDone, long progressSeen,
                                      Scheduler.Cancellable[] giveUp) {
        giveUp[0] = thread.schedule(() -> {
            long progress = stateTopic.replacementProgress();
            if (progress != progressSeen && !attemptDone.isDone()) {
                giveUpUnlessProgress(attemptDone, progress, giveUp);
                return;
            }
            attemptDone.completeExceptionally(new TimeoutException("the writer's replacement took more than "
                    + REPLACE_TIMEOUT.toSeconds() + " s without progress"));
        }, REPLACE_TIMEOUT);
    }

    private void replaced(long which, Boolean recreated, Throwable error) {
        if (state != WriterState.REPLACING || which != attempt) {
            return;
        }
        if (error == null) {
            become(WriterState.WRITING);
            replaceRetryDelay = Duration.ZERO;
            queue.retryNow();
            if (recreated) {
                rewriteEveryBlock();
            }
            requestFlush();
            return;
        }
        Throwable cause = FutureUtil.unwrapCompletionException(error);
        if (cause instanceof CoordinatorMovedException || cause instanceof WriterFencedException) {
            release(cause);
            return;
        }
        become(WriterState.REPLACE_PENDING);
        replaceRetryDelay = StateTopic.RETRY.next(replaceRetryDelay);
        log.warn("Coordinator {}: could not replace the writer of state topic {} ({}); trying again in {} ms",
                coordinatorId, stateTopic, cause.toString(), replaceRetryDelay.toMillis());
        long pending = attempt;
        thread.schedule(() -> {
            if (state != WriterState.REPLACE_PENDING || pending != attempt) {
                return;
            }
            if (restoring.getAsBoolean()) {
                // The restore's own failed read asks for the replacement it needs.
                replaceAfterRestore = true;
                return;
            }
            replace(cause, false);
        }, replaceRetryDelay);
    }

    /**
     * Another writer took the state topic over, or this broker no longer owns the coordinator:
     * the coordinator closes here, as the broker closes it when a new owner fences its log.
     * Its clients look it up again: on the new owner, or here, where the broker opens it
     * again (fencing back from here could fence a new owner this broker does not know of yet).
     */
    public void release(Throwable cause) {
        if (state == WriterState.RELEASING || state == WriterState.CLOSED) {
            return;
        }
        stats.writerReplacements.increment();
        log.warn("Coordinator {}: the writer of state topic {} can write no more ({}); closing the coordinator"
                + " here, to be opened again where it is owned", coordinatorId, stateTopic,
                FutureUtil.unwrapCompletionException(cause).toString());
        releaseAfter();
    }

    /**
     * The coordinator's state here cannot go on (its restore could not be merged): it is
     * closed here, as for a fenced writer, and the broker opens it again, from its log and
     * its state topic, at its clients' next request.
     */
    public void releaseForState(String why, Throwable cause) {
        if (state == WriterState.RELEASING || state == WriterState.CLOSED) {
            return;
        }
        log.error("Coordinator {}: {}; closing the coordinator here, to be opened again", coordinatorId, why, cause);
        releaseAfter();
    }

    private void releaseAfter() {
        become(WriterState.RELEASING);
        askToRelease();
    }

    private void askToRelease() {
        if (state != WriterState.RELEASING) {
            return;
        }
        CompletableFuture<Void> released;
        try {
            released = releaseCoordinator.get();
        } catch (RuntimeException e) {
            released = CompletableFuture.failedFuture(e);
        }
        released.whenComplete((ignored, error) -> {
            if (error != null) {
                // The broker was busy with the coordinator (loading it): asked again shortly.
                thread.schedule(this::askToRelease, RELEASE_RETRY_DELAY);
            }
        });
    }

    /**
     * A state topic deleted under its writer comes back empty when the producer reconnects,
     * with no failed write to tell: asked periodically, and every kept block is written again.
     */
    public void checkTopicCreatedAgain() {
        if (state != WriterState.WRITING || restoring.getAsBoolean()) {
            return;
        }
        CompletableFuture<Boolean> asked;
        try {
            asked = stateTopic.checkCreatedAgain();
        } catch (RuntimeException e) {
            asked = CompletableFuture.failedFuture(e);
        }
        asked.whenComplete((again, error) -> thread.execute(() -> {
            if (error != null) {
                log.debug("Coordinator {}: could not check state topic {}: {}", coordinatorId, stateTopic,
                        error.toString());
            } else if (again && state == WriterState.WRITING) {
                rewriteEveryBlock();
                requestFlush();
            }
        }));
    }

    /** The topic was created again and has lost its records: every kept block is written into it. */
    private void rewriteEveryBlock() {
        pacing.reset();
        long coldLost = index.topicCreatedAgain();
        queue.holdReleased(index::isHeld);
        var blocks = index.blocksWithRecords();
        queue.rewrite(blocks);
        log.warn("Coordinator {}: state topic {} was created again; writing its {} kept blocks into it", coordinatorId,
                stateTopic, blocks.size());
        if (coldLost > 0) {
            log.error("Coordinator {}: state topic {} was created again: the {} outcomes it alone kept (out of memory,"
                    + " in its cold tier) are lost; retries of those transactions get TransactionNotFound",
                    coordinatorId, stateTopic, coldLost);
        }
    }

    public void close() {
        if (state != WriterState.CLOSED) {
            become(WriterState.CLOSED);
        }
        if (replacing != null) {
            // Its give-up timer is dropped with the coordinator: failed now, the topic installs no writer for it.
            replacing.completeExceptionally(thread.closedError());
        }
    }
}
