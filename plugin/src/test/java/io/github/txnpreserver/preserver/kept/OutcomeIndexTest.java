package io.github.txnpreserver.preserver.kept;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import io.github.txnpreserver.statetopic.MalformedRecordException;
import io.github.txnpreserver.statetopic.RecordPosition;
import io.github.txnpreserver.statetopic.proto.OutcomeBlockRecord;
import java.time.Duration;
import java.util.ArrayList;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Set;
import java.util.stream.LongStream;
import org.junit.jupiter.api.DisplayName;
import org.junit.jupiter.api.Nested;
import org.junit.jupiter.api.Test;

@DisplayName("Outcome index")
class OutcomeIndexTest {

    private static final long TC = 3;
    private static final long TTL = Duration.ofHours(1).toMillis();
    /** A whole second, so that stored end times are exact. */
    private static final long NOW = 1_700_000_000_000L;
    private static final long SECOND = 1000;
    private static final long MINUTE = Duration.ofMinutes(1).toMillis();

    /** What the index answers for a sequence (or a block's record says of it). */
    record Found(Outcome outcome, String owner, long endTimeMillis) {
    }

    private static Found committed(String owner, long endTimeMillis) {
        return new Found(Outcome.COMMITTED, owner, endTimeMillis);
    }

    private static Found aborted(String owner, long endTimeMillis) {
        return new Found(Outcome.ABORTED, owner, endTimeMillis);
    }

    private static Found timedOut(String owner, long endTimeMillis) {
        return new Found(Outcome.TIMED_OUT, owner, endTimeMillis);
    }

    /** The first sequence of a block of 256. */
    private static long block(long index) {
        return index * 256;
    }

    /** An index whose changed blocks are recorded into {@code changes}. */
    private static OutcomeIndex index(int perClient, int floorCap, List<Long> changes) {
        return new OutcomeIndex(perClient, floorCap, TTL, blockIndex -> changes.add(blockIndex));
    }

    /** The blocks reported changed since the last call (each once, first report first); forgets them. */
    private static Set<Long> taken(List<Long> changes) {
        Set<Long> blocks = new LinkedHashSet<>(changes);
        changes.clear();
        return blocks;
    }

    /** A transaction's end as the coordinator drives it, once its finishing entry is durable: decided, then ended. */
    private static void end(OutcomeIndex index, long sequence, Outcome outcome, String owner, long atMillis) {
        index.decide(sequence, outcome, owner, atMillis);
        index.ended(sequence);
    }

    private static void commit(OutcomeIndex index, long sequence, String owner, long atMillis) {
        end(index, sequence, Outcome.COMMITTED, owner, atMillis);
    }

    /** What the index answers for a sequence, or null. */
    private static Found find(OutcomeIndex index, long sequence) {
        long packed = index.find(sequence, -1);
        if (packed == -1) {
            return null;
        }
        return new Found(ClientFloor.outcomeOf(packed),
                index.ownerName(ClientFloor.ownerOf(packed)), OutcomeIndex.millisOf(ClientFloor.timeOf(packed)));
    }

    /** What the record of a sequence's block must say of it now, or null (no record, or not in it). */
    private static Found inRecord(OutcomeIndex index, long sequence) {
        OutcomeBlock record = index.recordOf(OutcomeBlock.indexOf(sequence));
        int offset = OutcomeBlock.offsetOf(sequence);
        if (record == null || !record.has(offset)) {
            return null;
        }
        return new Found(record.outcome(offset),
                index.ownerName(record.owner(offset)), OutcomeIndex.millisOf(record.time(offset)));
    }

    /** A block's record as the state topic gets it, read back. */
    private static OutcomeBlockRecord written(OutcomeIndex index, long blockIndex) throws MalformedRecordException {
        OutcomeBlock record = index.recordOf(blockIndex);
        assertThat(record).as("block %d has a record", blockIndex).isNotNull();
        return BlockRecordCodec.decode(BlockRecordCodec.key(blockIndex),
                BlockRecordCodec.encode(TC, record, index::ownerName), TC, BlockRecordCodec.MAX_BLOCK_INDEX);
    }

    /** What a restore would read from the records an earlier incarnation wrote of these blocks. */
    /**
     * The memory bound's step when no block can go cold (none has a landed record: these
     * indexes write nothing), as it was before the cold tier.
     *
     * @return the outcomes it dropped, or -1 if it could do nothing
     */
    private static int evictOldest(OutcomeIndex index) {
        long before = index.memoryEvictions();
        return index.evictOldest(block -> true) == OutcomeIndex.Eviction.NONE ? -1
                : (int) (index.memoryEvictions() - before);
    }

    private static Long oldestEvictableMillis(OutcomeIndex index) {
        return index.oldestEvictableMillis(block -> true, new boolean[1]);
    }

    private static RestoredBlocks restoredFrom(OutcomeIndex earlier, Iterable<Long> blockIndexes)
            throws MalformedRecordException {
        RestoredBlocks restored = new RestoredBlocks();
        for (long blockIndex : blockIndexes) {
            if (earlier.recordOf(blockIndex) == null) {
                restored.deleted(blockIndex);
            } else {
                restored.put(written(earlier, blockIndex), null);
            }
        }
        return restored;
    }

    @Nested
    @DisplayName("by time")
    class ByTime {

        private final List<Long> changes = new ArrayList<>();
        private final OutcomeIndex index = index(10, 1000, changes);

        @Test
        void keepsAnOutcomeForItsTimeToLiveAndNoLonger() {
            commit(index, 1, "alice", NOW);

            assertThat(index.expire(NOW + TTL - 1)).isZero();
            assertThat(find(index, 1)).isEqualTo(committed("alice", NOW));

            assertThat(index.expire(NOW + TTL)).isEqualTo(1);
            assertThat(find(index, 1)).isNull();
            assertThat(index.size()).isZero();
            assertThat(index.expirations()).isEqualTo(1);
            assertThat(index.ownerCount()).isZero();
        }

        @Test
        void anEndTimeIsKeptToTheSecondRoundedUpSoNothingExpiresEarly() {
            commit(index, 1, "alice", NOW + 1);

            assertThat(find(index, 1).endTimeMillis()).isEqualTo(NOW + 1000);
            assertThat(index.expire(NOW + 1 + TTL)).isZero();
            assertThat(index.expire(NOW + 1000 + TTL)).isEqualTo(1);
        }

        @Test
        void dropsTheExpiredOutcomesOfABlockAndKeepsItsYoungerOnes() {
            commit(index, 1, "alice", NOW);
            commit(index, 2, "alice", NOW + 10 * MINUTE);

            assertThat(index.expire(NOW + TTL)).isEqualTo(1);

            assertThat(find(index, 1)).isNull();
            assertThat(find(index, 2)).isEqualTo(committed("alice", NOW + 10 * MINUTE));
            assertThat(index.blockCount()).isEqualTo(1);
            assertThat(index.windowMillis(NOW + TTL)).isEqualTo(TTL - 10 * MINUTE);
        }

        @Test
        void dropsAWholeBlockOnceItsNewestOutcomeExpiredAndDeletesItsRecord() {
            commit(index, block(0) + 1, "alice", NOW);
            commit(index, block(0) + 2, "bob", NOW + MINUTE);
            commit(index, block(1), "alice", NOW + 30 * MINUTE);
            taken(changes);

            assertThat(index.expire(NOW + MINUTE + TTL)).isEqualTo(2);

            assertThat(index.blockCount()).isEqualTo(1);
            assertThat(find(index, block(1))).isEqualTo(committed("alice", NOW + 30 * MINUTE));
            assertThat(taken(changes)).containsExactly(0L);
            assertThat(index.recordOf(0)).as("a tombstone").isNull();
            assertThat(index.recordOf(1).count()).isEqualTo(1);
            assertThat(inRecord(index, block(1))).isEqualTo(committed("alice", NOW + 30 * MINUTE));
        }

