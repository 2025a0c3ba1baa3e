package io.github.txnpreserver.it;

import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.stream.Stream;

/**
 * A Pulsar standalone broker of the official distribution, with the plugin installed, on
 * loopback ports of its own.
 *
 * <p>It runs in ZooKeeper metadata mode: a kill -9 of the default RocksDB mode can leave the
 * next start looping forever. The JVM's own PID is kept ({@code bin/pulsar} execs java), so
 * {@link #kill()} really kills the broker, and every start first checks that nothing answers
 * on its ports, so a restart never talks to a broker that survived.
 */
public final class LocalPulsar implements AutoCloseable {

    private final Path pulsarHome;
    private final Path dir;
    private final int zookeeperPort;
    private final BrokerProcess broker;

    private LocalPulsar(Path pulsarHome, Path dir, Map<String, String> config, String jvmOptions,
                        Map<String, String> environment) throws IOException {
        this.pulsarHome = pulsarHome;
        this.dir = dir;
        int[] ports = Ports.free(4);
        this.zookeeperPort = ports[2];
        this.broker = BrokerProcess.standalone(pulsarHome, dir, ports, config, jvmOptions, environment);
    }

    /**
     * Starts a broker of the distribution with the plugin installed, with these
     * broker.conf keys on top of the installed overlay.
     */
    public static LocalPulsar start(String name, Map<String, String> config) throws IOException, InterruptedException {
        return start(name, config, "");
    }

    /** As {@link #start(String, Map)}, with extra options for the broker JVM (e.g. a test hook's -D). */
    public static LocalPulsar start(String name, Map<String, String> config, String jvmOptions)
            throws IOException, InterruptedException {
        return startFrom(PulsarDistribution.withPluginInstalled(), name, config, jvmOptions, Map.of());
    }

    /**
     * A broker of the copy with the test hooks beside the plugin, its provider the hooked
     * one; each hook is switched on by its {@code -D} in {@code jvmOptions}.
     */
    public static LocalPulsar startWithTestHooks(String name, Map<String, String> config, String jvmOptions)
            throws IOException, InterruptedException {
        Map<String, String> hooked = new LinkedHashMap<>(config);
        hooked.put("transactionMetadataStoreProviderClassName", PulsarDistribution.HOOKED_PROVIDER);
        return startFrom(PulsarDistribution.withTestHooksInstalled(), name, hooked, jvmOptions, Map.of());
    }

    /** A broker of the untouched distribution: stock Pulsar, for comparisons. */
    public static LocalPulsar startStock(String name, Map<String, String> config)
            throws IOException, InterruptedException {
        return startStockWithOptions(name, config, "");
    }

    /** As {@link #startStock(String, Map)}, with extra options for the broker JVM (e.g. a profiler's). */
    public static LocalPulsar startStockWithOptions(String name, Map<String, String> config, String jvmOptions)
            throws IOException, InterruptedException {
        return startFrom(PulsarDistribution.stock(), name, config, jvmOptions, Map.of());
    }

    /**
     * A broker of the installation {@code home} as it is (its own conf/standalone.conf, with
     * these keys on top), with these variables in its environment as well (e.g.
     * PULSAR_EXTRA_CLASSPATH): an installation laid out as a deployment form lays it out.
     */
    public static LocalPulsar startFrom(Path home, String name, Map<String, String> config,
                                        Map<String, String> environment) throws IOException, InterruptedException {
        return startFrom(home, name, config, "", environment);
    }

    private static LocalPulsar startFrom(Path home, String name, Map<String, String> config, String jvmOptions,
                                         Map<String, String> environment) throws IOException, InterruptedException {
        LocalPulsar pulsar = new LocalPulsar(home, newDir(name), config, jvmOptions, environment);
        pulsar.start();
        return pulsar;
    }

    public Path pulsarHome() {
        return pulsarHome;
    }

    /** A fresh folder for one broker's data, logs and files. */
    public static Path newDir(String name) {
        return PulsarDistribution.workDir().resolve(name + "-" + System.nanoTime());
    }

    public String serviceUrl() {
        return broker.serviceUrl();
    }

    public String httpUrl() {
        return broker.httpUrl();
    }

    public Path dir() {
        return dir;
    }

    public Path logFile() {
        return broker.logFile();
    }

    /** Everything the broker wrote: its console output, then its log files (as bytes, read as ISO-8859-1). */
    public String output() throws IOException {
        StringBuilder text = new StringBuilder(Files.readString(logFile(), StandardCharsets.ISO_8859_1));
        Path logs = dir.resolve("logs");
        if (Files.isDirectory(logs)) {
            try (Stream<Path> files = Files.list(logs)) {
                for (Path file : files.filter(Files::isRegularFile).sorted().toList()) {
                    text.append(Files.readString(file, StandardCharsets.ISO_8859_1));
                }
            }
        }
        return text.toString();
    }

    public long pid() {
        return broker.pid();
    }

    public boolean isRunning() {
        return broker.isAlive();
    }

    /** Starts the broker (again) on the same ports and data, and waits until it is healthy. */
    public void start() throws IOException, InterruptedException {
        broker.start();
    }

    /** Waits for the broker JVM to exit by itself (a crash); true if it did within the timeout. */
    public boolean awaitExit(Duration timeout) throws InterruptedException {
        return broker.awaitExit(timeout);
    }

    /** kill -9 of the broker JVM; returns once the process is gone and its ports are free. */
    public void kill() throws InterruptedException {
        broker.kill();
    }

    /** A clean stop (SIGTERM), forced after 60 s. */
    public void stop() throws InterruptedException {
        broker.stop();
    }

    /**
     * Sets the number of transaction coordinators, as an operator does with
     * {@code pulsar initialize-transaction-coordinator-metadata} (standalone creates just one),
     * and restarts the broker so that it serves them.
     */
    public void initializeTransactionCoordinators(int count) throws IOException, InterruptedException {
        BrokerProcess.runTool(pulsarHome, List.of("initialize-transaction-coordinator-metadata",
                        "-cs", "zk:127.0.0.1:" + zookeeperPort, "-c", "standalone",
                        "--initial-num-transaction-coordinators", Integer.toString(count)),
                Map.of("PULSAR_MEM", "-Xmx128m", "PULSAR_LOG_DIR", dir.resolve("logs").toString()),
                dir.resolve("initialize-transaction-coordinators.out"));
        stop();
        start();
    }

    /** Changes broker.conf keys for the next start, as an operator edits the file before a restart. */
    public void reconfigure(Map<String, String> keys) {
        broker.reconfigure(keys);
    }

    public void restartAfterKill() throws IOException, InterruptedException {
        kill();
        start();
    }

    @Override
    public void close() throws InterruptedException {
        stop();
    }

    /** The last lines of the broker's output, for failure messages. */
    public String tail(int lines) {
        return broker.tail(lines);
    }
}
