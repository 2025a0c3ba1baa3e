package io.github.txnpreserver.preserver.kept;

import io.github.txnpreserver.statetopic.RecordPosition;
import io.github.txnpreserver.statetopic.proto.OutcomeBlockRecord;
import it.unimi.dsi.fastutil.ints.Int2ObjectOpenHashMap;
import it.unimi.dsi.fastutil.longs.Long2ObjectOpenHashMap;
import java.util.Arrays;

/**
 * What one read of the state topic found, in log order, before it joins the live coordinator
 * ({@link OutcomeIndex#merge}): each block's newest valid record. A record that fails
 * validation is skipped and leaves the block's earlier value in place: outcomes never
 * change, so an earlier value is never wrong, only older.
 *
 * <p>Memory holds what the read may keep decoded ({@code hotBytes}: what the broker's bound
 * leaves free when the restore starts); past that, the blocks with the oldest end times are
 * kept cold, as where their record is ({@link ColdBlocks}), and only their outcomes that may
 * enter a client's floor (its newest, by end time) are noted. So a coordinator whose topic
 * keeps hundreds of millions of outcomes restores in bounded memory.
 *
 * <p>Confined to the restore's reading thread until it is handed to the coordinator's.
 */
public final class RestoredBlocks {

    private final long hotBytes;
    private final int perClient;
    private final Long2ObjectOpenHashMap<OutcomeBlock> blocks = new Long2ObjectOpenHashMap<>();
    private final OwnerIds owners = new OwnerIds();
    private final ColdBlocks cold = new ColdBlocks();
    /** Per owner id of {@link #owners}: the newest outcomes of the blocks kept cold. */
    private final Int2ObjectOpenHashMap<NewestPerClient> coldFloor = new Int2ObjectOpenHashMap<>();
    private long decodedBytes;
    /** Scratch: the kept offsets of the block being kept cold. */
    private final int[] offsets = new int[OutcomeBlock.SIZE];

    /** Everything decoded (tests, and reads that fit). */
    RestoredBlocks() {
        this(Long.MAX_VALUE, 1);
    }

    /**
     * @param hotBytes heap the decoded blocks may take; past it the oldest are kept cold
     * @param perClient the floor's outcomes per client, noted for the blocks kept cold
     */
    public RestoredBlocks(long hotBytes, int perClient) {
        this.hotBytes = hotBytes;
        this.perClient = perClient;
    }

    /**
     * A block's newest record (validated by {@link BlockRecordCodec#decode}), written at
     * {@code position}: it replaces what an earlier one said.
     */
    public void put(OutcomeBlockRecord record, RecordPosition position) {
        long index = record.getBlockIndex();
        cold.remove(index);
        OutcomeBlock block = BlockRecordCodec.toBlock(record, owners);
        block.landed = position;
        OutcomeBlock replaced = blocks.put(index, block);
        decodedBytes += block.bytes() - (replaced == null ? 0 : replaced.bytes());
        if (decodedBytes > hotBytes) {
            keepOldestCold();
        }
    }

    /** A block's key was deleted (a tombstone). */
    public void deleted(long blockIndex) {
        OutcomeBlock removed = blocks.remove(blockIndex);
        if (removed != null) {
            decodedBytes -= removed.bytes();
        }
        cold.remove(blockIndex);
    }

    /**
     * Over the bound: the decoded blocks with the oldest end times are kept cold until a
     * quarter of the bound is free (so that this runs once per many records).
     */
    private void keepOldestCold() {
        OutcomeBlock[] decoded = blocks.values().toArray(new OutcomeBlock[0]);
        // Sorted as primitives (newest end time, then place): a comparator over the blocks was a
        // fifth of a large restore's time.
        long[] byAge = new long[decoded.length];
        for (int i = 0; i < decoded.length; i++) {
            byAge[i] = ((long) decoded[i].maxTime() << 32) | i;
        }
        Arrays.sort(byAge);
        for (long entry : byAge) {
            OutcomeBlock block = decoded[(int) entry];
            if (decodedBytes <= hotBytes - hotBytes / 4) {
                return;
            }
            blocks.remove(block.index);
            decodedBytes -= block.bytes();
            if (block.count() == 0 || block.landed == null) {
                continue;
            }
            cold.put(block.index, block.landed, block.count(), block.minTime(), block.maxTime());
            offerNewestFirst(block);
        }
    }

    /**
     * A block kept cold offers its outcomes to their clients' floor candidates, newest first:
     * end times mostly grow with the sequence, so once a client has its {@code perClient}
     * newest, its block's older outcomes are turned away at a glance instead of each replacing
     * the oldest candidate (which was most of a large restore's time).
     */
    private void offerNewestFirst(OutcomeBlock block) {
        int kept = 0;
        for (int offset = block.nextKept(0); offset >= 0; offset = block.nextKeptAfter(offset)) {
            offsets[kept++] = offset;
        }
        long first = block.firstSequence();
        int lastOwner = -1;
        NewestPerClient client = null;
        for (int i = kept - 1; i >= 0; i--) {
            int offset = offsets[i];
            int owner = block.owner(offset);
            if (owner != lastOwner || client == null) {
                client = coldFloor.computeIfAbsent(owner, ignored -> new NewestPerClient(perClient));
                lastOwner = owner;
            }
            client.offer(block.time(offset), first + offset, block.outcome(offset));
        }
    }

    Long2ObjectOpenHashMap<OutcomeBlock> blocks() {
        return blocks;
    }

    OwnerIds owners() {
        return owners;
    }

    /** The blocks read but kept cold. */
    ColdBlocks cold() {
        return cold;
    }

    /** Per owner id: the newest outcomes of the blocks kept cold, for the floor. */
    Int2ObjectOpenHashMap<NewestPerClient> coldFloor() {
        return coldFloor;
    }
}
