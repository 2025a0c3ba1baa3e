package io.github.txnpreserver.preserver.kept;

import static org.assertj.core.api.Assertions.assertThat;

import org.apache.pulsar.client.api.transaction.TxnID;
import org.junit.jupiter.api.DisplayName;
import org.junit.jupiter.api.Test;

/** The outcomes lookups found last: bounded in number and age, and forgotten when their transaction is decided again. */
@DisplayName("Recent answers")
class RecentAnswersTest {

    private static final long NOW = 1_000_000_000_000L;
    private final RecentAnswers answers = new RecentAnswers();

    private static KeptOutcome kept(long sequence) {
        return new KeptOutcome(new TxnID(0, sequence), Outcome.COMMITTED, "alice", 1_700_000_000_000L);
    }

    private void found(long sequence, long atNanos) {
        answers.found(sequence, answers.startLookUp(sequence), kept(sequence), atNanos);
    }

    @Test
    void anAnswerIsGivenAgainUpToItsMaximumAgeAndNotAfter() {
        found(7, NOW);

        assertThat(answers.get(7, NOW)).isEqualTo(kept(7));
        assertThat(answers.get(7, NOW + RecentAnswers.MAX_AGE_NANOS)).isEqualTo(kept(7));
        assertThat(answers.get(7, NOW + RecentAnswers.MAX_AGE_NANOS + 1)).isNull();
        assertThat(answers.get(8, NOW)).as("never found").isNull();
    }

    @Test
    void holdsTheNewestAnswersUpToItsCapacity() {
        for (long sequence = 0; sequence <= RecentAnswers.CAPACITY; sequence++) {
            found(sequence, NOW);
        }

        assertThat(answers.get(0, NOW)).as("the oldest, one past the capacity").isNull();
        assertThat(answers.get(1, NOW)).isEqualTo(kept(1));
        assertThat(answers.get(RecentAnswers.CAPACITY, NOW)).isEqualTo(kept(RecentAnswers.CAPACITY));
    }

    @Test
    void anAnswerFoundBeforeItsTransactionWasForgottenIsNotKept() {
        long started = answers.startLookUp(7);
        answers.forget(7);

        answers.found(7, started, kept(7), NOW);

        assertThat(answers.get(7, NOW)).isNull();
    }

    @Test
    void forgettingOneTransactionCostsAnotherStripesLookupNothing() {
        long started = answers.startLookUp(8);
        answers.forget(7);

        answers.found(8, started, kept(8), NOW);

        assertThat(answers.get(8, NOW)).isEqualTo(kept(8));
    }

    @Test
    void forgettingATransactionDropsItsAnswer() {
        found(7, NOW);

        answers.forget(7);

        assertThat(answers.get(7, NOW)).isNull();
    }

    @Test
    void clearedWhenItsCoordinatorClosesHere() {
        found(7, NOW);
        found(8, NOW);

        answers.clear();

        assertThat(answers.get(7, NOW)).isNull();
        assertThat(answers.get(8, NOW)).isNull();
    }
}
