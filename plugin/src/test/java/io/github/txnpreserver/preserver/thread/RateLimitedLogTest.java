package io.github.txnpreserver.preserver.thread;

import static org.assertj.core.api.Assertions.assertThat;

import io.github.txnpreserver.testing.ManualScheduler;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.DisplayName;
import org.junit.jupiter.api.Test;

/** A repeated event is reported at once, then at most once per interval, with its count since the last report. */
@DisplayName("A rate-limited log")
class RateLimitedLogTest {

    private final ManualScheduler scheduler = new ManualScheduler(0);
    private final RateLimitedLog log = new RateLimitedLog(scheduler::nanoTime, 1, TimeUnit.SECONDS);
    private final List<Long> reports = new ArrayList<>();

    @Test
    void reportsTheFirstOccurrenceAtOnce() {
        log.occurred(3, reports::add);

        assertThat(reports).containsExactly(3L);
    }

    @Test
    void reportsAgainOnceTheIntervalHasPassedWithTheCountSinceTheLastReport() {
        log.occurred(1, reports::add);
        log.occurred(2, reports::add);
        scheduler.advance(Duration.ofMillis(999));
        log.occurred(3, reports::add);
        assertThat(reports).as("within the interval").containsExactly(1L);

        scheduler.advance(Duration.ofMillis(1));
        log.occurred(4, reports::add);
        assertThat(reports).as("the interval has passed exactly").containsExactly(1L, 9L);

        log.occurred(5, reports::add);
        scheduler.advance(Duration.ofSeconds(1));
        log.occurred(1, reports::add);
        assertThat(reports).as("the interval counts from the last report").containsExactly(1L, 9L, 6L);
    }

    @Test
    void aQuietSpellLongerThanTheIntervalReportsTheNextOccurrenceAtOnce() {
        log.occurred(1, reports::add);
        scheduler.advance(Duration.ofHours(1));

        log.occurred(2, reports::add);

        assertThat(reports).containsExactly(1L, 2L);
    }
}
