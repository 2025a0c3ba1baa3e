package io.github.txnpreserver.preserver.kept;

import static org.assertj.core.api.Assertions.assertThat;

import io.github.txnpreserver.statetopic.RecordPosition;
import io.github.txnpreserver.statetopic.proto.OutcomeBlockRecord;
import java.util.ArrayList;
import java.util.List;
import org.junit.jupiter.api.DisplayName;
import org.junit.jupiter.api.Test;

@DisplayName("Blocks read at a restore")
class RestoredBlocksTest {

    private static final long COORDINATOR = 7;
    private static final int T = 1_700_000_000;
    /** A block of one owner whose end times fit two bytes each ({@link OutcomeBlockTest}). */
    private static final long NARROW_BLOCK = 152 + 16 + 8 * 12 + 16 + 2 * 256;
    private static final String[] NAMES = {null, "alice", "bob"};
    private static final int ALICE = 1;
    private static final int BOB = 2;

    private static OutcomeBlockRecord record(long index, int... timesAndOwners) throws Exception {
        OutcomeBlock block = new OutcomeBlock(index);
        for (int i = 0; i < timesAndOwners.length; i += 2) {
            block.set(i / 2, Outcome.COMMITTED, timesAndOwners[i], timesAndOwners[i + 1]);
        }
        byte[] value = BlockRecordCodec.encode(COORDINATOR, block, id -> NAMES[id]);
        return BlockRecordCodec.decode(BlockRecordCodec.key(index), value, COORDINATOR, 1000);
    }

    /** One outcome of alice ending at {@code time}. */
    private static OutcomeBlockRecord endingAt(long index, int time) throws Exception {
        return record(index, time, ALICE);
    }

    private static RecordPosition at(long entry) {
        return new RecordPosition(1, entry, -1, 0);
    }

    record Kept(int time, long sequence) {
    }

    private static List<Kept> coldFloorOf(RestoredBlocks restored, String owner) {
        List<Kept> kept = new ArrayList<>();
        restored.coldFloor().get(restored.owners().idOf(owner))
                .inOrder((time, sequence, outcome) -> kept.add(new Kept(time, sequence)));
        return kept;
    }

    @Test
    void blocksUpToTheBoundStayDecoded() throws Exception {
        RestoredBlocks restored = new RestoredBlocks(3 * NARROW_BLOCK, 10);
        restored.put(endingAt(1, T + 300), at(1));
        restored.put(endingAt(1, T + 301), at(2));
        restored.put(endingAt(2, T + 100), at(3));
        restored.put(endingAt(3, T + 400), at(4));

        assertThat(restored.blocks().keySet()).containsExactlyInAnyOrder(1L, 2L, 3L);
        assertThat(restored.cold().blocks()).isZero();
        assertThat(restored.blocks().get(1L).landed).as("the newest record").isEqualTo(at(2));
    }

    @Test
    void aDeletedBlockFreesItsShareOfTheBound() throws Exception {
        RestoredBlocks restored = new RestoredBlocks(3 * NARROW_BLOCK, 10);
        restored.put(endingAt(1, T + 300), at(1));
        restored.put(endingAt(2, T + 100), at(2));
        restored.put(endingAt(3, T + 400), at(3));

        restored.deleted(2);
        restored.deleted(9);
        restored.put(endingAt(4, T + 200), at(4));

        assertThat(restored.blocks().keySet()).containsExactlyInAnyOrder(1L, 3L, 4L);
        assertThat(restored.cold().blocks()).isZero();
    }

    @Test
    void overTheBoundTheOldestEndingGoColdUntilAQuarterIsFree() throws Exception {
        // Three quarters of the bound is exactly three blocks: two of the five go cold.
        RestoredBlocks restored = new RestoredBlocks(4 * NARROW_BLOCK, 10);
        restored.put(endingAt(1, T + 300), at(1));
        restored.put(endingAt(2, T + 100), at(2));
        restored.put(endingAt(3, T + 400), at(3));
        restored.put(endingAt(4, T + 200), at(4));
        assertThat(restored.cold().blocks()).isZero();

        restored.put(endingAt(5, T + 500), at(5));

        assertThat(restored.blocks().keySet()).containsExactlyInAnyOrder(1L, 3L, 5L);
        assertThat(restored.cold().indexes().toLongArray()).containsExactly(2L, 4L);
        assertThat(restored.cold().positionOf(2)).isEqualTo(at(2));
        assertThat(restored.cold().minTime(2)).isEqualTo(T + 100);
    }

