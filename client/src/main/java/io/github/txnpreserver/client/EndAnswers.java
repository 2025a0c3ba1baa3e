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
 * a conflicting terminal step reads "was already committed" (or aborted).
 */
final class EndAnswers {

    /** How far down a chain of causes an answer is looked for (a cycle must not loop). */
    private static final int MAX_CAUSES = 16;
    /** The broker's refusal of an end by a role that neither owns the transaction nor is a super user. */
    static final String NOT_THE_OWNER = "is neither the owner of the transaction";

    private EndAnswers() {
    }

    /** What the answer to an end request means. */
    sealed interface Reading permits Outcome, Retry, Fail {
    }

    /** The coordinator answered: the outcome is known (or known to be unknown). */
    record Outcome(TransactionOutcome outcome) implements Reading {
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
            return new Outcome(requested);
        }
        Throwable cause = failureOrNull;
        for (int depth = 0; cause != null && depth < MAX_CAUSES; depth++, cause = cause.getCause()) {
            if (cause instanceof TransactionCoordinatorClientException.TransactionNotFoundException) {
                // The broker answers "not found" to a role that does not own the transaction
                // too: that is an authorization problem, which no retry changes.
                return String.valueOf(cause.getMessage()).contains(NOT_THE_OWNER) ? new Fail(failureOrNull)
                        : new Outcome(TransactionOutcome.UNKNOWN);
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

    private static Reading readRefusal(Throwable refusal) {
        String message = String.valueOf(refusal.getMessage()).toUpperCase(Locale.ROOT);
        if (message.contains("IS IN COMMITTING") || message.contains("IS IN COMMITTED")
                || message.contains("ALREADY COMMITTED")) {
            return new Outcome(TransactionOutcome.COMMITTED);
        }
        if (message.contains("IS IN ABORTING") || message.contains("IS IN ABORTED")
                || message.contains("ALREADY ABORTED")) {
            return new Outcome(TransactionOutcome.ABORTED);
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
