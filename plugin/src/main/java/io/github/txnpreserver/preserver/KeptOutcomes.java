package io.github.txnpreserver.preserver;

import io.github.txnpreserver.statetopic.ChunkRecord;
import it.unimi.dsi.fastutil.ints.Int2IntOpenHashMap;
import it.unimi.dsi.fastutil.ints.Int2ObjectOpenHashMap;
import it.unimi.dsi.fastutil.ints.IntArrayList;
import it.unimi.dsi.fastutil.longs.Long2IntOpenHashMap;
import it.unimi.dsi.fastutil.longs.Long2LongLinkedOpenHashMap;
import it.unimi.dsi.fastutil.longs.Long2LongMap;
import it.unimi.dsi.fastutil.longs.Long2ObjectOpenHashMap;
import it.unimi.dsi.fastutil.longs.LongArrayList;
import it.unimi.dsi.fastutil.objects.ObjectIterator;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Map;
import org.apache.pulsar.client.api.transaction.TxnID;

/**
 * The outcomes one coordinator keeps, and which of its state-topic blocks must be written.
 *
 * <h2>Policy</h2>
 * <ul>
 *   <li><b>By time</b>: every decided outcome is kept until its time-to-live
 *       ({@link #expire}).</li>
 *   <li><b>By memory</b>: the broker's memory bound ({@link OutcomeMemoryBudget}) drops
 *       whole blocks, least recently written first ({@link #evictOldest}): with sequence ids
 *       allocated consecutively, that is the oldest outcomes first.</li>
 *   <li><b>Per-client floor</b> ({@link ClientFloor}): each client's newest
 *       {@code perClient} decided outcomes survive the memory bound (not their
 *       time-to-live), so that a busy role cannot push a quiet role's recent outcomes out.</li>
 * </ul>
 *
 * <h2>Structure</h2>
 * Outcomes live in {@link OutcomeBlock}s of 256 consecutive sequences (2 bits, a 16-bit
 * time offset and, with several owners, a 16-bit owner id each), indexed by block and
 * linked in the order they were last written. A block is also the state topic's unit: a
 * change to a block marks it dirty with a new generation, and the writer sends each dirty
 * block whole ({@link #drainDirty}), so that the newest value of a block's key is its
 * state. A block dropped from memory is deleted from the topic (a tombstone), unless floor
 * entries still live in its record.
 *
 * <h2>The record of an ending transaction</h2>
 * Only decided outcomes enter ({@link #decide}, at the terminal step, once the finishing
 * entry is durable). Once decided, nothing changes the transaction's entry until it ends
 * ({@link #ended}): a retried terminal step writes nothing. An entry is consulted for
 * lookups only once the live store no longer has the transaction, after its terminal
 * entry. {@link #lastDrainGeneration} and {@link #generationIfDrained} tell the writer which
 * changes went out: the transaction log releases an ended transaction's entries only once
 * its change is durable.
 *
 * <p>Thread-safe: lookups come from Netty and Jetty threads, ends from store and client
 * threads. Every operation but restore's merge and expiry touches one block, so one monitor
 * costs less than the bookkeeping of a concurrent structure would.
 */
public final class KeptOutcomes {

    /** End times are stored as seconds since this instant (2020-01-01T00:00:00Z). */
    public static final long TIME_EPOCH_MILLIS = 1_577_836_800_000L;
    private static final int BYTES_PER_PENDING = 64;
    private static final int BYTES_PER_DIRTY = 32;
    private static final int BYTES_PER_FLOOR_ONLY_BLOCK = 24;

    private final long coordinatorId;
    private final long timeToLiveMillis;
    private final int perClient;
    private final Long2ObjectOpenHashMap<OutcomeBlock> blocks = new Long2ObjectOpenHashMap<>();
    private OutcomeBlock oldest;
    private OutcomeBlock newest;
    private final OwnerIds owners = new OwnerIds();
    private final ClientFloor floor;
    /** Blocks no longer in memory whose state-topic record still holds floor entries: how many. */
    private final Long2IntOpenHashMap floorOnlyBlocks = new Long2IntOpenHashMap();
    private final Long2ObjectOpenHashMap<Pending> pending = new Long2ObjectOpenHashMap<>();
    private final Long2LongLinkedOpenHashMap dirty = new Long2LongLinkedOpenHashMap();
    private long generation;
    private long lastDrainGeneration = -1;
    private long blockBytes;
    private long blockOutcomes;
    private volatile long bytes;
    private long memoryEvictions;
    private long expirations;
    private int droppedThroughTime = Integer.MIN_VALUE;
    private boolean restoring;
    private long restoreFrontierBlock = -1;

