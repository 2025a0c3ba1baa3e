package io.github.txnpreserver.broker;

import io.github.txnpreserver.config.PreserverConfig;
import io.github.txnpreserver.metrics.PreserverMetrics;
import io.github.txnpreserver.preserver.kept.Outcome;
import io.github.txnpreserver.statetopic.PulsarStateTopic;
import io.github.txnpreserver.statetopic.StateTopic;
import io.netty.channel.ChannelInitializer;
import io.netty.channel.socket.SocketChannel;
import java.net.InetSocketAddress;
import java.time.Clock;
import java.time.Duration;
import java.util.Map;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import org.apache.pulsar.PulsarVersion;
import org.apache.pulsar.broker.PulsarServerException;
import org.apache.pulsar.broker.PulsarService;
import org.apache.pulsar.broker.ServiceConfiguration;
import org.apache.pulsar.broker.protocol.ProtocolHandler;
import org.apache.pulsar.broker.service.BrokerService;
import org.apache.pulsar.broker.service.TopicPoliciesService;
import org.apache.pulsar.client.api.AuthenticationFactory;
import org.apache.pulsar.client.api.PulsarClient;
import org.apache.pulsar.client.api.PulsarClientException;
import org.apache.pulsar.client.impl.PulsarClientImpl;
import org.apache.pulsar.client.impl.conf.ClientConfigurationData;
import org.apache.pulsar.common.api.proto.TxnAction;
import org.apache.pulsar.common.naming.SystemTopicNames;
import org.apache.pulsar.transaction.coordinator.TransactionCoordinatorID;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * The plugin's entry point in the broker: reads and validates its broker.conf keys at broker
 * start (a wrong value throws here, which stops the broker with a message naming the key),
 * and hands the broker to the coordinator stores once it has started (see
 * {@link BrokerContext}).
 *
 * <p>Loaded as a protocol handler ({@code messagingProtocols=txn-preserver}) that serves no
 * protocol: it opens no port and sees no message. It is the one kind of broker plugin that
 * the broker starts with itself and that costs nothing on the message path: with any broker
 * interceptor loaded, the broker calls it on every command, publish, dispatch and ack
 * (measured: 8 % of a broker's throughput, 7 % more CPU per transaction), and Pulsar 4.0.12
 * breaks admin requests with a JSON body (apache/pulsar#26185). Its interface is the same on
 * every supported Pulsar line.
 */
public class PreserverProtocolHandler implements ProtocolHandler {

    static final PluginBuild VERSION = PluginBuild.CURRENT;

    private static final Logger log = LoggerFactory.getLogger(PreserverProtocolHandler.class);
    /** Its name in {@code messagingProtocols} and in its archive's {@code pulsar-protocol-handler.yml}. */
    public static final String NAME = "txn-preserver";
    /** This broker's key for its context and metrics (its client timer, which openStore receives too). */
    private volatile Object broker;
    private volatile BrokerContext installed;
    /** How long a closing broker keeps the state topics' client for coordinators still closing. */
    static final Duration CLOSE_WAIT = Duration.ofSeconds(60);
    /**
     * How long a state-topic write may take before it fails and its block is written again
     * later with the same writer (the producer reconnects by itself). A send still unanswered
     * 5 s after this counts as wedged, and its writer is replaced. No commit waits for a
     * write: a slow writer delays the release of log entries, not an answer.
     */
    static final Duration STATE_TOPIC_SEND_TIMEOUT = Duration.ofSeconds(10);
    /**
     * The longest a state-topic producer or reader waits between two attempts to reconnect.
     * The broker's client lets the wait grow to 60 s: after a long outage, or a topic that
     * keeps moving, a writer would sleep through the topic's return while ended transactions
     * wait for their records (one attempt in 12 s was seen with the topic unloaded every
     * 150 ms), and once {@code MAX_UNDURABLE_ENDS} wait, commits are refused. One attempt a
     * second per coordinator is what a lookup costs.
     */
    static final Duration STATE_TOPIC_MAX_RECONNECT_BACKOFF = Duration.ofSeconds(1);
    private PreserverConfig config;
    private PulsarService pulsar;
    /** The state topics' own client, on the broker's shared threads and timer; created at the first open. */
    private PulsarClient stateTopicClient;
    private boolean closed;

    @Override
    public String protocolName() {
        return NAME;
    }

    @Override
    public boolean accept(String protocol) {
        return NAME.equals(protocol);
    }

    /** Early in the broker's start: a wrong value stops the broker here. */
    @Override
    public void initialize(ServiceConfiguration configuration) throws Exception {
        config = PreserverConfig.fromProperties(configuration.getProperties());
        String provider = configuration.getTransactionMetadataStoreProviderClassName();
        if (!isPreservingProvider(provider)) {
            log.warn("Transaction outcome preserver is loaded but transactionMetadataStoreProviderClassName={};"
                    + " set it to {} to keep outcomes", provider, PreservingMetadataStoreProvider.class.getName());
        }
        log.info("Transaction outcome preserver {} configured: {}", VERSION, config);
        PulsarLines.Assessment where = PulsarLines.assess(PulsarVersion.getVersion(),
                !configuration.getBrokerInterceptors().isEmpty());
        if (where.warn()) {
            log.warn("Transaction outcome preserver {}: {}", VERSION.version(), where.message());
        } else {
            log.info("Transaction outcome preserver {}: {}", VERSION.version(), where.message());
        }
    }

    /** Nothing to advertise: no protocol is served (the broker requires a value). */
    @Override
    public String getProtocolDataToAdvertise() {
        return "";
    }

    /**
     * Once the broker has started. A coordinator that opens before (the broker may load one
     * as soon as it owns its partition) waits for this, bounded ({@link BrokerContext#await}).
     */
    @Override
    public void start(BrokerService service) {
        PulsarService pulsar = service.getPulsar();
        this.pulsar = pulsar;
        BrokerContext context = new BrokerContext(config, this::openStateTopic,
                Clock.systemUTC(), (txnId, outcome) -> pulsar.getTransactionMetadataStoreService().endTransaction(
                        txnId, outcome == Outcome.COMMITTED ? TxnAction.COMMIT_VALUE : TxnAction.ABORT_VALUE, false),
                (coordinatorId, store) -> release(pulsar, coordinatorId, store));
        broker = pulsar.getBrokerClientSharedTimer();
        PreserverMetrics.register(broker, new PreserverMetrics.BrokerLabels(pulsar.getConfiguration().getClusterName(),
                        VERSION.version(), VERSION.commit(), PulsarVersion.getVersion(), config.maxMemoryBytes(),
                        config.persistTime().toMillis() / 1000.0),
                context.preservers().values());
        installed = context;
        BrokerContext.install(broker, context);
    }

    /** No port, no channel: the plugin serves no protocol. */
    @Override
    public Map<InetSocketAddress, ChannelInitializer<SocketChannel>> newChannelInitializers() {
        return Map.of();
    }

    private static CompletableFuture<Void> release(PulsarService pulsar, long coordinatorId, Object store) {
        TransactionCoordinatorID id = TransactionCoordinatorID.get(coordinatorId);
        Object current = pulsar.getTransactionMetadataStoreService().getStores().get(id);
        if (current == null) {
            // Not registered yet (just opened), or removed and closing: asked again shortly.
            return CompletableFuture.failedFuture(new IllegalStateException("coordinator " + coordinatorId
                    + " is not registered"));
        }
        if (current != store) {
            // A newer store of the coordinator: this one was closed, or is being closed.
            return CompletableFuture.completedFuture(null);
        }
        return pulsar.getTransactionMetadataStoreService().removeTransactionMetadataStore(id);
    }

    /** Whether the configured provider is the plugin's (or extends it). */
    private static boolean isPreservingProvider(String className) {
        try {
            return PreservingMetadataStoreProvider.class.isAssignableFrom(
                    Class.forName(className, false, PreserverProtocolHandler.class.getClassLoader()));
        } catch (ClassNotFoundException | LinkageError | RuntimeException e) {
            return false;
        }
    }

    /** Runs at coordinator load, when the broker's internal clients are up. */
    private CompletableFuture<StateTopic> openStateTopic(long coordinatorId) {
        try {
            return PulsarStateTopic.open(stateTopicClient(), pulsar.getAdminClient(), coordinatorId,
                    STATE_TOPIC_SEND_TIMEOUT, () -> pulsar.getNamespaceService().checkTopicOwnership(
                            SystemTopicNames.TRANSACTION_COORDINATOR_ASSIGN.getPartition((int) coordinatorId)),
                    pulsar.getTopicPoliciesService() != TopicPoliciesService.DISABLED);
        } catch (PulsarServerException | PulsarClientException e) {
            return CompletableFuture.failedFuture(e);
        }
    }

    /**
     * A client made as the broker's internal one, with a short reconnect backoff: the same
     * settings (service URL, authentication, TLS) and the same shared threads, so it costs one
     * more connection, not a thread.
     */
    private synchronized PulsarClient stateTopicClient() throws PulsarServerException, PulsarClientException {
        if (closed) {
            throw new PulsarClientException.AlreadyClosedException("the transaction outcome preserver is closed");
        }
        if (stateTopicClient == null) {
            ClientConfigurationData conf = ((PulsarClientImpl) pulsar.getClient()).getConfiguration().clone();
            conf.setMaxBackoffIntervalNanos(STATE_TOPIC_MAX_RECONNECT_BACKOFF.toNanos());
            conf.setInitialBackoffIntervalNanos(Math.min(conf.getInitialBackoffIntervalNanos(),
                    TimeUnit.MILLISECONDS.toNanos(100)));
            // The copy is shallow: a client starts its authentication and closes it when it
            // closes (an OAuth2 flow holds an HTTP client), so this one gets its own, made as
            // the broker makes its client's.
            String authPlugin = pulsar.getConfiguration().getBrokerClientAuthenticationPlugin();
            if (authPlugin != null && !authPlugin.isBlank()) {
                conf.setAuthPluginClassName(authPlugin);
                conf.setAuthParams(pulsar.getConfiguration().getBrokerClientAuthenticationParameters());
                conf.setAuthParamMap(null);
                conf.setAuthentication(AuthenticationFactory.create(authPlugin,
                        pulsar.getConfiguration().getBrokerClientAuthenticationParameters()));
            }
            stateTopicClient = pulsar.createClientImpl(conf);
        }
        return stateTopicClient;
    }

    /**
     * The broker closes its protocol handlers first, before it unloads its topics and closes
     * its coordinators, which go on serving meanwhile: the context and the state topics'
     * client stay until every coordinator of this broker has closed (at most
     * {@link #CLOSE_WAIT}), so that their writes go on rather than fail and retry.
     */
    @Override
    public void close() {
        Object closing = broker;
        BrokerContext context = installed;
        if (closing == null || context == null) {
            closeClient();
            return;
        }
        PreserverMetrics.unregister(closing);
        long deadline = System.nanoTime() + CLOSE_WAIT.toNanos();
        whenCoordinatorsClosed(context, deadline, () -> {
            BrokerContext.clear(closing);
            closeClient();
        });
    }

    private static void whenCoordinatorsClosed(BrokerContext context, long deadline, Runnable then) {
        if (context.preservers().isEmpty() || System.nanoTime() - deadline >= 0) {
            then.run();
            return;
        }
        CompletableFuture.delayedExecutor(200, TimeUnit.MILLISECONDS).execute(() ->
                whenCoordinatorsClosed(context, deadline, then));
    }

    private void closeClient() {
        PulsarClient client;
        synchronized (this) {
            closed = true;
            client = stateTopicClient;
            stateTopicClient = null;
        }
        if (client != null) {
            // A write still pending fails as it would with the topics gone: the log keeps
            // those outcomes for the next owner.
            client.closeAsync();
        }
    }
}
