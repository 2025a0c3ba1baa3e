package io.github.txnpreserver.preserver.kept;

import io.github.txnpreserver.statetopic.RecordPosition;
import it.unimi.dsi.fastutil.longs.Long2ObjectOpenHashMap;
import it.unimi.dsi.fastutil.longs.LongArrayList;
import it.unimi.dsi.fastutil.longs.LongOpenHashSet;
import java.util.function.LongPredicate;

/**
 * The outcomes one coordinator keeps: pure in-memory data, no I/O, no time of its own.
 *
 * <h2>Policy</h2>
 * <ul>
 *   <li><b>By time</b>: every decided outcome is kept until its time-to-live ({@link #expire}).</li>
 *   <li><b>By memory, in two tiers</b>: past the broker's memory bound, the least recently
 *       written block whose record has landed goes <em>cold</em> ({@link #evictOldest}): it
 *       leaves memory, its record stays in the state topic, and {@link ColdBlocks} keeps
 *       where that record is (0.13 byte an outcome instead of about 3), so its outcomes are
 *       still answered, by reading it. Only once no block can go cold does the bound drop
 *       outcomes: the lowest cold block first (the oldest), then the least recently written
 *       one still in memory.</li>
 *   <li><b>Per-client floor</b> ({@link ClientFloor}): each client's newest {@code perClient}
 *       decided outcomes survive the memory bound (not their time-to-live).</li>
 * </ul>
 *
 * <h2>Structure</h2>
 * Outcomes live in {@link OutcomeBlock}s of 256 consecutive sequences, indexed by block and
 * linked in the order they were last written. A block is also the state topic's unit: every
 * change to what a block's record must say is reported to {@link BlockChanges}, which writes
 * the block whole. A block dropped from memory is deleted from the topic (a tombstone),
 * unless floor entries still live in its record ("floor-only" blocks).
 *
 * <h2>Held blocks</h2>
 * While the state topic is read at a coordinator's opening, blocks up to the highest
 * sequence the transaction log had allocated are <em>held</em> ({@link #hold}): they may have
 * records not read yet, so they are neither written nor dropped until {@link #merge}.
 *
 * <h2>A cold block that changes</h2>
 * A block whose record holds outcomes not in memory must not be written from memory alone:
 * an end in a cold block (a transaction that ended long after its neighbours, or met again in
 * the log's replay) brings the block back into memory <em>awaiting its cold part</em>
 * ({@link ColdReader}): held like a restore's blocks, not written, not dropped, and a lookup
 * of its other outcomes still reads the record, until {@link #coldPartRead} merges it.
 *
 * <p>Its restore merge lives in {@link RestoreMerge}, which shares its package-private state.
 *
 * <p>Not thread-safe: confined to its coordinator's thread ({@link TransactionMetadataPreserver}).
 */
public final class OutcomeIndex {

    /** End times are stored as seconds since this instant (2020-01-01T00:00:00Z). */
    static final long TIME_EPOCH_MILLIS = 1_577_836_800_000L;
    private static final int BYTES_PER_PENDING = 64;
    static final int COLD_CANDIDATES_SCANNED = 256;

    /** Receives the blocks whose record must be written again (or deleted). */
    @FunctionalInterface
    public interface BlockChanges {
        void changed(long blockIndex);
    }

    /** Reads the record of a cold block that is back in memory, and hands it to {@link #coldPartRead}. */
    @FunctionalInterface
    public interface ColdReader {
        void read(long blockIndex, RecordPosition position);
    }

    /** What {@link #evictOldest} did. */
    enum Eviction {
        /** A block went cold: nothing was dropped. */
        COLD,
        /** Outcomes were dropped (a cold block, or one in memory that could not go cold). */
        DROPPED,
        /** Nothing could be done: every block is pinned, held, or awaits its cold part. */
        NONE
    }

