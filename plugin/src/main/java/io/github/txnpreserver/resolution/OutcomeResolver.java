package io.github.txnpreserver.resolution;

import io.github.txnpreserver.preserver.KeptOutcome;
import io.github.txnpreserver.preserver.TransactionMetadataPreserver;
import java.util.concurrent.CompletableFuture;
import java.util.function.Function;
import org.apache.pulsar.client.api.transaction.TxnID;
import org.apache.pulsar.transaction.coordinator.TxnMeta;

/**
 * The one place that answers "what is transaction X": live state, then the kept outcome,
 * then not found. See {@link Resolution} for what each answer means. Never blocks: both
 * sources are in memory.
 */
public final class OutcomeResolver {

    private final Function<TxnID, TxnMeta> liveTransactions;
    private final Function<TxnID, CompletableFuture<Void>> liveEnd;
    private final TransactionMetadataPreserver preserver;

    /**
     * @param liveTransactions the coordinator's live transaction, or null when it has none
     * @param liveEnd completes once the transaction is no longer live
     */
    public OutcomeResolver(Function<TxnID, TxnMeta> liveTransactions, Function<TxnID, CompletableFuture<Void>> liveEnd,
                           TransactionMetadataPreserver preserver) {
        this.liveTransactions = liveTransactions;
        this.liveEnd = liveEnd;
        this.preserver = preserver;
    }

    /**
     * The final answer: as {@link #resolve}, but a FINISHING transaction is waited for until
     * it has ended (then KEPT, or NOT_FOUND with retention off). A PENDING transaction is
     * answered as pending: only its client or its timeout can decide it.
     */
    public CompletableFuture<Answer> awaitFinal(TxnID txnId) {
        Answer answer = resolve(txnId);
        if (answer.resolution() != Resolution.FINISHING) {
            return CompletableFuture.completedFuture(answer);
        }
        return liveEnd.apply(txnId).thenApply(ignored -> resolve(txnId));
    }

    public Answer resolve(TxnID txnId) {
        TxnMeta live = liveTransactions.apply(txnId);
        if (live != null) {
            return new Answer(Resolution.ofLive(live.status()), live, null);
        }
        KeptOutcome kept = preserver.lookUp(txnId);
        if (kept != null) {
            return new Answer(Resolution.KEPT, new KeptTxnMeta(kept), kept);
        }
        return new Answer(Resolution.NOT_FOUND, null, null);
    }

    /**
     * @param meta what {@code getTxnMeta} reports, null when not found
     * @param kept the kept outcome when the resolution is {@link Resolution#KEPT}
     */
    public record Answer(Resolution resolution, TxnMeta meta, KeptOutcome kept) {
    }
}
