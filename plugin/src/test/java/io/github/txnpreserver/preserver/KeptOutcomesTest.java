package io.github.txnpreserver.preserver;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import io.github.txnpreserver.statetopic.ChunkRecord;
import io.github.txnpreserver.statetopic.StateRecordCodec;
import java.time.Duration;
import java.util.List;
import org.apache.pulsar.client.api.transaction.TxnID;
import org.junit.jupiter.api.DisplayName;
import org.junit.jupiter.api.Nested;
import org.junit.jupiter.api.Test;

@DisplayName("Kept outcomes")
class KeptOutcomesTest {

    private static final long TC = 3;
    private static final long TTL = Duration.ofHours(1).toMillis();
    /** A whole second, so that stored end times are exact. */
    private static final long NOW = 1_700_000_000_000L;
    private static final long MINUTE = Duration.ofMinutes(1).toMillis();

    private static TxnID txn(long sequence) {
        return new TxnID(TC, sequence);
    }

    /** The first sequence of a block of 256. */
    private static long block(long index) {
        return index * 256;
    }

    /** A transaction's end as the store drives it, once its finishing entry is durable: decided, then ended. */
    private static long end(KeptOutcomes kept, long sequence, Outcome outcome, String owner, long atMillis) {
        long generation = kept.decide(txn(sequence), outcome, owner, atMillis);
        kept.ended(txn(sequence));
        return generation;
    }

    private static long commit(KeptOutcomes kept, long sequence, String owner, long atMillis) {
        return end(kept, sequence, Outcome.COMMITTED, owner, atMillis);
    }

    /** What a block's record says of a sequence: its outcome, or null if it holds none. */
    private static Outcome inRecord(ChunkRecord record, long sequence) {
        int offset = (int) (sequence & 255);
        if ((record.kept()[offset >>> 6] & (1L << offset)) == 0) {
            return null;
        }
        return (record.committed()[offset >>> 6] & (1L << offset)) != 0 ? Outcome.COMMITTED : Outcome.ABORTED;
    }

    private static KeptOutcomes.BlockWrite only(List<KeptOutcomes.BlockWrite> writes) {
        assertThat(writes).hasSize(1);
        return writes.get(0);
    }

    /** What a restore would read from the records an earlier incarnation wrote. */
    private static RestoredOutcomes restoredFrom(KeptOutcomes earlier) throws Exception {
        return restoredFrom(earlier.drainDirty());
    }

    /** What a restore would read from these records. */
    private static RestoredOutcomes restoredFrom(List<KeptOutcomes.BlockWrite> writes) throws Exception {
        RestoredOutcomes restored = new RestoredOutcomes();
        for (KeptOutcomes.BlockWrite write : writes) {
            String key = StateRecordCodec.blockKey(write.blockIndex());
            if (write.recordOrNull() == null) {
                restored.blockDeleted(write.blockIndex());
            } else {
                restored.block(StateRecordCodec.decodeBlock(key, StateRecordCodec.encodeBlock(write.recordOrNull()),
                        TC));
            }
        }
        return restored;
    }

    @Nested
    @DisplayName("by time")
    class ByTime {

        private final KeptOutcomes kept = new KeptOutcomes(TC, 10, 1000, TTL);

        @Test
        void keepsAnOutcomeForItsTimeToLiveAndNoLonger() {
            commit(kept, 1, "alice", NOW);

            assertThat(kept.expire(NOW + TTL - 1)).isZero();
            assertThat(kept.get(txn(1))).isEqualTo(new KeptOutcome(txn(1), Outcome.COMMITTED, "alice", NOW));

            assertThat(kept.expire(NOW + TTL)).isEqualTo(1);
            assertThat(kept.get(txn(1))).isNull();
            assertThat(kept.size()).isZero();
            assertThat(kept.expirations()).isEqualTo(1);
        }

        @Test
        void anEndTimeIsKeptToTheSecondRoundedUpSoNothingExpiresEarly() {
            commit(kept, 1, "alice", NOW + 1);

            assertThat(kept.get(txn(1)).endTimeMillis()).isEqualTo(NOW + 1000);
            assertThat(kept.expire(NOW + 1 + TTL)).isZero();
            assertThat(kept.expire(NOW + 1000 + TTL)).isEqualTo(1);
        }

        @Test
        void dropsTheExpiredOutcomesOfABlockAndKeepsItsYoungerOnes() {
            commit(kept, 1, "alice", NOW);
            commit(kept, 2, "alice", NOW + 10 * MINUTE);

            assertThat(kept.expire(NOW + TTL)).isEqualTo(1);

            assertThat(kept.get(txn(1))).isNull();
            assertThat(kept.get(txn(2))).isNotNull();
            assertThat(kept.blockCount()).isEqualTo(1);
            assertThat(kept.windowMillis(NOW + TTL)).isEqualTo(TTL - 10 * MINUTE);
        }

