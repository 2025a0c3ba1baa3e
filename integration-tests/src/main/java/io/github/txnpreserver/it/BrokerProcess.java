package io.github.txnpreserver.it;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.time.Instant;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;

/**
 * A broker JVM of the distribution: a standalone ({@link LocalPulsar}) or one broker of a
 * {@link LocalCluster}. The one place that writes a broker's configuration, sets its heap and
 * collector, starts it, waits until it serves, and kills or stops it by its PID.
 *
 * <p>The configuration is written again at each start, so keys changed with
 * {@link #reconfigure(Map)} reach the next start, as an operator's edit of the file does.
 */
final class BrokerProcess {

    static final Duration START_TIMEOUT = Duration.ofMinutes(3);
    /** Explicit, so that a broker's memory does not depend on the machine's (the tests start many). */
    private static final String HEAP = "-Xms256m -Xmx512m -XX:MaxDirectMemorySize=512m";

    private final String name;
    private final int brokerPort;
    private final int webPort;
    private final Map<String, String> keys = new LinkedHashMap<>();
    private final String confTemplate;
    private final Path conf;
    private final String confHeader;
    private final List<String> arguments;
    private final Map<String, String> environment;
    private final Path logFile;
    private final Path tmpDir;
    private final int[] ports;
    private final boolean standalone;
    private Path home;
    private ServiceProcess process;

    private BrokerProcess(String name, Path home, Path dir, boolean standalone, int[] ports,
                          Map<String, String> config) {
        this.name = name;
        this.home = home;
        this.standalone = standalone;
        this.ports = ports.clone();
        this.brokerPort = ports[0];
        this.webPort = ports[1];
        this.tmpDir = dir.resolve(standalone ? "tmp" : "tmp-" + name);
        this.confTemplate = standalone ? "conf/standalone.conf" : "conf/broker.conf";
        this.conf = dir.resolve(standalone ? "standalone.conf" : name + ".conf");
        this.confHeader = "# ---- test " + (standalone ? "broker " : "cluster ") + dir.getFileName() + " ----";
        this.logFile = dir.resolve(standalone ? "broker.out" : name + ".out");
        keys.put("bindAddress", "127.0.0.1");
        keys.put("advertisedAddress", "127.0.0.1");
        keys.put("brokerServicePort", Integer.toString(brokerPort));
        keys.put("webServicePort", Integer.toString(webPort));
        // Verification reads topics from the start: keep their data.
        keys.put("defaultRetentionTimeInMinutes", "-1");
        keys.put("defaultRetentionSizeInMB", "-1");
        keys.putAll(config);
        this.environment = new LinkedHashMap<>();
        this.arguments = new ArrayList<>();
        if (standalone) {
            arguments.addAll(List.of("standalone", "--no-stream-storage", "--no-functions-worker",
                    "--zookeeper-port", Integer.toString(ports[2]),
                    "--bookkeeper-port", Integer.toString(ports[3]),
                    "--zookeeper-dir", dir.resolve("zookeeper").toString(),
                    "--bookkeeper-dir", dir.resolve("bookkeeper").toString()));
        } else {
            arguments.add("broker");
        }
    }

    /**
     * A standalone broker in ZooKeeper metadata mode (see {@link LocalPulsar}) on
     * {@code ports}: broker, web, ZooKeeper, bookie. {@code environment} comes first, so it
     * cannot change what the broker is.
     */
    static BrokerProcess standalone(Path home, Path dir, int[] ports, Map<String, String> config,
                                    String jvmOptions, Map<String, String> environment) throws IOException {
        BrokerProcess broker = new BrokerProcess("broker " + dir.getFileName(), home, dir, true, ports, config);
        broker.environment.putAll(environment);
        broker.environment.putAll(Map.of("PULSAR_STANDALONE_USE_ZOOKEEPER", "1",
                "PULSAR_STANDALONE_CONF", broker.conf.toString()));
        broker.environment.putAll(jvmEnvironment(dir.resolve("logs"), broker.tmpDir, HEAP,
                "-Dzookeeper.admin.enableServer=false " + jvmOptions));
        broker.process = broker.newProcess();
        return broker;
    }

    /** One broker of a cluster, on {@code ports}: broker, web; its files in {@code dir} under its name. */
    static BrokerProcess clusterMember(String name, Path home, Path dir, int[] ports, Map<String, String> config)
            throws IOException {
        BrokerProcess broker = new BrokerProcess(name, home, dir, false, ports, config);
        broker.environment.putAll(jvmEnvironment(dir.resolve("logs-" + name), broker.tmpDir, HEAP, ""));
        broker.environment.put("PULSAR_BROKER_CONF", broker.conf.toString());
        broker.process = broker.newProcess();
        return broker;
    }

    private ServiceProcess newProcess() {
        List<String> command = new ArrayList<>();
        command.add(home.resolve("bin/pulsar").toString());
        command.addAll(arguments);
        return new ServiceProcess(name, command, environment, logFile, ports);
    }

