package io.github.txnpreserver.preserver.durability;

import static org.assertj.core.api.Assertions.assertThat;

import io.github.txnpreserver.statetopic.StateTopic;
import it.unimi.dsi.fastutil.longs.LongArrayList;
import it.unimi.dsi.fastutil.longs.LongList;
import it.unimi.dsi.fastutil.longs.LongPredicate;
import java.util.ArrayList;
import java.util.List;
import org.junit.jupiter.api.DisplayName;
import org.junit.jupiter.api.Nested;
import org.junit.jupiter.api.Test;

/**
 * The durability queue alone: offsets, waiters, per-block backoff and the rewrite of a topic
 * created again. Time is a number the test moves; nothing runs but what the test calls.
 */
@DisplayName("The durability queue")
class DurabilityQueueTest {

    private static final LongPredicate NONE_HELD = index -> false;
    private static final long MS = 1_000_000L;
    private static final long FIRST = StateTopic.RETRY.first().toNanos();
    private static final long MAX = StateTopic.RETRY.max().toNanos();

    private final DurabilityQueue queue = new DurabilityQueue();
    /** What waiters ran, in order. */
    private final List<String> ran = new ArrayList<>();
    private long now = 1_000 * MS;

    private Runnable waiter(String name) {
        return () -> ran.add(name);
    }

    /** Registers a waiter; returns whether it ran at once. */
    private boolean waitFor(long block, String name) {
        return queue.afterDurable(block, false, waiter(name));
    }

    private List<DurabilityQueue.Write> drain() {
        return queue.drain(NONE_HELD, now);
    }

    private DurabilityQueue.Write drainOne() {
        List<DurabilityQueue.Write> writes = drain();
        assertThat(writes).hasSize(1);
        return writes.get(0);
    }

    private static DurabilityQueue.Write write(long block, long offset) {
        return new DurabilityQueue.Write(block, offset);
    }

    private static LongList blocks(long... indexes) {
        return new LongArrayList(indexes);
    }

    @Nested
    @DisplayName("offsets and waiters")
    class OffsetsAndWaiters {

        @Test
        void eachChangeTakesTheNextOffsetAndAWriteTakesTheBlockAsOfItsLatest() {
            queue.changed(0);
            queue.changed(1);
            queue.changed(0);

            assertThat(drain()).containsExactlyInAnyOrder(write(0, 3), write(1, 2));
            assertThat(queue.isDirty()).isFalse();
            assertThat(queue.hasInFlight()).isTrue();
            assertThat(drain()).as("each block once, until its write is answered").isEmpty();
        }

        @Test
        void aWaiterRunsOnlyOnceAWriteTakenAtOrAfterItsOffsetLands() {
            queue.changed(0);
            assertThat(waitFor(0, "a")).isFalse();
            assertThat(queue.waiting()).isEqualTo(1);

            DurabilityQueue.Write taken = drainOne();
            assertThat(ran).as("taken is not landed").isEmpty();

            queue.landed(taken);
            assertThat(ran).containsExactly("a");
            assertThat(queue.waiting()).isZero();
            assertThat(queue.hasInFlight()).isFalse();
        }

        @Test
        void aWaiterOfABlockNeitherDirtyNorInFlightRunsAtOnce() {
            assertThat(waitFor(7, "never changed")).isTrue();
            queue.changed(0);
            queue.landed(drainOne());

            assertThat(waitFor(0, "landed already")).isTrue();
            assertThat(ran).containsExactly("never changed", "landed already");
            assertThat(queue.waiting()).isZero();
        }

        @Test
        void aWaiterThatComesWhileItsBlocksWriteIsInFlightWaitsForThatWrite() {
            queue.changed(0);
            DurabilityQueue.Write inFlight = drainOne();

            assertThat(waitFor(0, "a")).isFalse();
            queue.landed(inFlight);

            assertThat(ran).containsExactly("a");
            assertThat(drain()).as("nothing more to write").isEmpty();
        }

        @Test
        void aChangeWhileAWriteIsInFlightMakesLaterWaitersWaitForTheNextWrite() {
            queue.changed(0);
            waitFor(0, "before");
            DurabilityQueue.Write first = drainOne();
            queue.changed(0);
            waitFor(0, "after");

            queue.landed(first);
            assertThat(ran).containsExactly("before");
            assertThat(queue.waiting()).isEqualTo(1);

            DurabilityQueue.Write second = drainOne();
            assertThat(second).isEqualTo(write(0, 2));
            queue.landed(second);
            assertThat(ran).containsExactly("before", "after");
        }

