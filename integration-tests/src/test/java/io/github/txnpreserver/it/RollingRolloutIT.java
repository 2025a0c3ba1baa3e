package io.github.txnpreserver.it;

import static org.assertj.core.api.Assertions.assertThat;

import java.time.Duration;
import java.time.Instant;
import java.util.ArrayList;
import java.util.Collections;
import java.util.EnumMap;
import java.util.HashMap;
import java.util.HashSet;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.function.Predicate;
import org.apache.pulsar.client.api.Producer;
import org.apache.pulsar.client.api.PulsarClient;
import org.apache.pulsar.client.api.transaction.Transaction;
import org.apache.pulsar.client.api.transaction.TransactionCoordinatorClientException.InvalidTxnStatusException;
import org.apache.pulsar.client.api.transaction.TxnID;
import org.junit.jupiter.api.DisplayName;
import org.junit.jupiter.api.Test;

/**
 * A rolling rollout on a two-broker cluster: broker A has the plugin, broker B is stock. Under
 * a steady load of commits and aborts, the coordinator moves A → B → A; then B gets the plugin
 * (a clean restart from an installation with it) and the coordinator moves A → B → A again.
 * After each move the ended transactions are retried, and at the end every answer any retry
 * got is checked against what a consumer reads.
 *
 * <p>What a retry may answer, by where the transaction ended and where it is retried (the
 * table in docs/operations.md): ended with the plugin (more than a few seconds before its
 * coordinator left for a stock broker), retried with the plugin: its outcome; ended with the
 * plugin, retried on stock: {@code TransactionNotFound}, or its outcome while stock is still
 * finishing it; ended on stock: {@code TransactionNotFound}, or its outcome where the log
 * still holds it. Never the other outcome. A transaction open across each move is ended
 * after it.
 */
@DisplayName("A rolling rollout: one broker with the plugin, one without")
class RollingRolloutIT {

    private static final Map<String, String> CONFIG = Map.of(
            // The stock broker needs it; the plugin's installation sets it already.
            "transactionCoordinatorEnabled", "true",
            "transactionMetaPersistCount", "100",
            // The test moves the coordinator; the load manager must not move it back meanwhile.
            "loadBalancerSheddingEnabled", "false");
    private static final int PER_PHASE = 150;
    /**
     * An outcome decided this long before its coordinator moved to a stock broker is in the
     * state topic (its group is written within a second): the next plugin owner answers it.
     */
    private static final Duration DURABLE_AFTER = Duration.ofSeconds(5);

    private enum Claim { COMMITTED, ABORTED, NOT_FOUND }

    /** A transaction of the load: opened and ended in the phases given; confirmed if the client's end succeeded. */
    private record Attempt(TxnID txn, String value, boolean commit, int openedIn, int endedIn, boolean confirmed,
                           long endedAtNanos) {

        Claim trueOutcome() {
            return commit ? Claim.COMMITTED : Claim.ABORTED;
        }

        /** Opened and ended while the coordinator stayed on one broker (even phases; odd ones are moves). */
        boolean endedWithin(int phase) {
            return confirmed && openedIn == phase && endedIn == phase;
        }
    }

    private final AtomicInteger phase = new AtomicInteger();
    private final List<Attempt> attempts = Collections.synchronizedList(new ArrayList<>());
    private final Map<TxnID, Set<Claim>> claims = new HashMap<>();
    private final Map<String, Map<Claim, Integer>> seen = new LinkedHashMap<>();
    private final String crossingTopic = Txns.uniqueTopic("rollout-crossing");
    private final List<String> crossingValues = new ArrayList<>();
    /** Commits across a move that a stock owner refused as the client's duplicate, then retried. */
    private final AtomicInteger crossingCommitsRetried = new AtomicInteger();

