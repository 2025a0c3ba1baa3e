package io.github.txnpreserver.preserver;

import io.github.txnpreserver.config.PreserverConfig;
import io.github.txnpreserver.statetopic.MalformedRecordException;
import io.github.txnpreserver.statetopic.StateRecordCodec;
import io.github.txnpreserver.statetopic.StateTopic;
import it.unimi.dsi.fastutil.longs.LongArrayList;
import java.time.Clock;
import java.time.Duration;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.Executor;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CompletionException;
import java.util.concurrent.RejectedExecutionException;
import java.util.concurrent.ScheduledExecutorService;
import java.util.concurrent.ScheduledFuture;
import java.util.concurrent.TimeUnit;
import org.apache.pulsar.client.api.transaction.TxnID;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * Keeps the outcomes of one coordinator's ended transactions (PIP-255's
 * TransactionMetadataPreserver): in memory, bounded by {@link KeptOutcomes}, and durable in
 * the coordinator's compacted state topic, from which it restores them when the
 * coordinator opens.
 *
 * <p>The memory holds only what is durable: an outcome is admitted once its record is
 * written. Evictions and expirations write tombstones; a tombstone write that fails is
 * retried with backoff until it lands. One that is lost anyway (the broker stops first)
 * costs nothing but space: restore applies the same limits again and re-deletes.
 */
public final class TransactionMetadataPreserver {

    private static final Logger log = LoggerFactory.getLogger(TransactionMetadataPreserver.class);
    private static final long FIRST_RETRY_DELAY_MILLIS = 100;
    private static final long MAX_RETRY_DELAY_MILLIS = 30_000;

    private final long coordinatorId;
    private final PreserverConfig config;
    private final StateTopic stateTopic;
    private final Clock clock;
    private final ScheduledExecutorService executor;
    private final KeptOutcomes kept;
    private final PreserverStats stats = new PreserverStats();
    private final List<ScheduledFuture<?>> periodicTasks = new CopyOnWriteArrayList<>();
    private volatile boolean closed;

    public TransactionMetadataPreserver(long coordinatorId, PreserverConfig config, StateTopic stateTopic,
                                        Clock clock, ScheduledExecutorService executor) {
        this.coordinatorId = coordinatorId;
        this.config = config;
        this.stateTopic = stateTopic;
        this.clock = clock;
        this.executor = executor;
        this.kept = new KeptOutcomes(coordinatorId, config.persistCountPerClient(),
                config.maxKeptPerCoordinator(), config.persistTime().toMillis());
    }

