package io.github.txnpreserver.time;

import io.netty.util.concurrent.FastThreadLocalThread;
import java.time.Clock;
import java.time.Duration;
import java.util.concurrent.ConcurrentLinkedQueue;
import java.util.concurrent.Executor;
import java.util.concurrent.RejectedExecutionException;
import java.util.concurrent.ScheduledExecutorService;
import java.util.concurrent.ScheduledFuture;
import java.util.concurrent.ScheduledThreadPoolExecutor;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * A {@link Scheduler} over a daemon thread of its own and the system's clocks. A task that
 * throws is logged and does not stop the thread.
 *
 * <p>Tasks come through one inbox that the thread drains in order; only the first task
 * after a drain asks the executor to run one (now, or within {@link #DEFER_BOUND} if
 * {@linkplain #defer deferred}). So a coordinator's thread wakes once per batch, not once
 * per task: at 800 transactions per second, three tasks each, waking per task cost the
 * thread three times the CPU of the work itself (docs/DESIGN.md, "Threading").
 */
public final class ExecutorScheduler implements Scheduler {

    private static final Logger log = LoggerFactory.getLogger(ExecutorScheduler.class);

    private static final int NONE = 0;
    private static final int SOON = 1;
    private static final int NOW = 2;
    private static final int MAX_BATCH = 4096;

    private final ScheduledExecutorService executor;
    private final Clock clock;
    /**
     * Tasks to run now or soon, in the order they came: one queue for both, so that a deferred
     * task never overtakes one queued before it, nor the other way round.
     */
    private final ConcurrentLinkedQueue<Runnable> inbox = new ConcurrentLinkedQueue<>();
    /** The drain to come: {@link #NONE}, {@link #SOON} (within the defer bound) or {@link #NOW}. */
    private final AtomicInteger drain = new AtomicInteger(NONE);
    private volatile boolean shutDown;
    private volatile Thread owner;

    public ExecutorScheduler(String threadName, Clock clock) {
        this.clock = clock;
        ScheduledThreadPoolExecutor pool = new ScheduledThreadPoolExecutor(1, runnable -> {
            // A netty thread, as Pulsar's coordinator threads are: this one calls the managed
            // ledger and the client, which keep pooled buffers and objects in netty's
            // thread-locals; a plain thread reaches those through a java.lang.ThreadLocal
            // (netty 4.1) or gets no pooling (4.2). They are freed when the thread ends.
            Thread thread = new FastThreadLocalThread(runnable, threadName);
            thread.setDaemon(true);
            owner = thread;
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
        return hand(task, NOW);
    }

    @Override
    public boolean defer(Runnable task) {
        return hand(task, SOON);
    }

    /** Queues {@code task} in the inbox and makes sure a drain comes: now, or within the bound. */
    private boolean hand(Runnable task, int when) {
        if (shutDown) {
            return false;
        }
        inbox.add(task);
        int before = when == NOW ? drain.getAndSet(NOW) : drain.compareAndExchange(NONE, SOON);
        if (before == NONE || (when == NOW && before == SOON)) {
            try {
                if (when == NOW) {
                    executor.execute(this::drain);
                } else {
                    executor.schedule(this::drain, DEFER_BOUND.toNanos(), TimeUnit.NANOSECONDS);
                }
            } catch (RejectedExecutionException shutDown) {
                drain.set(NONE);
                return !inbox.remove(task);
            }
        }
        // Shut down meanwhile: its last drain ran or runs after the flag was set, so a task
        // still in the inbox now may never run; one it took has run.
        return !shutDown || !inbox.remove(task);
    }

    /** Runs what the inbox holds, in order; a long backlog yields to due timers between batches. */
    private void drain() {
        drain.set(NONE);
        for (int ran = 0; shutDown || ran < MAX_BATCH; ran++) {
            Runnable task = inbox.poll();
            if (task == null) {
                return;
            }
            runSafely(task);
        }
        if (!inbox.isEmpty() && drain.getAndSet(NOW) != NOW) {
            try {
                executor.execute(this::drain);
            } catch (RejectedExecutionException shutDownMeanwhile) {
                // Its last drain, queued after the flag was set, runs the rest.
                drain.set(NONE);
            }
        }
    }

    @Override
    public Cancellable schedule(Runnable task, Duration delay) {
        try {
            // What the inbox holds was queued before the task came due: it runs first.
            ScheduledFuture<?> future = executor.schedule(() -> {
                try {
                    drain();
                } finally {
                    runSafely(task);
                }
            }, delay.toNanos(), TimeUnit.NANOSECONDS);
            return () -> future.cancel(false);
        } catch (RejectedExecutionException shutDown) {
            return () -> { };
        }
    }

    @Override
    public boolean inOwnerThread() {
        return Thread.currentThread() == owner;
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
        shutDown = true;
        try {
            // What was queued, deferred or not, still runs.
            executor.execute(this::drain);
        } catch (RejectedExecutionException shutDownBefore) {
            return;
        }
        executor.shutdown();
    }

    /** One task's failure, an error included, is its own: the tasks after it and the timers still run. */
    private static void runSafely(Runnable task) {
        try {
            task.run();
        } catch (Throwable e) {
            log.error("Preserver task failed", e);
        }
    }
}
