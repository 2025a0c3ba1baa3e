package io.github.txnpreserver.preserver.durability;

import io.github.txnpreserver.statetopic.StateTopic;
import it.unimi.dsi.fastutil.longs.Long2IntOpenHashMap;
import it.unimi.dsi.fastutil.longs.Long2LongLinkedOpenHashMap;
import it.unimi.dsi.fastutil.longs.Long2LongOpenHashMap;
import it.unimi.dsi.fastutil.longs.Long2ObjectOpenHashMap;
import it.unimi.dsi.fastutil.longs.LongCollection;
import it.unimi.dsi.fastutil.longs.LongLinkedOpenHashSet;
import it.unimi.dsi.fastutil.longs.LongPredicate;
import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.List;
import org.slf4j.LoggerFactory;

/**
 * Which blocks must be written to the state topic, and who waits for what to be durable.
 *
 * <p>One vocabulary: every change to a block's record gets an <em>offset</em>, increasing. A
 * write takes a block's record as of its latest offset; once it lands, every waiter of that
 * block whose offset is at or below the write's is released. A waiter is one ended
 * transaction whose log entries may be released only once its outcome is durable (the rule
 * "the log holds the outcome until its record lands"), so a block whose writes keep failing
 * holds back its own transactions only, never another block's.
 *
 * <p>A failed write puts the block back with its offset and a delay of its own (backoff per
 * block, so that a block the broker keeps refusing does not slow every other write). A
 * topic created again loses what landed before: {@link #rewrite} makes writes taken before
 * it count for nothing.
 *
 * <p>Not thread-safe: confined to its coordinator's thread, but for reads of how many wait.
 */
public final class DurabilityQueue {

    /** A block to send: its record as of {@code offset}. */
    public record Write(long blockIndex, long offset) {
    }

    private record Waiter(long offset, Runnable action) {
    }

    /** Blocks to write, with the offset of their latest change, in the order they changed. */
    private final Long2LongLinkedOpenHashMap dirty = new Long2LongLinkedOpenHashMap();
    /** Blocks whose write is in flight, with the offset it took. */
    private final Long2LongOpenHashMap inFlight = new Long2LongOpenHashMap();
    /** Blocks whose last write failed: not written again before this time (nanos), and the delay it had. */
    private final Long2LongOpenHashMap retryAt = new Long2LongOpenHashMap();
    private final Long2LongOpenHashMap retryDelay = new Long2LongOpenHashMap();
    private final Long2ObjectOpenHashMap<ArrayDeque<Waiter>> waiters = new Long2ObjectOpenHashMap<>();
    private long lastOffset;
    /** Writes that took an offset below this landed in a topic that is gone. */
    private long countsFrom;
    /** Written on the coordinator's thread only; read from any (the bound on new ends). */
    private volatile int waiting;
    /** Of {@link #waiting}, those registered on held blocks: none of them can be released while the hold lasts. */
    private volatile int waitingForHeld;
    /** The blocks {@link #waitingForHeld} counts, with how many of it each: a hold ends block by block. */
    private final Long2IntOpenHashMap heldWaiters = new Long2IntOpenHashMap();

    /** A block's record must be written again. */
    public void changed(long blockIndex) {
        dirty.put(blockIndex, ++lastOffset);
    }

    /**
     * Runs {@code action} once the block's record as of now is durable: at once if nothing of
     * it waits to be written.
     *
     * @return whether it ran at once
     */
    boolean afterDurable(long blockIndex, boolean held, Runnable action) {
        long offset = dirty.containsKey(blockIndex) ? dirty.get(blockIndex)
                : inFlight.containsKey(blockIndex) ? inFlight.get(blockIndex) : -1;
        if (offset < 0) {
            runSafely(action);
            return true;
        }
        waiters.computeIfAbsent(blockIndex, ignored -> new ArrayDeque<>()).add(new Waiter(offset, action));
        waiting++;
        if (held) {
            heldWaiters.addTo(blockIndex, 1);
            waitingForHeld++;
        }
        return false;
    }

    /** Ended transactions waiting for their block's record, as of the coordinator thread's last change. */
    public int waiting() {
        return waiting;
    }

    /**
     * Ended transactions waiting for a held block (the restore's replay queues one per
     * transaction the log still holds: they must not refuse new ends while the restore reads).
     */
    public int waitingForHeld() {
        return waitingForHeld;
    }

    /**
     * The blocks no longer held are written from now on: what waits for them waits like the
     * rest (a restore's hold ends for every block at once; a cold part's for its block alone).
     */
    public void holdReleased(LongPredicate stillHeld) {
        var entries = heldWaiters.long2IntEntrySet().fastIterator();
        while (entries.hasNext()) {
            var entry = entries.next();
            if (!stillHeld.test(entry.getLongKey())) {
                waitingForHeld -= entry.getIntValue();
                entries.remove();
            }
        }
    }

