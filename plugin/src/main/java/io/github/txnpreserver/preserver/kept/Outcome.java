package io.github.txnpreserver.preserver.kept;

import org.apache.pulsar.transaction.coordinator.proto.TxnStatus;

/**
 * How an ended transaction ended: committed, aborted (by its client or an admin), or aborted
 * by the coordinator because it stayed open past its timeout. The last is an abort to every
 * end request (an abort retry succeeds, a commit is refused); it is kept apart because a
 * commit that meets it means the committer's data was lost (docs/answers.md, "Timeout-aborts").
 *
 * <p>A kept outcome is reported to the broker as the <em>finishing</em> status
 * (COMMITTING / ABORTING), never the terminal one: the broker's end-transaction
 * path accepts a retry only from a finishing status, and sends markers to the
 * (empty) partition lists of a kept outcome, so nothing reaches a partition
 * twice. PIP-255: "consider Aborting equivalent to Aborted".
 */
public enum Outcome {
    COMMITTED(TxnStatus.COMMITTING),
    ABORTED(TxnStatus.ABORTING),
    TIMED_OUT(TxnStatus.ABORTING);

    private final TxnStatus finishingStatus;

    Outcome(TxnStatus finishingStatus) {
        this.finishingStatus = finishingStatus;
    }

    public TxnStatus finishingStatus() {
        return finishingStatus;
    }

    /** Whether an end request towards {@code status} (finishing or terminal) ends as this outcome did. */
    public boolean endsAs(TxnStatus status) {
        return of(status) == (this == TIMED_OUT ? ABORTED : this);
    }

    /** The outcome a finishing or terminal status leads to (never TIMED_OUT), or null for OPEN and TIME_OUT. */
    public static Outcome of(TxnStatus status) {
        return switch (status) {
            case COMMITTING, COMMITTED -> COMMITTED;
            case ABORTING, ABORTED -> ABORTED;
            default -> null;
        };
    }
}