        @Test
        void dropsAWholeBlockOnceItsNewestOutcomeExpiredAndDeletesItsRecord() {
            commit(kept, block(0) + 1, "alice", NOW);
            commit(kept, block(0) + 2, "bob", NOW + MINUTE);
            commit(kept, block(1), "alice", NOW + 30 * MINUTE);
            kept.drainDirty();

            assertThat(kept.expire(NOW + MINUTE + TTL)).isEqualTo(2);

            assertThat(kept.blockCount()).isEqualTo(1);
            assertThat(kept.get(txn(block(1)))).isNotNull();
            KeptOutcomes.BlockWrite tombstone = only(kept.drainDirty());
            assertThat(tombstone.blockIndex()).isZero();
            assertThat(tombstone.recordOrNull()).as("a tombstone").isNull();
        }

        @Test
        void theWindowIsTheAgeOfTheOldestKeptOutcome() {
            assertThat(kept.windowMillis(NOW)).isZero();
            commit(kept, 1, "alice", NOW);
            commit(kept, block(1), "alice", NOW + 5 * MINUTE);

            assertThat(kept.windowMillis(NOW + 20 * MINUTE)).isEqualTo(20 * MINUTE);
        }
    }

    @Nested
    @DisplayName("under the memory bound")
    class UnderTheMemoryBound {

        /** One client, floor of one: only its newest outcome survives eviction. */
        private final KeptOutcomes kept = new KeptOutcomes(TC, 1, 1000, TTL);

        @Test
        void dropsTheLeastRecentlyWrittenBlockFirst() {
            commit(kept, block(0), "alice", NOW);
            commit(kept, block(0) + 1, "alice", NOW);
            commit(kept, block(1), "alice", NOW + 1000);
            commit(kept, block(2), "alice", NOW + 2000);

            assertThat(kept.oldestEvictableMillis()).isEqualTo(NOW);
            assertThat(kept.evictOldest()).as("block 0's outcomes").isEqualTo(2);

            assertThat(kept.get(txn(block(0)))).isNull();
            assertThat(kept.get(txn(block(0) + 1))).isNull();
            assertThat(kept.get(txn(block(1)))).isNotNull();
            assertThat(kept.memoryEvictions()).isEqualTo(2);
            assertThat(kept.droppedThroughMillis()).isEqualTo(NOW);
            assertThat(kept.size()).isEqualTo(2);
        }

        @Test
        void aBlockWrittenAgainBecomesTheNewest() {
            commit(kept, block(0), "alice", NOW);
            commit(kept, block(1), "alice", NOW);
            commit(kept, block(0) + 1, "alice", NOW);

            kept.evictOldest();

            assertThat(kept.get(txn(block(1)))).isNull();
            assertThat(kept.get(txn(block(0)))).isNotNull();
        }

        @Test
        void anEvictedBlockIsDeletedFromTheStateTopicAndFreesItsMemory() {
            commit(kept, block(0), "alice", NOW);
            commit(kept, block(1), "alice", NOW);
            kept.drainDirty();
            long before = kept.bytes();

            kept.evictOldest();

            assertThat(kept.bytes()).isLessThan(before);
            KeptOutcomes.BlockWrite tombstone = only(kept.drainDirty());
            assertThat(tombstone.blockIndex()).isZero();
            assertThat(tombstone.recordOrNull()).isNull();
        }

        @Test
        void hasNothingToDropWhenEmpty() {
            assertThat(kept.evictOldest()).isEqualTo(-1);
            assertThat(kept.oldestEvictableMillis()).isNull();
            assertThat(kept.droppedThroughMillis()).isNull();
        }
    }

    @Nested
    @DisplayName("the per-client floor")
    class Floor {

        private final KeptOutcomes kept = new KeptOutcomes(TC, 2, 1000, TTL);

        @Test
        void eachClientsNewestOutcomesSurviveTheMemoryBound() {
            commit(kept, 0, "alice", NOW);
            commit(kept, 1, "alice", NOW + 1000);
            end(kept, 2, Outcome.ABORTED, "alice", NOW + 2000);
            commit(kept, 3, "bob", NOW);
            kept.drainDirty();

            assertThat(kept.evictOldest()).as("alice's oldest; her two newest and bob's stay").isEqualTo(1);

            assertThat(kept.blockCount()).isZero();
            assertThat(kept.get(txn(0))).as("alice's oldest, past her floor").isNull();
            assertThat(kept.get(txn(1))).isEqualTo(new KeptOutcome(txn(1), Outcome.COMMITTED, "alice", NOW + 1000));
            assertThat(kept.get(txn(2)).outcome()).isEqualTo(Outcome.ABORTED);
            assertThat(kept.get(txn(3)).owner()).isEqualTo("bob");
            assertThat(kept.size()).isEqualTo(3);
            assertThat(kept.floorSize()).isEqualTo(3);
            assertThat(kept.memoryEvictions()).as("only alice's oldest is no longer kept").isEqualTo(1);
            assertThat(kept.drainDirty()).as("the block's record still holds the floor entries: not deleted")
                    .isEmpty();
        }

