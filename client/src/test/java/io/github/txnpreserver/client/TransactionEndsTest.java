package io.github.txnpreserver.client;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import java.time.Duration;
import java.util.ArrayDeque;
import java.util.Deque;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.function.Function;
import org.apache.pulsar.client.api.PulsarClientException;
import org.apache.pulsar.client.api.transaction.TransactionCoordinatorClientException;
import org.apache.pulsar.client.api.transaction.TxnID;
import org.junit.jupiter.api.Nested;
import org.junit.jupiter.api.Test;

class TransactionEndsTest {

    private static final TxnID TXN = new TxnID(1, 42);
    private static final EndRetryPolicy FAST = new EndRetryPolicy(Duration.ofMillis(1), Duration.ofMillis(4),
            Duration.ofSeconds(30), Duration.ofSeconds(30));

    @Nested
    class AnAnswerNamesTheOutcome {

        @Test
        void anEndThatSucceedsIsTheRequestedOutcome() throws Exception {
            assertThat(commitAnswering(null)).isEqualTo(TransactionOutcome.COMMITTED);
            assertThat(abortAnswering(null)).isEqualTo(TransactionOutcome.ABORTED);
        }

        @Test
        void aRefusalNamesTheStatusTheTransactionFinishedThrough() throws Exception {
            assertThat(commitAnswering(refusal("Expect Txn (1,42) to be in OPEN status but it is in ABORTING status")))
                    .isEqualTo(TransactionOutcome.ABORTED);
            assertThat(abortAnswering(refusal("Expect Txn (1,42) to be in OPEN status but it is in COMMITTING status")))
                    .isEqualTo(TransactionOutcome.COMMITTED);
            assertThat(abortAnswering(refusal("Expect Txn (1,42) to be in ABORTING status but it is in COMMITTED status")))
                    .isEqualTo(TransactionOutcome.COMMITTED);
            assertThat(commitAnswering(refusal("Expect Txn (1,42) to be in COMMITTING status but it is in ABORTED status")))
                    .isEqualTo(TransactionOutcome.ABORTED);
        }

        @Test
        void thePluginsRefusalOfAConflictingTerminalStepNamesTheOutcome() throws Exception {
            assertThat(commitAnswering(refusal("Transaction (1,42) was already aborted; it cannot become COMMITTED")))
                    .isEqualTo(TransactionOutcome.ABORTED);
            assertThat(abortAnswering(refusal("Transaction (1,42) was already committed; it cannot become ABORTED")))
                    .isEqualTo(TransactionOutcome.COMMITTED);
        }

        @Test
        void notFoundIsUnknown() throws Exception {
            assertThat(commitAnswering(new TransactionCoordinatorClientException.TransactionNotFoundException(
                    "The transaction with this txdID `(1,42)` not found"))).isEqualTo(TransactionOutcome.UNKNOWN);
            assertThat(abortAnswering(new TransactionCoordinatorClientException.TransactionNotFoundException(
                    "not found"))).isEqualTo(TransactionOutcome.UNKNOWN);
        }

        @Test
        void aCommitOfATimeoutAbortIsAbortedForTheTimeoutWithTheCoordinatorsWords() throws Exception {
            String said = "Transaction (1,42) was aborted on its timeout at 2026-12-05T15:30:00Z (its timeout of"
                    + " 60000 ms passed while it was open); it cannot be committed";

            assertThat(commitExplained(refusal(said)))
                    .isEqualTo(new EndResult(TransactionOutcome.ABORTED, EndResult.Reason.TIMEOUT, said));
        }

        @Test
        void aPlainAbortOrCommitIsEnded() throws Exception {
            String said = "Expect Txn (1,42) to be in COMMITTING status but it is in ABORTING status";

            assertThat(commitExplained(refusal(said)))
                    .isEqualTo(new EndResult(TransactionOutcome.ABORTED, EndResult.Reason.ENDED, said));
            assertThat(commitExplained(null))
                    .isEqualTo(new EndResult(TransactionOutcome.COMMITTED, EndResult.Reason.ENDED, null));
        }

