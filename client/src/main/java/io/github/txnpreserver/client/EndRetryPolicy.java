package io.github.txnpreserver.client;

import java.time.Duration;

/**
 * How long an end request is sent again while the coordinator gives no answer (not reachable,
 * moving to another broker, restarting, or not able to persist the outcome yet): with a
 * backoff from {@code firstBackoff} doubling up to {@code maxBackoff}, until
 * {@code giveUpAfter} has passed since the first attempt; an attempt that gets no answer
 * within {@code attemptTimeout} counts as unanswered (the client does not complete a
 * request that is in flight when it closes).
 *
 * <p>Sending an end again is always safe: a coordinator keeping outcomes answers a repeated
 * request with the same outcome, and one that does not answers "unknown" at worst.
 */
public record EndRetryPolicy(Duration firstBackoff, Duration maxBackoff, Duration giveUpAfter,
                             Duration attemptTimeout) {

    /**
     * 100 ms doubling to 5 s, for up to 2 minutes: longer than a broker restart or a
     * coordinator's move; an attempt unanswered after 60 s (twice the client's default
     * operation timeout) counts as unanswered.
     */
    public static final EndRetryPolicy DEFAULT = new EndRetryPolicy(Duration.ofMillis(100), Duration.ofSeconds(5),
            Duration.ofMinutes(2), Duration.ofSeconds(60));

    public EndRetryPolicy {
        if (firstBackoff.isNegative() || firstBackoff.isZero()) {
            throw new IllegalArgumentException("firstBackoff must be positive: " + firstBackoff);
        }
        if (maxBackoff.compareTo(firstBackoff) < 0) {
            throw new IllegalArgumentException("maxBackoff " + maxBackoff + " is below firstBackoff " + firstBackoff);
        }
        if (giveUpAfter.isNegative()) {
            throw new IllegalArgumentException("giveUpAfter must not be negative: " + giveUpAfter);
        }
        if (attemptTimeout.isNegative() || attemptTimeout.isZero()) {
            // A request in flight when its client closes is never completed by the client.
            throw new IllegalArgumentException("attemptTimeout must be positive: " + attemptTimeout);
        }
    }

    Duration backoffAfter(Duration previous) {
        if (previous == null) {
            return firstBackoff;
        }
        Duration doubled = previous.multipliedBy(2);
        return doubled.compareTo(maxBackoff) > 0 ? maxBackoff : doubled;
    }
}
