package io.github.txnpreserver.store;

import io.github.txnpreserver.preserver.TransactionMetadataPreserver;
import io.github.txnpreserver.preserver.kept.Outcome;
import it.unimi.dsi.fastutil.longs.Long2ObjectOpenHashMap;
import java.time.Duration;
import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.Collections;
import java.util.IdentityHashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import org.apache.bookkeeper.mledger.ManagedCursor;
import org.apache.bookkeeper.mledger.ManagedLedger;
import org.apache.bookkeeper.mledger.ManagedLedgerConfig;
import org.apache.bookkeeper.mledger.Position;
import org.apache.pulsar.client.api.transaction.TxnID;
import org.apache.pulsar.transaction.coordinator.TransactionCoordinatorID;
import org.apache.pulsar.transaction.coordinator.TransactionLogReplayCallback;
import org.apache.pulsar.transaction.coordinator.impl.DisabledTxnLogBufferedWriterMetricsStats;
import org.apache.pulsar.transaction.coordinator.impl.MLTransactionLogImpl;
import org.apache.pulsar.transaction.coordinator.impl.TxnLogBufferedWriterConfig;
import org.apache.pulsar.transaction.coordinator.proto.TransactionMetadataEntry.TransactionMetadataOp;
import org.apache.pulsar.transaction.coordinator.proto.TransactionMetadataEntry;
import org.apache.pulsar.transaction.coordinator.proto.TxnStatus;
import org.apache.pulsar.transaction.coordinator.util.TransactionUtil;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * The coordinator's transaction log, whose entries of an ended transaction are released only
 * once its outcome is durable in the state topic. Until then the log is the outcome's
 * durable copy: a coordinator that opens replays the terminal entries still in it and keeps
 * their outcomes again. So the terminal step never waits for the state topic, and the
 * preserver writes it in groups (docs/DESIGN.md, "Protocol", "Commit").
 *
 * <p>It is an {@link MLTransactionLogImpl} (the stock store's declared type) that delegates
 * every call to the opened log, changing three of them:
 * <ul>
 *   <li>{@link #append}: notes the position of each terminal entry, by identity (positions
 *       of one batched entry are equal), with its transaction.</li>
 *   <li>{@link #deletePosition}: a release that holds a noted terminal entry is answered at
 *       once and done once that transaction's outcome is durable, together with the others
 *       the same record made durable (a terminal entry the stock
 *       store appended and then refused waits the same way: delayed, not lost); any other
 *       release (of a transaction the stock store no longer knows, of an entry it refused)
 *       is done at once, as stock. The stock store waits for the answer only to drop a replayed
 *       transaction from its map, which must not wait for the state topic.</li>
 *   <li>{@link #replayAsync}: a terminal entry that the stock replay accepts (its
 *       transaction's first entry is still in the log, and the status change is one the
 *       stock store makes, checked here by the same rule before the stock store sees the
 *       entry) gives the preserver its outcome, with the owner of that first entry and the
 *       terminal entry's time. A terminal entry whose first entry is gone was released, so its
 *       outcome was durable already.</li>
 * </ul>
 */
public final class RecordGatedTransactionLog extends MLTransactionLogImpl {

    private static final Logger log = LoggerFactory.getLogger(RecordGatedTransactionLog.class);

    /**
     * The entries one cursor delete releases, at least (whole transactions are added until a
     * delete holds this many). A landing releases a second's ends at once (about 3.5 entries
     * each: 3 400 at 1 000 txn/s), and one delete of those held the coordinator's thread for
     * 0.7 to 7 ms, with the lookups and the next flush behind it (docs/performance.md, "The
     * open-loop tail"). A delete of 256 took 0.05 ms at the median and 0.6 ms at p90, and
     * still takes the cursor's lock once per 70 ends, not once per end as stock does.
     */
    static final int RELEASE_CHUNK = 256;
    /**
     * The time between two deletes, at most. Chunks run back to back made a burst of a few
     * milliseconds of one core once a landing, two thirds of the coordinator thread's CPU
     * (flight recording at 32 clients), and on a broker's two cores the commits in flight then
     * share the other one. Stock spreads the same work over its ends, one delete each.
     */
    static final Duration RELEASE_PACE = Duration.ofMillis(10);
    /**
     * How long after the last release became due the entries waiting have all left, unless
     * the thread lags: deletes come sooner than {@link #RELEASE_PACE} when there are more
     * chunks than paces left (after a state-topic outage, the queued ends of many landings).
     * Well under the group interval, so that one landing's entries are gone before the next
     * lands, and what waits is at most about a quarter of a group's ends.
     */
    static final Duration RELEASE_SPREAD = Duration.ofMillis(250);
    /** How long a closing log waits for the deletes of what waited, before its cursor closes. */
    static final Duration CLOSE_DRAIN_WAIT = Duration.ofSeconds(5);

    private final MLTransactionLogImpl delegate;
    private final TransactionMetadataPreserver preserver;
    private final TimeoutAborts timeoutAborts;
    /** Terminal entries appended or replayed and not released yet: their transaction's sequence. */
    private final Map<Position, Long> terminalEntries = Collections.synchronizedMap(new IdentityHashMap<>());
    /**
     * Entries whose outcomes are durable, one list per ended transaction, oldest first, until
     * a delete takes them. Confined to the coordinator's thread, as are the four below.
     */
    private final ArrayDeque<List<Position>> releasable = new ArrayDeque<>();
    private long releasableEntries;
    /** When {@link #releasable} should be empty ({@link #RELEASE_SPREAD} after the last landing), in nanos. */
    private long releaseByNanos;
    /** A delete is queued or scheduled: it schedules the next while entries wait. */
    private boolean releasing;
    /**
     * The log is closing: what waits was deleted at once, and entries that become releasable
     * later stay in the log for the next owner's replay (the cursor is closed).
     */
    private boolean closing;

    private RecordGatedTransactionLog(TransactionCoordinatorID tcId, MLTransactionLogImpl delegate,
                                      TransactionMetadataPreserver preserver, TimeoutAborts timeoutAborts) {
        // The superclass's state is never used: every method is delegated.
        super(tcId, null, new ManagedLedgerConfig(), new TxnLogBufferedWriterConfig(), null,
                DisabledTxnLogBufferedWriterMetricsStats.DISABLED_BUFFERED_WRITER_METRICS);
        this.delegate = delegate;
        this.preserver = preserver;
        this.timeoutAborts = timeoutAborts;
    }

    static MLTransactionLogImpl gate(TransactionCoordinatorID tcId, MLTransactionLogImpl log,
                                     TransactionMetadataPreserver preserver, TimeoutAborts timeoutAborts) {
        return new RecordGatedTransactionLog(tcId, log, preserver, timeoutAborts);
    }

    @Override
    public CompletableFuture<Void> initialize() {
        return delegate.initialize();
    }

    @Override
    public CompletableFuture<Position> append(TransactionMetadataEntry entry) {
        if (!isTerminal(entry)) {
            return delegate.append(entry);
        }
        long sequence = entry.getTxnidLeastBits();
        // Noted before the stock store's callback on the same future releases the entries.
        return delegate.append(entry).thenApply(position -> {
            terminalEntries.put(position, sequence);
            return position;
        });
    }

    @Override
    public CompletableFuture<Void> deletePosition(List<Position> positions) {
        Long sequence = null;
        for (Position position : positions) {
            Long ended = terminalEntries.remove(position);
            if (ended != null) {
                sequence = ended;
            }
        }
        if (sequence == null) {
            return delegate.deletePosition(positions);
        }
        preserver.afterOutcomeDurable(sequence, () -> gather(positions));
        return CompletableFuture.completedFuture(null);
    }

    /**
     * On the coordinator's thread: one landed record makes the outcomes of up to a group's
     * transactions durable at once. Their entries leave the log in cursor deletes of about
     * {@link #RELEASE_CHUNK} entries, one every {@link #RELEASE_PACE} or sooner so as to be
     * done {@link #RELEASE_SPREAD} after the landing: the cursor's lock is taken and its
     * mark-delete computed once per delete, not once per transaction, and the work is spread
     * over the time to the next landing instead of run in one burst beside the commits in
     * flight. A transaction's entries are never split between two deletes: as stock's, its
     * delete releases all of them or, failing, leaves all of them for the next replay (a first
     * entry left without its terminal entry would replay the transaction as open).
     */
    private void gather(List<Position> positions) {
        assert preserver.thread().assertOwner();
        if (closing) {
            return;
        }
        releasable.add(positions);
        releasableEntries += positions.size();
        releaseByNanos = preserver.thread().nanoTime() + RELEASE_SPREAD.toNanos();
        if (!releasing) {
            // Queued after the landing's other actions, which join this delete. Closed: the
            // entries stay, and the next owner replays them.
            releasing = preserver.execute(this::releaseNext);
        }
    }

    private void releaseNext() {
        assert preserver.thread().assertOwner();
        try {
            releaseChunk();
        } finally {
            // Also after a delete that threw (logged by the thread, its entries stay): the rest
            // still go. Closed meanwhile: the rest stay, and the next owner replays them.
            releasing = !releasable.isEmpty();
            if (releasing) {
                // A timer, even when due at once: the group's flush and other due timers come
                // between two deletes.
                preserver.thread().schedule(this::releaseNext, Duration.ofNanos(nextReleaseDelayNanos()));
            }
        }
    }

    /** @return completes once the delete is answered (failed or not), at once if nothing waited */
    private CompletableFuture<Void> releaseChunk() {
        List<Position> chunk = new ArrayList<>(RELEASE_CHUNK + 8);
        while (!releasable.isEmpty() && chunk.size() < RELEASE_CHUNK) {
            chunk.addAll(releasable.poll());
        }
        releasableEntries -= chunk.size();
        if (chunk.isEmpty()) {
            return CompletableFuture.completedFuture(null);
        }
        return delegate.deletePosition(chunk).exceptionally(error -> releaseFailed(chunk, error));
    }

    /** {@link #RELEASE_PACE}, or less: the chunks still waiting, evenly over the time left to {@link #releaseByNanos}. */
    private long nextReleaseDelayNanos() {
        long chunksLeft = (releasableEntries + RELEASE_CHUNK - 1) / RELEASE_CHUNK;
        long timeLeft = Math.max(0, releaseByNanos - preserver.thread().nanoTime());
        return Math.min(RELEASE_PACE.toNanos(), timeLeft / Math.max(1, chunksLeft));
    }

    private Void releaseFailed(List<Position> chunk, Throwable error) {
        // As stock: the entries stay, and the next replay releases them again.
        log.warn("Coordinator {}: could not release {} transaction log entries of ended transactions: {}",
                preserver.coordinatorId(), chunk.size(), error.toString());
        return null;
    }

    @Override
    public void replayAsync(TransactionLogReplayCallback callback) {
        delegate.replayAsync(new OutcomeTap(callback));
    }

    /**
     * Deletes what waits for its paced release at once, before the cursor closes (its next
     * owner then replays fewer entries), waits for those deletes (at most
     * {@link #CLOSE_DRAIN_WAIT}), then closes the log off the coordinator's thread (the stock
     * close waits for the stock store's executor). A coordinator already closed, or a thread
     * shut down, leaves those entries to the next owner's replay.
     */
    @Override
    public CompletableFuture<Void> closeAsync() {
        CompletableFuture<Void> drained = new CompletableFuture<>();
        preserver.thread().answer(drained, () -> {
            assert preserver.thread().assertOwner();
            List<CompletableFuture<Void>> deletes = new ArrayList<>();
            try {
                closing = true;
                while (!releasable.isEmpty()) {
                    try {
                        deletes.add(releaseChunk());
                    } catch (RuntimeException | LinkageError e) {
                        log.warn("Coordinator {}: could not release transaction log entries while closing: {}",
                                preserver.coordinatorId(), e.toString());
                    }
                }
            } finally {
                CompletableFuture.allOf(deletes.toArray(CompletableFuture[]::new))
                        .orTimeout(CLOSE_DRAIN_WAIT.toMillis(), TimeUnit.MILLISECONDS)
                        .whenComplete((done, error) -> drained.complete(null));
            }
        });
        return drained.handle((ignored, error) -> null).thenComposeAsync(ignored -> delegate.closeAsync(),
                preserver.thread().blockingExecutor("txn-preserver-log-close-" + preserver.coordinatorId()));
    }

    @Override
    public ManagedLedger getManagedLedger() {
        return delegate.getManagedLedger();
    }

    /**
     * Once replayed, the log is only appended to and released, never read: its entries need no
     * cache. Stock caches each appended entry (its cursor is active) and drops it at the
     * entry's release, at once; here a release comes with the outcome's record, a group later,
     * so the cache would hold a group's entries and every insert and release would work on a
     * bigger cache (measured: twice stock's cache work per transaction, on the broker's
     * threads and the coordinator's). Pulsar keeps its deduplication cursor out of the cache
     * the same way.
     */
    private void keepOutOfTheEntryCache() {
        try {
            ManagedLedger ledger = delegate.getManagedLedger();
            if (ledger != null) {
                for (ManagedCursor cursor : ledger.getCursors()) {
                    cursor.setAlwaysInactive();
                }
            }
        } catch (RuntimeException | LinkageError e) {
            // A cost, not a fault: the log works the same with its entries cached.
            log.warn("Coordinator {}: could not keep the transaction log out of the entry cache: {}",
                    preserver.coordinatorId(), e.toString());
        }
    }

    private static boolean isTerminal(TransactionMetadataEntry entry) {
        return entry.getMetadataOp() == TransactionMetadataOp.UPDATE && entry.hasNewStatus()
                && (entry.getNewStatus() == TxnStatus.COMMITTED || entry.getNewStatus() == TxnStatus.ABORTED);
    }

    /**
     * Keeps the outcomes of the terminal entries the stock replay accepts, then hands each
     * entry on. It follows each transaction's status as the stock replay does
     * ({@code TxnMetaImpl.updateTxnStatus}: the expected status, then an allowed change), so
     * that an entry the stock store appended and then refused is not taken for an outcome.
     */
    private final class OutcomeTap implements TransactionLogReplayCallback {

        private final TransactionLogReplayCallback stock;
        /** The transactions whose first entry was replayed and that have not ended yet. */
        private final Long2ObjectOpenHashMap<Replayed> live = new Long2ObjectOpenHashMap<>();

        OutcomeTap(TransactionLogReplayCallback stock) {
            this.stock = stock;
        }

        @Override
        public void handleMetadataEntry(Position position, TransactionMetadataEntry entry) {
            try {
                follow(position, entry);
            } catch (RuntimeException e) {
                // Not ours to stop the coordinator over: the stock replay decides about the entry.
                // A terminal entry whose outcome was not taken keeps its log entries for the next
                // owner's replay: released now, its outcome would be in neither the log nor the topic.
                if (isTerminal(entry)) {
                    terminalEntries.put(position, entry.getTxnidLeastBits());
                    preserver.notKept(entry.getTxnidLeastBits(), e);
                } else {
                    log.warn("Coordinator {}: could not follow transaction log entry {} at {}: {}",
                            preserver.coordinatorId(), entry.getTxnidLeastBits(), position, e.toString());
                }
            }
            stock.handleMetadataEntry(position, entry);
        }

        private void follow(Position position, TransactionMetadataEntry entry) {
            long sequence = entry.getTxnidLeastBits();
            switch (entry.getMetadataOp()) {
                case NEW -> {
                    if (!live.containsKey(sequence)) {
                        live.put(sequence, new Replayed(entry.hasOwner() ? entry.getOwner() : null,
                                entry.hasStartTime() ? entry.getStartTime() : 0,
                                entry.hasTimeoutMs() ? entry.getTimeoutMs() : 0));
                    }
                }
                case UPDATE -> {
                    Replayed replayed = live.get(sequence);
                    if (replayed == null || !entry.hasNewStatus()
                            || replayed.status != entry.getExpectedStatus()
                            || !TransactionUtil.canTransitionTo(replayed.status, entry.getNewStatus())) {
                        return;
                    }
                    replayed.status = entry.getNewStatus();
                    if (replayed.status == TxnStatus.ABORTING) {
                        // Which abort the timeout began is not in the log: one begun past it was.
                        replayed.timedOut = TimeoutAborts.pastTimeout(replayed.openMillis, replayed.timeoutMillis,
                                entry.getLastModificationTime());
                        replayed.abortingMillis = entry.getLastModificationTime();
                    }
                    if (isTerminal(entry)) {
                        live.remove(sequence);
                        // Noted first: the release waits for the outcome's record (or, if keeping it
                        // fails, for ever: the next owner replays it).
                        terminalEntries.put(position, sequence);
                        preserver.keepFromLog(new TxnID(entry.getTxnidMostBits(), sequence),
                                replayed.timedOut ? Outcome.TIMED_OUT : Outcome.of(entry.getNewStatus()), replayed.owner,
                                entry.getLastModificationTime());
                    }
                }
                default -> {
                }
            }
        }

        @Override
        public void replayComplete() {
            live.forEach((sequence, replayed) -> {
                if (replayed.status == TxnStatus.ABORTING && replayed.timedOut) {
                    timeoutAborts.began(sequence, replayed.abortingMillis);
                }
            });
            live.clear();
            keepOutOfTheEntryCache();
            stock.replayComplete();
        }
    }

    /** A replayed transaction's owner, open time, timeout and status. */
    private static final class Replayed {
        final String owner;
        final long openMillis;
        final long timeoutMillis;
        TxnStatus status = TxnStatus.OPEN;
        /** Its abort began past its timeout. */
        boolean timedOut;
        /** When its abort began. */
        long abortingMillis;

        Replayed(String owner, long openMillis, long timeoutMillis) {
            this.owner = owner;
            this.openMillis = openMillis;
            this.timeoutMillis = timeoutMillis;
        }
    }
}
