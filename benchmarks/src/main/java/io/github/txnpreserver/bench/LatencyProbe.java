package io.github.txnpreserver.bench;

import io.github.txnpreserver.it.LocalPulsar;
import io.github.txnpreserver.it.PulsarDistribution;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Collections;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import org.apache.pulsar.client.api.Message;
import org.apache.pulsar.client.api.MessageId;
import org.apache.pulsar.client.api.Producer;
import org.apache.pulsar.client.api.PulsarClient;
import org.apache.pulsar.client.api.Reader;
import org.apache.pulsar.client.api.Schema;
import org.apache.pulsar.client.api.transaction.Transaction;

/**
 * Whether the plugin's slowest commits fall on its state-topic writes: a stock and a plugin
 * broker side by side, both warmed up, then one client committing sequentially on each in turns
 * (as the benchmark's latency figure), each commit's wall-clock start and duration kept. On
 * the plugin's side a reader follows coordinator 0's state topic meanwhile, so each group
 * flush's send time (the message's publish time) and arrival at the reader are known.
 * Printed: each side's p50, p99 and p99.9, and for the plugin's side how often a commit in
 * its slowest 1 % overlaps a window after a flush against how often any commit does. With a
 * share (percent of stock's rate at the end of its 32-client warm-up), each side's turns are
 * open-loop runs at that fixed rate instead (as the benchmark's open-loop figures: latency of
 * the whole transaction from its intended start). Usage:
 * {@code benchmarks/run.sh --latency-probe [commits per side, default 20000] [warm-up seconds,
 * default 150] [open-loop share in percent, default none]}.
 */
public final class LatencyProbe {

    private static final String STATE_TOPIC = "persistent://pulsar/system/__terminated_txn_state_0";
    private static final int SLICES = 8;
    private static final byte[] PAYLOAD = new byte[256];

    private LatencyProbe() {
    }

    public static void main(String[] args) throws Exception {
        System.setProperty(PulsarDistribution.FULL_JIT, "true");
        int commits = args.length > 0 ? Integer.parseInt(args[0]) : 20_000;
        int warmupSeconds = args.length > 1 ? Integer.parseInt(args[1]) : 150;
        int share = args.length > 2 ? Integer.parseInt(args[2]) : 0;
        try (LocalPulsar stock = LocalPulsar.startStock("latency-stock", Map.of("transactionCoordinatorEnabled",
                "true"));
             LocalPulsar plugin = LocalPulsar.start("latency-plugin", Map.of("transactionMetaPersistCount", "100"))) {
            double stockRate = 0;
            for (LocalPulsar broker : List.of(stock, plugin)) {
                BrokerDriver.Throughput warm = BrokerDriver.throughput(broker.serviceUrl(), broker.pid(),
                        "persistent://public/default/warm-up", 32, Duration.ZERO, Duration.ofSeconds(warmupSeconds));
                stockRate = broker == stock ? warm.txnPerSecond() : stockRate;
            }
            double rate = stockRate * share / 100;
            if (share > 0) {
                say("open loop at %d %% of stock's warm-up rate (%.0f txn/s): %.0f txn/s over 32 connections",
                        share, stockRate, rate);
            }
            Thread.sleep(30_000);
            List<long[]> stockCommits = new ArrayList<>();
            List<long[]> pluginCommits = new ArrayList<>();
            List<long[]> flushes = new ArrayList<>();
            try (PulsarClient watcher = PulsarClient.builder().serviceUrl(plugin.serviceUrl()).build();
                 Reader<byte[]> reader = watcher.newReader(Schema.BYTES).topic(STATE_TOPIC)
                         .startMessageId(MessageId.latest).create()) {
                Thread follower = new Thread(() -> follow(reader, flushes), "state-topic-follower");
                follower.setDaemon(true);
                follower.start();
                for (int slice = 0; slice < SLICES; slice++) {
                    boolean stockFirst = slice % 2 == 0;
                    for (int turn = 0; turn < 2; turn++) {
                        boolean isStock = stockFirst == (turn == 0);
                        LocalPulsar broker = isStock ? stock : plugin;
                        String topic = "persistent://public/default/latency-" + (isStock ? "stock" : "plugin");
                        List<long[]> into = isStock ? stockCommits : pluginCommits;
                        if (share > 0) {
                            runOpenLoop(broker, topic, rate, commits / SLICES, into);
                        } else {
                            run(broker.serviceUrl(), topic, commits / SLICES / 10, commits / SLICES, into);
                        }
                    }
                }
                Thread.sleep(3000);
                follower.interrupt();
            }
            report("stock", stockCommits, List.of());
            synchronized (flushes) {
                report("plugin", pluginCommits, new ArrayList<>(flushes));
            }
            gcReport("stock", stockCommits, BrokerEvents.gcPauses(stock.dir()));
            gcReport("plugin", pluginCommits, BrokerEvents.gcPauses(plugin.dir()));
        }
    }

