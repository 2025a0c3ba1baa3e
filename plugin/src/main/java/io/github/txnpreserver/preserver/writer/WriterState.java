package io.github.txnpreserver.preserver.writer;

import java.util.EnumSet;
import java.util.Set;

/**
 * The lifecycle of a coordinator's state-topic writer, as data: each state lists the states
 * it may follow, and {@link StateTopicWriter} checks every transition against it (as Kafka's
 * {@code TransactionState} does).
 * <pre>
 *   WRITING ──write LOST or STUCK──▶ REPLACING ──new writer──▶ WRITING
 *      │                                 │
 *      │ (while restoring)          fails│
 *      ▼                                 ▼
 *   REPLACE_PENDING ◀────────────────────┘  (backoff, or the restore's end) ──▶ REPLACING
 *
 *   any but CLOSED ──FENCED, or coordinator moved──▶ RELEASING ──▶ CLOSED
 *   any ──close──▶ CLOSED
 * </pre>
 */
public enum WriterState {

    /** Flushes run. */
    WRITING,
    /** A replacement is in flight; nothing is sent. */
    REPLACING,
    /** A replacement waits for its backoff or for the restore to end; nothing is sent. */
    REPLACE_PENDING,
    /**
     * Another writer fenced this one, or this broker no longer owns the coordinator: the
     * coordinator is being closed here, and nothing is written again.
     */
    RELEASING,
    /** The coordinator closed. */
    CLOSED;

    private Set<WriterState> validPrevious;

    static {
        WRITING.validPrevious = EnumSet.of(REPLACING);
        REPLACING.validPrevious = EnumSet.of(WRITING, REPLACE_PENDING);
        REPLACE_PENDING.validPrevious = EnumSet.of(WRITING, REPLACING);
        RELEASING.validPrevious = EnumSet.of(WRITING, REPLACING, REPLACE_PENDING);
        CLOSED.validPrevious = EnumSet.of(WRITING, REPLACING, REPLACE_PENDING, RELEASING);
    }

    /** The states this one may follow. */
    Set<WriterState> validPrevious() {
        return validPrevious;
    }

    boolean canFollow(WriterState previous) {
        return validPrevious.contains(previous);
    }
}
