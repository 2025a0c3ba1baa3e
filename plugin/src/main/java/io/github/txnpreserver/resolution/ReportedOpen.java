package io.github.txnpreserver.resolution;

import java.util.List;
import org.apache.pulsar.client.api.transaction.TxnID;
import org.apache.pulsar.transaction.coordinator.TransactionSubscription;
import org.apache.pulsar.transaction.coordinator.TxnMeta;
import org.apache.pulsar.transaction.coordinator.exceptions.CoordinatorException.InvalidTxnStatusException;
import org.apache.pulsar.transaction.coordinator.proto.TxnStatus;

/**
 * A live transaction aborting on its timeout, its status reported OPEN to the broker's end
 * chain so that the broker hands an end request's action to the store (see
 * {@link OutcomeResolver}); everything else is the live transaction's, its partitions
 * included, so an abort retry still re-sends its markers.
 */
final class ReportedOpen implements TxnMeta {

    private final TxnMeta live;

    ReportedOpen(TxnMeta live) {
        this.live = live;
    }

    @Override
    public TxnID id() {
        return live.id();
    }

    /** OPEN to the broker's end chain ({@link BrokerEndCheck}); the live status to every other reader. */
    @Override
    public TxnStatus status() {
        return BrokerEndCheck.isCaller() ? TxnStatus.OPEN : live.status();
    }

    @Override
    public List<String> producedPartitions() {
        return live.producedPartitions();
    }

    @Override
    public List<TransactionSubscription> ackedPartitions() {
        return live.ackedPartitions();
    }

    @Override
    public TxnMeta addProducedPartitions(List<String> partitions) throws InvalidTxnStatusException {
        return live.addProducedPartitions(partitions);
    }

    @Override
    public TxnMeta addAckedPartitions(List<TransactionSubscription> subscriptions) throws InvalidTxnStatusException {
        return live.addAckedPartitions(subscriptions);
    }

    @Override
    public TxnMeta updateTxnStatus(TxnStatus newStatus, TxnStatus expectedStatus) throws InvalidTxnStatusException {
        return live.updateTxnStatus(newStatus, expectedStatus);
    }

    @Override
    public long getOpenTimestamp() {
        return live.getOpenTimestamp();
    }

    @Override
    public long getTimeoutAt() {
        return live.getTimeoutAt();
    }

    @Override
    public String getOwner() {
        return live.getOwner();
    }
}
