package io.github.txnpreserver.resolution;

import java.util.EnumSet;
import java.util.Set;
import org.apache.pulsar.transaction.coordinator.proto.TxnStatus;

/**
 * What a coordinator knows of a transaction, in the order the resolver asks (IGNITE-20034
 * carried into Pulsar): live coordinator state first, then the kept outcome, then nothing.
 *
 * <p>The lifecycle is data: each state names what {@code getTxnMeta} reports in it, the
 * states it may follow, and whether it is final for a caller that needs an outcome. The
 * transitions, and what makes each happen:
 * <pre>
 *   NOT_FOUND ──newTransaction──▶ PENDING
 *   PENDING ──finishing entry durable (commit, abort, timeout, admin abort)──▶ FINISHING
 *   FINISHING ──outcome record durable, then terminal entry──▶ KEPT
 *   FINISHING ──terminal entry with the plugin off (persistCount=0)──▶ NOT_FOUND
 *   KEPT ──evicted by a count limit, or expired──▶ NOT_FOUND
 * </pre>
 * Nothing leaves KEPT but forgetting: an ended transaction never becomes live again, and
 * its outcome never changes. {@code ResolutionTest} checks the store against this table.
 */
public enum Resolution {

    /**
     * Live and OPEN. Source: the managed-ledger store. Reports OPEN with its partitions.
     * Commit and abort are both accepted and start finishing it.
     */
    PENDING(EnumSet.of(TxnStatus.OPEN), false),

    /**
     * Live and COMMITTING or ABORTING: the outcome is decided (the finishing entry is
     * durable) and its end markers are on the way. Source: the managed-ledger store. Reports
     * the finishing status with its partitions. Only the end request matching the decided
     * outcome is accepted (it re-sends the markers and waits for the end); the other is
     * refused with InvalidTxnStatus. A caller needing a final answer waits for KEPT.
     */
    FINISHING(EnumSet.of(TxnStatus.COMMITTING, TxnStatus.ABORTING), false),

    /**
     * Ended, outcome kept by the preserver. Reports the outcome's finishing status with
     * empty partition lists, so that a matching retry succeeds without sending any marker,
     * and a conflicting one is refused with InvalidTxnStatus naming the outcome.
     */
    KEPT(EnumSet.of(TxnStatus.COMMITTING, TxnStatus.ABORTING), true),

    /**
     * Unknown, or ended longer ago than the retention keeps. Reports TransactionNotFound,
     * exactly as stock Pulsar does.
     */
    NOT_FOUND(EnumSet.noneOf(TxnStatus.class), true);

    static {
        PENDING.previous = EnumSet.of(NOT_FOUND);
        FINISHING.previous = EnumSet.of(PENDING);
        KEPT.previous = EnumSet.of(FINISHING);
        NOT_FOUND.previous = EnumSet.of(FINISHING, KEPT);
    }

    private final Set<TxnStatus> reportedStatuses;
    private final boolean isFinal;
    private Set<Resolution> previous;

    Resolution(Set<TxnStatus> reportedStatuses, boolean isFinal) {
        this.reportedStatuses = reportedStatuses;
        this.isFinal = isFinal;
    }

    /** The statuses {@code getTxnMeta} may report in this state. */
    public Set<TxnStatus> reportedStatuses() {
        return reportedStatuses;
    }

    /** The states a transaction may be in just before this one. */
    public Set<Resolution> validPrevious() {
        return previous;
    }

    /** Whether a transaction may move from this state to {@code next}. */
    public boolean canBecome(Resolution next) {
        return next.previous.contains(this);
    }

    /** Whether the answer is final: a caller needing an outcome need not wait for another state. */
    public boolean isFinal() {
        return isFinal;
    }

    /** The state of a transaction that is live with the given status. */
    public static Resolution ofLive(TxnStatus status) {
        return status == TxnStatus.OPEN ? PENDING : FINISHING;
    }
}
