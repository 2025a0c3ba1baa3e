package io.github.txnpreserver.resolution;

import org.apache.pulsar.transaction.coordinator.proto.TxnStatus;

/**
 * What a coordinator knows of a transaction, in the order {@link OutcomeResolver} asks
 * (IGNITE-20034 carried into Pulsar): live state first, then the kept outcome, then nothing.
 *
 * <p>A transaction moves through them, never backwards:
 * <pre>
 *   NOT_FOUND ──newTransaction──▶ PENDING
 *   PENDING ──finishing entry durable (commit, abort, timeout, admin abort)──▶ FINISHING
 *   FINISHING ──outcome kept in memory, then terminal entry (the store forgets it)──▶ KEPT
 *   FINISHING ──terminal entry with the plugin off (persistCount=0)──▶ NOT_FOUND
 *   KEPT ──dropped by a count limit or the memory bound, or expired──▶ NOT_FOUND
 * </pre>
 * Nothing leaves KEPT but forgetting: an ended transaction never becomes live again, and
 * its outcome never changes. {@code ResolutionTest} holds this table and checks the store's
 * answers against it.
 */
public enum Resolution {

    /**
     * Live and OPEN. Source: the managed-ledger store. {@code getTxnMeta} reports OPEN with
     * its partitions; commit and abort are both accepted.
     */
    PENDING,

    /**
     * Live and COMMITTING or ABORTING: the outcome is decided (the finishing entry is
     * durable) and its end markers are on the way. Source: the managed-ledger store. Reports
     * the finishing status with its partitions. Only the end request matching the decided
     * outcome is accepted (it re-sends the markers and waits for the end); the other is
     * refused with InvalidTxnStatus.
     */
    FINISHING,

    /**
     * Ended, outcome kept by the preserver. Reports the outcome's finishing status with
     * empty partition lists, so that a matching retry succeeds without sending any marker,
     * and a conflicting one is refused with InvalidTxnStatus naming the outcome.
     */
    KEPT,

    /**
     * Unknown, or ended longer ago than the retention keeps. Reports TransactionNotFound,
     * exactly as stock Pulsar does.
     */
    NOT_FOUND;

    /** The state of a transaction that is live with the given status. */
    public static Resolution ofLive(TxnStatus status) {
        return status == TxnStatus.OPEN ? PENDING : FINISHING;
    }
}
