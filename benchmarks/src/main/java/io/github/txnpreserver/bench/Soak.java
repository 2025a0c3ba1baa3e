package io.github.txnpreserver.bench;

import io.github.txnpreserver.it.EndAnswer;
import io.github.txnpreserver.it.LocalPulsar;
import io.github.txnpreserver.it.PulsarDistribution;
import io.github.txnpreserver.it.RetryingEndClient;
import java.io.IOException;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import org.apache.pulsar.client.admin.LongRunningProcessStatus;
import org.apache.pulsar.client.admin.PulsarAdmin;
import org.apache.pulsar.client.api.PulsarClient;
import org.apache.pulsar.client.api.transaction.Transaction;
import org.apache.pulsar.client.api.transaction.TxnID;

/**
 * The window observed, not computed: one plugin broker at full rate (32 clients) for
 * {@code minutes} (30 by default), its memory bound so small that memory's hot part holds
 * about a minute of outcomes at the end; a probe committed every {@value #PROBE_SECONDS} s;
 * each minute the broker's heap after a full collection, its RSS and its GC pause time.
 * Then every probe is retried through the stock client (the oldest first): the window is
 * the age of the oldest one answered. The state topic is compacted and its storage divided
 * by the kept outcomes. Usage: {@code benchmarks/run.sh --soak [minutes] [bound in MiB]}.
 */
public final class Soak {

    private static final int PROBE_SECONDS = 5;
    private static final int CLIENTS = 32;
    private static final int WARM_UP_MINUTES = 5;
    private static final String STATE_TOPIC = "persistent://pulsar/system/__terminated_txn_state_0";

    private Soak() {
    }

    private record Probe(TxnID txnId, long committedMillis) {
    }

    private record Sample(double minutes, double heapAfterGcMiB, double rssMiB, double gcPauseSeconds) {
    }

    public static void main(String[] args) throws Exception {
        System.setProperty(PulsarDistribution.FULL_JIT, "true");
        int minutes = args.length > 0 ? Integer.parseInt(args[0]) : 30;
        String boundMiB = args.length > 1 ? args[1] : "0.6";
        try (LocalPulsar broker = LocalPulsar.start("soak", Map.of("transactionMetaPersistCount", "100",
                "transactionMetaPersistMaxMemoryInMB", boundMiB))) {
            say("soak: %d min at %d clients, memory bound %s MiB, broker pid %d", minutes, CLIENTS, boundMiB,
                    broker.pid());
            CompletableFuture<BrokerDriver.Throughput> load = CompletableFuture.supplyAsync(() -> {
                try {
                    return BrokerDriver.throughput(broker.serviceUrl(), broker.pid(),
                            "persistent://public/default/soak", CLIENTS, Duration.ZERO,
                            Duration.ofMinutes(minutes));
                } catch (Exception e) {
                    throw new IllegalStateException(e);
                }
            });
            List<Probe> probes = new ArrayList<>();
            List<Sample> samples = new ArrayList<>();
            long start = System.currentTimeMillis();
            long nextSample = start + 60_000;
            double gcBefore = gcSeconds(broker.pid());
            try (PulsarClient probing = BrokerDriver.client(broker.serviceUrl())) {
                while (!load.isDone()) {
                    try {
                        Transaction txn = probing.newTransaction().withTransactionTimeout(5, TimeUnit.MINUTES)
                                .build().get(60, TimeUnit.SECONDS);
                        txn.commit().get(60, TimeUnit.SECONDS);
                        probes.add(new Probe(txn.getTxnID(), System.currentTimeMillis()));
                    } catch (Exception e) {
                        say("probe failed: %s", e);
                    }
                    if (System.currentTimeMillis() >= nextSample) {
                        double gcNow = gcSeconds(broker.pid());
                        Sample sample = new Sample((System.currentTimeMillis() - start) / 60_000.0,
                                heapAfterFullGcMiB(broker.pid()), rssMiB(broker.pid()), gcNow - gcBefore);
                        gcBefore = gcSeconds(broker.pid());
                        samples.add(sample);
                        say("minute %.1f: heap after GC %.1f MiB, RSS %.0f MiB, GC pauses %.2f s, kept %.0f"
                                        + " (%.0f cold), window %.0f s", sample.minutes(), sample.heapAfterGcMiB(),
                                sample.rssMiB(), sample.gcPauseSeconds(), metric(broker, "kept_outcomes"),
                                metric(broker, "cold_outcomes"), metric(broker, "window_seconds"));
                        nextSample += 60_000;
                    }
                    Thread.sleep(PROBE_SECONDS * 1000L);
                }
            }
            BrokerDriver.Throughput throughput = load.join();
            say("load: %d committed in %.0f s (%.0f txn/s); %d probes", throughput.committed(), throughput.seconds(),
                    throughput.txnPerSecond(), probes.size());
            double kept = metric(broker, "kept_outcomes");
            double cold = metric(broker, "cold_outcomes");
            double evicted = metric(broker, "evictions_total");
            say("kept %.0f outcomes, %.0f cold, %.0f dropped by the memory bound", kept, cold, evicted);

            long retryStart = System.currentTimeMillis();
            long oldestAnsweredMillis = -1;
            int answered = 0;
            List<Long> coldNanos = new ArrayList<>();
            List<Long> hotNanos = new ArrayList<>();
            try (RetryingEndClient retry = RetryingEndClient.connect(broker.serviceUrl())) {
                for (Probe probe : probes) {
                    long begin = System.nanoTime();
                    EndAnswer answer = retry.commit(probe.txnId());
                    long took = System.nanoTime() - begin;
                    if (answer == EndAnswer.SUCCESS) {
                        answered++;
                        if (oldestAnsweredMillis < 0) {
                            oldestAnsweredMillis = probe.committedMillis();
                        }
                        // Older than two minutes: out of memory's hot part (about one minute).
                        if (retryStart - probe.committedMillis() > 120_000) {
                            coldNanos.add(took);
                        } else if (retryStart - probe.committedMillis() < 30_000) {
                            // The newest half minute: in memory's hot part, the retry as before the cold tier.
                            hotNanos.add(took);
                        }
                    } else {
                        say("probe %s committed %.0f s before the retries: %s", probe.txnId(),
                                (retryStart - probe.committedMillis()) / 1000.0, answer);
                    }
                }
            }
            double windowObserved = oldestAnsweredMillis < 0 ? 0 : (retryStart - oldestAnsweredMillis) / 1000.0;
            double bytesPerOutcome = storagePerOutcome(broker, kept);
            double slope = heapSlopeMiBPerHour(samples);
            long[] sorted = coldNanos.stream().mapToLong(Long::longValue).sorted().toArray();
            long[] hot = hotNanos.stream().mapToLong(Long::longValue).sorted().toArray();
            double[] coldRead = histogramQuantilesMillis(broker, "cold_read_latency_seconds", 0.5, 0.99);
            say("RESULT window_observed_seconds=%.0f soak_probes_answered=%d/%d cold_lookup_p50_ms=%.1f"
                            + " cold_lookup_p99_ms=%.1f heap_growth_mib_per_hour=%.2f state_topic_bytes_per_outcome=%.2f"
                            + " soak_txn_per_second=%.0f soak_kept_outcomes=%.0f soak_cold_outcomes=%.0f"
                            + " soak_memory_evictions=%.0f hot_lookup_p50_ms=%.1f hot_lookup_p99_ms=%.1f"
                            + " cold_read_p50_ms_at_most=%.0f cold_read_p99_ms_at_most=%.0f",
                    windowObserved, answered, probes.size(), percentile(sorted, 50), percentile(sorted, 99), slope,
                    bytesPerOutcome, throughput.txnPerSecond(), kept, cold, evicted, percentile(hot, 50),
                    percentile(hot, 99), coldRead[0], coldRead[1]);
        }
    }

