package io.github.txnpreserver.it;

import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.time.Instant;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;
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

    private static final Duration START_TIMEOUT = Duration.ofMinutes(3);
    private static final String HEAP = "-Xms256m -Xmx512m -XX:MaxDirectMemorySize=512m";

    private final Path pulsarHome;
    private final Path dir;
    private final Map<String, String> config;
    private final String jvmOptions;
    private final int brokerPort;
    private final int webPort;
    private final int zookeeperPort;
    private final int bookiePort;
    private final ServiceProcess process;

    private LocalPulsar(Path pulsarHome, Path dir, Map<String, String> config, String jvmOptions,
                        Map<String, String> environment) throws IOException {
        this.pulsarHome = pulsarHome;
        this.dir = dir;
        this.config = config;
        this.jvmOptions = jvmOptions;
        int[] ports = Ports.free(4);
        this.brokerPort = ports[0];
        this.webPort = ports[1];
        this.zookeeperPort = ports[2];
        this.bookiePort = ports[3];
        Map<String, String> env = new LinkedHashMap<>(environment);
        env.putAll(Map.of("PULSAR_STANDALONE_USE_ZOOKEEPER", "1",
                "PULSAR_STANDALONE_CONF", dir.resolve("standalone.conf").toString(),
                "PULSAR_LOG_DIR", dir.resolve("logs").toString(),
                "PULSAR_MEM", HEAP,
                "PULSAR_GC", PulsarDistribution.gcAndJitOptions(),
                "PULSAR_EXTRA_OPTS", "-Djava.io.tmpdir=" + dir.resolve("tmp")
                        + " -Dzookeeper.admin.enableServer=false " + jvmOptions));
        this.process = new ServiceProcess("broker " + dir.getFileName(), List.of(
                pulsarHome.resolve("bin/pulsar").toString(), "standalone",
                "--no-stream-storage", "--no-functions-worker",
                "--zookeeper-port", Integer.toString(zookeeperPort),
                "--bookkeeper-port", Integer.toString(bookiePort),
                "--zookeeper-dir", dir.resolve("zookeeper").toString(),
                "--bookkeeper-dir", dir.resolve("bookkeeper").toString()),
                env, dir.resolve("broker.out"), brokerPort, webPort, zookeeperPort, bookiePort);
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
        LocalPulsar pulsar = new LocalPulsar(home, newDir(name), new LinkedHashMap<>(config), jvmOptions,
                environment);
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
        return "pulsar://127.0.0.1:" + brokerPort;
    }

    public String httpUrl() {
        return "http://127.0.0.1:" + webPort;
    }

    public Path dir() {
        return dir;
    }

    public Path logFile() {
        return process.logFile();
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
        return process.pid();
    }

    public boolean isRunning() {
        return process.isAlive();
    }

    /** Starts the broker (again) on the same ports and data, and waits until it is healthy. */
    public void start() throws IOException, InterruptedException {
        Files.createDirectories(dir.resolve("tmp"));
        writeConfig();
        process.start();
        awaitHealthy();
    }

    /** Waits for the broker JVM to exit by itself (a crash); true if it did within the timeout. */
    public boolean awaitExit(Duration timeout) throws InterruptedException {
        return process.awaitExit(timeout);
    }

    /** kill -9 of the broker JVM; returns once the process is gone and its ports are free. */
    public void kill() throws InterruptedException {
        process.kill();
    }

    /** A clean stop (SIGTERM), forced after 60 s. */
    public void stop() throws InterruptedException {
        process.stop();
    }

    /**
     * Sets the number of transaction coordinators, as an operator does with
     * {@code pulsar initialize-transaction-coordinator-metadata} (standalone creates just one),
     * and restarts the broker so that it serves them.
     */
    public void initializeTransactionCoordinators(int count) throws IOException, InterruptedException {
        ProcessBuilder builder = new ProcessBuilder(pulsarHome.resolve("bin/pulsar").toString(),
                "initialize-transaction-coordinator-metadata", "-cs", "zk:127.0.0.1:" + zookeeperPort,
                "-c", "standalone", "--initial-num-transaction-coordinators", Integer.toString(count));
        builder.environment().putAll(PulsarDistribution.javaEnvironment());
        builder.environment().put("PULSAR_MEM", "-Xmx128m");
        builder.environment().put("PULSAR_LOG_DIR", dir.resolve("logs").toString());
        builder.redirectErrorStream(true);
        Path log = dir.resolve("initialize-transaction-coordinators.out");
        builder.redirectOutput(log.toFile());
        Process tool = builder.start();
        if (!tool.waitFor(2, TimeUnit.MINUTES) || tool.exitValue() != 0) {
            tool.destroyForcibly();
            throw new IllegalStateException("initialize-transaction-coordinator-metadata failed: "
                    + Files.readString(log));
        }
        stop();
        start();
    }

    /** Changes broker.conf keys for the next start, as an operator edits the file before a restart. */
    public void reconfigure(Map<String, String> keys) {
        config.putAll(keys);
    }

    public void restartAfterKill() throws IOException, InterruptedException {
        kill();
        start();
    }

    @Override
    public void close() throws InterruptedException {
        stop();
    }

    private void writeConfig() throws IOException {
        Map<String, String> keys = new LinkedHashMap<>();
        keys.put("bindAddress", "127.0.0.1");
        keys.put("advertisedAddress", "127.0.0.1");
        keys.put("brokerServicePort", Integer.toString(brokerPort));
        keys.put("webServicePort", Integer.toString(webPort));
        // Verification reads topics from the start: keep their data.
        keys.put("defaultRetentionTimeInMinutes", "-1");
        keys.put("defaultRetentionSizeInMB", "-1");
        keys.putAll(config);
        List<String> lines = new ArrayList<>(Files.readAllLines(pulsarHome.resolve("conf/standalone.conf")));
        lines.add("");
        lines.add("# ---- test broker " + dir.getFileName() + " ----");
        keys.forEach((key, value) -> lines.add(key + "=" + value));
        Files.write(dir.resolve("standalone.conf"), lines);
    }

    private void awaitHealthy() throws InterruptedException {
        Instant deadline = Instant.now().plus(START_TIMEOUT);
        while (Instant.now().isBefore(deadline)) {
            process.requireAlive();
            if (healthy() && namespacesReady()) {
                return;
            }
            Thread.sleep(500);
        }
        process.kill();
        throw new IllegalStateException("Broker not healthy within " + START_TIMEOUT + "; log: " + logFile()
                + "\n" + tail(40));
    }

    private boolean healthy() {
        return get("/admin/v2/brokers/health") != null;
    }

    /**
     * Standalone creates its namespaces after the broker reports healthy; a client that comes
     * earlier finds no pulsar/system and cannot reach the transaction coordinators.
     */
    private boolean namespacesReady() {
        String system = get("/admin/v2/namespaces/pulsar");
        String pub = get("/admin/v2/namespaces/public");
        return system != null && system.contains("pulsar/system") && pub != null && pub.contains("public/default");
    }

    private String get(String path) {
        String clientAuth = config.getOrDefault("brokerClientAuthenticationParameters", "");
        // With authentication on, readiness is asked with the broker's own (superuser) token.
        return AdminHttp.get(httpUrl(), path, clientAuth.startsWith("token:") ? clientAuth.substring("token:".length())
                : null);
    }

    /** The last lines of the broker's output, for failure messages. */
    public String tail(int lines) {
        return process.tail(lines);
    }
}