    private final long timeToLiveMillis;
    final int perClient;
    final BlockChanges changes;
    final Long2ObjectOpenHashMap<OutcomeBlock> blocks = new Long2ObjectOpenHashMap<>();
    final BlocksByAge byAge = new BlocksByAge();
    final OwnerIds owners = new OwnerIds();
    final ClientFloor floor;
    final FloorOnlyBlocks floorOnlyBlocks = new FloorOnlyBlocks();
    final ColdBlocks cold = new ColdBlocks();
    /** Blocks back in memory whose cold record is being read ({@link ColdReader}). */
    private final LongOpenHashSet awaitingCold = new LongOpenHashSet();
    private ColdReader coldReader = (blockIndex, position) -> {
        throw new IllegalStateException("no cold reader");
    };
    private long coldLost;
    /** Ends in progress (decided, terminal entry not durable yet): they pin their block. */
    private final LongOpenHashSet pending = new LongOpenHashSet();
    long blockBytes;
    long blockOutcomes;
    private long memoryEvictions;
    private long expirations;
    /** Blocks at or below this index are held; -1 when none is. */
    private long heldThroughBlock = -1;

    public OutcomeIndex(int perClient, int floorCap, long timeToLiveMillis, BlockChanges changes) {
        if (perClient < 1 || floorCap < 1 || timeToLiveMillis < 1) {
            throw new IllegalArgumentException("limits must be positive");
        }
        this.perClient = perClient;
        this.floor = new ClientFloor(perClient, floorCap);
        this.timeToLiveMillis = timeToLiveMillis;
        this.changes = changes;
    }

    /** Who reads a cold block's record when the block is back in memory. */
    public void readColdWith(ColdReader reader) {
        this.coldReader = reader;
    }

    /** The stored form of a wall-clock time: whole seconds since 2020, rounded up (never expires early). */
    static int storedSecond(long millis) {
        long seconds = Math.floorDiv(millis - TIME_EPOCH_MILLIS + 999, 1000);
        return (int) Math.max(0, Math.min(Integer.MAX_VALUE, seconds));
    }

    public static long millisOf(int storedSecond) {
        return TIME_EPOCH_MILLIS + 1000L * storedSecond;
    }

    /**
     * The decided outcome of an end whose finishing entry is durable: kept in its block
     * (pinned there until {@link #ended}) and admitted to its client's floor. Called again (a
     * retried terminal step), it changes nothing.
     */
    public void decide(long sequence, Outcome outcome, String owner, long nowMillis) {
        if (pending.contains(sequence)) {
            return;
        }
        int ownerId = owners.idOf(owner);
        OutcomeBlock block = put(sequence, outcome, storedSecond(nowMillis), ownerId);
        pending.add(sequence);
        block.pins++;
        int offset = OutcomeBlock.offsetOf(sequence);
        int replaced = floor.add(sequence, block.owner(offset), block.time(offset), outcome, this::floorEntryRemoved);
        owners.retain(block.owner(offset));
        if (replaced != ClientFloor.ADDED) {
            owners.release(replaced);
        }
    }

    /** The transaction's terminal entry is durable: its outcome may now be dropped like any other. */
    public void ended(long sequence) {
        if (pending.remove(sequence)) {
            OutcomeBlock block = blocks.get(OutcomeBlock.indexOf(sequence));
            if (block != null) {
                block.pins--;
            }
        }
    }

    /**
     * The kept outcome of a sequence in memory, packed ({@link ClientFloor#pack}), or
     * {@code none}: then it may still be in a cold block's record ({@link #coldRecordOf}).
     */
    public long find(long sequence, long none) {
        OutcomeBlock block = blocks.get(OutcomeBlock.indexOf(sequence));
        int offset = OutcomeBlock.offsetOf(sequence);
        if (block != null && block.has(offset)) {
            return ClientFloor.pack(block.time(offset), block.owner(offset), block.outcome(offset));
        }
        return floor.get(sequence, none);
    }

    /** Where the record of a cold block is, or null if the block is not cold. */
    public RecordPosition coldRecordOf(long blockIndex) {
        return cold.positionOf(blockIndex);
    }

    /**
     * A block's record was carried to another position (a terminated topic created again):
     * a cold block is read there from now on, and a block in memory goes cold pointing there.
     */
    public void recordMoved(long blockIndex, RecordPosition position) {
        cold.moved(blockIndex, position);
        OutcomeBlock block = blocks.get(blockIndex);
        if (block != null && block.landed != null) {
            block.landed = position;
        }
    }

