package io.github.txnpreserver.store;

import static io.github.txnpreserver.testing.Futures.await;
import static io.github.txnpreserver.testing.Futures.failureOf;
import static org.assertj.core.api.Assertions.assertThat;

import io.github.txnpreserver.resolution.Resolution;
import io.github.txnpreserver.testing.CoordinatorHarness;
import java.time.Duration;
import org.apache.pulsar.client.api.transaction.TxnID;
import org.apache.pulsar.transaction.coordinator.exceptions.CoordinatorException.InvalidTxnStatusException;
import org.apache.pulsar.transaction.coordinator.exceptions.CoordinatorException.TransactionNotFoundException;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.DisplayName;
import org.junit.jupiter.api.Nested;
import org.junit.jupiter.api.Test;

/**
 * The semantics table of BRIEF §1, row by row, through the broker's own end-transaction
 * chain: what a retried commit or abort answers once the transaction has ended.
 */
@DisplayName("A retried end of an ended transaction")
class RetrySemanticsTest {

    private static final String ALICE = "alice";
    private static final String PARTITION = "persistent://public/default/orders-partition-0";

    private final CoordinatorHarness coordinator = CoordinatorHarness.start(10, 1000);

    @AfterEach
    void close() {
        coordinator.close();
    }

    private TxnID endedTransaction(boolean commit) {
        TxnID txn = coordinator.open(ALICE);
        coordinator.produce(txn, PARTITION);
        await(commit ? coordinator.commit(txn, ALICE) : coordinator.abort(txn, ALICE));
        assertThat(coordinator.resolution(txn)).isEqualTo(Resolution.KEPT);
        return txn;
    }

    @Nested
    @DisplayName("when the transaction committed")
    class Committed {

        @Test
        void commitSucceedsAgainWithoutSendingAnotherMarker() {
            TxnID txn = endedTransaction(true);

            await(coordinator.commit(txn, ALICE));
            await(coordinator.commit(txn, ALICE));

            assertThat(coordinator.markerCount("COMMIT", PARTITION, txn)).isEqualTo(1);
            assertThat(coordinator.markerCount("ABORT", PARTITION, txn)).isZero();
        }

        @Test
        void abortIsRefusedAsInvalidStatusNamingTheCommit() {
            TxnID txn = endedTransaction(true);

            Throwable refusal = failureOf(coordinator.abort(txn, ALICE));

            assertThat(refusal).isInstanceOf(InvalidTxnStatusException.class)
                    .hasMessageContaining("COMMITTING");
            assertThat(coordinator.markerCount("ABORT", PARTITION, txn)).isZero();
            await(coordinator.commit(txn, ALICE));
        }
    }

    @Nested
    @DisplayName("when the transaction aborted")
    class Aborted {

        @Test
        void abortSucceedsAgainWithoutSendingAnotherMarker() {
            TxnID txn = endedTransaction(false);

            await(coordinator.abort(txn, ALICE));

            assertThat(coordinator.markerCount("ABORT", PARTITION, txn)).isEqualTo(1);
        }

        @Test
        void commitIsRefusedAsInvalidStatusNamingTheAbort() {
            TxnID txn = endedTransaction(false);

            Throwable refusal = failureOf(coordinator.commit(txn, ALICE));

            assertThat(refusal).isInstanceOf(InvalidTxnStatusException.class)
                    .hasMessageContaining("ABORTING");
            assertThat(coordinator.markerCount("COMMIT", PARTITION, txn)).isZero();
        }

        @Test
        void byTheCoordinatorsTimeoutAnswersAsAborted() {
            TxnID txn = coordinator.open(ALICE);
            coordinator.produce(txn, PARTITION);
            await(coordinator.timeoutAbort(txn));

            assertThat(failureOf(coordinator.commit(txn, ALICE))).isInstanceOf(InvalidTxnStatusException.class)
                    .hasMessageContaining("was aborted on its timeout at ").hasMessageContaining("60000 ms");
            await(coordinator.abort(txn, ALICE));
            assertThat(coordinator.markerCount("COMMIT", PARTITION, txn)).isZero();
            assertThat(coordinator.markerCount("ABORT", PARTITION, txn)).isEqualTo(1);
        }
    }

