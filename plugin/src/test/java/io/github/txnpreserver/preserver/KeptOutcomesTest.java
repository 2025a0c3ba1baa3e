package io.github.txnpreserver.preserver;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import java.time.Duration;
import org.apache.pulsar.client.api.transaction.TxnID;
import org.junit.jupiter.api.DisplayName;
import org.junit.jupiter.api.Nested;
import org.junit.jupiter.api.Test;

@DisplayName("Kept outcomes")
class KeptOutcomesTest {

    private static final long TC = 3;
    private static final long TTL = Duration.ofHours(1).toMillis();

    private static TxnID txn(long sequence) {
        return new TxnID(TC, sequence);
    }

    @Nested
    @DisplayName("per client")
    class PerClient {

        private final KeptOutcomes kept = new KeptOutcomes(TC, 2, 100, TTL);

        @Test
        void keepsTheNewestOutcomesOfEachClientAndEvictsItsOldest() {
            kept.admit(txn(1), Outcome.COMMITTED, "alice", 0);
            kept.admit(txn(2), Outcome.ABORTED, "alice", 1);
            kept.admit(txn(3), Outcome.COMMITTED, "bob", 2);

            assertThat(kept.admit(txn(4), Outcome.COMMITTED, "alice", 3)).containsExactly(1L);

            assertThat(kept.get(txn(1))).isNull();
            assertThat(kept.get(txn(2)).outcome()).isEqualTo(Outcome.ABORTED);
            assertThat(kept.get(txn(3)).owner()).isEqualTo("bob");
            assertThat(kept.get(txn(4)).owner()).isEqualTo("alice");
            assertThat(kept.size()).isEqualTo(3);
            assertThat(kept.perClientEvictions()).isEqualTo(1);
        }

        @Test
        void transactionsWithoutOwnerShareOneBucket() {
            kept.admit(txn(1), Outcome.COMMITTED, null, 0);
            kept.admit(txn(2), Outcome.COMMITTED, null, 1);

            assertThat(kept.admit(txn(3), Outcome.COMMITTED, null, 2)).containsExactly(1L);
            assertThat(kept.get(txn(3)).owner()).isNull();
            assertThat(kept.clients()).isEqualTo(1);
        }

        @Test
        void admittingAKeptTransactionAgainChangesNothing() {
            kept.admit(txn(1), Outcome.COMMITTED, "alice", 0);
            kept.admit(txn(2), Outcome.COMMITTED, "alice", 1);

            assertThat(kept.admit(txn(1), Outcome.COMMITTED, "alice", 5)).isEmpty();
            assertThat(kept.size()).isEqualTo(2);
            assertThat(kept.get(txn(1)).endTimeMillis()).isZero();
        }

        @Test
        void aClientWhoseOutcomesAreAllGoneIsForgotten() {
            kept.admit(txn(1), Outcome.COMMITTED, "alice", 0);
            kept.expire(TTL);

            assertThat(kept.clients()).isZero();
        }
    }

    @Nested
    @DisplayName("per coordinator")
    class PerCoordinator {

        private final KeptOutcomes kept = new KeptOutcomes(TC, 10, 3, TTL);

        @Test
        void evictsTheGloballyOldestOutcomeWhateverItsClient() {
            kept.admit(txn(1), Outcome.COMMITTED, "alice", 0);
            kept.admit(txn(2), Outcome.COMMITTED, "bob", 1);
            kept.admit(txn(3), Outcome.COMMITTED, "alice", 2);

            assertThat(kept.admit(txn(4), Outcome.COMMITTED, "carol", 3)).containsExactly(1L);
            assertThat(kept.admit(txn(5), Outcome.COMMITTED, "dave", 4)).containsExactly(2L);

            assertThat(kept.size()).isEqualTo(3);
            assertThat(kept.get(txn(3))).isNotNull();
            assertThat(kept.coordinatorEvictions()).isEqualTo(2);
            assertThat(kept.clients()).isEqualTo(3);
        }

        @Test
        void staysBoundedHoweverManyDistinctClientsEndTransactions() {
            for (long i = 0; i < 10_000; i++) {
                kept.admit(txn(i), Outcome.COMMITTED, "client-" + i, i);
            }

            assertThat(kept.size()).isEqualTo(3);
            assertThat(kept.clients()).isEqualTo(3);
        }

        @Test
        void refusesTransactionsOfAnotherCoordinator() {
            assertThatThrownBy(() -> kept.admit(new TxnID(TC + 1, 1), Outcome.COMMITTED, "alice", 0))
                    .isInstanceOf(IllegalArgumentException.class);
            assertThat(kept.get(new TxnID(TC + 1, 1))).isNull();
        }
    }

    @Nested
    @DisplayName("by age")
    class ByAge {

        private final KeptOutcomes kept = new KeptOutcomes(TC, 10, 100, TTL);

        @Test
        void expiresExactlyTheOutcomesOlderThanTheTimeToLive() {
            kept.admit(txn(1), Outcome.COMMITTED, "alice", 0);
            kept.admit(txn(2), Outcome.ABORTED, "bob", 10);
            kept.admit(txn(3), Outcome.COMMITTED, "alice", 20);

            assertThat(kept.expire(TTL + 9)).containsExactly(1L);
            assertThat(kept.expire(TTL + 10)).containsExactly(2L);
            assertThat(kept.get(txn(3))).isNotNull();
            assertThat(kept.expirations()).isEqualTo(2);
        }

        @Test
        void nothingExpiresBeforeItsTime() {
            kept.admit(txn(1), Outcome.COMMITTED, "alice", 0);

            assertThat(kept.expire(TTL - 1)).isEmpty();
            assertThat(kept.size()).isEqualTo(1);
        }
    }
}
