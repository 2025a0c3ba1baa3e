package io.github.txnpreserver.resolution;

import io.github.txnpreserver.preserver.TransactionMetadataPreserver;
import java.util.concurrent.CompletableFuture;
import java.util.function.Function;
import org.apache.pulsar.client.api.transaction.TxnID;
import org.apache.pulsar.transaction.coordinator.TxnMeta;

/**
 * The one place that answers "what is transaction X", in one order (IGNITE-20034): live
 * state, then the kept outcome, then not found. See {@link Resolution} for what each answer
 * means. Never blocks: the live state is in memory, the kept outcome an answer of the
 * coordinator's thread (which waits, bounded, for a restore that is still reading).
 */
public final class OutcomeResolver {

    private final Function<TxnID, TxnMeta> liveTransactions;
    private final TransactionMetadataPreserver preserver;

    /** @param liveTransactions the coordinator's live transaction, or null when it has none */
    public OutcomeResolver(Function<TxnID, TxnMeta> liveTransactions, TransactionMetadataPreserver preserver) {
        this.liveTransactions = liveTransactions;
        this.preserver = preserver;
    }

    /** Fails with {@code PreserverUnavailableException} when the kept outcomes cannot be asked now. */
    public CompletableFuture<Answer> resolve(TxnID txnId) {
        TxnMeta live = liveTransactions.apply(txnId);
        if (live != null) {
            return CompletableFuture.completedFuture(new Answer(Resolution.ofLive(live.status()), live));
        }
        return preserver.lookUp(txnId).thenApply(kept -> kept == null
                ? new Answer(Resolution.NOT_FOUND, null)
                : new Answer(Resolution.KEPT, new KeptTxnMeta(kept)));
    }

    /** @param meta what {@code getTxnMeta} reports, null when not found */
    public record Answer(Resolution resolution, TxnMeta meta) {
    }
}
