package io.github.txnpreserver.testing;

import io.github.txnpreserver.time.Scheduler;
import java.time.Clock;
import java.time.Duration;
import java.util.ArrayDeque;
import java.util.PriorityQueue;
import java.util.concurrent.locks.LockSupport;
import java.util.concurrent.locks.ReentrantLock;

/**
 * A {@link Scheduler} whose time moves only when a test says so. Tasks handed over from any
 * thread wait until the test runs them ({@link #runReady}, {@link #advance}), on the test's
 * thread, in due order: the interleaving of a test is the order of its lines. Tasks never
 * run on two threads at once, as on the real scheduler's one thread: with {@link #pump} a
 * daemon thread runs what is due as soon as it is queued (time still moves only when told),
 * for tests that drive the broker's own asynchronous chain. With {@link #runningHandedOverAtOnce}
 * what a call hands over is done when the call returns, for figures of the preserver's code
 * in one thread.
 */
public final class ManualScheduler implements Scheduler {

    private final PriorityQueue<Task> queue = new PriorityQueue<>();
    /** Handed over while another task runs, in {@link #runningHandedOverAtOnce} mode: run right after it. */
    private final ArrayDeque<Runnable> handedOver = new ArrayDeque<>();
    private volatile boolean atOnce;
    private boolean draining;
    private long nanos;
    private long millis;
    private long sequence;
    private boolean shutDown;
    private final Clock wallClock;
    private final ReentrantLock running = new ReentrantLock();
    private volatile Thread pump;
    /** The test's thread (the last to run tasks): it also calls the parts a test drives directly. */
    private volatile Thread runner;

    /** Wall-clock time starts at {@code startMillis} and moves with {@link #advance}. */
    public ManualScheduler(long startMillis) {
        this.millis = startMillis;
        this.wallClock = null;
    }

    /** Wall-clock time is the given clock's (a test's {@link MutableClock}); {@link #advance} moves monotonic time only. */
    public ManualScheduler(Clock wallClock) {
        this.wallClock = wallClock;
    }

    /** Runs due tasks on a daemon thread as they come, until {@link #shutdown}. */
    public ManualScheduler pump() {
        if (atOnce) {
            throw new IllegalStateException("tasks already run on the threads that hand them over");
        }
        Thread thread = new Thread(() -> {
            while (!isShutDown()) {
                if (runReady() == 0) {
                    LockSupport.parkNanos(200_000);
                }
            }
        }, "manual-scheduler-pump");
        thread.setDaemon(true);
        pump = thread;
        thread.start();
        return this;
    }

    /**
     * Tasks handed over ({@link #execute}) run at once on the caller's thread, so that a
     * preserver's calls have done their work when they return, without a test stepping
     * anything. One handed over while a task runs (its follow-up, or another thread's) waits
     * for it and is run by the same caller: tasks still run one at a time, as on the
     * preserver's thread. Delayed tasks, even those due now, still wait for
     * {@link #runReady} or {@link #advance}: a zero group-commit interval then flushes when the
     * caller says, not at every end. Not with {@link #pump}.
     */
    public ManualScheduler runningHandedOverAtOnce() {
        if (pump != null) {
            throw new IllegalStateException("a pumped scheduler runs tasks on its own thread");
        }
        atOnce = true;
        return this;
    }

    private synchronized boolean isShutDown() {
        return shutDown;
    }

    private final class Task implements Comparable<Task>, Cancellable {
        final long due;
        final long order = sequence++;
        final Runnable body;
        boolean cancelled;

        Task(long due, Runnable body) {
            this.due = due;
            this.body = body;
        }

        @Override
        public int compareTo(Task other) {
            int byDue = Long.compare(due, other.due);
            return byDue != 0 ? byDue : Long.compare(order, other.order);
        }

        @Override
        public void cancel() {
            synchronized (ManualScheduler.this) {
                cancelled = true;
            }
        }
    }

    @Override
    public synchronized long millis() {
        return wallClock != null ? wallClock.millis() : millis;
    }

