package io.github.txnpreserver.it;

import static org.assertj.core.api.Assertions.assertThat;

import io.github.txnpreserver.client.OutcomeQuery;
import io.github.txnpreserver.client.TransactionState;
import java.time.Duration;
import java.time.Instant;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;
import org.apache.pulsar.client.admin.PulsarAdmin;
import org.apache.pulsar.client.api.Producer;
import org.apache.pulsar.client.api.PulsarClient;
import org.apache.pulsar.client.api.transaction.Transaction;
import org.apache.pulsar.client.api.transaction.TxnID;
import org.junit.jupiter.api.DisplayName;
import org.junit.jupiter.api.Test;

/**
 * A coordinator moving between the brokers of a real cluster (ZooKeeper, one bookie, two
 * brokers): retries reach the new owner and get the true outcome, and the old owner can no
 * longer write once the new owner has taken over.
 */
@DisplayName("Coordinator failover on a two-broker cluster")
class FailoverIT {

    private static final Map<String, String> PLUGIN = Map.of("transactionMetaPersistCount", "100");

    @Test
    void afterTheOwnerIsKilledRetriesOnTheNewOwnerGetTheTrueOutcome() throws Exception {
        try (LocalCluster cluster = LocalCluster.start("failover", 2, 2, PLUGIN)) {
            String topic = Txns.uniqueTopic("failover");
            List<TxnID> committed = new ArrayList<>();
            List<TxnID> aborted = new ArrayList<>();
            List<String> committedValues = new ArrayList<>();
            Transaction live;
            try (PulsarClient client = Txns.client(cluster.serviceUrl());
                 Producer<String> producer = Txns.producer(client, topic)) {
                for (int i = 0; i < 20; i++) {
                    if (i % 4 == 3) {
                        aborted.add(Txns.aborted(client, producer, "aborted-" + i));
                    } else {
                        committed.add(Txns.committed(client, producer, "committed-" + i));
                        committedValues.add("committed-" + i);
                    }
                }
                live = Txns.open(client, Duration.ofMinutes(10));
                producer.newMessage(live).value("live").send();
            }
            LocalCluster.Broker owner = cluster.ownerOfCoordinator(cluster.broker(0), 0);
            LocalCluster.Broker survivor = owner == cluster.broker(0) ? cluster.broker(1) : cluster.broker(0);
            assertThat(committed.stream().filter(txn -> txn.getMostSigBits() == 0)).as("ended on coordinator 0")
                    .isNotEmpty();
            TxnID onZero = committed.stream().filter(txn -> txn.getMostSigBits() == 0).findFirst().orElseThrow();
            assertThat(OutcomeQuery.of(survivor.httpUrl()).ask(onZero).get(2, TimeUnit.MINUTES).state())
                    .as("the outcome query through the broker that does not serve the coordinator (redirected)")
                    .isEqualTo(TransactionState.State.COMMITTED);

            owner.kill();

            try (RetryingEndClient retry = RetryingEndClient.connect(survivor.serviceUrl())) {
                for (TxnID txn : committed) {
                    assertThat(retry.commit(txn)).as("retried commit of %s", txn).isEqualTo(EndAnswer.SUCCESS);
                    assertThat(retry.abort(txn)).as("abort of committed %s", txn)
                            .isEqualTo(EndAnswer.REFUSED_AS_COMMITTED);
                }
                for (TxnID txn : aborted) {
                    assertThat(retry.abort(txn)).as("retried abort of %s", txn).isEqualTo(EndAnswer.SUCCESS);
                    assertThat(retry.commit(txn)).as("commit of aborted %s", txn)
                            .isEqualTo(EndAnswer.REFUSED_AS_ABORTED);
                }
                assertThat(retry.commit(live.getTxnID())).as("the open transaction, ended on the new owner")
                        .isEqualTo(EndAnswer.SUCCESS);
                assertThat(retry.commit(live.getTxnID())).as("and retried").isEqualTo(EndAnswer.SUCCESS);
            }
            assertThat(cluster.ownerOfCoordinator(survivor, 0)).isSameAs(survivor);
            assertThat(OutcomeQuery.of(survivor.httpUrl()).ask(onZero).get(2, TimeUnit.MINUTES).state())
                    .as("and on the new owner").isEqualTo(TransactionState.State.COMMITTED);
            committedValues.add("live");
            try (PulsarClient client = Txns.client(survivor.serviceUrl())) {
                assertThat(Txns.readAll(client, topic)).containsExactlyInAnyOrderElementsOf(committedValues);
            }
        }
    }

