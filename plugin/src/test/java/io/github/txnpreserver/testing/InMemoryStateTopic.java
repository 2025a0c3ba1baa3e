package io.github.txnpreserver.testing;

import com.google.protobuf.InvalidProtocolBufferException;
import io.github.txnpreserver.statetopic.StateTopic;
import io.github.txnpreserver.statetopic.proto.TerminatedTxnRecord;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.Executor;
import java.util.concurrent.atomic.AtomicInteger;
import org.apache.pulsar.client.api.transaction.TxnID;

/**
 * A state topic kept in memory: an append-only log with compaction on demand, writes that
 * can be made to fail or to wait, and every write recorded in a {@link CallLog} once
 * durable: a record as {@code state-write <mostSigBits>:<leastSigBits>} of the transaction
 * it holds (so that tests follow a transaction, whichever slot its record took), a tombstone
 * as {@code state-delete <key>}.
 */
public final class InMemoryStateTopic implements StateTopic {

    private final CallLog callLog;
    private final List<Entry> log = new ArrayList<>();
    private final AtomicInteger failingWrites = new AtomicInteger();
    private final AtomicInteger failingDeletes = new AtomicInteger();
    private final List<Runnable> heldWrites = new ArrayList<>();
    private boolean holdWrites;
    private boolean closed;

    public InMemoryStateTopic(CallLog callLog) {
        this.callLog = callLog;
    }

    public record Entry(String key, byte[] value) {
    }

    /** The next {@code count} record writes fail. */
    public void failNextWrites(int count) {
        failingWrites.set(count);
    }

    /** The next {@code count} tombstones fail. */
    public void failNextDeletes(int count) {
        failingDeletes.set(count);
    }

    /** Writes wait until {@link #releaseHeldWrites()}. */
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

    /** Appends an entry as if another writer (or corruption) had put it there. */
    public synchronized void appendRaw(String key, byte[] value) {
        log.add(new Entry(key, value));
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

    /** Keys whose newest entry is a value, not a tombstone. */
    public synchronized List<String> liveKeys() {
        Map<String, Entry> newest = new LinkedHashMap<>();
        for (Entry entry : log) {
            if (entry.key() != null) {
                newest.put(entry.key(), entry);
            }
        }
        return newest.values().stream().filter(e -> e.value() != null).map(Entry::key).toList();
    }

    /** Transactions whose record is the newest value of its key, in log order. */
    public synchronized List<String> liveTransactions() {
        Map<String, Entry> newest = new LinkedHashMap<>();
        for (Entry entry : log) {
            if (entry.key() != null) {
                newest.remove(entry.key());
                newest.put(entry.key(), entry);
            }
        }
        return newest.values().stream().filter(e -> e.value() != null).map(e -> transactionOf(e.key(), e.value()))
                .toList();
    }

    /** The newest record written for a transaction, under whichever key, or null. */
    public synchronized TerminatedTxnRecord newestRecordOf(TxnID txn) {
        String wanted = txn.getMostSigBits() + ":" + txn.getLeastSigBits();
        TerminatedTxnRecord found = null;
        for (Entry entry : log) {
            if (entry.value() != null && wanted.equals(transactionOf(entry.key(), entry.value()))) {
                found = parse(entry.value());
            }
        }
        return found;
    }

    public synchronized boolean isClosed() {
        return closed;
    }

    @Override
    public CompletableFuture<Void> write(String key, byte[] value) {
        return append(key, value, "state-write ", failingWrites);
    }

    @Override
    public CompletableFuture<Void> delete(String key) {
        return append(key, null, "state-delete ", failingDeletes);
    }

    @Override
    public CompletableFuture<Void> readToEnd(Visitor visitor, Executor reader) {
        List<Entry> entries;
        synchronized (this) {
            entries = List.copyOf(log);
        }
        return CompletableFuture.runAsync(() -> entries.forEach(entry -> visitor.accept(entry.key(), entry.value())),
                reader);
    }

    @Override
    public synchronized CompletableFuture<Void> closeAsync() {
        closed = true;
        return CompletableFuture.completedFuture(null);
    }

    /** The transaction a record holds, as {@code <mostSigBits>:<leastSigBits>}; the key if it holds none. */
    private static String transactionOf(String key, byte[] value) {
        TerminatedTxnRecord record = parse(value);
        return record == null ? key : record.getTxnidMostBits() + ":" + record.getTxnidLeastBits();
    }

    private static TerminatedTxnRecord parse(byte[] value) {
        try {
            TerminatedTxnRecord record = TerminatedTxnRecord.parseFrom(value);
            return record.getFormatVersion() > 0 ? record : null;
        } catch (InvalidProtocolBufferException e) {
            return null;
        }
    }

    private CompletableFuture<Void> append(String key, byte[] value, String call, AtomicInteger failures) {
        CompletableFuture<Void> durable = new CompletableFuture<>();
        String subject = value == null ? key : transactionOf(key, value);
        Runnable write = () -> {
            if (failures.getAndUpdate(n -> Math.max(0, n - 1)) > 0) {
                callLog.record(call + "failed " + subject);
                durable.completeExceptionally(new IllegalStateException("injected state-topic write failure"));
                return;
            }
            synchronized (this) {
                log.add(new Entry(key, value));
            }
            callLog.record(call + subject);
            durable.complete(null);
        };
        synchronized (this) {
            if (holdWrites) {
                heldWrites.add(write);
                return durable;
            }
        }
        write.run();
        return durable;
    }
}
