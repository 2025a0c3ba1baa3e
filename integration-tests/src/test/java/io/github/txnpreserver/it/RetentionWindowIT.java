package io.github.txnpreserver.it;

import static org.assertj.core.api.Assertions.assertThat;

import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ConcurrentLinkedQueue;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicLong;
import org.apache.pulsar.client.admin.PulsarAdmin;
import org.apache.pulsar.client.api.Producer;
import org.apache.pulsar.client.api.PulsarClient;
import org.apache.pulsar.client.api.transaction.Transaction;
import org.apache.pulsar.client.api.transaction.TxnID;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.DisplayName;
import org.junit.jupiter.api.Test;

/**
 * With the install defaults (outcomes kept 72 h under a 64 MB bound, a floor of 100 per
 * client), a busy coordinator keeps every outcome of the last minute: probes committed once a
 * second (and one aborted every ten) among transactions committed as fast as 8 threads can are
 * all answered, before and after a kill -9 and restart of the broker; consumers read each
 * committed probe's message once and no aborted one.
 */
@DisplayName("Retention window under load, across a crash")
class RetentionWindowIT {

    private static final int THREADS = 8;
    private static final String STATE_TOPIC = "persistent://pulsar/system/__terminated_txn_state_0";
    private static final Duration LOAD = Duration.ofSeconds(60);
    private static LocalPulsar pulsar;

    @BeforeAll
    static void startBroker() throws Exception {
        pulsar = LocalPulsar.start("retention-window", Map.of());
    }

    @AfterAll
    static void stopBroker() throws Exception {
        pulsar.close();
    }

