package io.github.txnpreserver.store;

import java.util.LinkedHashMap;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;

/**
 * A coordinator's transactions whose abort its timeout began (docs/DESIGN.md,
 * "Timeout-aborts"): those still finishing, so that their end is kept as
 * {@link io.github.txnpreserver.preserver.kept.Outcome#TIMED_OUT}, and, for the warning a commit of
 * one of them logs, the timeouts of the newest that ended and the ones already warned about.
 *
 * <p>Which abort the timeout began is known exactly from the broker's {@code isTimeout} while
 * the coordinator stays up; after a restart mid-abort, the replayed log says it: an abort whose
 * finishing entry is no earlier than the transaction's open time plus its timeout.
 */
final class TimeoutAborts {

    /** Ended timeout-aborts whose timeout a warning can still name, and commits already warned about. */
    private static final int REMEMBERED = 4096;

    /** Finishing timeout-aborts: when the timeout began each. */
    private final Map<Long, Long> finishing = new ConcurrentHashMap<>();
    private final Map<Long, Long> timeoutOfEnded = bounded();
    private final Map<Long, Boolean> warned = bounded();

    /** The timeout began this transaction's abort at {@code atMillis}; it is finishing. */
    void began(long sequence, long atMillis) {
        finishing.put(sequence, atMillis);
    }

    boolean isFinishing(long sequence) {
        return finishing.containsKey(sequence);
    }

    /** When the timeout began a finishing abort, or 0 if it is not one. */
    long beganAt(long sequence) {
        Long at = finishing.get(sequence);
        return at == null ? 0 : at;
    }

    /** The transaction is no longer finishing here (ended, or its abort was not the timeout's). */
    void ended(long sequence) {
        finishing.remove(sequence);
    }

    /** A timeout-abort's outcome is kept: its timeout is remembered for the warnings of later commits. */
    void endedOnTimeout(long sequence, long timeoutMillis) {
        finishing.remove(sequence);
        if (timeoutMillis > 0) {
            synchronized (timeoutOfEnded) {
                timeoutOfEnded.put(sequence, timeoutMillis);
            }
        }
    }

    /** The timeout of a timeout-abort that ended here recently, or 0 if not known any more. */
    long timeoutOf(long sequence) {
        synchronized (timeoutOfEnded) {
            Long timeout = timeoutOfEnded.get(sequence);
            return timeout == null ? 0 : timeout;
        }
    }

    /** Whether a commit of this transaction is the first to be warned about. */
    boolean firstWarning(long sequence) {
        synchronized (warned) {
            return warned.put(sequence, Boolean.TRUE) == null;
        }
    }

    /** An abort began at {@code abortMillis} of a transaction opened at {@code openMillis} with this timeout. */
    static boolean pastTimeout(long openMillis, long timeoutMillis, long abortMillis) {
        return timeoutMillis > 0 && openMillis > 0 && abortMillis - openMillis >= timeoutMillis;
    }

    private static <V> Map<Long, V> bounded() {
        return new LinkedHashMap<>(16, 0.75f, true) {
            @Override
            protected boolean removeEldestEntry(Map.Entry<Long, V> eldest) {
                return size() > REMEMBERED;
            }
        };
    }
}
