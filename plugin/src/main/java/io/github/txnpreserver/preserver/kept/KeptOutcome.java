package io.github.txnpreserver.preserver.kept;

import org.apache.pulsar.client.api.transaction.TxnID;

/** The outcome of one ended transaction, as the preserver keeps it. */
public record KeptOutcome(TxnID txnId, Outcome outcome, String owner, long endTimeMillis) {
}