    /** Whether an outcome of this stored end time is past its time-to-live now. */
    public boolean expired(int storedTime, long nowMillis) {
        return storedTime <= expiredThrough(nowMillis);
    }

    /**
     * A write of the block landed at {@code position}: once nothing newer is to be written,
     * the block may go cold.
     */
    public void landed(long blockIndex, RecordPosition position) {
        OutcomeBlock block = blocks.get(blockIndex);
        if (block != null) {
            block.landed = position;
        }
    }

    /**
     * The record of a block awaiting its cold part was read: its outcomes that memory lacks
     * join the block (what memory has is newer, and wins), the block is no longer cold, and
     * it is written whole. A record that could not be read (missing where the cold tier
     * pointed, or malformed: counted by the caller) is null: the block goes on with what
     * memory has.
     *
     * @param owners the names of {@code record}'s owner ids
     */
    public void coldPartRead(long blockIndex, OutcomeBlock record, OwnerIds owners) {
        if (!awaitingCold.remove(blockIndex)) {
            return;
        }
        cold.remove(blockIndex);
        OutcomeBlock block = blocks.get(blockIndex);
        if (block == null) {
            return;
        }
        if (record != null) {
            long before = block.bytes();
            for (int offset = record.nextKept(0); offset >= 0; offset = record.nextKeptAfter(offset)) {
                if (!block.has(offset)) {
                    int owner = this.owners.idOf(owners.nameOf(record.owner(offset)));
                    this.owners.retain(owner);
                    block.set(offset, record.outcome(offset), record.time(offset), owner);
                    blockOutcomes++;
                }
            }
            blockBytes += block.bytes() - before;
        }
        changes.changed(blockIndex);
    }

    /**
     * A cold block's record is missing where the cold tier points, or malformed (counted by
     * the reader): its outcomes are unknown here, and the cold tier forgets it (its key is
     * not deleted: whatever is there now is not this coordinator's to delete).
     */
    public void coldRecordUnusable(long blockIndex, RecordPosition position) {
        if (position.equals(cold.positionOf(blockIndex)) && !awaitingCold.contains(blockIndex)) {
            coldLost += cold.remove(blockIndex);
        }
    }

    /**
     * A block in memory whose record, read at the restore and kept cold, holds outcomes
     * memory lacks: held until its cold part is read and merged ({@link #coldPartRead}).
     */
    void awaitColdPart(long blockIndex) {
        RecordPosition position = cold.positionOf(blockIndex);
        if (position != null && blocks.containsKey(blockIndex) && awaitingCold.add(blockIndex)) {
            coldReader.read(blockIndex, position);
        }
    }

    public boolean isAwaitingCold(long blockIndex) {
        return awaitingCold.contains(blockIndex);
    }

    /**
     * The state topic was created again: no block's record is there any more (those in
     * memory are written again, and go cold only once that lands); the cold blocks' records
     * are gone with it, and no memory holds them but their floor entries, which are written
     * again as floor-only records.
     *
     * @return how many cold outcomes were lost
     */
    public long topicCreatedAgain() {
        for (OutcomeBlock block : blocks.values()) {
            block.landed = null;
        }
        long lost = 0;
        for (long index : cold.indexes()) {
            if (!awaitingCold.contains(index)) {
                int outcomes = cold.outcomes(index);
                lost += outcomes - dropCold(index);
            }
        }
        // A block awaiting its cold part goes on with what memory has.
        for (long index : awaitingCold.toLongArray()) {
            coldPartRead(index, null, owners);
        }
        coldLost += lost;
        return lost;
    }

    /** Outcomes kept in the cold tier only (their blocks' records), not in memory. */
    public long coldOutcomes() {
        return cold.outcomes();
    }

    public long coldLost() {
        return coldLost;
    }

    public String ownerName(int ownerId) {
        return owners.nameOf(ownerId);
    }

