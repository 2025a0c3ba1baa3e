package io.github.txnpreserver.store;

import io.github.txnpreserver.preserver.Outcome;
import io.github.txnpreserver.preserver.TransactionMetadataPreserver;
import it.unimi.dsi.fastutil.longs.Long2ObjectOpenHashMap;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import org.apache.bookkeeper.mledger.ManagedLedger;
import org.apache.bookkeeper.mledger.ManagedLedgerConfig;
import org.apache.bookkeeper.mledger.Position;
import org.apache.pulsar.client.api.transaction.TxnID;
import org.apache.pulsar.transaction.coordinator.TransactionCoordinatorID;
import org.apache.pulsar.transaction.coordinator.TransactionLogReplayCallback;
import org.apache.pulsar.transaction.coordinator.impl.DisabledTxnLogBufferedWriterMetricsStats;
import org.apache.pulsar.transaction.coordinator.impl.MLTransactionLogImpl;
import org.apache.pulsar.transaction.coordinator.impl.TxnLogBufferedWriterConfig;
import org.apache.pulsar.transaction.coordinator.proto.TransactionMetadataEntry;
import org.apache.pulsar.transaction.coordinator.proto.TransactionMetadataEntry.TransactionMetadataOp;
import org.apache.pulsar.transaction.coordinator.proto.TxnStatus;

/**
 * The coordinator's transaction log, whose entries of an ended transaction are released only
 * once its outcome is durable in the state topic. Until then the log is the outcome's
 * durable copy: a coordinator that opens replays the terminal entries still in it and keeps
 * their outcomes again. So the terminal step never waits for the state topic, and the
 * preserver writes it in groups (docs/DESIGN.md, "The log is the outcome's first copy").
 *
 * <p>It is an {@link MLTransactionLogImpl} (the stock store's declared type) that delegates
 * every call to the opened log, changing two of them:
 * <ul>
 *   <li>{@link #deletePosition}: answered at once, done once every outcome the preserver
 *       holds now is durable. The stock store waits for the answer only to drop a replayed
 *       transaction from its map, which must not wait for the state topic.</li>
 *   <li>{@link #replayAsync}: the terminal entry of a transaction whose first entry is still
 *       in the log gives the preserver its outcome, with the owner of that first entry and
 *       the terminal entry's time, before the stock store sees the entry. A terminal entry
 *       whose first entry is gone was released, so its outcome was durable already.</li>
 * </ul>
 */
public final class RecordGatedTransactionLog extends MLTransactionLogImpl {

    private final MLTransactionLogImpl log;
    private final TransactionMetadataPreserver preserver;

    private RecordGatedTransactionLog(TransactionCoordinatorID tcId, MLTransactionLogImpl log,
                                      TransactionMetadataPreserver preserver) {
        // The superclass's state is never used: every method is delegated.
        super(tcId, null, new ManagedLedgerConfig(), new TxnLogBufferedWriterConfig(), null,
                DisabledTxnLogBufferedWriterMetricsStats.DISABLED_BUFFERED_WRITER_METRICS);
        this.log = log;
        this.preserver = preserver;
    }

    static MLTransactionLogImpl gate(TransactionCoordinatorID tcId, MLTransactionLogImpl log,
                                     TransactionMetadataPreserver preserver) {
        return new RecordGatedTransactionLog(tcId, log, preserver);
    }

    @Override
    public CompletableFuture<Void> initialize() {
        return log.initialize();
    }

    @Override
    public CompletableFuture<Position> append(TransactionMetadataEntry entry) {
        return log.append(entry);
    }

    @Override
    public CompletableFuture<Void> deletePosition(List<Position> positions) {
        preserver.afterChangesDurable(() -> log.deletePosition(positions));
        return CompletableFuture.completedFuture(null);
    }

    @Override
    public void replayAsync(TransactionLogReplayCallback callback) {
        log.replayAsync(new OutcomeTap(callback));
    }

    @Override
    public CompletableFuture<Void> closeAsync() {
        return log.closeAsync();
    }

    @Override
    public ManagedLedger getManagedLedger() {
        return log.getManagedLedger();
    }

    /** Keeps the outcomes of the terminal entries a replay meets, then hands each entry on. */
    private final class OutcomeTap implements TransactionLogReplayCallback {
        private static final String NO_OWNER = new String("");

        private final TransactionLogReplayCallback stock;
        /** Owners of the transactions whose first entry was replayed and that have not ended yet. */
        private final Long2ObjectOpenHashMap<String> owners = new Long2ObjectOpenHashMap<>();

        OutcomeTap(TransactionLogReplayCallback stock) {
            this.stock = stock;
        }

        @Override
        public void handleMetadataEntry(Position position, TransactionMetadataEntry entry) {
            long sequence = entry.getTxnidLeastBits();
            if (entry.getMetadataOp() == TransactionMetadataOp.NEW) {
                owners.put(sequence, entry.hasOwner() ? entry.getOwner() : NO_OWNER);
            } else if (entry.getMetadataOp() == TransactionMetadataOp.UPDATE && entry.hasNewStatus()
                    && (entry.getNewStatus() == TxnStatus.COMMITTED || entry.getNewStatus() == TxnStatus.ABORTED)) {
                String owner = owners.remove(sequence);
                if (owner != null) {
                    preserver.keepFromLog(new TxnID(entry.getTxnidMostBits(), sequence),
                            Outcome.of(entry.getNewStatus()), owner == NO_OWNER ? null : owner,
                            entry.getLastModificationTime());
                }
            }
            stock.handleMetadataEntry(position, entry);
        }

        @Override
        public void replayComplete() {
            owners.clear();
            stock.replayComplete();
        }
    }
}
