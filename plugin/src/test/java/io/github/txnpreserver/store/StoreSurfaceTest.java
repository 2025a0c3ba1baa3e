package io.github.txnpreserver.store;

import static io.github.txnpreserver.testing.Futures.await;
import static org.assertj.core.api.Assertions.assertThat;
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
import java.util.concurrent.CompletableFuture;
import org.apache.pulsar.client.api.transaction.TxnID;
import org.apache.pulsar.transaction.coordinator.TransactionCoordinatorID;
import org.apache.pulsar.transaction.coordinator.TxnMeta;
import org.apache.pulsar.transaction.coordinator.impl.MLTransactionLogImpl;
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
        PreserverConfig config = new PreserverConfig(10, 1000, Duration.ofHours(72), Duration.ofSeconds(300),
                Duration.ofSeconds(60));
        ManualScheduler scheduler = new ManualScheduler(1_700_000_000_000L);
        CallLog calls = new CallLog();
        TransactionMetadataPreserver preserver = new TransactionMetadataPreserver(3, config,
                new InMemoryStateTopic(calls), scheduler, new OutcomeMemoryBudget(config.maxMemoryBytes()),
                TransactionMetadataPreserver.GROUP_COMMIT_INTERVAL);
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
}