    /**
     * @param perClient the floor: each client's newest outcomes kept past the memory bound
     * @param floorCap at most this many floor entries in all
     */
    public KeptOutcomes(long coordinatorId, int perClient, int floorCap, long timeToLiveMillis) {
        if (perClient < 1 || floorCap < 1 || timeToLiveMillis < 1) {
            throw new IllegalArgumentException("limits must be positive");
        }
        this.coordinatorId = coordinatorId;
        this.perClient = perClient;
        this.floor = new ClientFloor(perClient, floorCap);
        this.timeToLiveMillis = timeToLiveMillis;
        floorOnlyBlocks.defaultReturnValue(0);
    }

    /** A block to send: its state as of {@code generation}, or null to delete its key. */
    public record BlockWrite(long blockIndex, long generation, ChunkRecord recordOrNull) {
    }

    /** An end in progress (decided, its terminal entry not durable yet): it holds its block in memory. */
    private static final class Pending {
        long generation;
    }

    /** The stored form of a wall-clock time: whole seconds since 2020, rounded up (never expires early). */
    public static int storedSecond(long millis) {
        long seconds = Math.floorDiv(millis - TIME_EPOCH_MILLIS + 999, 1000);
        return (int) Math.max(0, Math.min(Integer.MAX_VALUE, seconds));
    }

    public static long millisOf(int storedSecond) {
        return TIME_EPOCH_MILLIS + 1000L * storedSecond;
    }

    /** The block of 256 sequences a sequence id belongs to: also its state-topic key. */
    public static long blockOf(long sequence) {
        return OutcomeBlock.indexOf(sequence);
    }

    /**
     * The decided outcome of an end whose finishing entry is durable: written unless the
     * block already says it (a restored record), and admitted to its client's floor. Called
     * again (a retried terminal step), it writes nothing and returns the same generation.
     *
     * @return the generation whose durability makes the decided record durable
     */
    public synchronized long decide(TxnID txnId, Outcome outcome, String owner, long nowMillis) {
        long sequence = sequenceOf(txnId);
        Pending end = pending.get(sequence);
        if (end != null) {
            return end.generation;
        }
        long written = put(sequence, outcome == Outcome.COMMITTED, storedSecond(nowMillis), owners.idOf(owner));
        end = pin(sequence);
        end.generation = written;
        OutcomeBlock block = blocks.get(OutcomeBlock.indexOf(sequence));
        int offset = OutcomeBlock.offsetOf(sequence);
        if (floor.add(sequence, block.owner(offset), block.time(offset), outcome == Outcome.COMMITTED,
                this::floorEntryRemoved)) {
            owners.retain(block.owner(offset));
        }
        publish();
        return written;
    }

    /** The transaction's terminal entry is durable: its entry may now be dropped like any other. */
    public synchronized void ended(TxnID txnId) {
        long sequence = sequenceOf(txnId);
        if (pending.remove(sequence) != null) {
            OutcomeBlock block = blocks.get(OutcomeBlock.indexOf(sequence));
            if (block != null) {
                block.pins--;
            }
            publish();
        }
    }

    /** The generation of the newest change. */
    public synchronized long generation() {
        return generation;
    }

    /**
     * The generation of the newest change if every dirty block is one held back while
     * restoring (every other change was taken to send), else -1.
     */
    public synchronized long generationIfDrained() {
        if (restoring) {
            for (long index : dirty.keySet()) {
                if (index > restoreFrontierBlock) {
                    return -1;
                }
            }
            return generation;
        }
        return dirty.isEmpty() ? generation : -1;
    }

