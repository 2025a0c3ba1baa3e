package io.github.txnpreserver.broker;

import static io.github.txnpreserver.testing.Futures.await;
import static io.github.txnpreserver.testing.Futures.failureOf;
import static org.assertj.core.api.Assertions.assertThat;
import static org.mockito.Mockito.mock;
import static org.mockito.Mockito.verify;
import static org.mockito.Mockito.verifyNoInteractions;
import static org.mockito.Mockito.when;

import io.github.txnpreserver.cleanup.StuckTransactionRedriver;
import io.github.txnpreserver.config.PreserverConfig;
import io.github.txnpreserver.statetopic.StateTopic;
import io.netty.util.Timer;
import java.time.Clock;
import java.time.Duration;
import java.util.Map;
import java.util.concurrent.CompletableFuture;
import org.apache.bookkeeper.mledger.ManagedLedgerConfig;
import org.apache.bookkeeper.mledger.ManagedLedgerFactory;
import org.apache.pulsar.transaction.coordinator.TransactionCoordinatorID;
import org.apache.pulsar.transaction.coordinator.TransactionMetadataStore;
import org.apache.pulsar.transaction.coordinator.TransactionMetadataStoreProvider;
import org.apache.pulsar.transaction.coordinator.TransactionRecoverTracker;
import org.apache.pulsar.transaction.coordinator.TransactionTimeoutTracker;
import org.apache.pulsar.transaction.coordinator.impl.MLTransactionSequenceIdGenerator;
import org.apache.pulsar.transaction.coordinator.impl.TxnLogBufferedWriterConfig;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.DisplayName;
import org.junit.jupiter.api.Test;

@DisplayName("The metadata store provider")
class PreservingMetadataStoreProviderTest {

    private static final StuckTransactionRedriver.EndRequester NO_ENDS = (txnId, outcome) -> {
        throw new AssertionError("no transaction is ended here");
    };
    private static final BrokerContext.CoordinatorReleaser NO_RELEASE = (coordinatorId, store) -> {
        throw new AssertionError("no coordinator is released here");
    };

    private final TransactionMetadataStoreProvider stock = mock(TransactionMetadataStoreProvider.class);
    /** How long an opening waits for the protocol handler here: short, so that its absence fails fast. */
    private static final Duration HANDLER_WAIT = Duration.ofMillis(200);
    private final PreservingMetadataStoreProvider provider = new PreservingMetadataStoreProvider(stock, HANDLER_WAIT);
    private final TransactionCoordinatorID tcId = TransactionCoordinatorID.get(1);
    private final ManagedLedgerFactory factory = mock(ManagedLedgerFactory.class);
    private final ManagedLedgerConfig ledgerConfig = new ManagedLedgerConfig();
    private final TransactionTimeoutTracker timeoutTracker = mock(TransactionTimeoutTracker.class);
    private final TransactionRecoverTracker recoverTracker = mock(TransactionRecoverTracker.class);
    private final TxnLogBufferedWriterConfig writerConfig = new TxnLogBufferedWriterConfig();
    private final Timer timer = mock(Timer.class);

    @AfterEach
    void clearContext() {
        BrokerContext.clear(timer);
    }

    private CompletableFuture<TransactionMetadataStore> open() {
        return provider.openStore(tcId, factory, ledgerConfig, timeoutTracker, recoverTracker, 7, writerConfig,
                timer);
    }

    private static PreserverConfig config(int persistCount) {
        return new PreserverConfig(persistCount, 100, Duration.ofHours(1), Duration.ofSeconds(1), Duration.ofSeconds(1));
    }

    @Test
    void withPersistCountZeroHandsOutTheStockStoreUnchanged() {
        TransactionMetadataStore stockStore = mock(TransactionMetadataStore.class);
        when(stock.openStore(tcId, factory, ledgerConfig, timeoutTracker, recoverTracker, 7, writerConfig, timer))
                .thenReturn(CompletableFuture.completedFuture(stockStore));
        BrokerContext.install(timer, new BrokerContext(config(0), id -> {
            throw new AssertionError("a pass-through opens no state topic");
        }, Clock.systemUTC(), NO_ENDS, NO_RELEASE));

        assertThat(await(open())).isSameAs(stockStore);
        verify(stock).openStore(tcId, factory, ledgerConfig, timeoutTracker, recoverTracker, 7, writerConfig, timer);
    }

    @Test
    void withoutTheProtocolHandlerRefusesToOpenAndSaysHowToFixIt() {
        Throwable failure = failureOf(open());

        assertThat(failure).isInstanceOf(IllegalStateException.class).hasMessageContaining("messagingProtocols");
        verifyNoInteractions(stock, factory);
    }