    /**
     * The old owner is paused (a long GC pause or a partition), loses its session, and the
     * coordinator moves; then it wakes up still holding the coordinator and a client's
     * connection, and is asked to commit a transaction that the new owner will abort.
     */
    @Test
    void anOldOwnerThatWakesUpCannotWriteAfterTheNewOwnerHasRestored() throws Exception {
        try (LocalCluster cluster = LocalCluster.start("fencing", 2, 1, PLUGIN)) {
            String topic = Txns.uniqueTopic("fencing");
            LocalCluster.Broker oldOwner;
            try (PulsarClient client = Txns.client(cluster.serviceUrl())) {
                // Loads the coordinator on one of the brokers.
                Txns.open(client, Duration.ofMinutes(1)).abort()
                        .get(Txns.REQUEST_BOUND.toMillis(), TimeUnit.MILLISECONDS);
                oldOwner = cluster.ownerOfCoordinator(cluster.broker(0), 0);
            }
            LocalCluster.Broker newOwner = oldOwner == cluster.broker(0) ? cluster.broker(1) : cluster.broker(0);

            Transaction stale;
            try (PulsarClient pinned = PulsarClient.builder().serviceUrl(oldOwner.serviceUrl())
                    .enableTransaction(true).operationTimeout(30, TimeUnit.SECONDS)
                    // Keeps the connection to the paused broker, as a client does through a short pause.
                    .keepAliveInterval(10, TimeUnit.MINUTES).build();
                 Producer<String> producer = Txns.producer(pinned, topic)) {
                stale = Txns.open(pinned, Duration.ofMinutes(10));
                producer.newMessage(stale).value("stale").send();

                oldOwner.pause();
                awaitOwner(cluster, newOwner, 0);
                try (PulsarClient onNewOwner = Txns.client(newOwner.serviceUrl());
                     Producer<String> newProducer = Txns.producer(onNewOwner, topic)) {
                    Txns.committed(onNewOwner, newProducer, "on-new-owner");
                }
                try (RetryingEndClient retry = RetryingEndClient.connect(newOwner.serviceUrl())) {
                    assertThat(retry.abort(stale.getTxnID())).as("the new owner ends it").isEqualTo(EndAnswer.SUCCESS);
                }

                oldOwner.resume();
                Throwable oldOwnersAnswer = answerTo(stale.commit());
                assertThat(oldOwnersAnswer).as("a commit sent to the old owner cannot succeed").isNotNull();
            }

            String staleKey = StateTopicReader.nameOf(stale.getTxnID());
            try (RetryingEndClient retry = RetryingEndClient.connect(newOwner.serviceUrl())) {
                assertThat(retry.commit(stale.getTxnID())).isEqualTo(EndAnswer.REFUSED_AS_ABORTED);
            }
            try (PulsarClient client = Txns.client(newOwner.serviceUrl())) {
                assertThat(Txns.readAll(client, topic)).containsExactly("on-new-owner");
                // Records land with their group, shortly after the end.
                org.awaitility.Awaitility.await().atMost(java.time.Duration.ofSeconds(30)).until(() ->
                        StateTopicReader.records(client, "persistent://pulsar/system/__terminated_txn_state_0")
                                .contains(staleKey + " ABORTED"));
                assertThat(StateTopicReader.records(client, "persistent://pulsar/system/__terminated_txn_state_0"))
                        .as("no record of the old owner's commit landed")
                        .filteredOn(record -> record.startsWith(staleKey + " "))
                        .containsOnly(staleKey + " ABORTED");
            }
        }
    }

