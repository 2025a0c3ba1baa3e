package io.github.txnpreserver.testing;

import static org.mockito.ArgumentMatchers.anyLong;
import static org.mockito.ArgumentMatchers.anyString;
import static org.mockito.Mockito.mock;
import static org.mockito.Mockito.when;

import io.github.txnpreserver.config.PreserverConfig;
import io.github.txnpreserver.preserver.OutcomeMemoryBudget;
import io.github.txnpreserver.preserver.PreserverInspection;
import io.github.txnpreserver.preserver.TransactionMetadataPreserver;
import io.github.txnpreserver.store.PreservingTransactionMetadataStore;
import io.netty.util.HashedWheelTimer;
import java.lang.reflect.Field;
import java.time.Duration;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import org.apache.pulsar.broker.TransactionMetadataStoreService;
import org.apache.pulsar.broker.transaction.recover.TransactionRecoverTrackerImpl;
import org.apache.pulsar.client.api.transaction.TransactionBufferClient;
import org.apache.pulsar.client.api.transaction.TxnID;
import org.apache.pulsar.common.api.proto.TxnAction;
import org.apache.pulsar.transaction.coordinator.TransactionCoordinatorID;
import org.apache.pulsar.transaction.coordinator.TransactionMetadataStore;
import org.apache.pulsar.transaction.coordinator.TransactionSubscription;
import org.apache.pulsar.transaction.coordinator.TransactionTimeoutTracker;
import org.apache.pulsar.transaction.coordinator.exceptions.CoordinatorException;
import org.apache.pulsar.transaction.coordinator.impl.MLTransactionLogImpl;
import org.apache.pulsar.transaction.coordinator.impl.MLTransactionSequenceIdGenerator;
import org.awaitility.Awaitility;

/**
 * One transaction coordinator as the broker runs it: the stock
 * {@link TransactionMetadataStoreService} (its real end-transaction chain, ownership check
 * and retry loop) over a {@link PreservingTransactionMetadataStore}, with the transaction
 * log and the state topic in memory and end markers recorded instead of sent.
 *
 * <p>Every collaborator records into one {@link CallLog}:
 * {@code log <op> <key>}, {@code state-write <key>} (see {@link InMemoryStateTopic}: a block key, and
 * each transaction whose entry it changed), {@code marker <COMMIT|ABORT> <partition> <key>}.
 */
public final class CoordinatorHarness implements AutoCloseable {

    public static final long TC_ID = 0;
    public static final long START_MILLIS = 1_700_000_000_000L;

    private final PreserverConfig config;
    private final StoreFactory storeFactory;
    private final CallLog callLog = new CallLog();
    private final MutableClock clock = new MutableClock(START_MILLIS);
    private final InMemoryTransactionLog transactionLog = new InMemoryTransactionLog(callLog);
    private final InMemoryStateTopic stateTopic = new InMemoryStateTopic(callLog);
    private final HashedWheelTimer timer = new HashedWheelTimer(10, TimeUnit.MILLISECONDS);
    private final TransactionBufferClient markers = mock(TransactionBufferClient.class);
    private final java.util.Set<String> refusingPartitions = java.util.concurrent.ConcurrentHashMap.newKeySet();
    private final java.util.Set<String> holdingPartitions = java.util.concurrent.ConcurrentHashMap.newKeySet();
    private final java.util.Queue<CompletableFuture<TxnID>> heldMarkers =
            new java.util.concurrent.ConcurrentLinkedQueue<>();
    private TransactionMetadataStoreService service;
    private ManualScheduler scheduler;
    private PreservingTransactionMetadataStore store;
    /** The current incarnation's restore. */
    private CompletableFuture<Void> restored;

    /** Makes the coordinator's store (the constructor's arguments): the plugin's own, or a test's subclass of it. */
    @FunctionalInterface
    public interface StoreFactory {
        PreservingTransactionMetadataStore create(TransactionCoordinatorID tcId, MLTransactionLogImpl transactionLog,
                                                  TransactionTimeoutTracker timeoutTracker,
                                                  MLTransactionSequenceIdGenerator sequenceIdGenerator,
                                                  long maxActiveTransactionsPerCoordinator,
                                                  TransactionMetadataPreserver preserver, Runnable onClosed);
    }

    private CoordinatorHarness(PreserverConfig config, StoreFactory storeFactory) {
        this.config = config;
        this.storeFactory = storeFactory;
        when(markers.commitTxnOnTopic(anyString(), anyLong(), anyLong(), anyLong()))
                .thenAnswer(call -> marker("COMMIT", call.getArgument(0), call.getArgument(1), call.getArgument(2)));
        when(markers.abortTxnOnTopic(anyString(), anyLong(), anyLong(), anyLong()))
                .thenAnswer(call -> marker("ABORT", call.getArgument(0), call.getArgument(1), call.getArgument(2)));
        when(markers.commitTxnOnSubscription(anyString(), anyString(), anyLong(), anyLong(), anyLong()))
                .thenAnswer(call -> marker("COMMIT", call.getArgument(0) + "/" + call.getArgument(1),
                        call.getArgument(2), call.getArgument(3)));
        when(markers.abortTxnOnSubscription(anyString(), anyString(), anyLong(), anyLong(), anyLong()))
                .thenAnswer(call -> marker("ABORT", call.getArgument(0) + "/" + call.getArgument(1),
                        call.getArgument(2), call.getArgument(3)));
    }