    /**
     * The broker starts its protocol handlers once it is ready, and may open a coordinator a
     * moment before: that opening waits for the handler rather than failing.
     */
    @Test
    void aCoordinatorOpenedBeforeTheProtocolHandlerStartedWaitsForIt() {
        TransactionMetadataStore stockStore = mock(TransactionMetadataStore.class);
        when(stock.openStore(tcId, factory, ledgerConfig, timeoutTracker, recoverTracker, 7, writerConfig, timer))
                .thenReturn(CompletableFuture.completedFuture(stockStore));
        PreservingMetadataStoreProvider patient = new PreservingMetadataStoreProvider(stock, Duration.ofSeconds(5));

        CompletableFuture<TransactionMetadataStore> opening = patient.openStore(tcId, factory, ledgerConfig,
                timeoutTracker, recoverTracker, 7, writerConfig, timer);
        assertThat(opening).isNotDone();
        BrokerContext.install(timer, new BrokerContext(config(0), id -> {
            throw new AssertionError("a pass-through opens no state topic");
        }, Clock.systemUTC(), NO_ENDS, NO_RELEASE));

        assertThat(await(opening)).isSameAs(stockStore);
    }

    /** An opening that gives up leaves the others waiting: none of them misses the hand-over. */
    @Test
    void anOpeningThatGaveUpDoesNotMakeALaterOneMissTheHandOver() {
        TransactionMetadataStore stockStore = mock(TransactionMetadataStore.class);
        when(stock.openStore(tcId, factory, ledgerConfig, timeoutTracker, recoverTracker, 7, writerConfig, timer))
                .thenReturn(CompletableFuture.completedFuture(stockStore));
        PreservingMetadataStoreProvider patient = new PreservingMetadataStoreProvider(stock, Duration.ofSeconds(5));
        CompletableFuture<TransactionMetadataStore> impatient = open();
        CompletableFuture<TransactionMetadataStore> waiting = patient.openStore(tcId, factory, ledgerConfig,
                timeoutTracker, recoverTracker, 7, writerConfig, timer);

        assertThat(failureOf(impatient)).hasMessageContaining("messagingProtocols");
        BrokerContext.install(timer, new BrokerContext(config(0), id -> {
            throw new AssertionError("a pass-through opens no state topic");
        }, Clock.systemUTC(), NO_ENDS, NO_RELEASE));

        assertThat(await(waiting)).isSameAs(stockStore);
    }

    @Test
    void aStateTopicThatCannotBeOpenedFailsTheCoordinatorLoadSoTheBrokerRetriesIt() {
        BrokerContext.install(timer, new BrokerContext(config(10),
                id -> CompletableFuture.<StateTopic>failedFuture(new IllegalStateException("topic unavailable")),
                Clock.systemUTC(), NO_ENDS, NO_RELEASE));

        assertThat(failureOf(open())).hasMessageContaining("topic unavailable");
        verifyNoInteractions(stock, factory);
    }

    @Test
    void theCoordinatorsOfABrokerShareOneMemoryBoundOfTheConfiguredSize() {
        PreserverConfig config = new PreserverConfig(10, 100, Duration.ofHours(1), Duration.ofSeconds(1),
                Duration.ofSeconds(1), 3L << 20);
        BrokerContext context = new BrokerContext(config, id -> new CompletableFuture<>(), Clock.systemUTC(),
                NO_ENDS, NO_RELEASE);

        assertThat(context.budget().limitBytes()).isEqualTo(3L << 20);
        assertThat(context.preservers()).isEmpty();
    }

    /**
     * Issue 14: several brokers in one JVM (Pulsar's own tests, embedded brokers). The
     * context was one static, installed by whichever broker started last and cleared by
     * whichever stopped first; now each broker's coordinators get their broker's context,
     * and a broker stopping leaves the others theirs.
     */
    @Test
    void eachBrokerOfAJvmOpensItsCoordinatorsWithItsOwnContextAndOneStoppingLeavesTheOthersTheirs() {
        Timer otherBroker = mock(Timer.class);
        TransactionMetadataStore stockStore = mock(TransactionMetadataStore.class);
        when(stock.openStore(tcId, factory, ledgerConfig, timeoutTracker, recoverTracker, 7, writerConfig, timer))
                .thenReturn(CompletableFuture.completedFuture(stockStore));
        BrokerContext.install(timer, new BrokerContext(config(0), id -> {
            throw new AssertionError("a pass-through opens no state topic");
        }, Clock.systemUTC(), NO_ENDS, NO_RELEASE));
        BrokerContext.install(otherBroker, new BrokerContext(config(10),
                id -> CompletableFuture.<StateTopic>failedFuture(new IllegalStateException("the other broker's topic")),
                Clock.systemUTC(), NO_ENDS, NO_RELEASE));

        assertThat(await(open())).as("this broker's context: pass-through").isSameAs(stockStore);
        assertThat(failureOf(provider.openStore(tcId, factory, ledgerConfig, timeoutTracker, recoverTracker, 7,
                writerConfig, otherBroker))).hasMessageContaining("the other broker's topic");

        BrokerContext.clear(otherBroker);

        assertThat(await(open())).as("still this broker's").isSameAs(stockStore);
        assertThat(failureOf(provider.openStore(tcId, factory, ledgerConfig, timeoutTracker, recoverTracker, 7,
                writerConfig, otherBroker))).hasMessageContaining("messagingProtocols");
    }
}
