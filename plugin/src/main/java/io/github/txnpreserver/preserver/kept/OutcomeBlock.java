package io.github.txnpreserver.preserver.kept;

import io.github.txnpreserver.statetopic.RecordPosition;
import java.util.Arrays;

/**
 * The outcomes of 256 consecutive transaction sequence ids of one coordinator, in a few bits
 * and bytes each: the unit of memory, of eviction and of the state topic (one key per block).
 *
 * <h2>Layout</h2>
 * <ul>
 *   <li>Three bits per sequence: kept, committed, and aborted on its timeout (neither: aborted
 *       by its client or an admin).</li>
 *   <li>End time, in seconds: a 16-bit offset from the block's first end time while every
 *       end fits within 18 hours of it (a coordinator allocates sequence ids consecutively,
 *       so a block's transactions end close together at any rate that matters for memory);
 *       a 32-bit column once one does not (a slow coordinator, or a transaction that ended
 *       hours after its neighbours).</li>
 *   <li>Owner, as an id of the coordinator's {@link OwnerIds}: one id for the whole block
 *       while all its outcomes share it (no authentication, or one role); a 16-bit column
 *       once they differ; a 32-bit one past 65 535 owners.</li>
 * </ul>
 * An end time earlier than the block's first moves the offsets up (or widens the column if
 * they no longer fit): times are kept exactly, to the second (rounded up).
 *
 * <p>Confined to its coordinator's thread, as {@link OutcomeIndex} is.
 */
public final class OutcomeBlock {

    static final int SHIFT = 8;
    static final int SIZE = 1 << SHIFT;
    static final int MASK = SIZE - 1;
    private static final int WORDS = SIZE / 64;
    private static final int NO_OWNER_YET = -1;
    /** Object header, fields and the index entry: measured with JOL-style accounting, rounded up; a position 40 more. */
    private static final int FIXED_BYTES = 152;
    private static final int ARRAY_HEADER = 16;

    final long index;
    /** {@code [0, WORDS)}: kept; {@code [WORDS, 2 WORDS)}: committed; {@code [2 WORDS, 3 WORDS)}: timed out. */
    private final long[] bits = new long[3 * WORDS];
    private int count;

    private int timeBase;
    private char[] timeOffsets;
    private int[] times;
    private int minTime = Integer.MAX_VALUE;
    private int maxTime = Integer.MIN_VALUE;

    private int uniformOwner = NO_OWNER_YET;
    private char[] ownerChars;
    private int[] ownerInts;

    /** Age order of {@link OutcomeIndex}: touched last is newest. */
    OutcomeBlock older;
    OutcomeBlock newer;
    /** Transactions of this block whose end is in progress: the block may not be dropped. */
    int pins;
    /**
     * Where the newest record of this block that landed is, or null if none did (since the
     * topic was created again): a block may go cold only once what it says is there.
     */
    RecordPosition landed;

    OutcomeBlock(long index) {
        this.index = index;
    }

    public static long indexOf(long sequence) {
        return sequence >>> SHIFT;
    }

    /** The last sequence of block {@code index}. */
    public static long lastSequenceOf(long index) {
        return (index << SHIFT) | (SIZE - 1);
    }

    public static int offsetOf(long sequence) {
        return (int) (sequence & MASK);
    }

    long firstSequence() {
        return index << SHIFT;
    }

    public boolean has(int offset) {
        return (bits[offset >>> 6] & (1L << offset)) != 0;
    }

    /** The outcome kept at an offset that {@link #has} one. */
    public Outcome outcome(int offset) {
        if ((bits[WORDS + (offset >>> 6)] & (1L << offset)) != 0) {
            return Outcome.COMMITTED;
        }
        return (bits[2 * WORDS + (offset >>> 6)] & (1L << offset)) != 0 ? Outcome.TIMED_OUT : Outcome.ABORTED;
    }

    public int time(int offset) {
        return times != null ? times[offset] : timeBase + timeOffsets[offset];
    }

    public int owner(int offset) {
        if (ownerInts != null) {
            return ownerInts[offset];
        }
        return ownerChars != null ? ownerChars[offset] : uniformOwner;
    }

    int count() {
        return count;
    }

    int minTime() {
        return minTime;
    }

    int maxTime() {
        return maxTime;
    }

    /** The next kept offset at or after {@code from}, or -1. */
    int nextKept(int from) {
        for (int word = from >>> 6; word < WORDS; word++) {
            long remaining = bits[word] & (word == from >>> 6 ? -1L << from : -1L);
            if (remaining != 0) {
                return (word << 6) + Long.numberOfTrailingZeros(remaining);
            }
        }
        return -1;
    }

    /** The first offset after {@code offset} that keeps an outcome, or -1. */
    int nextKeptAfter(int offset) {
        return offset == MASK ? -1 : nextKept(offset + 1);
    }

    /** Keeps an outcome; returns the owner id it replaced, or -1 if the offset was empty. */
    int set(int offset, Outcome outcome, int time, int owner) {
        int replaced = has(offset) ? owner(offset) : -1;
        if (replaced < 0) {
            bits[offset >>> 6] |= 1L << offset;
            count++;
        }
        setBit(WORDS, offset, outcome == Outcome.COMMITTED);
        setBit(2 * WORDS, offset, outcome == Outcome.TIMED_OUT);
        setTime(offset, time);
        setOwner(offset, owner);
        return replaced;
    }

