package io.github.txnpreserver.client;

import java.time.Duration;
import org.apache.pulsar.client.api.transaction.TxnID;

/**
 * The coordinator gave no answer within the retry policy's time: the transaction's outcome
 * is not known yet (it may still be decided by the coordinator, e.g. by its timeout).
 * Sending the request again later is safe.
 */
public class EndNotAnsweredException extends Exception {

    private static final long serialVersionUID = 1L;
    private final transient TxnID txnId;

    EndNotAnsweredException(TxnID txnId, TransactionOutcome requested, Duration triedFor, Throwable last) {
        super((requested == TransactionOutcome.COMMITTED ? "Commit" : "Abort") + " of " + txnId
                + " not answered within " + triedFor + "; last error: " + last, last);
        this.txnId = txnId;
    }

    public TxnID txnId() {
        return txnId;
    }
}
