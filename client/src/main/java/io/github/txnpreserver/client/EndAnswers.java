package io.github.txnpreserver.client;

import java.util.Locale;
import org.apache.pulsar.client.api.PulsarClientException;
import org.apache.pulsar.client.api.transaction.TransactionCoordinatorClientException;

/**
 * Reads what a coordinator's answer to an end request says about the transaction.
 *
 * <p>A refusal ({@code InvalidTxnStatus}) names the status the transaction is in: "Expect
 * Txn (1,5) to be in OPEN status but it is in ABORTING status". Once a transaction is
 * COMMITTING or ABORTING its outcome is decided (the coordinator drives it to the end), and
 * a coordinator keeping outcomes reports an ended transaction in the status it finished
 * through (PIP-255), so the status names the outcome either way. The plugin's own refusal of
 * a conflicting terminal step reads "was already committed" (or aborted), and of a commit of a
 * transaction its coordinator aborted on its timeout "was aborted on its timeout at …". Its
 * "not found" says "was never issued" or "is no longer kept".
 */
final class EndAnswers {

    /** How far down a chain of causes an answer is looked for (a cycle must not loop). */
    private static final int MAX_CAUSES = 16;
    /** The broker's refusal of an end by a role that neither owns the transaction nor is a super user. */
    static final String NOT_THE_OWNER = "is neither the owner of the transaction";
    /** The plugin's refusal of a commit of a transaction its coordinator aborted on its timeout (upper case). */
    static final String ABORTED_ON_TIMEOUT = "WAS ABORTED ON ITS TIMEOUT";
    /** The plugin's "not found" of a sequence its coordinator never issued. */
    static final String NEVER_ISSUED = "was never issued";
    /** The plugin's "not found" of a sequence its coordinator issued but no longer keeps. */
    static final String NO_LONGER_KEPT = "is no longer kept";

    private EndAnswers() {
    }

    /** What the answer to an end request means. */
    sealed interface Reading permits Outcome, Retry, Fail {
    }

    /** The coordinator answered: the outcome is known (or known to be unknown). */
    record Outcome(EndResult result) implements Reading {
        Outcome(TransactionOutcome outcome, EndResult.Reason reason, String message) {
            this(new EndResult(outcome, reason, message));
        }
    }

    /** No answer yet (not reachable, moving, not ready): send the request again. */
    record Retry(Throwable error) implements Reading {
    }

    /** An error that sending again cannot change (not allowed, misconfigured, closed). */
    record Fail(Throwable error) implements Reading {
    }

    /** Reads a successful end of {@code requested}, or the failure it met. */
    static Reading read(TransactionOutcome requested, Throwable failureOrNull) {
        if (failureOrNull == null) {
            return new Outcome(requested, EndResult.Reason.ENDED, null);
        }
        Throwable cause = failureOrNull;
        for (int depth = 0; cause != null && depth < MAX_CAUSES; depth++, cause = cause.getCause()) {
            if (cause instanceof TransactionCoordinatorClientException.TransactionNotFoundException) {
                // The broker answers "not found" to a role that does not own the transaction
                // too: that is an authorization problem, which no retry changes.
                String message = String.valueOf(cause.getMessage());
                return message.contains(NOT_THE_OWNER) ? new Fail(failureOrNull)
                        : new Outcome(TransactionOutcome.UNKNOWN, notFoundReason(message), cause.getMessage());
            }
            if (cause instanceof TransactionCoordinatorClientException.InvalidTxnStatusException) {
                return readRefusal(cause);
            }
            if (isPermanent(cause)) {
                return new Fail(failureOrNull);
            }
        }
        return new Retry(failureOrNull);
    }

    /** The plugin's "not found" says which (docs/answers.md, "Not found, said which"); stock's says only that. */
    private static EndResult.Reason notFoundReason(String message) {
        if (message.contains(NEVER_ISSUED)) {
            return EndResult.Reason.NEVER_ISSUED;
        }
        return message.contains(NO_LONGER_KEPT) ? EndResult.Reason.FORGOTTEN : EndResult.Reason.NOT_FOUND;
    }

    private static Reading readRefusal(Throwable refusal) {
        String said = refusal.getMessage();
        String message = String.valueOf(said).toUpperCase(Locale.ROOT);
        if (message.contains(ABORTED_ON_TIMEOUT)) {
            return new Outcome(TransactionOutcome.ABORTED, EndResult.Reason.TIMEOUT, said);
        }
        if (message.contains("IS IN COMMITTING") || message.contains("IS IN COMMITTED")
                || message.contains("ALREADY COMMITTED")) {
            return new Outcome(TransactionOutcome.COMMITTED, EndResult.Reason.ENDED, said);
        }
        if (message.contains("IS IN ABORTING") || message.contains("IS IN ABORTED")
                || message.contains("ALREADY ABORTED")) {
            return new Outcome(TransactionOutcome.ABORTED, EndResult.Reason.ENDED, said);
        }
        if (message.contains("IS IN OPEN")) {
            // A step of the end ran before the previous one had landed: the next attempt finds it.
            return new Retry(refusal);
        }
        return new Fail(refusal);
    }

    /**
     * Errors that sending again cannot change. Through the coordinator client most failures
     * to reach a broker (authentication among them) arrive as timeouts and are retried
     * within the policy; these are the ones that arrive as such.
     */
    private static boolean isPermanent(Throwable error) {
        return error instanceof TransactionCoordinatorClientException.MetaStoreHandlerNotExistsException
                || error instanceof PulsarClientException.AuthenticationException
                || error instanceof PulsarClientException.AuthorizationException
                || error instanceof PulsarClientException.NotAllowedException
                || error instanceof PulsarClientException.InvalidServiceURL
                || error instanceof PulsarClientException.InvalidConfigurationException
                || error instanceof PulsarClientException.UnsupportedAuthenticationException
                || error instanceof PulsarClientException.NotSupportedException
                || error instanceof PulsarClientException.AlreadyClosedException
                || error instanceof IllegalArgumentException;
    }
}