        @Test
        void waitersOfABlockRunInTheOrderTheyCameAndAnotherBlocksWriteRunsNoneOfThem() {
            queue.changed(0);
            queue.changed(1);
            waitFor(0, "a");
            waitFor(0, "b");
            waitFor(1, "x");
            List<DurabilityQueue.Write> writes = drain();
            DurabilityQueue.Write zero = writes.stream().filter(w -> w.blockIndex() == 0).findFirst().orElseThrow();
            DurabilityQueue.Write one = writes.stream().filter(w -> w.blockIndex() == 1).findFirst().orElseThrow();

            queue.landed(one);
            assertThat(ran).containsExactly("x");
            queue.landed(zero);
            assertThat(ran).containsExactly("x", "a", "b");
        }

        @Test
        void heldBlocksAreNotTaken() {
            queue.changed(0);
            queue.changed(1);

            assertThat(queue.drain(index -> index == 0, now)).containsExactly(write(1, 2));
            assertThat(queue.isDirty()).isTrue();
            assertThat(drain()).containsExactly(write(0, 1));
        }
    }

    @Nested
    @DisplayName("a failed write")
    class FailedWrites {

        @Test
        void putsTheBlockBackWithItsOffsetAndWhatWaitsForItWaitsForTheNextWrite() {
            queue.changed(0);
            waitFor(0, "a");
            DurabilityQueue.Write failed = drainOne();

            queue.failed(failed, now);

            assertThat(ran).isEmpty();
            assertThat(queue.isDirty()).isTrue();
            assertThat(queue.hasInFlight()).isFalse();
            now += FIRST;
            DurabilityQueue.Write again = drainOne();
            assertThat(again).isEqualTo(write(0, 1));
            queue.landed(again);
            assertThat(ran).containsExactly("a");
        }

        @Test
        void ofABlockChangedMeanwhileKeepsTheLatestOffset() {
            queue.changed(0);
            DurabilityQueue.Write failed = drainOne();
            queue.changed(0);
            waitFor(0, "after the change");

            queue.failed(failed, now);
            now += FIRST;

            DurabilityQueue.Write again = drainOne();
            assertThat(again).isEqualTo(write(0, 2));
            queue.landed(again);
            assertThat(ran).containsExactly("after the change");
        }

        @Test
        void backsItsBlockOffFor100MsDoublingTo5s() {
            queue.changed(0);
            List<Long> delays = new ArrayList<>();
            for (int attempt = 0; attempt < 9; attempt++) {
                DurabilityQueue.Write taken = drainOne();
                queue.failed(taken, now);
                long retryAt = queue.nextRetryNanos(NONE_HELD);
                delays.add((retryAt - now) / MS);
                now = retryAt - 1;
                assertThat(drain()).as("not before its backoff").isEmpty();
                now = retryAt;
            }

            assertThat(delays).containsExactly(100L, 200L, 400L, 800L, 1600L, 3200L, 5000L, 5000L, 5000L);
        }

        @Test
        void aWriteThatLandsStartsTheBackoffAgainFrom100Ms() {
            queue.changed(0);
            for (int attempt = 0; attempt < 4; attempt++) {
                queue.failed(drainOne(), now);
                now = queue.nextRetryNanos(NONE_HELD);
            }
            queue.landed(drainOne());
            assertThat(queue.nextRetryNanos(NONE_HELD)).isEqualTo(-1);

            queue.changed(0);
            queue.failed(drainOne(), now);

            assertThat(queue.nextRetryNanos(NONE_HELD) - now).isEqualTo(FIRST);
        }

        @Test
        void backsOffOnlyItsOwnBlock() {
            queue.changed(0);
            for (int attempt = 0; attempt < 5; attempt++) {
                queue.failed(drainOne(), now);
                now = queue.nextRetryNanos(NONE_HELD);
            }
            queue.failed(drainOne(), now);
            assertThat(queue.nextRetryNanos(NONE_HELD) - now).as("block 0 at its sixth failure").isEqualTo(3200 * MS);

            queue.changed(1);

            assertThat(drain()).as("block 1 at once").containsExactly(write(1, 2));
            queue.failed(write(1, 2), now);
            now += FIRST;
            assertThat(drain()).as("block 1's first failure: 100 ms, whatever block 0's").containsExactly(write(1, 2));
        }

