package io.github.txnpreserver.preserver.kept;

import java.util.LinkedHashMap;
import java.util.Map;

/**
 * The outcomes lookups found last, answered again without the coordinator's thread. A retried
 * end asks about its transaction three times within milliseconds (the broker's status check,
 * the finishing step, the terminal step), each from off the thread, and each would wait up to
 * {@link io.github.txnpreserver.time.Scheduler#DEFER_BOUND} for it (and the first, for a cold
 * outcome, for its record's read): answered from here, only the first waits.
 *
 * <p>A kept outcome changes only when its transaction ends again here (a stale record of a
 * transaction that was still open is replaced): {@link #forget} then, on the caller's thread
 * and again on the coordinator's, where every answer is also found. Bounded in number ({@value #CAPACITY},
 * oldest first out: the broker's timeout tracker asks about every transaction at its timeout,
 * so entries live well under a second at full rate, longer than a retry takes) and in age
 * ({@link #MAX_AGE_NANOS}); an outcome within that of its time-to-live is asked of the thread.
 * About 40 KB per coordinator, outside the kept outcomes' bound.
 *
 * <p>Thread-safe.
 */
public final class RecentAnswers {

    static final int CAPACITY = 256;
    public static final long MAX_AGE_NANOS = 10_000_000_000L;

    private record Answered(KeptOutcome outcome, long atNanos) {
    }

    /**
     * How often each stripe of sequences was forgotten: a lookup notes its stripe's count when
     * it starts and keeps what it found only if the count has not moved, so that an outcome
     * read (from a cold record, say) before a decide changed it is not kept after the decide
     * forgot it. Striped, not per sequence: a neighbour's decide only costs a cached answer.
     */
    private static final int STRIPES = 1024;
    private final long[] forgotten = new long[STRIPES];

    private final Map<Long, Answered> answers = new LinkedHashMap<>(CAPACITY * 2) {
        @Override
        protected boolean removeEldestEntry(Map.Entry<Long, Answered> eldest) {
            return size() > CAPACITY;
        }
    };

    /** The outcome found for {@code sequence} at most {@link #MAX_AGE_NANOS} ago, or null. */
    public synchronized KeptOutcome get(long sequence, long nowNanos) {
        Answered answered = answers.get(sequence);
        return answered == null || nowNanos - answered.atNanos() > MAX_AGE_NANOS ? null : answered.outcome();
    }

    /** Noted when a lookup starts, and given to {@link #found} with what it found. */
    public synchronized long startLookUp(long sequence) {
        return forgotten[stripe(sequence)];
    }

    /** Kept unless the sequence may have been forgotten since its lookup started ({@code started}). */
    public synchronized void found(long sequence, long started, KeptOutcome outcome, long nowNanos) {
        if (forgotten[stripe(sequence)] == started) {
            answers.put(sequence, new Answered(outcome, nowNanos));
        }
    }

    /** The sequence's kept outcome is changing: asked again, the coordinator's thread answers. */
    public synchronized void forget(long sequence) {
        forgotten[stripe(sequence)]++;
        answers.remove(sequence);
    }

    private static int stripe(long sequence) {
        return (int) (sequence & (STRIPES - 1));
    }

    /** The coordinator closed here: its next owner answers. */
    public synchronized void clear() {
        answers.clear();
    }
}
