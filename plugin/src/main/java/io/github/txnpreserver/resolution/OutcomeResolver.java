package io.github.txnpreserver.resolution;

import io.github.txnpreserver.preserver.KeptOutcome;
import io.github.txnpreserver.preserver.TransactionMetadataPreserver;
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
    private final TransactionMetadataPreserver preserver;

    /**
     * @param liveTransactions the coordinator's live transaction, or null when it has none
     */
    public OutcomeResolver(Function<TxnID, TxnMeta> liveTransactions, TransactionMetadataPreserver preserver) {
        this.liveTransactions = liveTransactions;
        this.preserver = preserver;
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
