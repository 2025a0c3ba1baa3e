package io.github.txnpreserver.it;

import static org.assertj.core.api.Assertions.assertThat;

import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ConcurrentLinkedQueue;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicLong;
import org.apache.pulsar.client.admin.LongRunningProcessStatus;
import org.apache.pulsar.client.admin.PulsarAdmin;
import org.apache.pulsar.client.api.PulsarClient;
import org.apache.pulsar.client.api.transaction.Transaction;
import org.apache.pulsar.client.api.transaction.TxnID;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.DisplayName;
import org.junit.jupiter.api.Test;

/**
 * The cold tier on a real broker, through the stock client: a memory bound so small that
 * memory holds a few seconds of a busy coordinator's outcomes (0.05 MiB: one page of the cold
 * tier and about fifty blocks), load for 40 s with probes committed and aborted among it,
 * then the state topic compacted and every probe retried. The oldest are out of memory,
 * answered from their records in the compacted state topic; none was dropped. The same after
 * a kill -9 and restart, when the restore keeps what does not fit cold; after the state topic
 * is terminated (carried over); while the coordinator moves; and, last, across a deletion of
 * the state topic during cold reads (what only it held is lost, counted, never misreported).
 */
@DisplayName("The cold tier on a real broker")
class ColdTierIT {

    private static final int THREADS = 6;
    private static final Duration LOAD = Duration.ofSeconds(40);
    private static final String STATE_TOPIC = "persistent://pulsar/system/__terminated_txn_state_0";
    private static LocalPulsar pulsar;

    @BeforeAll
    static void startBroker() throws Exception {
        pulsar = LocalPulsar.start("cold-tier", Map.of("transactionMetaPersistMaxMemoryInMB", "0.05"));
    }

    @AfterAll
    static void stopBroker() throws Exception {
        pulsar.close();
    }

