package io.github.txnpreserver.statetopic;

import com.google.protobuf.InvalidProtocolBufferException;
import io.github.txnpreserver.preserver.KeptOutcome;
import io.github.txnpreserver.preserver.Outcome;
import io.github.txnpreserver.statetopic.proto.OutcomeBlockRecord;
import io.github.txnpreserver.statetopic.proto.TerminatedTxnRecord;
import io.github.txnpreserver.statetopic.proto.TxnOutcome;
import java.util.Objects;
import org.apache.pulsar.client.api.transaction.TxnID;

/**
 * Maps kept outcomes to state-topic entries and back.
 *
 * <p>Since 0.3 the key is one per block of 256 sequence ids, {@code c<blockIndex>}, and the
 * value an {@link OutcomeBlockRecord} with every outcome kept in the block
 * ({@link #encodeBlock}). The formats below are still read, and restore moves their
 * outcomes into blocks.
 *
 * <p>0.2's key: one per client slot, {@code s<slot>} for transactions without an owner and
 * {@code s<slot>:<owner>} otherwise. A client's records go round its slots, so a new record
 * overwrites the client's oldest outcome: one small record per ended transaction, whatever
 * the retention count, and no tombstone for what it evicts. Keys of the form
 * {@code <mostSigBits>:<leastSigBits>}, one per transaction, were written by version 0.1;
 * they are still read, and restore moves their records into slots.
 */
public final class StateRecordCodec {

    /** The record format this version writes and the newest it reads. */
    public static final int FORMAT_VERSION = 1;

    /** The block format this version writes and the newest it reads. */
    public static final int BLOCK_FORMAT_VERSION = 2;

    private static final char SLOT_PREFIX = 's';
    private static final char BLOCK_PREFIX = 'c';

    private StateRecordCodec() {
    }

    /** Where a record lives: a client's slot, or (version 0.1) its transaction's own key. */
    public record StoredKey(int slot, String owner, TxnID legacyTxn) {

        public boolean isSlot() {
            return legacyTxn == null;
        }
    }

    /** A decoded entry: the outcome and where it was stored. */
    public record StoredRecord(StoredKey key, KeptOutcome outcome) {
    }

    public static String blockKey(long blockIndex) {
        return BLOCK_PREFIX + Long.toString(blockIndex);
    }

    /** Whether a key is a block's (the current format). */
    public static boolean isBlockKey(String key) {
        return key != null && !key.isEmpty() && key.charAt(0) == BLOCK_PREFIX;
    }

    public static long blockIndexOf(String key) throws MalformedRecordException {
        try {
            long index = Long.parseLong(key.substring(1));
            if (index < 0 || key.charAt(1) == '+') {
                throw new NumberFormatException(key);
            }
            return index;
        } catch (NumberFormatException | IndexOutOfBoundsException e) {
            throw new MalformedRecordException("key '" + key + "' is not c<blockIndex>", e);
        }
    }

    public static byte[] encodeBlock(ChunkRecord block) {
        OutcomeBlockRecord.Builder record = OutcomeBlockRecord.newBuilder()
                .setFormatVersion(BLOCK_FORMAT_VERSION)
                .setCoordinatorId(block.coordinatorId())
                .setBlockIndex(block.blockIndex())
                .addAllOwners(block.owners())
                .setUniformOwnerRef(block.uniformOwnerRef());
        for (long word : block.kept()) {
            record.addKept(word);
        }
        for (long word : block.committed()) {
            record.addCommitted(word);
        }
        long previous = 0;
        for (int second : block.endSeconds()) {
            record.addEndSecondDeltas(second - previous);
            previous = second;
        }
        if (block.ownerRefs() != null) {
            for (int ref : block.ownerRefs()) {
                record.addOwnerRefs(ref);
            }
        }
        return record.build().toByteArray();
    }

    /** Decodes a block's value, checking it against its key and its coordinator. */
    public static ChunkRecord decodeBlock(String key, byte[] value, long coordinatorId)
            throws MalformedRecordException {
        long index = blockIndexOf(key);
        OutcomeBlockRecord record;
        try {
            record = OutcomeBlockRecord.parseFrom(value);
        } catch (InvalidProtocolBufferException e) {
            throw new MalformedRecordException("value under key '" + key + "' is not an OutcomeBlockRecord", e);
        }
        if (record.getFormatVersion() < BLOCK_FORMAT_VERSION || record.getFormatVersion() > BLOCK_FORMAT_VERSION) {
            throw new MalformedRecordException("block under key '" + key + "' has format version "
                    + record.getFormatVersion() + "; this plugin reads version " + BLOCK_FORMAT_VERSION);
        }
        if (record.getBlockIndex() != index || record.getCoordinatorId() != coordinatorId) {
            throw new MalformedRecordException("block under key '" + key + "' is block " + record.getBlockIndex()
                    + " of coordinator " + record.getCoordinatorId() + ", not block " + index + " of coordinator "
                    + coordinatorId);
        }
        if (record.getKeptCount() != 4 || record.getCommittedCount() != 4) {
            throw new MalformedRecordException("block under key '" + key + "' does not have 4 bitmap words");
        }
        long[] kept = new long[4];
        long[] committed = new long[4];
        int size = 0;
        for (int i = 0; i < 4; i++) {
            kept[i] = record.getKept(i);
            committed[i] = record.getCommitted(i) & kept[i];
            size += Long.bitCount(kept[i]);
        }
        if (record.getEndSecondDeltasCount() != size
                || (record.getOwnerRefsCount() != 0 && record.getOwnerRefsCount() != size)) {
            throw new MalformedRecordException("block under key '" + key + "' has " + size + " outcomes but "
                    + record.getEndSecondDeltasCount() + " end times and " + record.getOwnerRefsCount() + " owners");
        }
        int[] seconds = new int[size];
        long time = 0;
        for (int i = 0; i < size; i++) {
            time += record.getEndSecondDeltas(i);
            if (time < 0 || time > Integer.MAX_VALUE) {
                throw new MalformedRecordException("block under key '" + key + "' has an end time out of range");
            }
            seconds[i] = (int) time;
        }
        int owners = record.getOwnersCount();
        int[] refs = null;
        if (record.getOwnerRefsCount() != 0) {
            refs = new int[size];
            for (int i = 0; i < size; i++) {
                refs[i] = record.getOwnerRefs(i);
                if (refs[i] < 0 || refs[i] > owners) {
                    throw new MalformedRecordException("block under key '" + key + "' names owner " + refs[i]
                            + " of " + owners);
                }
            }
        } else if (record.getUniformOwnerRef() < 0 || record.getUniformOwnerRef() > owners) {
            throw new MalformedRecordException("block under key '" + key + "' names owner "
                    + record.getUniformOwnerRef() + " of " + owners);
        }
        return new ChunkRecord(coordinatorId, index, kept, committed, seconds, record.getOwnersList(), refs,
                record.getUniformOwnerRef());
    }