    @Test
    void everyProbeOfABusyMinuteIsAnsweredBeforeAndAfterACrash() throws Exception {
        List<TxnID> probes = new ArrayList<>();
        List<String> probeValues = new ArrayList<>();
        List<TxnID> abortedProbes = new ArrayList<>();
        String topic = Txns.uniqueTopic("retention-window");
        AtomicLong committed = new AtomicLong();
        ConcurrentLinkedQueue<Throwable> failures = new ConcurrentLinkedQueue<>();
        AtomicBoolean running = new AtomicBoolean(true);
        long start;
        long loadStartMillis;
        double seconds;
        try (PulsarClient load = Txns.client(pulsar); PulsarClient probing = Txns.client(pulsar);
             Producer<String> producer = Txns.producer(probing, topic)) {
            ExecutorService threads = Executors.newFixedThreadPool(THREADS);
            List<Future<?>> workers = new ArrayList<>();
            start = System.nanoTime();
            loadStartMillis = System.currentTimeMillis();
            for (int i = 0; i < THREADS; i++) {
                workers.add(threads.submit(() -> {
                    while (running.get()) {
                        try {
                            Transaction txn = Txns.open(load, Duration.ofMinutes(5));
                            txn.commit().get(60, TimeUnit.SECONDS);
                            committed.incrementAndGet();
                        } catch (Exception e) {
                            failures.add(e);
                            if (failures.size() > 100) {
                                return;
                            }
                        }
                    }
                }));
            }
            long next = System.nanoTime();
            while (System.nanoTime() - start < LOAD.toNanos()) {
                String value = "probe-" + probes.size();
                probes.add(Txns.committed(probing, producer, value));
                probeValues.add(value);
                if (probes.size() % 10 == 0) {
                    abortedProbes.add(Txns.aborted(probing, producer, "dropped-" + probes.size()));
                }
                next += TimeUnit.SECONDS.toNanos(1);
                long wait = next - System.nanoTime();
                if (wait > 0) {
                    TimeUnit.NANOSECONDS.sleep(wait);
                }
            }
            running.set(false);
            for (Future<?> worker : workers) {
                worker.get(2, TimeUnit.MINUTES);
            }
            seconds = (System.nanoTime() - start) / 1e9;
            threads.shutdown();
        }
        System.out.printf("load: %d transactions committed by %d threads in %.1f s (%.0f txn/s), %d probes,"
                        + " %d failures%n", committed.get(), THREADS, seconds, committed.get() / seconds, probes.size(),
                failures.size());
        assertThat(failures).as("load failures").isEmpty();
        assertThat(probes).hasSizeGreaterThanOrEqualTo(50);
        checkCompactionIsPaced(committed.get() + probes.size() + abortedProbes.size(), loadStartMillis);

        try (RetryingEndClient retry = RetryingEndClient.connect(pulsar.serviceUrl())) {
            for (TxnID probe : probes) {
                assertThat(retry.commit(probe)).as("commit retry of probe %s", probe).isEqualTo(EndAnswer.SUCCESS);
                assertThat(retry.abort(probe)).as("abort of committed probe %s", probe)
                        .isEqualTo(EndAnswer.REFUSED_AS_COMMITTED);
            }
            for (TxnID probe : abortedProbes) {
                assertThat(retry.abort(probe)).as("abort retry of aborted probe %s", probe)
                        .isEqualTo(EndAnswer.SUCCESS);
                assertThat(retry.commit(probe)).as("commit of aborted probe %s", probe)
                        .isEqualTo(EndAnswer.REFUSED_AS_ABORTED);
            }
        }

        long killed = pulsar.pid();
        long restartStart = System.nanoTime();
        pulsar.restartAfterKill();
        assertThat(pulsar.pid()).isNotEqualTo(killed);
        System.out.printf("kill -9 and restart took %.1f s%n", (System.nanoTime() - restartStart) / 1e9);

        long retryStart = System.nanoTime();
        try (RetryingEndClient retry = RetryingEndClient.connect(pulsar.serviceUrl())) {
            for (TxnID probe : probes) {
                assertThat(retry.commit(probe)).as("commit retry of probe %s after the crash", probe)
                        .isEqualTo(EndAnswer.SUCCESS);
            }
            for (TxnID probe : abortedProbes) {
                assertThat(retry.commit(probe)).as("commit of aborted probe %s after the crash", probe)
                        .isEqualTo(EndAnswer.REFUSED_AS_ABORTED);
            }
        }
        System.out.printf("%d probe retries after the crash answered in %.1f s%n",
                probes.size() + abortedProbes.size(), (System.nanoTime() - retryStart) / 1e9);
        try (PulsarClient client = Txns.client(pulsar)) {
            assertThat(Txns.readAll(client, topic)).as("each committed probe's message once, no aborted one")
                    .containsExactlyElementsOf(probeValues);
        }
    }

    /**
     * The broker checks every 60 s whether to compact, and left to its defaults compacts a
     * system topic whenever it has new records: a busy minute would have been compacted at
     * least once. The plugin's threshold (16 MiB for a view this small) defers it.
     */
    private static void checkCompactionIsPaced(long transactions, long loadStartMillis) throws Exception {
        try (PulsarAdmin admin = PulsarAdmin.builder().serviceHttpUrl(pulsar.httpUrl()).build()) {
            var stats = admin.topics().getStats(STATE_TOPIC);
            long lastCompaction = stats.getCompaction().getLastCompactionSucceedTimestamp();
            System.out.printf("state topic after the load: %d records, %d bytes (%.3f records and %.0f bytes per"
                            + " transaction); last compaction %s%n", stats.getMsgInCounter(),
                    stats.getBytesInCounter(), (double) stats.getMsgInCounter() / transactions,
                    (double) stats.getBytesInCounter() / transactions,
                    lastCompaction == 0 ? "never" : (lastCompaction - loadStartMillis) + " ms after the load began");
            assertThat(lastCompaction).as("no compaction once the busy minute began: its new records are far below"
                    + " the threshold").isLessThan(loadStartMillis);
            assertThat(admin.topicPolicies().getCompactionThreshold(STATE_TOPIC))
                    .as("the state topic's compaction threshold").isEqualTo(16L << 20);
        }
    }
}
