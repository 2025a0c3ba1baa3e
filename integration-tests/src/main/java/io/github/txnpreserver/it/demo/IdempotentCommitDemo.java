package io.github.txnpreserver.it.demo;

import io.github.txnpreserver.client.TransactionEnds;
import io.github.txnpreserver.client.TransactionOutcome;
import io.github.txnpreserver.it.EndAnswer;
import io.github.txnpreserver.it.LocalPulsar;
import io.github.txnpreserver.it.RetryingEndClient;
import java.time.Duration;
import java.time.Instant;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicReference;
import org.apache.pulsar.client.admin.PulsarAdmin;
import org.apache.pulsar.client.admin.PulsarAdminException;
import org.apache.pulsar.client.api.Consumer;
import org.apache.pulsar.client.api.Message;
import org.apache.pulsar.client.api.Producer;
import org.apache.pulsar.client.api.PulsarClient;
import org.apache.pulsar.client.api.Schema;
import org.apache.pulsar.client.api.SubscriptionInitialPosition;
import org.apache.pulsar.client.api.transaction.Transaction;
import org.apache.pulsar.client.api.transaction.TxnID;

/**
 * Runs one scenario of retried commits and aborts through the stock Java client, first on a
 * stock Pulsar 4.0.8 standalone broker, then on one with the plugin installed, and prints
 * each answer beside stock's. Ctrl-C stops the broker.
 * With {@code --keep-running} the broker stays up after the demo until Ctrl-C.
 */
public final class IdempotentCommitDemo {

    private static final String TOPIC = "persistent://public/default/demo-orders";
    private static final AtomicReference<LocalPulsar> BROKER = new AtomicReference<>();
    private static int failures;

    private IdempotentCommitDemo() {
    }

    public static void main(String[] args) throws Exception {
        int exitCode = 1;
        try {
            exitCode = run(args);
        } catch (Exception e) {
            say("The demo failed: " + e);
        } finally {
            stopBroker();
        }
        System.exit(exitCode);
    }

    /** One retried end of the scenario: what it is, what it got, and what the plugin must answer. */
    private record Step(String label, EndAnswer answer, EndAnswer withPlugin, TransactionOutcome outcome) {

        Step(String label, EndAnswer answer, EndAnswer withPlugin) {
            this(label, answer, withPlugin, null);
        }
    }

    private static int run(String[] args) throws Exception {
        boolean keepRunning = List.of(args).contains("--keep-running");
        Runtime.getRuntime().addShutdownHook(new Thread(IdempotentCommitDemo::stopBroker, "stop-demo-broker"));

        say("The same scenario runs twice through the stock Java client: first on stock Pulsar 4.0.8,");
        say("then on the same distribution with the plugin installed. Each broker takes about 15 s to start.");
        say("");
        say("Starting a stock Pulsar 4.0.8 standalone broker (the plugin not installed)...");
        LocalPulsar stock = LocalPulsar.startStock("demo-stock", Map.of("transactionCoordinatorEnabled", "true"));
        BROKER.set(stock);
        List<Step> stockSteps = new ArrayList<>();
        List<String> stockRead = scenario(stock, stockSteps, null);
        stopBroker();

        say("");
        say("Starting a Pulsar 4.0.8 standalone broker with the plugin installed...");
        LocalPulsar pulsar = LocalPulsar.start("demo", Map.of("transactionMetaPersistCount", "100"));
        BROKER.set(pulsar);
        say("Broker up at " + pulsar.serviceUrl() + " (pid " + pulsar.pid() + ", log " + pulsar.logFile() + ")");
        List<Step> pluginSteps = new ArrayList<>();
        List<String> read = scenario(pulsar, pluginSteps, stockSteps);

        say("");
        say("What a consumer reads: stock " + stockRead + ", with the plugin " + read);
        if (!read.equals(List.of("order-1 (committed)"))) {
            failures++;
            say("   UNEXPECTED: the committed message exactly once, the aborted one never");
        } else {
            say("   the committed message exactly once, the timed-out one never: as expected");
        }
        say("");
        long stockRetries = stockSteps.stream().filter(step -> step.answer() != null).count();
        long stockNotFound = stockSteps.stream().filter(step -> step.answer() == EndAnswer.NOT_FOUND).count();
        long stockUnknown = stockSteps.stream().filter(step -> step.outcome() == TransactionOutcome.UNKNOWN).count();
        say(failures == 0 ? "With the plugin, every retry got the transaction's real outcome; stock Pulsar answered"
                + " TransactionNotFound to " + stockNotFound + " of the " + stockRetries + ", and the helper could"
                + " tell stock's outcome for " + (stockSteps.size() - stockRetries - stockUnknown) + " of "
                + (stockSteps.size() - stockRetries) + "."
                : failures + " answer(s) with the plugin were not the real outcome.");
        if (keepRunning) {
            say("Broker keeps running at " + pulsar.serviceUrl() + "; Ctrl-C stops it.");
            Thread.currentThread().join();
        }
        return failures == 0 ? 0 : 1;
    }