        @Test
        void retryNowClearsTheBackoffOfEveryBlock() {
            queue.changed(0);
            queue.changed(1);
            for (DurabilityQueue.Write taken : drain()) {
                queue.failed(taken, now);
            }
            assertThat(queue.nextRetryNanos(NONE_HELD)).isGreaterThan(now);

            queue.retryNow();

            assertThat(queue.nextRetryNanos(NONE_HELD)).isEqualTo(-1);
            List<DurabilityQueue.Write> writes = drain();
            assertThat(writes).hasSize(2);
            queue.failed(writes.get(0), now);
            assertThat(queue.nextRetryNanos(NONE_HELD) - now).as("from 100 ms again").isEqualTo(FIRST);
        }

        @Test
        void aHeldBlockGivesNoRetryTime() {
            queue.changed(0);
            queue.failed(drainOne(), now);

            assertThat(queue.nextRetryNanos(index -> true)).isEqualTo(-1);
            assertThat(queue.nextRetryNanos(NONE_HELD)).isEqualTo(now + FIRST);
        }

        /**
         * Review of 22cce46, finding 6: one durability watermark stood for all blocks (every
         * change up to a generation is durable, vouched for only by a flush in which every
         * send landed) and one backoff for the whole flush. A block whose write failed every
         * time kept the watermark where it was, so the release of every other block's ended
         * transactions waited behind it (head of line) until the bound of waiting ends was
         * reached and every terminal step was refused; and its backoff, up to 5 s, delayed
         * every other block's writes. Now a waiter waits for its own block's write only, and
         * the backoff is the failing block's own.
         */
        @Test
        void aBlockWhoseWritesAlwaysFailHoldsBackOnlyItsOwnEnds() {
            List<String> blockOneWaiters = new ArrayList<>();
            int blockZeroAttempts = 0;
            for (int flush = 0; flush < 40; flush++) {
                // Ends in both blocks, every 250 ms.
                queue.changed(0);
                waitFor(0, "block 0 #" + flush);
                queue.changed(1);
                String mine = "block 1 #" + flush;
                blockOneWaiters.add(mine);
                waitFor(1, mine);

                List<DurabilityQueue.Write> writes = drain();

                assertThat(writes).as("block 1 is taken at once, whatever block 0's backoff (flush %d)", flush)
                        .anyMatch(w -> w.blockIndex() == 1);
                for (DurabilityQueue.Write taken : writes) {
                    if (taken.blockIndex() == 0) {
                        blockZeroAttempts++;
                        queue.failed(taken, now);
                    } else {
                        queue.landed(taken);
                    }
                }
                assertThat(ran).as("block 1's ends run as soon as block 1 lands (flush %d)", flush)
                        .containsExactlyElementsOf(blockOneWaiters);
                now += 250 * MS;
            }

            assertThat(ran).noneMatch(name -> name.startsWith("block 0"));
            assertThat(queue.waiting()).as("block 0's ends only").isEqualTo(40);
            assertThat(blockZeroAttempts).as("block 0 backed off, alone").isBetween(5, 15);
            assertThat(queue.nextRetryNanos(NONE_HELD)).isLessThanOrEqualTo(now + MAX);
        }
    }

    @Nested
    @DisplayName("a rewrite (the topic was created again)")
    class Rewrite {

        /** In 663f071 the in-flight block was not written again (not among the given blocks): its waiter was stranded. */
        @Test
        void makesWritesTakenBeforeItCountForNothing() {
            queue.changed(0);
            waitFor(0, "a");
            DurabilityQueue.Write old = drainOne();

            queue.rewrite(blocks());
            queue.landed(old);

            assertThat(ran).as("landed in the topic that is gone").isEmpty();
            DurabilityQueue.Write again = drainOne();
            assertThat(again.offset()).isGreaterThan(old.offset());
            queue.landed(again);
            assertThat(ran).containsExactly("a");
        }

        /**
         * The waiter's block was dirty again (not in flight) and is not among the blocks with a
         * record: it is written all the same. In 663f071 a rewrite wrote only the blocks given
         * to it: block 0 stayed dirty with an offset taken before the rewrite, was written,
         * and its landing counted for nothing; nothing wrote it again, and the waiter was
         * stranded for ever.
         */
        @Test
        void leavesNoWaiterStrandedWhenItsBlockWasDirtyAgain() {
            queue.changed(0);
            queue.afterDurable(0, false, waiter("a"));
            queue.changed(0);

            queue.rewrite(blocks());

            List<DurabilityQueue.Write> writes = drain();
            assertThat(writes).extracting(DurabilityQueue.Write::blockIndex).containsExactly(0L);
            writes.forEach(queue::landed);
            assertThat(ran).containsExactly("a");
            assertThat(queue.waiting()).isZero();
        }