    @Test
    void noRetryIsAnsweredWrongAndSwitchingTheSecondBrokerOnCompletesThePicture() throws Exception {
        try (LocalCluster cluster = LocalCluster.start("rollout",
                List.of(PulsarDistribution.withPluginInstalled(), PulsarDistribution.stock()), 1, CONFIG)) {
            LocalCluster.Broker withPlugin = cluster.broker(0);
            LocalCluster.Broker stock = cluster.broker(1);
            String topic = Txns.uniqueTopic("rollout");
            cluster.moveCoordinator(0, withPlugin);

            AtomicBoolean running = new AtomicBoolean(true);
            Thread load = new Thread(() -> load(cluster, topic, running), "load");
            load.start();
            try {
                awaitConfirmedIn(0);
                // Long enough that some of phase 0's outcomes are surely in the state topic.
                Thread.sleep(DURABLE_AFTER.plusSeconds(1).toMillis());

                long leftThePluginAt = moveTo(cluster, withPlugin, stock, true, 2);
                Predicate<Attempt> durableBeforeTheMove = a -> a.endedWithin(0)
                        && a.endedAtNanos() < leftThePluginAt - DURABLE_AFTER.toNanos();
                awaitConfirmedIn(2);
                assertThat(retry(cluster, stock, "ended with the plugin (A), retried on stock (B)",
                        a -> a.endedWithin(0), Set.of(Claim.NOT_FOUND)).get(Claim.NOT_FOUND))
                        .as("stock forgets ended transactions").isPositive();

                moveTo(cluster, stock, withPlugin, false, 4);
                awaitConfirmedIn(4);
                assertThat(retry(cluster, withPlugin, "ended with the plugin (A) over "
                                + DURABLE_AFTER.toSeconds() + " s before the move, retried with it again (A)",
                        durableBeforeTheMove, Set.of()).values().stream().mapToInt(Integer::intValue).sum())
                        .isPositive();
                retry(cluster, withPlugin, "ended with the plugin (A) in the " + DURABLE_AFTER.toSeconds()
                                + " s before the move, retried with it (A)",
                        a -> a.endedWithin(0) && !durableBeforeTheMove.test(a), Set.of(Claim.NOT_FOUND));
                assertThat(retry(cluster, withPlugin, "ended on stock (B), retried with the plugin (A)",
                        a -> a.endedWithin(2), Set.of(Claim.NOT_FOUND)).get(Claim.NOT_FOUND))
                        .as("not kept where the coordinator was stock").isPositive();

                phase.set(5);
                stock.reinstall(PulsarDistribution.withPluginInstalled());
                phase.set(6);
                awaitConfirmedIn(6);
                moveTo(cluster, withPlugin, stock, false, 8);
                awaitConfirmedIn(8);
                retry(cluster, stock, "ended with the plugin (A), retried once B has it too (B)",
                        a -> durableBeforeTheMove.test(a) || a.endedWithin(4) || a.endedWithin(6), Set.of());

                moveTo(cluster, stock, withPlugin, false, 10);
                awaitConfirmedIn(10);
                retry(cluster, withPlugin, "ended with the plugin on B, retried with it on A",
                        a -> a.endedWithin(8), Set.of());
            } finally {
                running.set(false);
                load.join(TimeUnit.MINUTES.toMillis(2));
            }
            assertThat(load.isAlive()).as("the load has stopped").isFalse();

            retry(cluster, withPlugin, "every transaction, at the end (A)", a -> true,
                    Set.of(Claim.NOT_FOUND, Claim.COMMITTED, Claim.ABORTED));
            List<String> read = new ArrayList<>();
            try (PulsarClient client = Txns.client(cluster.serviceUrl())) {
                read.addAll(Txns.readAll(client, topic));
                List<String> crossed = Txns.readAll(client, crossingTopic);
                assertThat(crossed).as("each transaction open across a move, committed after it")
                        .containsExactlyInAnyOrderElementsOf(crossingValues);
                read.addAll(crossed);
            }
            System.out.printf("rolling rollout: %d transactions (%d confirmed; %d commits across a move retried"
                            + " after stock refused the client's duplicate); what the retries answered:%n",
                    attempts.size(), attempts.stream().filter(Attempt::confirmed).count(), crossingCommitsRetried.get());
            seen.forEach((group, counts) -> System.out.printf("  %s: %s%n", group, counts));
            assertEveryAnswerMatchesWhatConsumersRead(read);
        }
    }

