package io.github.txnpreserver.testing;

import io.github.txnpreserver.preserver.kept.Outcome;
import io.github.txnpreserver.statetopic.CoordinatorMovedException;
import io.github.txnpreserver.statetopic.RecordPosition;
import io.github.txnpreserver.statetopic.StateTopic;
import io.github.txnpreserver.statetopic.WriterFencedException;
import io.github.txnpreserver.testing.BlockRecordReading.RecordedOutcome;
import java.util.ArrayList;
import java.util.Collections;
import java.util.HashSet;
import java.util.IdentityHashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import java.util.Set;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.Executor;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicLong;
import java.util.function.BiConsumer;
import org.apache.pulsar.client.api.transaction.TxnID;

/**
 * A state topic kept in memory: an append-only log with compaction on demand, writes that
 * can be made to fail or to wait, reads that can be made to wait, and every write recorded
 * in a {@link CallLog} once it landed (or failed):
 * <ul>
 *   <li>a block value (key {@code c<n>}) as {@code state-write c<n>}, followed by one
 *       {@code state-write <mostSigBits>:<leastSigBits>} per transaction whose entry in the
 *       block differs from the block's newest durable value (new, or another outcome, time
 *       or owner), so that tests follow a transaction through the blocks that carry it;</li>
 *   <li>a value under any other key (a test's malformed record) as {@code state-write <key>};</li>
 *   <li>a tombstone as {@code state-delete <key>};</li>
 *   <li>a failure as the same line with {@code failed } after {@code state-write }/{@code state-delete }.</li>
 * </ul>
 * {@link #requests()} lists what was asked of the topic, in order, when it was asked (held
 * and failed writes included).
 *
 * <p>Without a call log ({@link #InMemoryStateTopic()}) writes are not read back, so that a
 * fill of millions of outcomes stays linear; {@link #keepingNothing()} keeps no record at
 * all, for figures of the heap the preserver alone retains. Both count what landed
 * ({@link #writtenBytes()}, {@link #writtenMessages()}).
 */
public final class InMemoryStateTopic implements StateTopic {

    /** Null: no lines recorded and no write read back. */
    private final CallLog callLog;
    /** Nothing kept of a write, not even its request: a heap figure would count it. */
    private final boolean keepsNothing;
    private boolean positionsGiven = true;
    private final AtomicLong writtenBytes = new AtomicLong();
    private final AtomicLong writtenMessages = new AtomicLong();
    private final Set<String> refusedKeys = new HashSet<>();
    private BiConsumer<String, Boolean> writeAnswered = (key, landed) -> { };
    private final AtomicInteger failingReads = new AtomicInteger();
    private final AtomicInteger reads = new AtomicInteger();
    private boolean holdReopens;
    private final List<CompletableFuture<Boolean>> heldReopens = new ArrayList<>();
    private final List<Boolean> heldReopensUnread = new ArrayList<>();
    private final AtomicLong carried = new AtomicLong();
    private final List<Entry> log = new ArrayList<>();
    private final List<String> requests = new ArrayList<>();
    private final AtomicInteger failingWrites = new AtomicInteger();
    private final AtomicInteger failingDeletes = new AtomicInteger();
    private final List<Runnable> heldWrites = new ArrayList<>();
    private CompletableFuture<Void> readGate = CompletableFuture.completedFuture(null);
    private CompletableFuture<Void> coldReadGate = CompletableFuture.completedFuture(null);
    private final AtomicInteger failingColdReads = new AtomicInteger();
    private final AtomicInteger coldReads = new AtomicInteger();
    /** The ledger of the topic's current incarnation: a topic created again starts a new one. */
    private long ledger = 1;
    private long nextEntry;
    private boolean holdWrites;
    private boolean closed;
    private WriteFailure writerFault = WriteFailure.TRANSIENT;
    private boolean topicGone;
    private boolean createdAgainUnseen;
    private boolean fencedByOther;
    private boolean holdWritesAfterReopen;
    private boolean terminated;
    private boolean carrying;
    private CompletableFuture<Void> carryGate = CompletableFuture.completedFuture(null);
    private RecordsMoved moved = (key, position) -> { };
    private final java.util.ArrayDeque<WriteFailure> nextFaults = new java.util.ArrayDeque<>();
    private boolean ownedHere = true;
    private final AtomicInteger failingReopens = new AtomicInteger();
    private final AtomicInteger reopens = new AtomicInteger();
    private final List<Long> compactionThresholds = new ArrayList<>();
    private final java.util.LinkedList<Boolean> thresholdAnswers = new java.util.LinkedList<>();

