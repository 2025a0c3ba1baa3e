package io.github.txnpreserver.preserver.kept;

import static org.assertj.core.api.Assertions.assertThat;

import io.github.txnpreserver.statetopic.RecordPosition;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import org.junit.jupiter.api.DisplayName;
import org.junit.jupiter.api.Test;

/** The memory bound's steps one at a time: a block goes cold, then the cold block is dropped. */
@DisplayName("Outcome index: the bound's cold steps")
class OutcomeIndexColdStepsTest {

    private static final long TTL = Duration.ofHours(1).toMillis();
    private static final long NOW = 1_700_000_000_000L;
    private static final long SECOND = 1000;
    private static final RecordPosition LANDED = new RecordPosition(3, 1, -1, 0);
    private static final RecordPosition CARRIED = new RecordPosition(9, 4, -1, 0);

    private static void commit(OutcomeIndex index, long sequence, String owner, long atMillis) {
        index.decide(sequence, Outcome.COMMITTED, owner, atMillis);
        index.ended(sequence);
    }

    @Test
    void aLandedBlockGoesColdThenTheColdBlockIsDroppedKeepingItsFloorEntry() {
        OutcomeIndex index = new OutcomeIndex(1, 1000, TTL, blockIndex -> { });
        commit(index, 0, "alice", NOW);
        commit(index, 1, "alice", NOW + SECOND);
        index.landed(0, LANDED);
        boolean[] goesCold = new boolean[1];

        assertThat(index.oldestEvictableMillis(block -> true, goesCold)).isEqualTo(NOW + SECOND);
        assertThat(goesCold[0]).isTrue();
        assertThat(index.evictOldest(block -> true)).isEqualTo(OutcomeIndex.Eviction.COLD);
        assertThat(index.coldRecordOf(0)).isEqualTo(LANDED);
        assertThat(index.isAwaitingCold(0)).isFalse();
        assertThat(index.keyCount()).as("the cold block's key").isEqualTo(1);

        assertThat(index.oldestEvictableMillis(block -> true, goesCold)).isEqualTo(NOW + SECOND);
        assertThat(goesCold[0]).isFalse();
        assertThat(index.evictOldest(block -> true)).isEqualTo(OutcomeIndex.Eviction.DROPPED);

        assertThat(index.coldRecordOf(0)).isNull();
        assertThat(index.memoryEvictions()).as("two outcomes, one kept as alice's floor entry").isEqualTo(1);
        assertThat(index.size()).isEqualTo(1);
    }

    @Test
    void anOwnerWhoseOnlyOutcomesWentColdIsForgotten() {
        OutcomeIndex index = new OutcomeIndex(10, 1, TTL, blockIndex -> { });
        commit(index, 0, "alice", NOW);
        commit(index, 256, "carol", NOW);
        assertThat(index.floorSize()).as("the cap took alice's entry").isEqualTo(1);
        index.landed(0, LANDED);

        assertThat(index.evictOldest(block -> true)).isEqualTo(OutcomeIndex.Eviction.COLD);

        assertThat(index.ownerCount()).isEqualTo(1);
        assertThat(index.ownerName(1)).isNull();

        assertThat(index.evictOldest(block -> true)).isEqualTo(OutcomeIndex.Eviction.DROPPED);

        assertThat(index.keyCount()).as("no floor entry keeps block 0's record").isEqualTo(1);
        assertThat(index.size()).isEqualTo(1);
    }

    @Test
    void aColdRecordThatCannotBeReadLosesItsOutcomes() {
        OutcomeIndex index = new OutcomeIndex(10, 1, TTL, blockIndex -> { });
        commit(index, 0, "alice", NOW);
        commit(index, 1, "alice", NOW);
        commit(index, 256, "carol", NOW);
        index.landed(0, LANDED);
        index.evictOldest(block -> true);

        index.coldRecordUnusable(0, LANDED);

        assertThat(index.coldRecordOf(0)).isNull();
        assertThat(index.coldLost()).isEqualTo(2);
        assertThat(index.size()).isEqualTo(1);
    }

