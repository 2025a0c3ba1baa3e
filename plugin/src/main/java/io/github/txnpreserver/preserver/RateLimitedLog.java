package io.github.txnpreserver.preserver;

import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;
import java.util.function.LongConsumer;

/**
 * Reports a repeated event at most once per interval, with how many times it happened since
 * the last report: a state topic that is down or a memory bound that is reached must not
 * write a line per transaction.
 */
final class RateLimitedLog {

    private final long intervalNanos;
    private final AtomicLong nextReportNanos = new AtomicLong(Long.MIN_VALUE);
    private final AtomicLong unreported = new AtomicLong();

    RateLimitedLog(long interval, TimeUnit unit) {
        this.intervalNanos = unit.toNanos(interval);
    }

    /** Counts {@code times} occurrences; calls {@code report} with the count when a report is due. */
    void occurred(long times, LongConsumer report) {
        unreported.addAndGet(times);
        long now = System.nanoTime();
        long next = nextReportNanos.get();
        if ((next == Long.MIN_VALUE || now - next >= 0) && nextReportNanos.compareAndSet(next, now + intervalNanos)) {
            report.accept(unreported.getAndSet(0));
        }
    }
}
