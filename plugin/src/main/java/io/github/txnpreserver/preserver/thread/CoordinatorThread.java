package io.github.txnpreserver.preserver.thread;

import io.github.txnpreserver.time.Scheduler;
import java.time.Duration;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.Executor;
import java.util.function.Predicate;

/**
 * The one door onto a coordinator's thread: everything of the coordinator that runs there
 * (its preserver's parts, the store's timeout and re-drive work) is handed over here, and
 * nothing reaches the {@link Scheduler} another way. Tasks run in the order given until the
 * coordinator closes; a task given after that (or to a thread already shut down) does not
 * run, a delayed or periodic one is dropped, and an answer waiting on one fails with a
 * retryable error. "Closed" lives here only.
 *
 * <p>{@link #isClosed}, the clocks, and the hand-over methods may be called from any thread;
 * the tasks run on the coordinator's. Code confined to that thread states it with
 * {@link #assertOwner()}, which tests run (assertions on) and production skips.
 */
public final class CoordinatorThread {

    private final long coordinatorId;
    private final Scheduler scheduler;
    /** Written on the coordinator's thread only. */
    private volatile boolean closed;

    public CoordinatorThread(long coordinatorId, Scheduler scheduler) {
        this.coordinatorId = coordinatorId;
        this.scheduler = scheduler;
    }

    /** Wall-clock time, for end times that outlive the process. */
    public long millis() {
        return scheduler.millis();
    }

    /** Monotonic time, for delays and durations. */
    public long nanoTime() {
        return scheduler.nanoTime();
    }

    /** Runs {@code task} soon, unless closed by then. @return false if the thread was shut down */
    public boolean execute(Runnable task) {
        return scheduler.execute(unlessClosed(task));
    }

    /** As {@link #execute}, without waking the thread for it ({@link Scheduler#defer}). */
    public boolean defer(Runnable task) {
        return scheduler.defer(unlessClosed(task));
    }

    /** Runs {@code task} once {@code delay} has passed, unless closed by then. */
    public Scheduler.Cancellable schedule(Runnable task, Duration delay) {
        return scheduler.schedule(unlessClosed(task), delay);
    }

    /** Runs {@code task} every {@code interval}, until closed. */
    public void every(Duration interval, Runnable task) {
        scheduler.schedule(() -> {
            if (!closed) {
                try {
                    task.run();
                } finally {
                    every(interval, task);
                }
            }
        }, interval);
    }

    /** Runs {@code task}; a throw, or a closed coordinator, fails {@code answer}. */
    public void answer(CompletableFuture<?> answer, Runnable task) {
        answer(answer, task, scheduler::execute);
    }

    /**
     * As {@link #answer}, without waking the thread for it ({@link Scheduler#defer}): for a
     * question whose asker can wait {@link Scheduler#DEFER_BOUND} longer, and that may come
     * once per transaction.
     */
    public void answerDeferred(CompletableFuture<?> answer, Runnable task) {
        answer(answer, task, scheduler::defer);
    }

    private void answer(CompletableFuture<?> answer, Runnable task, Predicate<Runnable> submit) {
        boolean queued = submit.test(() -> {
            if (closed) {
                answer.completeExceptionally(closedError());
                return;
            }
            try {
                task.run();
            } catch (RuntimeException e) {
                answer.completeExceptionally(e);
            }
        });
        if (!queued) {
            answer.completeExceptionally(closedError());
        }
    }

    /** Where work that blocks runs, off this thread; what it finds comes back through {@link #execute}. */
    public Executor blockingExecutor(String threadName) {
        return scheduler.blockingExecutor(threadName);
    }

    /**
     * Runs {@code closing} as the last task: nothing given after it runs. Only the first call
     * runs it; a later one completes once the first has.
     *
     * @return completes once it ran (or threw), or at once if the thread was shut down before
     */
    public CompletableFuture<Void> close(Runnable closing) {
        CompletableFuture<Void> done = new CompletableFuture<>();
        boolean queued = scheduler.execute(() -> {
            try {
                if (!closed) {
                    closed = true;
                    closing.run();
                }
            } finally {
                done.complete(null);
            }
        });
        if (!queued) {
            done.complete(null);
        }
        return done;
    }

    public boolean isClosed() {
        return closed;
    }

    public PreserverUnavailableException closedError() {
        return new PreserverUnavailableException("coordinator " + coordinatorId + " closed");
    }

    /**
     * States that the caller runs on this coordinator's thread; for {@code assert}, so that it
     * costs nothing in production.
     */
    public boolean assertOwner() {
        if (!scheduler.inOwnerThread()) {
            throw new AssertionError("coordinator " + coordinatorId + "'s thread-confined state reached from "
                    + Thread.currentThread().getName());
        }
        return true;
    }

    private Runnable unlessClosed(Runnable task) {
        return () -> {
            if (!closed) {
                task.run();
            }
        };
    }
}