        @Test
        void doesNotOutliveTheTimeToLive() {
            commit(kept, 0, "alice", NOW);
            commit(kept, 1, "bob", NOW + MINUTE);
            kept.evictOldest();
            kept.drainDirty();

            assertThat(kept.expire(NOW + TTL)).isEqualTo(1);
            assertThat(kept.drainDirty()).as("bob's entry still needs the record").isEmpty();
            assertThat(kept.expire(NOW + MINUTE + TTL)).isEqualTo(1);

            assertThat(kept.get(txn(0))).isNull();
            assertThat(kept.get(txn(1))).isNull();
            assertThat(kept.size()).isZero();
            KeptOutcomes.BlockWrite tombstone = only(kept.drainDirty());
            assertThat(tombstone.recordOrNull()).as("the last floor entry gone: the record is deleted").isNull();
        }

        @Test
        void aBlockWrittenAgainAfterEvictionKeepsItsFloorEntriesInItsRecord() {
            commit(kept, 0, "alice", NOW);
            commit(kept, 1, "bob", NOW);
            kept.evictOldest();
            kept.drainDirty();

            commit(kept, 2, "carol", NOW + MINUTE);

            ChunkRecord record = only(kept.drainDirty()).recordOrNull();
            assertThat(inRecord(record, 0)).isEqualTo(Outcome.COMMITTED);
            assertThat(inRecord(record, 1)).isEqualTo(Outcome.COMMITTED);
            assertThat(inRecord(record, 2)).isEqualTo(Outcome.COMMITTED);
            assertThat(record.owners()).containsExactlyInAnyOrder("alice", "bob", "carol");
        }

        @Test
        void theCapTakesFromTheClientThatEndedATransactionLeastRecently() {
            KeptOutcomes capped = new KeptOutcomes(TC, 2, 3, TTL);
            commit(capped, 0, "alice", NOW);
            commit(capped, 1, "bob", NOW + 1000);
            commit(capped, 2, "alice", NOW + 2000);

            commit(capped, 3, "carol", NOW + 3000);

            assertThat(capped.floorSize()).isEqualTo(3);
            assertThat(capped.floorEvictions()).isEqualTo(1);
            assertThat(capped.clients()).as("bob has no floor entry left").isEqualTo(2);
            capped.evictOldest();
            assertThat(capped.get(txn(1))).as("bob ended least recently").isNull();
            assertThat(capped.get(txn(0))).isNotNull();
            assertThat(capped.get(txn(2))).isNotNull();
            assertThat(capped.get(txn(3))).isNotNull();
        }

        @Test
        void transactionsWithoutOwnerShareOneClientsFloor() {
            commit(kept, 0, null, NOW);
            commit(kept, 1, null, NOW + 1000);
            commit(kept, 2, null, NOW + 2000);

            kept.evictOldest();

            assertThat(kept.clients()).isEqualTo(1);
            assertThat(kept.get(txn(0))).isNull();
            assertThat(kept.get(txn(2)).owner()).isNull();
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
            commit(kept, 1, "alice", NOW + 10 * MINUTE);
            commit(kept, 2, "alice", NOW);
            kept.drainDirty();
            kept.expire(NOW + TTL);
            assertThat(kept.get(txn(2))).as("expired from its block, not from alice's floor, which stops at 1")
                    .isEqualTo(new KeptOutcome(txn(2), Outcome.COMMITTED, "alice", NOW));
            assertThat(kept.blockCount()).isEqualTo(1);

            kept.evictOldest();
            assertThat(kept.blockCount()).isZero();
            assertThat(kept.drainDirty()).as("both floor entries need the record").isEmpty();

            commit(kept, block(1), "alice", NOW + TTL);
            assertThat(kept.get(txn(1))).as("pushed out of alice's floor").isNull();
            assertThat(kept.get(txn(2))).isNotNull();
            assertThat(kept.drainDirty()).extracting(KeptOutcomes.BlockWrite::blockIndex)
                    .as("2 still needs block 0's record: not deleted").containsExactly(1L);

            commit(kept, block(1) + 1, "alice", NOW + TTL);
            assertThat(kept.get(txn(2))).isNull();
            List<KeptOutcomes.BlockWrite> writes = kept.drainDirty();
            assertThat(writes).extracting(KeptOutcomes.BlockWrite::blockIndex).containsExactlyInAnyOrder(0L, 1L);
            assertThat(writes.stream().filter(write -> write.blockIndex() == 0).findFirst().orElseThrow()
                    .recordOrNull()).as("the last floor entry gone: the record is deleted").isNull();
        }
    }

    @Nested
    @DisplayName("owners")
    class Owners {

