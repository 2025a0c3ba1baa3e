package io.github.txnpreserver.statetopic;

import com.google.protobuf.InvalidProtocolBufferException;
import io.github.txnpreserver.preserver.KeptOutcome;
import io.github.txnpreserver.preserver.Outcome;
import io.github.txnpreserver.statetopic.proto.TerminatedTxnRecord;
import io.github.txnpreserver.statetopic.proto.TxnOutcome;
import org.apache.pulsar.client.api.transaction.TxnID;

/**
 * Maps kept outcomes to state-topic entries and back.
 *
 * <p>Key: {@code <mostSigBits>:<leastSigBits>}, one key per transaction, so that each
 * ended transaction costs one small record whatever the retention count, and an evicted
 * or expired outcome is removed by a tombstone under its own key.
 */
public final class StateRecordCodec {

    /** The record format this version writes and the newest it reads. */
    public static final int FORMAT_VERSION = 1;

    private StateRecordCodec() {
    }

    public static String keyOf(TxnID txnId) {
        return txnId.getMostSigBits() + ":" + txnId.getLeastSigBits();
    }

    public static TxnID parseKey(String key) throws MalformedRecordException {
        if (key == null) {
            throw new MalformedRecordException("entry has no key");
        }
        int colon = key.indexOf(':');
        if (colon <= 0 || colon == key.length() - 1) {
            throw new MalformedRecordException("key '" + key + "' is not <mostSigBits>:<leastSigBits>");
        }
        try {
            return new TxnID(Long.parseLong(key.substring(0, colon)), Long.parseLong(key.substring(colon + 1)));
        } catch (NumberFormatException e) {
            throw new MalformedRecordException("key '" + key + "' is not <mostSigBits>:<leastSigBits>", e);
        }
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
    public static KeptOutcome decode(String key, byte[] value) throws MalformedRecordException {
        TxnID keyTxn = parseKey(key);
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
        if (!recordTxn.equals(keyTxn)) {
            throw new MalformedRecordException("record for " + recordTxn + " is stored under key '" + key + "'");
        }
        Outcome outcome = switch (record.getOutcome()) {
            case COMMITTED -> Outcome.COMMITTED;
            case ABORTED -> Outcome.ABORTED;
            default -> throw new MalformedRecordException("record under key '" + key + "' has no outcome");
        };
        return new KeptOutcome(recordTxn, outcome, record.hasOwner() ? record.getOwner() : null,
                record.getEndTimeMillis());
    }
}