    @Test
    void outcomesOutOfMemoryAreAnsweredFromTheStateTopicBeforeAndAfterACrash() throws Exception {
        List<TxnID> committedProbes = new ArrayList<>();
        List<TxnID> abortedProbes = new ArrayList<>();
        AtomicLong ended = new AtomicLong();
        ConcurrentLinkedQueue<Throwable> failures = new ConcurrentLinkedQueue<>();
        AtomicBoolean running = new AtomicBoolean(true);
        try (PulsarClient load = Txns.client(pulsar); PulsarClient probing = Txns.client(pulsar)) {
            ExecutorService threads = Executors.newFixedThreadPool(THREADS);
            List<Future<?>> workers = new ArrayList<>();
            for (int i = 0; i < THREADS; i++) {
                workers.add(threads.submit(() -> {
                    while (running.get()) {
                        Transaction txn = Txns.open(load, Duration.ofMinutes(5));
                        txn.commit().get(60, TimeUnit.SECONDS);
                        ended.incrementAndGet();
                    }
                    return null;
                }));
            }
            long start = System.nanoTime();
            int probe = 0;
            while (System.nanoTime() - start < LOAD.toNanos()) {
                Transaction txn = Txns.open(probing, Duration.ofMinutes(5));
                if (probe++ % 4 == 3) {
                    txn.abort().get(60, TimeUnit.SECONDS);
                    abortedProbes.add(txn.getTxnID());
                } else {
                    txn.commit().get(60, TimeUnit.SECONDS);
                    committedProbes.add(txn.getTxnID());
                }
                TimeUnit.MILLISECONDS.sleep(250);
            }
            running.set(false);
            for (Future<?> worker : workers) {
                try {
                    worker.get(2, TimeUnit.MINUTES);
                } catch (java.util.concurrent.ExecutionException e) {
                    failures.add(e.getCause());
                }
            }
            threads.shutdown();
        }
        System.out.printf("load: %d transactions, %d committed and %d aborted probes%n", ended.get(),
                committedProbes.size(), abortedProbes.size());
        assertThat(failures).as("load failures").isEmpty();
        assertThat(ended.get()).as("enough ends to send most blocks cold").isGreaterThan(20_000);

        double cold = BrokerMetrics.ofCoordinatorZero(pulsar, "pulsar_txn_preserver_cold_outcomes");
        double kept = BrokerMetrics.ofCoordinatorZero(pulsar, "pulsar_txn_preserver_kept_outcomes");
        System.out.printf("kept %.0f outcomes, %.0f of them cold%n", kept, cold);
        assertThat(cold).as("most outcomes are out of memory").isGreaterThan(kept / 2);
        assertThat(memoryEvictions()).as("none was dropped").isZero();

        // Compacted before the retries: the cold tier's positions find the records in the compacted ledger.
        compactStateTopic();
        long[] answerNanos = retryEveryProbe(committedProbes, abortedProbes, "after a compaction");
        System.out.printf("retries answered: p50 %.1f ms, p99 %.1f ms, max %.1f ms%n", percentile(answerNanos, 50),
                percentile(answerNanos, 99), percentile(answerNanos, 100));
        assertThat(BrokerMetrics.ofCoordinatorZero(pulsar, "pulsar_txn_preserver_cold_reads_total"))
                .as("cold records were read").isPositive();

        pulsar.restartAfterKill();

        retryEveryProbe(committedProbes, abortedProbes, "after kill -9 and restart");
        assertThat(memoryEvictions()).as("none was dropped by the restore").isZero();
        assertThat(BrokerMetrics.ofCoordinatorZero(pulsar, "pulsar_txn_preserver_cold_outcomes"))
                .as("the restore kept what does not fit cold").isPositive();

        // A terminated state topic is deleted and created again: the records of the cold
        // outcomes, their only copy, are carried over into the new one.
        try (PulsarAdmin admin = Txns.admin(pulsar); PulsarClient client = Txns.client(pulsar)) {
            admin.topics().terminateTopic(STATE_TOPIC);
            Txns.open(client, Duration.ofMinutes(5)).commit().get(60, TimeUnit.SECONDS);
            retryEveryProbe(committedProbes, abortedProbes, "after the state topic was terminated");
            assertThat(admin.topics().getList("pulsar/system")).as("the carrier is deleted once copied back")
                    .noneMatch(name -> name.contains("__txn_preserver_carrier_"));
        }
        assertThat(BrokerMetrics.ofCoordinatorZero(pulsar, "pulsar_txn_preserver_cold_lost_total")).isZero();
        assertThat(BrokerMetrics.ofCoordinatorZero(pulsar, "pulsar_txn_preserver_malformed_records_total")).isZero();
        pulsar.restartAfterKill();
        retryEveryProbe(committedProbes, abortedProbes, "after the carry-over and a kill -9");

        // The coordinator closes while cold reads are in flight (its bundle unloaded) and its
        // next owner (this broker again) opens it: each retry is answered, none wrongly.
        ExecutorService retrying = Executors.newSingleThreadExecutor();
        try {
            CountDownLatch moveStarted = new CountDownLatch(10);
            Future<long[]> duringMove = retrying.submit(() ->
                    retryEveryProbe(committedProbes, abortedProbes, "while the coordinator moved", moveStarted));
            assertThat(moveStarted.await(2, TimeUnit.MINUTES)).as("ten probes answered").isTrue();
            try (PulsarAdmin admin = Txns.admin(pulsar)) {
                admin.namespaces().unloadNamespaceBundle("pulsar/system",
                        admin.lookups().getBundleRange(LocalCluster.coordinatorTopic(0)));
            }
            assertThat(duringMove).as("the coordinator moved during the retries").isNotDone();
            duringMove.get(5, TimeUnit.MINUTES);

            // Someone deletes the state topic while cold reads are in flight: the outcomes only
            // its records held are lost with it, counted, and answered "not found"; none is
            // answered wrongly, and the coordinator goes on with a topic created again.
            CountDownLatch deletionStarted = new CountDownLatch(10);
            Future<List<EndAnswer>> duringDeletion = retrying.submit(() -> retryAllowingLoss(committedProbes,
                    abortedProbes, deletionStarted));
            assertThat(deletionStarted.await(2, TimeUnit.MINUTES)).as("ten probes answered").isTrue();
            try (PulsarAdmin admin = Txns.admin(pulsar)) {
                admin.topics().delete(STATE_TOPIC, true);
            }
            assertThat(duringDeletion).as("the topic was deleted during the retries").isNotDone();
            List<EndAnswer> answers = duringDeletion.get(5, TimeUnit.MINUTES);
            System.out.printf("retries across the deletion: %d answered success, %d not found%n",
                    answers.stream().filter(answer -> answer == EndAnswer.SUCCESS).count(),
                    answers.stream().filter(answer -> answer == EndAnswer.NOT_FOUND).count());
            assertThat(answers).as("success or lost, never another outcome")
                    .containsOnly(EndAnswer.SUCCESS, EndAnswer.NOT_FOUND);
            assertThat(answers.subList(0, 10)).as("answered before the deletion").containsOnly(EndAnswer.SUCCESS);
            // The newest probes ended last before the load stopped: in memory, written again.
            assertThat(answers.get(committedProbes.size() - 1)).as("the newest committed probe")
                    .isEqualTo(EndAnswer.SUCCESS);
            assertThat(answers.get(answers.size() - 1)).as("the newest aborted probe").isEqualTo(EndAnswer.SUCCESS);
            assertThat(BrokerMetrics.ofCoordinatorZero(pulsar, "pulsar_txn_preserver_cold_lost_total"))
                    .as("the cold outcomes lost with the topic are counted").isPositive();
            try (PulsarClient client = Txns.client(pulsar);
                 RetryingEndClient retry = RetryingEndClient.connect(pulsar.serviceUrl())) {
                Transaction after = Txns.open(client, Duration.ofMinutes(5));
                after.commit().get(60, TimeUnit.SECONDS);
                assertThat(retry.commit(after.getTxnID())).as("a transaction ended after the deletion")
                        .isEqualTo(EndAnswer.SUCCESS);
            }
        } finally {
            retrying.shutdownNow();
        }
    }