    /**
     * The broker that owns the state topic's bundle is not the coordinator's owner, and is
     * killed with -9 while clients commit: the writer's sends go unanswered, it is replaced
     * (again and again, with backoff, while the bundle has no owner), and once the bundle
     * has moved the waiting commits complete; the ends waiting meanwhile stay bounded, and
     * every commit confirmed, before or after, answers its retry with success.
     */
    @Test
    void theStateTopicsBrokerKilledDuringCommitsCostsDelayNotOutcomes() throws Exception {
        try (LocalCluster cluster = LocalCluster.start("state-owner-killed", 2, 1, PLUGIN)) {
            String topic = Txns.uniqueTopic("state-owner-killed");
            try (PulsarClient client = Txns.client(cluster.serviceUrl());
                 Producer<String> producer = Txns.producer(client, topic)) {
                Txns.committed(client, producer, "loads-the-coordinator");
            }
            LocalCluster.Broker coordinatorOwner = cluster.ownerOfCoordinator(cluster.broker(0), 0);
            LocalCluster.Broker stateTopicOwner = coordinatorOwner == cluster.broker(0) ? cluster.broker(1)
                    : cluster.broker(0);
            moveStateTopicTo(cluster, coordinatorOwner, stateTopicOwner);
            // The data stays on the broker that lives: a send in flight across the kill would be
            // resent and written twice (no deduplication), which is not what this test reads for.
            cluster.moveTopic(topic, coordinatorOwner);

            List<TxnID> confirmed = java.util.Collections.synchronizedList(new ArrayList<>());
            // Commits sent but not answered with success, and transactions whose send failed: each
            // resolved by a retry below; the value each transaction carries.
            List<TxnID> commitUnconfirmed = java.util.Collections.synchronizedList(new ArrayList<>());
            List<TxnID> sendFailed = java.util.Collections.synchronizedList(new ArrayList<>());
            Map<TxnID, String> values = new java.util.concurrent.ConcurrentHashMap<>();
            java.util.concurrent.atomic.AtomicInteger notOpened = new java.util.concurrent.atomic.AtomicInteger();
            java.util.concurrent.atomic.AtomicBoolean running = new java.util.concurrent.atomic.AtomicBoolean(true);
            java.util.concurrent.atomic.AtomicReference<Throwable> workerFailure =
                    new java.util.concurrent.atomic.AtomicReference<>();
            List<Long> confirmedAtNanos = java.util.Collections.synchronizedList(new ArrayList<>());
            Thread committer = new Thread(() -> {
                try (PulsarClient client = Txns.client(coordinatorOwner.serviceUrl());
                     Producer<String> producer = Txns.producer(client, topic)) {
                    for (int i = 0; running.get(); i++) {
                        Transaction txn;
                        try {
                            txn = Txns.open(client, Duration.ofMinutes(10));
                        } catch (Exception e) {
                            notOpened.incrementAndGet();
                            continue;
                        }
                        values.put(txn.getTxnID(), "value-" + i);
                        try {
                            producer.newMessage(txn).value("value-" + i).send();
                        } catch (Exception e) {
                            sendFailed.add(txn.getTxnID());
                            continue;
                        }
                        if (answerTo(txn.commit()) == null) {
                            confirmed.add(txn.getTxnID());
                            confirmedAtNanos.add(System.nanoTime());
                        } else {
                            commitUnconfirmed.add(txn.getTxnID());
                        }
                    }
                } catch (Throwable e) {
                    workerFailure.set(e);
                }
            }, "committer");
            committer.start();
            Thread.sleep(5_000);
            int beforeKill = confirmed.size();
            long killedNanos = System.nanoTime();
            stateTopicOwner.kill();
            Instant deadline = Instant.now().plus(Duration.ofMinutes(2));
            while (confirmed.size() < beforeKill + 20 && Instant.now().isBefore(deadline)) {
                Thread.sleep(500);
            }
            long waitingBound = (long) BrokerMetrics.ofCoordinatorZero(coordinatorOwner.httpUrl(),
                    "pulsar_txn_preserver_ends_refused_total");
            running.set(false);
            // The iteration under way ends: its open and commit are bounded by 2 minutes each, and its
            // send, on a broker that lives, is answered.
            committer.join(Txns.REQUEST_BOUND.multipliedBy(3).plusMinutes(1).toMillis());
            assertThat(committer.isAlive()).as("the committer ended").isFalse();
            assertThat(workerFailure.get()).as("the committer's failure").isNull();
            int afterKill = confirmed.size() - beforeKill;
            System.out.printf("state topic's broker killed: %d commits confirmed before, %d after; %d commits"
                    + " unconfirmed, %d sends failed, %d opens failed; longest pause between two confirmed commits"
                    + " after the kill: %.1f s%n",
                    beforeKill, afterKill, commitUnconfirmed.size(), sendFailed.size(), notOpened.get(),
                    longestPauseAfter(killedNanos, confirmedAtNanos));
            assertThat(beforeKill).isPositive();
            assertThat(afterKill).as("commits complete once the bundle has moved").isGreaterThanOrEqualTo(20);
            assertThat(waitingBound).as("one committer never reaches the bound of waiting ends").isZero();

            List<String> committedValues = new ArrayList<>();
            committedValues.add("loads-the-coordinator");
            try (RetryingEndClient retry = RetryingEndClient.connect(coordinatorOwner.serviceUrl())) {
                for (TxnID txn : List.copyOf(confirmed)) {
                    assertThat(retry.commit(txn)).as("retry of %s", txn).isEqualTo(EndAnswer.SUCCESS);
                    committedValues.add(values.get(txn));
                }
                // A commit whose answer was lost either committed or never reached the coordinator: its
                // retry commits it, or finds it aborted; nothing else.
                for (TxnID txn : List.copyOf(commitUnconfirmed)) {
                    EndAnswer answer = retry.commit(txn);
                    assertThat(answer).as("retry of the unconfirmed commit of %s", txn)
                            .isIn(EndAnswer.SUCCESS, EndAnswer.REFUSED_AS_ABORTED);
                    if (answer == EndAnswer.SUCCESS) {
                        committedValues.add(values.get(txn));
                    }
                }
                // A transaction whose send failed was never committed: it aborts.
                for (TxnID txn : List.copyOf(sendFailed)) {
                    assertThat(retry.abort(txn)).as("abort of %s, whose send failed", txn)
                            .isIn(EndAnswer.SUCCESS, EndAnswer.REFUSED_AS_ABORTED);
                }
            }
            try (PulsarClient client = Txns.client(coordinatorOwner.serviceUrl())) {
                assertThat(Txns.readAll(client, topic)).as("each committed value once, no aborted one")
                        .containsExactlyInAnyOrderElementsOf(committedValues);
            }
        }
    }