    @Test
    void aBlockCreatedAgainWhereOnlyFloorEntriesWereKeptStartsFromThem() {
        OutcomeIndex index = new OutcomeIndex(1, 1000, TTL, blockIndex -> { });
        commit(index, 1, "alice", NOW);
        commit(index, 0, "alice", NOW + SECOND);
        assertThat(index.evictOldest(block -> false)).isEqualTo(OutcomeIndex.Eviction.DROPPED);
        assertThat(index.size()).as("alice's floor entry").isEqualTo(1);

        commit(index, 5, "bob", NOW + 2 * SECOND);

        assertThat(index.blockCount()).isEqualTo(1);
        assertThat(index.size()).isEqualTo(2);
        assertThat(index.keyCount()).isEqualTo(1);

        assertThat(index.evictOldest(block -> false)).isEqualTo(OutcomeIndex.Eviction.DROPPED);

        assertThat(index.ownerCount()).as("alice and bob, each named by a floor entry").isEqualTo(2);
        assertThat(index.ownerName(ClientFloor.ownerOf(index.find(0, -1)))).isEqualTo("alice");
        assertThat(index.size()).isEqualTo(2);
    }

    @Test
    void onlyTheOldestBlocksAreScannedForOneThatMayGoCold() {
        OutcomeIndex index = new OutcomeIndex(10, 1000, TTL, blockIndex -> { });
        int scanned = OutcomeIndex.COLD_CANDIDATES_SCANNED;
        for (long block = 0; block <= scanned; block++) {
            commit(index, block * 256, "alice", NOW);
            index.landed(block, LANDED);
        }

        assertThat(index.evictOldest(block -> block == scanned))
                .as("the one durable block is past the scan: the oldest is dropped instead")
                .isEqualTo(OutcomeIndex.Eviction.DROPPED);
        assertThat(index.coldRecordOf(scanned)).isNull();
        assertThat(index.blockCount()).isEqualTo(scanned);
    }

    /**
     * The bound looks for a cold block to drop among the lowest {@value OutcomeIndex#COLD_CANDIDATES_SCANNED}
     * only, as it looks for one to send cold: asked after every change, it must not walk the
     * whole cold tier while its lowest blocks are all back in memory awaiting their cold part
     * (neither written nor dropped meanwhile).
     */
    @Test
    void onlyTheLowestColdBlocksAreScannedForOneThatMayBeDropped() {
        OutcomeIndex index = new OutcomeIndex(1, 1000, TTL, blockIndex -> { });
        List<Long> coldReads = new ArrayList<>();
        index.readColdWith((blockIndex, position) -> coldReads.add(blockIndex));
        int scanned = OutcomeIndex.COLD_CANDIDATES_SCANNED;
        for (long block = 0; block <= scanned; block++) {
            commit(index, block * 256, "alice", NOW);
            index.landed(block, LANDED);
        }
        for (int block = 0; block <= scanned; block++) {
            assertThat(index.evictOldest(durable -> true)).isEqualTo(OutcomeIndex.Eviction.COLD);
        }
        for (long block = 0; block < scanned; block++) {
            commit(index, block * 256 + 1, "bob", NOW + SECOND);
        }
        assertThat(coldReads).as("the lowest blocks, each back in memory").hasSize(scanned);

        assertThat(index.evictOldest(durable -> true))
                .as("the one cold block that may be dropped is past the scan").isEqualTo(OutcomeIndex.Eviction.NONE);
        assertThat(index.oldestEvictableMillis(durable -> true, new boolean[1])).isNull();
        assertThat(index.coldRecordOf(scanned)).isEqualTo(LANDED);
        assertThat(index.memoryEvictions()).isZero();
    }

    /** Block 0 cold (alice's sequence 0 only in its record), then written again: it awaits its cold part. */
    private OutcomeIndex writtenAgainWhileCold(List<Long> changes, List<Long> coldReads) {
        OutcomeIndex index = new OutcomeIndex(10, 1, TTL, changes::add);
        index.readColdWith((blockIndex, position) -> coldReads.add(blockIndex));
        commit(index, 0, "alice", NOW);
        commit(index, 256, "carol", NOW);
        index.landed(0, LANDED);
        index.evictOldest(block -> true);
        changes.clear();

        commit(index, 1, "bob", NOW + SECOND);
        return index;
    }