        /** In 663f071 only block 1 (the given one) was written again. */
        @Test
        void writesAgainEveryBlockThatHasARecordIsDirtyInFlightOrWaitedFor() {
            // Block 1: a record that landed before; block 2: dirty (a tombstone, no record);
            // block 3: in flight; block 4: in flight and waited for.
            queue.changed(1);
            queue.landed(drainOne());
            queue.changed(3);
            queue.changed(4);
            List<DurabilityQueue.Write> inFlight = drain();
            waitFor(4, "on 4");
            queue.changed(2);

            queue.rewrite(blocks(1));

            assertThat(drain()).extracting(DurabilityQueue.Write::blockIndex).as("in flight: after their answer")
                    .containsExactlyInAnyOrder(1L, 2L);
            inFlight.forEach(queue::landed);
            assertThat(ran).as("landed in the topic that is gone").isEmpty();
            List<DurabilityQueue.Write> rewritten = drain();
            assertThat(rewritten).extracting(DurabilityQueue.Write::blockIndex).containsExactlyInAnyOrder(3L, 4L);
            rewritten.forEach(queue::landed);
            assertThat(ran).containsExactly("on 4");
        }

        @Test
        void aFailedWriteTakenBeforeItIsWrittenAgainWithTheRewritesOffset() {
            queue.changed(0);
            waitFor(0, "a");
            DurabilityQueue.Write old = drainOne();
            queue.rewrite(blocks(0));

            queue.failed(old, now);
            queue.retryNow();

            DurabilityQueue.Write again = drainOne();
            assertThat(again.offset()).isGreaterThan(old.offset());
            queue.landed(again);
            assertThat(ran).containsExactly("a");
        }

        @Test
        void clearsEveryBackoff() {
            queue.changed(0);
            queue.failed(drainOne(), now);

            queue.rewrite(blocks(0));

            assertThat(drain()).extracting(DurabilityQueue.Write::blockIndex).containsExactly(0L);
        }
    }

    @Nested
    @DisplayName("counts and clear")
    class CountsAndClear {

        @Test
        void waitersOnHeldBlocksAreCountedApartUntilTheHoldIsReleased() {
            queue.changed(0);
            queue.changed(5);
            assertThat(queue.afterDurable(0, true, waiter("held"))).isFalse();
            assertThat(queue.afterDurable(5, false, waiter("free"))).isFalse();
            assertThat(queue.afterDurable(9, true, waiter("clean, held"))).as("nothing to wait for").isTrue();

            assertThat(queue.waiting()).isEqualTo(2);
            assertThat(queue.waitingForHeld()).isEqualTo(1);

            queue.holdReleased(NONE_HELD);

            assertThat(queue.waitingForHeld()).isZero();
            assertThat(queue.waiting()).isEqualTo(2);
            drain().forEach(queue::landed);
            assertThat(ran).containsExactlyInAnyOrder("clean, held", "held", "free");
            assertThat(queue.waiting()).isZero();
        }

        /**
         * A block awaiting its cold part is held alone, and released alone: its waiters then
         * count against the bound on new ends, and another block's hold stays counted apart.
         */
        @Test
        void aBlockWhoseHoldEndsAloneCountsItsWaitersAgainAndOnlyThem() {
            queue.changed(0);
            queue.changed(7);
            queue.afterDurable(0, true, waiter("held 0"));
            queue.afterDurable(0, true, waiter("held 0 again"));
            queue.afterDurable(7, true, waiter("held 7"));

            queue.holdReleased(index -> index == 7);

            assertThat(queue.waitingForHeld()).as("block 7 is still held").isEqualTo(1);
            assertThat(queue.waiting()).isEqualTo(3);
            drain().stream().filter(write -> write.blockIndex() == 0).forEach(queue::landed);
            assertThat(queue.waiting()).isEqualTo(1);
            assertThat(queue.waitingForHeld()).isEqualTo(1);

            queue.holdReleased(NONE_HELD);
            assertThat(queue.waitingForHeld()).isZero();
        }

        /** A held block's write that lands (taken before the hold) releases its waiters from both counts. */
        @Test
        void aHeldWaiterReleasedByALandingLeavesTheHeldCount() {
            queue.changed(3);
            DurabilityQueue.Write write = drainOne();
            queue.afterDurable(3, true, waiter("held 3"));

            queue.landed(write);

            assertThat(ran).containsExactly("held 3");
            assertThat(queue.waiting()).isZero();
            assertThat(queue.waitingForHeld()).isZero();
        }