    @Override
    public synchronized long nanoTime() {
        return nanos;
    }

    @Override
    public boolean execute(Runnable task) {
        synchronized (this) {
            if (shutDown) {
                return false;
            }
            if (!atOnce) {
                queue.add(new Task(nanos, task));
                return true;
            }
            handedOver.add(task);
            if (draining) {
                return true;
            }
            draining = true;
        }
        asOwner(() -> {
            runHandedOver();
            return null;
        });
        return true;
    }

    /** Runs {@code work} as the thread that runs tasks: one at a time, and the owner while it lasts. */
    private <T> T asOwner(java.util.function.Supplier<T> work) {
        running.lock();
        try {
            runner = Thread.currentThread();
            return work.get();
        } finally {
            running.unlock();
        }
    }

    /** Runs what was handed over until nothing is; the caller set {@code draining}. */
    private void runHandedOver() {
        try {
            while (true) {
                Runnable next;
                synchronized (this) {
                    next = handedOver.poll();
                    if (next == null) {
                        draining = false;
                        return;
                    }
                }
                next.run();
            }
        } catch (RuntimeException | Error e) {
            synchronized (this) {
                draining = false;
            }
            throw e;
        }
    }

    /** Runs a due task; in {@link #runningHandedOverAtOnce} mode, then what it handed over. */
    private void run(Runnable body) {
        if (!atOnce) {
            body.run();
            return;
        }
        synchronized (this) {
            draining = true;
            handedOver.addFirst(body);
        }
        runHandedOver();
    }

    @Override
    public synchronized Cancellable schedule(Runnable task, Duration delay) {
        Task scheduled = new Task(nanos + Math.max(0, delay.toNanos()), task);
        if (!shutDown) {
            queue.add(scheduled);
        }
        return scheduled;
    }

    /**
     * The thread running tasks now; with no pump, also the test's own thread, the last to run
     * tasks (a test drives some parts directly, as their tasks would), or any before the
     * first run: any other thread is not the owner.
     */
    @Override
    public boolean inOwnerThread() {
        if (running.isHeldByCurrentThread()) {
            return true;
        }
        Thread last = runner;
        return pump == null && (last == null || last == Thread.currentThread());
    }

    /** Blocking work runs at once on the caller's thread: the in-memory topics never block. */
    @Override
    public java.util.concurrent.Executor blockingExecutor(String threadName) {
        return Runnable::run;
    }

    @Override
    public synchronized void shutdown() {
        shutDown = true;
        queue.clear();
        handedOver.clear();
    }

    /** Runs every task due now, including those the tasks queue for now; returns how many ran. */
    public int runReady() {
        return asOwner(this::runDue);
    }

    private int runDue() {
        int ran = 0;
        while (true) {
            Task next;
            synchronized (this) {
                next = queue.peek();
                if (next == null || next.due > nanos) {
                    return ran;
                }
                queue.poll();
                if (next.cancelled) {
                    continue;
                }
            }
            run(next.body);
            ran++;
        }
    }

    /** Moves time forward by {@code step}, running each task when its time comes, in order. */
    public void advance(Duration step) {
        asOwner(() -> {
            advanceBy(step);
            return null;
        });
    }

    private void advanceBy(Duration step) {
        long target;
        synchronized (this) {
            target = nanos + step.toNanos();
        }
        runDue();
        while (true) {
            synchronized (this) {
                Task next = queue.peek();
                if (next == null || next.due > target) {
                    long moved = target - nanos;
                    nanos = target;
                    millis += moved / 1_000_000;
                    break;
                }
                long moved = next.due - nanos;
                nanos = next.due;
                millis += moved / 1_000_000;
            }
            runDue();
        }
        runDue();
    }

    /** Moves the wall clock only (an end time far from the others), not the monotonic time. */
    public synchronized void setMillis(long wallClockMillis) {
        millis = wallClockMillis;
    }

    /** Tasks waiting, due or not. */
    public synchronized int pending() {
        return (int) queue.stream().filter(task -> !task.cancelled).count() + handedOver.size();
    }
}
