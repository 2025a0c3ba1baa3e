package io.github.txnpreserver.preserver;

import io.github.txnpreserver.preserver.kept.OutcomeIndex;
import io.github.txnpreserver.preserver.thread.CoordinatorThread;
import io.github.txnpreserver.preserver.thread.RateLimitedLog;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.function.LongPredicate;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * One coordinator's share of the broker's memory bound, as {@link OutcomeMemoryBudget} sees
 * it: the bytes and the oldest droppable end time its {@link OutcomeIndex} last published
 * (read from any thread), and a drop of its oldest block, done on its own thread.
 */
final class MemoryShare implements OutcomeMemoryBudget.Member {

    private static final Logger log = LoggerFactory.getLogger(MemoryShare.class);
    private static final long REPORT_INTERVAL_SECONDS = 60;

    private final long coordinatorId;
    private final OutcomeIndex index;
    private final CoordinatorThread thread;
    private final OutcomeMemoryBudget budget;
    private final Runnable afterDrop;
    private final RateLimitedLog evictions;
    private final AtomicBoolean dropQueued = new AtomicBoolean();
    private final LongPredicate durable;
    private volatile long bytes;
    private volatile Long oldestEvictableMillis;
    private volatile boolean evictionGoesCold;

    /** @param afterDrop what the coordinator does after a change (writes the block's new record, reclaims more) */
    MemoryShare(long coordinatorId, OutcomeIndex index, LongPredicate durable, CoordinatorThread thread,
                OutcomeMemoryBudget budget, Runnable afterDrop) {
        this.coordinatorId = coordinatorId;
        this.durable = durable;
        this.index = index;
        this.thread = thread;
        this.budget = budget;
        this.afterDrop = afterDrop;
        this.evictions = new RateLimitedLog(thread::nanoTime, REPORT_INTERVAL_SECONDS, TimeUnit.SECONDS);
        budget.register(this);
    }

    /** On the coordinator's thread, after a change: what the budget reads. */
    void publish() {
        assert thread.assertOwner();
        if (!thread.isClosed()) {
            bytes = index.bytes();
            boolean[] goesCold = new boolean[1];
            oldestEvictableMillis = index.oldestEvictableMillis(durable, goesCold);
            evictionGoesCold = goesCold[0];
        }
    }

    @Override
    public long keptBytes() {
        return bytes;
    }

    @Override
    public Long oldestEvictableMillis() {
        return oldestEvictableMillis;
    }

    @Override
    public boolean evictionGoesCold() {
        return evictionGoesCold;
    }

    @Override
    public void evictOldestForMemory() {
        if (dropQueued.compareAndSet(false, true) && !thread.execute(this::dropOldest)) {
            dropQueued.set(false);
        }
    }

    private void dropOldest() {
        dropQueued.set(false);
        long before = index.memoryEvictions();
        index.evictOldest(durable);
        long dropped = index.memoryEvictions() - before;
        if (dropped > 0) {
            evictions.occurred(dropped, count -> log.warn("Coordinator {}: the memory bound of {} MiB dropped {} kept"
                    + " outcomes in the last {} s before their time-to-live; retries of transactions that ended more"
                    + " than {} s ago may now get TransactionNotFound", coordinatorId, budget.limitBytes() >> 20,
                    count, REPORT_INTERVAL_SECONDS, index.windowMillis(thread.millis()) / 1000));
        }
        afterDrop.run();
    }

    /** On the coordinator's thread, at close: it holds nothing of the bound any more. */
    void close() {
        budget.unregister(this);
        bytes = 0;
        oldestEvictableMillis = null;
        evictionGoesCold = false;
    }
}
