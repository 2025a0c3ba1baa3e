package io.github.txnpreserver.preserver.kept;

import it.unimi.dsi.fastutil.longs.Long2IntOpenHashMap;
import it.unimi.dsi.fastutil.longs.LongSet;
import it.unimi.dsi.fastutil.longs.LongSets;

/**
 * Blocks no longer in memory whose state-topic record still holds {@link ClientFloor}
 * entries, with how many: such a record is written again (not deleted) until its last floor
 * entry leaves, and a block created again at that index starts from those entries.
 *
 * <p>Confined to its coordinator's thread, as {@link OutcomeIndex} is.
 */
final class FloorOnlyBlocks {

    /** Index entry at fastutil's load factor, rounded up. */
    private static final int BYTES_PER_BLOCK = 24;

    private final Long2IntOpenHashMap entries = new Long2IntOpenHashMap();
    private long outcomes;

    boolean contains(long blockIndex) {
        return entries.containsKey(blockIndex);
    }

    /** A block left memory with {@code floorEntries} (more than none) still in its record. */
    void put(long blockIndex, int floorEntries) {
        outcomes += floorEntries - entries.put(blockIndex, floorEntries);
    }

    /** The block is in memory again (or its record is deleted). */
    void remove(long blockIndex) {
        outcomes -= entries.remove(blockIndex);
    }

    /**
     * One of the block's floor entries left the floor.
     *
     * @return true if it was the last: the block's record must be deleted
     */
    boolean removeOne(long blockIndex) {
        if (!entries.containsKey(blockIndex)) {
            return false;
        }
        int left = entries.get(blockIndex) - 1;
        outcomes--;
        if (left > 0) {
            entries.put(blockIndex, left);
            return false;
        }
        entries.remove(blockIndex);
        return true;
    }

    /** A read-only view. */
    LongSet indexes() {
        return LongSets.unmodifiable(entries.keySet());
    }

    /** Floor entries in all these blocks' records. */
    long outcomes() {
        return outcomes;
    }

    int size() {
        return entries.size();
    }

    long bytes() {
        return (long) BYTES_PER_BLOCK * entries.size();
    }

    void clear() {
        entries.clear();
        outcomes = 0;
    }
}
