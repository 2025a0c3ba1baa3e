package io.github.txnpreserver.preserver;

import io.github.txnpreserver.statetopic.proto.OutcomeBlockRecord;
import it.unimi.dsi.fastutil.longs.Long2ObjectOpenHashMap;

/**
 * What one read of the state topic found, in log order, before it joins the live coordinator
 * ({@link OutcomeIndex#merge}): each block's newest valid record. A record that fails
 * validation is skipped and leaves the block's earlier value in place: outcomes never
 * change, so an earlier value is never wrong, only older.
 *
 * <p>Confined to the restore's reading thread until it is handed to the coordinator's.
 */
final class RestoredBlocks {

    private final Long2ObjectOpenHashMap<OutcomeBlock> blocks = new Long2ObjectOpenHashMap<>();
    private final OwnerIds owners = new OwnerIds();

    /** A block's newest record (validated by {@link BlockRecordCodec#decode}): it replaces what an earlier one said. */
    void put(OutcomeBlockRecord record) {
        OutcomeBlock block = new OutcomeBlock(record.getBlockIndex());
        int[] ids = new int[record.getOwnersCount() + 1];
        for (int i = 0; i < record.getOwnersCount(); i++) {
            ids[i + 1] = owners.idOf(record.getOwners(i));
        }
        int entry = 0;
        long time = 0;
        for (int word = 0; word < BlockRecordCodec.WORDS; word++) {
            long kept = record.getKept(word);
            while (kept != 0) {
                int bit = Long.numberOfTrailingZeros(kept);
                kept &= kept - 1;
                int offset = (word << 6) + bit;
                boolean committed = (record.getCommitted(word) & (1L << bit)) != 0;
                int ref = record.getOwnerRefsCount() == 0 ? record.getUniformOwnerRef() : record.getOwnerRefs(entry);
                time += record.getEndSecondDeltas(entry);
                block.set(offset, committed, (int) time, ids[ref]);
                entry++;
            }
        }
        blocks.put(record.getBlockIndex(), block);
    }

    /** A block's key was deleted (a tombstone). */
    void deleted(long blockIndex) {
        blocks.remove(blockIndex);
    }

    Long2ObjectOpenHashMap<OutcomeBlock> blocks() {
        return blocks;
    }

    OwnerIds owners() {
        return owners;
    }
}
