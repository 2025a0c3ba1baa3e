package io.github.txnpreserver.broker;

import io.github.txnpreserver.preserver.TransactionMetadataPreserver;
import io.github.txnpreserver.statetopic.StateTopic;
import io.github.txnpreserver.store.PreservingTransactionMetadataStore;
import io.github.txnpreserver.time.ExecutorScheduler;
import io.github.txnpreserver.time.Scheduler;
import io.netty.util.Timer;
import java.lang.reflect.Field;
import java.time.Duration;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.atomic.AtomicReference;
import org.apache.bookkeeper.mledger.ManagedLedgerConfig;
import org.apache.bookkeeper.mledger.ManagedLedgerFactory;
import org.apache.pulsar.transaction.coordinator.TransactionCoordinatorID;
import org.apache.pulsar.transaction.coordinator.TransactionMetadataStore;
import org.apache.pulsar.transaction.coordinator.TransactionMetadataStoreProvider;
import org.apache.pulsar.transaction.coordinator.TransactionRecoverTracker;
import org.apache.pulsar.transaction.coordinator.TransactionTimeoutTracker;
import org.apache.pulsar.transaction.coordinator.impl.DisabledTxnLogBufferedWriterMetricsStats;
import org.apache.pulsar.transaction.coordinator.impl.MLTransactionLogImpl;
import org.apache.pulsar.transaction.coordinator.impl.MLTransactionMetadataStoreProvider;
import org.apache.pulsar.transaction.coordinator.impl.MLTransactionSequenceIdGenerator;
import org.apache.pulsar.transaction.coordinator.impl.TxnLogBufferedWriterConfig;
import org.apache.pulsar.transaction.coordinator.impl.TxnLogBufferedWriterMetricsStats;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * The {@code transactionMetadataStoreProviderClassName} of the plugin.
 *
 * <p>Opens each coordinator as Pulsar's own managed-ledger store does, with the same log,
 * sequence-id interceptor and log metrics, and adds the preserver: the state topic is
 * opened (fencing any previous owner), then read in the background while the coordinator
 * already serves new transactions; lookups of ended ones wait (bounded) for that read.
 *
 * <p>With {@code transactionMetaPersistCount=0} it hands out the stock store unchanged.
 */
public class PreservingMetadataStoreProvider implements TransactionMetadataStoreProvider {

    private static final Logger log = LoggerFactory.getLogger(PreservingMetadataStoreProvider.class);
    static final String HANDLER_MISSING = "The transaction outcome preserver's protocol handler did not start:"
            + " add its archive to protocolHandlerDirectory and 'txn-preserver' to messagingProtocols in"
            + " broker.conf (see broker-conf-overlay/)";
    /**
     * How long an opening coordinator waits for the protocol handler to start: it starts
     * once the broker is ready, a moment after the broker may open its first coordinators.
     */
    static final Duration HANDLER_WAIT = Duration.ofSeconds(30);

    private final TransactionMetadataStoreProvider stock;
    private final Duration handlerWait;

    /** Used by the broker, through {@code transactionMetadataStoreProviderClassName}. */
    public PreservingMetadataStoreProvider() {
        this(new MLTransactionMetadataStoreProvider(), HANDLER_WAIT);
    }

    /** Over the stock provider and handler wait given: the broker's through the public constructor, or a test's. */
    PreservingMetadataStoreProvider(TransactionMetadataStoreProvider stock, Duration handlerWait) {
        this.stock = stock;
        this.handlerWait = handlerWait;
    }

    @Override
    public CompletableFuture<TransactionMetadataStore> openStore(
            TransactionCoordinatorID tcId, ManagedLedgerFactory managedLedgerFactory,
            ManagedLedgerConfig managedLedgerConfig, TransactionTimeoutTracker timeoutTracker,
            TransactionRecoverTracker recoverTracker, long maxActiveTransactionsPerCoordinator,
            TxnLogBufferedWriterConfig txnLogBufferedWriterConfig, Timer timer) {
        return BrokerContext.await(timer, handlerWait).handle((context, error) -> context)
                .thenCompose(context -> {
                    if (context == null) {
                        log.error(HANDLER_MISSING);
                        return CompletableFuture.failedFuture(new IllegalStateException(HANDLER_MISSING));
                    }
                    if (!context.config().enabled()) {
                        return stock.openStore(tcId, managedLedgerFactory, managedLedgerConfig, timeoutTracker,
                                recoverTracker, maxActiveTransactionsPerCoordinator, txnLogBufferedWriterConfig,
                                timer);
                    }
                    return context.stateTopics().open(tcId.getId())
                            .thenCompose(stateTopic -> openPreservingStore(context, tcId, stateTopic,
                                    managedLedgerFactory, managedLedgerConfig, timeoutTracker, recoverTracker,
                                    maxActiveTransactionsPerCoordinator, txnLogBufferedWriterConfig, timer));
                });
    }