    /**
     * Moves the coordinator from {@code from} to {@code to} with a transaction open across the
     * move, which is then committed on the new owner (a transaction in flight carries on);
     * returns when the move began. {@code toStock}: the new owner runs without the plugin.
     */
    private long moveTo(LocalCluster cluster, LocalCluster.Broker from, LocalCluster.Broker to, boolean toStock,
                        int nextPhase) throws Exception {
        assertThat(cluster.ownerOfCoordinator(to, 0)).as("the coordinator before the move").isSameAs(from);
        try (PulsarClient client = Txns.client(cluster.serviceUrl());
             Producer<String> producer = Txns.producer(client, crossingTopic)) {
            Transaction crossing = Txns.open(client, Duration.ofMinutes(5));
            String value = "across the move to phase " + nextPhase;
            producer.newMessage(crossing).value(value).send();
            int openedIn = phase.get();
            long movedAt = System.nanoTime();
            phase.set(nextPhase - 1);
            cluster.moveCoordinator(0, to);
            phase.set(nextPhase);
            commitAcrossTheMove(cluster, crossing, toStock);
            attempts.add(new Attempt(crossing.getTxnID(), value, true, openedIn, nextPhase, true, System.nanoTime()));
            crossingValues.add(value);
            return movedAt;
        }
    }

    /**
     * Commits the transaction that was open across a move, on its new owner.
     *
     * <p>The stock client may send this commit twice: when the old owner answers that it no
     * longer has the coordinator, the client both re-sends every pending request on its new
     * connection and schedules a retry of this one. A stock owner starts both ends while the
     * transaction is OPEN, appends COMMITTING twice and refuses the later one ("Expect Txn … to
     * be in OPEN status but it is in COMMITTING status"), whichever answer reaches the client
     * first. The plugin runs identical ends once, so there a failed commit fails the test. On a
     * stock owner the commit is retried, as an application would: a commit still finishing is
     * answered with success, a forgotten one with not found, and what consumers read at the end
     * says whether it committed.
     */
    private void commitAcrossTheMove(LocalCluster cluster, Transaction crossing, boolean toStock)
            throws Exception {
        try {
            crossing.commit().get(1, TimeUnit.MINUTES);
        } catch (ExecutionException refused) {
            // Any other failure, or any failure on a plugin owner, is the test's failure.
            if (!toStock || !(refused.getCause() instanceof InvalidTxnStatusException)) {
                throw refused;
            }
            System.out.printf("commit across the move to a stock owner refused (%s); retried%n", refused.getCause());
            try (RetryingEndClient retry = RetryingEndClient.connect(cluster.serviceUrl())) {
                assertThat(retry.commit(crossing.getTxnID()))
                        .as("retry of the commit across the move, refused by stock: %s", retry.lastMessage())
                        .isIn(EndAnswer.SUCCESS, EndAnswer.REFUSED_AS_COMMITTED, EndAnswer.NOT_FOUND);
                crossingCommitsRetried.incrementAndGet();
            }
        }
    }

    /**
     * Retries the load's ended transactions that {@code which} selects, each with the end its
     * client asked for. A retry answers the transaction's true outcome, or one of
     * {@code alsoAllowed}; never the other outcome. The coordinator is on {@code owner}
     * throughout. Returns how many retries got each answer.
     */
    private Map<Claim, Integer> retry(LocalCluster cluster, LocalCluster.Broker owner, String group,
                                      Predicate<Attempt> which, Set<Claim> alsoAllowed) throws Exception {
        assertThat(cluster.ownerOfCoordinator(owner, 0)).as("the coordinator, before: %s", group).isSameAs(owner);
        List<Attempt> selected;
        synchronized (attempts) {
            selected = attempts.stream().filter(which).toList();
        }
        Map<Claim, Integer> counts = new EnumMap<>(Claim.class);
        try (RetryingEndClient retry = RetryingEndClient.connect(cluster.serviceUrl())) {
            for (Attempt attempt : selected) {
                EndAnswer answer = attempt.commit() ? retry.commit(attempt.txn()) : retry.abort(attempt.txn());
                Claim claim = claimOf(attempt, answer, retry.lastMessage());
                counts.merge(claim, 1, Integer::sum);
                claims.computeIfAbsent(attempt.txn(), ignored -> new HashSet<>()).add(claim);
                if (attempt.confirmed()) {
                    assertThat(claim).as("%s: retry of %s, %s", group, attempt.txn(), attempt.trueOutcome())
                            .isIn(union(attempt.trueOutcome(), alsoAllowed));
                }
            }
        }
        assertThat(cluster.ownerOfCoordinator(owner, 0)).as("the coordinator, after: %s", group).isSameAs(owner);
        seen.put(group, counts);
        return counts;
    }