    /**
     * Runs the scenario on one broker, noting each retried end in {@code steps}; with the
     * stock broker's steps given, prints each answer beside stock's and checks the plugin's.
     *
     * @return what a consumer of the topic reads at the end
     */
    private static List<String> scenario(LocalPulsar pulsar, List<Step> steps, List<Step> stockSteps)
            throws Exception {
        boolean plugin = stockSteps != null;
        try (PulsarClient client = PulsarClient.builder().serviceUrl(pulsar.serviceUrl())
                .enableTransaction(true).operationTimeout(30, TimeUnit.SECONDS).build();
             PulsarAdmin admin = PulsarAdmin.builder().serviceHttpUrl(pulsar.httpUrl()).build();
             RetryingEndClient retries = RetryingEndClient.connect(pulsar.serviceUrl());
             Consumer<String> consumer = client.newConsumer(Schema.STRING).topic(TOPIC).subscriptionName("demo")
                     .subscriptionInitialPosition(SubscriptionInitialPosition.Earliest).subscribe();
             Producer<String> producer = client.newProducer(Schema.STRING).topic(TOPIC)
                     .sendTimeout(0, TimeUnit.SECONDS).create()) {
            Answers answers = new Answers(steps, stockSteps, retries, plugin);

            answers.section("1. A commit retried after it succeeded (the client lost the first answer)");
            Transaction committed = client.newTransaction().withTransactionTimeout(5, TimeUnit.MINUTES).build().get();
            producer.newMessage(committed).value("order-1 (committed)").send();
            committed.commit().get();
            TxnID committedId = committed.getTxnID();
            answers.note("   committed " + committedId + " holding message 'order-1 (committed)'");
            answers.step("   retry commit", retries.commit(committedId), EndAnswer.SUCCESS);

            answers.section("2. An abort after the commit");
            answers.step("   abort", retries.abort(committedId), EndAnswer.REFUSED_AS_COMMITTED);

            answers.section("3. A commit of a transaction the coordinator aborted on timeout");
            Transaction timedOut = client.newTransaction().withTransactionTimeout(2, TimeUnit.SECONDS).build().get();
            producer.newMessage(timedOut).value("order-2 (timed out)").send();
            TxnID timedOutId = timedOut.getTxnID();
            answers.note("   opened " + timedOutId + " with a 2 s timeout and produced 'order-2 (timed out)' in it");
            awaitAbortedByCoordinator(admin, timedOutId, plugin);
            answers.note("   the coordinator aborted it on timeout");
            answers.step("   commit", retries.commit(timedOutId), EndAnswer.REFUSED_AS_ABORTED);

            answers.section("4. After a kill -9 of the broker and a restart");
            long pid = pulsar.pid();
            pulsar.kill();
            answers.note("   killed broker pid " + pid + " with SIGKILL; restarting it...");
            pulsar.start();
            answers.note("   broker up again (pid " + pulsar.pid() + ")");
            answers.step("   retry commit of the committed one", retries.commit(committedId), EndAnswer.SUCCESS);
            answers.step("   abort of the committed one", retries.abort(committedId), EndAnswer.REFUSED_AS_COMMITTED);
            answers.step("   commit of the timed-out one", retries.commit(timedOutId), EndAnswer.REFUSED_AS_ABORTED);

            answers.section("5. The same questions through the client helper (pulsar-txn-preserver-client), one call each");
            TransactionEnds ends = TransactionEnds.of(client);
            answers.outcome("   TransactionEnds.commit(committed one)", ends.commit(committedId).get(),
                    TransactionOutcome.COMMITTED);
            answers.outcome("   TransactionEnds.commit(timed-out one)", ends.commit(timedOutId).get(),
                    TransactionOutcome.ABORTED);
            return drain(consumer);
        }
    }