    /** Values appended by {@link #appendRaw}: hostile or foreign, read leniently. By identity. */
    private final Set<byte[]> rawValues = Collections.newSetFromMap(new IdentityHashMap<>());

    public InMemoryStateTopic(CallLog callLog) {
        this(Objects.requireNonNull(callLog), false);
    }

    /** Records no call-log lines: a test or figure that follows the topic through its records only. */
    public InMemoryStateTopic() {
        this(null, false);
    }

    private InMemoryStateTopic(CallLog callLog, boolean keepsNothing) {
        this.callLog = callLog;
        this.keepsNothing = keepsNothing;
    }

    /**
     * A topic whose writes are only counted: they land (at once, unless held or failed), but
     * no record, request or call-log line is kept, and it reads empty. For heap figures of the
     * preserver alone, which a kept record would inflate, and for tests that need a topic
     * that is simply durable.
     */
    public static InMemoryStateTopic keepingNothing() {
        return new InMemoryStateTopic(null, true);
    }

    /**
     * Writes land without a position, as from a topic that cannot say where: no block can be
     * read back cold, so a memory bound evicts rather than moves outcomes to the cold tier.
     */
    public synchronized InMemoryStateTopic withoutPositions() {
        positionsGiven = false;
        return this;
    }

    /** Bytes that landed, key and value (a tombstone's key only), Pulsar's metadata not counted. */
    public long writtenBytes() {
        return writtenBytes.get();
    }

    /** Values and tombstones that landed. */
    public long writtenMessages() {
        return writtenMessages.get();
    }

    /** Bytes of the compacted view: each live key and its newest value. */
    public synchronized long viewBytes() {
        long bytes = 0;
        for (Map.Entry<String, byte[]> record : newestValues().entrySet()) {
            bytes += record.getKey().length() + record.getValue().length;
        }
        return bytes;
    }

    /** Every write of {@code key} fails, as transient, as from a broker that keeps refusing it. */
    public synchronized void refuseWritesOf(String key) {
        refusedKeys.add(key);
    }

    /**
     * {@code watcher} hears each value write as it is answered: its key and whether it landed,
     * on the answering thread, so that a test can note when (on its scheduler's clock).
     */
    public synchronized void onWriteAnswered(BiConsumer<String, Boolean> watcher) {
        writeAnswered = watcher;
    }

    /** The next {@code count} reads to the end fail, as a topic unavailable. */
    public void failNextReads(int count) {
        failingReads.set(count);
    }

    /** Reads to the end asked so far, failed ones included. */
    public int readCount() {
        return reads.get();
    }

    /**
     * Replacements ({@link #reopen}) from now on change nothing here and answer only when the
     * test completes them ({@link #heldReopens()}); with {@link #loseWriter()}, writes fail
     * until {@link #writerBack()}. For tests of the writer's own handling of late, failed or
     * given-up replacements.
     */
    public synchronized void holdReopens() {
        holdReopens = true;
    }

    /** The held replacements, in the order asked: the very futures the writer holds. */
    public synchronized List<CompletableFuture<Boolean>> heldReopens() {
        return List.copyOf(heldReopens);
    }

    /** For each held replacement, whether it was asked with {@code unread}. */
    public synchronized List<Boolean> heldReopensUnread() {
        return List.copyOf(heldReopensUnread);
    }

