package io.github.txnpreserver.time;

import java.time.Clock;
import java.time.Duration;
import java.util.concurrent.Executor;
import java.util.concurrent.Executors;
import java.util.concurrent.RejectedExecutionException;
import java.util.concurrent.ScheduledExecutorService;
import java.util.concurrent.ScheduledFuture;
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
        this.executor = Executors.newSingleThreadScheduledExecutor(runnable -> {
            Thread thread = new Thread(runnable, threadName);
            thread.setDaemon(true);
            return thread;
        });
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
    public void execute(Runnable task) {
        try {
            executor.execute(() -> runSafely(task));
        } catch (RejectedExecutionException shutDown) {
            log.debug("Task dropped: scheduler shut down");
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
        } catch (RuntimeException | Error e) {
            log.error("Preserver task failed", e);
        }
    }
}
