package io.github.txnpreserver.resolution;

import java.util.Set;
import org.apache.pulsar.transaction.coordinator.proto.TxnStatus;

/**
 * What a coordinator knows of a transaction, in the order the resolver asks (IGNITE-20034
 * carried into Pulsar): live coordinator state first, then the kept outcome, then nothing.
 *
 * <p>Each constant documents where the answer comes from, what {@code getTxnMeta} reports,
 * and which end requests the broker's end-transaction path then accepts. The table is the
 * specification; {@code ResolutionTest} checks the store against it.
 */
public enum Resolution {

    /**
     * Live and OPEN. Source: the managed-ledger store. Reports OPEN with its partitions.
     * Commit and abort are both accepted and start finishing it.
     */
    PENDING(Set.of(TxnStatus.OPEN)),

    /**
     * Live and COMMITTING or ABORTING: its end markers are on the way. Source: the
     * managed-ledger store. Reports the finishing status with its partitions. Only the end
     * request matching the outcome it is finishing to is accepted (it re-sends the markers
     * and waits for the end); the other is refused with InvalidTxnStatus.
     */
    FINISHING(Set.of(TxnStatus.COMMITTING, TxnStatus.ABORTING)),

    /**
     * Ended, outcome kept by the preserver. Reports the outcome's finishing status with
     * empty partition lists, so that a matching retry succeeds without sending any marker,
     * and a conflicting one is refused with InvalidTxnStatus naming the outcome.
     */
    KEPT(Set.of(TxnStatus.COMMITTING, TxnStatus.ABORTING)),

    /**
     * Unknown, or ended longer ago than the retention keeps. Reports TransactionNotFound,
     * exactly as stock Pulsar does.
     */
    NOT_FOUND(Set.of());

    private final Set<TxnStatus> reportedStatuses;

    Resolution(Set<TxnStatus> reportedStatuses) {
        this.reportedStatuses = reportedStatuses;
    }

    /** The statuses {@code getTxnMeta} may report in this resolution. */
    public Set<TxnStatus> reportedStatuses() {
        return reportedStatuses;
    }

    /** The resolution of a transaction that is live with the given status. */
    public static Resolution ofLive(TxnStatus status) {
        return status == TxnStatus.OPEN ? PENDING : FINISHING;
    }
}