    /**
     * Loads the kept outcomes from the state topic. Tombstones remove earlier records; expired
     * records and those past the limits are deleted again; malformed ones are logged, counted
     * and skipped.
     */
    public CompletableFuture<Void> restore() {
        long startNanos = System.nanoTime();
        // A JDK linked map: fastutil's primitive-keyed one measured 1.5-2x slower here (its
        // rehash walks the links), boxing notwithstanding.
        Map<Long, KeptOutcome> survivors = new LinkedHashMap<>();
        long[] read = new long[1];
        return stateTopic.readToEnd((key, value) -> {
            read[0]++;
            collectRestored(survivors, key, value);
        }, executor).thenRun(() -> {
            admitRestored(survivors);
            stats.restoredRecords = read[0];
            stats.restoreMillis = TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - startNanos);
            log.info("Coordinator {}: restored {} kept transaction outcomes from {} state-topic records in {} ms"
                    + " ({} malformed records skipped)", coordinatorId, kept.size(), read[0], stats.restoreMillis,
                    stats.malformedRecords.sum());
        });
    }

    /** Starts the periodic expiry. */
    public void start() {
        scheduleWithFixedDelay(this::expire, config.expireCheckInterval());
    }

    /**
     * Runs a task periodically on this coordinator's preserver executor until close; a task
     * that throws is logged and runs again at its next time.
     */
    public void scheduleWithFixedDelay(Runnable task, Duration interval) {
        long millis = interval.toMillis();
        periodicTasks.add(executor.scheduleWithFixedDelay(() -> runSafely(task), millis, millis,
                TimeUnit.MILLISECONDS));
    }

    /** The single thread on which this coordinator's periodic work runs. */
    public Executor executor() {
        return executor;
    }

    /**
     * Makes an outcome durable in the state topic, then keeps it in memory.
     *
     * @return completes once the record is durable and kept; fails if the write failed, in
     *     which case nothing is kept and the caller must retry
     */
    public CompletableFuture<Void> preserve(TxnID txnId, Outcome outcome, String owner) {
        return persist(txnId, outcome, owner).thenAccept(this::keep);
    }

    /**
     * Writes an outcome record to the state topic, without keeping it in memory yet: the
     * coordinator writes the record as early as it can, and keeps the outcome only once it
     * is decided ({@link #keep}).
     *
     * @return the outcome, once its record is durable; fails if the write failed
     */
    public CompletableFuture<KeptOutcome> persist(TxnID txnId, Outcome outcome, String owner) {
        KeptOutcome record = new KeptOutcome(txnId, outcome, owner, clock.millis());
        long startNanos = System.nanoTime();
        return stateTopic.write(StateRecordCodec.keyOf(txnId), StateRecordCodec.encode(record))
                .handle((ignored, error) -> {
                    stats.stateWriteLatency.recordNanos(System.nanoTime() - startNanos);
                    if (error != null) {
                        stats.recordWriteFailures.increment();
                        log.warn("Coordinator {}: could not make the outcome of {} durable; the end of the"
                                + " transaction will be retried", coordinatorId, txnId, error);
                        throw new CompletionException(error);
                    }
                    return record;
                });
    }

    /** Keeps a decided outcome whose record is durable, evicting what the limits no longer allow. */
    public void keep(KeptOutcome outcome) {
        deleteAll(kept.admit(outcome.txnId(), outcome.outcome(), outcome.owner(), outcome.endTimeMillis()));
    }

    /** The kept outcome of a transaction, or null if none is kept. Never blocks. */
    public KeptOutcome find(TxnID txnId) {
        return kept.get(txnId);
    }

    /** The kept outcome of a transaction the coordinator no longer has live, counted as a lookup. */
    public KeptOutcome lookUp(TxnID txnId) {
        KeptOutcome keptOutcome = kept.get(txnId);
        if (keptOutcome != null) {
            stats.keptLookups.increment();
        }
        return keptOutcome;
    }

    /** Drops the outcomes past their time-to-live, from memory and from the state topic. */
    public void expire() {
        deleteAll(kept.expire(clock.millis()));
    }

    public int keptCount() {
        return kept.size();
    }

    public KeptOutcomes keptOutcomes() {
        return kept;
    }

    public PreserverStats stats() {
        return stats;
    }

    public long coordinatorId() {
        return coordinatorId;
    }

    public CompletableFuture<Void> closeAsync() {
        closed = true;
        periodicTasks.forEach(task -> task.cancel(false));
        executor.shutdown();
        kept.clear();
        return stateTopic.closeAsync();
    }

    private void collectRestored(Map<Long, KeptOutcome> survivors, String key, byte[] value) {
        try {
            TxnID txnId = StateRecordCodec.parseKey(key);
            if (txnId.getMostSigBits() != coordinatorId) {
                throw new MalformedRecordException("key '" + key + "' belongs to another coordinator");
            }
            if (value == null) {
                survivors.remove(txnId.getLeastSigBits());
                return;
            }
            KeptOutcome restored = StateRecordCodec.decode(key, value);
            // A re-written outcome takes its latest place in the order.
            // Re-insert so that a re-written outcome takes its latest place in the order.
            survivors.remove(txnId.getLeastSigBits());
            survivors.put(txnId.getLeastSigBits(), restored);
        } catch (MalformedRecordException e) {
            stats.malformedRecords.increment();
            log.warn("Coordinator {}: skipping malformed state-topic record: {}", coordinatorId, e.getMessage());
        }
    }

    private void admitRestored(Map<Long, KeptOutcome> survivors) {
        long now = clock.millis();
        LongArrayList toDelete = new LongArrayList();
        for (KeptOutcome restored : survivors.values()) {
            if (kept.isExpired(restored.endTimeMillis(), now)) {
                toDelete.add(restored.txnId().getLeastSigBits());
            } else {
                toDelete.addElements(toDelete.size(), kept.admit(restored.txnId(), restored.outcome(), restored.owner(),
                        restored.endTimeMillis()));
            }
        }
        deleteAll(toDelete.toLongArray());
    }

    private void runSafely(Runnable task) {
        try {
            task.run();
        } catch (RuntimeException e) {
            log.error("Coordinator {}: periodic task failed", coordinatorId, e);
        }
    }

    private void deleteAll(long[] sequences) {
        for (long sequence : sequences) {
            deleteUntilDurable(new TxnID(coordinatorId, sequence), FIRST_RETRY_DELAY_MILLIS);
        }
    }

    private void deleteUntilDurable(TxnID txnId, long nextDelayMillis) {
        if (closed) {
            return;
        }
        stateTopic.delete(StateRecordCodec.keyOf(txnId)).exceptionally(error -> {
            if (closed) {
                return null;
            }
            stats.tombstoneWriteRetries.increment();
            log.warn("Coordinator {}: tombstone for {} failed, retrying in {} ms: {}", coordinatorId, txnId,
                    nextDelayMillis, error.toString());
            try {
                executor.schedule(() -> deleteUntilDurable(txnId, Math.min(nextDelayMillis * 2,
                        MAX_RETRY_DELAY_MILLIS)), nextDelayMillis, TimeUnit.MILLISECONDS);
            } catch (RejectedExecutionException shuttingDown) {
                log.debug("Coordinator {}: not retrying tombstone for {}, shutting down", coordinatorId, txnId);
            }
            return null;
        });
    }
}
