package io.github.txnpreserver.statetopic;

import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CompletionException;
import java.util.concurrent.Executor;
import java.util.concurrent.TimeUnit;
import java.util.function.BooleanSupplier;
import org.apache.pulsar.client.api.Message;
import org.apache.pulsar.client.api.MessageId;
import org.apache.pulsar.client.api.PulsarClient;
import org.apache.pulsar.client.api.PulsarClientException;
import org.apache.pulsar.client.api.Reader;
import org.apache.pulsar.client.api.Schema;

/**
 * Reads a state topic's compacted view for a restore, with blocking calls on the restore's
 * own thread: a blocking read takes a queued message directly, while every asynchronous read
 * is handed to the client's executor and back, which was half the time of a million-record
 * restore. Each read is bounded: a minute without a record fails it (it is read again).
 */
final class CompactedViewReader {

    /**
     * Records read ahead: a restore's read is paced by the broker's dispatch, which waits for
     * the reader's permits (a large restore read 390 625 records in 15.3 s with 10 000 ahead,
     * in 10.8 s with 50 000). Bounded in bytes: the first {@value #PROBE_RECORDS} records are
     * read with {@value #PROBE_RECORDS} ahead, and the rest with as many as
     * {@value #READ_AHEAD_BYTES} bytes of records of their size hold, within these bounds.
     */
    private static final int MIN_READ_AHEAD = 1_000;
    private static final int MAX_READ_AHEAD = 50_000;
    private static final int PROBE_RECORDS = 1_000;
    private static final long READ_AHEAD_BYTES = 32L << 20;
    private static final int READ_TIMEOUT_SECONDS = 60;
    private static final int POINT_READ_TIMEOUT_SECONDS = 10;

    private final PulsarClient client;
    private final String topic;
    private final BooleanSupplier closed;

    CompactedViewReader(PulsarClient client, String topic, BooleanSupplier closed) {
        this.client = client;
        this.topic = topic;
        this.closed = closed;
    }

    /** Reads up to the barrier record (excluded): a fixed end that compaction cannot move. */
    CompletableFuture<Void> readUntil(MessageId barrier, StateTopic.Visitor visitor, Executor readerThread) {
        return newReader(MessageId.earliest, PROBE_RECORDS).thenApplyAsync(reader -> {
            try {
                return readUntil(reader, barrier, visitor, PROBE_RECORDS);
            } finally {
                reader.closeAsync();
            }
        }, readerThread).thenCompose(probe -> probe.last() == null ? CompletableFuture.completedFuture(null)
                : newReader(probe.last(), readAhead(probe)).thenApplyAsync(reader -> {
                    try {
                        readUntil(reader, barrier, visitor, Long.MAX_VALUE);
                        return null;
                    } finally {
                        reader.closeAsync();
                    }
                }, readerThread));
    }

    /** What a read up to a number of records saw: where it stopped (null at the barrier), and how much. */
    private record Read(MessageId last, long records, long bytes) {
    }

    private Read readUntil(Reader<byte[]> reader, MessageId barrier, StateTopic.Visitor visitor, long most) {
        long records = 0;
        long bytes = 0;
        MessageId last = null;
        while (!closed.getAsBoolean()) {
            if (records >= most) {
                return new Read(last, records, bytes);
            }
            Message<byte[]> message = next(reader, "before the restore barrier " + barrier);
            if (message.getMessageId().compareTo(barrier) >= 0) {
                return new Read(null, records, bytes);
            }
            handOver(message, visitor);
            records++;
            bytes += message.size();
            last = message.getMessageId();
        }
        throw new CompletionException(new PulsarClientException.AlreadyClosedException("state topic " + topic
                + " closed during the restore"));
    }

    private static int readAhead(Read probe) {
        long perRecord = Math.max(1, probe.bytes() / Math.max(1, probe.records()));
        return (int) Math.max(MIN_READ_AHEAD, Math.min(MAX_READ_AHEAD, READ_AHEAD_BYTES / perRecord));
    }

    /** A terminated topic takes no barrier, and nothing is written to it any more: reads what it has. */
    CompletableFuture<Void> readAll(StateTopic.Visitor visitor, Executor readerThread) {
        return newReader(MessageId.earliest, MIN_READ_AHEAD * 10).thenApplyAsync(reader -> {
            try {
                while (!closed.getAsBoolean() && reader.hasMessageAvailable()) {
                    handOver(next(reader, "in terminated topic " + topic), visitor);
                }
                if (closed.getAsBoolean()) {
                    // Not read to its end: must not look like a whole read.
                    throw new PulsarClientException.AlreadyClosedException("state topic " + topic
                            + " closed during its read");
                }
                return null;
            } catch (PulsarClientException e) {
                throw new CompletionException(e);
            } finally {
                reader.closeAsync();
            }
        }, readerThread);
    }

    /**
     * The value of {@code key}'s record at {@code position}, or null if the compacted view has
     * another message there (a newer value of the key was written, the topic was created
     * again): a reader opened at the position, one message read, closed. Bounded: a read that
     * finds nothing within {@value #POINT_READ_TIMEOUT_SECONDS} s fails.
     */
    CompletableFuture<byte[]> readAt(String key, RecordPosition position) {
        return client.newReader(Schema.BYTES)
                .topic(topic)
                .startMessageId(position.toMessageId())
                .startMessageIdInclusive()
                .readCompacted(true)
                .receiverQueueSize(1)
                .createAsync()
                .thenCompose(reader -> reader.readNextAsync()
                        .orTimeout(POINT_READ_TIMEOUT_SECONDS, TimeUnit.SECONDS)
                        .thenApply(message -> key.equals(message.getKey())
                                && position.sameMessage(RecordPosition.of(message.getMessageId()))
                                ? message.getData() : null)
                        .whenComplete((value, error) -> reader.closeAsync()));
    }

    /** A reader of the compacted view from just after {@code start} ({@code earliest}: from the start). */
    private CompletableFuture<Reader<byte[]>> newReader(MessageId start, int readAhead) {
        return client.newReader(Schema.BYTES)
                .topic(topic)
                .startMessageId(start)
                .readCompacted(true)
                .receiverQueueSize(readAhead)
                .createAsync();
    }

    private static Message<byte[]> next(Reader<byte[]> reader, String where) {
        try {
            Message<byte[]> message = reader.readNext(READ_TIMEOUT_SECONDS, TimeUnit.SECONDS);
            if (message == null) {
                throw new IllegalStateException("No state-topic record within " + READ_TIMEOUT_SECONDS + " s "
                        + where);
            }
            return message;
        } catch (PulsarClientException e) {
            throw new CompletionException(e);
        }
    }

    private static void handOver(Message<byte[]> message, StateTopic.Visitor visitor) {
        if (PulsarStateTopic.BARRIER_KEY.equals(message.getKey())) {
            return;
        }
        visitor.accept(message.hasKey() ? message.getKey() : null, message.getData(),
                RecordPosition.of(message.getMessageId()));
    }
}