    /** Bytes of the state topic's ledgers after a compaction (compacted ledger and tail) per kept outcome. */
    private static double storagePerOutcome(LocalPulsar broker, double kept) throws Exception {
        try (PulsarAdmin admin = PulsarAdmin.builder().serviceHttpUrl(broker.httpUrl()).build()) {
            admin.topics().triggerCompaction(STATE_TOPIC);
            long deadline = System.nanoTime() + TimeUnit.MINUTES.toNanos(10);
            while (admin.topics().compactionStatus(STATE_TOPIC).status == LongRunningProcessStatus.Status.RUNNING
                    && System.nanoTime() < deadline) {
                Thread.sleep(1000);
            }
            var stats = admin.topics().getInternalStats(STATE_TOPIC);
            long compacted = stats.compactedLedger == null ? 0 : stats.compactedLedger.size;
            say("state topic: compacted ledger %d bytes, topic storage %d bytes (%d ledgers, the tail not yet"
                            + " trimmed)", compacted, admin.topics().getStats(STATE_TOPIC).getStorageSize(),
                    stats.ledgers.size());
            return compacted / Math.max(1, kept);
        }
    }

    /** Least-squares slope of the heap after GC, minutes after the warm-up, in MiB per hour. */
    private static double heapSlopeMiBPerHour(List<Sample> samples) {
        List<Sample> steady = samples.stream().filter(sample -> sample.minutes() >= WARM_UP_MINUTES).toList();
        if (steady.size() < 2) {
            return Double.NaN;
        }
        double meanX = steady.stream().mapToDouble(Sample::minutes).average().orElse(0);
        double meanY = steady.stream().mapToDouble(Sample::heapAfterGcMiB).average().orElse(0);
        double num = 0;
        double den = 0;
        for (Sample sample : steady) {
            num += (sample.minutes() - meanX) * (sample.heapAfterGcMiB() - meanY);
            den += (sample.minutes() - meanX) * (sample.minutes() - meanX);
        }
        return num / den * 60;
    }