    /** Commits of {@code measured} sequential transactions: {start wall millis, end wall millis, micros}. */
    private static void run(String serviceUrl, String topic, int warmup, int measured, List<long[]> into)
            throws Exception {
        try (PulsarClient client = BrokerDriver.client(serviceUrl);
             Producer<byte[]> producer = client.newProducer(Schema.BYTES).topic(topic).enableBatching(false)
                     .sendTimeout(0, TimeUnit.SECONDS).create()) {
            for (int i = 0; i < warmup + measured; i++) {
                Transaction txn = client.newTransaction().withTransactionTimeout(1, TimeUnit.MINUTES).build().get();
                producer.newMessage(txn).value(PAYLOAD).send();
                long startWall = System.currentTimeMillis();
                long start = System.nanoTime();
                txn.commit().get();
                long micros = (System.nanoTime() - start) / 1000;
                if (i >= warmup) {
                    into.add(new long[] {startWall, startWall + (micros + 999) / 1000, micros});
                }
            }
        }
    }

    /** {@code measured} transactions at a fixed rate after 2 s of the same: {intended start, end, micros}. */
    private static void runOpenLoop(LocalPulsar broker, String topic, double rate, int measured, List<long[]> into)
            throws Exception {
        List<long[]> run = Collections.synchronizedList(new ArrayList<>());
        BrokerDriver.openLoop(broker.serviceUrl(), broker.pid(), topic, 32, rate, Duration.ofSeconds(2),
                Duration.ofMillis((long) (measured * 1000 / rate)),
                (start, micros) -> run.add(new long[] {start, start + (micros + 999) / 1000, micros}));
        synchronized (run) {
            into.addAll(run);
        }
    }

    private static void follow(Reader<byte[]> reader, List<long[]> flushes) {
        try {
            while (!Thread.currentThread().isInterrupted()) {
                Message<byte[]> message = reader.readNext(1, TimeUnit.SECONDS);
                if (message != null) {
                    synchronized (flushes) {
                        flushes.add(new long[] {message.getPublishTime(), System.currentTimeMillis()});
                    }
                }
            }
        } catch (Exception e) {
            if (!Thread.currentThread().isInterrupted()) {
                System.err.println("state-topic follower stopped: " + e);
            }
        }
    }

