package io.github.txnpreserver.bench;

import io.github.txnpreserver.time.Scheduler;
import java.time.Duration;
import java.util.ArrayDeque;
import java.util.PriorityQueue;

/**
 * A {@link Scheduler} without a thread of its own, for figures of the preserver's code in
 * this JVM: {@link #execute} runs the task at once on the calling thread, so that a
 * preserver's {@code decide}, {@code ended} and {@code afterOutcomeDurable} have done their work when
 * they return. A task handed over while another runs (a task's own follow-up, or a reading
 * thread's completion) waits for it and is run by the same caller, so tasks still run one at
 * a time, as on the preserver's thread.
 *
 * <p>Delayed tasks (group-commit flushes, periodic checks) run only when the caller asks,
 * once due: {@link #runDue}, or {@link #advance} which moves this scheduler's time forward.
 * Time is the system's, plus what {@link #advance} added.
 */
final class DirectScheduler implements Scheduler {

    private final ArrayDeque<Runnable> ready = new ArrayDeque<>();
    private final PriorityQueue<Delayed> delayed = new PriorityQueue<>();
    private long offsetNanos;
    private long order;
    private boolean running;
    private boolean shutDown;

    private final class Delayed implements Comparable<Delayed>, Cancellable {
        final long due;
        final long sequence = order++;
        final Runnable body;
        boolean cancelled;

        Delayed(long due, Runnable body) {
            this.due = due;
            this.body = body;
        }

        @Override
        public int compareTo(Delayed other) {
            int byDue = Long.compare(due, other.due);
            return byDue != 0 ? byDue : Long.compare(sequence, other.sequence);
        }

        @Override
        public void cancel() {
            synchronized (DirectScheduler.this) {
                cancelled = true;
            }
        }
    }

    @Override
    public synchronized long millis() {
        return System.currentTimeMillis() + offsetNanos / 1_000_000;
    }

    @Override
    public synchronized long nanoTime() {
        return System.nanoTime() + offsetNanos;
    }

    @Override
    public boolean execute(Runnable task) {
        synchronized (this) {
            if (shutDown) {
                return false;
            }
            ready.add(task);
        }
        drain();
        return true;
    }

    /** Tasks run on whichever thread hands them over, one at a time: every caller is the owner. */
    @Override
    public boolean inOwnerThread() {
        return true;
    }

    @Override
    public synchronized Cancellable schedule(Runnable task, Duration delay) {
        Delayed scheduled = new Delayed(nanoTime() + Math.max(0, delay.toNanos()), task);
        if (!shutDown) {
            delayed.add(scheduled);
        }
        return scheduled;
    }

    /** The in-memory topics of the benchmark never block: their reads run inline. */
    @Override
    public java.util.concurrent.Executor blockingExecutor(String threadName) {
        return Runnable::run;
    }

    @Override
    public synchronized void shutdown() {
        shutDown = true;
        ready.clear();
        delayed.clear();
    }

    /** Runs every delayed task due when called, in due order, and what they hand over. */
    void runDue() {
        long now = nanoTime();
        while (true) {
            synchronized (this) {
                if (delayed.isEmpty() || delayed.peek().due > now) {
                    return;
                }
                Delayed next = delayed.poll();
                if (next.cancelled) {
                    continue;
                }
                ready.add(next.body);
            }
            drain();
        }
    }

    /** Moves time forward by {@code step}, then runs what is due. */
    void advance(Duration step) {
        synchronized (this) {
            offsetNanos += step.toNanos();
        }
        runDue();
    }

    /** Runs the ready tasks, unless a caller already does (it runs those handed over meanwhile). */
    private void drain() {
        synchronized (this) {
            if (running) {
                return;
            }
            running = true;
        }
        try {
            while (true) {
                Runnable next;
                synchronized (this) {
                    next = ready.poll();
                    if (next == null) {
                        running = false;
                        return;
                    }
                }
                next.run();
            }
        } catch (RuntimeException | Error e) {
            synchronized (this) {
                running = false;
            }
            throw e;
        }
    }
}
