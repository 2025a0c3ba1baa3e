package io.github.txnpreserver.bench;

import io.github.txnpreserver.it.LocalPulsar;
import io.github.txnpreserver.it.PulsarDistribution;
import java.io.IOException;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;
import java.time.Duration;

/**
 * Where the broker's CPU goes per transaction, by thread, stock against the plugin: brokers
 * alternate (stock, plugin, stock, plugin), each warmed up with 32 clients for the given
 * seconds, then measured for 60 s with 32 clients. Per-thread CPU is read from
 * {@code /proc/<pid>/task} (Linux), threads grouped by name with digits folded; the JIT's
 * own activity from {@code jstat -compiler} before and after. Usage:
 * {@code benchmarks/run.sh --thread-cpu [warm-up seconds, default 150]}.
 */
public final class ThreadCpuProbe {

    private static final int CLIENTS = 32;
    private static final Duration MEASURED = Duration.ofSeconds(60);

    private ThreadCpuProbe() {
    }

    public static void main(String[] args) throws Exception {
        // Measured brokers run the compiler a production broker runs with.
        System.setProperty(PulsarDistribution.FULL_JIT, "true");
        int warmupSeconds = args.length > 0 ? Integer.parseInt(args[0]) : 150;
        // -Dtxnpreserver.bench.sides=stock,plugin and -Dtxnpreserver.bench.brokerJvmOptions=... (with
        // {side} replaced) run fewer brokers, e.g. each with a flight recording of its measured minute.
        List<String> sides = List.of(System.getProperty("txnpreserver.bench.sides", "stock,plugin,stock,plugin")
                .split(","));
        String jvmOptions = System.getProperty("txnpreserver.bench.brokerJvmOptions", "");
        for (String side : sides) {
            String options = jvmOptions.replace("{side}", side);
            try (LocalPulsar pulsar = switch (side) {
                case "stock" -> LocalPulsar.startStockWithOptions("cpu-stock",
                        Map.of("transactionCoordinatorEnabled", "true"), options);
                // The plugin installed, its protocol handler started, the stock coordinator store:
                // what loading the plugin costs apart from its store.
                case "handler" -> LocalPulsar.start("cpu-handler", Map.of(
                        "transactionMetadataStoreProviderClassName",
                        "org.apache.pulsar.transaction.coordinator.impl.MLTransactionMetadataStoreProvider"), options);
                default -> LocalPulsar.start("cpu-plugin", Map.of("transactionMetaPersistCount", "100"), options);
            }) {
                String prefix = "persistent://public/default/cpu-" + side + "-";
                BrokerDriver.throughput(pulsar.serviceUrl(), pulsar.pid(), prefix + "warm-up", CLIENTS,
                        Duration.ZERO, Duration.ofSeconds(warmupSeconds));
                String jitBefore = jstatCompiler(pulsar.pid());
                Map<String, Long> before = ticksByThreadName(pulsar.pid());
                BrokerDriver.Throughput run = BrokerDriver.throughput(pulsar.serviceUrl(), pulsar.pid(),
                        prefix + "measured", CLIENTS, Duration.ZERO, MEASURED);
                Map<String, Long> after = ticksByThreadName(pulsar.pid());
                String jitAfter = jstatCompiler(pulsar.pid());
                double transactions = run.txnPerSecond() * MEASURED.toSeconds();
                System.out.printf("== %s, %d s warm-up: %.1f txn/s, broker CPU %.0f us per txn%n"
                        + "   jstat -compiler before: %s%n   jstat -compiler after:  %s%n", side, warmupSeconds,
                        run.txnPerSecond(), run.brokerCpuMicrosPerTxn(), jitBefore, jitAfter);
                List<Map.Entry<String, Long>> deltas = new ArrayList<>();
                after.forEach((name, ticks) -> deltas.add(Map.entry(name, ticks - before.getOrDefault(name, 0L))));
                deltas.sort((a, b) -> Long.compare(b.getValue(), a.getValue()));
                for (Map.Entry<String, Long> delta : deltas) {
                    double micros = ProcessCpu.microsOfTicks(delta.getValue()) / transactions;
                    if (micros >= 1) {
                        System.out.printf("   %-16s %7.1f us per txn%n", delta.getKey(), micros);
                    }
                }
            }
        }
    }

    /** CPU ticks (1/100 s) of the process's threads, by name (as the kernel truncates it), digits folded. */
    private static Map<String, Long> ticksByThreadName(long pid) throws IOException {
        Map<String, Long> ticks = new TreeMap<>();
        for (String stat : ProcessCpu.threadStats(pid).values()) {
            ticks.merge(ProcessCpu.name(stat).replaceAll("[0-9]+", "N"), ProcessCpu.ticks(stat), Long::sum);
        }
        return ticks;
    }

    private static String jstatCompiler(long pid) throws IOException, InterruptedException {
        Process jstat = new ProcessBuilder("jstat", "-compiler", Long.toString(pid)).redirectErrorStream(true).start();
        String out = new String(jstat.getInputStream().readAllBytes()).trim();
        jstat.waitFor();
        return out.replaceAll("\\s*\\n\\s*", " | ");
    }
}
