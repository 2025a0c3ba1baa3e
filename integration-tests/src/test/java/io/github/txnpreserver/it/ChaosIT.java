package io.github.txnpreserver.it;

import static org.assertj.core.api.Assertions.assertThat;

import java.time.Duration;
import java.time.Instant;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.ConcurrentLinkedQueue;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import org.apache.pulsar.client.api.Producer;
import org.apache.pulsar.client.api.PulsarClient;
import org.apache.pulsar.client.api.Schema;
import org.apache.pulsar.client.api.transaction.Transaction;
import org.apache.pulsar.client.api.transaction.TxnID;
import org.junit.jupiter.api.DisplayName;
import org.junit.jupiter.api.Test;

/**
 * In the style of apache/pulsar issue 19629: clients produce and commit transactions, retrying
 * on errors, while the broker is killed (kill -9) and restarted again and again. A checker
 * then verifies that no committed message is lost or duplicated, no aborted one appears, and
 * every answer a client got to an end request agrees with the transaction's final outcome.
 *
 * <p>Bounded by default (CI). For a long run:
 * {@code mvn verify -pl integration-tests -Dit.test=ChaosIT -Dchaos.duration=PT2H -Dchaos.restartEvery=PT120S}.
 */
@DisplayName("Chaos: transactions while the broker is killed again and again")
class ChaosIT {

    private static final Duration DURATION = Duration.parse(System.getProperty("chaos.duration", "PT75S"));
    private static final Duration RESTART_EVERY = Duration.parse(System.getProperty("chaos.restartEvery", "PT20S"));
    private static final int WORKERS = Integer.getInteger("chaos.workers", 4);

    /** What a worker did with one transaction, and what the coordinator answered. */
    private record Attempt(TxnID txnId, String payload, boolean commitRequested, EndAnswer answer) {
    }

    @Test
    void noLossNoDuplicateAndEveryAnswerAgreesWithTheFinalOutcome() throws Exception {
        String topic = Txns.uniqueTopic("chaos");
        ConcurrentLinkedQueue<Attempt> attempts = new ConcurrentLinkedQueue<>();
        AtomicBoolean running = new AtomicBoolean(true);
        int restarts = 0;
        try (LocalPulsar pulsar = LocalPulsar.start("chaos", Map.of(
                "transactionMetaPersistCount", "1000000",
                "transactionMetaPersistMaxCountPerCoordinator", "1000000",
                "brokerDeduplicationEnabled", "true"))) {
            List<Thread> workers = new ArrayList<>();
            ConcurrentLinkedQueue<Throwable> failures = new ConcurrentLinkedQueue<>();
            for (int i = 0; i < WORKERS; i++) {
                int worker = i;
                Thread thread = new Thread(() -> {
                    try {
                        work(pulsar, topic, worker, running, attempts);
                    } catch (Throwable e) {
                        failures.add(e);
                    }
                }, "chaos-worker-" + i);
                thread.start();
                workers.add(thread);
            }
            Instant end = Instant.now().plus(DURATION);
            while (Instant.now().plus(RESTART_EVERY).isBefore(end)) {
                Thread.sleep(RESTART_EVERY.toMillis());
                pulsar.restartAfterKill();
                restarts++;
            }
            Thread.sleep(Math.max(0, Duration.between(Instant.now(), end).toMillis()));
            running.set(false);
            for (Thread thread : workers) {
                thread.join(TimeUnit.MINUTES.toMillis(5));
                assertThat(thread.isAlive()).as("%s ended", thread.getName()).isFalse();
            }
            assertThat(failures).as("workers' failures").isEmpty();

            check(pulsar, topic, new ArrayList<>(attempts), restarts);
        }
    }

