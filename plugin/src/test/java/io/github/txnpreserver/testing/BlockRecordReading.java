package io.github.txnpreserver.testing;

import com.google.protobuf.InvalidProtocolBufferException;
import io.github.txnpreserver.statetopic.proto.OutcomeBlockRecord;
import java.util.ArrayList;
import java.util.List;
import java.util.regex.Pattern;
import org.apache.pulsar.client.api.transaction.TxnID;

/**
 * A state topic's block records read from their specification ({@code terminated_txn_state.proto}
 * and docs/DESIGN.md, "The record"), not through the plugin's codec. Tests read what the plugin
 * wrote through this: read back through the codec that wrote it, a record both sides get wrong
 * the same way would pass. The in-memory state topic and the integration tests' reader of a
 * real state topic both read here, and both fail on a record the plugin wrote that breaks a
 * rule of the format.
 *
 * <p>What only a coordinator can know is left to the caller: whose record it is (the reading
 * returns the record's coordinator) and whether its log has allocated the block's sequences.
 */
public final class BlockRecordReading {

    /** The only block format version written. */
    public static final int FORMAT_VERSION = 2;
    /** The end times' origin, 2020-01-01T00:00:00Z, in seconds since the epoch. */
    public static final long EPOCH_2020_SECONDS = 1_577_836_800L;
    /** The latest end time the format holds, in seconds since 2020. */
    public static final long MAX_END_SECOND = Integer.MAX_VALUE;
    private static final int OFFSETS = 256;
    private static final int WORDS = OFFSETS / 64;
    private static final Pattern BLOCK_KEY = Pattern.compile("c(0|[1-9][0-9]{0,18})");

    private BlockRecordReading() {
    }

    /**
     * How a recorded transaction ended. The reading's own type, not the plugin's, so that it
     * depends on nothing but the format (and runs where the broker's classes do not).
     */
    public enum Ending {
        COMMITTED,
        /** Aborted by a client or an admin. */
        ABORTED,
        /** Aborted by the coordinator because the transaction stayed open past its timeout. */
        TIMED_OUT
    }

    /** One kept outcome of a block: its end time in seconds since the epoch, its owner role or null. */
    public record RecordedOutcome(TxnID txn, Ending ending, long endEpochSecond, String owner) {
    }

    /** A block record: whose, which block, and its kept outcomes in sequence order. */
    public record Block(long coordinatorId, long blockIndex, List<RecordedOutcome> outcomes) {
    }

    /** A value under a block key that the format does not allow, with the rule it breaks. */
    public static final class NotABlockRecord extends Exception {
        private static final long serialVersionUID = 1L;

        NotABlockRecord(String key, String rule) {
            super("the record under key '" + key + "' " + rule);
        }
    }

    /** Whether a key names a block (every other key the plugin writes is not a record of outcomes). */
    public static boolean isBlockKey(String key) {
        return key != null && key.startsWith("c");
    }

    /** The block a non-empty value under a block key holds, or which rule of the format it breaks. */
    public static Block read(String key, byte[] value) throws NotABlockRecord {
        if (key == null || !BLOCK_KEY.matcher(key).matches()) {
            throw new NotABlockRecord(key,
                    "has no canonical block key (c, then a decimal without sign or leading zero)");
        }
        long index;
        try {
            index = Long.parseLong(key.substring(1));
        } catch (NumberFormatException e) {
            throw new NotABlockRecord(key, "names a block index past a long");
        }
        if (index > Long.MAX_VALUE / OFFSETS) {
            throw new NotABlockRecord(key, "names a block whose sequences pass a long");
        }
        OutcomeBlockRecord block;
        try {
            block = OutcomeBlockRecord.parseFrom(value);
        } catch (InvalidProtocolBufferException e) {
            throw new NotABlockRecord(key, "is not an OutcomeBlockRecord: " + e.getMessage());
        }
        if (block.getFormatVersion() != FORMAT_VERSION) {
            throw new NotABlockRecord(key, "has format version " + block.getFormatVersion());
        }
        if (block.getBlockIndex() != index) {
            throw new NotABlockRecord(key, "holds block " + block.getBlockIndex());
        }
        if (block.getKeptCount() != WORDS || block.getCommittedCount() != WORDS
                || (block.getTimedOutCount() != 0 && block.getTimedOutCount() != WORDS)) {
            throw new NotABlockRecord(key, "does not have " + WORDS + " words in each bitmap (timed_out: none or "
                    + WORDS + ")");
        }
        int keptCount = 0;
        for (int word = 0; word < WORDS; word++) {
            long kept = block.getKept(word);
            long committed = block.getCommitted(word);
            long timedOut = block.getTimedOutCount() == 0 ? 0 : block.getTimedOut(word);
            if ((committed & ~kept) != 0) {
                throw new NotABlockRecord(key, "marks committed an offset it does not keep");
            }
            if ((timedOut & ~(kept & ~committed)) != 0) {
                throw new NotABlockRecord(key, "marks timed out an offset that is not a kept abort");
            }
            keptCount += Long.bitCount(kept);
        }
        if (block.getEndSecondDeltasCount() != keptCount) {
            throw new NotABlockRecord(key, "has " + block.getEndSecondDeltasCount() + " end times for "
                    + keptCount + " kept outcomes");
        }
        if (block.getOwnerRefsCount() != 0 && block.getOwnerRefsCount() != keptCount) {
            throw new NotABlockRecord(key, "has " + block.getOwnerRefsCount() + " owner references for "
                    + keptCount + " kept outcomes");
        }
        List<RecordedOutcome> outcomes = new ArrayList<>(keptCount);
        long endSecond = 0;
        int entry = 0;
        for (int offset = 0; offset < OFFSETS; offset++) {
            long bit = 1L << (offset % 64);
            if ((block.getKept(offset / 64) & bit) == 0) {
                continue;
            }
            long delta = block.getEndSecondDeltas(entry);
            // Both within the 32-bit range of seconds the format counts from 2020 (until 2088).
            if (Math.abs(delta) > MAX_END_SECOND || endSecond + delta < 0 || endSecond + delta > MAX_END_SECOND) {
                throw new NotABlockRecord(key, "ends offset " + offset + " outside 2020 plus 2^31 - 1 seconds");
            }
            endSecond += delta;
            // A uint32 in the format, so read unsigned.
            long ref = Integer.toUnsignedLong(block.getOwnerRefsCount() == 0 ? block.getUniformOwnerRef()
                    : block.getOwnerRefs(entry));
            if (ref > block.getOwnersCount()) {
                throw new NotABlockRecord(key, "refers offset " + offset + " to owner " + ref + " of "
                        + block.getOwnersCount());
            }
            Ending ending = (block.getCommitted(offset / 64) & bit) != 0 ? Ending.COMMITTED
                    : block.getTimedOutCount() != 0 && (block.getTimedOut(offset / 64) & bit) != 0 ? Ending.TIMED_OUT
                    : Ending.ABORTED;
            outcomes.add(new RecordedOutcome(new TxnID(block.getCoordinatorId(), index * OFFSETS + offset), ending,
                    EPOCH_2020_SECONDS + endSecond, ref == 0 ? null : block.getOwners((int) ref - 1)));
            entry++;
        }
        return new Block(block.getCoordinatorId(), index, List.copyOf(outcomes));
    }
}