    /** Every probe retried once; each answer (success or not found, when its record was lost). */
    private static List<EndAnswer> retryAllowingLoss(List<TxnID> committedProbes, List<TxnID> abortedProbes,
                                                     CountDownLatch answered) throws Exception {
        List<EndAnswer> answers = new ArrayList<>();
        try (RetryingEndClient retry = RetryingEndClient.connect(pulsar.serviceUrl())) {
            for (TxnID probe : committedProbes) {
                answers.add(retry.commit(probe));
                answered.countDown();
            }
            for (TxnID probe : abortedProbes) {
                answers.add(retry.abort(probe));
                answered.countDown();
            }
        }
        return answers;
    }

    private static void compactStateTopic() throws Exception {
        String stateTopic = STATE_TOPIC;
        try (PulsarAdmin admin = Txns.admin(pulsar)) {
            admin.topics().triggerCompaction(stateTopic);
            long deadline = System.nanoTime() + TimeUnit.MINUTES.toNanos(2);
            while (admin.topics().compactionStatus(stateTopic).status == LongRunningProcessStatus.Status.RUNNING) {
                assertThat(System.nanoTime()).as("compaction within 2 minutes").isLessThan(deadline);
                TimeUnit.MILLISECONDS.sleep(200);
            }
            assertThat(admin.topics().compactionStatus(stateTopic).status)
                    .isEqualTo(LongRunningProcessStatus.Status.SUCCESS);
            assertThat(admin.topics().getInternalStats(stateTopic).compactedLedger.ledgerId)
                    .as("a compacted ledger").isPositive();
        }
    }

    /** Every probe retried as the stock client retries it; the time each first retry took. */
    private static long[] retryEveryProbe(List<TxnID> committedProbes, List<TxnID> abortedProbes, String when)
            throws Exception {
        return retryEveryProbe(committedProbes, abortedProbes, when, new CountDownLatch(0));
    }

    /** The same, counting {@code answered} down at each probe answered. */
    private static long[] retryEveryProbe(List<TxnID> committedProbes, List<TxnID> abortedProbes, String when,
                                          CountDownLatch answered) throws Exception {
        long[] nanos = new long[committedProbes.size() + abortedProbes.size()];
        int i = 0;
        try (RetryingEndClient retry = RetryingEndClient.connect(pulsar.serviceUrl())) {
            for (TxnID probe : committedProbes) {
                long start = System.nanoTime();
                assertThat(retry.commit(probe)).as("commit retry of %s %s", probe, when).isEqualTo(EndAnswer.SUCCESS);
                nanos[i++] = System.nanoTime() - start;
                assertThat(retry.abort(probe)).as("abort of committed %s %s", probe, when)
                        .isEqualTo(EndAnswer.REFUSED_AS_COMMITTED);
                answered.countDown();
            }
            for (TxnID probe : abortedProbes) {
                long start = System.nanoTime();
                assertThat(retry.abort(probe)).as("abort retry of %s %s", probe, when).isEqualTo(EndAnswer.SUCCESS);
                nanos[i++] = System.nanoTime() - start;
                assertThat(retry.commit(probe)).as("commit of aborted %s %s", probe, when)
                        .isEqualTo(EndAnswer.REFUSED_AS_ABORTED);
                answered.countDown();
            }
        }
        return nanos;
    }

    /** Coordinator 0's outcomes dropped by the memory bound. */
    private static double memoryEvictions() throws Exception {
        String body = java.net.http.HttpClient.newHttpClient().send(java.net.http.HttpRequest.newBuilder(
                java.net.URI.create(pulsar.httpUrl() + "/metrics/")).build(),
                java.net.http.HttpResponse.BodyHandlers.ofString()).body();
        return body.lines().filter(line -> line.startsWith("pulsar_txn_preserver_evictions_total{")
                        && line.contains("coordinator_id=\"0\"") && line.contains("limit=\"memory\""))
                .mapToDouble(line -> Double.parseDouble(line.substring(line.lastIndexOf(' ') + 1)))
                .findFirst().orElseThrow();
    }

    private static double percentile(long[] nanos, int p) {
        long[] sorted = nanos.clone();
        Arrays.sort(sorted);
        return sorted[Math.max(0, Math.min(sorted.length - 1, (int) Math.ceil(p / 100.0 * sorted.length) - 1))] / 1e6;
    }
}