    /**
     * Drops the outcomes past their time-to-live, floor entries included. An end in progress
     * keeps its block, as does a held block.
     *
     * @return how many outcomes were dropped
     */
    public long expire(long nowMillis) {
        int through = expiredThrough(nowMillis);
        long before = size();
        floor.expire(through, this::floorEntryRemoved);
        for (OutcomeBlock block = byAge.oldest(); block != null; ) {
            OutcomeBlock next = block.newer;
            if (droppable(block)) {
                if (block.count() == 0 || block.maxTime() <= through) {
                    drop(block);
                } else if (block.minTime() <= through) {
                    dropExpiredEntries(block, through);
                }
            }
            block = next;
        }
        // A cold block leaves once all its outcomes expired (a lookup checks each outcome's own time).
        for (long index : cold.expiredThrough(through)) {
            if (!blocks.containsKey(index)) {
                dropCold(index);
            }
        }
        long dropped = before - size();
        expirations += dropped;
        return dropped;
    }

    /**
     * For the memory bound: sends the least recently written block whose record has landed
     * cold; if none can go, drops the lowest cold block, else the least recently written
     * block that may be dropped. Floor entries stay.
     *
     * @param durable whether nothing of a block waits to be written (its landed record is its state)
     */
    public Eviction evictOldest(LongPredicate durable) {
        OutcomeBlock coldCandidate = coldCandidate(durable);
        if (coldCandidate != null) {
            goCold(coldCandidate);
            return Eviction.COLD;
        }
        long lowestCold = lowestDroppableCold();
        if (lowestCold >= 0) {
            int outcomes = cold.outcomes(lowestCold);
            int floorEntries = dropCold(lowestCold);
            memoryEvictions += outcomes - floorEntries;
            return Eviction.DROPPED;
        }
        for (OutcomeBlock block = byAge.oldest(); block != null; block = block.newer) {
            if (droppable(block)) {
                int dropped = floor.outside(block);
                drop(block);
                memoryEvictions += dropped;
                return Eviction.DROPPED;
            }
        }
        return Eviction.NONE;
    }

    /**
     * The newest end time in the block {@link #evictOldest} would act on, or null if none;
     * {@code cold} tells whether that block would only go cold (which the broker's bound
     * prefers, whichever coordinator has it, over dropping outcomes).
     */
    public Long oldestEvictableMillis(LongPredicate durable, boolean[] goesCold) {
        OutcomeBlock coldCandidate = coldCandidate(durable);
        if (coldCandidate != null) {
            goesCold[0] = true;
            return millisOf(coldCandidate.maxTime());
        }
        goesCold[0] = false;
        long lowestCold = lowestDroppableCold();
        if (lowestCold >= 0) {
            return millisOf(cold.maxTime(lowestCold));
        }
        for (OutcomeBlock block = byAge.oldest(); block != null; block = block.newer) {
            if (droppable(block)) {
                return millisOf(block.maxTime());
            }
        }
        return null;
    }

    /**
     * The least recently written block that may go cold, among the oldest
     * {@value #COLD_CANDIDATES_SCANNED}: asked after every change, the scan must not walk
     * every block while none is durable (the state topic unreachable), when the bound falls
     * back to dropping, as it did before the cold tier.
     */
    private OutcomeBlock coldCandidate(LongPredicate durable) {
        int scanned = 0;
        for (OutcomeBlock block = byAge.oldest(); block != null && scanned < COLD_CANDIDATES_SCANNED;
             block = block.newer, scanned++) {
            if (droppable(block) && block.count() > 0 && block.landed != null && durable.test(block.index)) {
                return block;
            }
        }
        return null;
    }

    /**
     * The lowest cold block that may be dropped, among the lowest {@value #COLD_CANDIDATES_SCANNED}:
     * one held (a restore may hold its newer record) or back in memory is passed over.
     */
    private long lowestDroppableCold() {
        int scanned = 0;
        for (long index = cold.lowest(); index >= 0 && scanned < COLD_CANDIDATES_SCANNED;
             index = cold.next(index), scanned++) {
            if (!isHeld(index) && !blocks.containsKey(index)) {
                return index;
            }
        }
        return -1;
    }

    /** A block whose landed record says what it holds leaves memory; its record stays, now its only copy. */
    private void goCold(OutcomeBlock block) {
        for (int offset = block.nextKept(0); offset >= 0; offset = block.nextKeptAfter(offset)) {
            owners.release(block.owner(offset));
        }
        blockOutcomes -= block.count();
        blockBytes -= block.bytes();
        byAge.unlink(block);
        blocks.remove(block.index);
        cold.put(block.index, block.landed, block.count(), block.minTime(), block.maxTime());
    }