        @Test
        void theWindowIsTheAgeOfTheOldestKeptOutcome() {
            assertThat(index.windowMillis(NOW)).isZero();
            commit(index, 1, "alice", NOW);
            commit(index, block(1), "alice", NOW + 5 * MINUTE);

            assertThat(index.windowMillis(NOW + 20 * MINUTE)).isEqualTo(20 * MINUTE);
        }
    }

    @Nested
    @DisplayName("under the memory bound")
    class UnderTheMemoryBound {

        private final List<Long> changes = new ArrayList<>();
        /** One client, floor of one: only its newest outcome survives eviction. */
        private final OutcomeIndex index = index(1, 1000, changes);

        @Test
        void dropsTheLeastRecentlyWrittenBlockFirst() {
            commit(index, block(0), "alice", NOW);
            commit(index, block(0) + 1, "alice", NOW);
            commit(index, block(1), "alice", NOW + 1000);
            commit(index, block(2), "alice", NOW + 2000);

            assertThat(oldestEvictableMillis(index)).isEqualTo(NOW);
            assertThat(evictOldest(index)).as("block 0's outcomes").isEqualTo(2);

            assertThat(find(index, block(0))).isNull();
            assertThat(find(index, block(0) + 1)).isNull();
            assertThat(find(index, block(1))).isEqualTo(committed("alice", NOW + 1000));
            assertThat(index.memoryEvictions()).isEqualTo(2);
            assertThat(index.size()).isEqualTo(2);
        }

        @Test
        void aBlockWrittenAgainBecomesTheNewest() {
            commit(index, block(0), "alice", NOW);
            commit(index, block(1), "alice", NOW);
            commit(index, block(0) + 1, "alice", NOW);

            evictOldest(index);

            assertThat(find(index, block(1))).isNull();
            assertThat(find(index, block(0))).isEqualTo(committed("alice", NOW));
        }

        @Test
        void anEvictedBlockIsDeletedFromTheStateTopicAndFreesItsMemory() {
            commit(index, block(0), "alice", NOW);
            commit(index, block(1), "alice", NOW);
            taken(changes);
            long before = index.bytes();

            evictOldest(index);

            assertThat(index.bytes()).isLessThan(before);
            assertThat(taken(changes)).containsExactly(0L);
            assertThat(index.recordOf(0)).as("a tombstone").isNull();
            assertThat(index.keyCount()).isEqualTo(1);
        }

        @Test
        void hasNothingToDropWhenEmpty() {
            assertThat(evictOldest(index)).isEqualTo(-1);
            assertThat(oldestEvictableMillis(index)).isNull();
        }
    }

    @Nested
    @DisplayName("the per-client floor")
    class Floor {

        private final List<Long> changes = new ArrayList<>();
        private final OutcomeIndex index = index(2, 1000, changes);

        @Test
        void eachClientsNewestOutcomesSurviveTheMemoryBound() {
            commit(index, 0, "alice", NOW);
            commit(index, 1, "alice", NOW + 1000);
            end(index, 2, Outcome.ABORTED, "alice", NOW + 2000);
            commit(index, 3, "bob", NOW);
            taken(changes);

            assertThat(evictOldest(index)).as("alice's oldest; her two newest and bob's stay").isEqualTo(1);

            assertThat(index.blockCount()).isZero();
            assertThat(find(index, 0)).as("alice's oldest, past her floor").isNull();
            assertThat(find(index, 1)).isEqualTo(committed("alice", NOW + 1000));
            assertThat(find(index, 2)).isEqualTo(aborted("alice", NOW + 2000));
            assertThat(find(index, 3)).isEqualTo(committed("bob", NOW));
            assertThat(index.size()).isEqualTo(3);
            assertThat(index.floorSize()).isEqualTo(3);
            assertThat(index.memoryEvictions()).as("only alice's oldest is no longer kept").isEqualTo(1);
            assertThat(taken(changes)).as("the block's record still holds the floor entries: not deleted").isEmpty();
            assertThat(inRecord(index, 0)).isNull();
            assertThat(inRecord(index, 2)).isEqualTo(aborted("alice", NOW + 2000));
            assertThat(inRecord(index, 3)).isEqualTo(committed("bob", NOW));
        }

        @Test
        void doesNotOutliveTheTimeToLive() {
            commit(index, 0, "alice", NOW);
            commit(index, 1, "bob", NOW + MINUTE);
            evictOldest(index);
            taken(changes);

            assertThat(index.expire(NOW + TTL)).isEqualTo(1);
            assertThat(taken(changes)).as("bob's entry still needs the record").isEmpty();
            assertThat(index.expire(NOW + MINUTE + TTL)).isEqualTo(1);

            assertThat(find(index, 0)).isNull();
            assertThat(find(index, 1)).isNull();
            assertThat(index.size()).isZero();
            assertThat(taken(changes)).containsExactly(0L);
            assertThat(index.recordOf(0)).as("the last floor entry gone: the record is deleted").isNull();
        }

        @Test
        void aBlockWrittenAgainAfterEvictionKeepsItsFloorEntriesInItsRecord() throws Exception {
            commit(index, 0, "alice", NOW);
            commit(index, 1, "bob", NOW);
            evictOldest(index);
            taken(changes);

            commit(index, 2, "carol", NOW + MINUTE);

            assertThat(taken(changes)).containsExactly(0L);
            assertThat(inRecord(index, 0)).isEqualTo(committed("alice", NOW));
            assertThat(inRecord(index, 1)).isEqualTo(committed("bob", NOW));
            assertThat(inRecord(index, 2)).isEqualTo(committed("carol", NOW + MINUTE));
            assertThat(written(index, 0).getOwnersList()).containsExactlyInAnyOrder("alice", "bob", "carol");
        }

        /** A timeout-abort is an abort to every end request, but is kept apart from a client's abort. */
        @Test
        void aTimeoutAbortStaysApartFromAClientsAbortInItsBlockItsRecordAndTheFloor() throws Exception {
            end(index, 1, Outcome.TIMED_OUT, "alice", NOW);
            end(index, 2, Outcome.ABORTED, "alice", NOW + 1000);

            assertThat(find(index, 1)).isEqualTo(timedOut("alice", NOW));
            assertThat(find(index, 2)).isEqualTo(aborted("alice", NOW + 1000));
            assertThat(inRecord(index, 1)).isEqualTo(timedOut("alice", NOW));
            OutcomeIndex restarted = index(2, 1000, new ArrayList<>());
            restarted.hold(Long.MAX_VALUE);
            restarted.merge(restoredFrom(index, List.of(0L)), NOW);
            assertThat(find(restarted, 1)).isEqualTo(timedOut("alice", NOW));
            assertThat(find(restarted, 2)).isEqualTo(aborted("alice", NOW + 1000));
            assertThat(evictOldest(restarted)).as("the restored block dropped; the rebuilt floor keeps both").isZero();
            assertThat(find(restarted, 1)).isEqualTo(timedOut("alice", NOW));
            assertThat(find(restarted, 2)).isEqualTo(aborted("alice", NOW + 1000));

            assertThat(evictOldest(index)).as("dropped from memory; alice's floor keeps both").isZero();
            assertThat(index.blockCount()).isZero();
            assertThat(find(index, 1)).isEqualTo(timedOut("alice", NOW));
            assertThat(find(index, 2)).isEqualTo(aborted("alice", NOW + 1000));
            assertThat(inRecord(index, 1)).isEqualTo(timedOut("alice", NOW));
        }

