package io.github.txnpreserver.client;

import java.time.Duration;
import java.util.Objects;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.Executor;
import java.util.concurrent.TimeUnit;
import java.util.function.BooleanSupplier;
import java.util.function.Function;
import org.apache.pulsar.client.api.PulsarClient;
import org.apache.pulsar.client.api.transaction.TransactionCoordinatorClient;
import org.apache.pulsar.client.api.transaction.TxnID;
import org.apache.pulsar.client.impl.PulsarClientImpl;

/**
 * Commits or aborts a transaction by its id and tells what became of it: one of
 * {@link TransactionOutcome}, however many times the request was sent before, and whoever
 * ended the transaction (this client, an earlier run of it, the coordinator's timeout, an
 * admin). Sends the request again, within an {@link EndRetryPolicy}, while the coordinator
 * gives no answer.
 *
 * <pre>{@code
 * PulsarClient client = PulsarClient.builder().serviceUrl(url).enableTransaction(true).build();
 * TransactionEnds ends = TransactionEnds.of(client);
 * TransactionOutcome outcome = ends.commit(txn.getTxnID()).get();
 * }</pre>
 *
 * <p>With the broker keeping outcomes (the plugin), a retried commit of a committed
 * transaction answers {@code COMMITTED} and of an aborted one {@code ABORTED}; stock Pulsar
 * answers {@code UNKNOWN} for both once the transaction has ended.
 *
 * <p>Works with the Pulsar Java client 4.0.x and 3.0.x ({@code pulsar-client} or
 * {@code pulsar-client-all}). Requests go through the client's own transaction coordinator
 * client: a second one on the same client would receive the answers meant for the first.
 */
public final class TransactionEnds {

    private final Function<TxnID, CompletableFuture<Void>> commit;
    private final Function<TxnID, CompletableFuture<Void>> abort;
    private final BooleanSupplier clientClosed;
    private final EndRetryPolicy policy;

    TransactionEnds(Function<TxnID, CompletableFuture<Void>> commit, Function<TxnID, CompletableFuture<Void>> abort,
                    BooleanSupplier clientClosed, EndRetryPolicy policy) {
        this.commit = commit;
        this.abort = abort;
        this.clientClosed = clientClosed;
        this.policy = Objects.requireNonNull(policy, "policy");
    }

    /** Ends transactions through {@code client}, which must be built with {@code enableTransaction(true)}. */
    public static TransactionEnds of(PulsarClient client) {
        return of(client, EndRetryPolicy.DEFAULT);
    }

    public static TransactionEnds of(PulsarClient client, EndRetryPolicy policy) {
        TransactionCoordinatorClient coordinators = publicCoordinatorClient(client);
        if (coordinators == null && client instanceof PulsarClientImpl impl) {
            coordinators = impl.getTcClient();
        }
        if (coordinators == null) {
            throw new IllegalArgumentException("The client has no transaction coordinator client: build it with"
                    + " enableTransaction(true)");
        }
        return new TransactionEnds(coordinators::commitAsync, coordinators::abortAsync, client::isClosed, policy);
    }

    /**
     * Pulsar 5.0's public {@code PulsarClient.getTransactionCoordinatorClient()}
     * (apache/pulsar 26646), found by name: this helper is built against the 4.0 client, which
     * has it only on its implementation class. Null where the client has no such method.
     */
    private static TransactionCoordinatorClient publicCoordinatorClient(PulsarClient client) {
        try {
            Object coordinators = PulsarClient.class.getMethod("getTransactionCoordinatorClient").invoke(client);
            return coordinators instanceof TransactionCoordinatorClient tc ? tc : null;
        } catch (NoSuchMethodException e) {
            return null;
        } catch (ReflectiveOperationException | RuntimeException e) {
            // A client built without transactions may refuse: as having none.
            return null;
        }
    }

    /** Commits the transaction, or learns what became of it. */
    public CompletableFuture<TransactionOutcome> commit(TxnID txnId) {
        return commitAndExplain(txnId).thenApply(EndResult::outcome);
    }

    /** Aborts the transaction, or learns what became of it. */
    public CompletableFuture<TransactionOutcome> abort(TxnID txnId) {
        return abortAndExplain(txnId).thenApply(EndResult::outcome);
    }

    /** As {@link #commit}, with why: aborted on its timeout, forgotten, never issued (see {@link EndResult.Reason}). */
    public CompletableFuture<EndResult> commitAndExplain(TxnID txnId) {
        return end(txnId, TransactionOutcome.COMMITTED, commit);
    }

    /** As {@link #abort}, with why (see {@link EndResult.Reason}). */
    public CompletableFuture<EndResult> abortAndExplain(TxnID txnId) {
        return end(txnId, TransactionOutcome.ABORTED, abort);
    }

    private CompletableFuture<EndResult> end(TxnID txnId, TransactionOutcome requested,
                                             Function<TxnID, CompletableFuture<Void>> request) {
        Objects.requireNonNull(txnId, "txnId");
        CompletableFuture<EndResult> result = new CompletableFuture<>();
        attempt(new Attempt(txnId, requested, request, result, System.nanoTime() + policy.giveUpAfter().toNanos()),
                null);
        return result;
    }

    /** One end request in progress: its deadline, and where its outcome goes. */
    private record Attempt(TxnID txnId, TransactionOutcome requested, Function<TxnID, CompletableFuture<Void>> request,
                           CompletableFuture<EndResult> result, long deadlineNanos) {
    }

    private void attempt(Attempt attempt, Duration previousBackoff) {
        CompletableFuture<Void> sent;
        try {
            sent = attempt.request().apply(attempt.txnId());
        } catch (RuntimeException e) {
            sent = CompletableFuture.failedFuture(e);
        }
        sent.orTimeout(policy.attemptTimeout().toNanos(), TimeUnit.NANOSECONDS)
                .whenComplete((ignored, error) -> answered(attempt, previousBackoff, error));
    }

    private void answered(Attempt attempt, Duration previousBackoff, Throwable error) {
        EndAnswers.Reading reading = EndAnswers.read(attempt.requested(), error);
        if (reading instanceof EndAnswers.Outcome outcome) {
            attempt.result().complete(outcome.result());
            return;
        }
        if (reading instanceof EndAnswers.Fail fail) {
            attempt.result().completeExceptionally(fail.error());
            return;
        }
        Throwable retryable = ((EndAnswers.Retry) reading).error();
        Duration backoff = policy.backoffAfter(previousBackoff);
        if (clientClosed.getAsBoolean() || System.nanoTime() + backoff.toNanos() > attempt.deadlineNanos()) {
            attempt.result().completeExceptionally(new EndNotAnsweredException(attempt.txnId(), attempt.requested(),
                    policy.giveUpAfter(), retryable));
            return;
        }
        Executor later = CompletableFuture.delayedExecutor(backoff.toNanos(), TimeUnit.NANOSECONDS);
        later.execute(() -> attempt(attempt, backoff));
    }
}
