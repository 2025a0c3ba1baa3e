package io.github.txnpreserver.resolution;

import io.github.txnpreserver.preserver.kept.KeptOutcome;
import io.github.txnpreserver.preserver.kept.Outcome;
import java.util.List;
import org.apache.pulsar.client.api.transaction.TxnID;
import org.apache.pulsar.transaction.coordinator.TransactionSubscription;
import org.apache.pulsar.transaction.coordinator.TxnMeta;
import org.apache.pulsar.transaction.coordinator.exceptions.CoordinatorException.InvalidTxnStatusException;
import org.apache.pulsar.transaction.coordinator.proto.TxnStatus;

/**
 * A kept outcome as the broker sees it through {@code getTxnMeta}: the outcome's finishing
 * status, the owner (so ownership is checked as for a live transaction), and no
 * partitions, so a retry sends no end marker and admin lookups make no nested calls.
 * Immutable: an ended transaction takes no more partitions and changes no status.
 */
final class KeptTxnMeta implements TxnMeta {

    private final KeptOutcome kept;

    KeptTxnMeta(KeptOutcome kept) {
        this.kept = kept;
    }

    @Override
    public TxnID id() {
        return kept.txnId();
    }

    /** A timeout-abort is reported OPEN to the end chain (see {@link OutcomeResolver}); with no partitions, nothing is re-sent. */
    @Override
    public TxnStatus status() {
        return kept.outcome() == Outcome.TIMED_OUT && BrokerEndCheck.isCaller()
                ? TxnStatus.OPEN : kept.outcome().finishingStatus();
    }

    @Override
    public List<String> producedPartitions() {
        return List.of();
    }

    @Override
    public List<TransactionSubscription> ackedPartitions() {
        return List.of();
    }

    @Override
    public TxnMeta addProducedPartitions(List<String> partitions) throws InvalidTxnStatusException {
        throw new InvalidTxnStatusException(kept.txnId(), TxnStatus.OPEN, kept.outcome().finishingStatus());
    }

    @Override
    public TxnMeta addAckedPartitions(List<TransactionSubscription> subscriptions) throws InvalidTxnStatusException {
        throw new InvalidTxnStatusException(kept.txnId(), TxnStatus.OPEN, kept.outcome().finishingStatus());
    }

    @Override
    public TxnMeta updateTxnStatus(TxnStatus newStatus, TxnStatus expectedStatus) throws InvalidTxnStatusException {
        throw new InvalidTxnStatusException(kept.txnId(), expectedStatus, kept.outcome().finishingStatus());
    }

    /** Not kept (it would cost 8 bytes per outcome); admin shows the end time instead. */
    @Override
    public long getOpenTimestamp() {
        return kept.endTimeMillis();
    }

    @Override
    public long getTimeoutAt() {
        return 0;
    }

    @Override
    public String getOwner() {
        return kept.owner();
    }
}
