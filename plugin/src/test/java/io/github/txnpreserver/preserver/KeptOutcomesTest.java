package io.github.txnpreserver.preserver;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
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

    /** A transaction's end as the preserver drives it: its record takes a slot, then it is decided. */
    private static List<KeptOutcomes.SlotMark> end(KeptOutcomes kept, long sequence, String owner, long endTime) {
        List<KeptOutcomes.SlotMark> vacated = new ArrayList<>();
        KeptOutcomes.Reservation slot = kept.reserve(owner);
        assertThat(kept.admit(txn(sequence), Outcome.COMMITTED, endTime, slot, vacated)).isTrue();
        return vacated;
    }

    private static List<Integer> slots(List<KeptOutcomes.SlotMark> vacated) {
        return vacated.stream().map(KeptOutcomes.SlotMark::slot).toList();
    }

    @Nested
    @DisplayName("per client")
    class PerClient {

        private final KeptOutcomes kept = new KeptOutcomes(TC, 2, 100, TTL);

        @Test
        void aClientsRecordsGoRoundItsSlots() {
            assertThat(List.of(kept.reserve("alice").slot(), kept.reserve("alice").slot(),
                    kept.reserve("alice").slot(), kept.reserve("bob").slot())).containsExactly(0, 1, 0, 0);
        }

        @Test
        void keepsTheNewestOutcomesOfEachClientAndEvictsItsOldest() {
            end(kept, 1, "alice", 0);
            end(kept, 2, "alice", 1);
            end(kept, 3, "bob", 2);

            assertThat(end(kept, 4, "alice", 3)).as("no tombstone: the record overwrote the slot").isEmpty();

            assertThat(kept.get(txn(1))).isNull();
            assertThat(kept.get(txn(2))).isNotNull();
            assertThat(kept.get(txn(3)).owner()).isEqualTo("bob");
            assertThat(kept.get(txn(4)).owner()).isEqualTo("alice");
            assertThat(kept.size()).isEqualTo(3);
            assertThat(kept.perClientEvictions()).isEqualTo(1);
        }

        @Test
        void theOldestOutcomeGoesWhenTheNewRecordIsWrittenNotWhenItIsDecided() {
            end(kept, 1, "alice", 0);
            end(kept, 2, "alice", 1);

            kept.reserve("alice");

            assertThat(kept.get(txn(1))).as("its key is being overwritten").isNull();
            assertThat(kept.get(txn(2))).isNotNull();
        }

        @Test
        void anOutcomeWhoseSlotALaterRecordTookBeforeItWasDecidedIsNotKept() {
            KeptOutcomes oneSlot = new KeptOutcomes(TC, 1, 100, TTL);
            KeptOutcomes.Reservation first = oneSlot.reserve("alice");
            KeptOutcomes.Reservation second = oneSlot.reserve("alice");

            assertThat(oneSlot.admit(txn(1), Outcome.COMMITTED, 0, first, new ArrayList<>())).isFalse();
            assertThat(oneSlot.admit(txn(2), Outcome.ABORTED, 0, second, new ArrayList<>())).isTrue();
            assertThat(oneSlot.get(txn(1))).isNull();
            assertThat(oneSlot.get(txn(2)).outcome()).isEqualTo(Outcome.ABORTED);
        }

        @Test
        void transactionsWithoutOwnerShareOneClientsSlots() {
            end(kept, 1, null, 0);
            end(kept, 2, null, 1);
            end(kept, 3, null, 2);

            assertThat(kept.get(txn(1))).isNull();
            assertThat(kept.get(txn(3)).owner()).isNull();
            assertThat(kept.clients()).isEqualTo(1);
        }

        @Test
        void aTransactionKeptInAnotherSlotMovesToItsNewestAndEmptiesTheEarlier() {
            end(kept, 1, "alice", 0);
            List<KeptOutcomes.SlotMark> vacated = new ArrayList<>();

            assertThat(kept.admit(txn(1), Outcome.ABORTED, 5, kept.reserve("alice"), vacated)).isTrue();

            assertThat(slots(vacated)).containsExactly(0);
            assertThat(kept.size()).isEqualTo(1);
            assertThat(kept.get(txn(1)).outcome()).isEqualTo(Outcome.ABORTED);
        }

        @Test
        void aReservationStaysCurrentUntilTheClientsRecordsComeRoundToItsSlot() {
            KeptOutcomes.Reservation first = kept.reserve("alice");
            kept.reserve("alice");
            assertThat(kept.isCurrent(first)).isTrue();

            kept.reserve("alice");

            assertThat(kept.isCurrent(first)).isFalse();
        }

        @Test
        void aReservationOutlivesItsClientBeingForgottenUntilTheNewRoundReachesItsSlot() {
            end(kept, 1, "alice", 0);
            KeptOutcomes.Reservation second = kept.reserve("alice");
            kept.expire(TTL);
            assertThat(kept.clients()).as("alice's only outcome expired").isZero();

            assertThat(kept.admit(txn(2), Outcome.COMMITTED, TTL, second, new ArrayList<>())).isTrue();
            assertThat(kept.reserve("alice").slot()).isZero();
            assertThat(kept.get(txn(2))).isNotNull();
            assertThat(kept.reserve("alice").slot()).isEqualTo(1);
            assertThat(kept.get(txn(2))).as("its slot taken by the new round").isNull();
        }

        @Test
        void aClientWhoseOutcomesAreAllGoneIsForgottenAndStartsAgainAtSlotZero() {
            end(kept, 1, "alice", 0);
            kept.expire(TTL);

            assertThat(kept.clients()).isZero();
            assertThat(kept.reserve("alice").slot()).isZero();
        }
    }

    @Nested
    @DisplayName("per coordinator")
    class PerCoordinator {

        private final KeptOutcomes kept = new KeptOutcomes(TC, 10, 3, TTL);

        @Test
        void evictsTheGloballyOldestOutcomeWhateverItsClientAndEmptiesItsSlot() {
            end(kept, 1, "alice", 0);
            end(kept, 2, "bob", 1);
            end(kept, 3, "alice", 2);

            List<KeptOutcomes.SlotMark> first = end(kept, 4, "carol", 3);
            List<KeptOutcomes.SlotMark> second = end(kept, 5, "dave", 4);

            assertThat(first).extracting(KeptOutcomes.SlotMark::owner, KeptOutcomes.SlotMark::slot)
                    .containsExactly(org.assertj.core.groups.Tuple.tuple("alice", 0));
            assertThat(second).extracting(KeptOutcomes.SlotMark::owner).containsExactly("bob");
            assertThat(kept.size()).isEqualTo(3);
            assertThat(kept.get(txn(3))).isNotNull();
            assertThat(kept.coordinatorEvictions()).isEqualTo(2);
            assertThat(kept.clients()).isEqualTo(3);
        }

        @Test
        void staysBoundedHoweverManyDistinctClientsEndTransactions() {
            for (long i = 0; i < 10_000; i++) {
                end(kept, i, "client-" + i, i);
            }

            assertThat(kept.size()).isEqualTo(3);
            assertThat(kept.clients()).isEqualTo(3);
        }

        @Test
        void aClientHasNoMoreSlotsThanTheCoordinatorKeepsOutcomes() {
            KeptOutcomes manySlots = new KeptOutcomes(TC, 1_000_000, 3, TTL);

            assertThat(List.of(manySlots.reserve("alice").slot(), manySlots.reserve("alice").slot(),
                    manySlots.reserve("alice").slot(), manySlots.reserve("alice").slot())).containsExactly(0, 1, 2, 0);
        }

        @Test
        void refusesTransactionsOfAnotherCoordinator() {
            assertThatThrownBy(() -> kept.admit(new TxnID(TC + 1, 1), Outcome.COMMITTED, 0, kept.reserve("alice"),
                    new ArrayList<>())).isInstanceOf(IllegalArgumentException.class);
            assertThat(kept.get(new TxnID(TC + 1, 1))).isNull();
        }
    }

    @Nested
    @DisplayName("by age")
    class ByAge {

        private final KeptOutcomes kept = new KeptOutcomes(TC, 10, 100, TTL);

        @Test
        void expiresExactlyTheOutcomesOlderThanTheTimeToLive() {
            end(kept, 1, "alice", 0);
            end(kept, 2, "bob", 10);
            end(kept, 3, "alice", 20);

            assertThat(slots(kept.expire(TTL + 9))).containsExactly(0);
            assertThat(kept.expire(TTL + 10)).extracting(KeptOutcomes.SlotMark::owner).containsExactly("bob");
            assertThat(kept.get(txn(3))).isNotNull();
            assertThat(kept.expirations()).isEqualTo(2);
        }

        @Test
        void nothingExpiresBeforeItsTime() {
            end(kept, 1, "alice", 0);

            assertThat(kept.expire(TTL - 1)).isEmpty();
            assertThat(kept.size()).isEqualTo(1);
        }
    }

    @Nested
    @DisplayName("vacated slots")
    class VacatedSlots {

        private final KeptOutcomes kept = new KeptOutcomes(TC, 3, 3, TTL);

        @Test
        void areTakenAgainOnlyWhenTheClientsRecordsComeRoundToThem() {
            end(kept, 1, "alice", 0);
            end(kept, 2, "alice", 1);
            end(kept, 3, "bob", 2);
            KeptOutcomes.SlotMark aliceSlot0 = end(kept, 4, "carol", 3).get(0);

            assertThat(kept.isTakenSince(aliceSlot0)).isFalse();
            assertThat(kept.reserve("alice").slot()).isEqualTo(2);
            assertThat(kept.isTakenSince(aliceSlot0)).isFalse();
            assertThat(kept.reserve("alice").slot()).isZero();
            assertThat(kept.isTakenSince(aliceSlot0)).isTrue();
        }

        @Test
        void ofAForgottenClientAreTakenAgainAsItStartsOver() {
            end(kept, 1, "alice", 0);
            end(kept, 2, "alice", 1);
            List<KeptOutcomes.SlotMark> vacated = kept.expire(TTL + 1);

            kept.reserve("alice");

            assertThat(vacated).extracting(kept::isTakenSince).containsExactly(true, false);
        }
    }

    @Nested
    @DisplayName("restore")
    class Restore {

        private final KeptOutcomes kept = new KeptOutcomes(TC, 3, 100, TTL);

        @Test
        void keepsRestoredOutcomesInTheirSlotsAndContinuesAfterTheNewest() {
            kept.restore(txn(1), Outcome.COMMITTED, "alice", 0, 1, new ArrayList<>());
            kept.restore(txn(2), Outcome.ABORTED, "alice", 0, 2, new ArrayList<>());

            assertThat(kept.reserve("alice").slot()).isZero();
            assertThat(kept.get(txn(1))).isNotNull();
            assertThat(kept.reserve("alice").slot()).isEqualTo(1);
            assertThat(kept.get(txn(1))).isNull();
            assertThat(kept.get(txn(2)).outcome()).isEqualTo(Outcome.ABORTED);
        }

        @Test
        void aTransactionFoundInTwoSlotsKeepsTheLaterAndVacatesTheEarlier() {
            List<KeptOutcomes.SlotMark> vacated = new ArrayList<>();
            kept.restore(txn(1), Outcome.ABORTED, "alice", 0, 0, vacated);
            kept.restore(txn(1), Outcome.COMMITTED, "alice", 0, 1, vacated);

            assertThat(slots(vacated)).containsExactly(0);
            assertThat(kept.get(txn(1)).outcome()).isEqualTo(Outcome.COMMITTED);
            assertThat(kept.size()).isEqualTo(1);
        }

        @Test
        void refusesASlotOutsideTheClientsCount() {
            assertThatThrownBy(() -> kept.restore(txn(1), Outcome.ABORTED, "alice", 0, 3, new ArrayList<>()))
                    .isInstanceOf(IllegalArgumentException.class);
        }
    }
}
