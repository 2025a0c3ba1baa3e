package io.github.txnpreserver.statetopic;

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

    /** Writes {@code value} under {@code key}; completes once the write is durable. */
    CompletableFuture<Void> write(String key, byte[] value);

    /** Writes a tombstone for {@code key}, so that compaction drops it. */
    CompletableFuture<Void> delete(String key);

    /** Sends what was written so far without waiting for a batching delay. */
    default void flush() {
    }

    /**
     * Reads the topic's compacted view from the start up to a fixed end (its state when the
     * call began) and hands each entry to {@code visitor} in log order; a tombstone is
     * handed over with a null value.
     *
     * @param reader the thread to read and visit on; reading may block it, so it must be a
     *     thread of the caller's own, not a shared one
     */
    CompletableFuture<Void> readToEnd(Visitor visitor, Executor reader);

    CompletableFuture<Void> closeAsync();

    /** Receives the entries of {@link #readToEnd}. */
    @FunctionalInterface
    interface Visitor {
        void accept(String key, byte[] valueOrNull);
    }
}
