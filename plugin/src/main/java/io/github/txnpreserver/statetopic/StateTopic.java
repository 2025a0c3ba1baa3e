package io.github.txnpreserver.statetopic;

import io.github.txnpreserver.time.Backoff;
import java.time.Duration;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.Executor;

/**
 * One coordinator's compacted state topic, seen as a durable key-value log.
 *
 * <p>An instance is the topic's only writer: it is opened fenced, so that once a
 * coordinator has moved to another broker, the old owner's writes fail instead of
 * landing after the new owner has restored.
 */
public interface StateTopic {

    /**
     * How a failed call is tried again (a block's write, the writer's replacement, the
     * restore's read): soon at first, since most failures pass with a reconnect, and at most
     * every 5 s, so that a topic down for long is not hammered.
     */
    Backoff RETRY = new Backoff(Duration.ofMillis(100), Duration.ofSeconds(5));

    /** Writes {@code value} under {@code key}; completes once the write is durable, with where it is. */
    CompletableFuture<RecordPosition> write(String key, byte[] value);

    /** Writes a tombstone for {@code key}, so that compaction drops it. */
    CompletableFuture<Void> delete(String key);

    /** Sends what was written so far without waiting for a batching delay. */
    default void flush() {
    }

    /**
     * Reads the record of {@code key} written at {@code position} (a position {@link #write}
     * or {@link #readToEnd} gave), from the compacted view: it is there as long as no newer
     * value of the key was written and the topic was not deleted.
     *
     * @return the record's value, or null if the topic holds no record of {@code key} there
     *     (another value of the key was written since, or the topic was created again); fails
     *     if the topic could not be read now
     */
    default CompletableFuture<byte[]> readAt(String key, RecordPosition position) {
        return CompletableFuture.failedFuture(new UnsupportedOperationException("readAt " + this));
    }

    /**
     * Reads the topic's compacted view from the start up to a fixed end (its state when the
     * call began) and hands each entry to {@code visitor} in log order, with its position; a
     * tombstone is handed over with a null value.
     *
     * @param reader the thread to read and visit on; reading may block it, so it must be a
     *     thread of the caller's own, not a shared one
     */
    CompletableFuture<Void> readToEnd(Visitor visitor, Executor reader);

    CompletableFuture<Void> closeAsync();

    /**
     * Asks the broker to compact the topic only once this many bytes of new records have
     * accumulated since the last compaction.
     *
     * @return true once set; false if the broker takes no such setting for this topic (its
     *     topic-level policies are off); fails if it could not be set now
     */
    default CompletableFuture<Boolean> setCompactionThreshold(long bytes) {
        return CompletableFuture.completedFuture(false);
    }

    /** What a failed write says about the writer. */
    default WriteFailure classify(Throwable writeError) {
        return WriteFailure.TRANSIENT;
    }

    /**
     * Replaces the writer: the old one is closed (each of its pending writes has landed or
     * fails) and a new one opened, fencing any other. A topic deleted meanwhile is created
     * again; a terminated one, which can never be written again, is deleted and created
     * again with its records carried over (each at a new position, reported to
     * {@link #onRecordsMoved}): it then answers false, since no record is gone.
     *
     * @param unread whether the coordinator has yet to read the topic (its restore needs a
     *     writer for that): a terminated topic is then not deleted, since what it holds would
     *     be lost; the writer is dropped instead, {@link #readToEnd} reads the topic as it
     *     stands, and writes fail as {@link WriteFailure#LOST} until a reopen once it is read
     * @return true if the topic was created again, so that records written before are gone;
     *     fails with {@link CoordinatorMovedException} if this broker no longer owns the
     *     coordinator, and with any other error if the writer could not be replaced now
     */
    default CompletableFuture<Boolean> reopen(boolean unread) {
        return CompletableFuture.failedFuture(new UnsupportedOperationException("reopen " + this));
    }

    /**
     * Who hears where records were carried when a terminated topic was created again
     * ({@link #reopen}): called from any thread, for each record, before the reopen completes.
     */
    default void onRecordsMoved(RecordsMoved listener) {
    }

    /**
     * Records a replacement under way has carried so far (a terminated topic's, into the topic
     * created again): a replacement whose count moves is making progress, however long it takes.
     */
    default long replacementProgress() {
        return 0;
    }

    /**
     * Whether the topic was deleted and created again by someone else since this writer
     * opened it (or last asked): a system topic comes back by itself when its producer
     * reconnects, empty, and no write fails. Once it answers true, the topic is marked as
     * seen again.
     */
    default CompletableFuture<Boolean> checkCreatedAgain() {
        return CompletableFuture.completedFuture(false);
    }

    /** What a failed write says about the writer that made it. */
    enum WriteFailure {
        /** The write may succeed if sent again with the same writer (the broker was busy, the topic moving). */
        TRANSIENT,
        /** Not acknowledged 5 s after the send timeout: the writer may be wedged; replace it. */
        STUCK,
        /** The writer can write no more: closed, its topic terminated or deleted; replace it. */
        LOST,
        /**
         * Another writer took the topic over (as the coordinator's new owner does when it
         * opens it): this one must not fence it back.
         */
        FENCED
    }

    /** Hears that a record's value is now at another position ({@link #onRecordsMoved}). */
    @FunctionalInterface
    interface RecordsMoved {
        void moved(String key, RecordPosition position);
    }

    /** Receives the entries of {@link #readToEnd}. */
    @FunctionalInterface
    interface Visitor {
        void accept(String key, byte[] valueOrNull, RecordPosition position);
    }
}
