package io.github.txnpreserver.it.demo;

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
 * Starts a Pulsar 4.0.8 standalone broker with the plugin installed and shows, through the
 * stock Java client, what a retried commit or abort gets. Ctrl-C stops the broker.
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

    private static int run(String[] args) throws Exception {
        boolean keepRunning = List.of(args).contains("--keep-running");
        Runtime.getRuntime().addShutdownHook(new Thread(IdempotentCommitDemo::stopBroker, "stop-demo-broker"));

        say("Starting a Pulsar 4.0.8 standalone broker with the plugin installed (about 15 s)...");
        LocalPulsar pulsar = LocalPulsar.start("demo", Map.of("transactionMetaPersistCount", "100"));
        BROKER.set(pulsar);
        say("Broker up at " + pulsar.serviceUrl() + " (pid " + pulsar.pid() + ", log " + pulsar.logFile() + ")");

        try (PulsarClient client = PulsarClient.builder().serviceUrl(pulsar.serviceUrl())
                .enableTransaction(true).operationTimeout(30, TimeUnit.SECONDS).build();
             PulsarAdmin admin = PulsarAdmin.builder().serviceHttpUrl(pulsar.httpUrl()).build();
             RetryingEndClient retries = RetryingEndClient.connect(pulsar.serviceUrl());
             Consumer<String> consumer = client.newConsumer(Schema.STRING).topic(TOPIC).subscriptionName("demo")
                     .subscriptionInitialPosition(SubscriptionInitialPosition.Earliest).subscribe();
             Producer<String> producer = client.newProducer(Schema.STRING).topic(TOPIC)
                     .sendTimeout(0, TimeUnit.SECONDS).create()) {

            say("");
            say("1. A commit retried after it succeeded (the client lost the first answer)");
            Transaction committed = client.newTransaction().withTransactionTimeout(5, TimeUnit.MINUTES).build().get();
            producer.newMessage(committed).value("order-1 (committed)").send();
            committed.commit().get();
            TxnID committedId = committed.getTxnID();
            say("   committed " + committedId + " holding message 'order-1 (committed)'");
            expect("   retry commit", retries.commit(committedId), EndAnswer.SUCCESS, retries);

            say("");
            say("2. An abort after the commit");
            expect("   abort", retries.abort(committedId), EndAnswer.REFUSED_AS_COMMITTED, retries);

            say("");
            say("3. A commit of a transaction the coordinator aborted on timeout");
            Transaction timedOut = client.newTransaction().withTransactionTimeout(2, TimeUnit.SECONDS).build().get();
            producer.newMessage(timedOut).value("order-2 (timed out)").send();
            TxnID timedOutId = timedOut.getTxnID();
            say("   opened " + timedOutId + " with a 2 s timeout and produced 'order-2 (timed out)' in it");
            awaitAbortedByCoordinator(admin, timedOutId);
            say("   the coordinator aborted it on timeout");
            expect("   commit", retries.commit(timedOutId), EndAnswer.REFUSED_AS_ABORTED, retries);

            say("");
            say("4. The outcomes survive a kill -9 of the broker");
            long pid = pulsar.pid();
            pulsar.kill();
            say("   killed broker pid " + pid + " with SIGKILL; restarting it...");
            pulsar.start();
            say("   broker up again (pid " + pulsar.pid() + ")");
            expect("   retry commit of " + committedId, retries.commit(committedId), EndAnswer.SUCCESS, retries);
            expect("   abort of " + committedId, retries.abort(committedId), EndAnswer.REFUSED_AS_COMMITTED, retries);
            expect("   commit of " + timedOutId, retries.commit(timedOutId), EndAnswer.REFUSED_AS_ABORTED, retries);

            say("");
            say("5. What a consumer reads");
            List<String> read = drain(consumer);
            say("   " + read);
            if (!read.equals(List.of("order-1 (committed)"))) {
                failures++;
                say("   UNEXPECTED: the committed message exactly once, the aborted one never");
            } else {
                say("   the committed message exactly once, the timed-out one never: as expected");
            }
        }

        say("");
        say(failures == 0 ? "All retries got the transaction's real outcome."
                : failures + " answer(s) were not the real outcome.");
        if (keepRunning) {
            say("Broker keeps running at " + pulsar.serviceUrl() + "; Ctrl-C stops it.");
            Thread.currentThread().join();
        }
        return failures == 0 ? 0 : 1;
    }

    private static void expect(String what, EndAnswer answer, EndAnswer expected, RetryingEndClient client) {
        String detail = client.lastMessage().isEmpty() ? "" : "  [" + client.lastMessage() + "]";
        String verdict = answer == expected ? "as expected" : "UNEXPECTED, wanted " + describe(expected);
        if (answer != expected) {
            failures++;
        }
        say(what + " -> " + describe(answer) + " (" + verdict + ")" + detail);
    }

    private static String describe(EndAnswer answer) {
        return switch (answer) {
            case SUCCESS -> "success";
            case REFUSED_AS_COMMITTED -> "refused: the transaction was committed";
            case REFUSED_AS_ABORTED -> "refused: the transaction was aborted";
            case REFUSED_OTHER -> "refused: invalid status";
            case NOT_FOUND -> "TransactionNotFound";
        };
    }

    private static void awaitAbortedByCoordinator(PulsarAdmin admin, TxnID txnId) throws Exception {
        Instant deadline = Instant.now().plus(Duration.ofMinutes(1));
        while (Instant.now().isBefore(deadline)) {
            try {
                String status = admin.transactions().getTransactionMetadata(txnId).status;
                if (status.startsWith("ABORT")) {
                    return;
                }
            } catch (PulsarAdminException e) {
                // not loaded yet, or gone: keep asking
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
