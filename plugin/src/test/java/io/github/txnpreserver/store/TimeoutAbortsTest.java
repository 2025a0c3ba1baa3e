package io.github.txnpreserver.store;

import static org.assertj.core.api.Assertions.assertThat;

import org.junit.jupiter.api.DisplayName;
import org.junit.jupiter.api.Test;

/** What a coordinator remembers of the aborts its timeout began. */
@DisplayName("Timeout-aborts remembered")
class TimeoutAbortsTest {

    /** TimeoutAborts.REMEMBERED: ended timeout-aborts whose timeout a warning can name, and commits warned about. */
    private static final int REMEMBERED = 4096;

    private final TimeoutAborts aborts = new TimeoutAborts();

    @Test
    void aCommitOfATransactionIsWarnedAboutOnceOnly() {
        assertThat(aborts.firstWarning(7)).isTrue();
        assertThat(aborts.firstWarning(7)).isFalse();
        assertThat(aborts.firstWarning(8)).as("another transaction").isTrue();
    }

    @Test
    void theTimeoutsOfTheNewestEndedTimeoutAbortsAreRememberedUpToTheBound() {
        for (long sequence = 0; sequence <= REMEMBERED; sequence++) {
            aborts.endedOnTimeout(sequence, 1_000 + sequence);
        }

        assertThat(aborts.timeoutOf(0)).as("the oldest, one past the bound").isZero();
        assertThat(aborts.timeoutOf(1)).isEqualTo(1_001);
        assertThat(aborts.timeoutOf(REMEMBERED)).isEqualTo(1_000 + REMEMBERED);
    }

    @Test
    void anEndedTimeoutAbortWhoseTimeoutIsNotKnownTakesNoPlaceAmongThoseRemembered() {
        for (long sequence = 0; sequence < REMEMBERED; sequence++) {
            aborts.endedOnTimeout(sequence, 1_000);
        }

        aborts.endedOnTimeout(REMEMBERED, 0);

        assertThat(aborts.timeoutOf(REMEMBERED)).isZero();
        assertThat(aborts.timeoutOf(0)).as("still remembered").isEqualTo(1_000);
    }

    @Test
    void anAbortIsPastItsTimeoutFromTheTimeoutOnAndOnlyWithAnOpenTimeAndATimeoutKnown() {
        assertThat(TimeoutAborts.pastTimeout(1_000, 500, 1_500)).as("exactly at the timeout").isTrue();
        assertThat(TimeoutAborts.pastTimeout(1_000, 500, 1_499)).isFalse();
        assertThat(TimeoutAborts.pastTimeout(0, 500, 10_000)).as("no open time").isFalse();
        assertThat(TimeoutAborts.pastTimeout(1_000, 0, 10_000)).as("no timeout").isFalse();
    }

    @Test
    void aFinishingTimeoutAbortIsForgottenOnceEnded() {
        aborts.began(5, 2_000);
        assertThat(aborts.isFinishing(5)).isTrue();
        assertThat(aborts.beganAt(5)).isEqualTo(2_000);

        aborts.endedOnTimeout(5, 500);

        assertThat(aborts.isFinishing(5)).isFalse();
        assertThat(aborts.beganAt(5)).isZero();
        assertThat(aborts.timeoutOf(5)).isEqualTo(500);
    }
}
