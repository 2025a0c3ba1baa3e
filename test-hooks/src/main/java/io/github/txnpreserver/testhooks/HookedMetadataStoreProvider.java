package io.github.txnpreserver.testhooks;

import io.github.txnpreserver.broker.PreservingMetadataStoreProvider;
import io.github.txnpreserver.preserver.TransactionMetadataPreserver;
import io.github.txnpreserver.store.PreservingTransactionMetadataStore;
import org.apache.pulsar.transaction.coordinator.TransactionCoordinatorID;
import org.apache.pulsar.transaction.coordinator.TransactionTimeoutTracker;
import org.apache.pulsar.transaction.coordinator.impl.MLTransactionLogImpl;
import org.apache.pulsar.transaction.coordinator.impl.MLTransactionSequenceIdGenerator;

/**
 * The plugin's provider with fault injection, for the integration tests only: named in
 * {@code transactionMetadataStoreProviderClassName} of a test broker that has this jar in
 * {@code lib/} beside the plugin's. Each hook is off unless its system property is set on
 * that broker's JVM ({@link CrashPoint}, {@link EndMarkerRefusal}).
 */
public class HookedMetadataStoreProvider extends PreservingMetadataStoreProvider {

    @Override
    protected PreservingTransactionMetadataStore newStore(TransactionCoordinatorID tcId, MLTransactionLogImpl txnLog,
                                                          TransactionTimeoutTracker timeoutTracker,
                                                          MLTransactionSequenceIdGenerator sequenceIdGenerator,
                                                          long maxActiveTransactionsPerCoordinator,
                                                          TransactionMetadataPreserver preserver, Runnable onClosed) {
        return new HookedTransactionMetadataStore(tcId, txnLog, timeoutTracker, sequenceIdGenerator,
                maxActiveTransactionsPerCoordinator, preserver, onClosed);
    }
}
