package io.github.txnpreserver.it;

import io.github.txnpreserver.client.EndNotAnsweredException;
import io.github.txnpreserver.client.EndResult;
import io.github.txnpreserver.client.EndRetryPolicy;
import io.github.txnpreserver.client.TransactionEnds;
import io.github.txnpreserver.client.TransactionOutcome;
import java.io.IOException;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CompletionException;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;
import org.apache.pulsar.client.api.ClientBuilder;
import org.apache.pulsar.client.api.PulsarClient;
import org.apache.pulsar.client.api.transaction.TxnID;

/**
 * Sends commit and abort requests for a transaction id, as a client that lost the first
 * answer and retries does: through the client helper ({@link TransactionEnds}), which sends
 * them with the stock client's own coordinator client ({@code Transaction.commit()} cannot be
 * retried once the transaction object has ended) and reads each answer by its rules.
 *
 * <p>Only answers are returned; while the coordinator gives none (a broker restarting, the
 * coordinator moving) the request is sent again every 500 ms for up to two minutes, and a
 * request still unanswered then fails the caller.
 */
public final class RetryingEndClient implements AutoCloseable {

    /** Every 500 ms for up to two minutes, an attempt unanswered for 30 s counted as unanswered. */
    private static final EndRetryPolicy RETRIED = new EndRetryPolicy(Duration.ofMillis(500), Duration.ofMillis(500),
            Duration.ofMinutes(2), Duration.ofSeconds(30));
    /** One request, its answer as it came: a concurrent end's answer is what is tested, not a retry's. */
    private static final EndRetryPolicy ONCE = new EndRetryPolicy(Duration.ofMillis(500), Duration.ofMillis(500),
            Duration.ZERO, Duration.ofSeconds(60));
    /** Past the longest either policy takes (its last attempt begins within its time and times out after). */
    private static final Duration ANSWER_BOUND = Duration.ofMinutes(3);

    private final PulsarClient client;
    private final TransactionEnds retried;
    private final TransactionEnds once;
    private volatile String lastMessage = "";
    private volatile Throwable lastFailure;

    /**
     * Connects with a client of its own: a connection routes coordinator answers to one
     * handler per coordinator, so a second coordinator client on the application's
     * PulsarClient would take the answers meant for the application's transactions.
     */
    public RetryingEndClient(ClientBuilder builder) throws IOException {
        this.client = builder.enableTransaction(true).build();
        try {
            this.retried = TransactionEnds.of(client, RETRIED);
            this.once = TransactionEnds.of(client, ONCE);
        } catch (RuntimeException e) {
            client.close();
            throw e;
        }
    }

    public static RetryingEndClient connect(String serviceUrl) throws IOException {
        return new RetryingEndClient(PulsarClient.builder().serviceUrl(serviceUrl)
                .operationTimeout(30, TimeUnit.SECONDS));
    }

    public EndAnswer commit(TxnID txnId) throws InterruptedException {
        return answered(txnId, TransactionOutcome.COMMITTED, retried.commitAndExplain(txnId));
    }

    public EndAnswer abort(TxnID txnId) throws InterruptedException {
        return answered(txnId, TransactionOutcome.ABORTED, retried.abortAndExplain(txnId));
    }

    /**
     * Sends {@code count} commits of one transaction at once, as concurrent retries of
     * several threads or clients do, each once, and returns every answer (null for one not
     * answered within 60 s).
     */
    public List<EndAnswer> commitConcurrently(TxnID txnId, int count) throws InterruptedException {
        List<CompletableFuture<EndResult>> requests = new ArrayList<>();
        for (int i = 0; i < count; i++) {
            requests.add(once.commitAndExplain(txnId));
        }
        List<EndAnswer> answers = new ArrayList<>();
        for (CompletableFuture<EndResult> request : requests) {
            answers.add(read(TransactionOutcome.COMMITTED, request));
        }
        return answers;
    }

    /** The coordinator's words with the last answer: its refusal, or the failure; empty after a success. */
    public String lastMessage() {
        return lastMessage;
    }

    /** What the last {@link EndAnswer#FAILED} failed with (the stock client's exception), null if none did. */
    public Throwable lastFailure() {
        return lastFailure;
    }

    private EndAnswer answered(TxnID txnId, TransactionOutcome requested, CompletableFuture<EndResult> request)
            throws InterruptedException {
        EndAnswer answer = read(requested, request);
        if (answer == null) {
            throw new IllegalStateException("No answer for " + txnId + " within " + RETRIED.giveUpAfter(),
                    lastFailure);
        }
        return answer;
    }

    /** The answer, or null if the coordinator gave none. */
    private EndAnswer read(TransactionOutcome requested, CompletableFuture<EndResult> request)
            throws InterruptedException {
        EndResult result;
        try {
            result = request.get(ANSWER_BOUND.toMillis(), TimeUnit.MILLISECONDS);
        } catch (ExecutionException e) {
            Throwable failure = unwrapped(e.getCause());
            lastFailure = failure;
            lastMessage = String.valueOf(failure.getMessage());
            return failure instanceof EndNotAnsweredException ? null : EndAnswer.FAILED;
        } catch (TimeoutException e) {
            // The helper completes every request within its policy's time: this is its defect.
            throw new IllegalStateException("The client helper did not complete a request within " + ANSWER_BOUND, e);
        }
        lastFailure = null;
        lastMessage = result.coordinatorMessage() == null ? "" : result.coordinatorMessage();
        return EndAnswer.of(requested, result);
    }

    private static Throwable unwrapped(Throwable failure) {
        Throwable cause = failure;
        while ((cause instanceof CompletionException || cause instanceof ExecutionException)
                && cause.getCause() != null) {
            cause = cause.getCause();
        }
        return cause;
    }

    @Override
    public void close() throws IOException {
        client.close();
    }
}
