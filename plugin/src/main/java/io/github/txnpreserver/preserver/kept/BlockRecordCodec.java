package io.github.txnpreserver.preserver.kept;

import com.google.protobuf.InvalidProtocolBufferException;
import io.github.txnpreserver.statetopic.MalformedRecordException;
import io.github.txnpreserver.statetopic.proto.OutcomeBlockRecord;
import it.unimi.dsi.fastutil.ints.Int2IntOpenHashMap;
import java.util.function.IntFunction;

/**
 * The state topic's record format: one {@link OutcomeBlockRecord} per block of 256
 * consecutive sequence ids, under the block key {@code c<blockIndex>} (the index in decimal,
 * no sign, no leading zero), holding every outcome the coordinator keeps in that block.
 *
 * <p>{@link #decode} accepts only what this coordinator could have written: a canonical key
 * whose index its sequence generator has reached, a record of that same block and
 * coordinator, of this format version, with consistent bitmaps, times and owner references.
 * Anything else throws {@link MalformedRecordException}: the restore skips and counts it.
 */
public final class BlockRecordCodec {

    /** The block format this version writes and the only one it reads. */
    public static final int FORMAT_VERSION = 2;
    static final int WORDS = OutcomeBlock.SIZE / 64;
    /** The highest block index whose sequences all fit a non-negative long. */
    public static final long MAX_BLOCK_INDEX = Long.MAX_VALUE >>> OutcomeBlock.SHIFT;
    /**
     * The highest sequence a new log takes a block for as its own, 2^48 - 1 (at 10 000
     * transactions a second, 900 years of them): a block past it is someone else's record, and
     * a log moved past it would soon run out of sequences.
     */
    public static final long MAX_PLAUSIBLE_SEQUENCE = (1L << 48) - 1;
    private static final char PREFIX = 'c';

    private BlockRecordCodec() {
    }

    /** The block of a sequence id. */
    public static long blockOf(long sequence) {
        return OutcomeBlock.indexOf(sequence);
    }

    public static String key(long blockIndex) {
        return PREFIX + Long.toString(blockIndex);
    }

    /** The block index of a canonical block key, or a {@link MalformedRecordException}. */
    public static long blockIndexOf(String key) throws MalformedRecordException {
        if (key == null || key.isEmpty()) {
            throw new MalformedRecordException("record has no key");
        }
        long index;
        try {
            index = key.charAt(0) == PREFIX ? Long.parseLong(key, 1, key.length(), 10) : -1;
        } catch (NumberFormatException e) {
            index = -1;
        }
        if (index < 0 || index > MAX_BLOCK_INDEX || !key.equals(key(index))) {
            throw new MalformedRecordException("key '" + key + "' is not a block key c<0.." + MAX_BLOCK_INDEX + ">");
        }
        return index;
    }

    /**
     * Decodes and checks a block record.
     *
     * @param maxBlockIndex the highest block this coordinator has allocated sequences in
     */
    public static OutcomeBlockRecord decode(String key, byte[] value, long coordinatorId, long maxBlockIndex)
            throws MalformedRecordException {
        long index = blockIndexOf(key);
        if (index > maxBlockIndex) {
            throw new MalformedRecordException("block under key '" + key + "' is past the sequences coordinator "
                    + coordinatorId + " has allocated (block " + maxBlockIndex + ")");
        }
        OutcomeBlockRecord record;
        try {
            record = OutcomeBlockRecord.parseFrom(value);
        } catch (InvalidProtocolBufferException e) {
            throw new MalformedRecordException("value under key '" + key + "' is not an OutcomeBlockRecord", e);
        }
        if (record.getFormatVersion() != FORMAT_VERSION) {
            throw new MalformedRecordException("block under key '" + key + "' has format version "
                    + record.getFormatVersion() + "; this plugin reads version " + FORMAT_VERSION);
        }
        if (record.getBlockIndex() != index || record.getCoordinatorId() != coordinatorId) {
            throw new MalformedRecordException("block under key '" + key + "' is block " + record.getBlockIndex()
                    + " of coordinator " + record.getCoordinatorId() + ", not block " + index + " of coordinator "
                    + coordinatorId);
        }
        if (record.getKeptCount() != WORDS || record.getCommittedCount() != WORDS
                || (record.getTimedOutCount() != 0 && record.getTimedOutCount() != WORDS)) {
            throw new MalformedRecordException("block under key '" + key + "' does not have " + WORDS + " bitmap words");
        }
        for (int i = 0; i < record.getTimedOutCount(); i++) {
            long timedOut = record.getTimedOut(i);
            if ((timedOut & ~record.getKept(i)) != 0 || (timedOut & record.getCommitted(i)) != 0) {
                throw new MalformedRecordException("block under key '" + key
                        + "' marks an offset timed out that is not a kept abort");
            }
        }
        int size = 0;
        for (int i = 0; i < WORDS; i++) {
            size += Long.bitCount(record.getKept(i));
        }
        if (record.getEndSecondDeltasCount() != size
                || (record.getOwnerRefsCount() != 0 && record.getOwnerRefsCount() != size)) {
            throw new MalformedRecordException("block under key '" + key + "' has " + size + " outcomes but "
                    + record.getEndSecondDeltasCount() + " end times and " + record.getOwnerRefsCount() + " owners");
        }
        long time = 0;
        for (int i = 0; i < size; i++) {
            time += record.getEndSecondDeltas(i);
            if (time < 0 || time > Integer.MAX_VALUE) {
                throw new MalformedRecordException("block under key '" + key + "' has an end time out of range");
            }
        }
        int owners = record.getOwnersCount();
        for (int i = 0; i < record.getOwnerRefsCount(); i++) {
            checkOwnerRef(key, Integer.toUnsignedLong(record.getOwnerRefs(i)), owners);
        }
        if (record.getOwnerRefsCount() == 0 && size > 0) {
            checkOwnerRef(key, Integer.toUnsignedLong(record.getUniformOwnerRef()), owners);
        }
        return record;
    }

