package io.github.txnpreserver.preserver.kept;

import it.unimi.dsi.fastutil.ints.Int2ObjectFunction;
import it.unimi.dsi.fastutil.ints.Int2ObjectOpenHashMap;
import it.unimi.dsi.fastutil.ints.IntArrayList;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Map;

/**
 * The one merge of a restore into an {@link OutcomeIndex}, on the coordinator's thread:
 * blocks read are adopted as the oldest, or joined to the block this coordinator wrote
 * meanwhile (whose outcomes win: they are newer, and an outcome never changes); owner ids of
 * the read are mapped to the index's only for the outcomes adopted; then the floor is rebuilt
 * from every block, each client's newest first.
 */
final class RestoreMerge {

    private final OutcomeIndex index;

    RestoreMerge(OutcomeIndex index) {
        this.index = index;
    }

    /** @param through stored end times at or before this are expired */
    void merge(RestoredBlocks restored, int through) {
        OutcomeBlock[] newestFirst = restored.blocks().values().toArray(new OutcomeBlock[0]);
        // Ties by index: blocks put into index.blocks in another open hash map's table order
        // collide in clusters (measured: a microsecond per lookup at 39 000 blocks).
        Arrays.sort(newestFirst, (a, b) -> a.maxTime() != b.maxTime() ? Integer.compare(b.maxTime(), a.maxTime())
                : Long.compare(b.index, a.index));
        index.blocks.ensureCapacity(index.blocks.size() + newestFirst.length);
        int[] remap = new int[restored.owners().highestId() + 1];
        Arrays.fill(remap, -1);
        for (OutcomeBlock staged : newestFirst) {
            if (writtenMeanwhile(staged.index)) {
                continue;
            }
            if (staged.count() == 0 || staged.maxTime() <= through) {
                if (!index.blocks.containsKey(staged.index)) {
                    index.changes.changed(staged.index);
                }
                continue;
            }
            OutcomeBlock live = index.blocks.get(staged.index);
            if (live == null) {
                for (int offset = staged.nextKept(0); offset >= 0; offset = staged.nextKeptAfter(offset)) {
                    remap(remap, staged.owner(offset), restored.owners());
                }
                staged.remapOwners(remap);
                adoptAsOldest(staged);
            } else {
                mergeInto(live, staged, remap, restored.owners());
            }
        }
        keepCold(restored.cold(), through);
        rebuildFloor(restored, remap, through);
    }

    /**
     * The blocks the read kept cold join the index's cold tier; one this coordinator has in
     * memory meanwhile (newer, and written whole) first gets its cold part read and merged;
     * one whose every outcome expired is deleted.
     */
    private void keepCold(ColdBlocks readCold, int through) {
        for (long blockIndex : readCold.indexes()) {
            if (writtenMeanwhile(blockIndex)) {
                continue;
            }
            boolean live = index.blocks.containsKey(blockIndex);
            if (readCold.maxTime(blockIndex) <= through) {
                if (!live) {
                    index.changes.changed(blockIndex);
                }
                continue;
            }
            index.cold.put(blockIndex, readCold.positionOf(blockIndex), readCold.outcomes(blockIndex),
                    readCold.minTime(blockIndex), readCold.maxTime(blockIndex));
            if (live) {
                index.awaitColdPart(blockIndex);
            }
        }
    }

    /**
     * A block out of memory that the bound dropped (floor-only) or sent cold while the
     * restore read: not held (held blocks stay), so written by this coordinator, and its
     * record is newer than a copy a second read may have found. That copy is neither adopted
     * nor deleted, and the cold tier keeps the newer position.
     */
    private boolean writtenMeanwhile(long blockIndex) {
        return !index.blocks.containsKey(blockIndex)
                && (index.floorOnlyBlocks.contains(blockIndex) || index.cold.contains(blockIndex));
    }

    /** The live id of a restored owner id, created on first use (only for outcomes that are adopted). */
    private int remap(int[] remap, int restoredId, OwnerIds restoredOwners) {
        if (remap[restoredId] < 0) {
            remap[restoredId] = index.owners.idOf(restoredOwners.nameOf(restoredId));
        }
        return remap[restoredId];
    }