    /** Writes land again, as a replacement would have made them; for tests that {@link #holdReopens()}. */
    public synchronized void writerBack() {
        writerFault = WriteFailure.TRANSIENT;
    }

    /** The replacement in flight carried {@code records} more over: the writer sees it progress. */
    public void reportCarried(long records) {
        carried.addAndGet(records);
    }

    @Override
    public long replacementProgress() {
        return carried.get();
    }

    /** A write error that {@link #classify} calls {@code kind}, as the topic's own would be. */
    public static IllegalStateException writeError(WriteFailure kind) {
        return new WriterFault(kind);
    }

    private void record(String line) {
        if (callLog != null) {
            callLog.record(line);
        }
    }

    /** An entry of the log, where the real topic's message id would be its position. */
    public record Entry(String key, byte[] value, RecordPosition position) {
    }

    /** Point reads ({@link #readAt}) from now on wait until {@link #releaseColdReads()}. */
    public synchronized void holdColdReads() {
        if (coldReadGate.isDone()) {
            coldReadGate = new CompletableFuture<>();
        }
    }

    public void releaseColdReads() {
        CompletableFuture<Void> gate;
        synchronized (this) {
            gate = coldReadGate;
        }
        gate.complete(null);
    }

    /** The next {@code count} point reads fail. */
    public void failNextColdReads(int count) {
        failingColdReads.set(count);
    }

    /** Point reads asked so far. */
    public int coldReadCount() {
        return coldReads.get();
    }

    /** The next {@code count} value writes fail. */
    public void failNextWrites(int count) {
        failingWrites.set(count);
    }

    /**
     * The writer can write no more (fenced by another, closed): every write fails with an
     * error {@link #classify} calls {@link WriteFailure#LOST} until {@link #reopen}.
     */
    public synchronized void loseWriter() {
        writerFault = WriteFailure.LOST;
    }

    /**
     * Another writer fenced the topic but this one has not heard yet: writes fail as
     * wedged ({@link WriteFailure#STUCK}), and {@link #reopen} finds the fencing epoch moved.
     */
    public synchronized void fenceWithoutTelling() {
        writerFault = WriteFailure.STUCK;
        fencedByOther = true;
    }

    /** The next writes fail, one each, as these kinds; then writes land again. */
    public synchronized void failNextWritesAs(WriteFailure... kinds) {
        nextFaults.addAll(List.of(kinds));
    }

    /** Writes made after the next successful {@link #reopen} wait until {@link #releaseHeldWrites()}. */
    public synchronized void holdWritesAfterReopen() {
        holdWritesAfterReopen = true;
    }

    /** Another writer took the topic over: every write fails as {@link WriteFailure#FENCED}. */
    public synchronized void fenceWriter() {
        writerFault = WriteFailure.FENCED;
    }

    /** Every write fails as timed out ({@link WriteFailure#STUCK}) until {@link #reopen}. */
    public synchronized void wedgeWriter() {
        writerFault = WriteFailure.STUCK;
    }

    /**
     * The topic is deleted (or terminated) under the writer: its records are gone, every
     * write fails as {@link WriteFailure#LOST}, and {@link #reopen} creates it again.
     */
    public synchronized void deleteTopic() {
        writerFault = WriteFailure.LOST;
        topicGone = true;
        log.clear();
        ledger++;
    }

    /**
     * The topic is terminated: every write fails as {@link WriteFailure#LOST}, and the next
     * {@link #reopen} (once the topic is read) carries its records over, as the real topic
     * does: each key's newest value at a new position in a new ledger, reported to
     * {@link #onRecordsMoved}; cold reads fail while the carry lasts.
     */
    public synchronized void terminateTopic() {
        writerFault = WriteFailure.LOST;
        terminated = true;
    }

    /** The next carry stops once its records are out of the old topic, until {@link #releaseCarry()}. */
    public synchronized void holdCarry() {
        carryGate = new CompletableFuture<>();
    }

    public void releaseCarry() {
        CompletableFuture<Void> gate;
        synchronized (this) {
            gate = carryGate;
        }
        gate.complete(null);
    }

