package io.github.txnpreserver.store;

import static io.github.txnpreserver.testing.Futures.await;
import static io.github.txnpreserver.testing.Futures.failureOf;
import static org.assertj.core.api.Assertions.assertThat;
import static org.mockito.Mockito.mock;
import static org.mockito.Mockito.when;

import io.github.txnpreserver.config.PreserverConfig;
import io.github.txnpreserver.preserver.OutcomeMemoryBudget;
import io.github.txnpreserver.preserver.TransactionMetadataPreserver;
import io.github.txnpreserver.testing.CallLog;
import io.github.txnpreserver.testing.CoordinatorHarness;
import io.github.txnpreserver.testing.InMemoryStateTopic;
import io.github.txnpreserver.testing.InMemoryTransactionLog;
import io.github.txnpreserver.testing.ManualScheduler;
import java.time.Duration;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.atomic.AtomicInteger;
import org.apache.bookkeeper.mledger.Position;
import org.apache.pulsar.client.api.transaction.TxnID;
import org.apache.pulsar.transaction.coordinator.TransactionCoordinatorID;
import org.apache.pulsar.transaction.coordinator.TransactionTimeoutTracker;
import org.apache.pulsar.transaction.coordinator.TxnMeta;
import org.apache.pulsar.transaction.coordinator.exceptions.CoordinatorException.CoordinatorNotFoundException;
import org.apache.pulsar.transaction.coordinator.impl.MLTransactionLogImpl;
import org.apache.pulsar.transaction.coordinator.impl.MLTransactionSequenceIdGenerator;
import org.apache.pulsar.transaction.coordinator.proto.TransactionMetadataEntry.TransactionMetadataOp;
import org.apache.pulsar.transaction.coordinator.proto.TransactionMetadataEntry;
import org.apache.pulsar.transaction.coordinator.proto.TxnStatus;
import org.junit.jupiter.api.DisplayName;
import org.junit.jupiter.api.Test;

/** What the store and its gated log show besides the ends: the finishing transactions, the stock log's own parts. */
@DisplayName("The store's surface")
class StoreSurfaceTest {

    private static final String PARTITION = "persistent://public/default/orders-partition-0";

    @Test
    void theFinishingTransactionsAreTheLiveOnesCommittingOrAborting() {
        CoordinatorHarness coordinator = CoordinatorHarness.start(10, 1000);
        try {
            TxnID open = coordinator.open("alice");
            TxnID committing = coordinator.open("alice");
            TxnID aborting = coordinator.open("alice");
            coordinator.produce(committing, PARTITION);
            coordinator.produce(aborting, PARTITION);
            coordinator.holdMarkers(PARTITION);
            CompletableFuture<Void> commit = coordinator.commit(committing, "alice");
            CompletableFuture<Void> abort = coordinator.abort(aborting, "alice");
            org.awaitility.Awaitility.await().atMost(Duration.ofSeconds(5))
                    .until(() -> coordinator.heldMarkerCount() == 2);

            assertThat(coordinator.store().finishingTransactions()).extracting(TxnMeta::id)
                    .containsExactlyInAnyOrder(committing, aborting).doesNotContain(open);

            coordinator.releaseMarkers(PARTITION);
            await(commit);
            await(abort);
            assertThat(coordinator.store().finishingTransactions()).isEmpty();
        } finally {
            coordinator.close();
        }
    }

    @Test
    void theGatedLogsLedgerAndInitializationAreTheStockLogs() {
        MLTransactionLogImpl stock = new InMemoryTransactionLog(calls).newMock();
        CompletableFuture<Void> initialized = new CompletableFuture<>();
        when(stock.initialize()).thenReturn(initialized);
        try {
            MLTransactionLogImpl gated = RecordGatedTransactionLog.gate(new TransactionCoordinatorID(3), stock,
                    preserver, new TimeoutAborts());

            assertThat(gated.getManagedLedger()).isNotNull().isSameAs(stock.getManagedLedger());
            assertThat(gated.initialize()).isSameAs(initialized);
        } finally {
            scheduler.shutdown();
        }
    }

    private static final PreserverConfig CONFIG = new PreserverConfig(10, 1000, Duration.ofHours(72),
            Duration.ofSeconds(300), Duration.ofSeconds(60));
    private final ManualScheduler scheduler = new ManualScheduler(1_700_000_000_000L);
    private final CallLog calls = new CallLog();
    private final TransactionMetadataPreserver preserver = new TransactionMetadataPreserver(3, CONFIG,
            new InMemoryStateTopic(calls), scheduler, new OutcomeMemoryBudget(CONFIG.maxMemoryBytes()),
            TransactionMetadataPreserver.GROUP_COMMIT_INTERVAL);

    /** A store not opened: no restore started, no replay. Counts its scans for stuck transactions. */
    private static final class Unopened extends PreservingTransactionMetadataStore {
        final AtomicInteger scans = new AtomicInteger();

        Unopened(TransactionMetadataPreserver preserver, MLTransactionLogImpl log) {
            this(preserver, log, () -> { });
        }

        Unopened(TransactionMetadataPreserver preserver, MLTransactionLogImpl log, Runnable onClosed) {
            super(new TransactionCoordinatorID(3), log, mock(TransactionTimeoutTracker.class),
                    new MLTransactionSequenceIdGenerator(), 1000, preserver, onClosed);
        }

        @Override
        public List<TxnMeta> finishingTransactions() {
            scans.incrementAndGet();
            return super.finishingTransactions();
        }
    }