    /** Drops an outcome; returns its owner id, or -1 if the offset was empty. */
    int clear(int offset) {
        if (!has(offset)) {
            return -1;
        }
        int owner = owner(offset);
        bits[offset >>> 6] &= ~(1L << offset);
        setBit(WORDS, offset, false);
        setBit(2 * WORDS, offset, false);
        count--;
        return owner;
    }

    /** Recomputes the oldest end time after outcomes were dropped. */
    void recomputeMinTime() {
        int min = Integer.MAX_VALUE;
        for (int offset = nextKept(0); offset >= 0; offset = offset == MASK ? -1 : nextKept(offset + 1)) {
            min = Math.min(min, time(offset));
        }
        minTime = min;
    }

    /** Heap bytes of this block, its columns and its index entry. */
    long bytes() {
        long bytes = FIXED_BYTES + ARRAY_HEADER + 8L * bits.length;
        if (times != null) {
            bytes += ARRAY_HEADER + 4L * SIZE;
        } else if (timeOffsets != null) {
            bytes += ARRAY_HEADER + 2L * SIZE;
        }
        if (ownerInts != null) {
            bytes += ARRAY_HEADER + 4L * SIZE;
        } else if (ownerChars != null) {
            bytes += ARRAY_HEADER + 2L * SIZE;
        }
        return bytes;
    }

    /** Re-maps owner ids (a block restored with another dictionary joins the coordinator's). */
    void remapOwners(int[] newIds) {
        if (ownerInts != null) {
            for (int i = 0; i < SIZE; i++) {
                if (has(i)) {
                    ownerInts[i] = newIds[ownerInts[i]];
                }
            }
        } else if (ownerChars != null) {
            int[] remapped = null;
            for (int i = 0; i < SIZE; i++) {
                if (has(i) && newIds[ownerChars[i]] > Character.MAX_VALUE) {
                    remapped = new int[SIZE];
                    break;
                }
            }
            if (remapped != null) {
                for (int i = 0; i < SIZE; i++) {
                    remapped[i] = has(i) ? newIds[ownerChars[i]] : 0;
                }
                ownerInts = remapped;
                ownerChars = null;
            } else {
                for (int i = 0; i < SIZE; i++) {
                    if (has(i)) {
                        ownerChars[i] = (char) newIds[ownerChars[i]];
                    }
                }
            }
        } else if (uniformOwner >= 0) {
            uniformOwner = newIds[uniformOwner];
        }
    }

    private void setBit(int column, int offset, boolean on) {
        if (on) {
            bits[column + (offset >>> 6)] |= 1L << offset;
        } else {
            bits[column + (offset >>> 6)] &= ~(1L << offset);
        }
    }

    private void setTime(int offset, int time) {
        if (count == 1 && times == null && timeOffsets == null) {
            timeBase = time;
            timeOffsets = new char[SIZE];
        }
        if (times == null && time < timeBase) {
            rebase(time);
        }
        if (times == null) {
            long delta = (long) time - timeBase;
            if (delta <= Character.MAX_VALUE) {
                timeOffsets[offset] = (char) delta;
            } else {
                widenTimes();
                times[offset] = time;
            }
        } else {
            times[offset] = time;
        }
        minTime = Math.min(minTime, time);
        maxTime = Math.max(maxTime, time);
    }

    /** An end earlier than the block's first: offsets move up, or the column widens if they no longer fit. */
    private void rebase(int earlierBase) {
        int shift = timeBase - earlierBase;
        if ((long) Math.max(maxTime, timeBase) - earlierBase > Character.MAX_VALUE) {
            widenTimes();
            return;
        }
        for (int i = 0; i < SIZE; i++) {
            timeOffsets[i] = (char) (timeOffsets[i] + shift);
        }
        timeBase = earlierBase;
    }

    private void widenTimes() {
        times = new int[SIZE];
        for (int i = 0; i < SIZE; i++) {
            times[i] = timeBase + timeOffsets[i];
        }
        timeOffsets = null;
    }

    private void setOwner(int offset, int owner) {
        if (ownerInts != null) {
            ownerInts[offset] = owner;
            return;
        }
        if (ownerChars != null) {
            if (owner <= Character.MAX_VALUE) {
                ownerChars[offset] = (char) owner;
            } else {
                ownerInts = new int[SIZE];
                for (int i = 0; i < SIZE; i++) {
                    ownerInts[i] = ownerChars[i];
                }
                ownerChars = null;
                ownerInts[offset] = owner;
            }
            return;
        }
        if (uniformOwner == NO_OWNER_YET || uniformOwner == owner || count == 1) {
            uniformOwner = owner;
            return;
        }
        if (uniformOwner <= Character.MAX_VALUE && owner <= Character.MAX_VALUE) {
            ownerChars = new char[SIZE];
            Arrays.fill(ownerChars, (char) uniformOwner);
            ownerChars[offset] = (char) owner;
        } else {
            ownerInts = new int[SIZE];
            Arrays.fill(ownerInts, uniformOwner);
            ownerInts[offset] = owner;
        }
    }
}
