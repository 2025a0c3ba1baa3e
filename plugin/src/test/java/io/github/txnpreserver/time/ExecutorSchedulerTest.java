package io.github.txnpreserver.time;

import static org.assertj.core.api.Assertions.assertThat;

import java.time.Clock;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Collections;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.DisplayName;
import org.junit.jupiter.api.Test;

/**
 * The real scheduler's one thread: the order of tasks handed over now and deferred, the bound
 * on a deferred task's wait, and shutdown. These run on real threads, so each wait is bounded
 * (5 s) and each check is of an order or of a completion, never of a duration.
 */
@DisplayName("The coordinator's thread")
class ExecutorSchedulerTest {

    private static final long WAIT_SECONDS = 5;

    private final ExecutorScheduler scheduler = new ExecutorScheduler("scheduler-test", Clock.systemUTC());

    @AfterEach
    void shutDown() {
        scheduler.shutdown();
    }

    @Test
    void runsTasksHandedOverNowAndDeferredInTheOrderTheyCame() throws Exception {
        List<Integer> ran = Collections.synchronizedList(new ArrayList<>());
        CountDownLatch hold = new CountDownLatch(1);
        // The thread is busy while the rest queue up, so that they meet in the inbox.
        scheduler.execute(() -> await(hold));
        for (int i = 0; i < 1000; i++) {
            int task = i;
            if (i % 3 == 0) {
                scheduler.execute(() -> ran.add(task));
            } else {
                scheduler.defer(() -> ran.add(task));
            }
        }
        CompletableFuture<Void> last = new CompletableFuture<>();
        scheduler.defer(() -> last.complete(null));
        hold.countDown();

        last.get(WAIT_SECONDS, TimeUnit.SECONDS);
        List<Integer> expected = new ArrayList<>();
        for (int i = 0; i < 1000; i++) {
            expected.add(i);
        }
        assertThat(ran).containsExactlyElementsOf(expected);
    }

    @Test
    void aDeferredTaskRunsWithoutAnyOtherTaskToWakeTheThread() throws Exception {
        CompletableFuture<String> ran = new CompletableFuture<>();

        assertThat(scheduler.defer(() -> ran.complete(Thread.currentThread().getName()))).isTrue();

        assertThat(ran.get(WAIT_SECONDS, TimeUnit.SECONDS)).isEqualTo("scheduler-test");
    }

    @Test
    void aDeferredTaskRunsBeforeATimerThatComesDueAfterIt() throws Exception {
        List<String> ran = Collections.synchronizedList(new ArrayList<>());
        CountDownLatch hold = new CountDownLatch(1);
        CompletableFuture<Void> timerRan = new CompletableFuture<>();
        scheduler.execute(() -> await(hold));
        scheduler.schedule(() -> {
            ran.add("timer");
            timerRan.complete(null);
        }, Duration.ZERO);
        scheduler.defer(() -> ran.add("deferred"));
        hold.countDown();

        timerRan.get(WAIT_SECONDS, TimeUnit.SECONDS);
        assertThat(ran).containsExactly("deferred", "timer");
    }

    @Test
    void aBacklogLongerThanOneBatchRunsWholeAndInOrder() throws Exception {
        List<Integer> ran = Collections.synchronizedList(new ArrayList<>());
        CountDownLatch hold = new CountDownLatch(1);
        scheduler.execute(() -> await(hold));
        int tasks = 10_000;
        for (int i = 0; i < tasks; i++) {
            int task = i;
            scheduler.defer(() -> ran.add(task));
        }
        CompletableFuture<Void> last = new CompletableFuture<>();
        scheduler.defer(() -> last.complete(null));
        hold.countDown();

        last.get(WAIT_SECONDS, TimeUnit.SECONDS);
        assertThat(ran).hasSize(tasks);
        for (int i = 0; i < tasks; i++) {
            assertThat(ran.get(i)).isEqualTo(i);
        }
    }

    @Test
    void whatWasQueuedBeforeShutdownStillRunsAndWhatComesAfterIsRefused() throws Exception {
        CountDownLatch hold = new CountDownLatch(1);
        CompletableFuture<Void> deferred = new CompletableFuture<>();
        scheduler.execute(() -> await(hold));
        scheduler.defer(() -> deferred.complete(null));

        scheduler.shutdown();
        hold.countDown();

        deferred.get(WAIT_SECONDS, TimeUnit.SECONDS);
        assertThat(scheduler.execute(() -> { })).isFalse();
        assertThat(scheduler.defer(() -> { })).isFalse();
    }

    @Test
    void aTaskThatThrowsDoesNotStopTheThread() throws Exception {
        CompletableFuture<Void> after = new CompletableFuture<>();
        scheduler.defer(() -> {
            throw new IllegalStateException("injected");
        });
        scheduler.defer(() -> after.complete(null));

        after.get(WAIT_SECONDS, TimeUnit.SECONDS);
    }

    @Test
    void anErrorInATaskDrainedByATimerDoesNotCostTheTimerItsRun() throws Exception {
        CountDownLatch hold = new CountDownLatch(1);
        CompletableFuture<Void> timerRan = new CompletableFuture<>();
        CompletableFuture<Void> after = new CompletableFuture<>();
        scheduler.execute(() -> await(hold));
        scheduler.schedule(() -> timerRan.complete(null), Duration.ZERO);
        scheduler.defer(() -> {
            throw new AssertionError("injected");
        });
        scheduler.defer(() -> after.complete(null));
        hold.countDown();

        timerRan.get(WAIT_SECONDS, TimeUnit.SECONDS);
        after.get(WAIT_SECONDS, TimeUnit.SECONDS);
    }

    private static void await(CountDownLatch latch) {
        try {
            if (!latch.await(WAIT_SECONDS, TimeUnit.SECONDS)) {
                throw new IllegalStateException("not released");
            }
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        }
    }
}