    /**
     * A cold block is dropped: its record is deleted, or written with its floor entries only.
     *
     * @return how many of its outcomes stay kept as floor entries
     */
    private int dropCold(long index) {
        cold.remove(index);
        int floorEntries = floor.entriesOfBlock(index);
        if (floorEntries > 0) {
            floorOnlyBlocks.put(index, floorEntries);
        }
        changes.changed(index);
        return floorEntries;
    }

    /** Holds the blocks up to the one of {@code throughSequence} until {@link #merge}. */
    public void hold(long throughSequence) {
        heldThroughBlock = Math.max(heldThroughBlock, OutcomeBlock.indexOf(Math.max(0, throughSequence)));
    }

    /** Held for a restore, or awaiting its cold part: neither written nor dropped. */
    public boolean isHeld(long blockIndex) {
        return blockIndex <= heldThroughBlock || awaitingCold.contains(blockIndex);
    }

    public boolean isHolding() {
        return heldThroughBlock >= 0;
    }

    /**
     * What a block's record must say now: the block, a block built from its floor entries
     * if only they are left, or null to delete its key.
     */
    public OutcomeBlock recordOf(long index) {
        OutcomeBlock block = blocks.get(index);
        if (block == null && floorOnlyBlocks.contains(index)) {
            block = new OutcomeBlock(index);
            floor.fill(block);
        }
        return block == null || block.count() == 0 ? null : block;
    }

    /** Every block that has a record: the topic was created again and must get them all. */
    public LongArrayList blocksWithRecords() {
        LongArrayList indexes = new LongArrayList(blocks.keySet());
        for (long index : floorOnlyBlocks.indexes()) {
            if (!blocks.containsKey(index)) {
                indexes.add(index);
            }
        }
        return indexes;
    }

    /**
     * Joins what the restore read to what this coordinator kept meanwhile (which is newer,
     * and wins), rebuilds the floor, and releases the held blocks ({@link RestoreMerge}).
     * A merge that throws keeps them held: their records may hold outcomes it did not
     * merge, which a write of the block would erase and a lookup must not answer "not
     * found"; the restore reads and merges again (merging a block twice changes nothing).
     */
    public void merge(RestoredBlocks restored, long nowMillis) {
        new RestoreMerge(this).merge(restored, expiredThrough(nowMillis));
        heldThroughBlock = -1;
    }

    /** Outcomes kept: in blocks, cold, and floor entries whose block is gone (a block awaiting its cold part counts twice in part). */
    public long size() {
        return blockOutcomes + floorOnlyBlocks.outcomes() + cold.outcomes();
    }

    /** Keys of the state topic's compacted view: one per block with a record. */
    public long keyCount() {
        return blocks.size() + floorOnlyBlocks.size() + cold.blocks();
    }

    /** Clients (owner roles, and the one without owner) with floor entries. */
    public int clients() {
        return floor.clients();
    }

    /** Heap bytes of the kept outcomes and their bookkeeping. */
    public long bytes() {
        return blockBytes + floor.bytes() + owners.bytes() + (long) BYTES_PER_PENDING * pending.size()
                + floorOnlyBlocks.bytes() + cold.bytes();
    }

    /**
     * Age of the oldest outcome in the window (floor entries past it not counted); 0 when
     * empty. At most the time-to-live: a cold block stays until its newest outcome expires,
     * but its older ones are no longer answered.
     */
    public long windowMillis(long nowMillis) {
        int min = cold.minTime();
        for (OutcomeBlock block = byAge.oldest(); block != null; block = block.newer) {
            if (block.count() > 0) {
                min = Math.min(min, block.minTime());
            }
        }
        return min == Integer.MAX_VALUE ? 0 : Math.min(timeToLiveMillis, Math.max(0, nowMillis - millisOf(min)));
    }

    public long memoryEvictions() {
        return memoryEvictions;
    }

    public long floorEvictions() {
        return floor.capped();
    }

    public long expirations() {
        return expirations;
    }

    public int floorSize() {
        return floor.size();
    }

    int blockCount() {
        return blocks.size();
    }

    int ownerCount() {
        return owners.size();
    }