    private void mergeInto(OutcomeBlock live, OutcomeBlock staged, int[] remap, OwnerIds restoredOwners) {
        long before = live.bytes();
        for (int offset = staged.nextKept(0); offset >= 0; offset = staged.nextKeptAfter(offset)) {
            if (!live.has(offset)) {
                int owner = remap(remap, staged.owner(offset), restoredOwners);
                index.owners.retain(owner);
                live.set(offset, staged.outcome(offset), staged.time(offset), owner);
                index.blockOutcomes++;
            }
        }
        index.blockBytes += live.bytes() - before;
        index.changes.changed(live.index);
    }

    private void adoptAsOldest(OutcomeBlock staged) {
        for (int offset = staged.nextKept(0); offset >= 0; offset = staged.nextKeptAfter(offset)) {
            index.owners.retain(staged.owner(offset));
        }
        index.blocks.put(staged.index, staged);
        index.byAge.linkOldest(staged);
        index.blockOutcomes += staged.count();
        index.blockBytes += staged.bytes();
    }

    /** Each client's newest decided outcomes, from every block (those the read kept cold included), newest first. */
    private void rebuildFloor(RestoredBlocks restored, int[] remap, int through) {
        Int2ObjectOpenHashMap<NewestPerClient> newestByOwner = new Int2ObjectOpenHashMap<>();
        Int2ObjectFunction<NewestPerClient> newClient = ignored -> new NewestPerClient(index.perClient);
        restored.coldFloor().forEach((restoredOwner, newest) -> newest.inOrder((time, sequence, outcome) -> {
            if (time > through && index.cold.contains(OutcomeBlock.indexOf(sequence))
                    && !index.blocks.containsKey(OutcomeBlock.indexOf(sequence))) {
                newestByOwner.computeIfAbsent(remap(remap, restoredOwner, restored.owners()), newClient)
                        .offer(time, sequence, outcome);
            }
        }));
        // The old entries' owner references are released only once the new index.floor holds its
        // own: an owner whose only outcomes are index.floor entries would otherwise reach zero
        // references in between, and its id be freed (its name lost) or handed to another owner.
        IntArrayList formerOwners = new IntArrayList(index.floor.size());
        // Floor entries of index.blocks dropped meanwhile compete with the restored ones.
        index.floor.forEach((sequence, packed) -> {
            formerOwners.add(ClientFloor.ownerOf(packed));
            if (!index.blocks.containsKey(OutcomeBlock.indexOf(sequence))) {
                newestByOwner.computeIfAbsent(ClientFloor.ownerOf(packed), newClient)
                        .offer(ClientFloor.timeOf(packed), sequence, ClientFloor.outcomeOf(packed));
            }
        });
        long[] formerlyFloorOnly = index.floorOnlyBlocks.indexes().toLongArray();
        index.floor.clear();
        index.floorOnlyBlocks.clear();
        // Consecutive outcomes mostly share their owner: one lookup per run of them.
        int lastOwner = -1;
        NewestPerClient lastClient = null;
        for (OutcomeBlock block = index.byAge.newest(); block != null; block = block.older) {
            long first = block.firstSequence();
            for (int offset = block.nextKept(0); offset >= 0; offset = block.nextKeptAfter(offset)) {
                int owner = block.owner(offset);
                if (owner != lastOwner || lastClient == null) {
                    lastClient = newestByOwner.computeIfAbsent(owner, newClient);
                    lastOwner = owner;
                }
                lastClient.offer(block.time(offset), first + offset, block.outcome(offset));
            }
        }
        // Least recently ending clients first, so that the index.floor cap takes from them.
        List<Map.Entry<Integer, NewestPerClient>> clients = new ArrayList<>(newestByOwner.int2ObjectEntrySet());
        clients.sort((a, b) -> Integer.compare(a.getValue().newestTime(), b.getValue().newestTime()));
        for (Map.Entry<Integer, NewestPerClient> client : clients) {
            int owner = client.getKey();
            client.getValue().inOrder((time, sequence, outcome) -> {
                int replaced = index.floor.add(sequence, owner, time, outcome, index::floorEntryRemoved);
                index.owners.retain(owner);
                if (replaced != ClientFloor.ADDED) {
                    index.owners.release(replaced);
                }
            });
        }
        for (int i = 0; i < formerOwners.size(); i++) {
            index.owners.release(formerOwners.getInt(i));
        }
        for (long block : formerlyFloorOnly) {
            if (index.blocks.containsKey(block)) {
                continue;
            }
            int entries = index.floor.entriesOfBlock(block);
            if (entries > 0) {
                index.floorOnlyBlocks.put(block, entries);
            } else {
                index.changes.changed(block);
            }
        }
    }

}