    /** Prints the plugin run beside the stock one; the stock run prints only its progress. */
    private static final class Answers {
        private final List<Step> steps;
        private final List<Step> stockSteps;
        private final RetryingEndClient client;
        private final boolean plugin;

        Answers(List<Step> steps, List<Step> stockSteps, RetryingEndClient client, boolean plugin) {
            this.steps = steps;
            this.stockSteps = stockSteps;
            this.client = client;
            this.plugin = plugin;
        }

        void section(String title) {
            if (plugin) {
                say("");
                say(title);
            }
        }

        void note(String line) {
            if (plugin) {
                say(line);
            }
        }

        void step(String label, EndAnswer answer, EndAnswer expected) {
            steps.add(new Step(label, answer, expected));
            if (!plugin) {
                say("   stock: " + label.strip() + " -> " + describe(answer));
                return;
            }
            Step stock = stockSteps.get(steps.size() - 1);
            String detail = client.lastMessage().isEmpty() ? "" : "  [" + client.lastMessage() + "]";
            String verdict = answer == expected ? "as expected" : "UNEXPECTED, wanted " + describe(expected);
            if (answer != expected) {
                failures++;
            }
            say(label + " -> stock: " + describe(stock.answer()) + "   with plugin: " + describe(answer)
                    + " (" + verdict + ")" + detail);
        }

        /** An answer of the client helper, beside stock's. */
        void outcome(String label, TransactionOutcome outcome, TransactionOutcome expected) {
            steps.add(new Step(label, null, null, outcome));
            if (!plugin) {
                say("   stock: " + label.strip() + " -> " + outcome);
                return;
            }
            TransactionOutcome stock = stockSteps.get(steps.size() - 1).outcome();
            String verdict = outcome == expected ? "as expected" : "UNEXPECTED, wanted " + expected;
            if (outcome != expected) {
                failures++;
            }
            say(label + " -> stock: " + stock + "   with plugin: " + outcome + " (" + verdict + ")");
        }
    }

    private static String describe(EndAnswer answer) {
        if (answer == null) {
            return "-";
        }
        return switch (answer) {
            case SUCCESS -> "success";
            case REFUSED_AS_COMMITTED -> "refused: the transaction was committed";
            case REFUSED_AS_ABORTED -> "refused: the transaction was aborted";
            case FAILED -> "failed (no retry changes it)";
            case NOT_FOUND -> "TransactionNotFound";
        };
    }

    /** Stock Pulsar forgets an aborted transaction at once: there, gone means aborted. */
    private static void awaitAbortedByCoordinator(PulsarAdmin admin, TxnID txnId, boolean plugin) throws Exception {
        Instant deadline = Instant.now().plus(Duration.ofMinutes(1));
        while (Instant.now().isBefore(deadline)) {
            try {
                String status = admin.transactions().getTransactionMetadata(txnId).status;
                if (status.startsWith("ABORT")) {
                    return;
                }
            } catch (PulsarAdminException.NotFoundException e) {
                if (!plugin) {
                    return;
                }
            } catch (PulsarAdminException e) {
                // not loaded yet: keep asking
            }
            Thread.sleep(500);
        }
        throw new IllegalStateException("The coordinator did not abort " + txnId + " on timeout");
    }

    private static List<String> drain(Consumer<String> consumer) throws Exception {
        List<String> values = new ArrayList<>();
        Message<String> message;
        while ((message = consumer.receive(5, TimeUnit.SECONDS)) != null) {
            values.add(message.getValue());
            consumer.acknowledge(message);
        }
        return values;
    }

    private static void stopBroker() {
        LocalPulsar pulsar = BROKER.getAndSet(null);
        if (pulsar != null) {
            try {
                say("Stopping the broker (pid " + pulsar.pid() + ")...");
                pulsar.stop();
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
            }
        }
    }

    private static void say(String line) {
        System.out.println(line);
    }
}
