package io.github.txnpreserver.it;

import io.github.txnpreserver.client.EndResult;
import io.github.txnpreserver.client.TransactionOutcome;

/**
 * What a coordinator answered to a commit or abort, as the tests tell answers apart.
 *
 * <p>The reading is the client helper's ({@link io.github.txnpreserver.client.TransactionEnds}),
 * the rules every application using it gets: the tests keep no parser of their own. Beyond the
 * helper's outcome they tell a success from a refusal, as the answer table does (README: a
 * retried abort of a committed transaction is refused, a retried commit succeeds), from the
 * helper's {@link EndResult#coordinatorMessage()}, which is null exactly when the request
 * succeeded.
 */
public enum EndAnswer {
    /** Success: the request ended the transaction, or the coordinator answered it as the end asked for. */
    SUCCESS,
    /** Refused ({@code InvalidTxnStatus}), the helper reading the refusal as committed. */
    REFUSED_AS_COMMITTED,
    /** Refused ({@code InvalidTxnStatus}), the helper reading it as aborted (by a client, an admin or the timeout). */
    REFUSED_AS_ABORTED,
    /** {@code TransactionNotFound}, read by the helper as an unknown outcome: never issued, forgotten, or stock. */
    NOT_FOUND,
    /**
     * An error no retry changes, with which the helper fails the request: another role's
     * transaction (the broker's "not found" naming the owner check), a refusal naming no
     * outcome, a coordinator the cluster does not have. What it was:
     * {@link RetryingEndClient#lastFailure()}.
     */
    FAILED;

    /** The answer the helper's result stands for. */
    static EndAnswer of(TransactionOutcome requested, EndResult result) {
        if (result.outcome() == TransactionOutcome.UNKNOWN) {
            return NOT_FOUND;
        }
        if (result.coordinatorMessage() == null) {
            if (result.outcome() != requested) {
                // The helper answers a success with the outcome asked for: anything else is its defect.
                throw new IllegalStateException("a successful " + requested + " read as " + result);
            }
            return SUCCESS;
        }
        return result.outcome() == TransactionOutcome.COMMITTED ? REFUSED_AS_COMMITTED : REFUSED_AS_ABORTED;
    }
}