        @Test
        void theThreeNotFoundsAreToldApart() throws Exception {
            String never = "Transaction (1,42) was never issued: coordinator 1 has issued sequences up to 41";
            String forgotten = "Transaction (1,42) is no longer kept: its outcome is forgotten (it ended before the"
                    + " window, kept outcomes reach back to 2026-12-02T15:30:00Z, or a limit dropped it)";
            String stock = "The transaction with this txdID `(1,42)` not found";

            assertThat(commitExplained(new TransactionCoordinatorClientException.TransactionNotFoundException(never)))
                    .isEqualTo(new EndResult(TransactionOutcome.UNKNOWN, EndResult.Reason.NEVER_ISSUED, never));
            assertThat(commitExplained(new TransactionCoordinatorClientException.TransactionNotFoundException(
                    forgotten))).isEqualTo(new EndResult(TransactionOutcome.UNKNOWN, EndResult.Reason.FORGOTTEN,
                    forgotten));
            assertThat(commitExplained(new TransactionCoordinatorClientException.TransactionNotFoundException(stock)))
                    .isEqualTo(new EndResult(TransactionOutcome.UNKNOWN, EndResult.Reason.NOT_FOUND, stock));
        }

        @Test
        void anAnswerWrappedByTheClientIsReadThroughItsCauses() throws Exception {
            Throwable wrapped = new java.util.concurrent.CompletionException(new TransactionCoordinatorClientException(
                    refusal("Expect Txn (1,42) to be in OPEN status but it is in COMMITTING status")));
            assertThat(abortAnswering(wrapped)).isEqualTo(TransactionOutcome.COMMITTED);
        }
    }

    @Nested
    class NoAnswerIsSentAgain {

        @Test
        void untilTheCoordinatorAnswers() throws Exception {
            Scripted coordinator = new Scripted(
                    new PulsarClientException.TimeoutException("End [COMMIT] TXN (1,42) failed due to timeout"),
                    new TransactionCoordinatorClientException.CoordinatorNotFoundException("coordinator not found"),
                    new TransactionCoordinatorClientException.MetaStoreHandlerNotReadyException("not ready"),
                    new TransactionCoordinatorClientException("Broker is not ready to serve"),
                    refusal("Expect Txn (1,42) to be in COMMITTING status but it is in OPEN status"),
                    null);
            TransactionEnds ends = new TransactionEnds(coordinator, coordinator, () -> false, FAST);

            assertThat(ends.commit(TXN).get(10, TimeUnit.SECONDS)).isEqualTo(TransactionOutcome.COMMITTED);
            assertThat(coordinator.calls.get()).isEqualTo(6);
        }

        @Test
        void untilThePolicyGivesUp() {
            Scripted coordinator = Scripted.failingForever(new PulsarClientException.TimeoutException("timeout"));
            TransactionEnds ends = new TransactionEnds(coordinator, coordinator, () -> false,
                    new EndRetryPolicy(Duration.ofMillis(1), Duration.ofMillis(2), Duration.ofMillis(50),
                            Duration.ofSeconds(30)));

            assertThatThrownBy(() -> ends.abort(TXN).get(10, TimeUnit.SECONDS))
                    .isInstanceOf(ExecutionException.class)
                    .cause().isInstanceOf(EndNotAnsweredException.class)
                    .hasMessageContaining("Abort of (1,42) not answered within PT0.05S")
                    .hasCauseInstanceOf(PulsarClientException.TimeoutException.class);
            assertThat(coordinator.calls.get()).isGreaterThan(1);
        }

        @Test
        void anAttemptThatIsNeverAnsweredCountsAsUnanswered() throws Exception {
            // The client does not complete a request in flight when it closes.
            AtomicInteger calls = new AtomicInteger();
            Function<TxnID, CompletableFuture<Void>> coordinator = txnId -> calls.incrementAndGet() == 1
                    ? new CompletableFuture<>() : CompletableFuture.completedFuture(null);
            TransactionEnds ends = new TransactionEnds(coordinator, coordinator, () -> false,
                    new EndRetryPolicy(Duration.ofMillis(1), Duration.ofMillis(4), Duration.ofSeconds(30),
                            Duration.ofMillis(20)));

            assertThat(ends.commit(TXN).get(10, TimeUnit.SECONDS)).isEqualTo(TransactionOutcome.COMMITTED);
            assertThat(calls.get()).isEqualTo(2);
        }

        @Test
        void notOnceTheClientIsClosed() {
            Scripted coordinator = Scripted.failingForever(new PulsarClientException.TimeoutException("timeout"));
            AtomicBoolean closed = new AtomicBoolean(true);
            TransactionEnds ends = new TransactionEnds(coordinator, coordinator, closed::get, FAST);

            assertThatThrownBy(() -> ends.commit(TXN).get(10, TimeUnit.SECONDS))
                    .cause().isInstanceOf(EndNotAnsweredException.class);
            assertThat(coordinator.calls.get()).isEqualTo(1);
        }

