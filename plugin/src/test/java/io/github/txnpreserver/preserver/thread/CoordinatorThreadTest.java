package io.github.txnpreserver.preserver.thread;

import static org.assertj.core.api.Assertions.assertThat;

import io.github.txnpreserver.testing.ManualScheduler;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import org.junit.jupiter.api.DisplayName;
import org.junit.jupiter.api.Test;

/** A coordinator's thread as its preserver uses it: tasks until it closes, none after. */
@DisplayName("A coordinator's thread")
class CoordinatorThreadTest {

    private final ManualScheduler scheduler = new ManualScheduler(0);
    private final CoordinatorThread thread = new CoordinatorThread(7, scheduler);
    private final List<String> ran = new ArrayList<>();

    @Test
    void runsTasksGivenNowOrDeferredInOrder() {
        assertThat(thread.execute(() -> ran.add("now"))).isTrue();
        assertThat(thread.defer(() -> ran.add("deferred"))).isTrue();

        scheduler.runReady();

        assertThat(ran).containsExactly("now", "deferred");
    }

    @Test
    void saysATaskGivenToAThreadShutDownWillNotRun() {
        scheduler.shutdown();

        assertThat(thread.execute(() -> ran.add("now"))).isFalse();
        assertThat(thread.defer(() -> ran.add("deferred"))).isFalse();
        assertThat(ran).isEmpty();
    }

    @Test
    void closeCompletesOnceTheClosingTaskRanAndNothingGivenAfterRuns() {
        thread.execute(() -> ran.add("before"));
        CompletableFuture<Void> closed = thread.close(() -> ran.add("closing"));
        thread.execute(() -> ran.add("after"));
        assertThat(closed).as("not before its turn on the thread").isNotDone();

        scheduler.runReady();

        assertThat(closed).isCompleted();
        assertThat(thread.isClosed()).isTrue();
        assertThat(ran).containsExactly("before", "closing");
    }

    @Test
    void closeOfAThreadShutDownCompletesAtOnce() {
        scheduler.shutdown();

        CompletableFuture<Void> closed = thread.close(() -> ran.add("closing"));

        assertThat(closed).isCompleted();
        assertThat(ran).isEmpty();
    }

    @Test
    void aDelayedTaskRunsWhenDueAndNotOnceClosed() {
        thread.schedule(() -> ran.add("due before the close"), Duration.ofSeconds(1));
        thread.schedule(() -> ran.add("due after the close"), Duration.ofSeconds(3));

        scheduler.advance(Duration.ofSeconds(2));
        thread.close(() -> { });
        scheduler.advance(Duration.ofSeconds(2));

        assertThat(ran).containsExactly("due before the close");
    }

    @Test
    void aPeriodicTaskRunsEachIntervalUntilClosed() {
        thread.every(Duration.ofSeconds(1), () -> ran.add("tick"));

        scheduler.advance(Duration.ofMillis(2500));
        thread.close(() -> { });
        scheduler.advance(Duration.ofSeconds(5));

        assertThat(ran).containsExactly("tick", "tick");
    }

    @Test
    void anAnswerGivenOnceClosedFailsRetryably() {
        thread.close(() -> { });
        scheduler.runReady();
        CompletableFuture<String> answer = new CompletableFuture<>();

        thread.answer(answer, () -> answer.complete("answered"));
        scheduler.runReady();

        assertThat(answer).failsWithin(Duration.ZERO).withThrowableThat()
                .havingCause().isInstanceOf(PreserverUnavailableException.class);
    }

    @Test
    void itsClocksAreTheSchedulers() {
        scheduler.advance(Duration.ofMillis(1500));

        assertThat(thread.nanoTime()).isEqualTo(scheduler.nanoTime()).isEqualTo(1_500_000_000L);
        assertThat(thread.millis()).isEqualTo(scheduler.millis()).isEqualTo(1500);
    }

    @Test
    void confinedStateReachedFromAnotherThreadFailsItsAssertion() throws Exception {
        scheduler.runReady();
        CompletableFuture<Throwable> fromElsewhere = new CompletableFuture<>();
        Thread other = new Thread(() -> {
            try {
                thread.assertOwner();
                fromElsewhere.complete(null);
            } catch (Throwable e) {
                fromElsewhere.complete(e);
            }
        });
        other.start();
        other.join(5_000);

        assertThat(thread.assertOwner()).as("on the thread that runs its tasks").isTrue();
        assertThat(fromElsewhere.getNow(null)).isInstanceOf(AssertionError.class)
                .hasMessageContaining("coordinator 7");
    }
}