    /** A coordinator keeping {@code perClient} outcomes per client, at most {@code total} in all, for 72 h. */
    public static CoordinatorHarness start(int perClient, int total) {
        return start(new PreserverConfig(perClient, total, Duration.ofHours(72), Duration.ofSeconds(300),
                Duration.ofSeconds(60)));
    }

    public static CoordinatorHarness start(PreserverConfig config) {
        return start(config, PreservingTransactionMetadataStore::new);
    }

    /** A coordinator whose store {@code storeFactory} makes (at every opening). */
    public static CoordinatorHarness start(PreserverConfig config, StoreFactory storeFactory) {
        CoordinatorHarness harness = new CoordinatorHarness(config, storeFactory);
        harness.openCoordinator();
        Futures.await(harness.restored);
        return harness;
    }

    /** Closes the coordinator and opens it again over the same log and state topic, as a broker restart does. */
    public void restart() {
        store.closeAsync().join();
        openCoordinator();
        Futures.await(restored);
    }

    /**
     * Closes the coordinator, deletes its transaction log and opens it again over the same
     * state topic, its restore in the background: the log starts over with no sequence
     * allocated, as when an operator deletes it within the retention time.
     */
    public void restartWithTheLogDeleted() {
        store.closeAsync().join();
        transactionLog.deleteAndCreateAgain();
        openCoordinator();
    }

    /**
     * Closes the coordinator and opens it again as the broker does, with the state topic
     * read in the background: the coordinator serves before its restore is done (hold the
     * state topic's reads to keep it from finishing).
     */
    public void restartWithRestoreInBackground() {
        store.closeAsync().join();
        openCoordinator();
    }

    public TxnID open(String owner) {
        return store.newTransaction(60_000, owner).join();
    }

    public void produce(TxnID txn, String partition) {
        store.addProducedPartitionToTxn(txn, List.of(partition)).join();
    }

    public void acknowledge(TxnID txn, String topic, String subscription) {
        store.addAckedPartitionToTxn(txn, List.of(TransactionSubscription.builder()
                .topic(topic).subscription(subscription).build())).join();
    }

    /** A client's commit request, as ServerCnx handles it: ownership check, then the end chain. */
    public CompletableFuture<Void> commit(TxnID txn, String role) {
        return end(txn, TxnAction.COMMIT_VALUE, role);
    }

    /** A client's abort request, as ServerCnx handles it. */
    public CompletableFuture<Void> abort(TxnID txn, String role) {
        return end(txn, TxnAction.ABORT_VALUE, role);
    }

    /** The coordinator's own abort of a transaction that timed out. */
    public CompletableFuture<Void> timeoutAbort(TxnID txn) {
        return service.endTransaction(txn, TxnAction.ABORT_VALUE, true);
    }

    public CompletableFuture<Boolean> isOwner(TxnID txn, String role) {
        return service.verifyTxnOwnership(txn, role);
    }

    public long markerCount(String action, String partition, TxnID txn) {
        return callLog.count("marker " + action + " " + partition + " " + key(txn));
    }

    /** Waits until the ended transaction's record is durable: the log releases its entries only then. */
    public void awaitRecordDurable(TxnID txn) {
        // Failed writes are written again after a backoff: time is stepped while waiting.
        Awaitility.await().atMost(Duration.ofSeconds(5)).pollInterval(Duration.ofMillis(10)).until(() -> {
            scheduler.advance(Duration.ofMillis(100));
            return callLog.calls().contains("log released " + key(txn));
        });
    }

    public static String key(TxnID txn) {
        return txn.getMostSigBits() + ":" + txn.getLeastSigBits();
    }

    public PreservingTransactionMetadataStore store() {
        return store;
    }

    public TransactionMetadataStoreService service() {
        return service;
    }

    public TransactionMetadataPreserver preserver() {
        return store.preserver();
    }

    /** Completes once the current incarnation's restore is done. */
    public CompletableFuture<Void> restored() {
        return restored;
    }

    public CallLog callLog() {
        return callLog;
    }

    public MutableClock clock() {
        return clock;
    }

    /** The kept outcome of a transaction the coordinator no longer has live, or null (waits for the restore). */
    public io.github.txnpreserver.preserver.kept.KeptOutcome kept(TxnID txn) {
        return preserver().lookUp(txn).join();
    }

    /** What the resolver answers now. */
    public io.github.txnpreserver.resolution.Resolution resolution(TxnID txn) {
        return store.resolver().resolve(txn).join().resolution();
    }

    /** Until the coordinator's thread has run everything due now. */
    public void settle() {
        scheduler.runReady();
    }

