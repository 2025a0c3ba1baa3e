package io.github.txnpreserver.resolution;

import io.github.txnpreserver.preserver.TransactionMetadataPreserver;
import java.util.concurrent.CompletableFuture;
import java.util.function.Function;
import java.util.function.LongPredicate;
import org.apache.pulsar.client.api.transaction.TxnID;
import org.apache.pulsar.transaction.coordinator.TxnMeta;
import org.apache.pulsar.transaction.coordinator.proto.TxnStatus;

/**
 * The one place that answers "what is transaction X", in one order (IGNITE-20034): live
 * state, then the kept outcome, then not found. See {@link Resolution} for what each answer
 * means. Never blocks: the live state is in memory, the kept outcome an answer of the
 * coordinator's thread (which waits, bounded, for a restore that is still reading).
 *
 * <p>A transaction the coordinator aborted on its timeout, finishing or kept, is reported OPEN
 * to the broker's end-transaction chain (its status, as the chain reads it: {@link BrokerEndCheck};
 * with its partitions while finishing, none once kept): the broker then hands the end's action
 * to the store's status step instead of checking it itself, and the store answers an abort
 * as the retry it is and refuses a commit with a message naming the timeout (docs/answers.md,
 * "Timeout-aborts"). It is the one way the broker lets a store see a commit of an aborted
 * transaction. Every other caller (the admin view, the ownership check, the timeout tracker)
 * sees ABORTING, as for any abort.
 */
public final class OutcomeResolver {

    private final Function<TxnID, TxnMeta> liveTransactions;
    private final LongPredicate abortingOnTimeout;
    private final TransactionMetadataPreserver preserver;

    /**
     * @param liveTransactions the coordinator's live transaction, or null when it has none
     * @param abortingOnTimeout whether a live sequence's abort was begun by its timeout
     */
    public OutcomeResolver(Function<TxnID, TxnMeta> liveTransactions, LongPredicate abortingOnTimeout,
                           TransactionMetadataPreserver preserver) {
        this.liveTransactions = liveTransactions;
        this.abortingOnTimeout = abortingOnTimeout;
        this.preserver = preserver;
    }

    /** Fails with {@code PreserverUnavailableException} when the kept outcomes cannot be asked now. */
    public CompletableFuture<Answer> resolve(TxnID txnId) {
        TxnMeta live = liveTransactions.apply(txnId);
        if (live != null) {
            TxnMeta reported = live.status() == TxnStatus.ABORTING && abortingOnTimeout.test(txnId.getLeastSigBits())
                    ? new ReportedOpen(live) : live;
            return CompletableFuture.completedFuture(new Answer(Resolution.ofLive(live.status()), reported));
        }
        return preserver.lookUp(txnId).thenApply(kept -> kept == null
                ? new Answer(Resolution.NOT_FOUND, null)
                : new Answer(Resolution.KEPT, new KeptTxnMeta(kept)));
    }

    /** @param meta what {@code getTxnMeta} reports, null when not found */
    public record Answer(Resolution resolution, TxnMeta meta) {
    }
}