        @Test
        void theCapTakesFromTheClientThatEndedATransactionLeastRecently() {
            OutcomeIndex capped = index(2, 3, changes);
            commit(capped, 0, "alice", NOW);
            commit(capped, 1, "bob", NOW + 1000);
            commit(capped, 2, "alice", NOW + 2000);

            commit(capped, 3, "carol", NOW + 3000);

            assertThat(capped.floorSize()).isEqualTo(3);
            assertThat(capped.floorEvictions()).isEqualTo(1);
            assertThat(capped.clients()).as("bob has no floor entry left").isEqualTo(2);
            evictOldest(capped);
            assertThat(find(capped, 1)).as("bob ended least recently").isNull();
            assertThat(find(capped, 0)).isEqualTo(committed("alice", NOW));
            assertThat(find(capped, 2)).isEqualTo(committed("alice", NOW + 2000));
            assertThat(find(capped, 3)).isEqualTo(committed("carol", NOW + 3000));
            assertThat(capped.ownerCount()).as("bob is forgotten").isEqualTo(2);
        }

        @Test
        void transactionsWithoutOwnerShareOneClientsFloor() {
            commit(index, 0, null, NOW);
            commit(index, 1, null, NOW + 1000);
            commit(index, 2, null, NOW + 2000);

            evictOldest(index);

            assertThat(index.clients()).isEqualTo(1);
            assertThat(find(index, 0)).isNull();
            assertThat(find(index, 2)).isEqualTo(committed(null, NOW + 2000));
            assertThat(index.ownerCount()).isZero();
        }

        /**
         * "A floor-only block is deleted while a floor entry still needs its record". A block
         * drops each expired entry, but a client's floor expires in the order the client ended
         * its transactions and stops at the first it keeps: so a floor entry can outlive its
         * block entry. Here alice's 2 was decided after 1 with an earlier end time (a clock
         * that stepped back). In 45163af dropping the block counted the floor entries of the
         * offsets it still had only (1, not 2): its record was deleted as soon as 1 left the
         * floor, and 2, still answered, was lost at the next restart.
         */
        @Test
        void aDroppedBlocksRecordStaysUntilTheLastOfItsFloorEntriesLeavesEvenOneItsBlockNoLongerHad() {
            commit(index, 1, "alice", NOW + 10 * MINUTE);
            commit(index, 2, "alice", NOW);
            index.expire(NOW + TTL);
            assertThat(find(index, 2)).as("expired from its block, not from alice's floor, which stops at 1")
                    .isEqualTo(committed("alice", NOW));
            assertThat(index.blockCount()).isEqualTo(1);
            taken(changes);

            evictOldest(index);
            assertThat(index.blockCount()).isZero();
            assertThat(taken(changes)).as("both floor entries need the record").isEmpty();
            assertThat(inRecord(index, 1)).isEqualTo(committed("alice", NOW + 10 * MINUTE));
            assertThat(inRecord(index, 2)).isEqualTo(committed("alice", NOW));

            commit(index, block(1), "alice", NOW + TTL);
            assertThat(find(index, 1)).as("pushed out of alice's floor").isNull();
            assertThat(find(index, 2)).isEqualTo(committed("alice", NOW));
            assertThat(taken(changes)).as("2 still needs block 0's record: not deleted").containsExactly(1L);
            assertThat(inRecord(index, 2)).isEqualTo(committed("alice", NOW));

            commit(index, block(1) + 1, "alice", NOW + TTL);
            assertThat(find(index, 2)).isNull();
            assertThat(taken(changes)).containsExactlyInAnyOrder(0L, 1L);
            assertThat(index.recordOf(0)).as("the last floor entry gone: the record is deleted").isNull();
        }

        @Test
        void everyBlockWithARecordIsListedForATopicCreatedAgainAndNoDeletedOne() {
            OutcomeIndex one = index(1, 1000, changes);
            commit(one, block(0), "alice", NOW);
            commit(one, block(1), "bob", NOW);
            commit(one, block(2), "alice", NOW);
            evictOldest(one);
            evictOldest(one);

            assertThat(one.recordOf(0)).as("alice's floor moved on to block 2: deleted").isNull();
            assertThat(one.recordOf(1).count()).as("bob's floor entry only").isEqualTo(1);
            assertThat(inRecord(one, block(1))).isEqualTo(committed("bob", NOW));
            assertThat(one.blocksWithRecords().toLongArray()).containsExactlyInAnyOrder(1L, 2L);
            assertThat(one.keyCount()).isEqualTo(2);
        }
    }

    @Nested
    @DisplayName("owners")
    class Owners {

        private final List<Long> changes = new ArrayList<>();

        @Test
        void keepsAThousandOwnersExactlyInMemoryAndInTheRecords() throws Exception {
            OutcomeIndex index = index(1, 100_000, changes);
            for (int i = 0; i < 1000; i++) {
                commit(index, i, owner(i), NOW);
            }

            for (int i = 0; i < 1000; i++) {
                assertThat(find(index, i)).isEqualTo(committed(owner(i), NOW));
            }
            assertThat(index.ownerCount()).isEqualTo(1000);

            OutcomeIndex restarted = index(1, 100_000, new ArrayList<>());
            restarted.hold(Long.MAX_VALUE);
            restarted.merge(restoredFrom(index, taken(changes)), NOW);
            for (int i = 0; i < 1000; i++) {
                assertThat(find(restarted, i)).isEqualTo(committed(owner(i), NOW));
            }
            assertThat(restarted.ownerCount()).isEqualTo(1000);
        }

        @Test
        void keepsOwnersExactlyPastTheSixteenBitOwnerColumn() throws Exception {
            int owners = 70_000;
            OutcomeIndex index = index(1, 100_000, changes);
            for (int i = 0; i < owners; i++) {
                commit(index, i, owner(i), NOW);
            }

            assertThat(index.ownerCount()).isEqualTo(owners);
            for (int i = 0; i < owners; i++) {
                assertThat(find(index, i)).as("outcome of %d", i).isEqualTo(committed(owner(i), NOW));
            }
            OutcomeIndex restarted = index(1, 100_000, new ArrayList<>());
            restarted.hold(Long.MAX_VALUE);
            restarted.merge(restoredFrom(index, taken(changes)), NOW);
            for (int i = 0; i < owners; i += 97) {
                assertThat(find(restarted, i)).as("outcome of %d", i).isEqualTo(committed(owner(i), NOW));
            }
            assertThat(find(restarted, owners - 1)).isEqualTo(committed(owner(owners - 1), NOW));
            assertThat(restarted.ownerCount()).isEqualTo(owners);
        }

        @Test
        void aBlockWhoseOwnersDifferOnlyLaterStillNamesEachExactly() {
            OutcomeIndex index = index(10, 1000, changes);
            for (int i = 0; i < 10; i++) {
                commit(index, i, "alice", NOW);
            }
            commit(index, 10, "bob", NOW);
            commit(index, 11, null, NOW);

            assertThat(find(index, 9)).isEqualTo(committed("alice", NOW));
            assertThat(find(index, 10)).isEqualTo(committed("bob", NOW));
            assertThat(find(index, 11)).isEqualTo(committed(null, NOW));
        }