    @Nested
    @DisplayName("when the transaction is unknown or no longer kept")
    class NotKept {

        @Test
        void unknownTransactionIsNotFoundAsStock() {
            TxnID unknown = new TxnID(CoordinatorHarness.TC_ID, 4242);

            assertThat(failureOf(coordinator.commit(unknown, ALICE))).isInstanceOf(TransactionNotFoundException.class);
            assertThat(failureOf(coordinator.abort(unknown, ALICE))).isInstanceOf(TransactionNotFoundException.class);
        }

        @Test
        void expiredOutcomeIsNotFoundAsStock() {
            TxnID txn = endedTransaction(true);

            coordinator.clock().advance(Duration.ofHours(72));
            coordinator.preserver().expire();
        coordinator.settle();

            assertThat(failureOf(coordinator.commit(txn, ALICE))).isInstanceOf(TransactionNotFoundException.class);
            assertThat(failureOf(coordinator.abort(txn, ALICE))).isInstanceOf(TransactionNotFoundException.class);
        }
    }

    @Nested
    @DisplayName("ownership")
    class Ownership {

        @Test
        void anotherRoleCanNeitherEndNorLearnTheOutcome() {
            TxnID txn = endedTransaction(true);

            assertThat(await(coordinator.isOwner(txn, "mallory"))).isFalse();
            assertThat(failureOf(coordinator.commit(txn, "mallory"))).isInstanceOf(TransactionNotFoundException.class)
                    .hasMessageNotContaining("COMMIT");
            assertThat(failureOf(coordinator.abort(txn, "mallory"))).isInstanceOf(TransactionNotFoundException.class);
            assertThat(await(coordinator.isOwner(txn, ALICE))).isTrue();
        }

        @Test
        void transactionWithoutOwnerIsAnswerableByAnyClientAsStock() {
            TxnID txn = coordinator.open(null);
            await(coordinator.commit(txn, null));

            await(coordinator.commit(txn, "anyone"));
        }
    }

    @Nested
    @DisplayName("retention")
    class Retention {

        @Test
        void anOutcomeIsKeptForItsTimeHoweverManyTransactionsItsClientEndedSince() {
            TxnID first = endedTransaction(true);
            for (int i = 0; i < 25; i++) {
                endedTransaction(i % 2 == 0);
            }

            await(coordinator.commit(first, ALICE));
            assertThat(failureOf(coordinator.abort(first, ALICE))).isInstanceOf(InvalidTxnStatusException.class);
        }

        @Test
        void anOutcomeIsAnsweredUntilItsTimeToLiveAndNotFoundAfter() {
            TxnID txn = endedTransaction(false);

            coordinator.clock().advance(Duration.ofHours(72).minusSeconds(1));
            coordinator.preserver().expire();
        coordinator.settle();
            await(coordinator.abort(txn, ALICE));

            coordinator.clock().advance(Duration.ofSeconds(1));
            coordinator.preserver().expire();
        coordinator.settle();
            assertThat(failureOf(coordinator.abort(txn, ALICE))).isInstanceOf(TransactionNotFoundException.class);
        }
    }

    @Test
    @DisplayName("is answered the same after a coordinator restart")
    void outcomesSurviveARestart() {
        TxnID committed = endedTransaction(true);
        TxnID aborted = endedTransaction(false);

        coordinator.restart();

        await(coordinator.commit(committed, ALICE));
        assertThat(failureOf(coordinator.abort(committed, ALICE))).isInstanceOf(InvalidTxnStatusException.class);
        await(coordinator.abort(aborted, ALICE));
        assertThat(failureOf(coordinator.commit(aborted, ALICE))).isInstanceOf(InvalidTxnStatusException.class);
        assertThat(coordinator.markerCount("COMMIT", PARTITION, committed)).isEqualTo(1);
        assertThat(coordinator.markerCount("ABORT", PARTITION, aborted)).isEqualTo(1);
    }
}
