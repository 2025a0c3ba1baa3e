package io.github.txnpreserver.preserver;

import io.github.txnpreserver.statetopic.ChunkRecord;
import it.unimi.dsi.fastutil.longs.Long2ObjectOpenHashMap;
import it.unimi.dsi.fastutil.longs.LongOpenHashSet;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

/**
 * What one restore read from the state topic, in log order, before it joins the live
 * coordinator ({@link KeptOutcomes#mergeRestored}): blocks, each the newest value of its
 * key, and the outcomes of earlier record formats (per client slot, and 0.1's per
 * transaction), the newest per key.
 *
 * <p>Confined to the restoring thread.
 */
public final class RestoredOutcomes {

    private final Long2ObjectOpenHashMap<OutcomeBlock> blocks = new Long2ObjectOpenHashMap<>();
    private final OwnerIds owners = new OwnerIds();
    private final Map<String, KeptOutcome> legacy = new LinkedHashMap<>();
    private long outcomes;

    /** The newest value of a block's key: it replaces what an earlier value said. */
    public void block(ChunkRecord record) {
        OutcomeBlock block = new OutcomeBlock(record.blockIndex());
        int[] ids = new int[record.owners().size() + 1];
        for (int i = 0; i < record.owners().size(); i++) {
            ids[i + 1] = owners.idOf(record.owners().get(i));
        }
        int entry = 0;
        for (int word = 0; word < record.kept().length; word++) {
            long kept = record.kept()[word];
            while (kept != 0) {
                int bit = Long.numberOfTrailingZeros(kept);
                kept &= kept - 1;
                int offset = (word << 6) + bit;
                boolean committed = (record.committed()[word] & (1L << bit)) != 0;
                int ref = record.ownerRefs() == null ? record.uniformOwnerRef() : record.ownerRefs()[entry];
                block.set(offset, committed, record.endSeconds()[entry], ids[ref]);
                entry++;
            }
        }
        OutcomeBlock replaced = blocks.put(record.blockIndex(), block);
        outcomes += block.count() - (replaced == null ? 0 : replaced.count());
    }

    /** A block's key was deleted. */
    public void blockDeleted(long blockIndex) {
        OutcomeBlock removed = blocks.remove(blockIndex);
        if (removed != null) {
            outcomes -= removed.count();
        }
    }

    /** The newest value of an earlier format's key. */
    public void legacy(String key, KeptOutcome outcome) {
        legacy.remove(key);
        legacy.put(key, outcome);
    }

    /** An earlier format's key was deleted. */
    public void legacyDeleted(String key) {
        legacy.remove(key);
    }

    /** The earlier formats' keys read: deleted once their outcomes are durable in blocks. */
    public List<String> legacyKeys() {
        return new ArrayList<>(legacy.keySet());
    }

    /** Outcomes read so far, in blocks. */
    public long outcomes() {
        return outcomes;
    }

    Long2ObjectOpenHashMap<OutcomeBlock> blocks() {
        return blocks;
    }

    OwnerIds owners() {
        return owners;
    }

    /**
     * Puts the earlier formats' outcomes into their blocks, in log order (a later record of
     * the same transaction wins), except where a block record of its own has the
     * transaction: a sequence ends once, so a block record and an earlier-format record of
     * it tell the same outcome, and the block record is the newer format. A block record
     * without it does not hide it: a broker of an earlier version may have ended it after
     * the block was written (a rolling upgrade). Outcomes past their time-to-live are not
     * moved.
     *
     * @param expiredThrough stored end times at or before this are expired
     * @return the blocks that took earlier-format outcomes
     */
    List<Long> applyLegacyToBlocks(int expiredThrough) {
        List<Long> migrated = new ArrayList<>();
        Long2ObjectOpenHashMap<OutcomeBlock> recorded = new Long2ObjectOpenHashMap<>(blocks);
        LongOpenHashSet touched = new LongOpenHashSet();
        LongOpenHashSet moved = new LongOpenHashSet();
        for (KeptOutcome outcome : legacy.values()) {
            if (KeptOutcomes.storedSecond(outcome.endTimeMillis()) <= expiredThrough) {
                continue;
            }
            long sequence = outcome.txnId().getLeastSigBits();
            long index = OutcomeBlock.indexOf(sequence);
            int offset = OutcomeBlock.offsetOf(sequence);
            OutcomeBlock own = recorded.get(index);
            if (own != null && own.has(offset) && !moved.contains(sequence)) {
                continue;
            }
            moved.add(sequence);
            OutcomeBlock block = blocks.get(index);
            if (block == null) {
                block = new OutcomeBlock(index);
                blocks.put(index, block);
            }
            if (touched.add(index)) {
                migrated.add(index);
            }
            if (!block.has(offset)) {
                outcomes++;
            }
            block.set(offset, outcome.outcome() == Outcome.COMMITTED,
                    KeptOutcomes.storedSecond(outcome.endTimeMillis()), owners.idOf(outcome.owner()));
        }
        return migrated;
    }
}