    private int expiredThrough(long nowMillis) {
        long through = Math.floorDiv(nowMillis - timeToLiveMillis - TIME_EPOCH_MILLIS, 1000);
        return (int) Math.max(Integer.MIN_VALUE + 1L, Math.min(Integer.MAX_VALUE, through));
    }

    /**
     * No end in progress pins the block, and it is not held: dropped then, its floor entries
     * and its changes would meet the restored record of the same key (which lacks them).
     */
    private boolean droppable(OutcomeBlock block) {
        return block.pins == 0 && !isHeld(block.index);
    }

    /**
     * Keeps an outcome in its block (created if needed); reports the block changed unless it said so already.
     * Met again as the block says it (the log's replay, after the restore's merge took it from the record), it
     * writes nothing but makes the block the newest, as meeting it before the merge does: the drop order does
     * not depend on that race (and the replay ends before any new transaction is served).
     */
    private OutcomeBlock put(long sequence, Outcome outcome, int time, int owner) {
        long index = OutcomeBlock.indexOf(sequence);
        int offset = OutcomeBlock.offsetOf(sequence);
        OutcomeBlock block = blocks.get(index);
        if (block == null) {
            block = createBlock(index);
        } else if (block.has(offset) && block.outcome(offset) == outcome && block.owner(offset) == owner) {
            byAge.touch(block);
            return block;
        }
        long before = block.bytes();
        owners.retain(owner);
        int replaced = block.set(offset, outcome, time, owner);
        if (replaced >= 0) {
            owners.release(replaced);
        } else {
            blockOutcomes++;
        }
        blockBytes += block.bytes() - before;
        byAge.touch(block);
        changes.changed(index);
        return block;
    }

    private OutcomeBlock createBlock(long index) {
        OutcomeBlock block = new OutcomeBlock(index);
        blocks.put(index, block);
        byAge.linkNewest(block);
        RecordPosition coldRecord = cold.positionOf(index);
        if (coldRecord != null && awaitingCold.add(index)) {
            // Its record holds outcomes memory lacks: held until they are read and merged.
            coldReader.read(index, coldRecord);
        }
        if (floorOnlyBlocks.contains(index)) {
            // Its record still holds floor entries: the block's next record must too.
            floorOnlyBlocks.remove(index);
            floor.fill(block);
            for (int offset = block.nextKept(0); offset >= 0; offset = block.nextKeptAfter(offset)) {
                owners.retain(block.owner(offset));
            }
            blockOutcomes += block.count();
        }
        blockBytes += block.bytes();
        return block;
    }

    /**
     * Drops a block from memory; its key is deleted unless floor entries still need its record.
     *
     * @return how many of its outcomes stay kept as floor entries
     */
    private int drop(OutcomeBlock block) {
        for (int offset = block.nextKept(0); offset >= 0; offset = block.nextKeptAfter(offset)) {
            owners.release(block.owner(offset));
        }
        // Over every offset: a floor entry may outlive its block entry (expired from the block,
        // not yet from the floor, which expires each client in end order).
        int floorEntries = floor.entriesOfBlock(block.index);
        blockOutcomes -= block.count();
        blockBytes -= block.bytes();
        byAge.unlink(block);
        blocks.remove(block.index);
        if (floorEntries > 0) {
            floorOnlyBlocks.put(block.index, floorEntries);
        } else {
            changes.changed(block.index);
        }
        return floorEntries;
    }

    private void dropExpiredEntries(OutcomeBlock block, int through) {
        long before = block.bytes();
        for (int offset = block.nextKept(0); offset >= 0; offset = block.nextKeptAfter(offset)) {
            if (block.time(offset) <= through) {
                owners.release(block.clear(offset));
                blockOutcomes--;
            }
        }
        block.recomputeMinTime();
        blockBytes += block.bytes() - before;
    }

    void floorEntryRemoved(long sequence, long packed) {
        owners.release(ClientFloor.ownerOf(packed));
        long index = OutcomeBlock.indexOf(sequence);
        if (blocks.containsKey(index) || !floorOnlyBlocks.contains(index)) {
            return;
        }
        if (floorOnlyBlocks.removeOne(index)) {
            changes.changed(index);
        }
    }
}
