package io.github.txnpreserver.testhooks;

import io.github.txnpreserver.preserver.TransactionMetadataPreserver;
import io.github.txnpreserver.preserver.kept.Outcome;
import io.github.txnpreserver.store.PreservingTransactionMetadataStore;
import java.util.concurrent.CompletableFuture;
import org.apache.pulsar.client.api.transaction.TxnID;
import org.apache.pulsar.transaction.coordinator.TransactionCoordinatorID;
import org.apache.pulsar.transaction.coordinator.TransactionTimeoutTracker;
import org.apache.pulsar.transaction.coordinator.TxnMeta;
import org.apache.pulsar.transaction.coordinator.impl.MLTransactionLogImpl;
import org.apache.pulsar.transaction.coordinator.impl.MLTransactionSequenceIdGenerator;
import org.apache.pulsar.transaction.coordinator.proto.TxnStatus;

/**
 * The plugin's store with a crash point after each step of the end chain and, while asked
 * for, end markers refused: each step is one of the store's named methods, so a hook wraps
 * exactly that step.
 */
final class HookedTransactionMetadataStore extends PreservingTransactionMetadataStore {

    HookedTransactionMetadataStore(TransactionCoordinatorID tcId, MLTransactionLogImpl txnLog,
                                   TransactionTimeoutTracker timeoutTracker,
                                   MLTransactionSequenceIdGenerator sequenceIdGenerator,
                                   long maxActiveTransactionsPerCoordinator,
                                   TransactionMetadataPreserver preserver, Runnable onClosed) {
        super(tcId, txnLog, timeoutTracker, sequenceIdGenerator, maxActiveTransactionsPerCoordinator, preserver,
                onClosed);
    }

    /** The broker reads a finishing transaction's partitions to send its end markers. */
    @Override
    public CompletableFuture<TxnMeta> getTxnMeta(TxnID txnId) {
        return super.getTxnMeta(txnId).thenApply(meta -> {
            if (meta.status() == TxnStatus.COMMITTING || meta.status() == TxnStatus.ABORTING) {
                CrashPoint.reached(CrashPoint.Step.DURING_MARKERS, 2);
                return EndMarkerRefusal.apply(meta);
            }
            return meta;
        });
    }

    @Override
    protected CompletableFuture<Void> beginEnding(TxnID txnId, TxnStatus newStatus, TxnStatus expectedStatus,
                                                  boolean isTimeout) {
        return super.beginEnding(txnId, newStatus, expectedStatus, isTimeout)
                .thenRun(() -> CrashPoint.reached(CrashPoint.Step.AFTER_FINISHING_ENTRY, 0));
    }

    @Override
    protected CompletableFuture<Void> keepDecided(TxnID txnId, Outcome decided, String owner) {
        return super.keepDecided(txnId, decided, owner)
                .thenRun(() -> CrashPoint.reached(CrashPoint.Step.AFTER_KEPT_BEFORE_TERMINAL_ENTRY, 0));
    }

    @Override
    protected void ended(TxnID txnId) {
        CrashPoint.reached(CrashPoint.Step.AFTER_TERMINAL_ENTRY, 0);
        super.ended(txnId);
    }
}
