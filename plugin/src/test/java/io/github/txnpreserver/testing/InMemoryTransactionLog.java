package io.github.txnpreserver.testing;

import static org.mockito.ArgumentMatchers.any;
import static org.mockito.ArgumentMatchers.anyList;
import static org.mockito.Mockito.doAnswer;
import static org.mockito.Mockito.mock;
import static org.mockito.Mockito.when;

import java.util.ArrayList;
import java.util.HashSet;
import java.util.List;
import java.util.Set;
import java.util.concurrent.CompletableFuture;
import java.util.function.Predicate;
import org.apache.bookkeeper.mledger.ManagedLedgerException;
import org.apache.bookkeeper.mledger.ManagedCursor;
import org.apache.bookkeeper.mledger.ManagedLedger;
import org.apache.bookkeeper.mledger.Position;
import org.apache.bookkeeper.mledger.PositionFactory;
import org.apache.pulsar.transaction.coordinator.TransactionLogReplayCallback;
import org.apache.pulsar.transaction.coordinator.impl.MLTransactionLogImpl;
import org.apache.pulsar.transaction.coordinator.proto.TransactionMetadataEntry;

/**
 * The coordinator's transaction log, in memory, behind a mock of {@link MLTransactionLogImpl}.
 * It survives a coordinator restart (the harness hands the same log to the new store), and
 * records each append in the {@link CallLog} as {@code log <op> <key>}, where op is NEW,
 * ADD_PARTITION, ADD_SUBSCRIPTION or the new status of an UPDATE, and each release of a
 * transaction's entries (the cursor's delete) as {@code log released <key>}.
 */
public final class InMemoryTransactionLog {

    private final CallLog callLog;
    private final List<Position> positions = new ArrayList<>();
    private final List<TransactionMetadataEntry> entries = new ArrayList<>();
    private final Set<Position> deleted = new HashSet<>();
    private final List<Runnable> heldAppends = new ArrayList<>();
    private Predicate<String> holdWhen = op -> false;
    private Predicate<String> failWhen = op -> false;
    private int failuresLeft;
    private final List<java.util.Set<String>> deletes = new ArrayList<>();
    private int deleteFailuresLeft;
    private int deleteThrowsLeft;
    private Runnable duringNextDelete;
    private CompletableFuture<Void> nextDeleteAnswer;

    public InMemoryTransactionLog(CallLog callLog) {
        this.callLog = callLog;
    }

    /** A fresh mock over this log, for one incarnation of the coordinator. */
    public MLTransactionLogImpl newMock() {
        MLTransactionLogImpl mock = mock(MLTransactionLogImpl.class);
        when(mock.append(any())).thenAnswer(call -> append(call.getArgument(0)));
        when(mock.deletePosition(anyList())).thenAnswer(call -> {
            Runnable during;
            synchronized (this) {
                during = duringNextDelete;
                duringNextDelete = null;
            }
            if (during != null) {
                during.run();
            }
            synchronized (this) {
                if (deleteThrowsLeft > 0) {
                    deleteThrowsLeft--;
                    callLog.record("log release threw");
                    // An error, not only an exception: the coordinator's thread survives both.
                    throw new LinkageError("injected cursor bug");
                }
                if (deleteFailuresLeft > 0) {
                    deleteFailuresLeft--;
                    callLog.record("log release failed");
                    return CompletableFuture.failedFuture(new ManagedLedgerException("injected cursor failure"));
                }
            }
            release(call.getArgument(0));
            synchronized (this) {
                CompletableFuture<Void> held = nextDeleteAnswer;
                nextDeleteAnswer = null;
                return held != null ? held : CompletableFuture.completedFuture(null);
            }
        });
        when(mock.closeAsync()).thenAnswer(call -> {
            callLog.record("log closed");
            return CompletableFuture.completedFuture(null);
        });
        doAnswer(call -> {
            replay(call.getArgument(0));
            return null;
        }).when(mock).replayAsync(any());
        ManagedCursor cursor = mock(ManagedCursor.class);
        doAnswer(call -> {
            callLog.record("log cursor always inactive");
            return null;
        }).when(cursor).setAlwaysInactive();
        ManagedLedger ledger = mock(ManagedLedger.class);
        when(ledger.getCursors()).thenReturn(List.of(cursor));
        when(mock.getManagedLedger()).thenReturn(ledger);
        return mock;
    }

    /** Appends whose op matches wait until {@link #releaseHeldAppends()}. */
    public synchronized void holdAppends(Predicate<String> opMatches) {
        holdWhen = opMatches;
    }

    public void releaseHeldAppends() {
        List<Runnable> held;
        synchronized (this) {
            holdWhen = op -> false;
            held = new ArrayList<>(heldAppends);
            heldAppends.clear();
        }
        held.forEach(Runnable::run);
    }

    /**
     * The next {@code count} appends whose op matches fail with a managed-ledger error, one
     * the broker's end-transaction chain retries (as a bookie write timeout does); they are
     * recorded as {@code log failed <op> <key>} and leave nothing in the log.
     */
    public synchronized void failNextAppends(Predicate<String> opMatches, int count) {
        failWhen = opMatches;
        failuresLeft = count;
    }

