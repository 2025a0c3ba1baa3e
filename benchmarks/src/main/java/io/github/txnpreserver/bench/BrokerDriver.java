package io.github.txnpreserver.bench;

import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.atomic.LongAccumulator;
import java.util.concurrent.locks.LockSupport;
import org.HdrHistogram.Recorder;
import org.HdrHistogram.Histogram;
import org.apache.pulsar.client.api.Producer;
import org.apache.pulsar.client.api.PulsarClient;
import org.apache.pulsar.client.api.Schema;
import org.apache.pulsar.client.api.transaction.Transaction;

/** Transactional produce-and-commit through the stock client, as an application does it. */
final class BrokerDriver {

    private static final byte[] PAYLOAD = new byte[256];

    private BrokerDriver() {
    }

    static PulsarClient client(String serviceUrl) throws Exception {
        return PulsarClient.builder().serviceUrl(serviceUrl).enableTransaction(true)
                .operationTimeout(60, TimeUnit.SECONDS).build();
    }

    /** Commit latency in microseconds: the time of {@code commit()} of a transaction holding one message. */
    static Histogram commitLatency(String serviceUrl, String topic, int warmup, int measured) throws Exception {
        Histogram histogram = new Histogram(TimeUnit.SECONDS.toMicros(60), 3);
        try (PulsarClient client = client(serviceUrl);
             Producer<byte[]> producer = client.newProducer(Schema.BYTES).topic(topic).enableBatching(false)
                     .sendTimeout(0, TimeUnit.SECONDS).create()) {
            for (int i = 0; i < warmup + measured; i++) {
                Transaction txn = client.newTransaction().withTransactionTimeout(1, TimeUnit.MINUTES).build().get();
                producer.newMessage(txn).value(PAYLOAD).send();
                long start = System.nanoTime();
                txn.commit().get();
                long micros = (System.nanoTime() - start) / 1000;
                if (i >= warmup) {
                    histogram.recordValue(Math.min(micros, histogram.getHighestTrackableValue()));
                }
            }
        }
        return histogram;
    }

    /**
     * What a throughput run measured: transactions committed over {@code seconds}, and the
     * broker's CPU over the same interval, of which {@code jitCpuMicros} its JIT compiler
     * threads took (a warm-up cost a broker running for days no longer pays, and one that
     * varies between identical brokers).
     */
    record Throughput(long committed, double seconds, long brokerCpuMicros, long jitCpuMicros) {

        double txnPerSecond() {
            return committed / seconds;
        }

        double brokerCpuMicrosPerTxn() {
            return committed == 0 ? Double.NaN : (double) brokerCpuMicros / committed;
        }

        double jitCpuMicrosPerTxn() {
            return committed == 0 ? Double.NaN : (double) jitCpuMicros / committed;
        }
    }

    /**
     * Committed transactions per second with {@code clients} concurrent clients, each with its
     * own connection, and the broker process's CPU time per committed transaction over the
     * same interval: under CPU saturation the second explains the first, with less noise.
     */
    static Throughput throughput(String serviceUrl, long brokerPid, String topic, int clients, Duration warmup,
                                 Duration measured) throws Exception {
        return throughput(serviceUrl, brokerPid, topic, clients, 0, warmup, measured);
    }