        @Test
        void clearForgetsBlocksWritesBackoffsAndWaitersWhichNeverRun() {
            queue.changed(0);
            queue.afterDurable(0, true, waiter("held"));
            DurabilityQueue.Write inFlight = drainOne();
            queue.changed(1);
            waitFor(1, "dirty");
            queue.changed(2);
            queue.failed(queue.drain(index -> index != 2, now).get(0), now);

            queue.clear();

            assertThat(queue.waiting()).isZero();
            assertThat(queue.waitingForHeld()).isZero();
            assertThat(queue.isDirty()).isFalse();
            assertThat(queue.hasInFlight()).isFalse();
            assertThat(queue.nextRetryNanos(NONE_HELD)).isEqualTo(-1);
            queue.landed(inFlight);
            assertThat(ran).isEmpty();
            assertThat(waitFor(0, "after")).isTrue();
        }

        /** A queue cleared and used again starts afresh: no backoff, no held count left over. */
        @Test
        void aClearedQueueKeepsNoBackoffNorHeldCountForItsNextUse() {
            queue.changed(2);
            queue.failed(drainOne(), now);
            queue.failed(queue.drain(NONE_HELD, now + FIRST).get(0), now + FIRST);
            queue.changed(4);
            queue.afterDurable(4, true, waiter("held"));

            queue.clear();
            queue.changed(2);
            queue.changed(4);
            queue.afterDurable(4, true, waiter("held again"));

            List<DurabilityQueue.Write> writes = drain();
            assertThat(writes).as("no backoff left").extracting(DurabilityQueue.Write::blockIndex)
                    .containsExactly(2L, 4L);
            queue.failed(writes.get(0), now);
            assertThat(queue.nextRetryNanos(NONE_HELD)).as("the first backoff again").isEqualTo(now + FIRST);
            queue.holdReleased(NONE_HELD);
            assertThat(queue.waitingForHeld()).isZero();
        }

        /** Of two held waiters, the one a landing releases leaves the held count; the other stays in it. */
        @Test
        void aLandingThatReleasesSomeOfAHeldBlocksWaitersLeavesTheRestCountedAsHeld() {
            queue.changed(3);
            DurabilityQueue.Write first = drainOne();
            queue.afterDurable(3, true, waiter("held, first write"));
            queue.changed(3);
            queue.afterDurable(3, true, waiter("held, next write"));

            queue.landed(first);

            assertThat(ran).containsExactly("held, first write");
            assertThat(queue.waiting()).isEqualTo(1);
            assertThat(queue.waitingForHeld()).isEqualTo(1);
            queue.holdReleased(NONE_HELD);
            assertThat(queue.waitingForHeld()).isZero();
        }

        @Test
        void aBlockIsDurableOnlyWhenNothingOfItWaitsToBeWrittenOrIsBeingWritten() {
            assertThat(queue.isDurable(6)).as("never changed").isTrue();
            queue.changed(6);
            assertThat(queue.isDurable(6)).as("dirty").isFalse();
            DurabilityQueue.Write write = drainOne();
            assertThat(queue.isDurable(6)).as("in flight").isFalse();

            assertThat(queue.landed(write)).isTrue();

            assertThat(queue.isDurable(6)).isTrue();
        }

        @Test
        void aWriteTakenBeforeARewriteCountsForNothingWhenItLands() {
            queue.changed(1);
            DurabilityQueue.Write before = drainOne();
            waitFor(1, "waiter");

            queue.rewrite(blocks(1));

            assertThat(queue.landed(before)).isFalse();
            assertThat(ran).isEmpty();
            assertThat(queue.landed(drainOne())).isTrue();
            assertThat(ran).containsExactly("waiter");
        }

        @Test
        void theNextRetryIsTheEarliestOfTheBlocksBackingOff() {
            queue.changed(1);
            queue.changed(2);
            List<DurabilityQueue.Write> writes = drain();
            queue.failed(writes.get(1), now);
            queue.failed(writes.get(0), now + 10 * MS);

            assertThat(queue.nextRetryNanos(NONE_HELD)).isEqualTo(now + FIRST);
            assertThat(queue.nextRetryNanos(index -> index == 2)).as("block 2 held").isEqualTo(now + 10 * MS + FIRST);
        }
    }
}