        @Test
        void anOwnerWhoseOutcomesAreAllGoneIsForgotten() {
            OutcomeIndex index = index(10, 1000, changes);
            commit(index, 0, "alice", NOW);
            commit(index, 1, "bob", NOW + MINUTE);

            index.expire(NOW + TTL);

            assertThat(index.ownerCount()).isEqualTo(1);
            assertThat(find(index, 1)).isEqualTo(committed("bob", NOW + MINUTE));
        }

        /**
         * Review of the redesign, finding (a): a restored record names "mallory" for 5 (a
         * record someone else wrote); the coordinator then decides 5 for alice.
         */
        @Test
        void aFloorEntryReplacedByAnotherOwnersDecisionIsAnsweredToTheNewOwner() throws Exception {
            OutcomeIndex index = index(1, 1000, changes);
            OutcomeBlock foreign = new OutcomeBlock(0);
            foreign.set(5, Outcome.COMMITTED, OutcomeIndex.storedSecond(NOW - MINUTE), 1);
            RestoredBlocks restored = new RestoredBlocks();
            restored.put(BlockRecordCodec.decode("c0", BlockRecordCodec.encode(TC, foreign, id -> "mallory"), TC, 0),
                    null);
            index.hold(5);
            index.merge(restored, NOW);
            assertThat(find(index, 5)).isEqualTo(committed("mallory", NOW - MINUTE));
            assertThat(index.floorSize()).isEqualTo(1);

            end(index, 5, Outcome.ABORTED, "alice", NOW);
            assertThat(evictOldest(index)).as("dropped from memory; the floor keeps the outcome").isZero();

            assertThat(index.blockCount()).isZero();
            // Before: ClientFloor.add replaced the outcome but kept mallory's owner: mallory was answered.
            assertThat(find(index, 5)).isEqualTo(aborted("alice", NOW));
            assertThat(inRecord(index, 5)).isEqualTo(aborted("alice", NOW));
            assertThat(index.ownerCount()).as("mallory is forgotten").isEqualTo(1);

            commit(index, 6, "mallory", NOW);
            commit(index, 7, "mallory", NOW);
            evictOldest(index);
            assertThat(index.blockCount()).isZero();
            assertThat(find(index, 7)).isEqualTo(committed("mallory", NOW));
            assertThat(find(index, 5)).as("mallory's later outcomes do not take alice's entry")
                    .isEqualTo(aborted("alice", NOW));
        }

        private static String owner(int i) {
            return "tenant-" + (i % 7) + "/role:" + i + (i % 3 == 0 ? "-\u00e9" : "");
        }
    }

    @Nested
    @DisplayName("an end in progress")
    class EndInProgress {

        private final List<Long> changes = new ArrayList<>();
        private final OutcomeIndex index = index(10, 1000, changes);

        @Test
        void aDecisionWritesItsBlock() {
            index.decide(1, Outcome.ABORTED, "alice", NOW);

            assertThat(taken(changes)).containsExactly(0L);
            assertThat(inRecord(index, 1)).isEqualTo(aborted("alice", NOW));
            assertThat(find(index, 1)).isEqualTo(aborted("alice", NOW));
        }

        @Test
        void aRetriedDecisionChangesNothing() {
            index.decide(1, Outcome.COMMITTED, "alice", NOW);
            taken(changes);

            index.decide(1, Outcome.COMMITTED, "alice", NOW + MINUTE);
            index.decide(1, Outcome.ABORTED, "alice", NOW + MINUTE);

            assertThat(taken(changes)).as("even of another outcome").isEmpty();
            assertThat(find(index, 1)).isEqualTo(committed("alice", NOW));
        }

        @Test
        void anOutcomeReplayedAsTheRecordSaysItIsNotWrittenAgain() {
            commit(index, 1, "alice", NOW);
            taken(changes);

            commit(index, 1, "alice", NOW + MINUTE);

            assertThat(taken(changes)).isEmpty();
            assertThat(find(index, 1)).isEqualTo(committed("alice", NOW));
            assertThat(index.floorSize()).isEqualTo(1);
        }

        @Test
        void aDecisionReplacesAStaleRecordOfTheOtherOutcome() {
            commit(index, 1, "alice", NOW);
            taken(changes);

            index.decide(1, Outcome.ABORTED, "alice", NOW + MINUTE);

            assertThat(taken(changes)).containsExactly(0L);
            assertThat(inRecord(index, 1)).isEqualTo(aborted("alice", NOW + MINUTE));
            index.ended(1);
            assertThat(find(index, 1)).isEqualTo(aborted("alice", NOW + MINUTE));
            assertThat(index.floorSize()).isEqualTo(1);
            assertThat(index.ownerCount()).isEqualTo(1);
        }

        @Test
        void itsBlockIsNotEvictedUntilItEnded() {
            index.decide(block(0), Outcome.COMMITTED, "alice", NOW);
            commit(index, block(1), "alice", NOW + 1000);

            assertThat(oldestEvictableMillis(index)).isEqualTo(NOW + 1000);
            assertThat(evictOldest(index)).as("block 1, although block 0 is older; its one outcome stays in"
                    + " alice's floor").isZero();
            assertThat(index.blockCount()).isEqualTo(1);
            assertThat(evictOldest(index)).as("decided, but not ended").isEqualTo(-1);
            assertThat(find(index, block(0))).isEqualTo(committed("alice", NOW));

            index.ended(block(0));
            assertThat(evictOldest(index)).as("dropped from memory; alice's floor keeps its outcome").isZero();
            assertThat(index.blockCount()).isZero();
            assertThat(find(index, block(0))).isEqualTo(committed("alice", NOW));
        }

        @Test
        void itsBlockDoesNotExpireUntilItEnded() {
            index.decide(1, Outcome.COMMITTED, "alice", NOW);
            commit(index, 2, "alice", NOW);

            assertThat(index.expire(NOW + 2 * TTL)).isZero();
            assertThat(find(index, 2)).isEqualTo(committed("alice", NOW));

            index.ended(1);
            assertThat(index.expire(NOW + 2 * TTL)).isEqualTo(2);
            assertThat(index.size()).isZero();
        }
    }

    @Nested
    @DisplayName("changed blocks")
    class ChangedBlocks {

        private final List<Long> changes = new ArrayList<>();
        private final OutcomeIndex index = index(10, 1000, changes);

        @Test
        void reportsEachChangedBlockWhoseRecordIsTheBlockAsItIsNow() throws Exception {
            commit(index, 1, "alice", NOW);
            commit(index, 2, "bob", NOW);
            commit(index, block(1), "alice", NOW);

            assertThat(taken(changes)).containsExactly(0L, 1L);
            assertThat(index.recordOf(0).count()).isEqualTo(2);
            OutcomeBlockRecord record = written(index, 0);
            assertThat(record.getCoordinatorId()).isEqualTo(TC);
            assertThat(record.getBlockIndex()).isZero();
            assertThat(record.getOwnersList()).containsExactly("alice", "bob");
            assertThat(taken(changes)).isEmpty();
        }

        @Test
        void whileHoldingTheHeldBlocksAreReportedLikeAnyOtherAndTheWriterKeepsThemBack() {
            index.hold(300);
            commit(index, 2, "alice", NOW);
            commit(index, 512, "alice", NOW);

            assertThat(taken(changes)).containsExactly(0L, 2L);
            assertThat(index.isHolding()).isTrue();
            assertThat(index.isHeld(0)).isTrue();
            assertThat(index.isHeld(1)).isTrue();
            assertThat(index.isHeld(2)).isFalse();
        }
    }