        @Test
        void keepsAThousandOwnersExactlyInMemoryAndInTheRecords() throws Exception {
            KeptOutcomes kept = new KeptOutcomes(TC, 1, 100_000, TTL);
            for (int i = 0; i < 1000; i++) {
                commit(kept, i, owner(i), NOW);
            }

            for (int i = 0; i < 1000; i++) {
                assertThat(kept.get(txn(i)).owner()).isEqualTo(owner(i));
            }
            assertThat(kept.ownerCount()).isEqualTo(1000);

            KeptOutcomes restarted = new KeptOutcomes(TC, 1, 100_000, TTL);
            restarted.beginRestore(Long.MAX_VALUE);
            restarted.mergeRestored(restoredFrom(kept), NOW);
            for (int i = 0; i < 1000; i++) {
                assertThat(restarted.get(txn(i)).owner()).isEqualTo(owner(i));
            }
        }

        @Test
        void keepsOwnersExactlyPastTheSixteenBitOwnerColumn() throws Exception {
            int owners = 70_000;
            KeptOutcomes kept = new KeptOutcomes(TC, 1, 100_000, TTL);
            for (int i = 0; i < owners; i++) {
                commit(kept, i, owner(i), NOW);
            }

            assertThat(kept.ownerCount()).isEqualTo(owners);
            for (int i = 0; i < owners; i++) {
                assertThat(kept.get(txn(i)).owner()).as("owner of %d", i).isEqualTo(owner(i));
            }
            KeptOutcomes restarted = new KeptOutcomes(TC, 1, 100_000, TTL);
            restarted.beginRestore(Long.MAX_VALUE);
            restarted.mergeRestored(restoredFrom(kept), NOW);
            for (int i = 0; i < owners; i += 97) {
                assertThat(restarted.get(txn(i)).owner()).as("owner of %d", i).isEqualTo(owner(i));
            }
            assertThat(restarted.get(txn(owners - 1)).owner()).isEqualTo(owner(owners - 1));
        }

        @Test
        void aBlockWhoseOwnersDifferOnlyLaterStillNamesEachExactly() {
            KeptOutcomes kept = new KeptOutcomes(TC, 10, 1000, TTL);
            for (int i = 0; i < 10; i++) {
                commit(kept, i, "alice", NOW);
            }
            commit(kept, 10, "bob", NOW);
            commit(kept, 11, null, NOW);

            assertThat(kept.get(txn(9)).owner()).isEqualTo("alice");
            assertThat(kept.get(txn(10)).owner()).isEqualTo("bob");
            assertThat(kept.get(txn(11)).owner()).isNull();
        }

        @Test
        void anOwnerWhoseOutcomesAreAllGoneIsForgotten() {
            KeptOutcomes kept = new KeptOutcomes(TC, 10, 1000, TTL);
            commit(kept, 0, "alice", NOW);
            commit(kept, 1, "bob", NOW + MINUTE);

            kept.expire(NOW + TTL);

            assertThat(kept.ownerCount()).isEqualTo(1);
            assertThat(kept.get(txn(1)).owner()).isEqualTo("bob");
        }

        private static String owner(int i) {
            return "tenant-" + (i % 7) + "/role:" + i + (i % 3 == 0 ? "-\u00e9" : "");
        }
    }

    @Nested
    @DisplayName("an end in progress")
    class EndInProgress {

        private final KeptOutcomes kept = new KeptOutcomes(TC, 10, 1000, TTL);

        @Test
        void aDecisionWritesItsBlock() {
            long decided = kept.decide(txn(1), Outcome.ABORTED, "alice", NOW);

            KeptOutcomes.BlockWrite write = only(kept.drainDirty());
            assertThat(write.generation()).isEqualTo(decided);
            assertThat(inRecord(write.recordOrNull(), 1)).isEqualTo(Outcome.ABORTED);
            assertThat(kept.get(txn(1)).outcome()).isEqualTo(Outcome.ABORTED);
        }

        @Test
        void aRetriedDecisionReturnsTheSameGenerationAndWritesNothing() {
            long decided = kept.decide(txn(1), Outcome.COMMITTED, "alice", NOW);
            kept.drainDirty();

            assertThat(kept.decide(txn(1), Outcome.COMMITTED, "alice", NOW + MINUTE)).isEqualTo(decided);
            assertThat(kept.decide(txn(1), Outcome.ABORTED, "alice", NOW + MINUTE)).as("even another outcome")
                    .isEqualTo(decided);

            assertThat(kept.drainDirty()).isEmpty();
            assertThat(kept.get(txn(1))).isEqualTo(new KeptOutcome(txn(1), Outcome.COMMITTED, "alice", NOW));
        }

        @Test
        void aDecisionReplacesAStaleRecordOfTheOtherOutcome() {
            commit(kept, 1, "alice", NOW);
            kept.drainDirty();

            long decided = kept.decide(txn(1), Outcome.ABORTED, "alice", NOW + MINUTE);

            assertThat(inRecord(only(kept.drainDirty()).recordOrNull(), 1)).isEqualTo(Outcome.ABORTED);
            assertThat(decided).isEqualTo(kept.generation());
            kept.ended(txn(1));
            assertThat(kept.get(txn(1)).outcome()).isEqualTo(Outcome.ABORTED);
        }

