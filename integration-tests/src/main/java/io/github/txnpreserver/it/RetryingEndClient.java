package io.github.txnpreserver.it;

import java.io.IOException;
import java.time.Duration;
import java.time.Instant;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;
import java.util.function.Function;
import org.apache.pulsar.client.api.ClientBuilder;
import org.apache.pulsar.client.api.PulsarClient;
import org.apache.pulsar.client.api.PulsarClientException;
import org.apache.pulsar.client.api.transaction.TransactionCoordinatorClientException;
import org.apache.pulsar.client.api.transaction.TxnID;
import org.apache.pulsar.client.impl.transaction.TransactionCoordinatorClientImpl;

/**
 * Sends commit and abort requests for a transaction id, as a client that lost the first
 * answer and retries does. It uses the stock client's own coordinator client:
 * {@code Transaction.commit()} cannot be retried once the transaction object has ended.
 *
 * <p>Only answers are returned; while the coordinator is not reachable (a broker
 * restarting) the request is sent again, for up to two minutes.
 */
public final class RetryingEndClient implements AutoCloseable {

    private static final Duration REACH_TIMEOUT = Duration.ofMinutes(2);
    private final PulsarClient client;
    private final TransactionCoordinatorClientImpl coordinators;

    /**
     * Connects with a client of its own: a connection routes coordinator answers to one
     * handler per coordinator, so a second coordinator client on the application's
     * PulsarClient would take the answers meant for the application's transactions.
     */
    public RetryingEndClient(ClientBuilder builder) throws IOException {
        this.client = builder.build();
        this.coordinators = new TransactionCoordinatorClientImpl(client);
        try {
            this.coordinators.start();
        } catch (TransactionCoordinatorClientException e) {
            client.close();
            throw e;
        }
    }

    public static RetryingEndClient connect(String serviceUrl) throws IOException {
        return new RetryingEndClient(PulsarClient.builder().serviceUrl(serviceUrl)
                .operationTimeout(30, TimeUnit.SECONDS));
    }

    public EndAnswer commit(TxnID txnId) throws InterruptedException {
        return send(txnId, coordinators::commitAsync);
    }

    public EndAnswer abort(TxnID txnId) throws InterruptedException {
        return send(txnId, coordinators::abortAsync);
    }

    /**
     * Sends {@code count} commits of one transaction at once, as concurrent retries of
     * several threads or clients do, and returns every answer.
     */
    public java.util.List<EndAnswer> commitConcurrently(TxnID txnId, int count) throws InterruptedException {
        java.util.List<CompletableFuture<Void>> requests = new java.util.ArrayList<>();
        for (int i = 0; i < count; i++) {
            requests.add(coordinators.commitAsync(txnId));
        }
        java.util.List<EndAnswer> answers = new java.util.ArrayList<>();
        for (CompletableFuture<Void> request : requests) {
            try {
                request.get(60, TimeUnit.SECONDS);
                answers.add(EndAnswer.SUCCESS);
            } catch (ExecutionException e) {
                answers.add(EndAnswer.of(e.getCause()));
            } catch (TimeoutException e) {
                answers.add(null);
            }
        }
        return answers;
    }

    /** The exception message of the last refusal, for printing. */
    public String lastMessage() {
        return lastMessage;
    }

    private volatile String lastMessage = "";

    private EndAnswer send(TxnID txnId, Function<TxnID, CompletableFuture<Void>> request)
            throws InterruptedException {
        Instant deadline = Instant.now().plus(REACH_TIMEOUT);
        Throwable last = null;
        while (Instant.now().isBefore(deadline)) {
            try {
                request.apply(txnId).get(30, TimeUnit.SECONDS);
                lastMessage = "";
                return EndAnswer.SUCCESS;
            } catch (ExecutionException e) {
                EndAnswer answer = EndAnswer.of(e.getCause());
                if (answer != null) {
                    lastMessage = String.valueOf(e.getCause().getMessage());
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

    @Override
    public void close() throws IOException {
        try {
            coordinators.close();
        } finally {
            client.close();
        }
    }
}