    /**
     * A restore read again (the first read failed) may find an older record of a block this
     * coordinator wrote while it read, and that went cold since: the cold tier's position is
     * the newer, and what the read found must neither replace it nor delete its record.
     */
    @Nested
    @DisplayName("a restore's read meets blocks that went cold meanwhile")
    class RestoreMeetsCold {

        private final List<Long> changes = new ArrayList<>();
        private final OutcomeIndex index = index(10, 1000, changes);
        private final RecordPosition older = new RecordPosition(7, 1, -1, 0);
        private final RecordPosition newer = new RecordPosition(7, 9, -1, 0);

        /** Block 5, past the hold, written twice by this coordinator; its newer record went cold. */
        private OutcomeIndex earlierCopy() {
            index.hold(block(1) - 1);
            commit(index, block(5), "alice", NOW);
            OutcomeIndex earlier = index(10, 1000, new ArrayList<>());
            commit(earlier, block(5), "alice", NOW);
            commit(index, block(5) + 1, "bob", NOW);
            index.landed(5, newer);
            assertThat(index.evictOldest(block -> true)).isEqualTo(OutcomeIndex.Eviction.COLD);
            taken(changes);
            return earlier;
        }

        @Test
        void anOlderRecordReadDecodedLeavesTheColdPositionAndIsNotAdopted() throws Exception {
            OutcomeIndex earlier = earlierCopy();
            RestoredBlocks read = new RestoredBlocks();
            read.put(written(earlier, 5), older);

            index.merge(read, NOW);

            assertThat(index.coldRecordOf(5)).isEqualTo(newer);
            assertThat(index.blockCount()).as("not adopted into memory").isZero();
            assertThat(index.isHeld(5)).isFalse();
            assertThat(taken(changes)).isEmpty();
        }

        @Test
        void anOlderRecordReadColdLeavesTheColdPosition() throws Exception {
            OutcomeIndex earlier = earlierCopy();
            RestoredBlocks read = new RestoredBlocks(0, 10);
            read.put(written(earlier, 5), older);
            assertThat(read.cold().positionOf(5)).isEqualTo(older);

            index.merge(read, NOW);

            assertThat(index.coldRecordOf(5)).isEqualTo(newer);
            assertThat(taken(changes)).isEmpty();
        }

        @Test
        void anOlderRecordReadWhoseOutcomesExpiredDeletesNothing() throws Exception {
            index.hold(block(1) - 1);
            OutcomeIndex earlier = index(10, 1000, new ArrayList<>());
            commit(earlier, block(5), "alice", NOW - TTL - MINUTE);
            commit(index, block(5) + 1, "bob", NOW);
            index.landed(5, newer);
            index.evictOldest(block -> true);
            taken(changes);
            RestoredBlocks decoded = new RestoredBlocks();
            decoded.put(written(earlier, 5), older);

            index.merge(decoded, NOW);

            assertThat(taken(changes)).as("no tombstone over the newer record").isEmpty();
            assertThat(index.coldRecordOf(5)).isEqualTo(newer);
        }
    }

    @Nested
    @DisplayName("the cold tier under the memory bound")
    class ColdUnderTheBound {

        private final List<Long> changes = new ArrayList<>();
        private final OutcomeIndex index = index(1, 1000, changes);
        private final List<Long> coldReads = new ArrayList<>();

        /** Blocks 0, 1 and 2 cold; alice's newest, her floor entry, in block 5, in memory. */
        private void threeColdBlocks() {
            index.readColdWith((blockIndex, position) -> coldReads.add(blockIndex));
            for (long block = 0; block < 3; block++) {
                commit(index, block(block), "alice", NOW);
                index.landed(block, new RecordPosition(1, block, -1, 0));
            }
            commit(index, block(5), "alice", NOW + SECOND);
            for (int i = 0; i < 3; i++) {
                assertThat(index.evictOldest(block -> block != 5)).isEqualTo(OutcomeIndex.Eviction.COLD);
            }
            assertThat(index.cold.blocks()).isEqualTo(3);
        }

        @Test
        void theLowestColdBlockBackInMemoryIsPassedOverAndTheNextIsDropped() {
            threeColdBlocks();
            commit(index, block(0) + 7, "bob", NOW);
            assertThat(coldReads).as("block 0 awaits its cold part").containsExactly(0L);

            assertThat(index.evictOldest(block -> false)).isEqualTo(OutcomeIndex.Eviction.DROPPED);

            assertThat(index.cold.contains(1)).as("dropped").isFalse();
            assertThat(index.cold.contains(0)).isTrue();
            assertThat(index.cold.contains(2)).isTrue();
        }

        @Test
        void theWindowIsAtMostTheTimeToLiveWhileAColdBlockKeepsAnExpiredOutcome() {
            index.readColdWith((blockIndex, position) -> coldReads.add(blockIndex));
            commit(index, block(0), "alice", NOW);
            commit(index, block(0) + 1, "alice", NOW + 10 * MINUTE);
            index.landed(0, new RecordPosition(1, 0, -1, 0));
            commit(index, block(5), "alice", NOW + 10 * MINUTE);
            index.evictOldest(block -> block == 0);
            long later = NOW + TTL + MINUTE;
            index.expire(later);
            assertThat(index.cold.contains(0)).as("its newest outcome has not expired").isTrue();

            assertThat(index.windowMillis(later)).isEqualTo(TTL);
        }
    }

    @Nested
    @DisplayName("restore")
    class Restore {

        private final List<Long> changes = new ArrayList<>();
        private final OutcomeIndex index = index(10, 1000, changes);

        @Test
        void holdsBlocksThatMayHoldOutcomesNotReadYet() {
            index.hold(block(1) + 44);
            commit(index, 5, "alice", NOW);
            commit(index, block(1) + 45, "alice", NOW);
            commit(index, block(2), "alice", NOW);

            assertThat(index.isHolding()).isTrue();
            assertThat(index.isHeld(0)).isTrue();
            assertThat(index.isHeld(1)).isTrue();
            assertThat(index.isHeld(2)).isFalse();
            assertThat(taken(changes)).containsExactly(0L, 1L, 2L);

            index.merge(new RestoredBlocks(), NOW);

            assertThat(index.isHolding()).isFalse();
            assertThat(index.isHeld(0)).isFalse();
            assertThat(taken(changes)).isEmpty();
            assertThat(find(index, 5)).isEqualTo(committed("alice", NOW));
            assertThat(find(index, block(1) + 45)).isEqualTo(committed("alice", NOW));
        }

        @Test
        void whatTheCoordinatorWroteDuringTheRestoreWinsOverWhatWasRead() throws Exception {
            OutcomeIndex earlier = index(10, 1000, new ArrayList<>());
            commit(earlier, 5, "alice", NOW - MINUTE);
            commit(earlier, 6, "alice", NOW - MINUTE);
            index.hold(Long.MAX_VALUE);
            end(index, 5, Outcome.ABORTED, "bob", NOW);
            taken(changes);

            index.merge(restoredFrom(earlier, List.of(0L)), NOW);

            assertThat(find(index, 5)).isEqualTo(aborted("bob", NOW));
            assertThat(find(index, 6)).as("an end time earlier than the block's first is kept exactly")
                    .isEqualTo(committed("alice", NOW - MINUTE));
            assertThat(taken(changes)).containsExactly(0L);
            assertThat(inRecord(index, 5)).isEqualTo(aborted("bob", NOW));
            assertThat(inRecord(index, 6)).isEqualTo(committed("alice", NOW - MINUTE));
        }

