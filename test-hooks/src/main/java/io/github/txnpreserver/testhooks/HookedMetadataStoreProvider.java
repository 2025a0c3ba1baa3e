package io.github.txnpreserver.testhooks;

import io.github.txnpreserver.broker.PreservingMetadataStoreProvider;
import io.github.txnpreserver.preserver.TransactionMetadataPreserver;
import io.github.txnpreserver.store.PreservingTransactionMetadataStore;
import io.github.txnpreserver.store.RewoundLogGuard;
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