    /**
     * As {@link #throughput(String, long, String, int, Duration, Duration)}, with the clients
     * together paced to {@code txnPerSecond} (0: as fast as the broker answers): each client
     * starts a transaction every {@code clients / txnPerSecond} seconds, staggered; one that
     * fell behind starts its next at once and its schedule anew from there, so it makes up
     * for at most one missed start.
     */
    static Throughput throughput(String serviceUrl, long brokerPid, String topic, int clients, double txnPerSecond,
                                 Duration warmup, Duration measured) throws Exception {
        if (txnPerSecond < 0 || Double.isNaN(txnPerSecond)) {
            throw new IllegalArgumentException("rate " + txnPerSecond + " txn/s");
        }
        long intervalNanos = txnPerSecond > 0 ? (long) (clients * 1e9 / txnPerSecond) : 0;
        List<PulsarClient> pulsarClients = new ArrayList<>();
        List<Producer<byte[]>> producers = new ArrayList<>();
        try {
            for (int i = 0; i < clients; i++) {
                PulsarClient client = client(serviceUrl);
                pulsarClients.add(client);
                producers.add(client.newProducer(Schema.BYTES).topic(topic).enableBatching(false)
                        .sendTimeout(0, TimeUnit.SECONDS).create());
            }
            AtomicBoolean counting = new AtomicBoolean();
            AtomicBoolean running = new AtomicBoolean(true);
            AtomicLong committed = new AtomicLong();
            List<Thread> threads = new ArrayList<>();
            for (int i = 0; i < clients; i++) {
                PulsarClient client = pulsarClients.get(i);
                Producer<byte[]> producer = producers.get(i);
                long firstStart = System.nanoTime() + intervalNanos * i / clients;
                Thread thread = new Thread(() -> {
                    long nextStart = firstStart;
                    while (running.get()) {
                        if (intervalNanos > 0) {
                            long wait = nextStart - System.nanoTime();
                            if (wait > 0) {
                                LockSupport.parkNanos(wait);
                                continue;
                            }
                            nextStart = Math.max(nextStart + intervalNanos, System.nanoTime());
                        }
                        try {
                            Transaction txn = client.newTransaction().withTransactionTimeout(1, TimeUnit.MINUTES)
                                    .build().get();
                            producer.newMessage(txn).value(PAYLOAD).send();
                            txn.commit().get();
                            if (counting.get()) {
                                committed.incrementAndGet();
                            }
                        } catch (Exception e) {
                            if (running.get()) {
                                System.err.println("transaction failed: " + e);
                            }
                        }
                    }
                }, "bench-client-" + i);
                thread.start();
                threads.add(thread);
            }
            Thread.sleep(warmup.toMillis());
            counting.set(true);
            long start = System.nanoTime();
            long cpuStart = ProcessCpu.micros(brokerPid);
            Map<String, Long> jitStart = ProcessCpu.compilerTicks(brokerPid);
            Thread.sleep(measured.toMillis());
            long count = committed.get();
            long cpu = ProcessCpu.micros(brokerPid) - cpuStart;
            long jit = ProcessCpu.compilerMicrosBetween(jitStart, ProcessCpu.compilerTicks(brokerPid));
            double seconds = (System.nanoTime() - start) / 1e9;
            running.set(false);
            for (Thread thread : threads) {
                thread.join(TimeUnit.MINUTES.toMillis(2));
            }
            return new Throughput(count, seconds, cpu, jit);
        } finally {
            for (Producer<byte[]> producer : producers) {
                producer.closeAsync();
            }
            // All at once: closing a transactional client takes about 2 s, one by one a
            // minute for 32 of them.
            List<CompletableFuture<Void>> closing = new ArrayList<>();
            for (PulsarClient client : pulsarClients) {
                closing.add(client.closeAsync());
            }
            CompletableFuture.allOf(closing.toArray(CompletableFuture[]::new)).get(2, TimeUnit.MINUTES);
        }
    }

    /** The highest latency an open-loop histogram tracks, in microseconds (a minute: the transaction timeout). */
    static final long OPEN_LOOP_HIGHEST_MICROS = TimeUnit.SECONDS.toMicros(60);

    /**
     * What an open-loop run measured: the latency of each transaction intended to start in the
     * measured interval, from its intended start to its commit's completion, in microseconds;
     * how many were intended, committed and failed; the interval's length and the broker's CPU
     * over it; how late the load generator itself started a transaction at most (its own
     * lateness is in the latencies too, as it must be: it is the queueing a client would see);
     * and, in wall-clock millis, from the first measured intended start to the last measured
     * transaction's end.
     */
    record OpenLoop(Histogram latency, long intended, long committed, long failed, double seconds,
                    long brokerCpuMicros, double maxLateStartMillis, long fromWallMillis, long toWallMillis) {

        double txnPerSecond() {
            return committed / seconds;
        }

        double brokerCpuMicrosPerTxn() {
            return committed == 0 ? Double.NaN : (double) brokerCpuMicros / committed;
        }
    }

    /**
     * Open loop: transactions (open, produce one 256-byte message, commit) started on a fixed
     * schedule at {@code txnPerSecond} across {@code clients} connections, round robin
     * ({@link OpenLoopSchedule}), each started when its time comes whether or not the ones
     * before it have completed (the client's asynchronous API: a connection carries as many
     * transactions at once as the schedule puts on it). The latency of each transaction
     * intended to start within {@code measured} after {@code warmup} is recorded from its
     * intended start to its commit's completion, so waiting behind a slow transaction counts:
     * no coordinated omission. Waits up to two minutes for the measured transactions to end.
     */
    static OpenLoop openLoop(String serviceUrl, long brokerPid, String topic, int clients, double txnPerSecond,
                             Duration warmup, Duration measured) throws Exception {
        return openLoop(serviceUrl, brokerPid, topic, clients, txnPerSecond, warmup, measured, (start, micros) -> {
        });
    }