    @Test
    void overTheBoundSeveralGoColdOldestEndingFirst() throws Exception {
        // Bound: three blocks and a half; three quarters of it: two and a bit.
        RestoredBlocks restored = new RestoredBlocks(7 * NARROW_BLOCK / 2, 10);
        restored.put(endingAt(4, T + 300), at(1));
        restored.put(endingAt(1, T + 400), at(2));
        restored.put(endingAt(3, T + 100), at(3));

        restored.put(endingAt(2, T + 200), at(4));

        assertThat(restored.cold().indexes().toLongArray()).containsExactly(2L, 3L);
        assertThat(restored.blocks().keySet()).containsExactlyInAnyOrder(1L, 4L);
    }

    @Test
    void theColdBlocksOfferEachClientsNewestOutcomesForTheFloor() throws Exception {
        RestoredBlocks restored = new RestoredBlocks(0, 2);

        restored.put(record(3, T + 1, ALICE, T + 2, BOB, T + 3, ALICE, T + 4, BOB, T + 5, ALICE, T + 6, BOB),
                at(1));

        assertThat(restored.blocks()).isEmpty();
        assertThat(restored.cold().outcomes(3)).isEqualTo(6);
        long first = 3 * 256;
        assertThat(coldFloorOf(restored, "alice")).containsExactly(new Kept(T + 3, first + 2), new Kept(T + 5, first + 4));
        assertThat(coldFloorOf(restored, "bob")).containsExactly(new Kept(T + 4, first + 3), new Kept(T + 6, first + 5));
    }

    /**
     * A block kept cold offers each of its kept outcomes to its client's floor candidates,
     * its first and its last included, and nothing of the offsets it does not keep: here
     * bob's only outcome is the block's first kept, alice's its last, with offsets not kept
     * before and between them.
     */
    @Test
    void aBlockKeptColdOffersEachOfItsKeptOutcomesAndNoOther() throws Exception {
        RestoredBlocks restored = new RestoredBlocks(0, 2);
        OutcomeBlock block = new OutcomeBlock(3);
        block.set(4, Outcome.COMMITTED, T + 7, BOB);
        block.set(6, Outcome.ABORTED, T + 3, ALICE);

        restored.put(BlockRecordCodec.decode(BlockRecordCodec.key(3),
                BlockRecordCodec.encode(COORDINATOR, block, id -> NAMES[id]), COORDINATOR, 1000), at(1));

        long first = 3 * 256;
        assertThat(restored.coldFloor().keySet())
                .containsExactlyInAnyOrder(restored.owners().idOf("alice"), restored.owners().idOf("bob"));
        assertThat(coldFloorOf(restored, "bob")).containsExactly(new Kept(T + 7, first + 4));
        assertThat(coldFloorOf(restored, "alice")).containsExactly(new Kept(T + 3, first + 6));
    }

    @Test
    void aBlockWithoutARecordThatLandedIsDroppedNotKeptCold() throws Exception {
        RestoredBlocks restored = new RestoredBlocks(0, 2);

        restored.put(endingAt(3, T), null);

        assertThat(restored.blocks()).isEmpty();
        assertThat(restored.cold().blocks()).isZero();
        assertThat(restored.coldFloor()).isEmpty();
    }

    @Test
    void aMergeKeepsTheColdBlocksAndTheirClientsNewestUnexpiredOutcomesAsFloorEntries() throws Exception {
        long ttl = java.time.Duration.ofHours(1).toMillis();
        long now = 1_700_000_000_000L;
        int through = OutcomeIndex.storedSecond(now - ttl);
        RestoredBlocks restored = new RestoredBlocks(0, 2);
        restored.put(record(3, through + 1, ALICE, through + 5, ALICE, through + 6, ALICE, through, BOB), at(1));
        OutcomeIndex index = new OutcomeIndex(2, 1000, ttl, blockIndex -> { });

        index.merge(restored, now);

        long first = 3 * 256;
        assertThat(index.coldRecordOf(3)).isEqualTo(at(1));
        assertThat(index.find(first, -1)).as("alice's third newest: only in the cold record").isEqualTo(-1);
        long second = index.find(first + 1, -1);
        assertThat(ClientFloor.timeOf(second)).isEqualTo(through + 5);
        assertThat(ClientFloor.outcomeOf(second)).isEqualTo(Outcome.COMMITTED);
        assertThat(index.ownerName(ClientFloor.ownerOf(second))).isEqualTo("alice");
        assertThat(ClientFloor.timeOf(index.find(first + 2, -1))).isEqualTo(through + 6);
        assertThat(index.find(first + 3, -1)).as("bob's outcome has expired").isEqualTo(-1);
        assertThat(index.floorSize()).isEqualTo(2);
        assertThat(index.ownerCount()).isEqualTo(1);
    }

