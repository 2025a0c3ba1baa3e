package io.github.txnpreserver.statetopic;

import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.Map;
import java.util.UUID;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CompletionException;
import java.util.concurrent.Executor;
import java.util.concurrent.TimeUnit;
import java.util.function.Supplier;
import org.apache.pulsar.client.admin.PulsarAdmin;
import org.apache.pulsar.client.admin.PulsarAdminException;
import org.apache.pulsar.client.api.Message;
import org.apache.pulsar.client.api.MessageId;
import org.apache.pulsar.client.api.Producer;
import org.apache.pulsar.client.api.ProducerAccessMode;
import org.apache.pulsar.client.api.PulsarClient;
import org.apache.pulsar.client.api.PulsarClientException;
import org.apache.pulsar.client.api.Reader;
import org.apache.pulsar.client.api.Schema;
import org.apache.pulsar.common.util.FutureUtil;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * The state topic {@code persistent://pulsar/system/__terminated_txn_state_<TCid>}, through
 * the broker's internal client.
 *
 * <p>Being in {@code pulsar/system}, the broker loads it as a system topic: compacted, never
 * deduplicated, never deleted for inactivity. It is created explicitly as non-partitioned,
 * because auto-creation would follow the broker's default topic type.
 *
 * <p>Opening order: fence the previous writer (an {@code ExclusiveWithFencing} producer),
 * then read. Reading goes to a fixed end: the open writes a barrier record under one
 * reserved key and reads until that record. {@code hasMessageAvailable()} loops can hang
 * when compaction runs between calls (apache/pulsar PR 18833), and the topic's last message
 * id may be a tombstone that the compacted view never shows; the barrier is the newest value
 * of its key, so compaction always keeps it.
 *
 * <p>A writer that can write no more (fenced, closed, its topic terminated or deleted) or
 * that is wedged is replaced through {@link #reopen}, which the preserver asks for.
 */
public final class PulsarStateTopic implements StateTopic {

    private static final Logger log = LoggerFactory.getLogger(PulsarStateTopic.class);
    private static final String TOPIC_PREFIX = "persistent://pulsar/system/__terminated_txn_state_";
    /** Reserved key of the restore barrier; not a transaction key (those hold a colon). */
    static final String BARRIER_KEY = "restore-barrier";
    private static final long BATCHING_DELAY_MICROS = 1000;
    private static final int RESTORE_RECEIVER_QUEUE = 10_000;
    private static final int RESTORE_READ_TIMEOUT_SECONDS = 60;
    /**
     * A property of the topic (kept in its managed ledger) that the writer sets: a topic
     * that lacks it was created again by a reconnecting producer after a deletion.
     */
    static final String WRITER_PROPERTY = "txn-preserver-writer";

    private final PulsarClient client;
    private final PulsarAdmin admin;
    private final String topic;
    private final Duration sendTimeout;
    private final long coordinatorId;
    private final Supplier<CompletableFuture<Boolean>> stillOwned;
    /** Replaced by {@link #reopen} only, on the coordinator's executor; read by every write. */
    private volatile Producer<byte[]> producer;

    private PulsarStateTopic(PulsarClient client, PulsarAdmin admin, long coordinatorId, Duration sendTimeout,
                             Supplier<CompletableFuture<Boolean>> stillOwned) {
        this.client = client;
        this.admin = admin;
        this.coordinatorId = coordinatorId;
        this.topic = topicName(coordinatorId);
        this.sendTimeout = sendTimeout;
        this.stillOwned = stillOwned;
    }

    public static String topicName(long coordinatorId) {
        return TOPIC_PREFIX + coordinatorId;
    }

    /**
     * Creates the topic if needed and opens it as its only writer, fencing any previous one.
     *
     * @param stillOwned whether this broker still owns the coordinator, asked before a lost
     *     writer is replaced (a new owner fences the old one's writer on purpose)
     */
    public static CompletableFuture<StateTopic> open(PulsarClient client, PulsarAdmin admin, long coordinatorId,
                                                     Duration sendTimeout,
                                                     Supplier<CompletableFuture<Boolean>> stillOwned) {
        PulsarStateTopic stateTopic = new PulsarStateTopic(client, admin, coordinatorId, sendTimeout, stillOwned);
        return createNonPartitioned(admin, stateTopic.topic)
                .thenCompose(created -> stateTopic.newProducer())
                .thenCompose(producer -> stateTopic.markTopic().thenApply(marked -> producer))
                .thenApply(producer -> {
                    stateTopic.producer = producer;
                    log.info("Opened state topic {} as its only writer", stateTopic.topic);
                    return stateTopic;
                });
    }

    private CompletableFuture<Producer<byte[]>> newProducer() {
        return client.newProducer(Schema.BYTES)
                .topic(topic)
                .accessMode(ProducerAccessMode.ExclusiveWithFencing)
                // Records leave with the finishing entry, off the commit's critical path,
                // so a short batching delay costs no latency; under load it turns a
                // bookie write per record into one per batch.
                .enableBatching(true)
                .batchingMaxPublishDelay(BATCHING_DELAY_MICROS, TimeUnit.MICROSECONDS)
                .batchingMaxMessages(1000)
                .blockIfQueueFull(true)
                .sendTimeout((int) sendTimeout.toMillis(), TimeUnit.MILLISECONDS)
                .createAsync();
    }

    @Override
    public CompletableFuture<Void> write(String key, byte[] value) {
        return producer.newMessage().key(key).value(value).sendAsync().thenApply(id -> null);
    }

    @Override
    public CompletableFuture<Void> delete(String key) {
        return producer.newMessage().key(key).value(null).sendAsync().thenApply(id -> null);
    }

    @Override
    public void flush() {
        producer.flushAsync();
    }

    @Override
    public WriteFailure classify(Throwable writeError) {
        Throwable error = FutureUtil.unwrapCompletionException(writeError);
        if (error instanceof PulsarClientException.TimeoutException) {
            return WriteFailure.STUCK;
        }
        if (error instanceof PulsarClientException.ProducerFencedException) {
            return WriteFailure.FENCED;
        }
        if (error instanceof PulsarClientException.AlreadyClosedException
                || error instanceof PulsarClientException.TopicTerminatedException
                || error instanceof PulsarClientException.TopicDoesNotExistException
                || error instanceof PulsarClientException.NotFoundException
                || error instanceof PulsarClientException.NotConnectedException
                || error instanceof PulsarClientException.ProducerBusyException) {
            return WriteFailure.LOST;
        }
        return WriteFailure.TRANSIENT;
    }

    /**
     * Closes the old writer first, so that none of its writes can land after the new one's
     * (the broker persists a closing producer's pending messages before it confirms the
     * close, and the new writer's fence covers a close that failed).
     */
    @Override
    public CompletableFuture<Boolean> reopen() {
        return stillOwned.get().thenCompose(owned -> {
            if (!owned) {
                return CompletableFuture.failedFuture(new CoordinatorMovedException(coordinatorId));
            }
            Producer<byte[]> old = producer;
            return old.closeAsync().handle((closed, error) -> null)
                    .thenCompose(ignored -> createNonPartitioned(admin, topic))
                    .thenCompose(created -> newProducer().thenCompose(replacement -> markTopic().thenApply(marked -> {
                        producer = replacement;
                        log.info("Coordinator {}: replaced the writer of state topic {}{}", coordinatorId, topic,
                                created ? " (the topic was gone and is created again)" : "");
                        return created;
                    })).exceptionallyCompose(error -> {
                        if (FutureUtil.unwrapCompletionException(error)
                                instanceof PulsarClientException.TopicTerminatedException) {
                            return recreateTerminated();
                        }
                        return CompletableFuture.failedFuture(error);
                    }));
        });
    }

    /**
     * A terminated topic accepts no write ever again: it is deleted and created again, and
     * the coordinator writes everything it keeps into it.
     */
    private CompletableFuture<Boolean> recreateTerminated() {
        log.warn("Coordinator {}: state topic {} was terminated and can never be written again; deleting it and"
                + " writing every kept outcome into a new one", coordinatorId, topic);
        return admin.topics().deleteAsync(topic, true)
                .thenCompose(deleted -> createNonPartitioned(admin, topic))
                .thenCompose(created -> newProducer())
                .thenCompose(replacement -> markTopic().thenApply(marked -> {
                    producer = replacement;
                    return true;
                }));
    }

    @Override
    public CompletableFuture<Boolean> checkCreatedAgain() {
        return admin.topics().getPropertiesAsync(topic).thenCompose(properties -> {
            if (properties != null && properties.containsKey(WRITER_PROPERTY)) {
                return CompletableFuture.completedFuture(false);
            }
            log.warn("Coordinator {}: state topic {} was deleted and created again empty; writing every kept"
                    + " outcome into it", coordinatorId, topic);
            return markTopic().thenApply(marked -> true);
        });
    }

    /** Sets the writer's property on the topic (after the producer exists, so the topic is loaded here). */
    private CompletableFuture<Void> markTopic() {
        return admin.topics().updatePropertiesAsync(topic, Map.of(WRITER_PROPERTY, "1"));
    }

    @Override
    public CompletableFuture<Void> readToEnd(Visitor visitor, Executor readerThread) {
        byte[] nonce = UUID.randomUUID().toString().getBytes(StandardCharsets.UTF_8);
        return producer.newMessage().key(BARRIER_KEY).value(nonce).sendAsync()
                .thenCompose(barrier -> client.newReader(Schema.BYTES)
                        .topic(topic)
                        .startMessageId(MessageId.earliest)
                        .readCompacted(true)
                        // Restore reads a whole topic at once: fewer, larger flow permits.
                        .receiverQueueSize(RESTORE_RECEIVER_QUEUE)
                        .createAsync()
                        .thenApplyAsync(reader -> {
                            try {
                                readUntil(reader, barrier, visitor);
                                return null;
                            } finally {
                                reader.closeAsync();
                            }
                        }, readerThread));
    }

    @Override
    public CompletableFuture<Void> closeAsync() {
        return producer.closeAsync();
    }

    @Override
    public String toString() {
        return topic;
    }

    /**
     * Reads with blocking calls, on the restoring coordinator's own thread: a blocking read
     * takes a queued message directly, while every asynchronous read is handed to the
     * client's executor and back, which was half the time of a million-record restore.
     */
    private static void readUntil(Reader<byte[]> reader, MessageId barrier, Visitor visitor) {
        try {
            while (true) {
                Message<byte[]> message = reader.readNext(RESTORE_READ_TIMEOUT_SECONDS, TimeUnit.SECONDS);
                if (message == null) {
                    throw new IllegalStateException("No state-topic record within " + RESTORE_READ_TIMEOUT_SECONDS
                            + " s before the restore barrier " + barrier);
                }
                if (message.getMessageId().compareTo(barrier) >= 0) {
                    return;
                }
                handOver(message, visitor);
            }
        } catch (PulsarClientException e) {
            throw new CompletionException(e);
        }
    }

    private static void handOver(Message<byte[]> message, Visitor visitor) {
        if (BARRIER_KEY.equals(message.getKey())) {
            return;
        }
        visitor.accept(message.hasKey() ? message.getKey() : null, message.getData());
    }

    /** Completes with true if the topic was created, false if it existed (non-partitioned). */
    private static CompletableFuture<Boolean> createNonPartitioned(PulsarAdmin admin, String topic) {
        return admin.topics().createNonPartitionedTopicAsync(topic)
                .thenApply(created -> true)
                .exceptionallyCompose(error -> {
                    if (FutureUtil.unwrapCompletionException(error) instanceof PulsarAdminException.ConflictException) {
                        return requireNonPartitioned(admin, topic).thenApply(existed -> false);
                    }
                    return CompletableFuture.failedFuture(error);
                });
    }

    private static CompletableFuture<Void> requireNonPartitioned(PulsarAdmin admin, String topic) {
        return admin.topics().getPartitionedTopicMetadataAsync(topic).thenCompose(metadata -> {
            if (metadata.partitions > 0) {
                return CompletableFuture.failedFuture(new IllegalStateException("State topic " + topic
                        + " exists as a partitioned topic with " + metadata.partitions + " partitions; the plugin"
                        + " needs it non-partitioned. Delete it (its kept outcomes are lost, live transactions"
                        + " are not) and the coordinator recreates it."));
            }
            return CompletableFuture.completedFuture(null);
        });
    }
}