    @Test
    void aStoreWhoseRestoreHasNotStartedIssuesNoTransaction() {
        Unopened store = new Unopened(preserver, new InMemoryTransactionLog(calls).newMock());
        try {
            assertThat(failureOf(store.newTransaction(60_000, "alice")))
                    .isInstanceOf(CoordinatorNotFoundException.class).hasMessageContaining("has not started its restore");
        } finally {
            store.closeAsync();
            scheduler.shutdown();
        }
    }

    @Test
    void aTransactionNotLiveAskedBeforeTheRestoreEndsIsAnsweredAfterTheRestoreWaitAsACoordinatorToLookUpAgain() {
        Unopened store = new Unopened(preserver, new InMemoryTransactionLog(calls).newMock());
        try {
            CompletableFuture<TxnMeta> meta = store.getTxnMeta(new TxnID(3, 5));

            assertThat(meta).as("answered by the coordinator's thread, once the restore is read").isNotDone();
            scheduler.advance(TransactionMetadataPreserver.RESTORE_WAIT.minusMillis(1));
            assertThat(meta).as("the whole restore wait").isNotDone();
            scheduler.advance(Duration.ofMillis(1));
            assertThat(failureOf(meta)).isInstanceOf(CoordinatorNotFoundException.class)
                    .hasMessageContaining("is still reading its state topic");
        } finally {
            store.closeAsync();
            scheduler.shutdown();
        }
    }

    @Test
    void aTransactionNotLiveAskedOfACoordinatorWhoseThreadStoppedFailsItsAnswerNotItsCaller() {
        Unopened store = new Unopened(preserver, new InMemoryTransactionLog(calls).newMock());
        scheduler.shutdown();
        try {
            CompletableFuture<TxnMeta> meta = store.getTxnMeta(new TxnID(3, 5));

            assertThat(failureOf(meta)).as("a coordinator to look up again").isInstanceOf(CoordinatorNotFoundException.class);
        } finally {
            store.closeAsync();
        }
    }

    @Test
    void scansForStuckTransactionsEveryStuckAfterWhenShorterThanFiveSeconds() {
        Unopened store = new Unopened(preserver, new InMemoryTransactionLog(calls).newMock());
        try {
            store.startCleanup((txn, outcome) -> CompletableFuture.completedFuture(null), Duration.ofSeconds(2));

            scheduler.advance(Duration.ofSeconds(2));
            assertThat(store.scans).hasValue(1);
            scheduler.advance(Duration.ofSeconds(2));
            assertThat(store.scans).hasValue(2);
        } finally {
            store.closeAsync();
            scheduler.shutdown();
        }
    }

    @Test
    void scansForStuckTransactionsEveryFiveSecondsWhenStuckAfterIsLonger() {
        Unopened store = new Unopened(preserver, new InMemoryTransactionLog(calls).newMock());
        try {
            store.startCleanup((txn, outcome) -> CompletableFuture.completedFuture(null), Duration.ofMinutes(1));

            scheduler.advance(Duration.ofMillis(4_999));
            assertThat(store.scans).hasValue(0);
            scheduler.advance(Duration.ofMillis(1));
            assertThat(store.scans).hasValue(1);
        } finally {
            store.closeAsync();
            scheduler.shutdown();
        }
    }

    @Test
    void closingTheStoreClosesItsPreserverThenTellsItsOwner() {
        AtomicInteger ownerTold = new AtomicInteger();
        Unopened store = new Unopened(preserver, new InMemoryTransactionLog(calls).newMock(), ownerTold::incrementAndGet);
        try {
            CompletableFuture<Void> closing = store.closeAsync();
            scheduler.runReady();

            assertThat(closing).isCompleted();
            assertThat(ownerTold).hasValue(1);
            CompletableFuture<?> lookUp = preserver.lookUp(new TxnID(3, 1));
            scheduler.runReady();
            assertThat(failureOf(lookUp)).as("its preserver closed")
                    .isInstanceOf(io.github.txnpreserver.preserver.thread.PreserverUnavailableException.class);
        } finally {
            scheduler.shutdown();
        }
    }

    @Test
    void theReleaseOfEntriesOfNoEndedTransactionIsTheStockLogs() {
        InMemoryTransactionLog log = new InMemoryTransactionLog(calls);
        MLTransactionLogImpl gated = RecordGatedTransactionLog.gate(new TransactionCoordinatorID(3), log.newMock(),
                preserver, new TimeoutAborts());
        try {
            Position opened = gated.append(new TransactionMetadataEntry().setTxnidMostBits(3).setTxnidLeastBits(1)
                    .setMetadataOp(TransactionMetadataOp.NEW).setStartTime(1).setTimeoutMs(60_000)
                    .setLastModificationTime(1).setOwner("alice")).join();

            CompletableFuture<Void> released = gated.deletePosition(List.of(opened));

            assertThat(released).isNotNull().isCompleted();
        } finally {
            scheduler.shutdown();
        }
    }

    /** The stock store's release of an ended transaction's entries is answered at once; they leave once durable. */
    @Test
    void theReleaseOfAnEndedTransactionsEntriesIsAnsweredAtOnce() {
        MLTransactionLogImpl gated = RecordGatedTransactionLog.gate(new TransactionCoordinatorID(3),
                new InMemoryTransactionLog(calls).newMock(), preserver, new TimeoutAborts());
        try {
            Position terminal = gated.append(new TransactionMetadataEntry().setTxnidMostBits(3).setTxnidLeastBits(1)
                    .setMetadataOp(TransactionMetadataOp.UPDATE).setExpectedStatus(TxnStatus.COMMITTING)
                    .setNewStatus(TxnStatus.COMMITTED).setLastModificationTime(1)).join();

            CompletableFuture<Void> released = gated.deletePosition(List.of(terminal));

            assertThat(released).isNotNull().isCompleted();
        } finally {
            scheduler.shutdown();
        }
    }
}
