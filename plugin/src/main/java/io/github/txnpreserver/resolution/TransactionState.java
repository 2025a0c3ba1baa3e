package io.github.txnpreserver.resolution;

/**
 * What a coordinator knows of a transaction, as the outcome query answers it (docs/DESIGN.md,
 * "Outcome query"): read without acting, unlike an end request.
 *
 * @param txnId the transaction, as {@code (coordinator,sequence)}
 * @param state where it is
 * @param abortedBy for ABORTING and ABORTED: who aborted it; null otherwise
 * @param owner the role that opened it (null: none, authentication was off)
 * @param openedAtMillis OPEN, COMMITTING, ABORTING: when it was opened; 0 otherwise
 * @param timeoutMillis OPEN, COMMITTING, ABORTING: its timeout; 0 otherwise
 * @param endedAtMillis COMMITTED, ABORTED: when it ended (to the second); 0 otherwise
 * @param keptUntilMillis COMMITTED, ABORTED: when its outcome expires at the latest; 0 otherwise
 * @param windowStartMillis FORGOTTEN: the end time of the oldest outcome kept now (0: none is kept)
 * @param highestIssued FORGOTTEN, NEVER_ISSUED: the highest sequence the coordinator has issued
 */
public record TransactionState(String txnId, State state, AbortedBy abortedBy, String owner, long openedAtMillis,
                               long timeoutMillis, long endedAtMillis, long keptUntilMillis,
                               long windowStartMillis, long highestIssued) {

    public enum State {
        /** Live, open: commit and abort are both possible. */
        OPEN,
        /** Committed: decided, its markers on their way. */
        COMMITTING,
        /** Aborted: decided, its markers on their way. */
        ABORTING,
        /** Ended committed; the outcome is kept. */
        COMMITTED,
        /** Ended aborted; the outcome is kept. */
        ABORTED,
        /** Issued by this coordinator, ended, and no longer kept: the outcome is not known any more. */
        FORGOTTEN,
        /** Above the highest sequence this coordinator has issued. */
        NEVER_ISSUED
    }

    public enum AbortedBy {
        /** Its client, or an admin (the broker's chain does not tell them apart). */
        CLIENT_OR_ADMIN,
        /** The coordinator, because it stayed open past its timeout. */
        TIMEOUT
    }
}
