package io.github.txnpreserver.testhooks;

import io.github.txnpreserver.broker.PreservingMetadataStoreProvider;
import io.github.txnpreserver.preserver.TransactionMetadataPreserver;
import io.github.txnpreserver.store.PreservingTransactionMetadataStore;
import io.github.txnpreserver.store.RewoundLogGuard;
import io.netty.util.Timer;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.file.Files;
import java.nio.file.NoSuchFileException;
import java.nio.file.Path;
import java.util.concurrent.CompletableFuture;
import org.apache.bookkeeper.mledger.AsyncCallbacks;
import org.apache.bookkeeper.mledger.ManagedLedgerConfig;
import org.apache.bookkeeper.mledger.ManagedLedgerException;
import org.apache.bookkeeper.mledger.ManagedLedgerFactory;
import org.apache.pulsar.transaction.coordinator.TransactionMetadataStore;
import org.apache.pulsar.transaction.coordinator.TransactionRecoverTracker;
import org.apache.pulsar.transaction.coordinator.impl.TxnLogBufferedWriterConfig;
import org.apache.pulsar.transaction.coordinator.TransactionCoordinatorID;
import org.apache.pulsar.transaction.coordinator.TransactionTimeoutTracker;
import org.apache.pulsar.transaction.coordinator.impl.MLTransactionLogImpl;
import org.apache.pulsar.transaction.coordinator.impl.MLTransactionSequenceIdGenerator;

/**
 * The plugin's provider with fault injection, for the integration tests only: named in
 * {@code transactionMetadataStoreProviderClassName} of a test broker that has this jar in
 * {@code lib/} beside the plugin's. Each hook is off unless its system property is set on
 * that broker's JVM ({@link CrashPoint}, {@link EndMarkerRefusal}, {@link #SEQUENCE_FLOOR}).
 */
public class HookedMetadataStoreProvider extends PreservingMetadataStoreProvider {

    /**
     * System property: the sequence id a coordinator's log has allocated at least, as if
     * that many transactions had been opened (a restore keeps no block past what the log
     * has allocated, and a test cannot open millions of transactions first).
     */
    public static final String SEQUENCE_FLOOR = "txnpreserver.testhooks.sequenceFloor";

    /**
     * System property: a file whose presence makes the next opening of a coordinator delete its
     * transaction log first (the file is removed), as an operator deleting the log within the
     * retention time: the log is created again, new, while the state topic keeps its outcomes.
     */
    public static final String DELETE_LOG_WHEN_FILE_EXISTS = "txnpreserver.testhooks.deleteTransactionLogWhenFileExists";

    @Override
    public CompletableFuture<TransactionMetadataStore> openStore(
            TransactionCoordinatorID tcId, ManagedLedgerFactory managedLedgerFactory,
            ManagedLedgerConfig managedLedgerConfig, TransactionTimeoutTracker timeoutTracker,
            TransactionRecoverTracker recoverTracker, long maxActiveTransactionsPerCoordinator,
            TxnLogBufferedWriterConfig txnLogBufferedWriterConfig, Timer timer) {
        String trigger = System.getProperty(DELETE_LOG_WHEN_FILE_EXISTS);
        if (trigger == null || !claim(Path.of(trigger))) {
            return super.openStore(tcId, managedLedgerFactory, managedLedgerConfig, timeoutTracker, recoverTracker,
                    maxActiveTransactionsPerCoordinator, txnLogBufferedWriterConfig, timer);
        }
        CompletableFuture<Void> deleted = new CompletableFuture<>();
        managedLedgerFactory.asyncDelete(MLTransactionLogImpl.getMLTransactionLogName(tcId)
                .getPersistenceNamingEncoding(), new AsyncCallbacks.DeleteLedgerCallback() {
                    @Override
                    public void deleteLedgerComplete(Object ctx) {
                        deleted.complete(null);
                    }

                    @Override
                    public void deleteLedgerFailed(ManagedLedgerException exception, Object ctx) {
                        deleted.completeExceptionally(exception);
                    }
                }, null);
        return deleted.thenCompose(ignored -> super.openStore(tcId, managedLedgerFactory, managedLedgerConfig,
                timeoutTracker, recoverTracker, maxActiveTransactionsPerCoordinator, txnLogBufferedWriterConfig,
                timer));
    }

    /** Removes the trigger file: true if this call removed it. */
    private static boolean claim(Path trigger) {
        try {
            Files.delete(trigger);
            return true;
        } catch (NoSuchFileException absent) {
            return false;
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        }
    }

    @Override
    protected PreservingTransactionMetadataStore newStore(TransactionCoordinatorID tcId, MLTransactionLogImpl txnLog,
                                                          TransactionTimeoutTracker timeoutTracker,
                                                          MLTransactionSequenceIdGenerator sequenceIdGenerator,
                                                          long maxActiveTransactionsPerCoordinator,
                                                          TransactionMetadataPreserver preserver, Runnable onClosed) {
        String floor = System.getProperty(SEQUENCE_FLOOR);
        if (floor != null && RewoundLogGuard.highestSequence(sequenceIdGenerator)
                < Long.parseLong(floor)) {
            sequenceIdGenerator.onManagedLedgerPropertiesInitialize(
                    java.util.Map.of(MLTransactionSequenceIdGenerator.MAX_LOCAL_TXN_ID, floor));
        }
        return new HookedTransactionMetadataStore(tcId, txnLog, timeoutTracker, sequenceIdGenerator,
                maxActiveTransactionsPerCoordinator, preserver, onClosed);
    }
}
