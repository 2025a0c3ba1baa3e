package io.github.txnpreserver.client;

import java.time.Instant;

/**
 * What a coordinator knows of a transaction, as the plugin's outcome query answers it
 * ({@link OutcomeQuery}): read without acting on it. Fields that do not apply are null.
 *
 * @param txnId the transaction, as {@code (coordinator,sequence)}
 * @param state where it is
 * @param abortedBy ABORTING and ABORTED: who aborted it
 * @param owner the role that opened it (null: none, authentication was off)
 * @param openedAt OPEN, COMMITTING, ABORTING: when it was opened
 * @param timeoutMillis OPEN, COMMITTING, ABORTING: its timeout
 * @param endedAt COMMITTED, ABORTED: when it ended (to the second)
 * @param keptUntil COMMITTED, ABORTED: when the coordinator forgets it at the latest
 * @param windowStart FORGOTTEN: the end time of the oldest outcome kept now (null: none is kept)
 * @param highestIssued FORGOTTEN, NEVER_ISSUED: the highest sequence the coordinator has issued
 */
public record TransactionState(String txnId, State state, AbortedBy abortedBy, String owner, Instant openedAt,
                               Long timeoutMillis, Instant endedAt, Instant keptUntil, Instant windowStart,
                               Long highestIssued) {

    /** Where a transaction is; what each means for its data is in the client helper's README. */
    public enum State {
        /** Open: its records are not visible; a commit or an abort decides. */
        OPEN,
        /** Committed, its markers on their way: its records become visible. */
        COMMITTING,
        /** Aborted, its markers on their way: its records are discarded. */
        ABORTING,
        /** Committed: its records are visible. */
        COMMITTED,
        /** Aborted: its records are discarded. */
        ABORTED,
        /** Issued and ended, but its outcome is no longer kept: committed or aborted cannot be learnt. */
        FORGOTTEN,
        /** Never issued by the coordinator: no such transaction. */
        NEVER_ISSUED
    }

    /** Who aborted a transaction. */
    public enum AbortedBy {
        /** Its client, or an admin. */
        CLIENT_OR_ADMIN,
        /** The coordinator, because it stayed open past its timeout: a committer that counted on it lost its records. */
        TIMEOUT
    }
}
