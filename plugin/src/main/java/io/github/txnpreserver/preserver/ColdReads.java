package io.github.txnpreserver.preserver;

import io.github.txnpreserver.preserver.kept.BlockRecordCodec;
import io.github.txnpreserver.preserver.kept.OutcomeBlock;
import io.github.txnpreserver.preserver.kept.OwnerIds;
import io.github.txnpreserver.preserver.stats.PreserverStats;
import io.github.txnpreserver.preserver.thread.CoordinatorThread;
import io.github.txnpreserver.preserver.thread.PreserverUnavailableException;
import io.github.txnpreserver.preserver.thread.RateLimitedLog;
import io.github.txnpreserver.statetopic.MalformedRecordException;
import io.github.txnpreserver.statetopic.RecordPosition;
import io.github.txnpreserver.statetopic.StateTopic;
import io.github.txnpreserver.time.Scheduler;
import it.unimi.dsi.fastutil.longs.Long2ObjectLinkedOpenHashMap;
import it.unimi.dsi.fastutil.longs.Long2ObjectOpenHashMap;
import java.time.Duration;
import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.Collections;
import java.util.IdentityHashMap;
import java.util.List;
import java.util.Set;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import java.util.function.LongFunction;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * Reads the records of cold blocks ({@link ColdBlocks}) from the state topic and decodes them:
 * for a lookup of a cold outcome, and for a cold block back in memory that needs its cold
 * part ({@link OutcomeIndex.ColdReader}).
 *
 * <ul>
 *   <li><b>One read per block at a time</b>: every asker of a block whose read is in flight
 *       shares it (a retried end looks its transaction up two or three times).</li>
 *   <li><b>A few blocks remembered</b>: the last {@value #CACHED} blocks read, by position,
 *       so that a retry's later lookups and a burst of retries of neighbouring transactions
 *       read once.</li>
 *   <li><b>Bounded</b>: at most {@value #MAX_READING} reads at once, at most
 *       {@value #MAX_QUEUED} blocks waiting; each asker gets an answer within
 *       {@code bound}, else "unavailable" (the client retries: "coordinator not found",
 *       never "not found").</li>
 *   <li><b>A record missing where the cold tier points, or malformed</b> (someone else
 *       wrote the key, the topic was created again) is logged, counted with the malformed
 *       records, and answered as absent: its outcomes are unknown here, as a malformed
 *       record's are at a restore.</li>
 * </ul>
 *
 * <p>Confined to the coordinator's thread; the topic's answers hop back onto it.
 */
final class ColdReads {

    private static final Logger log = LoggerFactory.getLogger(ColdReads.class);
    static final int CACHED = 64;
    static final int MAX_READING = 4;
    static final int MAX_QUEUED = 10_000;
    private static final long REPORT_INTERVAL_SECONDS = 60;

    /** A cold block's record, decoded: its outcomes, and the names of their owner ids. */
    record Decoded(OutcomeBlock block, OwnerIds owners) {
    }

    private record Read(long blockIndex, RecordPosition position, List<CompletableFuture<Decoded>> askers) {
    }

    private final long coordinatorId;
    private final StateTopic stateTopic;
    private final CoordinatorThread thread;
    private final PreserverStats stats;
    private final Duration bound;
    private final LongFunction<RecordPosition> currentPosition;
    private final RateLimitedLog missing;
    private final Long2ObjectLinkedOpenHashMap<Decoded> cache = new Long2ObjectLinkedOpenHashMap<>();
    private final Long2ObjectLinkedOpenHashMap<RecordPosition> cachedAt = new Long2ObjectLinkedOpenHashMap<>();
    private final Long2ObjectOpenHashMap<Read> reads = new Long2ObjectOpenHashMap<>();
    private final ArrayDeque<Read> queued = new ArrayDeque<>();
    /**
     * Every read queued or in flight, a block's former ones too (a read at a position the
     * record has left, displaced in {@link #reads}): the close answers all their askers.
     */
    private final Set<Read> open = Collections.newSetFromMap(new IdentityHashMap<>());
    private int reading;

    /**
     * @param currentPosition where the cold tier points for a block now: a record missing at a
     *     position it no longer points to moved (a terminated topic carried over), and is not
     *     counted as missing
     */
    ColdReads(long coordinatorId, StateTopic stateTopic, CoordinatorThread thread, PreserverStats stats, Duration bound,
              LongFunction<RecordPosition> currentPosition) {
        this.coordinatorId = coordinatorId;
        this.currentPosition = currentPosition;
        this.stateTopic = stateTopic;
        this.thread = thread;
        this.stats = stats;
        this.bound = bound;
        this.missing = new RateLimitedLog(thread::nanoTime, REPORT_INTERVAL_SECONDS, TimeUnit.SECONDS);
    }

    /**
     * The record of a cold block, decoded; null if it is missing or malformed (counted), or
     * moved meanwhile (not counted: the asker finds where it is now).
     * Completes on the coordinator's thread; fails with {@link PreserverUnavailableException}
     * if it could not be read within the bound, or the coordinator closed.
     */
    CompletableFuture<Decoded> read(long blockIndex, RecordPosition position) {
        assert thread.assertOwner();
        CompletableFuture<Decoded> answer = new CompletableFuture<>();
        if (thread.isClosed()) {
            answer.completeExceptionally(unavailable("closed"));
            return answer;
        }
        Decoded cached = cache.getAndMoveToLast(blockIndex);
        if (cached != null && position.equals(cachedAt.get(blockIndex))) {
            stats.coldReadsCached.increment();
            answer.complete(cached);
            return answer;
        }
        Read read = reads.get(blockIndex);
        if (read == null || !read.position().equals(position)) {
            if (reads.size() >= MAX_QUEUED + MAX_READING) {
                answer.completeExceptionally(unavailable("has " + reads.size() + " cold records to read already"));
                return answer;
            }
            read = new Read(blockIndex, position, new ArrayList<>(2));
            reads.put(blockIndex, read);
            queued.add(read);
            open.add(read);
        }
        read.askers().add(answer);
        Scheduler.Cancellable giveUp = thread.schedule(() -> answer.completeExceptionally(unavailable(
                "could not read the state-topic record of block " + blockIndex + " within " + bound.toMillis()
                        + " ms")), bound);
        answer.whenComplete((decoded, error) -> giveUp.cancel());
        startReads();
        return answer;
    }

    /** The block's record changed or left the cold tier: it is read again if asked. */
    void forget(long blockIndex) {
        cache.remove(blockIndex);
        cachedAt.remove(blockIndex);
    }

    void close() {
        for (Read read : open) {
            read.askers().forEach(asker -> asker.completeExceptionally(unavailable("closed")));
        }
        open.clear();
        reads.clear();
        queued.clear();
        cache.clear();
        cachedAt.clear();
    }

    private void startReads() {
        while (reading < MAX_READING && !queued.isEmpty()) {
            Read read = queued.poll();
            if (read.askers().stream().allMatch(CompletableFuture::isDone)) {
                // Every asker was answered "unavailable" while it queued: the read would only
                // hold back those behind it.
                if (reads.get(read.blockIndex()) == read) {
                    reads.remove(read.blockIndex());
                }
                open.remove(read);
                continue;
            }
            reading++;
            long startNanos = thread.nanoTime();
            CompletableFuture<byte[]> value;
            try {
                value = stateTopic.readAt(BlockRecordCodec.key(read.blockIndex()), read.position());
            } catch (RuntimeException e) {
                value = CompletableFuture.failedFuture(e);
            }
            value.whenComplete((bytes, error) -> thread.execute(() -> readDone(read, bytes, error, startNanos)));
        }
    }

    private void readDone(Read read, byte[] value, Throwable error, long startNanos) {
        reading--;
        open.remove(read);
        if (reads.get(read.blockIndex()) == read) {
            reads.remove(read.blockIndex());
        }
        stats.coldReads.increment();
        stats.coldReadLatency.recordNanos(thread.nanoTime() - startNanos);
        if (error != null) {
            stats.coldReadFailures.increment();
            PreserverUnavailableException failed = unavailable("could not read the state-topic record of block "
                    + read.blockIndex() + ": " + error);
            read.askers().forEach(asker -> asker.completeExceptionally(failed));
        } else {
            Decoded decoded = decode(read, value);
            if (decoded != null) {
                cache.putAndMoveToLast(read.blockIndex(), decoded);
                cachedAt.put(read.blockIndex(), read.position());
                while (cache.size() > CACHED) {
                    cachedAt.remove(cache.firstLongKey());
                    cache.removeFirst();
                }
            }
            read.askers().forEach(asker -> asker.complete(decoded));
        }
        startReads();
    }

    private Decoded decode(Read read, byte[] value) {
        String key = BlockRecordCodec.key(read.blockIndex());
        if (value == null && !read.position().equals(currentPosition.apply(read.blockIndex()))) {
            // Moved meanwhile: the asker reads it where it is now.
            return null;
        }
        try {
            if (value == null) {
                throw new MalformedRecordException("no record of key '" + key + "' at " + read.position()
                        + ", where the cold tier points (written over by another writer, or the topic was created"
                        + " again)");
            }
            OwnerIds owners = new OwnerIds();
            OutcomeBlock block = BlockRecordCodec.toBlock(
                    BlockRecordCodec.decode(key, value, coordinatorId, BlockRecordCodec.MAX_BLOCK_INDEX), owners);
            return new Decoded(block, owners);
        } catch (MalformedRecordException | RuntimeException e) {
            stats.malformedRecords.increment();
            missing.occurred(1, count -> log.warn("Coordinator {}: {} cold state-topic records could not be used in"
                    + " the last {} s; their outcomes are unknown here (last: {})", coordinatorId, count,
                    REPORT_INTERVAL_SECONDS, e.getMessage()));
            return null;
        }
    }

    private PreserverUnavailableException unavailable(String why) {
        return new PreserverUnavailableException("coordinator " + coordinatorId + " " + why);
    }
}
