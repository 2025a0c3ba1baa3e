package io.github.txnpreserver.preserver.writer;

import java.time.Duration;

/**
 * How much new data the broker lets accumulate in a coordinator's state topic before it
 * compacts it: the topic's compaction threshold, sized to the compacted view.
 *
 * <p>Why: a system topic is compacted by the broker whenever its backlog since the last
 * compaction exceeds its compaction threshold, checked every
 * {@code brokerServiceCompactionMonitorIntervalInSeconds} (60 s); the broker-wide threshold
 * is 0, so the state topic would be compacted every minute it has a new record. Each run
 * reads the whole compacted view and the new entries twice and writes the view anew. The
 * view holds one record per kept block, so it grows with the retention window: a full
 * 64 MiB window is tens of MB, read twice and rewritten every minute, a cost per ended
 * transaction that grows with the window. With a threshold of at least the view's size, a
 * run happens only once as many new bytes as the view holds have been written, so each
 * new byte costs at most about six bytes of compaction I/O, however large the window.
 *
 * <p>The price: the uncompacted tail a restore reads besides the view is at most the
 * threshold (plus one monitor interval): a restore reads at most about three times the view.
 *
 * <p>The view's size is estimated from the records written and read (their mean size times
 * the number of keys); records written before a block fills are smaller than its final
 * one, so the estimate is low by up to half. The threshold is the next power of two at or
 * above it, never below {@link #MIN_THRESHOLD_BYTES}. It is raised as soon as the view
 * outgrows it, and lowered only once it is four times what the view needs: a view that
 * hovers around a power of two does not rewrite the topic's policy at every check.
 *
 * <p>A failed request is asked again at the next check, then after 2, 4, ... 32 checks,
 * then every 33; a topic recreated (its policies deleted with it) is asked for afresh.
 *
 * <p>Not thread-safe: confined to the coordinator's thread.
 */
public final class CompactionPacing {

    /**
     * The least threshold: under light load a 16 MiB tail takes hours to fill; under heavy
     * load it is a few minutes of records, and a restore reads it in about a second.
     */
    public static final long MIN_THRESHOLD_BYTES = 16L << 20;
    /** As often as the broker checks whether to compact. */
    public static final Duration CHECK_INTERVAL = Duration.ofSeconds(60);
    /** Weight of one more record in the running mean of record sizes. */
    private static final double MEAN_WEIGHT = 1.0 / 256;
    private static final int MAX_CHECKS_SKIPPED = 32;

    private double meanRecordBytes;
    private long applied = -1;
    /** The request in flight, or 0; an answer to another one (asked before a reset) is ignored. */
    private long inFlight;
    private long requests;
    private boolean unsupported;
    private int failures;
    private int checksToSkip;

    /** A block record was written or read, of this many bytes. */
    void recordSeen(int bytes) {
        meanRecordBytes = meanRecordBytes == 0 ? bytes : meanRecordBytes + MEAN_WEIGHT * (bytes - meanRecordBytes);
    }

    /** Records read by a restore: their count and total size. */
    public void recordsRead(long count, long bytes) {
        if (count > 0) {
            meanRecordBytes = (double) bytes / count;
        }
    }

    long estimatedViewBytes(long keys) {
        return (long) (meanRecordBytes * keys);
    }

    /** The threshold for a compacted view of this size. */
    static long thresholdFor(long viewBytes) {
        if (viewBytes <= MIN_THRESHOLD_BYTES) {
            return MIN_THRESHOLD_BYTES;
        }
        long power = Long.highestOneBit(viewBytes);
        return power == viewBytes ? power : power << 1;
    }

    /**
     * A request to set the threshold for a view of {@code keys} records now, or null if
     * none: the one set still fits, a request is in flight or backing off, or the topic
     * takes none.
     */
    Request nextRequest(long keys) {
        if (inFlight != 0 || unsupported) {
            return null;
        }
        if (checksToSkip > 0) {
            checksToSkip--;
            return null;
        }
        long wanted = thresholdFor(estimatedViewBytes(keys));
        if (applied > 0 && wanted <= applied && wanted > applied / 4) {
            return null;
        }
        inFlight = ++requests;
        return new Request(inFlight, wanted);
    }

    /** One request to set {@code bytes} as the threshold. */
    record Request(long id, long bytes) {
    }

    /** @return whether the answer was to the request in flight (else it is ignored) */
    boolean applied(Request request) {
        if (!answered(request)) {
            return false;
        }
        applied = request.bytes();
        failures = 0;
        return true;
    }

    /** The topic takes no compaction threshold (topic-level policies are off). */
    boolean unsupported(Request request) {
        if (!answered(request)) {
            return false;
        }
        unsupported = true;
        return true;
    }

    /** The request failed: asked again at the next check, then less and less often. */
    boolean failed(Request request) {
        if (!answered(request)) {
            return false;
        }
        checksToSkip = Math.min(MAX_CHECKS_SKIPPED, (1 << Math.min(failures, 6)) - 1);
        failures++;
        return true;
    }

    /** The topic was created again, its policies gone with the old one: the threshold is asked for afresh. */
    void reset() {
        applied = -1;
        inFlight = 0;
        checksToSkip = 0;
        failures = 0;
    }

    private boolean answered(Request request) {
        if (request.id() != inFlight) {
            return false;
        }
        inFlight = 0;
        return true;
    }

    /** The threshold in force, or -1 if none was set. */
    public long applied() {
        return applied;
    }
}
