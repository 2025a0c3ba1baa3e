package io.github.txnpreserver.preserver.kept;

import static org.assertj.core.api.Assertions.assertThat;

import java.time.Duration;
import org.junit.jupiter.api.DisplayName;
import org.junit.jupiter.api.Test;

/** The heap an index reports for the memory bound: the sum of what each part of it holds. */
@DisplayName("Outcome index memory accounting")
class OutcomeIndexMemoryTest {

    private static final long TTL = Duration.ofHours(1).toMillis();
    private static final long NOW = 1_700_000_000_000L;
    private static final long MINUTE = Duration.ofMinutes(1).toMillis();

    /** The owner table's first 16 slots ({@link OwnerIdsTest}). */
    private static final long EMPTY = 16 * 8;
    /** A block with its end-time column of two bytes a time ({@link OutcomeBlockTest}). */
    private static final long BLOCK = 152 + 16 + 8 * 12 + 16 + 2 * 256;
    /** The owner column of a block whose outcomes name different owners. */
    private static final long OWNER_COLUMN = 16 + 2 * 256;
    private static final long PENDING = 64;
    private static final long FLOOR_ENTRY = ClientFloor.BYTES_PER_ENTRY;
    private static final long FLOOR_CLIENT = 96;

    private static long owner(String name) {
        return 64 + 2L * name.length();
    }

    private final OutcomeIndex index = new OutcomeIndex(10, 1000, TTL, blockIndex -> { });

    /** What a restore reads of block 0 as {@code earlier} wrote it. */
    private static RestoredBlocks readOfBlockZero(OutcomeIndex earlier) throws Exception {
        long coordinator = 3;
        RestoredBlocks read = new RestoredBlocks();
        read.put(BlockRecordCodec.decode(BlockRecordCodec.key(0),
                BlockRecordCodec.encode(coordinator, earlier.recordOf(0), earlier::ownerName), coordinator, 0), null);
        return read;
    }

    @Test
    void countsBlocksEndsInProgressFloorEntriesAndOwners() {
        assertThat(index.bytes()).isEqualTo(EMPTY);

        index.decide(0, Outcome.COMMITTED, "alice", NOW);

        long alice = BLOCK + PENDING + FLOOR_ENTRY + FLOOR_CLIENT + owner("alice");
        assertThat(index.bytes()).isEqualTo(EMPTY + alice);

        index.ended(0);
        assertThat(index.bytes()).isEqualTo(EMPTY + alice - PENDING);

        index.decide(1, Outcome.ABORTED, "bob", NOW);
        index.ended(1);

        assertThat(index.bytes()).as("bob's outcome adds an owner column to the block")
                .isEqualTo(EMPTY + alice - PENDING + OWNER_COLUMN + FLOOR_ENTRY + FLOOR_CLIENT + owner("bob"));
    }

    @Test
    void everythingExpiredLeavesNothingCounted() {
        index.decide(0, Outcome.COMMITTED, "alice", NOW);
        index.ended(0);
        index.decide(1, Outcome.ABORTED, "bob", NOW + MINUTE);
        index.ended(1);
        index.decide(256, Outcome.COMMITTED, "alice", NOW + 2 * MINUTE);
        index.ended(256);

        assertThat(index.expire(NOW + 2 * MINUTE + TTL + MINUTE)).isEqualTo(3);

        assertThat(index.bytes()).isEqualTo(EMPTY);
        assertThat(index.size()).isZero();
    }

    @Test
    void outcomesExpiredFromABlockThatStaysFreeOnlyTheirFloorEntries() {
        index.decide(0, Outcome.COMMITTED, "alice", NOW - TTL - MINUTE);
        index.ended(0);
        index.decide(1, Outcome.COMMITTED, "alice", NOW);
        index.ended(1);
        long before = index.bytes();

        assertThat(index.expire(NOW)).isEqualTo(1);

        assertThat(index.blockCount()).isEqualTo(1);
        assertThat(index.bytes()).as("the block keeps its columns").isEqualTo(before - FLOOR_ENTRY);
    }

    @Test
    void aBlockDroppedForTheBoundLeavesItsFloorEntriesCountedAsAFloorOnlyKey() {
        index.decide(0, Outcome.COMMITTED, "alice", NOW);
        index.ended(0);
        index.decide(256, Outcome.COMMITTED, "alice", NOW);
        index.ended(256);
        index.decide(257, Outcome.COMMITTED, "alice", NOW);
        index.ended(257);
        assertThat(index.keyCount()).isEqualTo(2);
        long before = index.bytes();

        assertThat(index.evictOldest(block -> false)).isEqualTo(OutcomeIndex.Eviction.DROPPED);

        assertThat(index.blockCount()).isEqualTo(1);
        assertThat(index.keyCount()).as("one block in memory, one kept for its floor entry").isEqualTo(2);
        assertThat(index.bytes()).isEqualTo(before - BLOCK + 24);
    }

    /** A block adopted from the restore's read counts what the same block written here counts. */
    @Test
    void aRestoredBlockCountsItsColumnsAsABlockWrittenHereDoes() throws Exception {
        OutcomeIndex earlier = new OutcomeIndex(10, 1000, TTL, blockIndex -> { });
        earlier.decide(0, Outcome.COMMITTED, "alice", NOW);
        earlier.ended(0);
        earlier.decide(1, Outcome.ABORTED, "bob", NOW);
        earlier.ended(1);
        index.hold(Long.MAX_VALUE);

        index.merge(readOfBlockZero(earlier), NOW);

        long written = EMPTY + BLOCK + OWNER_COLUMN + 2 * (FLOOR_ENTRY + FLOOR_CLIENT) + owner("alice") + owner("bob");
        assertThat(earlier.bytes()).isEqualTo(written);
        assertThat(index.bytes()).isEqualTo(written);
    }

    /**
     * A block written here while the restore read, merged with its record's outcomes, counts
     * the columns they add: here bob's outcome adds an owner column to alice's block.
     */
    @Test
    void aBlockMergedWithItsRestoredRecordCountsTheColumnsTheRecordAdds() throws Exception {
        OutcomeIndex earlier = new OutcomeIndex(10, 1000, TTL, blockIndex -> { });
        earlier.decide(1, Outcome.ABORTED, "bob", NOW);
        earlier.ended(1);
        index.hold(Long.MAX_VALUE);
        index.decide(0, Outcome.COMMITTED, "alice", NOW);
        index.ended(0);
        assertThat(index.bytes()).isEqualTo(EMPTY + BLOCK + FLOOR_ENTRY + FLOOR_CLIENT + owner("alice"));

        index.merge(readOfBlockZero(earlier), NOW);

        assertThat(index.bytes())
                .isEqualTo(EMPTY + BLOCK + OWNER_COLUMN + 2 * (FLOOR_ENTRY + FLOOR_CLIENT) + owner("alice") + owner("bob"));
    }
}
