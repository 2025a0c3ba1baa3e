package io.github.txnpreserver.preserver.stats;

import java.util.concurrent.atomic.LongAdder;

/** Counters of one coordinator's preserver, read by tests and by the metrics exporter. */
public final class PreserverStats {

    /** State-topic records skipped because they could not be interpreted. */
    public final LongAdder malformedRecords = new LongAdder();
    /** State-topic block writes that failed (each block is written again after its backoff). */
    public final LongAdder recordWriteFailures = new LongAdder();
    /** Records read by the last restore, tombstones and skipped ones included. */
    public volatile long restoredRecords;
    /** Duration of the last restore. */
    public volatile long restoreMillis;
    /** When the restore in progress began ({@code Scheduler#nanoTime}); meaningful while {@link #restoring}. */
    public volatile long restoreStartNanos;
    /** When the last restore ended, wall-clock millis; 0 before the first. */
    public volatile long restoreEndMillis;
    /** A restore from the state topic is in progress. */
    public volatile boolean restoring;
    /** Malformed records the last restore skipped (the topic keeps them: each restore skips them again). */
    public volatile long restoreMalformedRecords;
    /** Retried commits and aborts answered from a kept outcome, by outcome. */
    public final LongAdder retriesAnsweredCommitted = new LongAdder();
    public final LongAdder retriesAnsweredAborted = new LongAdder();
    /** Transactions the coordinator aborted on their timeout, kept as such. */
    public final LongAdder timeoutAborts = new LongAdder();
    /** Commits refused because the coordinator had aborted the transaction on its timeout. */
    public final LongAdder commitsAfterTimeoutAbort = new LongAdder();
    /**
     * Lookups of transactions answered from a kept outcome: every retry (two or three per
     * request) and admin lookups. A retry that conflicts with the outcome is refused by the
     * broker before any plugin hook sees the request (END_TXN reaches no broker interceptor
     * in 4.0.x), so conflicts cannot be counted apart; this is their upper bound.
     */
    public final LongAdder keptLookups = new LongAdder();
    /** Lookups answered from a cold block's record (also counted in {@link #keptLookups}). */
    public final LongAdder coldLookups = new LongAdder();
    /** Cold records read from the state topic, answered from the last ones read, and reads that failed. */
    public final LongAdder coldReads = new LongAdder();
    public final LongAdder coldReadsCached = new LongAdder();
    public final LongAdder coldReadFailures = new LongAdder();
    /** Time to read a cold block's record. */
    public final LatencyHistogram coldReadLatency = new LatencyHistogram();
    /** Time to make an outcome durable in the state topic. */
    public final LatencyHistogram stateWriteLatency = new LatencyHistogram();
    /** Background re-drives of transactions stuck finishing. */
    public final LongAdder stuckRedrives = new LongAdder();
    /**
     * Attempts to replace a state-topic writer that could write no more or was wedged, and
     * releases of the coordinator because another writer took the topic over or this broker
     * no longer owns it.
     */
    public final LongAdder writerReplacements = new LongAdder();
    /** Terminal steps refused at once ("coordinator not found") because too many ends were waiting for the state topic. */
    public final LongAdder endsRefusedWhileWaiting = new LongAdder();
}