        @Test
        void restoredBlocksAreKeptAsTheOldestAndNotWrittenAgain() throws Exception {
            OutcomeIndex earlier = index(1, 1000, new ArrayList<>());
            commit(earlier, block(0), "alice", NOW - MINUTE);
            commit(earlier, block(1), "alice", NOW - MINUTE);
            OutcomeIndex restarted = index(1, 1000, changes);
            restarted.hold(Long.MAX_VALUE);
            commit(restarted, block(2), "bob", NOW);
            assertThat(taken(changes)).containsExactly(2L);

            restarted.merge(restoredFrom(earlier, List.of(0L, 1L)), NOW);

            assertThat(taken(changes)).isEmpty();
            assertThat(restarted.size()).isEqualTo(3);
            evictOldest(restarted);
            assertThat(find(restarted, block(2))).as("the live block is the newest").isEqualTo(committed("bob", NOW));
            assertThat(restarted.blockCount()).isEqualTo(2);
        }

        @Test
        void deletesARestoredBlockWhoseOutcomesAllExpired() throws Exception {
            OutcomeIndex earlier = index(10, 1000, new ArrayList<>());
            commit(earlier, block(3), "alice", NOW - TTL - MINUTE);
            commit(earlier, block(4), "alice", NOW - MINUTE);
            index.hold(Long.MAX_VALUE);

            index.merge(restoredFrom(earlier, List.of(3L, 4L)), NOW);

            assertThat(find(index, block(3))).isNull();
            assertThat(find(index, block(4))).isEqualTo(committed("alice", NOW - MINUTE));
            assertThat(taken(changes)).containsExactly(3L);
            assertThat(index.recordOf(3)).as("a tombstone").isNull();
        }

        /** A restored block whose newest outcome ended exactly its time-to-live ago has expired, as one in memory has: deleted, not adopted. */
        @Test
        void deletesARestoredBlockWhoseNewestOutcomeEndedExactlyItsTimeToLiveAgo() throws Exception {
            OutcomeIndex earlier = index(10, 1000, new ArrayList<>());
            commit(earlier, block(3), "alice", NOW - TTL - MINUTE);
            commit(earlier, block(3) + 1, "bob", NOW - TTL);
            index.hold(Long.MAX_VALUE);

            index.merge(restoredFrom(earlier, List.of(3L)), NOW);

            assertThat(find(index, block(3) + 1)).isNull();
            assertThat(index.size()).isZero();
            assertThat(index.floorSize()).isZero();
            assertThat(taken(changes)).containsExactly(3L);
            assertThat(index.recordOf(3)).as("a tombstone").isNull();
        }

        /**
         * Blocks read at a restore are older than anything written since; among them the bound
         * drops first the one whose newest outcome ended first (of two that ended in the same
         * second, the lower: its sequences were allocated first), so memory keeps the newest
         * outcomes whatever order the read met their blocks in.
         */
        @Test
        void restoredBlocksAreDroppedOldestEndingFirst() throws Exception {
            OutcomeIndex earlier = index(1, 1000, new ArrayList<>());
            long[] endedMinutesAgo = {3, 5, 1, 5, 4, 5};
            for (int b = 0; b < endedMinutesAgo.length; b++) {
                commit(earlier, block(b), "alice", NOW - endedMinutesAgo[b] * MINUTE);
            }
            OutcomeIndex restarted = index(1, 1000, changes);
            restarted.hold(Long.MAX_VALUE);
            restarted.merge(restoredFrom(earlier, List.of(0L, 1L, 2L, 3L, 4L, 5L)), NOW);
            assertThat(taken(changes)).isEmpty();

            List<Set<Long>> deleted = new ArrayList<>();
            while (evictOldest(restarted) >= 0) {
                deleted.add(taken(changes));
            }

            assertThat(deleted).as("each block's record deleted as it is dropped; block 2's keeps alice's floor entry")
                    .containsExactly(Set.of(1L), Set.of(3L), Set.of(5L), Set.of(4L), Set.of(0L), Set.of());
            assertThat(find(restarted, block(2))).isEqualTo(committed("alice", NOW - MINUTE));
        }

        /**
         * The log's replay may meet again an end whose record the restore's read already
         * merged (the read finished first): same outcome and owner, so nothing is written, but
         * its block ranks as the newest, as it does when the replay meets the end before the
         * merge (the block the replay creates is the newest, and the merge joins the record
         * into it): the memory bound drops the blocks in the same order whichever came first.
         */
        @Test
        void anEndTheReplayMeetsAfterTheMergeRanksItsBlockAsIfMetBeforeIt() throws Exception {
            OutcomeIndex earlier = index(10, 1000, new ArrayList<>());
            commit(earlier, block(0), "alice", NOW - 2 * MINUTE);
            commit(earlier, block(1), "bob", NOW - MINUTE);

            OutcomeIndex replayedFirst = index(10, 1000, new ArrayList<>());
            replayedFirst.hold(Long.MAX_VALUE);
            commit(replayedFirst, block(0), "alice", NOW - 2 * MINUTE);
            replayedFirst.merge(restoredFrom(earlier, List.of(0L, 1L)), NOW);

            index.hold(Long.MAX_VALUE);
            index.merge(restoredFrom(earlier, List.of(0L, 1L)), NOW);
            assertThat(taken(changes)).isEmpty();
            commit(index, block(0), "alice", NOW - 2 * MINUTE);

            assertThat(taken(changes)).as("met again as its record says: not written").isEmpty();
            assertThat(find(index, block(0))).isEqualTo(committed("alice", NOW - 2 * MINUTE));
            assertThat(dropOrder(replayedFirst)).as("met before the merge: block 0 is the newest, bob's goes first")
                    .containsExactly(NOW - MINUTE, NOW - 2 * MINUTE);
            assertThat(dropOrder(index)).as("met after the merge: the same order")
                    .containsExactly(NOW - MINUTE, NOW - 2 * MINUTE);
        }

        /** The newest end time of each block the memory bound drops, in the order it drops them, until none is left. */
        private List<Long> dropOrder(OutcomeIndex restored) {
            List<Long> order = new ArrayList<>();
            for (Long next = oldestEvictableMillis(restored); next != null; next = oldestEvictableMillis(restored)) {
                order.add(next);
                assertThat(evictOldest(restored)).as("floor entries stay").isZero();
            }
            return order;
        }

        /**
         * A block the bound dropped while the restore read keeps its record for its floor
         * entries; once the restored outcomes push them out of their client's floor (they
         * ended later), that record is deleted, and no longer counted as a key or as outcomes.
         */
        @Test
        void aBlockKeptOnlyForFloorEntriesThatTheRestoredOutcomesPushOutIsDeleted() throws Exception {
            OutcomeIndex restarted = index(1, 1000, changes);
            restarted.hold(block(1) - 1);
            commit(restarted, block(2), "alice", NOW - 2 * MINUTE);
            assertThat(evictOldest(restarted)).as("alice's floor entry stays").isZero();
            assertThat(restarted.keyCount()).isEqualTo(1);
            taken(changes);
            OutcomeIndex earlier = index(1, 1000, new ArrayList<>());
            commit(earlier, 5, "alice", NOW - MINUTE);

            restarted.merge(restoredFrom(earlier, List.of(0L)), NOW);

            assertThat(find(restarted, 5)).isEqualTo(committed("alice", NOW - MINUTE));
            assertThat(find(restarted, block(2))).isNull();
            assertThat(taken(changes)).as("block 2's record is deleted").containsExactly(2L);
            assertThat(restarted.recordOf(2)).isNull();
            assertThat(restarted.blocksWithRecords().toLongArray()).containsExactly(0L);
            assertThat(restarted.keyCount()).isEqualTo(1);
            assertThat(restarted.size()).isEqualTo(1);
        }

