package io.github.txnpreserver.preserver;

import io.github.txnpreserver.config.PreserverConfig;
import io.github.txnpreserver.statetopic.MalformedRecordException;
import io.github.txnpreserver.statetopic.StateRecordCodec;
import io.github.txnpreserver.statetopic.StateRecordCodec.StoredRecord;
import io.github.txnpreserver.statetopic.StateTopic;
import java.time.Clock;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Collection;
import java.util.HashMap;
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
 * written, in its client's next slot ({@link KeptOutcomes}), where it overwrites the
 * client's oldest outcome. Expirations and the coordinator limit write tombstones; a
 * tombstone write that fails is retried with backoff until it lands, unless a newer record
 * has taken the slot meanwhile. One that is lost anyway (the broker stops first) costs
 * nothing but space: restore applies the same limits again and re-deletes.
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
    /** Taking a slot and writing its key, or checking a slot is empty and deleting its key, happen in this order. */
    private final Object writeOrder = new Object();
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
     * Loads the kept outcomes from the state topic. Tombstones and newer records under the
     * same key replace earlier ones; expired records and those past the limits are deleted
     * again; records of a client whose slots no longer fit the configured count (it changed,
     * or they were written per transaction by version 0.1) are moved into new slots;
     * malformed ones are logged, counted and skipped.
     */
    public CompletableFuture<Void> restore() {
        long startNanos = System.nanoTime();
        // A JDK linked map: fastutil's linked maps measured 1.5-2x slower here (their rehash
        // walks the links).
        Map<String, StoredRecord> survivors = new LinkedHashMap<>();
        long[] read = new long[1];
        return stateTopic.readToEnd((key, value) -> {
            read[0]++;
            collectRestored(survivors, key, value);
        }, executor).thenRun(() -> {
            List<StateWrite> writes = new RestorePlan(survivors.values()).admit();
            writes.forEach(this::send);
            stats.restoredRecords = read[0];
            stats.restoreMillis = TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - startNanos);
            log.info("Coordinator {}: restored {} kept transaction outcomes from {} state-topic records in {} ms"
                    + " ({} malformed records skipped, {} records moved or deleted)", coordinatorId, kept.size(),
                    read[0], stats.restoreMillis, stats.malformedRecords.sum(), writes.size());
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
        return persist(txnId, outcome, owner, null).durable().thenAccept(this::keep);
    }

    /**
     * Writes an outcome record to the state topic without keeping it in memory yet: the
     * coordinator writes the record as early as it can, and keeps the outcome only once it
     * is decided ({@link #keep}).
     *
     * <p>The record takes the client's next slot, and the outcome that held it is no longer
     * kept: the record overwrites it. A record that supersedes an earlier one of the same
     * transaction (a racing end towards the other outcome wrote last, or the earlier write
     * failed) reuses its slot while no later record has taken it, so that it overwrites it:
     * a transaction's records never tell two outcomes.
     *
     * @param supersedes the transaction's earlier record, or null
     */
    public Persisting persist(TxnID txnId, Outcome outcome, String owner, Persisting supersedes) {
        KeptOutcome record = new KeptOutcome(txnId, outcome, owner, clock.millis());
        byte[] value = StateRecordCodec.encode(record);
        long startNanos = System.nanoTime();
        KeptOutcomes.Reservation slot;
        CompletableFuture<Void> write;
        synchronized (writeOrder) {
            slot = supersedes != null && kept.isCurrent(supersedes.slot()) ? supersedes.slot() : kept.reserve(owner);
            write = stateTopic.write(StateRecordCodec.slotKey(owner, slot.slot()), value);
        }
        return new Persisting(slot, write.handle((ignored, error) -> {
            stats.stateWriteLatency.recordNanos(System.nanoTime() - startNanos);
            if (error != null) {
                stats.recordWriteFailures.increment();
                log.warn("Coordinator {}: could not make the outcome of {} durable; the end of the"
                        + " transaction will be retried", coordinatorId, txnId, error);
                throw new CompletionException(error);
            }
            return new Persisted(record, slot);
        }));
    }

    /**
     * Keeps a decided outcome whose record is durable, deleting what the coordinator limit
     * no longer allows, and the transaction's earlier slot if it was kept in another one.
     */
    public void keep(Persisted persisted) {
        KeptOutcome outcome = persisted.outcome();
        List<KeptOutcomes.SlotMark> vacated = new ArrayList<>(0);
        if (!kept.admit(outcome.txnId(), outcome.outcome(), outcome.endTimeMillis(), persisted.slot(), vacated)) {
            log.debug("Coordinator {}: the slot of {} was taken by a newer record of its client before its end"
                    + " was decided; its outcome is not kept", coordinatorId, outcome.txnId());
        }
        vacated.forEach(this::deleteVacated);
    }

    /** An outcome whose record is durable in a client's slot. */
    public record Persisted(KeptOutcome outcome, KeptOutcomes.Reservation slot) {
    }

    /** An outcome record being written: its slot, and its durability (fails if the write failed). */
    public record Persisting(KeptOutcomes.Reservation slot, CompletableFuture<Persisted> durable) {
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
        kept.expire(clock.millis()).forEach(this::deleteVacated);
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

    private void collectRestored(Map<String, StoredRecord> survivors, String key, byte[] value) {
        if (value == null) {
            survivors.remove(key);
            return;
        }
        try {
            StoredRecord restored = StateRecordCodec.decode(key, value);
            if (restored.outcome().txnId().getMostSigBits() != coordinatorId) {
                throw new MalformedRecordException("record under key '" + key + "' is of "
                        + restored.outcome().txnId() + ", not of coordinator " + coordinatorId);
            }
            // Re-insert so that a rewritten key takes its latest place in the order.
            survivors.remove(key);
            survivors.put(key, restored);
        } catch (MalformedRecordException e) {
            survivors.remove(key);
            stats.malformedRecords.increment();
            log.warn("Coordinator {}: skipping malformed state-topic record: {}", coordinatorId, e.getMessage());
        }
    }

    /**
     * Admits restored records in log order. A client whose records sit in consecutive slots
     * ({@code s, s+1, ...} modulo the count) keeps them in place; any other layout (the count
     * changed, or 0.1's per-transaction keys) is moved to slots {@code 0..n-1}, its newest
     * {@code count} records only, and its old keys are deleted unless a moved record
     * overwrites them. The writes are listed in the order they must land.
     */
    private final class RestorePlan {

        private final Collection<StoredRecord> survivors;
        private final Map<String, ClientLayout> layouts = new HashMap<>();
        private final ClientLayout withoutOwner = new ClientLayout();
        private final List<StateWrite> writes = new ArrayList<>();
        private final List<KeptOutcomes.SlotMark> vacated = new ArrayList<>();
        private final long now = clock.millis();

        RestorePlan(Collection<StoredRecord> survivors) {
            this.survivors = survivors;
        }

        List<StateWrite> admit() {
            int limit = kept.perClientLimit();
            for (StoredRecord record : survivors) {
                if (!isExpired(record)) {
                    layoutOf(record.outcome().owner()).observe(record.key().slot(), limit);
                }
            }
            for (StoredRecord record : survivors) {
                ClientLayout layout = layoutOf(record.outcome().owner());
                if (isExpired(record)) {
                    deleteUnlessMovedOnto(record.key(), layout);
                } else if (layout.inPlace) {
                    restoreInto(record.outcome(), record.key().slot());
                } else {
                    move(record, layout);
                }
            }
            return writes;
        }

        private void move(StoredRecord record, ClientLayout layout) {
            layout.seen++;
            if (layout.seen <= layout.count - layout.movedSlots) {
                deleteUnlessMovedOnto(record.key(), layout);
                return;
            }
            KeptOutcome outcome = record.outcome();
            int slot = layout.nextSlot++;
            restoreInto(outcome, slot);
            if (!(record.key().isSlot() && record.key().slot() == slot)) {
                writes.add(StateWrite.record(outcome.owner(), slot, StateRecordCodec.encode(outcome)));
                deleteUnlessMovedOnto(record.key(), layout);
            }
        }

        private void restoreInto(KeptOutcome outcome, int slot) {
            kept.restore(outcome.txnId(), outcome.outcome(), outcome.owner(), outcome.endTimeMillis(), slot, vacated);
            for (KeptOutcomes.SlotMark emptied : vacated) {
                writes.add(StateWrite.slotTombstone(emptied.owner(), emptied.slot()));
            }
            vacated.clear();
        }

        /** Deletes a stored key unless its client is moving and one of its new slots overwrites it. */
        private void deleteUnlessMovedOnto(StateRecordCodec.StoredKey key, ClientLayout layout) {
            if (!key.isSlot()) {
                writes.add(StateWrite.legacyTombstone(StateRecordCodec.legacyKeyOf(key.legacyTxn())));
            } else if (layout.inPlace || key.slot() >= layout.movedSlots) {
                writes.add(StateWrite.slotTombstone(key.owner(), key.slot()));
            }
        }

        private boolean isExpired(StoredRecord record) {
            return kept.isExpired(record.outcome().endTimeMillis(), now);
        }

        private ClientLayout layoutOf(String owner) {
            return owner == null ? withoutOwner : layouts.computeIfAbsent(owner, ignored -> new ClientLayout());
        }
    }

    /** How one client's restored, unexpired records sit in its slots. */
    private static final class ClientLayout {
        int count;
        int lastSlot = -1;
        boolean inPlace = true;
        /** For a client that moves: how many slots it fills, 0..movedSlots-1. */
        int movedSlots;
        int seen;
        int nextSlot;

        void observe(int slot, int limit) {
            if (slot < 0 || slot >= limit || (count > 0 && slot != (lastSlot + 1) % limit)) {
                inPlace = false;
            }
            lastSlot = slot;
            count++;
            movedSlots = Math.min(count, limit);
        }
    }

    /**
     * A state-topic write decided at restore: a record moved to a slot, or a tombstone of a
     * slot or of a 0.1 key. Writes to a slot are guarded, once restore is done, so that a
     * retry never lands on a newer record that took the slot.
     */
    private record StateWrite(String key, byte[] valueOrNull, String slotOwner, int slot) {

        static StateWrite record(String owner, int slot, byte[] value) {
            return new StateWrite(StateRecordCodec.slotKey(owner, slot), value, owner, slot);
        }

        static StateWrite slotTombstone(String owner, int slot) {
            return new StateWrite(StateRecordCodec.slotKey(owner, slot), null, owner, slot);
        }

        static StateWrite legacyTombstone(String key) {
            return new StateWrite(key, null, null, -1);
        }
    }

    private void runSafely(Runnable task) {
        try {
            task.run();
        } catch (RuntimeException e) {
            log.error("Coordinator {}: periodic task failed", coordinatorId, e);
        }
    }

    private void send(StateWrite write) {
        KeptOutcomes.SlotMark guard = write.slot() < 0 ? null : kept.markOf(write.slotOwner(), write.slot());
        if (write.valueOrNull() != null) {
            writeUntilDurable(write.key(), write.valueOrNull(), guard, FIRST_RETRY_DELAY_MILLIS);
        } else {
            deleteUntilDurable(write.key(), guard, FIRST_RETRY_DELAY_MILLIS);
        }
    }

    private void deleteVacated(KeptOutcomes.SlotMark slot) {
        deleteUntilDurable(StateRecordCodec.slotKey(slot.owner(), slot.slot()), slot, FIRST_RETRY_DELAY_MILLIS);
    }

    /**
     * Deletes a key, retrying with backoff until the tombstone lands. A slot's tombstone is
     * sent only while the slot is still empty, checked in the same critical section as the
     * writes that take slots: once a new record has taken it, the tombstone would delete
     * that record instead.
     */
    private void deleteUntilDurable(String key, KeptOutcomes.SlotMark guard, long nextDelayMillis) {
        if (closed) {
            return;
        }
        CompletableFuture<Void> tombstone;
        synchronized (writeOrder) {
            if (guard != null && kept.isTakenSince(guard)) {
                return;
            }
            tombstone = stateTopic.delete(key);
        }
        tombstone.exceptionally(error -> {
            stats.tombstoneWriteRetries.increment();
            retryLater("tombstone for " + key, error, nextDelayMillis,
                    () -> deleteUntilDurable(key, guard, Math.min(nextDelayMillis * 2, MAX_RETRY_DELAY_MILLIS)));
            return null;
        });
    }

    /** Writes a record moved at restore, retrying with backoff until it lands or its slot is taken. */
    private void writeUntilDurable(String key, byte[] value, KeptOutcomes.SlotMark guard, long nextDelayMillis) {
        if (closed) {
            return;
        }
        CompletableFuture<Void> write;
        synchronized (writeOrder) {
            if (kept.isTakenSince(guard)) {
                return;
            }
            write = stateTopic.write(key, value);
        }
        write.exceptionally(error -> {
            stats.recordWriteFailures.increment();
            retryLater("moved record under " + key, error, nextDelayMillis, () -> writeUntilDurable(key, value, guard,
                    Math.min(nextDelayMillis * 2, MAX_RETRY_DELAY_MILLIS)));
            return null;
        });
    }

    private void retryLater(String what, Throwable error, long delayMillis, Runnable retry) {
        if (closed) {
            return;
        }
        log.warn("Coordinator {}: {} failed, retrying in {} ms: {}", coordinatorId, what, delayMillis,
                error.toString());
        try {
            executor.schedule(retry, delayMillis, TimeUnit.MILLISECONDS);
        } catch (RejectedExecutionException shuttingDown) {
            log.debug("Coordinator {}: not retrying {}, shutting down", coordinatorId, what);
        }
    }
}