    private static double heapAfterFullGcMiB(long pid) throws IOException, InterruptedException {
        jcmd(pid, "GC.run");
        String info = jcmd(pid, "GC.heap_info");
        Matcher used = Pattern.compile("used (\\d+)K").matcher(info);
        return used.find() ? Long.parseLong(used.group(1)) / 1024.0 : Double.NaN;
    }

    /** Seconds the JVM spent in GC pauses so far (jstat's GCT). */
    private static double gcSeconds(long pid) throws IOException, InterruptedException {
        String out = run(javaTool("jstat"), "-gcutil", Long.toString(pid));
        String[] lines = out.trim().split("\n");
        String[] header = lines[0].trim().split("\\s+");
        String[] values = lines[lines.length - 1].trim().split("\\s+");
        for (int i = 0; i < header.length; i++) {
            if (header[i].equals("GCT")) {
                return Double.parseDouble(values[i]);
            }
        }
        return Double.NaN;
    }

    private static double rssMiB(long pid) throws IOException {
        for (String line : Files.readAllLines(Path.of("/proc/" + pid + "/status"))) {
            if (line.startsWith("VmRSS:")) {
                return Long.parseLong(line.replaceAll("\\D", "")) / 1024.0;
            }
        }
        return Double.NaN;
    }

    private static String jcmd(long pid, String command) throws IOException, InterruptedException {
        return run(javaTool("jcmd"), Long.toString(pid), command);
    }

    private static String javaTool(String name) {
        return Path.of(System.getProperty("java.home"), "bin", name).toString();
    }

    private static String run(String... command) throws IOException, InterruptedException {
        Process process = new ProcessBuilder(command).redirectErrorStream(true).start();
        String out = new String(process.getInputStream().readAllBytes());
        process.waitFor(60, TimeUnit.SECONDS);
        return out;
    }

    /** Coordinator 0's value of {@code pulsar_txn_preserver_<name>} (the first series). */
    private static double metric(LocalPulsar broker, String name) throws Exception {
        String body = HttpClient.newHttpClient().send(HttpRequest.newBuilder(URI.create(broker.httpUrl()
                + "/metrics/")).build(), HttpResponse.BodyHandlers.ofString()).body();
        Matcher matcher = Pattern.compile("^pulsar_txn_preserver_" + Pattern.quote(name)
                + "\\{[^}]*coordinator_id=\"0\"[^}]*\\} (\\S+)", Pattern.MULTILINE).matcher(body);
        return matcher.find() ? Double.parseDouble(matcher.group(1)) : Double.NaN;
    }

    /**
     * Upper bounds (ms) of the histogram buckets that hold the given quantiles of coordinator
     * 0's {@code pulsar_txn_preserver_<name>}: the plugin's own view of a cold read, without
     * the client's round trip or the broker's other lookups of the same retry.
     */
    private static double[] histogramQuantilesMillis(LocalPulsar broker, String name, double... quantiles)
            throws Exception {
        String body = HttpClient.newHttpClient().send(HttpRequest.newBuilder(URI.create(broker.httpUrl()
                + "/metrics/")).build(), HttpResponse.BodyHandlers.ofString()).body();
        Matcher matcher = Pattern.compile("^pulsar_txn_preserver_" + Pattern.quote(name)
                + "_bucket\\{[^}]*coordinator_id=\"0\"[^}]*le=\"([^\"]+)\"[^}]*\\} (\\S+)", Pattern.MULTILINE)
                .matcher(body);
        List<double[]> buckets = new ArrayList<>();
        while (matcher.find()) {
            double le = matcher.group(1).equals("+Inf") ? Double.POSITIVE_INFINITY : Double.parseDouble(matcher.group(1));
            buckets.add(new double[] {le * 1000, Double.parseDouble(matcher.group(2))});
        }
        double[] result = new double[quantiles.length];
        double total = buckets.isEmpty() ? 0 : buckets.get(buckets.size() - 1)[1];
        for (int q = 0; q < quantiles.length; q++) {
            result[q] = Double.NaN;
            for (double[] bucket : buckets) {
                if (total > 0 && bucket[1] >= quantiles[q] * total) {
                    result[q] = bucket[0];
                    break;
                }
            }
        }
        return result;
    }

    private static double percentile(long[] sortedNanos, int p) {
        if (sortedNanos.length == 0) {
            return Double.NaN;
        }
        return sortedNanos[Math.max(0, Math.min(sortedNanos.length - 1,
                (int) Math.ceil(p / 100.0 * sortedNanos.length) - 1))] / 1e6;
    }

    private static void say(String format, Object... args) {
        System.out.printf(Locale.ROOT, format + "%n", args);
        System.out.flush();
    }
}
