import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.time.Instant;
import java.util.ArrayList;
import java.util.List;
import java.util.Properties;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;
import java.util.function.Function;
import org.apache.pulsar.client.api.Message;
import org.apache.pulsar.client.api.MessageId;
import org.apache.pulsar.client.api.Producer;
import org.apache.pulsar.client.api.PulsarClient;
import org.apache.pulsar.client.api.Reader;
import org.apache.pulsar.client.api.Schema;
import org.apache.pulsar.client.api.transaction.Transaction;
import org.apache.pulsar.client.api.transaction.TransactionCoordinatorClientException;
import org.apache.pulsar.client.api.transaction.TxnID;
import org.apache.pulsar.client.impl.transaction.TransactionCoordinatorClientImpl;

/**
 * The smoke test run.sh runs against a Pulsar standalone started from jars, with the stock
 * Java client only (no class of the plugin or of the integration tests).
 *
 * <pre>
 * java -cp CLIENT_JARS SmokeTest.java first   SERVICE_URL STATE_FILE plugin|stock
 * java -cp CLIENT_JARS SmokeTest.java restart SERVICE_URL STATE_FILE plugin|stock
 * </pre>
 *
 * {@code first} commits one transaction and aborts another (each with a message produced in
 * it), then retries the end of both as a client that lost the first answer does: through
 * the client's own TransactionCoordinatorClientImpl, the way
 * integration-tests/.../RetryingEndClient sends an end for an arbitrary TxnID. It saves the
 * two TxnIDs in STATE_FILE. {@code restart}, run after a kill -9 and restart of the broker,
 * retries the same ends again. One line per check, "CHECK ... OK" or "CHECK ... FAIL"; the
 * exit status is 0 only if every check passed.
 *
 * <p>With the plugin ({@code plugin}): a retried commit of a committed transaction succeeds,
 * a retried abort of it is refused as committed (InvalidTxnStatus "... COMMITTING"), and the
 * mirror image for an aborted one. Without it ({@code stock}): every retry gets
 * TransactionNotFound.
 */
public final class SmokeTest {

    enum Answer { SUCCESS, REFUSED_AS_COMMITTED, REFUSED_AS_ABORTED, REFUSED_OTHER, NOT_FOUND }

    private static final Duration REACH_TIMEOUT = Duration.ofMinutes(2);
    private static int failures;
    /** The refusal message of the last answer, printed under its check. */
    private static String detail = "";

    public static void main(String[] args) throws Exception {
        if (args.length != 4 || !List.of("first", "restart").contains(args[0])
                || !List.of("plugin", "stock").contains(args[3])) {
            System.err.println("usage: SmokeTest first|restart SERVICE_URL STATE_FILE plugin|stock");
            System.exit(2);
        }
        String phase = args[0];
        String serviceUrl = args[1];
        Path stateFile = Path.of(args[2]);
        boolean plugin = args[3].equals("plugin");
        String label = phase + "/" + args[3];

        TxnID committed;
        TxnID aborted;
        if (phase.equals("first")) {
            String topic = "persistent://public/default/txn-smoke-" + System.currentTimeMillis();
            try (PulsarClient client = PulsarClient.builder().serviceUrl(serviceUrl).enableTransaction(true)
                    .operationTimeout(30, TimeUnit.SECONDS).build();
                 Producer<String> producer = client.newProducer(Schema.STRING).topic(topic)
                         .sendTimeout(0, TimeUnit.SECONDS).create()) {
                Transaction commitTxn = client.newTransaction().withTransactionTimeout(5, TimeUnit.MINUTES)
                        .build().get(60, TimeUnit.SECONDS);
                producer.newMessage(commitTxn).value("committed").send();
                commitTxn.commit().get(60, TimeUnit.SECONDS);
                committed = commitTxn.getTxnID();

                Transaction abortTxn = client.newTransaction().withTransactionTimeout(5, TimeUnit.MINUTES)
                        .build().get(60, TimeUnit.SECONDS);
                producer.newMessage(abortTxn).value("aborted").send();
                abortTxn.abort().get(60, TimeUnit.SECONDS);
                aborted = abortTxn.getTxnID();
                System.out.println("committed " + committed + ", aborted " + aborted + " (topic " + topic + ")");

                // The transactions really ended as they should: a reader sees only the committed message.
                List<String> seen = readAll(client, topic);
                check(label, "topic holds only the committed message", List.of("committed"), seen);
            }
            Properties state = new Properties();
            state.setProperty("committed", committed.getMostSigBits() + ":" + committed.getLeastSigBits());
            state.setProperty("aborted", aborted.getMostSigBits() + ":" + aborted.getLeastSigBits());
            try (var out = Files.newBufferedWriter(stateFile)) {
                state.store(out, "TxnIDs of the smoke test");
            }
        } else {
            Properties state = new Properties();
            try (var in = Files.newBufferedReader(stateFile)) {
                state.load(in);
            }
            committed = parse(state.getProperty("committed"));
            aborted = parse(state.getProperty("aborted"));
        }

        // A client of its own for the retries: a connection routes coordinator answers to one
        // handler per coordinator (see RetryingEndClient).
        try (PulsarClient client = PulsarClient.builder().serviceUrl(serviceUrl)
                .operationTimeout(30, TimeUnit.SECONDS).build()) {
            TransactionCoordinatorClientImpl coordinators = new TransactionCoordinatorClientImpl(client);
            coordinators.start();
            try {
                check(label, "retried commit of committed " + committed,
                        plugin ? Answer.SUCCESS : Answer.NOT_FOUND, send(committed, coordinators::commitAsync));
                check(label, "retried abort of committed " + committed,
                        plugin ? Answer.REFUSED_AS_COMMITTED : Answer.NOT_FOUND, send(committed, coordinators::abortAsync));
                check(label, "retried abort of aborted " + aborted,
                        plugin ? Answer.SUCCESS : Answer.NOT_FOUND, send(aborted, coordinators::abortAsync));
                check(label, "retried commit of aborted " + aborted,
                        plugin ? Answer.REFUSED_AS_ABORTED : Answer.NOT_FOUND, send(aborted, coordinators::commitAsync));
                // Asked twice: an answer from a kept outcome does not use it up.
                check(label, "second retried commit of committed " + committed,
                        plugin ? Answer.SUCCESS : Answer.NOT_FOUND, send(committed, coordinators::commitAsync));
            } finally {
                coordinators.close();
            }
        }
        System.out.println("SmokeTest " + label + ": " + (failures == 0 ? "all checks passed" : failures + " check(s) FAILED"));
        System.exit(failures == 0 ? 0 : 1);
    }

