package io.github.txnpreserver.preserver;

import java.util.List;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.locks.ReentrantLock;

/**
 * The heap one broker lets the kept outcomes of all its coordinators use
 * ({@code transactionMetaPersistMaxMemoryInMB}). Past it, the oldest block of outcomes of
 * whichever coordinator holds the oldest one is dropped, so that the window is the same
 * for every coordinator of the broker, however their rates differ.
 *
 * <p>Members are asked one at a time, outside their own locks, so that two coordinators
 * reclaiming never wait on each other; a reclaim already running is not joined (it takes
 * what the newcomer would).
 */
public final class OutcomeMemoryBudget {

    /** A coordinator's kept outcomes, as the budget sees them. */
    public interface Member {
        long keptBytes();

        /** The newest end time in the block the member would drop first, or null if none. */
        Long oldestEvictableMillis();

        /** Drops the member's oldest block; false if it had none to drop. */
        boolean evictOldestForMemory();
    }

    private final long limitBytes;
    private final List<Member> members = new CopyOnWriteArrayList<>();
    private final ReentrantLock reclaiming = new ReentrantLock();

    public OutcomeMemoryBudget(long limitBytes) {
        if (limitBytes < 1) {
            throw new IllegalArgumentException("limit must be positive");
        }
        this.limitBytes = limitBytes;
    }

    public void register(Member member) {
        members.add(member);
    }

    public void unregister(Member member) {
        members.remove(member);
    }

    public long limitBytes() {
        return limitBytes;
    }

    public long usedBytes() {
        long used = 0;
        for (Member member : members) {
            used += member.keptBytes();
        }
        return used;
    }

    /** Drops oldest blocks until the members fit the limit again. */
    public void reclaim() {
        if (usedBytes() <= limitBytes || !reclaiming.tryLock()) {
            return;
        }
        try {
            while (usedBytes() > limitBytes) {
                Member oldest = null;
                long oldestMillis = Long.MAX_VALUE;
                for (Member member : members) {
                    Long millis = member.oldestEvictableMillis();
                    if (millis != null && millis < oldestMillis) {
                        oldestMillis = millis;
                        oldest = member;
                    }
                }
                if (oldest == null || !oldest.evictOldestForMemory()) {
                    return;
                }
            }
        } finally {
            reclaiming.unlock();
        }
    }
}
