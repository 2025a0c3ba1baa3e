package io.github.txnpreserver.bench;

import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicLong;
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
}