    /** The coordinator's thread: its tasks run as they come; time moves only through it. */
    public ManualScheduler scheduler() {
        return scheduler;
    }

    public InMemoryTransactionLog transactionLog() {
        return transactionLog;
    }

    public InMemoryStateTopic stateTopic() {
        return stateTopic;
    }

    @Override
    public void close() {
        store.closeAsync().join();
        timer.stop();
    }

    private CompletableFuture<Void> end(TxnID txn, int action, String role) {
        return service.verifyTxnOwnership(txn, role).thenCompose(isOwner -> isOwner
                ? service.endTransaction(txn, action, false)
                : CompletableFuture.failedFuture(new CoordinatorException.TransactionNotFoundException(
                        "Client (" + role + ") is neither the owner of the transaction " + txn + " nor a super user")));
    }

    /**
     * The partition refuses end markers with an error the broker does not retry, as one that
     * is fenced or unloaded at the wrong moment does, until {@link #acceptMarkers}.
     */
    public void refuseMarkers(String partition) {
        refusingPartitions.add(partition);
    }

    public void acceptMarkers(String partition) {
        refusingPartitions.remove(partition);
    }

    /** End markers to the partition are taken but not answered until {@link #releaseMarkers}. */
    public void holdMarkers(String partition) {
        holdingPartitions.add(partition);
    }

    public int heldMarkerCount() {
        return heldMarkers.size();
    }

    public void releaseMarkers(String partition) {
        holdingPartitions.remove(partition);
        for (CompletableFuture<TxnID> held; (held = heldMarkers.poll()) != null; ) {
            held.complete(null);
        }
    }

    /** Ends a transaction through the broker's chain, as the background re-drive does. */
    public CompletableFuture<Void> endThroughBroker(TxnID txn, io.github.txnpreserver.preserver.kept.Outcome outcome) {
        return service.endTransaction(txn, outcome == io.github.txnpreserver.preserver.kept.Outcome.COMMITTED
                ? TxnAction.COMMIT_VALUE : TxnAction.ABORT_VALUE, false);
    }

    private CompletableFuture<TxnID> marker(String action, String partition, long most, long least) {
        if (refusingPartitions.contains(partition)) {
            callLog.record("marker refused " + action + " " + partition + " " + most + ":" + least);
            return CompletableFuture.failedFuture(new IllegalStateException("partition " + partition
                    + " refused the end marker"));
        }
        callLog.record("marker " + action + " " + partition + " " + most + ":" + least);
        if (holdingPartitions.contains(partition)) {
            CompletableFuture<TxnID> held = new CompletableFuture<>();
            heldMarkers.add(held);
            return held.thenApply(ignored -> new TxnID(most, least));
        }
        return CompletableFuture.completedFuture(new TxnID(most, least));
    }

    private void openCoordinator() {
        service = new TransactionMetadataStoreService(null, null, markers, timer);
        TransactionCoordinatorID tcId = TransactionCoordinatorID.get(TC_ID);
        TransactionTimeoutTracker timeoutTracker = mock(TransactionTimeoutTracker.class);
        MLTransactionSequenceIdGenerator sequenceIds = new MLTransactionSequenceIdGenerator();
        sequenceIds.onManagedLedgerPropertiesInitialize(Map.of(MLTransactionSequenceIdGenerator.MAX_LOCAL_TXN_ID,
                Long.toString(transactionLog.maxLocalTxnId())));
        // Each incarnation its own thread, as the provider's: closing one (a crash) must not stop the next.
        ManualScheduler thread = new ManualScheduler(clock).pump();
        scheduler = thread;
        TransactionMetadataPreserver preserver = new TransactionMetadataPreserver(TC_ID, config, stateTopic,
                scheduler, new OutcomeMemoryBudget(config.maxMemoryBytes()), Duration.ZERO);
        TransactionRecoverTrackerImpl recoverTracker = new TransactionRecoverTrackerImpl(service, timeoutTracker,
                TC_ID);
        store = storeFactory.create(tcId, transactionLog.newMock(), timeoutTracker, sequenceIds, 0, preserver,
                thread::shutdown);
        // As the provider does: the restore runs in the background, and blocks up to the
        // log's highest sequence are held until it is done; a new log issues nothing before.
        store.startRestore();
        restored = PreserverInspection.whenRestored(preserver);
        store.init(recoverTracker).join();
        registerInService(tcId, store);
        recoverTracker.handleCommittingAndAbortingTransaction();
    }

    @SuppressWarnings("unchecked")
    private void registerInService(TransactionCoordinatorID tcId, TransactionMetadataStore metadataStore) {
        try {
            Field stores = TransactionMetadataStoreService.class.getDeclaredField("stores");
            stores.setAccessible(true);
            ((Map<TransactionCoordinatorID, TransactionMetadataStore>) stores.get(service)).put(tcId, metadataStore);
        } catch (ReflectiveOperationException e) {
            throw new IllegalStateException(e);
        }
    }
}