        @Test
        void itsBlockIsNotEvictedUntilItEnded() {
            kept.decide(txn(block(0)), Outcome.COMMITTED, "alice", NOW);
            commit(kept, block(1), "alice", NOW + 1000);

            assertThat(kept.oldestEvictableMillis()).isEqualTo(NOW + 1000);
            assertThat(kept.evictOldest()).as("block 1, although block 0 is older; its one outcome stays in"
                    + " alice's floor").isZero();
            assertThat(kept.blockCount()).isEqualTo(1);
            assertThat(kept.evictOldest()).as("decided, but not ended").isEqualTo(-1);
            assertThat(kept.get(txn(block(0)))).isNotNull();

            kept.ended(txn(block(0)));
            assertThat(kept.evictOldest()).as("dropped from memory; alice's floor keeps its outcome").isZero();
            assertThat(kept.blockCount()).isZero();
            assertThat(kept.get(txn(block(0))).outcome()).isEqualTo(Outcome.COMMITTED);
        }

        @Test
        void itsBlockDoesNotExpireUntilItEnded() {
            kept.decide(txn(1), Outcome.COMMITTED, "alice", NOW);
            commit(kept, 2, "alice", NOW);

            assertThat(kept.expire(NOW + 2 * TTL)).isZero();
            assertThat(kept.get(txn(2))).isNotNull();

            kept.ended(txn(1));
            assertThat(kept.expire(NOW + 2 * TTL)).isEqualTo(2);
        }

        @Test
        void refusesTransactionsOfAnotherCoordinator() {
            assertThatThrownBy(() -> kept.decide(new TxnID(TC + 1, 1), Outcome.COMMITTED, "alice", NOW))
                    .isInstanceOf(IllegalArgumentException.class);
            commit(kept, 1, "alice", NOW);
            assertThat(kept.get(new TxnID(TC + 1, 1))).isNull();
        }
    }

    @Nested
    @DisplayName("writing blocks")
    class WritingBlocks {

        private final KeptOutcomes kept = new KeptOutcomes(TC, 10, 1000, TTL);

        @Test
        void sendsEachDirtyBlockOnceWithItsStateNow() {
            long first = commit(kept, 1, "alice", NOW);
            long second = commit(kept, 2, "bob", NOW);
            long third = commit(kept, block(1), "alice", NOW);

            List<KeptOutcomes.BlockWrite> writes = kept.drainDirty();

            assertThat(first).isLessThan(second);
            assertThat(second).isLessThan(third);
            assertThat(writes).extracting(KeptOutcomes.BlockWrite::blockIndex).containsExactlyInAnyOrder(0L, 1L);
            KeptOutcomes.BlockWrite block0 = writes.stream().filter(w -> w.blockIndex() == 0).findFirst()
                    .orElseThrow();
            assertThat(block0.generation()).isEqualTo(second);
            assertThat(block0.recordOrNull().size()).isEqualTo(2);
            assertThat(block0.recordOrNull().coordinatorId()).isEqualTo(TC);
            assertThat(kept.hasDirty()).isFalse();
            assertThat(kept.drainDirty()).isEmpty();
        }

        @Test
        void everyChangeWasTakenToSendOnlyWhenNoBlockIsDirty() {
            long first = commit(kept, 1, "alice", NOW);
            assertThat(kept.generationIfDrained()).isEqualTo(-1);

            KeptOutcomes.BlockWrite write = only(kept.drainDirty());
            assertThat(kept.generationIfDrained()).isEqualTo(first);
            assertThat(kept.lastDrainGeneration()).isEqualTo(first);

            long second = commit(kept, 2, "alice", NOW);
            assertThat(kept.generationIfDrained()).isEqualTo(-1);
            assertThat(kept.lastDrainGeneration()).isEqualTo(first);
            kept.failed(write);
            only(kept.drainDirty());
            assertThat(kept.generationIfDrained()).isEqualTo(second);
        }

        @Test
        void whileRestoringTheBlocksHeldBackDoNotKeepTheOthersFromCountingAsTaken() {
            kept.beginRestore(300);
            commit(kept, 2, "alice", NOW);
            long pastTheFrontier = commit(kept, 512, "alice", NOW);

            assertThat(only(kept.drainDirty()).blockIndex()).isEqualTo(2);
            assertThat(kept.lastDrainGeneration()).isEqualTo(pastTheFrontier);
            assertThat(kept.generationIfDrained()).isEqualTo(pastTheFrontier);
            assertThat(kept.heldBack(2)).isTrue();
            assertThat(kept.heldBack(512)).isFalse();
        }

        @Test
        void aFailedWriteIsSentAgainWithTheNextDrain() {
            long generation = commit(kept, 1, "alice", NOW);
            KeptOutcomes.BlockWrite write = only(kept.drainDirty());

            kept.failed(write);

            assertThat(kept.hasDirty()).isTrue();
            KeptOutcomes.BlockWrite again = only(kept.drainDirty());
            assertThat(again.generation()).isEqualTo(generation);
            assertThat(inRecord(again.recordOrNull(), 1)).isEqualTo(Outcome.COMMITTED);
        }