    private static void work(LocalPulsar pulsar, String topic, int worker, AtomicBoolean running,
                             ConcurrentLinkedQueue<Attempt> attempts) {
        try (PulsarClient client = Txns.client(pulsar);
             RetryingEndClient retry = RetryingEndClient.connect(pulsar.serviceUrl());
             Producer<String> producer = client.newProducer(Schema.STRING).topic(topic)
                     .producerName("chaos-" + worker).sendTimeout(0, TimeUnit.SECONDS).create()) {
            long sequence = 0;
            while (running.get()) {
                String payload = "w" + worker + "-" + sequence++;
                Transaction txn;
                try {
                    txn = Txns.open(client, Duration.ofSeconds(30));
                } catch (Exception e) {
                    Thread.sleep(200);
                    continue;
                }
                boolean sent;
                try {
                    producer.newMessage(txn).value(payload).send();
                    sent = true;
                } catch (Exception e) {
                    sent = false;
                }
                if (!sent || sequence % 5 == 0) {
                    // Never to be committed (its message may not have gone, or one in five on
                    // purpose): aborted, the abort retried like a commit until answered.
                    EndAnswer answer;
                    try {
                        txn.abort().get(30, TimeUnit.SECONDS);
                        answer = EndAnswer.SUCCESS;
                    } catch (Exception e) {
                        answer = retry.abort(txn.getTxnID());
                    }
                    attempts.add(new Attempt(txn.getTxnID(), payload, false, answer));
                    continue;
                }
                EndAnswer answer;
                try {
                    txn.commit().get(30, TimeUnit.SECONDS);
                    answer = EndAnswer.SUCCESS;
                } catch (Exception e) {
                    // The answer was lost (broker killed, timeout): retry until the coordinator answers.
                    answer = retry.commit(txn.getTxnID());
                }
                attempts.add(new Attempt(txn.getTxnID(), payload, true, answer));
            }
        } catch (Exception e) {
            throw new IllegalStateException("worker " + worker + " failed", e);
        }
    }

    private static void check(LocalPulsar pulsar, String topic, List<Attempt> attempts, int restarts)
            throws Exception {
        Set<String> committed = new HashSet<>();
        Set<String> notCommitted = new HashSet<>();
        Map<EndAnswer, Integer> answers = new HashMap<>();
        try (RetryingEndClient retry = RetryingEndClient.connect(pulsar.serviceUrl());
             PulsarClient client = Txns.client(pulsar)) {
            for (Attempt attempt : attempts) {
                EndAnswer finalOutcome = attempt.commitRequested()
                        ? retry.commit(attempt.txnId()) : retry.abort(attempt.txnId());
                boolean isCommitted = attempt.commitRequested() ? finalOutcome == EndAnswer.SUCCESS
                        : finalOutcome == EndAnswer.REFUSED_AS_COMMITTED;
                assertThat(finalOutcome).as("final outcome of %s", attempt.txnId())
                        .isIn(EndAnswer.SUCCESS, EndAnswer.REFUSED_AS_ABORTED, EndAnswer.REFUSED_AS_COMMITTED);
                answers.merge(attempt.answer(), 1, Integer::sum);
                assertThat(attempt.answer()).as("answer to the %s of %s",
                                attempt.commitRequested() ? "commit" : "abort", attempt.txnId())
                        .isEqualTo(finalOutcome);
                (isCommitted ? committed : notCommitted).add(attempt.payload());
            }
            List<String> read = Txns.readAll(client, topic);
            System.out.printf("CHAOS restarts=%d transactions=%d committed=%d not_committed=%d answers=%s read=%d%n",
                    restarts, attempts.size(), committed.size(), notCommitted.size(), answers, read.size());
            assertThat(read).as("no duplicates").doesNotHaveDuplicates();
            assertThat(new HashSet<>(read)).as("every committed message, nothing else")
                    .isEqualTo(committed);
            assertThat(restarts).isPositive();
            assertThat(committed).isNotEmpty();
            assertThat(notCommitted).as("aborts under the same faults").isNotEmpty();
        }
    }
}