    private static void report(String side, List<long[]> commits, List<long[]> flushes) {
        long[] micros = commits.stream().mapToLong(c -> c[2]).sorted().toArray();
        long p99 = micros[(int) (micros.length * 0.99)];
        say("%-6s %d commits: p50 %.2f ms, p99 %.2f ms, p99.9 %.2f ms, max %.2f ms", side, micros.length,
                micros[micros.length / 2] / 1000.0, p99 / 1000.0, micros[(int) (micros.length * 0.999)] / 1000.0,
                micros[micros.length - 1] / 1000.0);
        if (flushes.isEmpty()) {
            return;
        }
        // Flush messages of one group go out together: one window per distinct publish time.
        long[] sends = flushes.stream().mapToLong(f -> f[0]).distinct().sorted().toArray();
        long[] arrivals = flushes.stream().mapToLong(f -> f[1]).sorted().toArray();
        say("plugin state-topic messages: %d, distinct send times %d; send-to-arrival median %d ms", flushes.size(),
                sends.length, median(flushes.stream().mapToLong(f -> f[1] - f[0]).toArray()));
        for (long window : new long[] {10, 25, 50, 100, 200}) {
            long all = 0;
            long slow = 0;
            long slowCount = 0;
            for (long[] c : commits) {
                boolean overlaps = overlaps(sends, c[0], c[1], window);
                all += overlaps ? 1 : 0;
                if (c[2] > p99) {
                    slowCount++;
                    slow += overlaps ? 1 : 0;
                }
            }
            say("  window [send, send+%3d ms]: covers %.1f %% of all commits, %.1f %% of the slowest 1 %% (%d)",
                    window, 100.0 * all / commits.size(), 100.0 * slow / slowCount, slowCount);
        }
        // Phase of each slow commit after the last send, in 100 ms buckets, against all commits.
        int[] allPhase = new int[12];
        int[] slowPhase = new int[12];
        for (long[] c : commits) {
            int index = Arrays.binarySearch(sends, c[0]);
            int last = index >= 0 ? index : -index - 2;
            if (last < 0) {
                continue;
            }
            int bucket = (int) Math.min(11, (c[0] - sends[last]) / 100);
            allPhase[bucket]++;
            if (c[2] > p99) {
                slowPhase[bucket]++;
            }
        }
        say("  start after last send (100 ms buckets, last >= 1.1 s): all %s", Arrays.toString(allPhase));
        say("                                                        slow %s", Arrays.toString(slowPhase));
        // End of each commit after the last send before it, in 5 ms buckets up to 200 ms: a
        // stall after a send shows as slow commits ending in the buckets after it.
        int[] allEnd = new int[41];
        int[] slowEnd = new int[41];
        for (long[] c : commits) {
            int index = Arrays.binarySearch(sends, c[1]);
            int last = index >= 0 ? index : -index - 2;
            if (last < 0) {
                continue;
            }
            int bucket = (int) Math.min(40, (c[1] - sends[last]) / 5);
            allEnd[bucket]++;
            if (c[2] > p99) {
                slowEnd[bucket]++;
            }
        }
        say("  end after last send (5 ms buckets, last >= 200 ms): all  %s", Arrays.toString(allEnd));
        say("                                                     slow %s", Arrays.toString(slowEnd));
        say("  arrivals span %d ms", arrivals.length == 0 ? 0 : arrivals[arrivals.length - 1] - arrivals[0]);
    }

    /**
     * How often a commit overlaps one of its broker's collector pauses: all commits against
     * the slowest 1 %, and the pauses in the commits' span (count, total, longest).
     */
    private static void gcReport(String side, List<long[]> commits, List<BrokerEvents.Pause> pauses) {
        long[] micros = commits.stream().mapToLong(c -> c[2]).sorted().toArray();
        long p99 = micros[(int) (micros.length * 0.99)];
        long from = commits.stream().mapToLong(c -> c[0]).min().orElse(0);
        long to = commits.stream().mapToLong(c -> c[1]).max().orElse(0);
        long count = 0;
        long total = 0;
        long longest = 0;
        for (BrokerEvents.Pause pause : pauses) {
            if (pause.overlaps(from, to)) {
                long millis = pause.endMillis() - pause.startMillis();
                count++;
                total += millis;
                longest = Math.max(longest, millis);
            }
        }
        long all = 0;
        long slow = 0;
        long slowCount = 0;
        for (long[] c : commits) {
            boolean overlaps = pauses.stream().anyMatch(pause -> pause.overlaps(c[0], c[1]));
            all += overlaps ? 1 : 0;
            if (c[2] > p99) {
                slowCount++;
                slow += overlaps ? 1 : 0;
            }
        }
        say("%-6s GC pauses over the commits' span (%d s, slices and the gaps between them): %d, %d ms in all,"
                        + " longest %d ms; overlapping one: %.1f %% of all commits, %.1f %% of the slowest 1 %% (%d)",
                side, (to - from) / 1000, count, total, longest, 100.0 * all / commits.size(),
                100.0 * slow / slowCount, slowCount);
    }

    private static boolean overlaps(long[] sends, long start, long end, long window) {
        // Some send s with [s, s + window] meeting [start, end]: s <= end and s + window >= start.
        int index = Arrays.binarySearch(sends, end);
        int last = index >= 0 ? index : -index - 2;
        return last >= 0 && sends[last] + window >= start;
    }

    private static long median(long[] values) {
        Arrays.sort(values);
        return values.length == 0 ? 0 : values[values.length / 2];
    }

    private static void say(String format, Object... values) {
        System.out.println(String.format(Locale.ROOT, format, values));
    }
}
