package io.github.txnpreserver.it;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Instant;
import java.util.ArrayList;
import java.util.Collections;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.stream.Collectors;
import org.apache.pulsar.client.admin.PulsarAdmin;
import org.apache.pulsar.client.admin.PulsarAdminException;
import org.apache.pulsar.client.api.PulsarClientException;

/**
 * A Pulsar cluster built from the distribution, as an operator builds one: one ZooKeeper,
 * {@code initialize-cluster-metadata}, one bookie, and several brokers (each with the plugin
 * installed, or some stock), each a process of its own on loopback ports.
 *
 * <p>The brokers' metadata session timeout is short (6 s), so that a broker that dies or
 * pauses loses its bundles, and with them its coordinators, within seconds.
 */
public final class LocalCluster implements AutoCloseable {

    public static final String CLUSTER = "it-cluster";
    private static final String SESSION_TIMEOUT_MILLIS = "6000";

    private final Path home;
    private final Path dir;
    private final int zookeeperPort;
    private final ServiceProcess zookeeper;
    private final ServiceProcess bookie;
    private final List<Broker> brokers = new ArrayList<>();

    private LocalCluster(List<Path> brokerHomes, Path dir, Map<String, String> brokerConfig) throws IOException {
        this.home = brokerHomes.get(0);
        this.dir = dir;
        int[] ports = Ports.free(3 + 2 * brokerHomes.size());
        this.zookeeperPort = ports[0];
        this.zookeeper = zookeeperProcess();
        this.bookie = bookieProcess(ports[1], ports[2]);
        for (int i = 0; i < brokerHomes.size(); i++) {
            brokers.add(new Broker("broker-" + i, brokerHomes.get(i), ports[3 + 2 * i], ports[4 + 2 * i],
                    brokerConfig));
        }
    }

    /**
     * Starts ZooKeeper, initializes the cluster's metadata with this many transaction
     * coordinators, starts the bookie and then each broker, and waits until every broker is
     * healthy.
     */
    public static LocalCluster start(String name, int brokerCount, int coordinators, Map<String, String> brokerConfig)
            throws IOException, InterruptedException {
        return start(name, Collections.nCopies(brokerCount, PulsarDistribution.withPluginInstalled()), coordinators,
                brokerConfig);
    }

    /**
     * As {@link #start(String, int, int, Map)}, broker i run from the installation
     * {@code brokerHomes.get(i)}: with the plugin or stock, a cluster in the middle of a rolling
     * rollout. ZooKeeper, the bookie and the tools run from the first.
     */
    public static LocalCluster start(String name, List<Path> brokerHomes, int coordinators,
                                     Map<String, String> brokerConfig) throws IOException, InterruptedException {
        LocalCluster cluster = new LocalCluster(brokerHomes, LocalPulsar.newDir(name), brokerConfig);
        try {
            cluster.zookeeper.start();
            Ports.awaitAnswer(cluster.zookeeperPort, BrokerProcess.START_TIMEOUT, cluster.zookeeper);
            cluster.initializeMetadata(coordinators);
            cluster.bookie.start();
            cluster.awaitBookieRegistered();
            for (Broker broker : cluster.brokers) {
                broker.start();
            }
            return cluster;
        } catch (IOException | InterruptedException | RuntimeException e) {
            cluster.close();
            throw e;
        }
    }

    public Broker broker(int index) {
        return brokers.get(index);
    }

    public List<Broker> brokers() {
        return List.copyOf(brokers);
    }

    /** A service URL naming every broker, as clients of a cluster are configured. */
    public String serviceUrl() {
        return "pulsar://" + brokers.stream().map(broker -> "127.0.0.1:" + broker.process.brokerPort())
                .collect(Collectors.joining(","));
    }

    /** The broker whose web service URL is given (as admin lookups answer). */
    public Broker brokerAt(String url) {
        return brokers.stream().filter(broker -> url.contains(":" + broker.process.webPort()) || url.contains(":"
                + broker.process.brokerPort())).findFirst()
                .orElseThrow(() -> new IllegalArgumentException("No broker of this cluster at " + url));
    }

    public Path dir() {
        return dir;
    }

    /** The topic whose owner serves transaction coordinator {@code coordinator}. */
    public static String coordinatorTopic(int coordinator) {
        return "persistent://pulsar/system/transaction_coordinator_assign-partition-" + coordinator;
    }