    record ColdRead(long blockIndex, RecordPosition position) {
    }

    record Answer(Outcome outcome, String owner, int time) {
    }

    /** What the index answers from memory for a sequence, or null. */
    private static Answer answer(OutcomeIndex index, long sequence) {
        long packed = index.find(sequence, -1);
        return packed == -1 ? null : new Answer(ClientFloor.outcomeOf(packed),
                index.ownerName(ClientFloor.ownerOf(packed)), ClientFloor.timeOf(packed));
    }

    /**
     * A block the read kept cold that this coordinator wrote meanwhile (a replayed end, say)
     * is newer in memory but lacks the record's outcomes: it awaits its cold part, held (not
     * written over the record, not dropped), and its other outcomes are still read there;
     * once read, it holds both.
     */
    @Test
    void aBlockReadColdThatThisCoordinatorWroteMeanwhileAwaitsItsColdPartThenHoldsBoth() throws Exception {
        long ttl = java.time.Duration.ofHours(1).toMillis();
        long now = 1_700_000_000_000L;
        int ended = OutcomeIndex.storedSecond(now - 60_000);
        RestoredBlocks restored = new RestoredBlocks(0, 2);
        restored.put(record(3, ended, ALICE, ended + 1, BOB), at(1));
        List<Long> changes = new ArrayList<>();
        List<ColdRead> coldReads = new ArrayList<>();
        OutcomeIndex index = new OutcomeIndex(2, 1000, ttl, changes::add);
        index.readColdWith((blockIndex, position) -> coldReads.add(new ColdRead(blockIndex, position)));
        index.hold(Long.MAX_VALUE);
        long first = 3 * 256;
        index.decide(first + 5, Outcome.ABORTED, "carol", now);
        index.ended(first + 5);
        changes.clear();

        index.merge(restored, now);

        assertThat(coldReads).containsExactly(new ColdRead(3, at(1)));
        assertThat(index.isAwaitingCold(3)).isTrue();
        assertThat(index.isHeld(3)).isTrue();
        assertThat(index.isHolding()).isFalse();
        assertThat(index.coldRecordOf(3)).as("alice's and bob's outcomes are read there").isEqualTo(at(1));
        assertThat(answer(index, first)).isNull();
        assertThat(changes).isEmpty();

        OutcomeBlock record = new OutcomeBlock(3);
        OwnerIds recordOwners = new OwnerIds();
        record.set(0, Outcome.COMMITTED, ended, recordOwners.idOf("alice"));
        record.set(1, Outcome.COMMITTED, ended + 1, recordOwners.idOf("bob"));
        index.coldPartRead(3, record, recordOwners);

        assertThat(index.isHeld(3)).isFalse();
        assertThat(index.coldRecordOf(3)).isNull();
        assertThat(changes).as("written whole").containsExactly(3L);
        assertThat(answer(index, first)).isEqualTo(new Answer(Outcome.COMMITTED, "alice", ended));
        assertThat(answer(index, first + 1)).isEqualTo(new Answer(Outcome.COMMITTED, "bob", ended + 1));
        assertThat(answer(index, first + 5))
                .isEqualTo(new Answer(Outcome.ABORTED, "carol", OutcomeIndex.storedSecond(now)));
        assertThat(index.size()).isEqualTo(3);
    }

    /**
     * A block the read kept cold whose newest outcome ended exactly its time-to-live ago has
     * expired, as an outcome in memory has at that instant: it is not kept cold, and its
     * record is deleted.
     */
    @Test
    void aBlockReadColdWhoseNewestOutcomeEndedExactlyItsTimeToLiveAgoIsDeleted() throws Exception {
        long ttl = java.time.Duration.ofHours(1).toMillis();
        long now = 1_700_000_000_000L;
        int through = OutcomeIndex.storedSecond(now - ttl);
        RestoredBlocks restored = new RestoredBlocks(0, 2);
        restored.put(record(3, through - 60, ALICE, through, BOB), at(1));
        assertThat(restored.cold().positionOf(3)).isEqualTo(at(1));
        List<Long> changes = new ArrayList<>();
        OutcomeIndex index = new OutcomeIndex(2, 1000, ttl, changes::add);

        index.merge(restored, now);

        assertThat(index.coldRecordOf(3)).isNull();
        assertThat(changes).as("a tombstone").containsExactly(3L);
        assertThat(index.recordOf(3)).isNull();
        assertThat(index.size()).isZero();
        assertThat(index.floorSize()).isZero();
    }
}