    @Override
    public synchronized void onRecordsMoved(RecordsMoved listener) {
        moved = listener;
    }

    /**
     * The topic is deleted and created again empty by the writer's reconnection, as Pulsar
     * does for a system topic: no write fails, and {@link #checkCreatedAgain} tells once.
     */
    public synchronized void deleteTopicAndComeBackEmpty() {
        log.clear();
        ledger++;
        createdAgainUnseen = true;
    }

    @Override
    public synchronized CompletableFuture<Boolean> checkCreatedAgain() {
        boolean createdAgain = createdAgainUnseen;
        createdAgainUnseen = false;
        return CompletableFuture.completedFuture(createdAgain);
    }

    /** The compaction thresholds asked for, in order. */
    public synchronized List<Long> compactionThresholds() {
        return List.copyOf(compactionThresholds);
    }

    /** Answers the next threshold requests: null fails one, true sets it, false says topic policies are off. */
    public synchronized void answerThresholdsWith(Boolean... answers) {
        thresholdAnswers.addAll(java.util.Arrays.asList(answers));
    }

    @Override
    public synchronized CompletableFuture<Boolean> setCompactionThreshold(long bytes) {
        compactionThresholds.add(bytes);
        Boolean answer = thresholdAnswers.isEmpty() ? Boolean.TRUE : thresholdAnswers.poll();
        return answer == null ? CompletableFuture.failedFuture(new IllegalStateException("admin call failed"))
                : CompletableFuture.completedFuture(answer);
    }

    /** Whether this broker still owns the coordinator, as {@link #reopen} asks. */
    public synchronized void ownedHere(boolean owned) {
        ownedHere = owned;
    }

    /** The next {@code count} replacements of the writer fail (the topic is still unavailable). */
    public void failNextReopens(int count) {
        failingReopens.set(count);
    }

    public int reopenCount() {
        return reopens.get();
    }

    /** The next {@code count} tombstones fail. */
    public void failNextDeletes(int count) {
        failingDeletes.set(count);
    }

    /** Writes and tombstones wait until {@link #releaseHeldWrites()}. */
    public synchronized void holdWrites() {
        holdWrites = true;
    }

    public void releaseHeldWrites() {
        List<Runnable> held;
        synchronized (this) {
            holdWrites = false;
            held = new ArrayList<>(heldWrites);
            heldWrites.clear();
        }
        held.forEach(Runnable::run);
    }

    /** Held writes are lost, as when the broker dies before they reach the bookies. */
    public synchronized void dropHeldWrites() {
        holdWrites = false;
        heldWrites.clear();
    }

    public synchronized int heldWriteCount() {
        return heldWrites.size();
    }

    /** Reads started from now on wait until {@link #releaseReads()}. */
    public synchronized void holdReads() {
        if (readGate.isDone()) {
            readGate = new CompletableFuture<>();
        }
    }

    public void releaseReads() {
        CompletableFuture<Void> gate;
        synchronized (this) {
            gate = readGate;
        }
        gate.complete(null);
    }

    /** Appends an entry as if another writer (or an earlier version) had put it there. */
    public synchronized void appendRaw(String key, byte[] value) {
        if (value != null) {
            synchronized (rawValues) {
                rawValues.add(value);
            }
        }
        log.add(newEntry(key, value));
    }

    private synchronized BiConsumer<String, Boolean> watcherOfWrites() {
        return writeAnswered;
    }

    private Entry newEntry(String key, byte[] value) {
        return new Entry(key, value, new RecordPosition(ledger, nextEntry++, -1, 0));
    }

    /** Keeps only the newest entry per key and drops keys whose newest entry is a tombstone. */
    public synchronized void compact() {
        Map<String, Entry> newest = new LinkedHashMap<>();
        List<Entry> withoutKey = new ArrayList<>();
        for (Entry entry : log) {
            if (entry.key() == null) {
                withoutKey.add(entry);
            } else {
                newest.remove(entry.key());
                newest.put(entry.key(), entry);
            }
        }
        log.clear();
        log.addAll(withoutKey);
        newest.values().stream().filter(entry -> entry.value() != null).forEach(log::add);
    }

