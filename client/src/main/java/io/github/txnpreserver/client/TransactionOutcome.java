package io.github.txnpreserver.client;

/** What became of a transaction, as its coordinator answered an end request. */
public enum TransactionOutcome {
    /** Committed: the request committed it, or it had been committed (or was committing) already. */
    COMMITTED,
    /** Aborted: by this request, by its client earlier, by its timeout, or by an admin. */
    ABORTED,
    /**
     * The coordinator does not know it: it never existed, it ended longer ago than the broker
     * keeps outcomes (or the broker keeps none: stock Pulsar, or the plugin switched off), or
     * another role owns it. Nothing about its data can be concluded.
     */
    UNKNOWN
}