        @Test
        void aBlockDeletedInTheTopicIsNotRestored() throws Exception {
            OutcomeIndex earlier = index(10, 1000, new ArrayList<>());
            commit(earlier, block(1), "alice", NOW - MINUTE);
            RestoredBlocks restored = restoredFrom(earlier, List.of(1L));
            restored.deleted(1);
            index.hold(Long.MAX_VALUE);

            index.merge(restored, NOW);

            assertThat(find(index, block(1))).isNull();
            assertThat(index.size()).isZero();
            assertThat(taken(changes)).isEmpty();
        }

        @Test
        void rebuildsEachClientsFloorFromWhatWasRead() throws Exception {
            OutcomeIndex earlier = index(2, 1000, new ArrayList<>());
            for (long i = 0; i < 5; i++) {
                commit(earlier, block(i), "alice", NOW - 10 * MINUTE + i * 1000);
            }
            OutcomeIndex restarted = index(2, 1000, changes);
            restarted.hold(Long.MAX_VALUE);
            restarted.merge(restoredFrom(earlier, List.of(0L, 1L, 2L, 3L, 4L)), NOW);

            while (evictOldest(restarted) >= 0) {
                // drop every block
            }

            assertThat(restarted.floorSize()).isEqualTo(2);
            assertThat(find(restarted, block(3))).isEqualTo(committed("alice", NOW - 10 * MINUTE + 3000));
            assertThat(find(restarted, block(4))).isEqualTo(committed("alice", NOW - 10 * MINUTE + 4000));
            assertThat(find(restarted, block(2))).isNull();
            assertThat(taken(changes)).as("the blocks without floor entries are deleted")
                    .containsExactlyInAnyOrder(0L, 1L, 2L);
        }

        /**
         * The floor's rebuild takes each outcome to its owner's client even where owners take
         * turns within a block (it looks an owner up once per run of its outcomes) and blocks
         * end in the same second.
         */
        @Test
        void rebuildsTheFloorOfClientsWhoseOutcomesTakeTurnsInTheSameBlocks() throws Exception {
            OutcomeIndex earlier = index(2, 1000, new ArrayList<>());
            String[] owners = {"alice", "alice", "bob", "carol", "bob", "alice"};
            for (long b = 0; b < 3; b++) {
                for (int i = 0; i < owners.length; i++) {
                    commit(earlier, block(b) + i, owners[i], NOW - MINUTE);
                }
            }
            OutcomeIndex restarted = index(2, 1000, changes);
            restarted.hold(Long.MAX_VALUE);
            restarted.merge(restoredFrom(earlier, List.of(0L, 1L, 2L)), NOW);

            while (evictOldest(restarted) >= 0) {
                // drop every block
            }

            // Same end time: the newest sequences win, two per client.
            assertThat(restarted.floorSize()).isEqualTo(6);
            assertThat(find(restarted, block(2) + 5)).isEqualTo(committed("alice", NOW - MINUTE));
            assertThat(find(restarted, block(2) + 1)).isEqualTo(committed("alice", NOW - MINUTE));
            assertThat(find(restarted, block(2) + 4)).isEqualTo(committed("bob", NOW - MINUTE));
            assertThat(find(restarted, block(2) + 2)).isEqualTo(committed("bob", NOW - MINUTE));
            assertThat(find(restarted, block(2) + 3)).isEqualTo(committed("carol", NOW - MINUTE));
            assertThat(find(restarted, block(1) + 3)).isEqualTo(committed("carol", NOW - MINUTE));
            assertThat(find(restarted, block(2))).as("alice's third newest").isNull();
        }

        /**
         * "The floor keeps a restored speculative outcome the decision contradicts". A
         * speculative COMMITTED record was durable when the coordinator crashed, its COMMITTING
         * entry was not: the restore put COMMITTED into the block and into alice's floor. The
         * transaction then timed out and was aborted. In 45163af the decision rewrote the
         * block but left the floor's entry as it was: once the memory bound dropped the block,
         * the floor answered COMMITTED.
         */
        @Test
        void aDecisionReplacesTheOutcomeARestoredSpeculativeRecordGaveTheFloor() throws Exception {
            OutcomeIndex crashed = index(10, 1000, new ArrayList<>());
            // A record written before the finishing entry was durable: decided, never ended.
            crashed.decide(1, Outcome.COMMITTED, "alice", NOW - MINUTE);
            index.hold(Long.MAX_VALUE);
            index.merge(restoredFrom(crashed, List.of(0L)), NOW);
            assertThat(find(index, 1)).as("the restored speculative record")
                    .isEqualTo(committed("alice", NOW - MINUTE));
            assertThat(index.floorSize()).isEqualTo(1);

            end(index, 1, Outcome.ABORTED, "alice", NOW);
            assertThat(evictOldest(index)).as("dropped from memory; alice's floor keeps its outcome").isZero();

            assertThat(index.blockCount()).isZero();
            assertThat(index.floorSize()).isEqualTo(1);
            assertThat(find(index, 1)).isEqualTo(aborted("alice", NOW));
        }

        /**
         * Review of 0.5, finding 1: an outcome kept while the restore reads (replayed from the
         * log) and at once unpinned must not be dropped by the memory bound before the merge:
         * the restored record of its block lacks it, and the merge would adopt that record
         * and lose the floor entry.
         */
        @Test
        void aHeldBlockIsNotDroppedBeforeTheMerge() throws Exception {
            OutcomeIndex earlier = index(10, 1000, new ArrayList<>());
            commit(earlier, 1, "bob", NOW - MINUTE);
            index.hold(300);
            commit(index, 5, "alice", NOW - MINUTE);

            assertThat(evictOldest(index)).as("nothing to drop yet").isEqualTo(-1);
            assertThat(oldestEvictableMillis(index)).isNull();
            assertThat(index.expire(NOW + 2 * TTL)).isZero();
            taken(changes);
            index.merge(restoredFrom(earlier, List.of(0L)), NOW);

            assertThat(find(index, 5)).isEqualTo(committed("alice", NOW - MINUTE));
            assertThat(find(index, 1)).isEqualTo(committed("bob", NOW - MINUTE));
            assertThat(taken(changes)).containsExactly(0L);
            assertThat(inRecord(index, 5)).isEqualTo(committed("alice", NOW - MINUTE));
            assertThat(inRecord(index, 1)).isEqualTo(committed("bob", NOW - MINUTE));
        }

        /**
         * Review of 0.5.1: a client whose only outcomes are floor entries (its block was
         * dropped while the restore read) kept its name through the merge's rebuild of the
         * floor. The rebuild released the old entries' references before the new entries
         * took theirs: the owner's id was freed in between, the outcome answered to a null
         * owner (any role), then carried the next new client's name.
         */
        @Test
        void aClientWhoseOnlyOutcomesAreFloorEntriesKeepsItsNameThroughTheMerge() throws Exception {
            OutcomeIndex earlier = index(10, 1000, new ArrayList<>());
            commit(earlier, 1, "bob", NOW - MINUTE);
            index.hold(300);
            commit(index, block(2), "alice", NOW - MINUTE);
            assertThat(taken(changes)).containsExactly(2L);
            assertThat(evictOldest(index)).as("alice's block, above the held ones").isZero();
            assertThat(index.blockCount()).isZero();

            index.merge(restoredFrom(earlier, List.of(0L)), NOW);
            commit(index, block(3), "carol", NOW);

            assertThat(find(index, block(2))).isEqualTo(committed("alice", NOW - MINUTE));
            assertThat(find(index, block(3))).isEqualTo(committed("carol", NOW));
            assertThat(find(index, 1)).isEqualTo(committed("bob", NOW - MINUTE));
            taken(changes);
            commit(index, block(2) + 1, "dave", NOW);
            assertThat(taken(changes)).containsExactly(2L);
            assertThat(written(index, 2).getOwnersList()).containsExactlyInAnyOrder("alice", "dave");
        }

