package io.github.txnpreserver.preserver;

import org.apache.pulsar.transaction.coordinator.proto.TxnStatus;

/**
 * How an ended transaction ended.
 *
 * <p>A kept outcome is reported to the broker as the <em>finishing</em> status
 * (COMMITTING / ABORTING), never the terminal one: the broker's end-transaction
 * path accepts a retry only from a finishing status, and sends markers to the
 * (empty) partition lists of a kept outcome, so nothing reaches a partition
 * twice. PIP-255: "consider Aborting equivalent to Aborted".
 */
public enum Outcome {
    COMMITTED(TxnStatus.COMMITTING),
    ABORTED(TxnStatus.ABORTING);

    private final TxnStatus finishingStatus;

    Outcome(TxnStatus finishingStatus) {
        this.finishingStatus = finishingStatus;
    }

    public TxnStatus finishingStatus() {
        return finishingStatus;
    }

    /** The outcome a finishing or terminal status leads to, or null for OPEN and TIME_OUT. */
    public static Outcome of(TxnStatus status) {
        return switch (status) {
            case COMMITTING, COMMITTED -> COMMITTED;
            case ABORTING, ABORTED -> ABORTED;
            default -> null;
        };
    }
}