    /** The held appends never happen (the broker died before they reached a bookie); nothing is held from now on. */
    public synchronized void dropHeldAppends() {
        holdWhen = op -> false;
        heldAppends.clear();
    }

    public synchronized int heldAppendCount() {
        return heldAppends.size();
    }

    /** The next {@code count} calls of the cursor's delete fail, releasing nothing (recorded as {@code log release failed}). */
    public synchronized void failNextDeletes(int count) {
        deleteFailuresLeft = count;
    }

    /** The next {@code count} calls of the cursor's delete throw instead of answering. */
    public synchronized void throwNextDeletes(int count) {
        deleteThrowsLeft = count;
    }

    /**
     * The next call of the cursor's delete that releases its entries (not one made to throw or
     * fail) answers with {@code answer}, when the test completes it.
     */
    public synchronized void answerNextDeleteWith(CompletableFuture<Void> answer) {
        nextDeleteAnswer = answer;
    }

    /** Runs {@code action} inside the next call of the cursor's delete, before that delete is done. */
    public synchronized void duringNextDelete(Runnable action) {
        duringNextDelete = action;
    }

    /** Each call of the cursor's delete, in order: the transactions whose entries it released. */
    public synchronized List<java.util.Set<String>> deletes() {
        return List.copyOf(deletes);
    }

    /** The log deleted and created again (its ledgers and properties gone): no entry, no sequence allocated. */
    public synchronized void deleteAndCreateAgain() {
        positions.clear();
        entries.clear();
        deleted.clear();
    }

    /** The highest transaction sequence id the log has seen, as the ledger properties would hold it. */
    public synchronized long maxLocalTxnId() {
        return entries.stream().mapToLong(TransactionMetadataEntry::getMaxLocalTxnId).max().orElse(-1L);
    }

    /**
     * When the log's last entry of {@code op} for the transaction was written: its
     * lastModificationTime, which the stock store takes from the broker's wall clock.
     */
    public synchronized long entryTimeOf(org.apache.pulsar.client.api.transaction.TxnID txn, String op) {
        return entries.stream()
                .filter(entry -> entry.getTxnidMostBits() == txn.getMostSigBits()
                        && entry.getTxnidLeastBits() == txn.getLeastSigBits() && opOf(entry).equals(op))
                .mapToLong(TransactionMetadataEntry::getLastModificationTime)
                .reduce((first, last) -> last)
                .orElseThrow(() -> new AssertionError("no " + op + " entry for " + txn));
    }

    public static String opOf(TransactionMetadataEntry entry) {
        return entry.getMetadataOp() == TransactionMetadataEntry.TransactionMetadataOp.UPDATE
                ? entry.getNewStatus().name() : entry.getMetadataOp().name();
    }

    private CompletableFuture<Position> append(TransactionMetadataEntry entry) {
        String op = opOf(entry);
        CompletableFuture<Position> durable = new CompletableFuture<>();
        synchronized (this) {
            if (failuresLeft > 0 && failWhen.test(op)) {
                failuresLeft--;
                callLog.record("log failed " + op + " " + entry.getTxnidMostBits() + ":" + entry.getTxnidLeastBits());
                return CompletableFuture.failedFuture(new ManagedLedgerException("injected bookie write timeout"));
            }
        }
        Runnable write = () -> {
            Position position;
            synchronized (this) {
                position = PositionFactory.create(1, entries.size());
                positions.add(position);
                entries.add(entry);
            }
            callLog.record("log " + op + " " + entry.getTxnidMostBits() + ":" + entry.getTxnidLeastBits());
            durable.complete(position);
        };
        synchronized (this) {
            if (holdWhen.test(op)) {
                heldAppends.add(write);
                return durable;
            }
        }
        write.run();
        return durable;
    }

    private void release(List<Position> released) {
        java.util.Set<String> keys = new java.util.TreeSet<>();
        synchronized (this) {
            deleted.addAll(released);
            for (Position position : released) {
                TransactionMetadataEntry entry = entries.get((int) position.getEntryId());
                keys.add(entry.getTxnidMostBits() + ":" + entry.getTxnidLeastBits());
            }
        }
        synchronized (this) {
            deletes.add(keys);
        }
        keys.forEach(key -> callLog.record("log released " + key));
    }

    private void replay(TransactionLogReplayCallback callback) {
        List<Position> replayPositions;
        List<TransactionMetadataEntry> replayEntries;
        synchronized (this) {
            replayPositions = new ArrayList<>();
            replayEntries = new ArrayList<>();
            for (int i = 0; i < entries.size(); i++) {
                if (!deleted.contains(positions.get(i))) {
                    replayPositions.add(positions.get(i));
                    replayEntries.add(entries.get(i));
                }
            }
        }
        for (int i = 0; i < replayEntries.size(); i++) {
            callback.handleMetadataEntry(replayPositions.get(i), replayEntries.get(i));
        }
        callback.replayComplete();
    }
}
