package io.github.txnpreserver.preserver.restore;

import io.github.txnpreserver.preserver.kept.BlockRecordCodec;
import io.github.txnpreserver.preserver.kept.RestoredBlocks;
import io.github.txnpreserver.preserver.stats.PreserverStats;
import io.github.txnpreserver.preserver.thread.CoordinatorThread;
import io.github.txnpreserver.preserver.writer.StateTopicWriter;
import io.github.txnpreserver.statetopic.MalformedRecordException;
import io.github.txnpreserver.statetopic.RecordPosition;
import io.github.txnpreserver.statetopic.StateTopic;
import java.time.Duration;
import java.util.concurrent.CompletableFuture;
import java.util.function.LongSupplier;
import org.apache.pulsar.common.util.FutureUtil;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * Reads a coordinator's state topic once when it opens: to the barrier its writer puts at
 * the end (see {@link StateTopic#readToEnd}), on a thread of its own, into a
 * {@link RestoredBlocks}; then hands it, whole, to the coordinator's thread for one merge.
 * A read that fails is read again from the start, with backoff, until it succeeds or the
 * coordinator closes.
 *
 * <p>Every record is validated ({@link BlockRecordCodec#decode}): a record this coordinator
 * could not have written (another coordinator's, a block past the sequences its log has
 * allocated, an alias key, an owner reference out of range, bytes that are no record) is
 * logged, counted and skipped, and nothing it holds can stop the restore.
 *
 * <p>Phases: {@code READING → (failed) WAITING → READING … → DONE}; {@code CLOSED} from any.
 * Everything but the read itself runs on the coordinator's thread.
 */
public final class Restorer {

    private static final Logger log = LoggerFactory.getLogger(Restorer.class);

    enum Phase { READING, WAITING, DONE, CLOSED }

    /** What the coordinator does with a read that succeeded: one merge. */
    @FunctionalInterface
    public interface ReadDone {
        /**
         * @param highestBlock the highest block of this coordinator a record or a tombstone
         *     was read for, -1 if none
         */
        void read(RestoredBlocks blocks, long records, long blockRecords, long blockBytes, long highestBlock);
    }

    private final long coordinatorId;
    private final StateTopic stateTopic;
    private final CoordinatorThread thread;
    private final PreserverStats stats;
    private final LongSupplier highestSequence;
    private final LongSupplier hotBytes;
    private final int perClient;
    private final StateTopicWriter writer;
    private final ReadDone done;
    private Phase phase = Phase.WAITING;
    /** The delay before the read after the last failed one ({@link StateTopic#RETRY}). */
    private Duration retryDelay = Duration.ZERO;

    /**
     * @param highestSequence the highest sequence id the coordinator's log has allocated: a
     *     block past it cannot be this coordinator's
     */
    /**
     * @param hotBytes heap a read may keep decoded, asked at each read: past it the oldest
     *     blocks read are kept cold
     */
    public Restorer(long coordinatorId, StateTopic stateTopic, CoordinatorThread thread, PreserverStats stats,
             LongSupplier highestSequence, LongSupplier hotBytes, int perClient, StateTopicWriter writer,
             ReadDone done) {
        this.hotBytes = hotBytes;
        this.perClient = perClient;
        this.coordinatorId = coordinatorId;
        this.stateTopic = stateTopic;
        this.thread = thread;
        this.stats = stats;
        this.highestSequence = highestSequence;
        this.writer = writer;
        this.done = done;
    }

    /** Starts a read. On the coordinator's thread. */
    public void read() {
        assert thread.assertOwner();
        if (phase != Phase.WAITING) {
            return;
        }
        phase = Phase.READING;
        // Read at each attempt: this coordinator may have allocated more since the last one.
        long maxBlock = BlockRecordCodec.blockOf(Math.max(0, highestSequence.getAsLong()));
        Collector collector = new Collector(maxBlock, new RestoredBlocks(hotBytes.getAsLong(), perClient));
        CompletableFuture<Void> read;
        try {
            read = stateTopic.readToEnd(collector::accept,
                    thread.blockingExecutor("txn-preserver-restore-" + coordinatorId));
        } catch (RuntimeException e) {
            read = CompletableFuture.failedFuture(e);
        }
        read.whenComplete((ignored, error) -> thread.execute(() -> readDone(collector, error)));
    }

    public void close() {
        phase = Phase.CLOSED;
    }

    private void readDone(Collector collector, Throwable error) {
        if (phase != Phase.READING) {
            return;
        }
        if (error == null) {
            phase = Phase.DONE;
            // Counted once, for the read that is kept (a failed read is read again whole).
            stats.malformedRecords.add(collector.malformed);
            stats.restoreMalformedRecords = collector.malformed;
            done.read(collector.blocks, collector.records, collector.blockRecords, collector.blockBytes,
                    collector.highestBlock);
            return;
        }
        phase = Phase.WAITING;
        retryDelay = StateTopic.RETRY.next(retryDelay);
        log.warn("Coordinator {}: could not read its state topic {}; retrying in {} ms (lookups of ended"
                + " transactions wait): {}", coordinatorId, stateTopic, retryDelay.toMillis(),
                FutureUtil.unwrapCompletionException(error).toString());
        StateTopic.WriteFailure kind = stateTopic.classify(error);
        if (kind == StateTopic.WriteFailure.FENCED) {
            writer.release(error);
            return;
        }
        if (kind != StateTopic.WriteFailure.TRANSIENT) {
            // The real topic's read writes a barrier with the writer: it needs one now.
            writer.lostDuringRestore(error);
        }
        readAgain();
    }

    private void readAgain() {
        thread.schedule(this::read, retryDelay);
    }

    /** Collects one read's records on the reading thread. */
    private final class Collector {
        final RestoredBlocks blocks;
        final long maxBlock;
        long records;
        long blockRecords;
        long blockBytes;
        long malformed;
        long highestBlock = -1;

        Collector(long maxBlock, RestoredBlocks blocks) {
            this.maxBlock = maxBlock;
            this.blocks = blocks;
        }

        void accept(String key, byte[] value, RecordPosition position) {
            records++;
            try {
                long index = BlockRecordCodec.blockIndexOf(key);
                if (value == null) {
                    blocks.deleted(index);
                    if (index <= maxBlock) {
                        highestBlock = Math.max(highestBlock, index);
                    }
                    return;
                }
                blocks.put(BlockRecordCodec.decode(key, value, coordinatorId, maxBlock), position);
                highestBlock = Math.max(highestBlock, index);
                blockRecords++;
                blockBytes += value.length;
            } catch (MalformedRecordException e) {
                skipped(e.getMessage());
            } catch (RuntimeException e) {
                // A record this reader cannot apply must not stop the restore (it would be read
                // again at every retry): skipped like a malformed one.
                skipped("record under key '" + key + "' could not be applied: " + e);
            }
        }

        private void skipped(String why) {
            malformed++;
            log.warn("Coordinator {}: skipping malformed state-topic record: {}", coordinatorId, why);
        }
    }

}
