package io.github.txnpreserver.preserver;

import java.util.List;
import java.util.concurrent.CopyOnWriteArrayList;

/**
 * The heap one broker lets the kept outcomes of all its coordinators use
 * ({@code transactionMetaPersistMaxMemoryInMB}). Past it, the oldest block of whichever
 * coordinator holds the oldest one goes cold (its outcomes stay answerable from the state
 * topic, see {@link OutcomeIndex}); once none can, the oldest is dropped, so that the window
 * is the same for every coordinator of the broker, however their rates differ.
 *
 * <p>Each coordinator owns its outcomes on its own thread, so the budget never touches them:
 * it reads what each publishes (its bytes, the end time of the block it would drop first)
 * and asks the oldest to drop one block, on that coordinator's thread; the coordinator
 * calls {@link #reclaim} again once it has, until the members fit.
 */
public final class OutcomeMemoryBudget {

    /** A coordinator's kept outcomes, as the budget sees them: thread-safe reads, an asynchronous drop. */
    public interface Member {
        long keptBytes();

        /** The newest end time in the block the member would act on first, or null if none. */
        Long oldestEvictableMillis();

        /** Whether that block would only go cold (nothing dropped). */
        default boolean evictionGoesCold() {
            return false;
        }

        /** Asks the member to drop its oldest block on its own thread, then to call {@link #reclaim}. */
        void evictOldestForMemory();
    }

    private final long limitBytes;
    private final List<Member> members = new CopyOnWriteArrayList<>();

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

    /** Over the limit: asks the member with the oldest droppable block to drop it. */
    public void reclaim() {
        if (usedBytes() <= limitBytes) {
            return;
        }
        Member oldest = null;
        long oldestMillis = Long.MAX_VALUE;
        boolean oldestGoesCold = false;
        for (Member member : members) {
            Long millis = member.oldestEvictableMillis();
            if (millis == null) {
                continue;
            }
            boolean goesCold = member.evictionGoesCold();
            // A block that goes cold loses nothing: preferred, whichever member has it, to a drop.
            if (oldest == null || (goesCold && !oldestGoesCold)
                    || (goesCold == oldestGoesCold && millis < oldestMillis)) {
                oldestMillis = millis;
                oldest = member;
                oldestGoesCold = goesCold;
            }
        }
        if (oldest != null) {
            oldest.evictOldestForMemory();
        }
    }
}
