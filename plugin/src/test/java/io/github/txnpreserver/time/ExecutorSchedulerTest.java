package io.github.txnpreserver.time;

import static org.assertj.core.api.Assertions.assertThat;

import io.github.txnpreserver.time.Scheduler.Cancellable;
import io.netty.util.concurrent.FastThreadLocalThread;
import java.time.Clock;
import java.time.Duration;
import java.time.Instant;
import java.time.ZoneOffset;
import java.util.ArrayList;
import java.util.Collections;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicIntegerArray;
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

    @Test
    void itsThreadIsANettyDaemonThreadOfTheGivenName() throws Exception {
        CompletableFuture<Thread> ran = new CompletableFuture<>();

        assertThat(scheduler.execute(() -> ran.complete(Thread.currentThread()))).isTrue();

        Thread thread = ran.get(WAIT_SECONDS, TimeUnit.SECONDS);
        assertThat(thread.getName()).isEqualTo("scheduler-test");
        assertThat(thread.isDaemon()).as("does not keep the broker's JVM alive").isTrue();
        assertThat(thread).isInstanceOf(FastThreadLocalThread.class);
    }

    @Test
    void itsOwnerIsItsThreadAlone() throws Exception {
        CompletableFuture<Boolean> inTask = new CompletableFuture<>();

        scheduler.execute(() -> inTask.complete(scheduler.inOwnerThread()));

        assertThat(inTask.get(WAIT_SECONDS, TimeUnit.SECONDS)).as("a task").isTrue();
        assertThat(scheduler.inOwnerThread()).as("the test's thread").isFalse();
    }

    @Test
    void wallClockTimeIsTheGivenClocksAndMonotonicTimeTheSystems() {
        ExecutorScheduler fixed = new ExecutorScheduler("fixed-clock",
                Clock.fixed(Instant.ofEpochMilli(1_700_000_123_456L), ZoneOffset.UTC));
        try {
            long before = System.nanoTime();
            long read = fixed.nanoTime();
            long after = System.nanoTime();

            assertThat(fixed.millis()).isEqualTo(1_700_000_123_456L);
            assertThat(read - before).isNotNegative();
            assertThat(after - read).isNotNegative();
        } finally {
            fixed.shutdown();
        }
    }

    @Test
    void blockingWorkRunsOnADaemonThreadOfItsOwnOffTheSchedulersThread() throws Exception {
        Thread own = threadOf(scheduler);
        CompletableFuture<Thread> ran = new CompletableFuture<>();

        scheduler.blockingExecutor("restore-read").execute(() -> ran.complete(Thread.currentThread()));

        Thread thread = ran.get(WAIT_SECONDS, TimeUnit.SECONDS);
        assertThat(thread).isNotSameAs(own);
        assertThat(thread.getName()).isEqualTo("restore-read");
        assertThat(thread.isDaemon()).isTrue();
    }

    @Test
    void aTaskDeferredOnAnIdleThreadRunsBeforeATimerThatComesDueFirst() throws Exception {
        List<String> ran = Collections.synchronizedList(new ArrayList<>());
        CompletableFuture<Void> timerRan = new CompletableFuture<>();
        // The thread is idle: the deferred task waits for its drain, the timer is due at once.
        scheduler.defer(() -> ran.add("deferred"));
        scheduler.schedule(() -> {
            ran.add("timer");
            timerRan.complete(null);
        }, Duration.ZERO);

        timerRan.get(WAIT_SECONDS, TimeUnit.SECONDS);
        assertThat(ran).containsExactly("deferred", "timer");
    }

    @Test
    void aTimerThatComesDueDuringALongBacklogWaitsForAtMostTwoBatchesOfIt() throws Exception {
        // ExecutorScheduler's batch: a drain runs at most this many tasks before due timers.
        int batch = 4096;
        int tasks = 3 * batch;
        AtomicInteger ran = new AtomicInteger();
        CompletableFuture<Integer> ranBeforeTimer = new CompletableFuture<>();
        CompletableFuture<Void> last = new CompletableFuture<>();
        CountDownLatch hold = new CountDownLatch(1);
        scheduler.execute(() -> await(hold));
        scheduler.schedule(() -> ranBeforeTimer.complete(ran.get()), Duration.ZERO);
        for (int i = 0; i < tasks; i++) {
            scheduler.defer(ran::incrementAndGet);
        }
        scheduler.defer(() -> last.complete(null));
        hold.countDown();

        last.get(WAIT_SECONDS, TimeUnit.SECONDS);
        // The rest of the drain it came due in, then the drain it runs before its task.
        assertThat(ranBeforeTimer.get(WAIT_SECONDS, TimeUnit.SECONDS)).isLessThanOrEqualTo(2 * batch);
        assertThat(ran.get()).isEqualTo(tasks);
    }

    @Test
    void aBacklogLongerThanOneBatchQueuedBeforeShutdownStillRunsWhole() throws Exception {
        Thread thread = threadOf(scheduler);
        int tasks = 3 * 4096;
        AtomicInteger ran = new AtomicInteger();
        CountDownLatch hold = new CountDownLatch(1);
        scheduler.execute(() -> await(hold));
        for (int i = 0; i < tasks; i++) {
            scheduler.defer(ran::incrementAndGet);
        }

        scheduler.shutdown();
        hold.countDown();

        thread.join(TimeUnit.SECONDS.toMillis(WAIT_SECONDS));
        assertThat(thread.isAlive()).isFalse();
        assertThat(ran.get()).isEqualTo(tasks);
    }

    @Test
    void aTaskDeferredOnAnIdleThreadJustBeforeShutdownStillRuns() throws Exception {
        CompletableFuture<Void> deferred = new CompletableFuture<>();

        assertThat(scheduler.defer(() -> deferred.complete(null))).isTrue();
        scheduler.shutdown();

        deferred.get(WAIT_SECONDS, TimeUnit.SECONDS);
    }

    @Test
    void shutdownDropsTimersNotYetDueAndEndsTheThread() throws Exception {
        Thread thread = threadOf(scheduler);
        AtomicBoolean timerRan = new AtomicBoolean();
        scheduler.schedule(() -> timerRan.set(true), Duration.ofMinutes(1));

        scheduler.shutdown();

        thread.join(TimeUnit.SECONDS.toMillis(WAIT_SECONDS));
        assertThat(thread.isAlive()).isFalse();
        assertThat(timerRan).isFalse();
    }

    @Test
    void aTimerScheduledAfterShutdownIsDroppedAndCancellingItIsHarmless() throws Exception {
        Thread thread = threadOf(scheduler);
        AtomicBoolean timerRan = new AtomicBoolean();
        scheduler.shutdown();

        Cancellable timer = scheduler.schedule(() -> timerRan.set(true), Duration.ZERO);
        timer.cancel();

        thread.join(TimeUnit.SECONDS.toMillis(WAIT_SECONDS));
        assertThat(thread.isAlive()).isFalse();
        assertThat(timerRan).isFalse();
    }

    @Test
    void aCancelledTimerDoesNotRun() throws Exception {
        List<String> ran = Collections.synchronizedList(new ArrayList<>());
        CompletableFuture<Void> laterRan = new CompletableFuture<>();
        CountDownLatch hold = new CountDownLatch(1);
        // Both come due while the thread is busy: the cancel comes before it could run either.
        scheduler.execute(() -> await(hold));
        Cancellable cancelled = scheduler.schedule(() -> ran.add("cancelled"), Duration.ZERO);
        scheduler.schedule(() -> {
            ran.add("later");
            laterRan.complete(null);
        }, Duration.ZERO);

        cancelled.cancel();
        hold.countDown();

        laterRan.get(WAIT_SECONDS, TimeUnit.SECONDS);
        assertThat(ran).containsExactly("later");
    }

    /**
     * Whatever the interleaving of hand-overs with a shutdown, the answer holds: a task
     * accepted runs, once; a task refused never runs. Rounds on real threads, so each round
     * meets the shutdown at another point of a hand-over.
     */
    @Test
    void aTaskHandedOverAsTheSchedulerShutsDownRunsIfAndOnlyIfItWasAccepted() throws Exception {
        int tasks = 2_000;
        for (int round = 0; round < 100; round++) {
            ExecutorScheduler racing = new ExecutorScheduler("racing-" + round, Clock.systemUTC());
            Thread thread = threadOf(racing);
            AtomicIntegerArray ran = new AtomicIntegerArray(tasks);
            boolean[] accepted = new boolean[tasks];
            AtomicInteger handed = new AtomicInteger();
            Thread hander = new Thread(() -> {
                for (int i = 0; i < tasks; i++) {
                    int task = i;
                    Runnable body = () -> ran.incrementAndGet(task);
                    accepted[i] = i % 2 == 0 ? racing.execute(body) : racing.defer(body);
                    handed.incrementAndGet();
                }
            }, "hander-" + round);
            hander.start();
            int shutAt = (round * 37) % (tasks / 2);
            while (handed.get() < shutAt && hander.isAlive()) {
                Thread.onSpinWait();
            }

            racing.shutdown();

            hander.join(TimeUnit.SECONDS.toMillis(WAIT_SECONDS));
            thread.join(TimeUnit.SECONDS.toMillis(WAIT_SECONDS));
            assertThat(hander.isAlive()).isFalse();
            assertThat(thread.isAlive()).isFalse();
            for (int i = 0; i < tasks; i++) {
                assertThat(ran.get(i)).as("round %d, task %d, accepted %s", round, i, accepted[i])
                        .isEqualTo(accepted[i] ? 1 : 0);
            }
        }
    }

    /** The scheduler's one thread, started by this. */
    private static Thread threadOf(ExecutorScheduler scheduler) throws Exception {
        CompletableFuture<Thread> thread = new CompletableFuture<>();
        scheduler.execute(() -> thread.complete(Thread.currentThread()));
        return thread.get(WAIT_SECONDS, TimeUnit.SECONDS);
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