    /** The broker that owns coordinator {@code coordinator}, asked through {@code askVia} (a live broker). */
    public Broker ownerOfCoordinator(Broker askVia, int coordinator) throws PulsarClientException,
            PulsarAdminException {
        try (PulsarAdmin admin = PulsarAdmin.builder().serviceHttpUrl(askVia.httpUrl()).build()) {
            return brokerAt(admin.lookups().lookupTopic(coordinatorTopic(coordinator)));
        }
    }

    /** Moves coordinator {@code coordinator} to {@code target} (see {@link #moveTopic}). */
    public void moveCoordinator(int coordinator, Broker target) throws PulsarClientException, PulsarAdminException,
            InterruptedException {
        moveTopic(coordinatorTopic(coordinator), target);
    }

    /**
     * Moves {@code topic} (persistent://tenant/namespace/name) to {@code target}: unloads its
     * bundle naming the destination (left to the load manager, a bundle can land on the same
     * broker every time) until a lookup finds it there, within three minutes.
     */
    public void moveTopic(String topic, Broker target) throws PulsarClientException, PulsarAdminException,
            InterruptedException {
        String[] path = topic.substring(topic.indexOf("://") + 3).split("/");
        String namespace = path[0] + "/" + path[1];
        Instant deadline = Instant.now().plus(BrokerProcess.START_TIMEOUT);
        try (PulsarAdmin admin = PulsarAdmin.builder().serviceHttpUrl(target.httpUrl()).build()) {
            while (brokerAt(admin.lookups().lookupTopic(topic)) != target) {
                if (Instant.now().isAfter(deadline)) {
                    throw new IllegalStateException(topic + " did not move to " + target);
                }
                try {
                    admin.namespaces().unloadNamespaceBundle(namespace, admin.lookups().getBundleRange(topic),
                            target.brokerId());
                } catch (PulsarAdminException e) {
                    // being loaded somewhere just now: the next round unloads it
                }
                Thread.sleep(500);
            }
        }
    }

    @Override
    public void close() throws InterruptedException {
        for (Broker broker : brokers) {
            broker.process.stop();
        }
        bookie.stop();
        zookeeper.stop();
    }

    /** One broker of the cluster. */
    public final class Broker {

        private final BrokerProcess process;

        private Broker(String name, Path home, int brokerPort, int webPort, Map<String, String> config)
                throws IOException {
            Map<String, String> keys = new LinkedHashMap<>();
            keys.put("metadataStoreUrl", "zk:127.0.0.1:" + zookeeperPort);
            keys.put("configurationMetadataStoreUrl", "zk:127.0.0.1:" + zookeeperPort);
            keys.put("metadataStoreSessionTimeoutMillis", SESSION_TIMEOUT_MILLIS);
            keys.put("clusterName", CLUSTER);
            keys.put("managedLedgerDefaultEnsembleSize", "1");
            keys.put("managedLedgerDefaultWriteQuorum", "1");
            keys.put("managedLedgerDefaultAckQuorum", "1");
            keys.put("brokerShutdownTimeoutMs", "10000");
            keys.putAll(config);
            this.process = BrokerProcess.clusterMember(name, home, dir, new int[] {brokerPort, webPort}, keys);
        }

        /**
         * Stops the broker cleanly and starts it from another installation, on the same ports
         * and with the same keys, as an operator switches the plugin on (or off) on one broker
         * of a rolling rollout.
         */
        public void reinstall(Path home) throws IOException, InterruptedException {
            process.reinstall(home);
        }

        public String serviceUrl() {
            return process.serviceUrl();
        }

        public String httpUrl() {
            return process.httpUrl();
        }

        /** The broker's id, as the load manager names it (an unload's destination). */
        public String brokerId() {
            return "127.0.0.1:" + process.webPort();
        }

        public Path logFile() {
            return process.logFile();
        }

        /** Starts the broker (again) and waits until it is healthy. */
        public void start() throws IOException, InterruptedException {
            process.start();
        }

        public void kill() throws InterruptedException {
            process.kill();
        }

        public void pause() throws IOException, InterruptedException {
            process.pause();
        }

        public void resume() throws InterruptedException {
            process.resume();
        }

        @Override
        public String toString() {
            return process.toString();
        }
    }

