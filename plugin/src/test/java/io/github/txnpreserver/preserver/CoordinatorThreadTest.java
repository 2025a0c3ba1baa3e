package io.github.txnpreserver.preserver;

import static org.assertj.core.api.Assertions.assertThat;

import io.github.txnpreserver.testing.ManualScheduler;
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
}