        @Test
        void aFailedWriteOfABlockChangedSinceIsSentAgainAsItIsNow() {
            commit(kept, 1, "alice", NOW);
            KeptOutcomes.BlockWrite write = only(kept.drainDirty());
            long newer = commit(kept, 2, "alice", NOW);

            kept.failed(write);

            KeptOutcomes.BlockWrite again = only(kept.drainDirty());
            assertThat(again.generation()).isEqualTo(newer);
            assertThat(again.recordOrNull().size()).isEqualTo(2);
        }
    }

    @Nested
    @DisplayName("restore")
    class Restore {

        private final KeptOutcomes kept = new KeptOutcomes(TC, 10, 1000, TTL);

        @Test
        void holdsBackBlocksThatMayHoldOutcomesNotReadYet() {
            kept.beginRestore(block(1) + 44);
            commit(kept, 5, "alice", NOW);
            commit(kept, block(1) + 45, "alice", NOW);
            commit(kept, block(2), "alice", NOW);

            assertThat(kept.isRestoring()).isTrue();
            assertThat(only(kept.drainDirty()).blockIndex()).isEqualTo(2);

            kept.mergeRestored(new RestoredOutcomes(), NOW);

            assertThat(kept.isRestoring()).isFalse();
            assertThat(kept.drainDirty()).extracting(KeptOutcomes.BlockWrite::blockIndex)
                    .containsExactlyInAnyOrder(0L, 1L);
        }

        @Test
        void whatTheCoordinatorWroteDuringTheRestoreWinsOverWhatWasRead() throws Exception {
            KeptOutcomes earlier = new KeptOutcomes(TC, 10, 1000, TTL);
            commit(earlier, 5, "alice", NOW - MINUTE);
            commit(earlier, 6, "alice", NOW - MINUTE);
            kept.beginRestore(Long.MAX_VALUE);
            end(kept, 5, Outcome.ABORTED, "bob", NOW);

            kept.mergeRestored(restoredFrom(earlier), NOW);

            assertThat(kept.get(txn(5))).isEqualTo(new KeptOutcome(txn(5), Outcome.ABORTED, "bob", NOW));
            KeptOutcome read = kept.get(txn(6));
            assertThat(read.outcome()).isEqualTo(Outcome.COMMITTED);
            assertThat(read.owner()).isEqualTo("alice");
            assertThat(read.endTimeMillis()).as("an end time earlier than the block's first is kept as the first:"
                    + " never shorter").isBetween(NOW - MINUTE, NOW);
            ChunkRecord record = only(kept.drainDirty()).recordOrNull();
            assertThat(inRecord(record, 5)).isEqualTo(Outcome.ABORTED);
            assertThat(inRecord(record, 6)).isEqualTo(Outcome.COMMITTED);
        }

        @Test
        void restoredBlocksAreKeptAsTheOldestAndNotWrittenAgain() throws Exception {
            KeptOutcomes earlier = new KeptOutcomes(TC, 1, 1000, TTL);
            commit(earlier, block(0), "alice", NOW - MINUTE);
            commit(earlier, block(1), "alice", NOW - MINUTE);
            KeptOutcomes restarted = new KeptOutcomes(TC, 1, 1000, TTL);
            restarted.beginRestore(Long.MAX_VALUE);
            commit(restarted, block(2), "bob", NOW);

            assertThat(restarted.mergeRestored(restoredFrom(earlier), NOW)).isEmpty();

            assertThat(restarted.size()).isEqualTo(3);
            assertThat(restarted.drainDirty()).extracting(KeptOutcomes.BlockWrite::blockIndex).containsExactly(2L);
            restarted.evictOldest();
            assertThat(restarted.get(txn(block(2)))).as("the live block is the newest").isNotNull();
            assertThat(restarted.blockCount()).isEqualTo(2);
        }

        @Test
        void deletesARestoredBlockWhoseOutcomesAllExpired() throws Exception {
            KeptOutcomes earlier = new KeptOutcomes(TC, 10, 1000, TTL);
            commit(earlier, block(3), "alice", NOW - TTL - MINUTE);
            commit(earlier, block(4), "alice", NOW - MINUTE);
            kept.beginRestore(Long.MAX_VALUE);

            kept.mergeRestored(restoredFrom(earlier), NOW);

            assertThat(kept.get(txn(block(3)))).isNull();
            assertThat(kept.get(txn(block(4)))).isNotNull();
            KeptOutcomes.BlockWrite tombstone = only(kept.drainDirty());
            assertThat(tombstone.blockIndex()).isEqualTo(3);
            assertThat(tombstone.recordOrNull()).isNull();
        }

