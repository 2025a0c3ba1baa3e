package io.github.txnpreserver.testing;

import io.github.txnpreserver.preserver.TransactionMetadataPreserver;
import io.github.txnpreserver.preserver.kept.Outcome;
import java.util.concurrent.CompletableFuture;
import org.apache.pulsar.client.api.transaction.TxnID;

/** A transaction's end as the store drives it, with no transaction log between. */
public final class Ends {

    private Ends() {
    }

    /**
     * Decides, ends, and completes once the outcome is durable: the store's terminal step
     * ({@code decide}, then the terminal entry) followed by the log's release.
     */
    public static CompletableFuture<Void> preserve(TransactionMetadataPreserver preserver, TxnID txnId,
                                                   Outcome outcome, String owner) {
        CompletableFuture<Void> durable = new CompletableFuture<>();
        preserver.decide(txnId, outcome, owner).whenComplete((ignored, error) -> {
            if (error != null) {
                durable.completeExceptionally(error);
                return;
            }
            preserver.ended(txnId);
            afterDurable(preserver, txnId).thenRun(() -> durable.complete(null));
        });
        return durable;
    }

    /** Completes once the outcome of {@code txnId} as of now is durable: as the transaction log's release waits. */
    public static CompletableFuture<Void> afterDurable(TransactionMetadataPreserver preserver, TxnID txnId) {
        CompletableFuture<Void> durable = new CompletableFuture<>();
        preserver.afterOutcomeDurable(txnId.getLeastSigBits(), () -> durable.complete(null));
        return durable;
    }
}