    /** When the next block that backs off may be written, or -1 if none does. */
    public long nextRetryNanos(LongPredicate held) {
        long next = -1;
        for (Long2LongOpenHashMap.Entry entry : retryAt.long2LongEntrySet()) {
            if (dirty.containsKey(entry.getLongKey()) && !held.test(entry.getLongKey())
                    && (next < 0 || entry.getLongValue() < next)) {
                next = entry.getLongValue();
            }
        }
        return next;
    }

    /** Takes every dirty block that may be written now, each as of its latest offset. */
    public List<Write> drain(LongPredicate held, long nowNanos) {
        List<Write> writes = new ArrayList<>();
        var entries = dirty.long2LongEntrySet().fastIterator();
        while (entries.hasNext()) {
            var entry = entries.next();
            long index = entry.getLongKey();
            if (held.test(index) || inFlight.containsKey(index) || retryAt.getOrDefault(index, nowNanos) > nowNanos) {
                continue;
            }
            writes.add(new Write(index, entry.getLongValue()));
            inFlight.put(index, entry.getLongValue());
            entries.remove();
        }
        return writes;
    }

    /**
     * A write landed: its block's waiters up to its offset are released, in order.
     *
     * @return false if it counts for nothing: it landed in a topic that is gone
     */
    public boolean landed(Write write) {
        inFlight.remove(write.blockIndex());
        retryAt.remove(write.blockIndex());
        retryDelay.remove(write.blockIndex());
        if (write.offset() < countsFrom) {
            return false;
        }
        ArrayDeque<Waiter> queue = waiters.get(write.blockIndex());
        if (queue == null) {
            return true;
        }
        List<Runnable> ready = new ArrayList<>();
        while (!queue.isEmpty() && queue.peekFirst().offset() <= write.offset()) {
            ready.add(queue.pollFirst().action());
            waiting--;
        }
        // Those counted as held are among the first: a held block takes no new write.
        int held = Math.min(ready.size(), heldWaiters.get(write.blockIndex()));
        if (held > 0) {
            waitingForHeld -= held;
            if (heldWaiters.addTo(write.blockIndex(), -held) == held) {
                heldWaiters.remove(write.blockIndex());
            }
        }
        if (queue.isEmpty()) {
            waiters.remove(write.blockIndex());
        }
        ready.forEach(DurabilityQueue::runSafely);
        return true;
    }

    /** Nothing of the block waits to be written or is being written: its last landed record is its state. */
    public boolean isDurable(long blockIndex) {
        return !dirty.containsKey(blockIndex) && !inFlight.containsKey(blockIndex);
    }

    /** A waiter that throws (a log release) must not stop the others, nor the write's bookkeeping. */
    private static void runSafely(Runnable action) {
        try {
            action.run();
        } catch (RuntimeException e) {
            LoggerFactory.getLogger(DurabilityQueue.class).error("An action waiting for a durable record failed", e);
        }
    }

    /** A write failed: the block is written again, not before its backoff. */
    public void failed(Write write, long nowNanos) {
        inFlight.remove(write.blockIndex());
        if (!dirty.containsKey(write.blockIndex())) {
            dirty.put(write.blockIndex(), write.offset());
        }
        long delay = StateTopic.RETRY.nextNanos(retryDelay.get(write.blockIndex()));
        retryDelay.put(write.blockIndex(), delay);
        retryAt.put(write.blockIndex(), nowNanos + delay);
    }

    /** Blocks wait no more for their backoff: the writer was replaced. */
    public void retryNow() {
        retryAt.clear();
        retryDelay.clear();
    }

    /**
     * The topic was created again: only writes from now on count. Every given block (those
     * with a record) is written, and so is every block something waits for or was about to
     * be written (a tombstone among them), so that no waiter waits for a write that counts
     * for nothing.
     */
    public void rewrite(LongCollection blocks) {
        countsFrom = lastOffset + 1;
        LongLinkedOpenHashSet all = new LongLinkedOpenHashSet(blocks);
        all.addAll(dirty.keySet());
        all.addAll(inFlight.keySet());
        all.addAll(waiters.keySet());
        for (long index : all) {
            changed(index);
        }
        retryNow();
    }

    public boolean isDirty() {
        return !dirty.isEmpty();
    }

    boolean hasInFlight() {
        return !inFlight.isEmpty();
    }

    /** Nothing waits any more: the coordinator closed here (the log keeps what they would release). */
    public void clear() {
        dirty.clear();
        inFlight.clear();
        waiters.clear();
        heldWaiters.clear();
        waitingForHeld = 0;
        retryAt.clear();
        retryDelay.clear();
        waiting = 0;
    }
}