        @Test
        void rebuildsEachClientsFloorFromWhatWasRead() throws Exception {
            KeptOutcomes earlier = new KeptOutcomes(TC, 2, 1000, TTL);
            for (long i = 0; i < 5; i++) {
                commit(earlier, block(i), "alice", NOW - 10 * MINUTE + i * 1000);
            }
            KeptOutcomes restarted = new KeptOutcomes(TC, 2, 1000, TTL);
            restarted.beginRestore(Long.MAX_VALUE);
            restarted.mergeRestored(restoredFrom(earlier), NOW);

            while (restarted.evictOldest() >= 0) {
                // drop every block
            }

            assertThat(restarted.floorSize()).isEqualTo(2);
            assertThat(restarted.get(txn(block(3)))).isNotNull();
            assertThat(restarted.get(txn(block(4)))).isNotNull();
            assertThat(restarted.get(txn(block(2)))).isNull();
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
            KeptOutcomes crashed = new KeptOutcomes(TC, 10, 1000, TTL);
            // What 0.4 wrote before the finishing entry was durable: a record like any other.
            crashed.decide(txn(1), Outcome.COMMITTED, "alice", NOW - MINUTE);
            kept.beginRestore(Long.MAX_VALUE);
            kept.mergeRestored(restoredFrom(crashed), NOW);
            assertThat(kept.get(txn(1)).outcome()).as("the restored speculative record").isEqualTo(
                    Outcome.COMMITTED);
            assertThat(kept.floorSize()).isEqualTo(1);

            end(kept, 1, Outcome.ABORTED, "alice", NOW);
            assertThat(kept.evictOldest()).as("dropped from memory; alice's floor keeps its outcome").isZero();

            assertThat(kept.blockCount()).isZero();
            assertThat(kept.floorSize()).isEqualTo(1);
            assertThat(kept.get(txn(1))).isEqualTo(new KeptOutcome(txn(1), Outcome.ABORTED, "alice", NOW));
        }

        /**
         * Review of 0.5, finding 1: an outcome kept while the restore reads (replayed from the
         * log) and at once unpinned must not be dropped by the memory bound before the merge:
         * the restored record of its block lacks it, and the merge would adopt that record
         * and lose the floor entry.
         */
        @Test
        void aBlockHeldBackWhileRestoringIsNotDroppedBeforeTheMerge() throws Exception {
            KeptOutcomes earlier = new KeptOutcomes(TC, 10, 1000, TTL);
            commit(earlier, 1, "bob", NOW - MINUTE);
            kept.beginRestore(300);
            end(kept, 5, Outcome.COMMITTED, "alice", NOW - MINUTE);

            assertThat(kept.evictOldest()).as("nothing to drop yet").isEqualTo(-1);
            assertThat(kept.oldestEvictableMillis()).isNull();
            assertThat(kept.expire(NOW + 2 * TTL)).isZero();
            kept.mergeRestored(restoredFrom(earlier), NOW);

            assertThat(kept.get(txn(5))).isEqualTo(new KeptOutcome(txn(5), Outcome.COMMITTED, "alice", NOW - MINUTE));
            assertThat(kept.get(txn(1)).owner()).isEqualTo("bob");
            assertThat(inRecord(only(kept.drainDirty()).recordOrNull(), 5)).isEqualTo(Outcome.COMMITTED);
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
            KeptOutcomes earlier = new KeptOutcomes(TC, 10, 1000, TTL);
            commit(earlier, 1, "bob", NOW - MINUTE);
            kept.beginRestore(300);
            commit(kept, block(2), "alice", NOW - MINUTE);
            assertThat(only(kept.drainDirty()).blockIndex()).isEqualTo(2);
            assertThat(kept.evictOldest()).as("alice's block, above the restore's frontier").isZero();
            assertThat(kept.blockCount()).isZero();

            kept.mergeRestored(restoredFrom(earlier), NOW);
            commit(kept, block(3), "carol", NOW);

            assertThat(kept.get(txn(block(2)))).isEqualTo(
                    new KeptOutcome(txn(block(2)), Outcome.COMMITTED, "alice", NOW - MINUTE));
            assertThat(kept.get(txn(block(3))).owner()).isEqualTo("carol");
            assertThat(kept.get(txn(1)).owner()).isEqualTo("bob");
            commit(kept, block(2) + 1, "dave", NOW);
            assertThat(kept.drainDirty()).filteredOn(write -> write.blockIndex() == 2).singleElement()
                    .satisfies(write -> assertThat(write.recordOrNull().owners()).contains("alice", "dave"));
        }