        @Test
        void butAnErrorThatSendingAgainCannotChangeFailsAtOnce() {
            for (Throwable permanent : new Throwable[] {
                    new PulsarClientException.AuthenticationException("bad token"),
                    new PulsarClientException.AuthorizationException("not allowed"),
                    new PulsarClientException.NotAllowedException("not allowed"),
                    new PulsarClientException.AlreadyClosedException("closed"),
                    new TransactionCoordinatorClientException.MetaStoreHandlerNotExistsException(7L),
                    new TransactionCoordinatorClientException.TransactionNotFoundException("The role alice is neither"
                            + " the owner of the transaction (1,42) nor a super user"),
                    refusal("Expect Txn (1,42) to be in OPEN status but it is in UNKNOWN status")}) {
                Scripted coordinator = Scripted.failingForever(permanent);
                TransactionEnds ends = new TransactionEnds(coordinator, coordinator, () -> false, FAST);

                assertThatThrownBy(() -> ends.commit(TXN).get(10, TimeUnit.SECONDS)).cause().isSameAs(permanent);
                assertThat(coordinator.calls.get()).as("attempts for %s", permanent).isEqualTo(1);
            }
        }
    }

    @Test
    void aClientWithoutTransactionsIsRefusedWhenTheHelperIsMade() throws Exception {
        try (org.apache.pulsar.client.api.PulsarClient client = org.apache.pulsar.client.api.PulsarClient.builder()
                .serviceUrl("pulsar://127.0.0.1:1").build()) {
            assertThatThrownBy(() -> TransactionEnds.of(client)).isInstanceOf(IllegalArgumentException.class)
                    .hasMessageContaining("enableTransaction(true)");
        }
    }

    @Test
    void aPolicyWithoutABackoffIsRefused() {
        Duration second = Duration.ofSeconds(1);
        assertThatThrownBy(() -> new EndRetryPolicy(Duration.ZERO, second, second, second))
                .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("firstBackoff");
        assertThatThrownBy(() -> new EndRetryPolicy(Duration.ofSeconds(2), second, second, second))
                .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("maxBackoff");
        assertThatThrownBy(() -> new EndRetryPolicy(second, second, second, Duration.ZERO))
                .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("attemptTimeout");
    }

    private static TransactionOutcome commitAnswering(Throwable answer) throws Exception {
        Scripted coordinator = new Scripted(answer);
        return new TransactionEnds(coordinator, Scripted.unused(), () -> false, FAST).commit(TXN)
                .get(10, TimeUnit.SECONDS);
    }

    private static EndResult commitExplained(Throwable answer) throws Exception {
        Scripted coordinator = new Scripted(answer);
        return new TransactionEnds(coordinator, Scripted.unused(), () -> false, FAST).commitAndExplain(TXN)
                .get(10, TimeUnit.SECONDS);
    }

    private static TransactionOutcome abortAnswering(Throwable answer) throws Exception {
        Scripted coordinator = new Scripted(answer);
        return new TransactionEnds(Scripted.unused(), coordinator, () -> false, FAST).abort(TXN)
                .get(10, TimeUnit.SECONDS);
    }

    private static TransactionCoordinatorClientException.InvalidTxnStatusException refusal(String message) {
        return new TransactionCoordinatorClientException.InvalidTxnStatusException(message);
    }

    /** A coordinator that answers each request with the next scripted answer (null: success). */
    private static final class Scripted implements Function<TxnID, CompletableFuture<Void>> {
        final Deque<Throwable> answers = new ArrayDeque<>();
        final AtomicInteger calls = new AtomicInteger();
        Throwable forever;

        Scripted(Throwable... answers) {
            for (Throwable answer : answers) {
                this.answers.add(answer == null ? new Success() : answer);
            }
        }

        static Scripted failingForever(Throwable error) {
            Scripted scripted = new Scripted();
            scripted.forever = error;
            return scripted;
        }

        static Scripted unused() {
            return failingForever(new AssertionError("the other end was requested"));
        }

        @Override
        public CompletableFuture<Void> apply(TxnID txnId) {
            calls.incrementAndGet();
            Throwable answer = forever != null ? forever : answers.poll();
            if (answer == null) {
                throw new AssertionError("more requests than scripted answers");
            }
            return answer instanceof Success ? CompletableFuture.completedFuture(null)
                    : CompletableFuture.failedFuture(answer);
        }

        private static final class Success extends Throwable {
        }
    }
}