        /**
         * Review of 0.5.1: a restore that read again (its first read failed) can read an
         * earlier record of a block this coordinator wrote while it waited, and that the
         * memory bound dropped since to its floor entries. The merge adopted the stale copy,
         * and the floor's rebuild left out the entries of a block in memory: bob's outcome was
         * lost.
         */
        @Test
        void aRecordThisCoordinatorWroteWhileTheRestoreReadIsOlderThanWhatItKeeps() throws Exception {
            index.hold(300);
            commit(index, block(2), "alice", NOW - MINUTE);
            RestoredBlocks readBack = restoredFrom(index, List.of(2L));
            commit(index, block(2) + 1, "bob", NOW);
            assertThat(taken(changes)).containsExactly(2L);
            assertThat(evictOldest(index)).as("both stay as floor entries").isZero();

            index.merge(readBack, NOW);

            assertThat(find(index, block(2) + 1)).isEqualTo(committed("bob", NOW));
            assertThat(find(index, block(2))).isEqualTo(committed("alice", NOW - MINUTE));
            assertThat(taken(changes)).as("the topic's record of the block, with both, stays").isEmpty();
            assertThat(inRecord(index, block(2) + 1)).isEqualTo(committed("bob", NOW));
            assertThat(inRecord(index, block(2))).isEqualTo(committed("alice", NOW - MINUTE));
        }

        /**
         * Review of the redesign, finding (b): the floor's cap is exceeded while the merge
         * rebuilds the floor, with floor entries of blocks the memory bound dropped during the
         * restore competing with the restored ones.
         */
        @Test
        void aFloorCapExceededByTheMergeTakesFromTheLeastRecentClientsAndEveryKeptOutcomeAnswers() throws Exception {
            OutcomeIndex restarted = index(2, 3, changes);
            restarted.hold(block(1) + 10);
            // Replayed from the log with their own end times while the restore reads.
            commit(restarted, block(0) + 1, "alice", NOW - 10 * SECOND);
            commit(restarted, block(2), "bob", NOW - 50 * SECOND);
            end(restarted, block(2) + 1, Outcome.ABORTED, "bob", NOW - 49 * SECOND);
            commit(restarted, block(3), "carol", NOW - 5 * SECOND);
            assertThat(restarted.floorEvictions()).as("alice's entry, in her held block still").isEqualTo(1);
            assertThat(evictOldest(restarted)).as("block 2: bob's two floor entries stay").isZero();
            assertThat(evictOldest(restarted)).as("block 3: carol's floor entry stays").isZero();
            assertThat(evictOldest(restarted)).as("block 0 is held").isEqualTo(-1);
            assertThat(find(restarted, block(2))).isEqualTo(committed("bob", NOW - 50 * SECOND));

            OutcomeIndex earlier = index(10, 1000, new ArrayList<>());
            commit(earlier, block(0), "dave", NOW - 40 * SECOND);
            end(earlier, block(0) + 2, Outcome.ABORTED, "dave", NOW - 39 * SECOND);
            commit(earlier, block(0) + 3, "dave", NOW - 38 * SECOND);
            commit(earlier, block(1), "erin", NOW - 30 * SECOND);
            commit(earlier, block(1) + 1, "erin", NOW - 29 * SECOND);
            commit(earlier, block(1) + 2, null, NOW - 45 * SECOND);
            RestoredBlocks restored = restoredFrom(earlier, List.of(0L, 1L));
            long overflowing = BlockRecordCodec.MAX_BLOCK_INDEX + 1;
            byte[] overflowingRecord = written(earlier, 1).toBuilder().setBlockIndex(overflowing).build()
                    .toByteArray();
            // Before: the codec took this key (negative sequences); over the cap the floor drained its rings: NoSuchElementException.
            assertThatThrownBy(() -> BlockRecordCodec.decode("c36028797018963968", overflowingRecord, TC,
                    Long.MAX_VALUE)).isInstanceOf(MalformedRecordException.class);
            taken(changes);

            restarted.merge(restored, NOW);

            assertThat(restarted.isHolding()).isFalse();
            assertThat(restarted.floorSize()).isEqualTo(3);
            // Clients least recently ending first: bob, no owner, dave, erin, alice, carol. The cap leaves
            // the three newest entries of the last: erin's newest, alice's, carol's.
            assertThat(find(restarted, block(2))).as("bob ended least recently: the cap took his").isNull();
            assertThat(find(restarted, block(2) + 1)).isNull();
            assertThat(taken(changes)).as("block 0 merged; block 2, no floor entry left, deleted").containsExactly(0L, 2L);
            assertThat(restarted.recordOf(2)).isNull();
            assertThat(find(restarted, block(3))).isEqualTo(committed("carol", NOW - 5 * SECOND));
            assertThat(inRecord(restarted, block(3))).isEqualTo(committed("carol", NOW - 5 * SECOND));
            Found[] inBlocks = {
                committed("dave", NOW - 40 * SECOND), committed("alice", NOW - 10 * SECOND),
                aborted("dave", NOW - 39 * SECOND), committed("dave", NOW - 38 * SECOND)};
            for (int offset = 0; offset < inBlocks.length; offset++) {
                assertThat(find(restarted, block(0) + offset)).as("offset %d", offset).isEqualTo(inBlocks[offset]);
            }
            assertThat(find(restarted, block(1))).isEqualTo(committed("erin", NOW - 30 * SECOND));
            assertThat(find(restarted, block(1) + 1)).isEqualTo(committed("erin", NOW - 29 * SECOND));
            assertThat(find(restarted, block(1) + 2)).isEqualTo(committed(null, NOW - 45 * SECOND));
            assertThat(restarted.size()).isEqualTo(8);
            assertThat(restarted.ownerCount()).as("bob is forgotten").isEqualTo(4);

            while (evictOldest(restarted) >= 0) {
                // the memory bound drops every block
            }

            assertThat(restarted.blockCount()).isZero();
            List<Long> answered = LongStream.rangeClosed(0, block(4)).filter(sequence -> find(restarted, sequence) != null)
                    .boxed().toList();
            assertThat(answered).containsExactlyInAnyOrder(block(1) + 1, block(0) + 1, block(3));
            assertThat(find(restarted, block(1) + 1)).isEqualTo(committed("erin", NOW - 29 * SECOND));
            assertThat(find(restarted, block(0) + 1)).isEqualTo(committed("alice", NOW - 10 * SECOND));
            assertThat(find(restarted, block(3))).isEqualTo(committed("carol", NOW - 5 * SECOND));
            for (long sequence : answered) {
                assertThat(inRecord(restarted, sequence)).as("record of %d", sequence).isEqualTo(find(restarted, sequence));
            }
            assertThat(taken(changes)).as("blocks 0 and 1 keep their records for their floor entries").isEmpty();
            assertThat(restarted.blocksWithRecords().toLongArray()).containsExactlyInAnyOrder(0L, 1L, 3L);
            assertThat(restarted.size()).isEqualTo(3);
            assertThat(restarted.ownerCount()).isEqualTo(3);
        }
    }
}