    private static void checkOwnerRef(String key, long ref, int owners) throws MalformedRecordException {
        if (ref > owners) {
            throw new MalformedRecordException("block under key '" + key + "' names owner " + ref + " of " + owners);
        }
    }

    /** The block a validated record holds, its owners named in {@code owners} (ids created as needed). */
    public static OutcomeBlock toBlock(OutcomeBlockRecord record, OwnerIds owners) {
        OutcomeBlock block = new OutcomeBlock(record.getBlockIndex());
        int[] ids = new int[record.getOwnersCount() + 1];
        for (int i = 0; i < record.getOwnersCount(); i++) {
            ids[i + 1] = owners.idOf(record.getOwners(i));
        }
        int entry = 0;
        long time = 0;
        for (int word = 0; word < WORDS; word++) {
            long kept = record.getKept(word);
            while (kept != 0) {
                int bit = Long.numberOfTrailingZeros(kept);
                kept &= kept - 1;
                int offset = (word << 6) + bit;
                Outcome outcome = (record.getCommitted(word) & (1L << bit)) != 0 ? Outcome.COMMITTED
                        : record.getTimedOutCount() != 0 && (record.getTimedOut(word) & (1L << bit)) != 0
                        ? Outcome.TIMED_OUT : Outcome.ABORTED;
                int ref = record.getOwnerRefsCount() == 0 ? record.getUniformOwnerRef() : record.getOwnerRefs(entry);
                time += record.getEndSecondDeltas(entry);
                block.set(offset, outcome, (int) time, ids[ref]);
                entry++;
            }
        }
        return block;
    }

    /** The record of a block (see {@link OutcomeIndex#recordOf}), its owners named through {@code ownerName}. */
    public static byte[] encode(long coordinatorId, OutcomeBlock block, IntFunction<String> ownerName) {
        OutcomeBlockRecord.Builder record = OutcomeBlockRecord.newBuilder()
                .setFormatVersion(FORMAT_VERSION)
                .setCoordinatorId(coordinatorId)
                .setBlockIndex(block.index);
        long[] kept = new long[WORDS];
        long[] committed = new long[WORDS];
        long[] timedOut = new long[WORDS];
        boolean anyTimedOut = false;
        int[] refs = new int[block.count()];
        Int2IntOpenHashMap refOf = new Int2IntOpenHashMap(2);
        boolean uniform = true;
        int entry = 0;
        long previousTime = 0;
        for (int offset = block.nextKept(0); offset >= 0;
             offset = offset == OutcomeBlock.MASK ? -1 : block.nextKept(offset + 1)) {
            kept[offset >>> 6] |= 1L << offset;
            Outcome outcome = block.outcome(offset);
            if (outcome == Outcome.COMMITTED) {
                committed[offset >>> 6] |= 1L << offset;
            } else if (outcome == Outcome.TIMED_OUT) {
                timedOut[offset >>> 6] |= 1L << offset;
                anyTimedOut = true;
            }
            record.addEndSecondDeltas(block.time(offset) - previousTime);
            previousTime = block.time(offset);
            int owner = block.owner(offset);
            int ref = 0;
            if (owner != OwnerIds.NO_OWNER) {
                ref = refOf.getOrDefault(owner, 0);
                if (ref == 0) {
                    record.addOwners(ownerName.apply(owner));
                    ref = record.getOwnersCount();
                    refOf.put(owner, ref);
                }
            }
            refs[entry] = ref;
            uniform &= ref == refs[0];
            entry++;
        }
        for (int i = 0; i < WORDS; i++) {
            record.addKept(kept[i]).addCommitted(committed[i]);
            if (anyTimedOut) {
                record.addTimedOut(timedOut[i]);
            }
        }
        if (uniform) {
            record.setUniformOwnerRef(entry == 0 ? 0 : refs[0]);
        } else {
            for (int ref : refs) {
                record.addOwnerRefs(ref);
            }
        }
        return record.build().toByteArray();
    }
}
