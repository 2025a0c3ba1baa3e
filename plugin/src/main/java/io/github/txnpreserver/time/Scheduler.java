package io.github.txnpreserver.time;

import java.time.Duration;
import java.util.concurrent.Executor;

/**
 * The one thread that owns a coordinator's preserver, and its time.
 *
 * <p>Every change to a coordinator's kept outcomes, its writer and its restore runs as a task
 * of its scheduler, one at a time, so none of that state needs a lock (Kafka's coordinators
 * run on the same idea). Time is read here too, never from {@code System}: tests replace the
 * whole with a manual scheduler that steps time and runs what is due, so that every
 * interleaving a test needs is one it spells out (Caffeine's {@code Ticker} and
 * {@code Scheduler}, Kafka's {@code MockTime}).
 */
public interface Scheduler {

    /** Wall-clock time, for end times that outlive the process. */
    long millis();

    /** Monotonic time, for delays and durations. */
    long nanoTime();

    /**
     * Runs {@code task} on the owning thread, after the tasks queued before it.
     *
     * @return false if the scheduler is shut down: the task will never run
     */
    boolean execute(Runnable task);

    /**
     * Runs {@code task} on the owning thread, after the tasks queued before it (by
     * {@link #execute} or here), without waking the thread for it alone: with the next task
     * that does, or within {@link #DEFER_BOUND}. For work nobody waits on (an end to note, a
     * release to queue) or whose asker can wait that long (a lookup of an ended transaction),
     * so that a busy coordinator's thread wakes once for many of them rather than once each. A scheduler may run it as {@link #execute} does.
     *
     * @return false if the scheduler is shut down: the task will never run
     */
    default boolean defer(Runnable task) {
        return execute(task);
    }

    /** How long a {@linkplain #defer deferred} task may wait for the owning thread to wake. */
    Duration DEFER_BOUND = Duration.ofMillis(10);

    /** Runs {@code task} on the owning thread once {@code delay} has passed. Dropped once shut down. */
    Cancellable schedule(Runnable task, Duration delay);

    /**
     * Where work that blocks runs (the restore's read of the state topic), off the owning
     * thread; what it finds comes back through {@link #execute}.
     */
    Executor blockingExecutor(String threadName);

    /**
     * Whether the calling thread is the one that runs this scheduler's tasks (for the
     * coordinator's owner-thread assertion).
     */
    boolean inOwnerThread();

    /**
     * Tasks already queued to run now still run; delayed tasks and tasks handed over later are
     * dropped.
     */
    void shutdown();

    /** A scheduled task that has not run yet. */
    @FunctionalInterface
    interface Cancellable {
        void cancel();
    }
}