    private static List<String> readAll(PulsarClient client, String topic) throws Exception {
        List<String> values = new ArrayList<>();
        try (Reader<String> reader = client.newReader(Schema.STRING).topic(topic)
                .startMessageId(MessageId.earliest).create()) {
            Message<String> message;
            while ((message = reader.readNext(5, TimeUnit.SECONDS)) != null) {
                values.add(message.getValue());
            }
        }
        return values;
    }

    private static TxnID parse(String bits) {
        String[] parts = bits.split(":");
        return new TxnID(Long.parseLong(parts[0]), Long.parseLong(parts[1]));
    }

    private static void check(String label, String what, Object expected, Object actual) {
        boolean ok = expected.equals(actual);
        if (!ok) {
            failures++;
        }
        System.out.println("CHECK [" + label + "] " + what + ": expected " + expected + ", got " + actual
                + (ok ? "  OK" : "  FAIL"));
        if (!detail.isEmpty()) {
            System.out.println("      (" + detail + ")");
            detail = "";
        }
    }

    /** Sends one end request; while the coordinator is not reachable (broker restarting) sends it again. */
    private static Answer send(TxnID txnId, Function<TxnID, CompletableFuture<Void>> request) throws InterruptedException {
        Instant deadline = Instant.now().plus(REACH_TIMEOUT);
        Throwable last = null;
        while (Instant.now().isBefore(deadline)) {
            try {
                request.apply(txnId).get(30, TimeUnit.SECONDS);
                detail = "";
                return Answer.SUCCESS;
            } catch (ExecutionException e) {
                Answer answer = answerOf(e.getCause());
                if (answer != null) {
                    detail = e.getCause().getClass().getSimpleName() + ": " + e.getCause().getMessage();
                    return answer;
                }
                last = e.getCause();
            } catch (TimeoutException e) {
                last = e;
            }
            Thread.sleep(500);
        }
        throw new IllegalStateException("No answer for " + txnId + " within " + REACH_TIMEOUT, last);
    }

    /** As integration-tests/.../EndAnswer.of: the answer an exception stands for, or null if it is none. */
    private static Answer answerOf(Throwable failure) {
        Throwable cause = failure;
        while (cause != null && !(cause instanceof TransactionCoordinatorClientException)) {
            cause = cause.getCause();
        }
        if (cause instanceof TransactionCoordinatorClientException.InvalidTxnStatusException) {
            String message = String.valueOf(cause.getMessage());
            if (message.contains("is in COMMITTING") || message.contains("is in COMMITTED")) {
                return Answer.REFUSED_AS_COMMITTED;
            }
            if (message.contains("is in ABORTING") || message.contains("is in ABORTED")) {
                return Answer.REFUSED_AS_ABORTED;
            }
            return Answer.REFUSED_OTHER;
        }
        if (cause instanceof TransactionCoordinatorClientException.TransactionNotFoundException) {
            return Answer.NOT_FOUND;
        }
        return null;
    }
}
