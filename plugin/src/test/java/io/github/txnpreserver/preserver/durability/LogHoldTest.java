package io.github.txnpreserver.preserver.durability;

import static org.assertj.core.api.Assertions.assertThat;

import io.github.txnpreserver.preserver.kept.Outcome;
import io.github.txnpreserver.preserver.kept.OutcomeIndex;
import it.unimi.dsi.fastutil.longs.LongPredicate;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import org.junit.jupiter.api.DisplayName;
import org.junit.jupiter.api.Test;

/**
 * The log's hold alone, over a real index and durability queue wired as the preserver wires
 * them (the index reports changed blocks to the queue). What {@link LogHold} guarantees: the
 * release of an ended transaction's log entries waits until its block's record is durable,
 * and an outcome the index failed to keep is marked not kept and its entries are never
 * released here, neither at once nor when its block's record later lands. The log then
 * stays the outcome's only durable copy, and the next owner replays it from there.
 *
 * <p>Through the preserver the index fails to keep an outcome only after more than 2^30
 * owner roles, so the failure is injected here: the index's block-change callback throws
 * while {@link #failing} is set.
 */
@DisplayName("The log's hold")
class LogHoldTest {

    private static final LongPredicate NONE_HELD = index -> false;
    private static final long TTL = Duration.ofHours(1).toMillis();
    /** A whole second, so that stored end times are exact. */
    private static final long NOW = 1_700_000_000_000L;

    private final DurabilityQueue queue = new DurabilityQueue();
    /** While set, the index fails when it reports a changed block: it cannot keep the outcome. */
    private boolean failing;
    private final OutcomeIndex index = new OutcomeIndex(2, 100, TTL, blockIndex -> {
        if (failing) {
            throw new IllegalStateException("injected: the index cannot keep this outcome");
        }
        queue.changed(blockIndex);
    });
    private final LogHold hold = new LogHold(7, index, queue);
    /** Which transactions' log entries were released, in order. */
    private final List<String> ran = new ArrayList<>();

    private Runnable release(long sequence) {
        return () -> ran.add("release " + sequence);
    }

    /** Writes every block waiting to be written and lands it. */
    private void writeAndLandEveryBlock() {
        queue.drain(NONE_HELD, 0).forEach(queue::landed);
    }

    /**
     * An end whose decision the index failed to keep has its outcome nowhere but in the
     * transaction log. Were its log entries released (at once: nothing of its block waits
     * to be written for it), the outcome would be lost, and a lookup would answer "not
     * found" instead of "unavailable". A neighbour in the same block that was kept is
     * released when the block's record lands; the one not kept is not released even then.
     */
    @Test
    void aDecisionTheIndexFailedToKeepIsMarkedNotKeptAndItsLogEntriesAreNeverReleased() {
        failing = true;
        hold.decided(3, Outcome.COMMITTED, "alice", NOW);
        failing = false;
        hold.decided(4, Outcome.COMMITTED, "alice", NOW);

        hold.afterDurable(3, release(3));
        hold.afterDurable(4, release(4));

        assertThat(hold.isNotKept(3)).isTrue();
        assertThat(hold.isNotKept(4)).isFalse();
        assertThat(ran).as("block 0's record is not written yet").isEmpty();
        writeAndLandEveryBlock();
        assertThat(ran).as("only the kept outcome's entries, once its record landed").containsExactly("release 4");
    }

    /**
     * A terminal entry met in the log's replay is an outcome the log still holds for a
     * previous owner. If the index failed to keep it, releasing its log entries would delete
     * the only copy of an outcome that was already decided. It must stay in the log, to be
     * replayed again by the next owner, while a kept neighbour is released once its block's
     * record lands.
     */
    @Test
    void aReplayedOutcomeTheIndexFailedToKeepIsMarkedNotKeptAndItsLogEntriesAreNeverReleased() {
        failing = true;
        hold.replayed(3, Outcome.ABORTED, "bob", NOW);
        failing = false;
        hold.replayed(4, Outcome.ABORTED, "bob", NOW);

        hold.afterDurable(3, release(3));
        hold.afterDurable(4, release(4));

        assertThat(hold.isNotKept(3)).isTrue();
        assertThat(hold.isNotKept(4)).isFalse();
        assertThat(ran).as("block 0's record is not written yet").isEmpty();
        writeAndLandEveryBlock();
        assertThat(ran).as("only the kept outcome's entries, once its record landed").containsExactly("release 4");
    }
}