    /** The generation of the newest change when {@link #drainDirty} last ran: it took every change up to it but the held-back ones. */
    public synchronized long lastDrainGeneration() {
        return lastDrainGeneration;
    }

    /** Whether a change to this sequence's block is held back until the restore is done. */
    public synchronized boolean heldBack(long sequence) {
        return restoring && OutcomeBlock.indexOf(sequence) <= restoreFrontierBlock;
    }

    /**
     * The generation of the newest change, or -1 if a change to this sequence's block (with
     * {@code sequence} -1: to any block) is held back until the restore is done; one look
     * for what waits for a change to be durable.
     */
    public synchronized long generationUnlessHeldBack(long sequence) {
        boolean held = sequence < 0 ? restoring : heldBack(sequence);
        return held ? -1 : generation;
    }

    /** The kept outcome of a transaction, or null. */
    public synchronized KeptOutcome get(TxnID txnId) {
        if (txnId.getMostSigBits() != coordinatorId) {
            return null;
        }
        long sequence = txnId.getLeastSigBits();
        OutcomeBlock block = blocks.get(OutcomeBlock.indexOf(sequence));
        int offset = OutcomeBlock.offsetOf(sequence);
        if (block != null && block.has(offset)) {
            return new KeptOutcome(txnId, block.committed(offset) ? Outcome.COMMITTED : Outcome.ABORTED,
                    owners.nameOf(block.owner(offset)), millisOf(block.time(offset)));
        }
        long packed = floor.get(sequence, -1);
        if (packed == -1) {
            return null;
        }
        return new KeptOutcome(txnId, ClientFloor.committedOf(packed) ? Outcome.COMMITTED : Outcome.ABORTED,
                owners.nameOf(ClientFloor.ownerOf(packed)), millisOf(ClientFloor.timeOf(packed)));
    }