        /**
         * Review of 0.5.1: a restore that read again (its first read failed) can read an
         * earlier record of a block this coordinator wrote while it waited, and that the
         * memory bound dropped since to its floor entries. The merge adopted the stale copy, and the
         * floor's rebuild left out the entries of a block in memory: bob's outcome was lost.
         */
        @Test
        void aRecordThisCoordinatorWroteWhileTheRestoreReadIsOlderThanWhatItKeeps() throws Exception {
            kept.beginRestore(300);
            commit(kept, block(2), "alice", NOW - MINUTE);
            RestoredOutcomes readBack = restoredFrom(kept.drainDirty());
            commit(kept, block(2) + 1, "bob", NOW);
            assertThat(only(kept.drainDirty()).blockIndex()).isEqualTo(2);
            assertThat(kept.evictOldest()).as("both stay as floor entries").isZero();

            kept.mergeRestored(readBack, NOW);

            assertThat(kept.get(txn(block(2) + 1))).isEqualTo(
                    new KeptOutcome(txn(block(2) + 1), Outcome.COMMITTED, "bob", NOW));
            assertThat(kept.get(txn(block(2))).owner()).isEqualTo("alice");
            assertThat(kept.drainDirty()).as("the topic's record of the block, with both, stays").isEmpty();
        }

        @Test
        void movesOutcomesOfEarlierFormatsIntoTheirBlocks() {
            RestoredOutcomes restored = new RestoredOutcomes();
            restored.legacy("s0:alice", new KeptOutcome(txn(block(1)), Outcome.COMMITTED, "alice", NOW - MINUTE));
            restored.legacy(TC + ":" + (block(1) + 1), new KeptOutcome(txn(block(1) + 1), Outcome.ABORTED, null,
                    NOW - MINUTE));
            kept.beginRestore(Long.MAX_VALUE);

            List<KeptOutcomes.BlockWrite> migrated = kept.mergeRestored(restored, NOW);

            assertThat(migrated).extracting(KeptOutcomes.BlockWrite::blockIndex).containsExactly(1L);
            assertThat(kept.get(txn(block(1)))).isEqualTo(new KeptOutcome(txn(block(1)), Outcome.COMMITTED, "alice",
                    NOW - MINUTE));
            assertThat(kept.get(txn(block(1) + 1)).owner()).isNull();
            KeptOutcomes.BlockWrite write = only(kept.drainDirty());
            assertThat(write.generation()).isGreaterThanOrEqualTo(migrated.get(0).generation());
            assertThat(inRecord(write.recordOrNull(), block(1))).isEqualTo(Outcome.COMMITTED);
            assertThat(inRecord(write.recordOrNull(), block(1) + 1)).isEqualTo(Outcome.ABORTED);
            assertThat(kept.generationIfDrained()).isGreaterThanOrEqualTo(migrated.get(0).generation());
        }

        @Test
        void doesNotMoveOutcomesOfEarlierFormatsThatExpired() {
            RestoredOutcomes restored = new RestoredOutcomes();
            restored.legacy("s0:alice", new KeptOutcome(txn(1), Outcome.COMMITTED, "alice", NOW - MINUTE));
            restored.legacy("s1:alice", new KeptOutcome(txn(2), Outcome.COMMITTED, "alice", NOW - TTL - MINUTE));
            restored.legacy("s2:alice", new KeptOutcome(txn(block(1)), Outcome.COMMITTED, "alice",
                    NOW - TTL - MINUTE));
            kept.beginRestore(Long.MAX_VALUE);

            List<KeptOutcomes.BlockWrite> migrated = kept.mergeRestored(restored, NOW);
            kept.expire(NOW);

            assertThat(kept.get(txn(1))).isNotNull();
            assertThat(kept.get(txn(2))).as("expired, although its block holds a younger outcome").isNull();
            assertThat(kept.get(txn(block(1)))).isNull();
            assertThat(migrated).extracting(KeptOutcomes.BlockWrite::blockIndex).containsExactly(0L);
            assertThat(inRecord(only(kept.drainDirty()).recordOrNull(), 2)).isNull();
        }

        @Test
        void aLaterRecordOfEarlierFormatsWinsAndABlockRecordWinsOverBoth() throws Exception {
            KeptOutcomes earlier = new KeptOutcomes(TC, 10, 1000, TTL);
            end(earlier, block(2), Outcome.ABORTED, "alice", NOW - MINUTE);
            RestoredOutcomes restored = restoredFrom(earlier);
            restored.legacy("s0:alice", new KeptOutcome(txn(block(2)), Outcome.COMMITTED, "alice", NOW - MINUTE));
            restored.legacy("s1:alice", new KeptOutcome(txn(7), Outcome.COMMITTED, "alice", NOW - MINUTE));
            restored.legacy("s2:alice", new KeptOutcome(txn(7), Outcome.ABORTED, "alice", NOW - MINUTE));
            kept.beginRestore(Long.MAX_VALUE);

            List<KeptOutcomes.BlockWrite> migrated = kept.mergeRestored(restored, NOW);

            assertThat(kept.get(txn(block(2))).outcome()).as("the block's own record is newer").isEqualTo(
                    Outcome.ABORTED);
            assertThat(kept.get(txn(7)).outcome()).isEqualTo(Outcome.ABORTED);
            assertThat(migrated).extracting(KeptOutcomes.BlockWrite::blockIndex).containsExactly(0L);
        }
    }
}
