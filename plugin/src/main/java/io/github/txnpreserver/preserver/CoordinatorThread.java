package io.github.txnpreserver.preserver;

import io.github.txnpreserver.time.Scheduler;
import java.time.Duration;
import java.util.concurrent.CompletableFuture;

/**
 * A coordinator's one thread as its preserver uses it: tasks run there in the order given,
 * until the preserver closes; a task given after that (or to a thread already shut down)
 * does not run, and an answer waiting on it fails with a retryable error.
 *
 * <p>{@link #isClosed} may be read from any thread; everything else runs on the
 * {@link Scheduler}'s thread.
 */
final class CoordinatorThread {

    private final long coordinatorId;
    private final Scheduler scheduler;
    /** Written on the coordinator's thread only. */
    private volatile boolean closed;

    CoordinatorThread(long coordinatorId, Scheduler scheduler) {
        this.coordinatorId = coordinatorId;
        this.scheduler = scheduler;
    }

    /** Runs {@code task} soon, unless closed by then. @return false if the thread was shut down */
    boolean execute(Runnable task) {
        return scheduler.execute(() -> {
            if (!closed) {
                task.run();
            }
        });
    }

    /** As {@link #execute}, without waking the thread for it ({@link Scheduler#defer}). */
    boolean defer(Runnable task) {
        return scheduler.defer(() -> {
            if (!closed) {
                task.run();
            }
        });
    }

    /** Runs {@code task} every {@code interval}, until closed. */
    void every(Duration interval, Runnable task) {
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
    void answer(CompletableFuture<?> answer, Runnable task) {
        answer(answer, task, scheduler::execute);
    }

    /**
     * As {@link #answer}, without waking the thread for it ({@link Scheduler#defer}): for a
     * question whose asker can wait {@link Scheduler#DEFER_BOUND} longer, and that may come
     * once per transaction.
     */
    void answerDeferred(CompletableFuture<?> answer, Runnable task) {
        answer(answer, task, scheduler::defer);
    }

    private void answer(CompletableFuture<?> answer, Runnable task, java.util.function.Predicate<Runnable> submit) {
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

    /**
     * Runs {@code closing} as the last task: nothing given after it runs. Only the first call
     * runs it; a later one completes once the first has.
     *
     * @return completes once it ran (or threw), or at once if the thread was shut down before
     */
    CompletableFuture<Void> close(Runnable closing) {
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

    boolean isClosed() {
        return closed;
    }

    PreserverUnavailableException closedError() {
        return new PreserverUnavailableException("coordinator " + coordinatorId + " closed");
    }
}