    private static Claim claimOf(Attempt attempt, EndAnswer answer, String said) {
        return switch (answer) {
            case SUCCESS -> attempt.commit() ? Claim.COMMITTED : Claim.ABORTED;
            case REFUSED_AS_COMMITTED -> Claim.COMMITTED;
            case REFUSED_AS_ABORTED -> Claim.ABORTED;
            case NOT_FOUND -> Claim.NOT_FOUND;
            case FAILED -> throw new AssertionError("retry of " + attempt.txn() + " failed with an error no retry"
                    + " changes: " + said);
        };
    }

    private static Set<Claim> union(Claim claim, Set<Claim> others) {
        Set<Claim> all = new HashSet<>(others);
        all.add(claim);
        return all;
    }

    /**
     * Every answer any retry gave agrees with the topic: a transaction said committed was read
     * once, one said aborted never; no transaction was said both. Every end the load's client
     * was told succeeded holds too.
     */
    private void assertEveryAnswerMatchesWhatConsumersRead(List<String> read) {
        assertThat(read).as("no message read twice").doesNotHaveDuplicates();
        Set<String> readOnce = new HashSet<>(read);
        for (Attempt attempt : attempts) {
            Set<Claim> said = new HashSet<>(claims.getOrDefault(attempt.txn(), Set.of()));
            if (attempt.confirmed()) {
                said.add(attempt.trueOutcome());
            }
            said.remove(Claim.NOT_FOUND);
            assertThat(said).as("outcomes told of %s", attempt.txn()).hasSizeLessThanOrEqualTo(1);
            if (said.contains(Claim.COMMITTED)) {
                assertThat(readOnce).as("%s said committed", attempt.txn()).contains(attempt.value());
            }
            if (said.contains(Claim.ABORTED)) {
                assertThat(readOnce).as("%s said aborted", attempt.txn()).doesNotContain(attempt.value());
            }
        }
    }

    /** Commits three transactions in four and aborts the fourth, one after another, until stopped. */
    private void load(LocalCluster cluster, String topic, AtomicBoolean running) {
        try (PulsarClient client = Txns.client(cluster.serviceUrl());
             Producer<String> producer = Txns.producer(client, topic)) {
            for (int i = 0; running.get(); i++) {
                int openedIn = phase.get();
                Transaction txn;
                try {
                    txn = Txns.open(client, Duration.ofSeconds(30));
                } catch (Exception e) {
                    continue;
                }
                String value = "value-" + i;
                boolean commit = i % 4 != 3;
                boolean confirmed = false;
                try {
                    producer.newMessage(txn).value(value).sendAsync().get(30, TimeUnit.SECONDS);
                } catch (Exception e) {
                    // Not sent, as far as the client knows: it ends the transaction with an abort.
                    commit = false;
                }
                try {
                    (commit ? txn.commit() : txn.abort()).get(30, TimeUnit.SECONDS);
                    confirmed = true;
                } catch (Exception e) {
                    // The outcome is unknown to the client; the retries find it.
                }
                attempts.add(new Attempt(txn.getTxnID(), value, commit, openedIn, phase.get(), confirmed,
                        System.nanoTime()));
            }
        } catch (Exception e) {
            throw new IllegalStateException(e);
        }
    }

    private void awaitConfirmedIn(int stablePhase) throws InterruptedException {
        Instant deadline = Instant.now().plus(Duration.ofMinutes(2));
        while (confirmedIn(stablePhase) < PER_PHASE) {
            assertThat(Instant.now()).as("%d ends confirmed in phase %d", PER_PHASE, stablePhase).isBefore(deadline);
            Thread.sleep(200);
        }
    }

    private long confirmedIn(int stablePhase) {
        synchronized (attempts) {
            return attempts.stream().filter(a -> a.endedWithin(stablePhase)).count();
        }
    }
}
