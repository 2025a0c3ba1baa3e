package io.github.txnpreserver.preserver.thread;

import java.util.concurrent.TimeUnit;
import java.util.function.LongConsumer;
import java.util.function.LongSupplier;

/**
 * Reports a repeated event at most once per interval, with how many times it happened since
 * the last report: a state topic that is down or a memory bound that is reached must not
 * write a line per transaction. Confined to its coordinator's thread.
 */
public final class RateLimitedLog {

    private final LongSupplier nanoTime;
    private final long intervalNanos;
    private boolean reported;
    private long nextReportNanos;
    private long unreported;

    public RateLimitedLog(LongSupplier nanoTime, long interval, TimeUnit unit) {
        this.nanoTime = nanoTime;
        this.intervalNanos = unit.toNanos(interval);
    }

    /** Counts {@code times} occurrences; calls {@code report} with the count when a report is due. */
    public void occurred(long times, LongConsumer report) {
        unreported += times;
        long now = nanoTime.getAsLong();
        if (!reported || now - nextReportNanos >= 0) {
            reported = true;
            nextReportNanos = now + intervalNanos;
            long count = unreported;
            unreported = 0;
            report.accept(count);
        }
    }
}