    /** Each measured transaction that committed: its intended start (wall-clock millis) and its latency (micros). */
    interface Committed {
        void committed(long intendedWallMillis, long micros);
    }

    /** As above, also telling {@code each} of every measured transaction that committed (from the client's threads). */
    static OpenLoop openLoop(String serviceUrl, long brokerPid, String topic, int clients, double txnPerSecond,
                             Duration warmup, Duration measured, Committed each) throws Exception {
        List<PulsarClient> pulsarClients = new ArrayList<>();
        List<Producer<byte[]>> producers = new ArrayList<>();
        try {
            for (int i = 0; i < clients; i++) {
                PulsarClient client = client(serviceUrl);
                pulsarClients.add(client);
                producers.add(client.newProducer(Schema.BYTES).topic(topic).enableBatching(false)
                        .sendTimeout(0, TimeUnit.SECONDS).create());
            }
            long base = System.nanoTime() + TimeUnit.MILLISECONDS.toNanos(100);
            long wallBase = System.currentTimeMillis() + 100;
            OpenLoopSchedule schedule = new OpenLoopSchedule(base, txnPerSecond);
            long first = schedule.firstIndexAtOrAfter(base + warmup.toNanos());
            long end = schedule.firstIndexAtOrAfter(base + warmup.toNanos() + measured.toNanos());
            Recorder recorder = new Recorder(OPEN_LOOP_HIGHEST_MICROS, 3);
            AtomicLong committed = new AtomicLong();
            AtomicLong failed = new AtomicLong();
            LongAccumulator maxLate = new LongAccumulator(Math::max, 0);
            CountDownLatch measuredDone = new CountDownLatch((int) (end - first));
            long cpuStart = 0;
            for (long k = 0; k < end; k++) {
                long intended = schedule.intendedStart(k);
                long wait;
                while ((wait = intended - System.nanoTime()) > 0) {
                    LockSupport.parkNanos(wait);
                }
                boolean counted = k >= first;
                if (k == first) {
                    cpuStart = ProcessCpu.micros(brokerPid);
                }
                if (counted) {
                    maxLate.accumulate(System.nanoTime() - intended);
                }
                int c = OpenLoopSchedule.client(k, clients);
                PulsarClient client = pulsarClients.get(c);
                Producer<byte[]> producer = producers.get(c);
                CompletableFuture<Void> txnDone;
                try {
                    txnDone = client.newTransaction().withTransactionTimeout(1, TimeUnit.MINUTES).build()
                            .thenCompose(txn -> producer.newMessage(txn).value(PAYLOAD).sendAsync()
                                    .thenCompose(id -> txn.commit()));
                } catch (Exception e) {
                    txnDone = CompletableFuture.failedFuture(e);
                }
                txnDone.whenComplete((ignored, error) -> {
                    if (!counted) {
                        return;
                    }
                    if (error == null) {
                        long micros = (System.nanoTime() - intended) / 1000;
                        recorder.recordValue(Math.min(Math.max(micros, 0), OPEN_LOOP_HIGHEST_MICROS));
                        committed.incrementAndGet();
                        each.committed(wallBase + (intended - base) / 1_000_000, micros);
                    } else {
                        failed.incrementAndGet();
                    }
                    measuredDone.countDown();
                });
            }
            long intervalEnd = schedule.intendedStart(end);
            long wait;
            while ((wait = intervalEnd - System.nanoTime()) > 0) {
                LockSupport.parkNanos(wait);
            }
            long cpu = ProcessCpu.micros(brokerPid) - cpuStart;
            double seconds = (intervalEnd - schedule.intendedStart(first)) / 1e9;
            if (!measuredDone.await(2, TimeUnit.MINUTES)) {
                System.err.println("open loop: " + measuredDone.getCount() + " measured transactions still open"
                        + " after two minutes; counted as failed");
            }
            long unfinished = measuredDone.getCount();
            long fromWall = wallBase + (schedule.intendedStart(first) - base) / 1_000_000;
            return new OpenLoop(recorder.getIntervalHistogram(), end - first, committed.get(),
                    failed.get() + unfinished, seconds, cpu, maxLate.get() / 1e6, fromWall,
                    System.currentTimeMillis());
        } finally {
            for (Producer<byte[]> producer : producers) {
                producer.closeAsync();
            }
            List<CompletableFuture<Void>> closing = new ArrayList<>();
            for (PulsarClient client : pulsarClients) {
                closing.add(client.closeAsync());
            }
            CompletableFuture.allOf(closing.toArray(CompletableFuture[]::new)).get(2, TimeUnit.MINUTES);
        }
    }
}