    /**
     * Drops the outcomes past their time-to-live, floor entries included. An end in
     * progress keeps its block.
     *
     * @return how many outcomes were dropped
     */
    public synchronized long expire(long nowMillis) {
        int through = expiredThrough(nowMillis);
        long before = size();
        floor.expire(through, this::floorEntryRemoved);
        for (OutcomeBlock block = oldest; block != null; ) {
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
        long dropped = before - size();
        expirations += dropped;
        publish();
        return dropped;
    }

    /**
     * Drops the least recently written block that no end in progress holds, for the memory
     * bound; its floor entries stay.
     *
     * @return the outcomes it dropped (floor entries stay), or -1 if there was no block to drop
     */
    public synchronized int evictOldest() {
        for (OutcomeBlock block = oldest; block != null; block = block.newer) {
            if (droppable(block)) {
                int outcomes = block.count();
                droppedThroughTime = Math.max(droppedThroughTime, block.maxTime());
                // Its floor entries stay kept: they are not evictions.
                int dropped = outcomes - drop(block);
                memoryEvictions += dropped;
                publish();
                return dropped;
            }
        }
        return -1;
    }

    /** The newest end time in the block {@link #evictOldest} would drop, or null if none. */
    public synchronized Long oldestEvictableMillis() {
        for (OutcomeBlock block = oldest; block != null; block = block.newer) {
            if (droppable(block)) {
                return millisOf(block.maxTime());
            }
        }
        return null;
    }

    /**
     * Takes the dirty blocks to send, each with its state now; while restoring, blocks that
     * may hold restored outcomes wait (their record would overwrite outcomes not read yet).
     */
    public synchronized List<BlockWrite> drainDirty() {
        List<BlockWrite> writes = new ArrayList<>(dirty.size());
        ObjectIterator<Long2LongMap.Entry> entries = dirty.long2LongEntrySet().fastIterator();
        while (entries.hasNext()) {
            Long2LongMap.Entry entry = entries.next();
            long index = entry.getLongKey();
            if (restoring && index <= restoreFrontierBlock) {
                continue;
            }
            writes.add(new BlockWrite(index, entry.getLongValue(), recordOf(index)));
            entries.remove();
        }
        lastDrainGeneration = generation;
        publish();
        return writes;
    }

    /** A block write failed: the block is sent again with the next flush. */
    public synchronized void failed(BlockWrite write) {
        if (!dirty.containsKey(write.blockIndex())) {
            dirty.put(write.blockIndex(), write.generation());
        }
    }

    /**
     * Marks every block held dirty, so that each is written again: the state topic was
     * created again and has lost its records.
     *
     * @return the number of blocks to write
     */
    public synchronized int markAllDirty() {
        LongArrayList indexes = new LongArrayList(blocks.keySet());
        for (long index : floorOnlyBlocks.keySet()) {
            if (!blocks.containsKey(index)) {
                indexes.add(index);
            }
        }
        for (int i = 0; i < indexes.size(); i++) {
            markDirty(indexes.getLong(i));
        }
        publish();
        return indexes.size();
    }

    public synchronized boolean hasDirty() {
        return !dirty.isEmpty();
    }

    /**
     * Restore has started: blocks up to the one of {@code frontierSequence} (the highest
     * sequence the transaction log has allocated) may have records not read yet.
     */
    public synchronized void beginRestore(long frontierSequence) {
        restoring = true;
        restoreFrontierBlock = Math.max(restoreFrontierBlock, OutcomeBlock.indexOf(Math.max(0, frontierSequence)));
    }

    public synchronized boolean isRestoring() {
        return restoring;
    }

    /**
     * Joins what restore read to what this coordinator wrote meanwhile (which is newer, and
     * wins), rebuilds the floor, and ends the restore. Outcomes of earlier record formats are
     * written into their blocks: the returned writes must be durable before those formats'
     * keys are deleted.
     *
     * @return the blocks written for migrated outcomes and their generations
     */
    public synchronized List<BlockWrite> mergeRestored(RestoredOutcomes restored, long nowMillis) {
        int through = expiredThrough(nowMillis);
        List<Long> migratedBlocks = restored.applyLegacyToBlocks(through);
        OutcomeBlock[] byAge = restored.blocks().values().toArray(new OutcomeBlock[0]);
        Arrays.sort(byAge, (a, b) -> Integer.compare(b.maxTime(), a.maxTime()));
        int[] remap = new int[restored.owners().highestId() + 1];
        Arrays.fill(remap, -1);
        for (OutcomeBlock staged : byAge) {
            if (!blocks.containsKey(staged.index) && floorOnlyBlocks.containsKey(staged.index)) {
                // Dropped by the memory bound while the restore read (held-back blocks are
                // not), so written by this coordinator, whose floor entries and last record
                // of it are newer than what was read: a restore that read again after a
                // failed read can read its earlier record. Adopting that copy lost the
                // floor entries it lacked.
                continue;
            }
            if (staged.count() == 0 || staged.maxTime() <= through) {
                if (!blocks.containsKey(staged.index)) {
                    markDirty(staged.index);
                }
                continue;
            }
            for (int offset = staged.nextKept(0); offset >= 0; offset = next(staged, offset)) {
                int local = staged.owner(offset);
                if (remap[local] < 0) {
                    remap[local] = owners.idOf(restored.owners().nameOf(local));
                }
            }
            OutcomeBlock live = blocks.get(staged.index);
            if (live == null) {
                staged.remapOwners(remap);
                adoptAsOldest(staged);
            } else {
                mergeInto(live, staged, remap);
            }
        }
        List<BlockWrite> migrated = new ArrayList<>();
        for (long index : migratedBlocks) {
            if (blocks.containsKey(index)) {
                migrated.add(new BlockWrite(index, markDirty(index), null));
            }
        }
        rebuildFloor();
        restoring = false;
        // The held-back blocks' changes get generations newer than anything a flush during
        // the restore vouched for (those flushes did not take them).
        for (long index : dirty.keySet().toLongArray()) {
            if (index <= restoreFrontierBlock) {
                markDirty(index);
            }
        }
        publish();
        return migrated;
    }

    /** Outcomes kept: in blocks, and floor entries whose block is gone. */
    public synchronized long size() {
        long floorOnly = 0;
        for (int count : floorOnlyBlocks.values()) {
            floorOnly += count;
        }
        return blockOutcomes + floorOnly;
    }

    /** Keys of the state topic's compacted view: one per block in memory or still holding floor entries. */
    public synchronized long keyCount() {
        return blocks.size() + floorOnlyBlocks.size();
    }

    /** Clients (owner roles, and the one without owner) with floor entries. */
    public synchronized int clients() {
        return floor.clients();
    }

    /** Heap bytes of the kept outcomes and their bookkeeping; read without locking. */
    public long bytes() {
        return bytes;
    }

    /** Age of the oldest outcome in the window (floor entries past it not counted); 0 when empty. */
    public synchronized long windowMillis(long nowMillis) {
        int min = Integer.MAX_VALUE;
        for (OutcomeBlock block = oldest; block != null; block = block.newer) {
            if (block.count() > 0) {
                min = Math.min(min, block.minTime());
            }
        }
        return min == Integer.MAX_VALUE ? 0 : Math.max(0, nowMillis - millisOf(min));
    }

    /** Outcomes dropped by the memory bound before their time-to-live, since creation. */
    public synchronized long memoryEvictions() {
        return memoryEvictions;
    }

    /** Floor entries dropped by the floor cap, since creation. */
    public synchronized long floorEvictions() {
        return floor.capped();
    }

    /** Outcomes dropped by age, since creation. */
    public synchronized long expirations() {
        return expirations;
    }

    /** The newest end time of an outcome the memory bound dropped, or null if none was. */
    public synchronized Long droppedThroughMillis() {
        return droppedThroughTime == Integer.MIN_VALUE ? null : millisOf(droppedThroughTime);
    }

    public synchronized int floorSize() {
        return floor.size();
    }

    public long coordinatorId() {
        return coordinatorId;
    }

    public synchronized void clear() {
        blocks.clear();
        oldest = null;
        newest = null;
        owners.clear();
        floor.clear();
        floorOnlyBlocks.clear();
        pending.clear();
        dirty.clear();
        blockBytes = 0;
        blockOutcomes = 0;
        publish();
    }

    private long sequenceOf(TxnID txnId) {
        if (txnId.getMostSigBits() != coordinatorId) {
            throw new IllegalArgumentException("Transaction " + txnId + " does not belong to coordinator "
                    + coordinatorId);
        }
        return txnId.getLeastSigBits();
    }

    private int expiredThrough(long nowMillis) {
        long through = Math.floorDiv(nowMillis - timeToLiveMillis - TIME_EPOCH_MILLIS, 1000);
        return (int) Math.max(Integer.MIN_VALUE + 1L, Math.min(Integer.MAX_VALUE, through));
    }

    /**
     * No end in progress holds the block, and it is not held back while restoring: dropped
     * then, its floor entries and its changes would meet the restored record of the same key
     * (which lacks them) in the merge.
     */
    private boolean droppable(OutcomeBlock block) {
        return block.pins == 0 && !(restoring && block.index <= restoreFrontierBlock);
    }

    private Pending pin(long sequence) {
        Pending end = new Pending();
        pending.put(sequence, end);
        blocks.get(OutcomeBlock.indexOf(sequence)).pins++;
        return end;
    }

    /** Keeps an outcome in its block (created if needed) and marks the block dirty. */
    private long put(long sequence, boolean committed, int time, int owner) {
        long index = OutcomeBlock.indexOf(sequence);
        int offset = OutcomeBlock.offsetOf(sequence);
        OutcomeBlock block = blocks.get(index);
        if (block == null) {
            block = createBlock(index);
        } else if (block.has(offset) && block.committed(offset) == committed && block.owner(offset) == owner) {
            touch(block);
            return block.lastGeneration;
        }
        long before = block.bytes();
        owners.retain(owner);
        int replaced = block.set(offset, committed, time, owner);
        if (replaced >= 0) {
            owners.release(replaced);
        } else {
            blockOutcomes++;
        }
        blockBytes += block.bytes() - before;
        touch(block);
        return markDirty(index);
    }

    private long markDirty(long index) {
        long written = ++generation;
        dirty.put(index, written);
        OutcomeBlock block = blocks.get(index);
        if (block != null) {
            block.lastGeneration = written;
        }
        return written;
    }

    private OutcomeBlock createBlock(long index) {
        OutcomeBlock block = new OutcomeBlock(index);
        blocks.put(index, block);
        linkNewest(block);
        if (floorOnlyBlocks.containsKey(index)) {
            // Its record still holds floor entries: the block's next record must too.
            floorOnlyBlocks.remove(index);
            fillFromFloor(block);
            for (int offset = block.nextKept(0); offset >= 0; offset = next(block, offset)) {
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
        for (int offset = block.nextKept(0); offset >= 0; offset = next(block, offset)) {
            owners.release(block.owner(offset));
        }
        // Over every offset: a floor entry may outlive its block entry (expired from the block,
        // not yet from the floor, which expires each client in end order).
        int floorEntries = floorEntriesOf(block.index);
        blockOutcomes -= block.count();
        blockBytes -= block.bytes();
        unlink(block);
        blocks.remove(block.index);
        if (floorEntries > 0) {
            floorOnlyBlocks.put(block.index, floorEntries);
        } else {
            markDirty(block.index);
        }
        return floorEntries;
    }

    private void dropExpiredEntries(OutcomeBlock block, int through) {
        for (int offset = block.nextKept(0); offset >= 0; offset = next(block, offset)) {
            if (block.time(offset) <= through) {
                owners.release(block.clear(offset));
                blockOutcomes--;
            }
        }
        block.recomputeMinTime();
    }

    private void floorEntryRemoved(long sequence, long packed) {
        owners.release(ClientFloor.ownerOf(packed));
        long index = OutcomeBlock.indexOf(sequence);
        if (blocks.containsKey(index) || !floorOnlyBlocks.containsKey(index)) {
            return;
        }
        int left = floorOnlyBlocks.get(index) - 1;
        if (left > 0) {
            floorOnlyBlocks.put(index, left);
        } else {
            floorOnlyBlocks.remove(index);
            markDirty(index);
        }
    }

    /** The block's record now: its outcomes, or those of its floor entries if it is gone, or null. */
    private ChunkRecord recordOf(long index) {
        OutcomeBlock block = blocks.get(index);
        if (block == null && floorOnlyBlocks.containsKey(index)) {
            block = new OutcomeBlock(index);
            fillFromFloor(block);
        }
        if (block == null || block.count() == 0) {
            return null;
        }
        return encode(block);
    }

    /** Puts the floor entries of a block's sequences into it. */
    private void fillFromFloor(OutcomeBlock block) {
        long first = block.firstSequence();
        for (int offset = 0; offset < OutcomeBlock.SIZE; offset++) {
            long packed = floor.get(first + offset, -1);
            if (packed != -1) {
                block.set(offset, ClientFloor.committedOf(packed), ClientFloor.timeOf(packed),
                        ClientFloor.ownerOf(packed));
            }
        }
    }

    /** Floor entries among a block's 256 sequences, whether or not the block still has them. */
    private int floorEntriesOf(long index) {
        int entries = 0;
        long first = index << OutcomeBlock.SHIFT;
        for (int offset = 0; offset < OutcomeBlock.SIZE; offset++) {
            if (floor.contains(first + offset)) {
                entries++;
            }
        }
        return entries;
    }

    private ChunkRecord encode(OutcomeBlock block) {
        long[] kept = new long[OutcomeBlock.SIZE / 64];
        long[] committed = new long[OutcomeBlock.SIZE / 64];
        int[] times = new int[block.count()];
        int[] refs = new int[block.count()];
        List<String> names = new ArrayList<>(1);
        Int2IntOpenHashMap refOf = new Int2IntOpenHashMap(2);
        boolean uniform = true;
        int first = -1;
        int entry = 0;
        for (int offset = block.nextKept(0); offset >= 0; offset = next(block, offset)) {
            kept[offset >>> 6] |= 1L << offset;
            if (block.committed(offset)) {
                committed[offset >>> 6] |= 1L << offset;
            }
            times[entry] = block.time(offset);
            int owner = block.owner(offset);
            int ref;
            if (owner == OwnerIds.NO_OWNER) {
                ref = 0;
            } else if (refOf.containsKey(owner)) {
                ref = refOf.get(owner);
            } else {
                names.add(owners.nameOf(owner));
                ref = names.size();
                refOf.put(owner, ref);
            }
            refs[entry] = ref;
            if (entry == 0) {
                first = ref;
            } else if (ref != first) {
                uniform = false;
            }
            entry++;
        }
        return new ChunkRecord(coordinatorId, block.index, kept, committed, times, names, uniform ? null : refs,
                uniform ? first : 0);
    }

    private void mergeInto(OutcomeBlock live, OutcomeBlock staged, int[] remap) {
        long before = live.bytes();
        for (int offset = staged.nextKept(0); offset >= 0; offset = next(staged, offset)) {
            if (!live.has(offset)) {
                int owner = remap[staged.owner(offset)];
                owners.retain(owner);
                live.set(offset, staged.committed(offset), staged.time(offset), owner);
                blockOutcomes++;
            }
        }
        blockBytes += live.bytes() - before;
        markDirty(live.index);
    }

    private void adoptAsOldest(OutcomeBlock staged) {
        for (int offset = staged.nextKept(0); offset >= 0; offset = next(staged, offset)) {
            owners.retain(staged.owner(offset));
        }
        blocks.put(staged.index, staged);
        staged.lastGeneration = 0;
        staged.newer = oldest;
        if (oldest != null) {
            oldest.older = staged;
        } else {
            newest = staged;
        }
        oldest = staged;
        blockOutcomes += staged.count();
        blockBytes += staged.bytes();
    }

    /** Each client's newest decided outcomes, from every block, newest blocks first. */
    private void rebuildFloor() {
        Int2ObjectOpenHashMap<Newest> newestByOwner = new Int2ObjectOpenHashMap<>();
        // The old entries' owner references are released only once the new floor holds its
        // own: an owner whose only outcomes are floor entries would otherwise reach zero
        // references in between, and its id be freed (its name lost) or handed to another owner.
        IntArrayList formerOwners = new IntArrayList(floor.size());
        // Floor entries of blocks dropped meanwhile compete with the restored ones.
        floor.forEach((sequence, packed) -> {
            formerOwners.add(ClientFloor.ownerOf(packed));
            if (!blocks.containsKey(OutcomeBlock.indexOf(sequence))) {
                newestByOwner.computeIfAbsent(ClientFloor.ownerOf(packed), ignored -> new Newest(perClient))
                        .offer(ClientFloor.timeOf(packed), sequence, ClientFloor.committedOf(packed));
            }
        });
        long[] formerlyFloorOnly = floorOnlyBlocks.keySet().toLongArray();
        floor.clear();
        floorOnlyBlocks.clear();
        for (OutcomeBlock block = newest; block != null; block = block.older) {
            long first = block.firstSequence();
            for (int offset = block.nextKept(0); offset >= 0; offset = next(block, offset)) {
                long sequence = first + offset;
                int owner = block.owner(offset);
                Newest top = newestByOwner.get(owner);
                if (top == null) {
                    top = new Newest(perClient);
                    newestByOwner.put(owner, top);
                }
                top.offer(block.time(offset), sequence, block.committed(offset));
            }
        }
        // Least recently ending clients first, so that the floor cap takes from them.
        List<Map.Entry<Integer, Newest>> clients = new ArrayList<>(newestByOwner.int2ObjectEntrySet());
        clients.sort((a, b) -> Integer.compare(a.getValue().newestTime(), b.getValue().newestTime()));
        for (Map.Entry<Integer, Newest> client : clients) {
            int owner = client.getKey();
            client.getValue().inOrder((time, sequence, committed) -> {
                if (floor.add(sequence, owner, time, committed, this::floorEntryRemoved)) {
                    owners.retain(owner);
                }
            });
        }
        for (int i = 0; i < formerOwners.size(); i++) {
            owners.release(formerOwners.getInt(i));
        }
        for (long index : formerlyFloorOnly) {
            if (blocks.containsKey(index)) {
                continue;
            }
            int entries = floorEntriesOf(index);
            if (entries > 0) {
                floorOnlyBlocks.put(index, entries);
            } else {
                markDirty(index);
            }
        }
    }

    private void touch(OutcomeBlock block) {
        if (block != newest) {
            unlink(block);
            linkNewest(block);
        }
    }

    private void linkNewest(OutcomeBlock block) {
        block.older = newest;
        block.newer = null;
        if (newest != null) {
            newest.newer = block;
        } else {
            oldest = block;
        }
        newest = block;
    }

    private void unlink(OutcomeBlock block) {
        if (block.older != null) {
            block.older.newer = block.newer;
        } else {
            oldest = block.newer;
        }
        if (block.newer != null) {
            block.newer.older = block.older;
        } else {
            newest = block.older;
        }
        block.older = null;
        block.newer = null;
    }

    private static int next(OutcomeBlock block, int offset) {
        return offset == OutcomeBlock.MASK ? -1 : block.nextKept(offset + 1);
    }

    private void publish() {
        bytes = blockBytes + floor.bytes() + owners.bytes() + (long) BYTES_PER_PENDING * pending.size()
                + (long) BYTES_PER_DIRTY * dirty.size() + (long) BYTES_PER_FLOOR_ONLY_BLOCK * floorOnlyBlocks.size();
    }

    /** One client's newest outcomes: a min-heap of (end time, sequence) of bounded size. */
    private static final class Newest {
        private final int limit;
        private int[] times = new int[4];
        private long[] sequences = new long[4];
        private boolean[] committed = new boolean[4];
        private int size;
        private int newestTime = Integer.MIN_VALUE;

        Newest(int limit) {
            this.limit = limit;
        }

        void offer(int time, long sequence, boolean isCommitted) {
            newestTime = Math.max(newestTime, time);
            if (size == limit) {
                if (compare(time, sequence, 0) <= 0) {
                    return;
                }
                times[0] = time;
                sequences[0] = sequence;
                committed[0] = isCommitted;
                siftDown(0);
                return;
            }
            if (size == times.length) {
                int grown = Math.min(limit, times.length * 2);
                times = Arrays.copyOf(times, grown);
                sequences = Arrays.copyOf(sequences, grown);
                committed = Arrays.copyOf(committed, grown);
            }
            int at = size++;
            times[at] = time;
            sequences[at] = sequence;
            committed[at] = isCommitted;
            while (at > 0 && compare(times[at], sequences[at], (at - 1) / 2) < 0) {
                swap(at, (at - 1) / 2);
                at = (at - 1) / 2;
            }
        }

        int newestTime() {
            return newestTime;
        }

        void inOrder(Visitor visitor) {
            Integer[] order = new Integer[size];
            for (int i = 0; i < size; i++) {
                order[i] = i;
            }
            Arrays.sort(order, (a, b) -> {
                int byTime = Integer.compare(times[a], times[b]);
                return byTime != 0 ? byTime : Long.compare(sequences[a], sequences[b]);
            });
            for (int i : order) {
                visitor.visit(times[i], sequences[i], committed[i]);
            }
        }

        private int compare(int time, long sequence, int at) {
            int byTime = Integer.compare(time, times[at]);
            return byTime != 0 ? byTime : Long.compare(sequence, sequences[at]);
        }

        private void siftDown(int at) {
            while (true) {
                int smallest = at;
                int left = 2 * at + 1;
                int right = left + 1;
                if (left < size && compare(times[left], sequences[left], smallest) < 0) {
                    smallest = left;
                }
                if (right < size && compare(times[right], sequences[right], smallest) < 0) {
                    smallest = right;
                }
                if (smallest == at) {
                    return;
                }
                swap(at, smallest);
                at = smallest;
            }
        }

        private void swap(int a, int b) {
            int time = times[a];
            times[a] = times[b];
            times[b] = time;
            long sequence = sequences[a];
            sequences[a] = sequences[b];
            sequences[b] = sequence;
            boolean isCommitted = committed[a];
            committed[a] = committed[b];
            committed[b] = isCommitted;
        }

        interface Visitor {
            void visit(int time, long sequence, boolean committed);
        }
    }

    /** For tests and figures: blocks in memory. */
    synchronized int blockCount() {
        return blocks.size();
    }

    /** For tests and figures: the owner dictionary's size. */
    synchronized int ownerCount() {
        return owners.size();
    }
}
