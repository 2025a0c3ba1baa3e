package io.github.txnpreserver.bench;

/**
 * The intended start times of an open-loop run: transaction {@code k} (0, 1, 2, ...) is intended
 * to start at {@code start + k / rate}, whatever happened to the transactions before it, and
 * goes to client connection {@code k mod clients}. Each time is computed from {@code k}, not
 * by adding an interval to the previous one, so rounding does not drift over a long run.
 * Latency is measured from these times, not from when a transaction actually started: a
 * transaction queued behind a slow one (or behind a late load generator) counts its wait, so
 * the histogram is free of coordinated omission.
 */
final class OpenLoopSchedule {

    private final long startNanos;
    private final double txnPerSecond;

    OpenLoopSchedule(long startNanos, double txnPerSecond) {
        if (!(txnPerSecond > 0) || Double.isInfinite(txnPerSecond)) {
            throw new IllegalArgumentException("rate " + txnPerSecond + " txn/s");
        }
        this.startNanos = startNanos;
        this.txnPerSecond = txnPerSecond;
    }

    /** The intended start of transaction {@code index}, in {@link System#nanoTime()}'s terms. */
    long intendedStart(long index) {
        if (index < 0) {
            throw new IllegalArgumentException("index " + index);
        }
        return startNanos + (long) Math.floor(index * 1e9 / txnPerSecond);
    }

    /** The index of the first transaction intended to start at or after {@code nanos}. */
    long firstIndexAtOrAfter(long nanos) {
        if (nanos - startNanos <= 0) {
            return 0;
        }
        long index = (long) Math.ceil((nanos - startNanos) * txnPerSecond / 1e9);
        // Floating point may land one off either way; settle it on the exact times.
        while (index > 0 && intendedStart(index - 1) - nanos >= 0) {
            index--;
        }
        while (intendedStart(index) - nanos < 0) {
            index++;
        }
        return index;
    }

    /** The client connection transaction {@code index} goes to: round robin. */
    static int client(long index, int clients) {
        return (int) (index % clients);
    }
}