    private static double longestPauseAfter(long killedNanos, List<Long> confirmedAtNanos) {
        long previous = killedNanos;
        long longest = 0;
        synchronized (confirmedAtNanos) {
            for (long at : confirmedAtNanos) {
                if (at > killedNanos) {
                    longest = Math.max(longest, at - previous);
                    previous = at;
                }
            }
        }
        return longest / 1e9;
    }

    /**
     * Unloads the state topic's bundle to {@code target}, splitting it off the coordinator's first. The unload
     * names its destination: left to the load manager, a bundle can land on the same broker every time.
     */
    private static void moveStateTopicTo(LocalCluster cluster, LocalCluster.Broker coordinatorOwner,
                                         LocalCluster.Broker target) throws Exception {
        String stateTopic = "persistent://pulsar/system/__terminated_txn_state_0";
        try (PulsarAdmin admin = PulsarAdmin.builder().serviceHttpUrl(coordinatorOwner.httpUrl()).build()) {
            for (int split = 0; split < 4; split++) {
                String stateBundle = admin.lookups().getBundleRange(stateTopic);
                if (!stateBundle.equals(admin.lookups().getBundleRange(LocalCluster.coordinatorTopic(0)))) {
                    break;
                }
                admin.namespaces().splitNamespaceBundle("pulsar/system", stateBundle, false, null);
                Thread.sleep(2_000);
            }
            assertThat(admin.lookups().getBundleRange(stateTopic))
                    .as("the state topic and the coordinator in different bundles")
                    .isNotEqualTo(admin.lookups().getBundleRange(LocalCluster.coordinatorTopic(0)));
        }
        cluster.moveTopic(stateTopic, target);
        assertThat(cluster.ownerOfCoordinator(coordinatorOwner, 0)).as("the coordinator stayed").isSameAs(
                coordinatorOwner);
    }

    private static void awaitOwner(LocalCluster cluster, LocalCluster.Broker expected, int coordinator)
            throws Exception {
        Instant deadline = Instant.now().plus(Duration.ofMinutes(2));
        LocalCluster.Broker owner = null;
        Exception last = null;
        while (Instant.now().isBefore(deadline)) {
            try {
                owner = cluster.ownerOfCoordinator(expected, coordinator);
                if (owner == expected) {
                    return;
                }
            } catch (Exception e) {
                last = e;
            }
            Thread.sleep(500);
        }
        throw new AssertionError("Coordinator " + coordinator + " did not move to " + expected + "; owner: " + owner,
                last);
    }

    /** The failure a request ended with, or null if it succeeded; no answer in 2 minutes fails the test. */
    private static Throwable answerTo(java.util.concurrent.CompletableFuture<Void> request) throws InterruptedException {
        try {
            request.get(2, TimeUnit.MINUTES);
            return null;
        } catch (ExecutionException e) {
            return e.getCause();
        } catch (TimeoutException e) {
            throw new AssertionError("no answer in 2 minutes: a request must be answered, not left waiting", e);
        }
    }
}
