package io.github.txnpreserver.time;

import java.time.Duration;

/**
 * The one retry policy of the plugin: the first delay after a failure, doubled after each
 * failure that follows, up to a ceiling. A failing step keeps its current delay (0 before the
 * first failure, and again after a success) and asks for the next one here, so that a
 * writer's replacement, a block's write, the restore's read and a stuck transaction's
 * re-drive all back off alike.
 */
public final class Backoff {

    private final long firstNanos;
    private final long maxNanos;

    public Backoff(Duration first, Duration max) {
        if (first.isNegative() || first.isZero() || max.compareTo(first) < 0) {
            throw new IllegalArgumentException("a backoff needs 0 < first <= max, not " + first + " and " + max);
        }
        this.firstNanos = first.toNanos();
        this.maxNanos = max.toNanos();
    }

    /** The delay after a failure, given the delay before it ({@code 0} if the last step succeeded). */
    public long nextNanos(long currentNanos) {
        if (currentNanos <= 0) {
            return firstNanos;
        }
        return currentNanos >= maxNanos / 2 ? maxNanos : currentNanos * 2;
    }

    /** As {@link #nextNanos}, for a step that keeps its delay as a {@link Duration} ({@link Duration#ZERO} at first). */
    public Duration next(Duration current) {
        return Duration.ofNanos(nextNanos(current.toNanos()));
    }

    public Duration first() {
        return Duration.ofNanos(firstNanos);
    }

    public Duration max() {
        return Duration.ofNanos(maxNanos);
    }
}