    /**
     * Opens the transaction log, starts reading the state topic in the background (blocks up
     * to the log's highest sequence are not written until it is done; lookups of ended
     * transactions wait for it), then replays the log as the stock store does: the
     * coordinator serves new transactions at once, however many outcomes it keeps.
     */
    private CompletableFuture<TransactionMetadataStore> openPreservingStore(
            BrokerContext context, TransactionCoordinatorID tcId, StateTopic stateTopic,
            ManagedLedgerFactory managedLedgerFactory, ManagedLedgerConfig managedLedgerConfig,
            TransactionTimeoutTracker timeoutTracker, TransactionRecoverTracker recoverTracker,
            long maxActiveTransactionsPerCoordinator, TxnLogBufferedWriterConfig txnLogBufferedWriterConfig,
            Timer timer) {
        Scheduler scheduler = new ExecutorScheduler("txn-preserver-" + tcId.getId(), context.clock());
        TransactionMetadataPreserver preserver = new TransactionMetadataPreserver(tcId.getId(), context.config(),
                stateTopic, scheduler, context.budget(), TransactionMetadataPreserver.GROUP_COMMIT_INTERVAL);
        // Served (exported, waited for at close) from the start of its opening: its restore,
        // which may outlast the opening, is visible as such.
        context.preservers().put(tcId.getId(), preserver);
        AtomicReference<TransactionMetadataStore> opened = new AtomicReference<>();
        preserver.releaseCoordinatorWith(() -> opened.get() == null
                // Still opening: released once the broker has it (asked again shortly).
                ? CompletableFuture.failedFuture(new IllegalStateException("coordinator " + tcId + " still opening"))
                : context.releaser().release(tcId.getId(), opened.get()));
        MLTransactionSequenceIdGenerator sequenceIdGenerator = new MLTransactionSequenceIdGenerator();
        managedLedgerConfig.setManagedLedgerInterceptor(sequenceIdGenerator);
        MLTransactionLogImpl txnLog = new MLTransactionLogImpl(tcId, managedLedgerFactory, managedLedgerConfig,
                txnLogBufferedWriterConfig, timer, stockBufferedWriterMetrics());
        return txnLog.initialize()
                .thenCompose(ignored -> {
                    PreservingTransactionMetadataStore store = newStore(tcId, txnLog, timeoutTracker,
                            sequenceIdGenerator, maxActiveTransactionsPerCoordinator, preserver, () -> {
                                context.preservers().remove(tcId.getId(), preserver);
                                scheduler.shutdown();
                            });
                    store.startRestore();
                    return store.init(recoverTracker);
                })
                .whenComplete((store, error) -> {
                    if (error != null) {
                        log.error("Coordinator {}: could not open", tcId.getId(), error);
                        preserver.closeAsync().whenComplete((closed, closeError) -> {
                            context.preservers().remove(tcId.getId(), preserver);
                            scheduler.shutdown();
                        });
                    } else {
                        opened.set(store);
                        preserver.start();
                        ((PreservingTransactionMetadataStore) store).startCleanup(context.endRequester(),
                                context.config().stuckRedriveAfter());
                    }
                });
    }

    /**
     * The store of one coordinator, over its opened log and its preserver. Protected as a seam
     * of the {@code test-hooks} module, whose provider returns a store with its hooks.
     */
    protected PreservingTransactionMetadataStore newStore(TransactionCoordinatorID tcId, MLTransactionLogImpl txnLog,
                                                          TransactionTimeoutTracker timeoutTracker,
                                                          MLTransactionSequenceIdGenerator sequenceIdGenerator,
                                                          long maxActiveTransactionsPerCoordinator,
                                                          TransactionMetadataPreserver preserver, Runnable onClosed) {
        return new PreservingTransactionMetadataStore(tcId, txnLog, timeoutTracker, sequenceIdGenerator,
                maxActiveTransactionsPerCoordinator, preserver, onClosed);
    }


    /**
     * The transaction-log batching metrics the broker registered on the stock provider (a
     * private static there), so that the log metrics stay exactly as stock.
     */
    static TxnLogBufferedWriterMetricsStats stockBufferedWriterMetrics() {
        try {
            Field field = MLTransactionMetadataStoreProvider.class.getDeclaredField("bufferedWriterMetrics");
            field.setAccessible(true);
            return (TxnLogBufferedWriterMetricsStats) field.get(null);
        } catch (ReflectiveOperationException | RuntimeException e) {
            log.warn("Transaction-log batching metrics unavailable for preserving coordinators: {}", e.toString());
            return DisabledTxnLogBufferedWriterMetricsStats.DISABLED_BUFFERED_WRITER_METRICS;
        }
    }
}