    public static String slotKey(String owner, int slot) {
        return owner == null ? SLOT_PREFIX + Integer.toString(slot) : SLOT_PREFIX + Integer.toString(slot) + ':' + owner;
    }

    /** The per-transaction key of version 0.1. */
    public static String legacyKeyOf(TxnID txnId) {
        return txnId.getMostSigBits() + ":" + txnId.getLeastSigBits();
    }

    public static StoredKey parseKey(String key) throws MalformedRecordException {
        if (key == null || key.isEmpty()) {
            throw new MalformedRecordException("entry has no key");
        }
        return key.charAt(0) == SLOT_PREFIX ? parseSlotKey(key) : new StoredKey(-1, null, parseLegacyKey(key));
    }

    public static byte[] encode(KeptOutcome kept) {
        TerminatedTxnRecord.Builder record = TerminatedTxnRecord.newBuilder()
                .setFormatVersion(FORMAT_VERSION)
                .setTxnidMostBits(kept.txnId().getMostSigBits())
                .setTxnidLeastBits(kept.txnId().getLeastSigBits())
                .setOutcome(kept.outcome() == Outcome.COMMITTED ? TxnOutcome.COMMITTED : TxnOutcome.ABORTED)
                .setEndTimeMillis(kept.endTimeMillis());
        if (kept.owner() != null) {
            record.setOwner(kept.owner());
        }
        return record.build().toByteArray();
    }

    /** Decodes a non-tombstone entry, checking it against its key. */
    public static StoredRecord decode(String key, byte[] value) throws MalformedRecordException {
        StoredKey storedKey = parseKey(key);
        TerminatedTxnRecord record;
        try {
            record = TerminatedTxnRecord.parseFrom(value);
        } catch (InvalidProtocolBufferException e) {
            throw new MalformedRecordException("value under key '" + key + "' is not a TerminatedTxnRecord", e);
        }
        if (record.getFormatVersion() < 1 || record.getFormatVersion() > FORMAT_VERSION) {
            throw new MalformedRecordException("record under key '" + key + "' has format version "
                    + record.getFormatVersion() + "; this plugin reads versions 1 to " + FORMAT_VERSION);
        }
        TxnID recordTxn = new TxnID(record.getTxnidMostBits(), record.getTxnidLeastBits());
        String owner = record.hasOwner() ? record.getOwner() : null;
        if (storedKey.isSlot() ? !Objects.equals(owner, storedKey.owner())
                : !recordTxn.equals(storedKey.legacyTxn())) {
            throw new MalformedRecordException("record for " + recordTxn + " of owner " + owner
                    + " is stored under key '" + key + "'");
        }
        Outcome outcome = switch (record.getOutcome()) {
            case COMMITTED -> Outcome.COMMITTED;
            case ABORTED -> Outcome.ABORTED;
            default -> throw new MalformedRecordException("record under key '" + key + "' has no outcome");
        };
        return new StoredRecord(storedKey, new KeptOutcome(recordTxn, outcome, owner, record.getEndTimeMillis()));
    }

    private static StoredKey parseSlotKey(String key) throws MalformedRecordException {
        int colon = key.indexOf(':');
        String digits = colon < 0 ? key.substring(1) : key.substring(1, colon);
        try {
            int slot = Integer.parseInt(digits);
            if (slot < 0 || digits.startsWith("+")) {
                throw new NumberFormatException(digits);
            }
            return new StoredKey(slot, colon < 0 ? null : key.substring(colon + 1), null);
        } catch (NumberFormatException e) {
            throw new MalformedRecordException("key '" + key + "' is not s<slot>[:<owner>]", e);
        }
    }

    private static TxnID parseLegacyKey(String key) throws MalformedRecordException {
        int colon = key.indexOf(':');
        if (colon <= 0 || colon == key.length() - 1) {
            throw new MalformedRecordException("key '" + key + "' is neither s<slot>[:<owner>] nor"
                    + " <mostSigBits>:<leastSigBits>");
        }
        try {
            return new TxnID(Long.parseLong(key.substring(0, colon)), Long.parseLong(key.substring(colon + 1)));
        } catch (NumberFormatException e) {
            throw new MalformedRecordException("key '" + key + "' is neither s<slot>[:<owner>] nor"
                    + " <mostSigBits>:<leastSigBits>", e);
        }
    }
}
