package io.github.txnpreserver.time;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import java.time.Duration;
import org.junit.jupiter.api.DisplayName;
import org.junit.jupiter.api.Test;

@DisplayName("The retry policy")
class BackoffTest {

    private final Backoff backoff = new Backoff(Duration.ofMillis(100), Duration.ofMillis(500));

    @Test
    void theFirstFailureWaitsTheFirstDelayAndEachNextOneTwiceTheLastUpToTheCeiling() {
        Duration delay = Duration.ZERO;
        StringBuilder delays = new StringBuilder();
        for (int failure = 0; failure < 6; failure++) {
            delay = backoff.next(delay);
            delays.append(delay.toMillis()).append(' ');
        }

        assertThat(delays.toString()).isEqualTo("100 200 400 500 500 500 ");
    }

    @Test
    void aStepThatSucceededStartsAgainFromTheFirstDelay() {
        assertThat(backoff.nextNanos(0)).isEqualTo(100_000_000L);
        assertThat(backoff.nextNanos(-1)).isEqualTo(100_000_000L);
    }

    @Test
    void aDelayNearTheCeilingDoesNotOverflow() {
        Backoff long_ = new Backoff(Duration.ofNanos(1), Duration.ofNanos(Long.MAX_VALUE));

        assertThat(long_.nextNanos(Long.MAX_VALUE / 2 + 1)).isEqualTo(Long.MAX_VALUE);
        assertThat(long_.nextNanos(Long.MAX_VALUE / 2 - 1)).isEqualTo((Long.MAX_VALUE / 2 - 1) * 2);
    }

    @Test
    void aPolicyWithoutAPositiveFirstDelayOrWithACeilingBelowItIsRefused() {
        assertThatThrownBy(() -> new Backoff(Duration.ZERO, Duration.ofSeconds(1)))
                .isInstanceOf(IllegalArgumentException.class);
        assertThatThrownBy(() -> new Backoff(Duration.ofSeconds(2), Duration.ofSeconds(1)))
                .isInstanceOf(IllegalArgumentException.class);
        assertThat(new Backoff(Duration.ofSeconds(1), Duration.ofSeconds(1)).nextNanos(1_000_000_000L))
                .isEqualTo(1_000_000_000L);
    }

    @Test
    void aDelayOfHalfAnOddCeilingOrMoreGoesToTheCeiling() {
        Backoff odd = new Backoff(Duration.ofNanos(1), Duration.ofNanos(5));

        assertThat(odd.nextNanos(2)).as("5 / 2 = 2: twice would fall short of the ceiling").isEqualTo(5);
        assertThat(odd.nextNanos(1)).isEqualTo(2);
    }

    @Test
    void itsBoundsAreTheGivenOnes() {
        assertThat(backoff.first()).isEqualTo(Duration.ofMillis(100));
        assertThat(backoff.max()).isEqualTo(Duration.ofMillis(500));
    }
}