    private ServiceProcess zookeeperProcess() throws IOException {
        Path conf = writeConfig("zookeeper.conf", Map.of(
                "dataDir", dir.resolve("zookeeper").toString(),
                "clientPort", Integer.toString(zookeeperPort),
                "clientPortAddress", "127.0.0.1",
                "admin.enableServer", "false",
                "metricsProvider.className", "org.apache.zookeeper.metrics.impl.DefaultMetricsProvider"));
        Map<String, String> env = jvmEnvironment("zookeeper", "-Xms64m -Xmx128m");
        env.put("PULSAR_ZK_CONF", conf.toString());
        return new ServiceProcess("zookeeper", List.of(home.resolve("bin/pulsar").toString(), "zookeeper"), env,
                dir.resolve("zookeeper.out"), zookeeperPort);
    }

    private ServiceProcess bookieProcess(int bookiePort, int statsPort) throws IOException {
        Map<String, String> keys = new LinkedHashMap<>();
        keys.put("bookiePort", Integer.toString(bookiePort));
        keys.put("advertisedAddress", "127.0.0.1");
        keys.put("allowLoopback", "true");
        keys.put("zkServers", "127.0.0.1:" + zookeeperPort);
        keys.put("journalDirectory", dir.resolve("bookie/journal").toString());
        keys.put("ledgerDirectories", dir.resolve("bookie/ledgers").toString());
        keys.put("httpServerEnabled", "false");
        keys.put("prometheusStatsHttpPort", Integer.toString(statsPort));
        // Nothing scrapes the bookie; its stats server is Jetty 9's, which Pulsar 4.2 and 5.0 do not ship.
        keys.put("prometheusStatsHttpEnable", "false");
        keys.put("dbStorage_writeCacheMaxSizeMb", "32");
        keys.put("dbStorage_readAheadCacheMaxSizeMb", "32");
        keys.put("dbStorage_rocksDB_blockCacheSize", "16777216");
        keys.put("journalPreAllocSizeMB", "4");
        Path conf = writeConfig("bookkeeper.conf", keys);
        Map<String, String> env = jvmEnvironment("bookie", "");
        env.put("BOOKIE_MEM", "-Xms128m -Xmx256m -XX:MaxDirectMemorySize=256m");
        env.put("BOOKIE_GC", PulsarDistribution.gcAndJitOptions());
        env.put("PULSAR_BOOKKEEPER_CONF", conf.toString());
        return new ServiceProcess("bookie", List.of(home.resolve("bin/pulsar").toString(), "bookie"), env,
                dir.resolve("bookie.out"), bookiePort, statsPort);
    }

    private void initializeMetadata(int coordinators) throws IOException, InterruptedException {
        Broker first = brokers.get(0);
        runTool("initialize-cluster-metadata", List.of("initialize-cluster-metadata",
                "--cluster", CLUSTER,
                "--metadata-store", "zk:127.0.0.1:" + zookeeperPort,
                "--configuration-metadata-store", "zk:127.0.0.1:" + zookeeperPort,
                "--web-service-url", first.httpUrl(),
                "--broker-service-url", first.serviceUrl(),
                "--initial-num-transaction-coordinators", Integer.toString(coordinators)));
    }

    /** The bookie is usable once the registration client has seen it as writable in the metadata store. */
    private void awaitBookieRegistered() throws IOException, InterruptedException {
        Instant deadline = Instant.now().plus(BrokerProcess.START_TIMEOUT);
        while (Instant.now().isBefore(deadline)) {
            bookie.requireAlive();
            if (Files.readString(bookie.logFile()).contains("(writable bookie)")) {
                return;
            }
            Thread.sleep(500);
        }
        throw new IllegalStateException("bookie not registered within " + BrokerProcess.START_TIMEOUT + "\n"
                + bookie.tail(40));
    }

    private void runTool(String name, List<String> arguments) throws IOException, InterruptedException {
        BrokerProcess.runTool(home, arguments, jvmEnvironment(name, "-Xmx128m"), dir.resolve(name + ".out"));
    }

    private Map<String, String> jvmEnvironment(String name, String heap) throws IOException {
        return BrokerProcess.jvmEnvironment(dir.resolve("logs-" + name), dir.resolve("tmp-" + name), heap, "");
    }

    /** The distribution's {@code conf/<fileName>} with {@code keys} set, written to this cluster's folder. */
    private Path writeConfig(String fileName, Map<String, String> keys) throws IOException {
        Path conf = dir.resolve(fileName);
        BrokerProcess.writeConfig(home.resolve("conf").resolve(fileName), conf,
                "# ---- test cluster " + dir.getFileName() + " ----", keys);
        return conf;
    }
}
