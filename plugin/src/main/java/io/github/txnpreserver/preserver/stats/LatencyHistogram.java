package io.github.txnpreserver.preserver.stats;

import java.util.concurrent.atomic.LongAdder;

/** A lock-free latency histogram with fixed millisecond buckets, which the metrics export as a Prometheus histogram. */
public final class LatencyHistogram {

    /** Upper bounds in milliseconds; a last, implicit bucket is +Inf. */
    static final double[] BOUNDS_MILLIS = {1, 2, 5, 10, 20, 50, 100, 200, 500, 1000, 5000, 30000};

    private final LongAdder[] buckets = new LongAdder[BOUNDS_MILLIS.length + 1];
    private final LongAdder count = new LongAdder();
    private final LongAdder sumMicros = new LongAdder();

    public LatencyHistogram() {
        for (int i = 0; i < buckets.length; i++) {
            buckets[i] = new LongAdder();
        }
    }

    public void recordNanos(long nanos) {
        double millis = nanos / 1_000_000.0;
        int bucket = 0;
        while (bucket < BOUNDS_MILLIS.length && millis > BOUNDS_MILLIS[bucket]) {
            bucket++;
        }
        buckets[bucket].increment();
        count.increment();
        sumMicros.add(nanos / 1000);
    }

    public long count() {
        return count.sum();
    }

    public double sumSeconds() {
        return sumMicros.sum() / 1_000_000.0;
    }

    /** The upper bound of bucket {@code i} in seconds, {@code +Inf} for the last. */
    public static double upperBoundSeconds(int i) {
        return i < BOUNDS_MILLIS.length ? BOUNDS_MILLIS[i] / 1000.0 : Double.POSITIVE_INFINITY;
    }

    /** Cumulative counts per bucket, the last one being +Inf. */
    public long[] cumulativeCounts() {
        long[] cumulative = new long[buckets.length];
        long running = 0;
        for (int i = 0; i < buckets.length; i++) {
            running += buckets[i].sum();
            cumulative[i] = running;
        }
        return cumulative;
    }
}
