package io.github.txnpreserver.preserver.durability;

import io.github.txnpreserver.preserver.kept.BlockRecordCodec;
import io.github.txnpreserver.preserver.kept.Outcome;
import io.github.txnpreserver.preserver.kept.OutcomeIndex;
import it.unimi.dsi.fastutil.longs.LongOpenHashSet;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * The rule "the transaction log holds an ended transaction's outcome until its record is
 * durable": the log's release of a transaction's entries waits in the {@link DurabilityQueue}
 * for its block's record, and an outcome that could not be kept is never released here, so
 * that the next owner replays it from the log.
 *
 * <p>Not thread-safe: confined to its coordinator's thread.
 */
public final class LogHold {

    private static final Logger log = LoggerFactory.getLogger(LogHold.class);

    private final long coordinatorId;
    private final OutcomeIndex index;
    private final DurabilityQueue queue;
    /** Sequences whose outcome could not be kept: their log entries are never released here. */
    private final LongOpenHashSet notKept = new LongOpenHashSet();

    public LogHold(long coordinatorId, OutcomeIndex index, DurabilityQueue queue) {
        this.coordinatorId = coordinatorId;
        this.index = index;
        this.queue = queue;
    }

    /** An end's decision (its terminal entry follows). */
    public void decided(long sequence, Outcome outcome, String owner, long nowMillis) {
        try {
            index.decide(sequence, outcome, owner, nowMillis);
        } catch (RuntimeException e) {
            notKept(sequence, e);
        }
    }

    /** A terminal entry the log still holds, met in its replay. */
    public void replayed(long sequence, Outcome outcome, String owner, long endMillis) {
        try {
            index.decide(sequence, outcome, owner, endMillis);
            index.ended(sequence);
        } catch (RuntimeException e) {
            notKept(sequence, e);
        }
    }

    public void notKept(long sequence, Throwable cause) {
        notKept.add(sequence);
        log.error("Coordinator {}: could not keep the outcome of transaction {}; its log entries stay for the next"
                + " owner's replay", coordinatorId, sequence, cause);
    }

    /** Whether the transaction ended here with an outcome this coordinator does not know. */
    public boolean isNotKept(long sequence) {
        return notKept.contains(sequence);
    }

    /** Runs {@code release} once the transaction's block record as of now is durable; never if not kept. */
    public void afterDurable(long sequence, Runnable release) {
        if (!notKept.contains(sequence)) {
            long block = BlockRecordCodec.blockOf(sequence);
            queue.afterDurable(block, index.isHeld(block), release);
        }
    }
}