    public synchronized List<Entry> entries() {
        return List.copyOf(log);
    }

    /** Entries with a value (messages that carry outcomes, tombstones not counted). */
    public synchronized long valueCount() {
        return log.stream().filter(entry -> entry.value() != null).count();
    }

    /** What was asked of the topic, in order: {@code write <key>} and {@code delete <key>}. */
    public synchronized List<String> requests() {
        return List.copyOf(requests);
    }

    /** Keys whose newest entry is a value, not a tombstone, in the order of those entries. */
    public synchronized List<String> liveKeys() {
        return newestValues().keySet().stream().toList();
    }

    /** The newest value of a key, or null if it has none or its newest entry is a tombstone. */
    public synchronized byte[] newestValue(String key) {
        return newestValues().get(key);
    }

    /**
     * Transactions held by the newest value of each live key, as
     * {@code <mostSigBits>:<leastSigBits>}: every outcome of each block; sorted by transaction.
     */
    public synchronized List<String> liveTransactions() {
        List<TxnID> txns = new ArrayList<>();
        newestValues().forEach((key, value) -> txns.addAll(outcomesIn(key, value).keySet()));
        return txns.stream().sorted((a, b) -> a.getMostSigBits() != b.getMostSigBits()
                        ? Long.compare(a.getMostSigBits(), b.getMostSigBits())
                        : Long.compare(a.getLeastSigBits(), b.getLeastSigBits()))
                .map(txn -> txn.getMostSigBits() + ":" + txn.getLeastSigBits()).distinct().toList();
    }

    /** The outcome the topic's newest values give a transaction (what a restore reads), or null. */
    public synchronized Outcome newestOutcomeOf(TxnID txn) {
        Outcome found = null;
        for (Map.Entry<String, byte[]> entry : newestValues().entrySet()) {
            RecordedOutcome kept = outcomesIn(entry.getKey(), entry.getValue()).get(txn);
            if (kept != null) {
                found = Outcome.valueOf(kept.ending().name());
            }
        }
        return found;
    }

    public synchronized boolean isClosed() {
        return closed;
    }

    @Override
    public CompletableFuture<RecordPosition> write(String key, byte[] value) {
        Objects.requireNonNull(value, "a write has a value; a tombstone is delete()");
        return append(key, value, "state-write ", failingWrites);
    }

    @Override
    public CompletableFuture<Void> delete(String key) {
        return append(key, null, "state-delete ", failingDeletes).thenApply(position -> null);
    }

    /**
     * As the real topic's reader at a message id on the compacted view: the first entry at or
     * after the position; its value if it is the key's entry at that very position, else null
     * (compaction dropped it, or the topic was created again); waits for a next entry if
     * none is there yet, as a reader would, so a bounded caller times out.
     */
    @Override
    public CompletableFuture<byte[]> readAt(String key, RecordPosition position) {
        coldReads.incrementAndGet();
        CompletableFuture<Void> gate;
        synchronized (this) {
            gate = coldReadGate;
        }
        return gate.thenCompose(open -> {
            if (failingColdReads.getAndUpdate(n -> Math.max(0, n - 1)) > 0) {
                return CompletableFuture.failedFuture(new IllegalStateException("injected: state topic unreachable"));
            }
            synchronized (this) {
                if (carrying) {
                    return CompletableFuture.failedFuture(new IllegalStateException("state topic being carried over"));
                }
            }
            synchronized (this) {
                for (Entry entry : log) {
                    RecordPosition at = entry.position();
                    if (at.ledgerId() > position.ledgerId()
                            || (at.ledgerId() == position.ledgerId() && at.entryId() >= position.entryId())) {
                        return CompletableFuture.completedFuture(at.equals(position) && key.equals(entry.key())
                                ? entry.value() : null);
                    }
                }
            }
            return new CompletableFuture<>();
        });
    }

