package io.github.txnpreserver.preserver;

import io.github.txnpreserver.statetopic.RecordPosition;
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

    /**
     * A block's newest record (validated by {@link BlockRecordCodec#decode}), written at
     * {@code position}: it replaces what an earlier one said.
     */
    void put(OutcomeBlockRecord record, RecordPosition position) {
        OutcomeBlock block = BlockRecordCodec.toBlock(record, owners);
        block.landed = position;
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