    /** Starts the broker (again) on the same ports and data, and waits until it serves. */
    public void start() throws IOException, InterruptedException {
        Files.createDirectories(tmpDir);
        writeConfig(home.resolve(confTemplate), conf, confHeader, keys);
        process.start();
        Instant deadline = Instant.now().plus(START_TIMEOUT);
        while (Instant.now().isBefore(deadline)) {
            process.requireAlive();
            if (ready()) {
                return;
            }
            Thread.sleep(500);
        }
        process.kill();
        throw new IllegalStateException(name + " not healthy within " + START_TIMEOUT + "; log: " + logFile
                + "\n" + tail(40));
    }

    /**
     * Stops the broker cleanly and starts it from the installation {@code newHome}, on the
     * same ports, data and keys.
     */
    public void reinstall(Path newHome) throws IOException, InterruptedException {
        process.stop();
        home = newHome;
        process = newProcess();
        start();
    }

    /** Changes configuration keys for the next start. */
    public void reconfigure(Map<String, String> changed) {
        keys.putAll(changed);
    }

    /**
     * Healthy, and for a standalone its namespaces created: standalone creates them after it
     * reports healthy, and a client that comes earlier finds no pulsar/system and cannot reach
     * the transaction coordinators.
     */
    private boolean ready() {
        if (get("/admin/v2/brokers/health") == null) {
            return false;
        }
        if (!standalone) {
            return true;
        }
        String system = get("/admin/v2/namespaces/pulsar");
        String pub = get("/admin/v2/namespaces/public");
        return system != null && system.contains("pulsar/system") && pub != null && pub.contains("public/default");
    }

    private String get(String path) {
        String clientAuth = keys.getOrDefault("brokerClientAuthenticationParameters", "");
        // With authentication on, readiness is asked with the broker's own (superuser) token.
        return AdminHttp.get(httpUrl(), path, clientAuth.startsWith("token:") ? clientAuth.substring("token:".length())
                : null);
    }

    public int brokerPort() {
        return brokerPort;
    }

    public int webPort() {
        return webPort;
    }

    public String serviceUrl() {
        return "pulsar://127.0.0.1:" + brokerPort;
    }

    public String httpUrl() {
        return "http://127.0.0.1:" + webPort;
    }

    public Path logFile() {
        return logFile;
    }

    public long pid() {
        return process.pid();
    }

    public boolean isAlive() {
        return process.isAlive();
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

    public void pause() throws IOException, InterruptedException {
        process.pause();
    }

    public void resume() throws InterruptedException {
        process.resume();
    }

    /** The last lines of the broker's output, for failure messages. */
    public String tail(int lines) {
        return process.tail(lines);
    }

    @Override
    public String toString() {
        return process.toString();
    }

    /**
     * What {@code bin/pulsar} reads for a JVM's heap, collector, logs and temporary files, for
     * any process started from the distribution; {@code extraOptions} follow the temporary
     * folder's option.
     */
    static Map<String, String> jvmEnvironment(Path logDir, Path tmpDir, String heap, String extraOptions)
            throws IOException {
        Files.createDirectories(tmpDir);
        Map<String, String> env = new LinkedHashMap<>();
        env.put("PULSAR_LOG_DIR", logDir.toString());
        env.put("PULSAR_MEM", heap);
        env.put("PULSAR_GC", PulsarDistribution.gcAndJitOptions());
        env.put("PULSAR_EXTRA_OPTS", "-Djava.io.tmpdir=" + tmpDir + (extraOptions.isEmpty() ? "" : " " + extraOptions));
        return env;
    }

    /**
     * {@code template} with {@code keys} set, written to {@code target}. Replaced, not
     * appended: the bookie's configuration reads a repeated key as a list and uses its first
     * value.
     */
    static void writeConfig(Path template, Path target, String header, Map<String, String> keys) throws IOException {
        Files.createDirectories(target.getParent());
        List<String> lines = new ArrayList<>(Files.readAllLines(template));
        lines.removeIf(line -> keys.keySet().stream().anyMatch(key -> line.strip().startsWith(key + "=")));
        lines.add("");
        lines.add(header);
        keys.forEach((key, value) -> lines.add(key + "=" + value));
        Files.write(target, lines);
    }

    /**
     * Runs the tool {@code bin/pulsar arguments...} of {@code home} to its end, within two
     * minutes, its output in {@code log}; fails with that output unless it succeeds.
     */
    static void runTool(Path home, List<String> arguments, Map<String, String> environment, Path log)
            throws IOException, InterruptedException {
        List<String> command = new ArrayList<>();
        command.add(home.resolve("bin/pulsar").toString());
        command.addAll(arguments);
        ProcessBuilder builder = new ProcessBuilder(command);
        builder.environment().putAll(PulsarDistribution.javaEnvironment());
        builder.environment().putAll(environment);
        builder.redirectErrorStream(true);
        builder.redirectOutput(log.toFile());
        Process tool = builder.start();
        if (!tool.waitFor(2, TimeUnit.MINUTES) || tool.exitValue() != 0) {
            tool.destroyForcibly();
            throw new IllegalStateException(arguments.get(0) + " failed: " + Files.readString(log));
        }
    }
}