    @Override
    public CompletableFuture<Void> readToEnd(Visitor visitor, Executor reader) {
        reads.incrementAndGet();
        if (failingReads.getAndUpdate(n -> Math.max(0, n - 1)) > 0) {
            return CompletableFuture.failedFuture(new IllegalStateException("injected: state topic unavailable"));
        }
        CompletableFuture<Void> gate;
        synchronized (this) {
            // The real topic's read first writes a barrier with the writer, up to which it reads.
            if (writerFault == WriteFailure.LOST) {
                record("state-read failed: writer lost");
                return CompletableFuture.failedFuture(new WriterFault(writerFault));
            }
            gate = readGate;
        }
        return gate.thenRunAsync(() -> {
            List<Entry> entries;
            synchronized (this) {
                entries = List.copyOf(log);
            }
            entries.forEach(entry -> visitor.accept(entry.key(), entry.value(), entry.position()));
        }, reader);
    }

    @Override
    public WriteFailure classify(Throwable writeError) {
        Throwable error = writeError instanceof java.util.concurrent.CompletionException && writeError.getCause() != null
                ? writeError.getCause() : writeError;
        return error instanceof WriterFault fault ? fault.kind : WriteFailure.TRANSIENT;
    }

    @Override
    public CompletableFuture<Boolean> reopen(boolean unread) {
        synchronized (this) {
            if (holdReopens) {
                CompletableFuture<Boolean> answer = new CompletableFuture<>();
                heldReopens.add(answer);
                heldReopensUnread.add(unread);
                return answer;
            }
            if (!ownedHere) {
                record("state-reopen refused: coordinator moved");
                return CompletableFuture.failedFuture(new CoordinatorMovedException(0));
            }
            if (fencedByOther) {
                record("state-reopen refused: fenced by another writer");
                return CompletableFuture.failedFuture(new WriterFencedException("in-memory", "1", "2"));
            }
        }
        if (failingReopens.getAndUpdate(n -> Math.max(0, n - 1)) > 0) {
            record("state-reopen failed");
            return CompletableFuture.failedFuture(new IllegalStateException("injected: topic still unavailable"));
        }
        synchronized (this) {
            if (terminated && !unread) {
                return carryOver();
            }
        }
        boolean recreated;
        synchronized (this) {
            recreated = topicGone;
            topicGone = false;
            writerFault = WriteFailure.TRANSIENT;
            if (holdWritesAfterReopen) {
                holdWritesAfterReopen = false;
                holdWrites = true;
            }
        }
        reopens.incrementAndGet();
        record((recreated ? "state-reopen recreated" : "state-reopen") + (unread ? " unread" : ""));
        return CompletableFuture.completedFuture(recreated);
    }

    private CompletableFuture<Boolean> carryOver() {
        Map<String, byte[]> carried = newestValues();
        log.clear();
        ledger++;
        carrying = true;
        reopens.incrementAndGet();
        return carryGate.thenApply(open -> {
            List<Entry> landed = new ArrayList<>();
            RecordsMoved listener;
            synchronized (this) {
                carried.forEach((key, value) -> {
                    Entry entry = newEntry(key, value);
                    log.add(entry);
                    landed.add(entry);
                });
                terminated = false;
                carrying = false;
                writerFault = WriteFailure.TRANSIENT;
                listener = moved;
            }
            landed.forEach(entry -> listener.moved(entry.key(), entry.position()));
            record("state-reopen carried " + landed.size());
            return false;
        });
    }

    /** The error of a write made by a lost or wedged writer. */
    private static final class WriterFault extends IllegalStateException {
        private final WriteFailure kind;

        WriterFault(WriteFailure kind) {
            super("injected writer fault: " + kind);
            this.kind = kind;
        }
    }

    @Override
    public synchronized CompletableFuture<Void> closeAsync() {
        closed = true;
        return CompletableFuture.completedFuture(null);
    }