    @Test
    void aColdBlockWrittenAgainAwaitsItsColdPartThenHoldsBoth() {
        List<Long> changes = new ArrayList<>();
        List<Long> coldReads = new ArrayList<>();
        OutcomeIndex index = writtenAgainWhileCold(changes, coldReads);
        assertThat(index.isAwaitingCold(0)).isTrue();
        assertThat(index.isHeld(0)).isTrue();
        assertThat(coldReads).containsExactly(0L);
        long before = index.bytes();
        changes.clear();

        OutcomeBlock record = new OutcomeBlock(0);
        OwnerIds recordOwners = new OwnerIds();
        record.set(0, Outcome.COMMITTED, OutcomeIndex.storedSecond(NOW), recordOwners.idOf("alice"));
        record.set(1, Outcome.ABORTED, OutcomeIndex.storedSecond(NOW), recordOwners.idOf("mallory"));
        index.coldPartRead(0, record, recordOwners);

        assertThat(index.isAwaitingCold(0)).isFalse();
        assertThat(index.coldRecordOf(0)).isNull();
        assertThat(changes).as("written whole").containsExactly(0L);
        assertThat(index.ownerName(ClientFloor.ownerOf(index.find(0, -1)))).isEqualTo("alice");
        assertThat(ClientFloor.outcomeOf(index.find(1, -1))).as("what memory has wins").isEqualTo(Outcome.COMMITTED);
        assertThat(index.size()).as("sequences 0 and 1 of block 0, and carol's").isEqualTo(3);
        assertThat(index.bytes()).as("the cold page freed; alice named again, and an owner column for two owners")
                .isEqualTo(before - ColdBlocks.PAGE_BYTES + 64 + 2 * 5 + 16 + 2 * 256);

        index.evictOldest(block -> false);
        index.evictOldest(block -> false);
        assertThat(index.ownerCount()).as("alice named by block 0 only: gone with it; bob by his floor entry")
                .isEqualTo(1);
    }

    @Test
    void aTopicCreatedAgainLeavesABlockAwaitingItsColdPartWithWhatMemoryHas() {
        List<Long> changes = new ArrayList<>();
        OutcomeIndex index = writtenAgainWhileCold(changes, new ArrayList<>());

        assertThat(index.topicCreatedAgain()).as("nothing lost only in the cold tier").isZero();

        assertThat(index.isAwaitingCold(0)).isFalse();
        assertThat(index.isHeld(0)).isFalse();
        assertThat(index.coldRecordOf(0)).isNull();
        assertThat(index.coldLost()).isZero();
        assertThat(index.size()).isEqualTo(2);
        assertThat(index.keyCount()).as("blocks 0 and 1, each once").isEqualTo(2);
    }

    @Test
    void aBlockWhoseRecordLandedInATopicCreatedSinceDoesNotGoColdUntilItLandsAgain() {
        OutcomeIndex index = new OutcomeIndex(10, 1000, TTL, blockIndex -> { });
        commit(index, 0, "alice", NOW);
        index.landed(0, LANDED);

        index.topicCreatedAgain();

        assertThat(index.evictOldest(block -> true)).isEqualTo(OutcomeIndex.Eviction.DROPPED);
        assertThat(index.coldRecordOf(0)).isNull();
    }

    @Test
    void limitsOfOneAreAccepted() {
        OutcomeIndex index = new OutcomeIndex(1, 1, 1, blockIndex -> { });

        assertThat(index.size()).isZero();
    }

    @Test
    void aBlockWhoseRecordWasCarriedElsewhereGoesColdPointingThere() {
        OutcomeIndex index = new OutcomeIndex(10, 1000, TTL, blockIndex -> { });
        commit(index, 0, "alice", NOW);
        index.landed(0, LANDED);

        index.recordMoved(0, CARRIED);
        index.evictOldest(block -> true);

        assertThat(index.coldRecordOf(0)).isEqualTo(CARRIED);
    }

    @Test
    void aBlockWithoutALandedRecordIsNotMadeColdByACarriedOne() {
        OutcomeIndex index = new OutcomeIndex(10, 1000, TTL, blockIndex -> { });
        commit(index, 0, "alice", NOW);

        index.recordMoved(0, CARRIED);

        assertThat(index.evictOldest(block -> true)).isEqualTo(OutcomeIndex.Eviction.DROPPED);
        assertThat(index.coldRecordOf(0)).isNull();
    }

    @Test
    void anOutcomeEndedExactlyItsTimeToLiveAgoHasExpired() {
        OutcomeIndex index = new OutcomeIndex(10, 1000, TTL, blockIndex -> { });
        int endedTtlAgo = OutcomeIndex.storedSecond(NOW - TTL);

        assertThat(index.expired(endedTtlAgo, NOW)).isTrue();
        assertThat(index.expired(endedTtlAgo + 1, NOW)).isFalse();
    }

    @Test
    void anOutcomeWithoutOwnerKeptAgainIsCountedOnce() {
        OutcomeIndex index = new OutcomeIndex(10, 1000, TTL, blockIndex -> { });
        index.decide(0, Outcome.ABORTED, null, NOW);
        index.ended(0);

        index.decide(0, Outcome.COMMITTED, null, NOW);
        index.ended(0);

        assertThat(index.size()).isEqualTo(1);
    }
}
