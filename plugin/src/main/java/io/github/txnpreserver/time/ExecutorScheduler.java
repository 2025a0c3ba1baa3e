package io.github.txnpreserver.time;

import java.time.Clock;
import java.time.Duration;
import java.util.concurrent.Executor;
import java.util.concurrent.RejectedExecutionException;
import java.util.concurrent.ScheduledExecutorService;
import java.util.concurrent.ScheduledFuture;
import java.util.concurrent.ScheduledThreadPoolExecutor;
import java.util.concurrent.TimeUnit;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * A {@link Scheduler} over a daemon thread of its own and the system's clocks. A task that
 * throws is logged and does not stop the thread.
 */
public final class ExecutorScheduler implements Scheduler {

    private static final Logger log = LoggerFactory.getLogger(ExecutorScheduler.class);

    private final ScheduledExecutorService executor;
    private final Clock clock;

    public ExecutorScheduler(String threadName, Clock clock) {
        this.clock = clock;
        ScheduledThreadPoolExecutor pool = new ScheduledThreadPoolExecutor(1, runnable -> {
            Thread thread = new Thread(runnable, threadName);
            thread.setDaemon(true);
            return thread;
        });
        // Once shut down, delayed tasks (expiry checks, backoffs) are dropped with the coordinator.
        pool.setExecuteExistingDelayedTasksAfterShutdownPolicy(false);
        pool.setContinueExistingPeriodicTasksAfterShutdownPolicy(false);
        pool.setRemoveOnCancelPolicy(true);
        this.executor = pool;
    }

    @Override
    public long millis() {
        return clock.millis();
    }

    @Override
    public long nanoTime() {
        return System.nanoTime();
    }

    @Override
    public boolean execute(Runnable task) {
        try {
            executor.execute(() -> runSafely(task));
            return true;
        } catch (RejectedExecutionException shutDown) {
            log.debug("Task dropped: scheduler shut down");
            return false;
        }
    }

    @Override
    public Cancellable schedule(Runnable task, Duration delay) {
        try {
            ScheduledFuture<?> future = executor.schedule(() -> runSafely(task), delay.toNanos(),
                    TimeUnit.NANOSECONDS);
            return () -> future.cancel(false);
        } catch (RejectedExecutionException shutDown) {
            return () -> { };
        }
    }

    /** A daemon thread of its own per task: the restore reads once per opening, with blocking calls. */
    @Override
    public Executor blockingExecutor(String threadName) {
        return task -> {
            Thread thread = new Thread(task, threadName);
            thread.setDaemon(true);
            thread.start();
        };
    }

    @Override
    public void shutdown() {
        executor.shutdown();
    }

    private static void runSafely(Runnable task) {
        try {
            task.run();
        } catch (RuntimeException e) {
            log.error("Preserver task failed", e);
        }
    }
}