    private Map<String, byte[]> newestValues() {
        Map<String, byte[]> newest = new LinkedHashMap<>();
        for (Entry entry : log) {
            if (entry.key() != null) {
                newest.remove(entry.key());
                if (entry.value() != null) {
                    newest.put(entry.key(), entry.value());
                }
            }
        }
        return newest;
    }

    /**
     * The kept outcomes a value holds, by transaction in offset order, read from the format's
     * specification ({@link BlockRecordReading}). A record the plugin wrote that breaks a rule
     * of the format fails the test (an absence asserted over it would pass otherwise); one
     * {@linkplain #appendRaw appended raw} reads as holding nothing. Other keys than a block's
     * (the restore barrier) hold no outcomes.
     */
    private Map<TxnID, RecordedOutcome> outcomesIn(String key, byte[] value) {
        Map<TxnID, RecordedOutcome> outcomes = new LinkedHashMap<>();
        if (value == null || !BlockRecordReading.isBlockKey(key)) {
            return outcomes;
        }
        try {
            BlockRecordReading.read(key, value).outcomes().forEach(kept -> outcomes.put(kept.txn(), kept));
        } catch (BlockRecordReading.NotABlockRecord e) {
            synchronized (rawValues) {
                if (!rawValues.contains(value)) {
                    throw new AssertionError("the plugin wrote a record its format does not allow: "
                            + e.getMessage(), e);
                }
            }
        }
        return outcomes;
    }

    /** The call-log subjects of a write: the key, then for a block the transactions it changes. */
    private List<String> subjectsOf(String key, byte[] value) {
        List<String> subjects = new ArrayList<>();
        if (value == null) {
            subjects.add(key);
            return subjects;
        }
        Map<TxnID, RecordedOutcome> written = outcomesIn(key, value);
        subjects.add(key);
        Map<TxnID, RecordedOutcome> before;
        synchronized (this) {
            before = outcomesIn(key, newestValues().get(key));
        }
        written.forEach((txn, entry) -> {
            if (!entry.equals(before.get(txn))) {
                subjects.add(txn.getMostSigBits() + ":" + txn.getLeastSigBits());
            }
        });
        return subjects;
    }

    private CompletableFuture<RecordPosition> append(String key, byte[] value, String call, AtomicInteger failures) {
        CompletableFuture<RecordPosition> durable = new CompletableFuture<>();
        if (value != null) {
            durable.whenComplete((position, error) -> watcherOfWrites().accept(key, error == null));
        }
        Runnable write = () -> {
            List<String> subjects = callLog == null ? List.of() : subjectsOf(key, value);
            WriteFailure fault;
            boolean refused;
            synchronized (this) {
                fault = nextFaults.isEmpty() ? writerFault : nextFaults.poll();
                refused = value != null && refusedKeys.contains(key);
            }
            if (fault != WriteFailure.TRANSIENT) {
                subjects.forEach(subject -> record(call + "failed " + subject));
                durable.completeExceptionally(new WriterFault(fault));
                return;
            }
            if (refused || failures.getAndUpdate(n -> Math.max(0, n - 1)) > 0) {
                subjects.forEach(subject -> record(call + "failed " + subject));
                durable.completeExceptionally(new IllegalStateException("injected state-topic write failure"));
                return;
            }
            RecordPosition answer;
            synchronized (this) {
                // One step for whoever watches the topic and whoever watches the call log.
                Entry landed = newEntry(key, value);
                if (!keepsNothing) {
                    log.add(landed);
                }
                subjects.forEach(subject -> record(call + subject));
                answer = positionsGiven ? landed.position() : null;
            }
            writtenBytes.addAndGet(key.length() + (value == null ? 0 : value.length));
            writtenMessages.incrementAndGet();
            durable.complete(answer);
        };
        synchronized (this) {
            if (!keepsNothing) {
                requests.add((value == null ? "delete " : "write ") + key);
            }
            if (holdWrites) {
                heldWrites.add(write);
                return durable;
            }
        }
        write.run();
        return durable;
    }
}
