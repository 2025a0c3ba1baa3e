package io.github.txnpreserver.it;

import org.apache.pulsar.client.api.transaction.TransactionCoordinatorClientException;

/**
 * What a coordinator answered to a commit or abort, as a client sees it.
 *
 * <p>A refusal of a kept transaction reads "... but it is in COMMITTING status" (or
 * ABORTING): the broker builds that message from the status {@code getTxnMeta} reports, and
 * for an ended transaction the plugin reports the status it finished through (PIP-255:
 * "consider Aborting equivalent to Aborted"). So COMMITTING in a refusal means committed. A
 * commit of a transaction the coordinator aborted on its timeout is refused with the plugin's
 * own words: "... was aborted on its timeout at ...".
 */
public enum EndAnswer {
    SUCCESS,
    REFUSED_AS_COMMITTED,
    REFUSED_AS_ABORTED,
    /** Refused as InvalidTxnStatus with a status that names neither outcome. */
    REFUSED_OTHER,
    NOT_FOUND;

    /** The answer an exception of the stock client stands for, or null if it is not an answer (e.g. not connected). */
    public static EndAnswer of(Throwable failure) {
        Throwable cause = failure;
        while (cause != null && !(cause instanceof TransactionCoordinatorClientException)) {
            cause = cause.getCause();
        }
        if (cause instanceof TransactionCoordinatorClientException.InvalidTxnStatusException) {
            String message = String.valueOf(cause.getMessage());
            if (message.contains("is in COMMITTING") || message.contains("is in COMMITTED")) {
                return REFUSED_AS_COMMITTED;
            }
            if (message.contains("is in ABORTING") || message.contains("is in ABORTED")
                    || message.contains("was aborted on its timeout")) {
                return REFUSED_AS_ABORTED;
            }
            return REFUSED_OTHER;
        }
        if (cause instanceof TransactionCoordinatorClientException.TransactionNotFoundException) {
            return NOT_FOUND;
        }
        return null;
    }
}
