package io.github.txnpreserver.statetopic;

import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.Map;
import java.util.UUID;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CompletionException;
import java.util.concurrent.Executor;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;
import java.util.function.Supplier;
import org.apache.pulsar.client.admin.PulsarAdmin;
import org.apache.pulsar.client.admin.PulsarAdminException;
import org.apache.pulsar.client.api.MessageId;
import org.apache.pulsar.client.api.Producer;
import org.apache.pulsar.client.api.ProducerAccessMode;
import org.apache.pulsar.client.api.PulsarClient;
import org.apache.pulsar.client.api.PulsarClientException;
import org.apache.pulsar.client.api.Schema;
import org.apache.pulsar.common.util.FutureUtil;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * The state topic {@code persistent://pulsar/system/__terminated_txn_state_<TCid>}, through
 * the state topics' own client (the broker client's settings, on the broker's threads).
 *
 * <p>Being in {@code pulsar/system}, the broker loads it as a system topic: compacted, never
 * deduplicated, never deleted for inactivity. It is created explicitly as non-partitioned,
 * because auto-creation would follow the broker's default topic type.
 *
 * <p>Opening order: fence the previous writer (an {@code ExclusiveWithFencing} producer),
 * then read. Reading goes to a fixed end: {@link #readToEnd} writes a barrier record under
 * one reserved key and reads until that record. {@code hasMessageAvailable()} loops can hang
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
    /** Reserved key of the restore barrier; not a block key. */
    static final String BARRIER_KEY = "restore-barrier";
    private static final long BATCHING_DELAY_MICROS = 1000;
    /**
     * A property of the topic (kept in its managed ledger) that the writer sets: a topic
     * that lacks it was created again by a reconnecting producer after a deletion.
     */
    static final String WRITER_PROPERTY = "txn-preserver-writer";
    /** The broker's own property of the topic: the fencing epoch, moved by each new fencing producer. */
    static final String EPOCH_PROPERTY = "pulsar.topic.epoch";
    /** After the send timeout, how long a send may still take before it counts as wedged. */
    private static final long WEDGED_MARGIN_MILLIS = 5_000;

    private final PulsarClient client;
    private final PulsarAdmin admin;
    private final String topic;
    private final Duration sendTimeout;
    private final long coordinatorId;
    private final Supplier<CompletableFuture<Boolean>> stillOwned;
    /**
     * Replaced by {@link #reopen} only, asked from the coordinator's thread; read by every write.
     * Null while the topic is terminated: it is read, then replaced.
     */
    private volatile Producer<byte[]> producer;
    /** The topic's fencing epoch once this writer had opened it: another one means another writer fenced it. */
    private volatile String ownEpoch;
    private volatile boolean closed;
    private final boolean topicPoliciesOn;
    private final CompactedViewReader reads;
    /**
     * The current writer attempt: the open is 0, each {@link #reopen} the next; a close, or
     * an attempt its caller gave up on, moves it past them. An attempt creates its fencing
     * producer only while it is still current, and adopts it only then: a replacement given
     * up on neither fences the writer a later attempt installed nor, answering late,
     * installs its own.
     */
    private final AtomicLong attempts = new AtomicLong();
    /**
     * Completes once the latest attempt's fencing producer has been created and adopted or
     * closed, or its creation failed or never started. The next attempt compares epochs only
     * after it: a producer still being created for an attempt given up on may move the epoch
     * at any moment, and must not read as another writer's fence.
     */
    private CompletableFuture<Void> settled = CompletableFuture.completedFuture(null);
    /** The latest fencing producer asked of the broker, until it is adopted or closed: a close waits for it. */
    private volatile CompletableFuture<?> creating = CompletableFuture.completedFuture(null);
    private final CarryOver carry;
    private volatile RecordsMoved moved = (key, position) -> { };
    /**
     * From the deletion of a terminated topic until its carrier is copied back: positions
     * read now would find nothing (the records are in the carrier), so reads fail (retried).
     */
    private volatile boolean carrying;
    /** Moved each time a carry deletes the topic: a read started before found nothing because of it. */
    private final AtomicLong carries = new AtomicLong();
    /** The compaction threshold last set: a topic created again by a carry lost its policies with it. */
    private volatile Long compactionThreshold;

    private PulsarStateTopic(PulsarClient client, PulsarAdmin admin, long coordinatorId, Duration sendTimeout,
                             Supplier<CompletableFuture<Boolean>> stillOwned, boolean topicPoliciesOn) {
        this.client = client;
        this.admin = admin;
        this.coordinatorId = coordinatorId;
        this.topic = topicName(coordinatorId);
        this.sendTimeout = sendTimeout;
        this.stillOwned = stillOwned;
        this.topicPoliciesOn = topicPoliciesOn;
        this.reads = new CompactedViewReader(client, topic, () -> closed);
        this.carry = new CarryOver(client, admin, coordinatorId, topic, sendTimeout.toMillis());
    }

    public static String topicName(long coordinatorId) {
        return TOPIC_PREFIX + coordinatorId;
    }

    /**
     * Creates the topic if needed and opens it as its only writer, fencing any previous one.
     * A terminated topic is opened without a writer: it is read, and then replaced.
     *
     * @param stillOwned whether this broker still owns the coordinator, asked before a lost
     *     writer is replaced (a new owner fences the old one's writer on purpose)
     * @param topicPoliciesOn whether the broker keeps topic-level policies (else it takes no
     *     compaction threshold for the topic, and is not asked)
     */
    public static CompletableFuture<StateTopic> open(PulsarClient client, PulsarAdmin admin, long coordinatorId,
                                                     Duration sendTimeout,
                                                     Supplier<CompletableFuture<Boolean>> stillOwned,
                                                     boolean topicPoliciesOn) {
        PulsarStateTopic stateTopic = new PulsarStateTopic(client, admin, coordinatorId, sendTimeout, stillOwned,
                topicPoliciesOn);
        return createNonPartitioned(admin, stateTopic.topic)
                .thenCompose(created -> stateTopic.propertiesIfAny())
                .thenCompose(before -> stateTopic.noteOwed(before).thenCompose(noted -> stateTopic.newProducer())
                        .thenCompose(producer -> stateTopic.adopt(producer, 0))
                        // A carry that a crash interrupted is finished before anything is read or written.
                        .thenCompose(adopted -> stateTopic.carry.backIfAny(adopted.producer(), CarryOver.owed(before),
                                (key, position) -> { }, () -> !stateTopic.closed))
                        .thenCompose(carried -> stateTopic.carriedBack(carried, markedOwing(before))))
                .thenApply(carried -> {
                    log.info("Opened state topic {} as its only writer", stateTopic.topic);
                    return (StateTopic) stateTopic;
                })
                .exceptionallyCompose(error -> {
                    if (FutureUtil.unwrapCompletionException(error)
                            instanceof PulsarClientException.TopicTerminatedException) {
                        log.warn("Coordinator {}: state topic {} is terminated; reading it, then it is created again"
                                + " with every outcome it keeps", coordinatorId, stateTopic.topic);
                        return CompletableFuture.completedFuture(stateTopic);
                    }
                    return CompletableFuture.failedFuture(error);
                });
    }

    private CompletableFuture<Producer<byte[]>> newProducer() {
        return client.newProducer(Schema.BYTES)
                .topic(topic)
                .accessMode(ProducerAccessMode.ExclusiveWithFencing)
                // Records leave with the group flush, off the commit's critical path, so a
                // short batching delay costs no latency; under load it turns a bookie write
                // per record into one per batch.
                .enableBatching(true)
                .batchingMaxPublishDelay(BATCHING_DELAY_MICROS, TimeUnit.MICROSECONDS)
                .batchingMaxMessages(1000)
                // A full queue fails the send (written again later) instead of blocking the
                // coordinator's thread, and every task queued behind it.
                .blockIfQueueFull(false)
                .sendTimeout((int) sendTimeout.toMillis(), TimeUnit.MILLISECONDS)
                .createAsync();
    }

    /** A producer created for an attempt, and the topic's properties once it was. */
    private record Adopted(Producer<byte[]> producer, Map<String, String> properties) {
    }

    /**
     * Makes a new producer the writer if its attempt is still current: marks the topic as
     * this writer's and notes its fencing epoch (which the new producer just moved).
     * Otherwise, or if that fails, closes it.
     */
    private CompletableFuture<Adopted> adopt(Producer<byte[]> replacement, long attempt) {
        return markTopic()
                .thenCompose(marked -> admin.topics().getPropertiesAsync(topic))
                .thenApply(properties -> {
                    if (!isCurrent(attempt)) {
                        throw new CompletionException(givenUp(attempt));
                    }
                    ownEpoch = properties == null ? null : properties.get(EPOCH_PROPERTY);
                    producer = replacement;
                    if (closed) {
                        // Closed meanwhile: its close may have read the producer before this one.
                        producer = null;
                        throw new CompletionException(givenUp(attempt));
                    }
                    return new Adopted(replacement, properties);
                })
                .whenComplete((adopted, error) -> {
                    if (error != null) {
                        replacement.closeAsync();
                    }
                });
    }

    /**
     * Fails unless {@code attempt} is still current and this broker still owns the
     * coordinator, asked right before the fencing producer is created: a fencing producer
     * of an attempt given up on, of a closed state topic or of a broker that lost the
     * coordinator would fence the writer of its new owner (or of a later attempt), which
     * would then close the coordinator there.
     */
    private CompletableFuture<Void> mayFence(long attempt) {
        if (!isCurrent(attempt)) {
            return CompletableFuture.failedFuture(givenUp(attempt));
        }
        return stillOwned.get().thenCompose(owned -> {
            if (!owned) {
                return CompletableFuture.failedFuture(new CoordinatorMovedException(coordinatorId));
            }
            return !isCurrent(attempt) ? CompletableFuture.failedFuture(givenUp(attempt))
                    : CompletableFuture.completedFuture(null);
        });
    }

    private PulsarClientException.AlreadyClosedException givenUp(long attempt) {
        return new PulsarClientException.AlreadyClosedException("state topic " + topic
                + (closed ? " closed" : ": writer attempt " + attempt + " was given up on"));
    }

    @Override
    public CompletableFuture<RecordPosition> write(String key, byte[] value) {
        return send(key, value).thenApply(RecordPosition::of);
    }

    @Override
    public CompletableFuture<Void> delete(String key) {
        return send(key, null).thenApply(id -> null);
    }

    @Override
    public CompletableFuture<byte[]> readAt(String key, RecordPosition position) {
        long carry = carries.get();
        if (carrying) {
            return CompletableFuture.failedFuture(beingCarried());
        }
        // A read that finds nothing because a carry deleted the topic meanwhile fails (it is
        // read again where the record moved), and is not taken for a missing record.
        return reads.readAt(key, position).thenCompose(value -> value == null && (carrying || carries.get() != carry)
                ? CompletableFuture.failedFuture(beingCarried()) : CompletableFuture.completedFuture(value));
    }

    private IllegalStateException beingCarried() {
        return new IllegalStateException("state topic " + topic + " is being carried over (it was terminated); its"
                + " records are read again once it is");
    }

    @Override
    public void onRecordsMoved(RecordsMoved listener) {
        this.moved = listener;
    }

    @Override
    public long replacementProgress() {
        return carry.progress();
    }

    /**
     * A send that has not completed well after the send timeout (its producer failed to
     * close, say) fails as wedged, so that a flush never waits for ever.
     */
    private CompletableFuture<MessageId> send(String key, byte[] valueOrNull) {
        Producer<byte[]> writer = producer;
        if (writer == null) {
            return CompletableFuture.failedFuture(new PulsarClientException.TopicTerminatedException(
                    "state topic " + topic + " is terminated"));
        }
        return writer.newMessage().key(key).value(valueOrNull).sendAsync()
                .orTimeout(sendTimeout.toMillis() + WEDGED_MARGIN_MILLIS, TimeUnit.MILLISECONDS);
    }

    @Override
    public void flush() {
        Producer<byte[]> writer = producer;
        if (writer != null) {
            writer.flushAsync();
        }
    }

    @Override
    public WriteFailure classify(Throwable writeError) {
        Throwable error = FutureUtil.unwrapCompletionException(writeError);
        if (error instanceof PulsarClientException.ProducerFencedException || error instanceof WriterFencedException) {
            return WriteFailure.FENCED;
        }
        if (error instanceof java.util.concurrent.TimeoutException) {
            return WriteFailure.STUCK;
        }
        if (error instanceof PulsarClientException.AlreadyClosedException
                || error instanceof PulsarClientException.TopicTerminatedException
                || error instanceof PulsarClientException.TopicDoesNotExistException
                || error instanceof PulsarClientException.NotFoundException
                || error instanceof PulsarClientException.NotConnectedException
                || error instanceof PulsarClientException.ProducerBusyException) {
            return WriteFailure.LOST;
        }
        // A send timeout among them: the producer reconnects by itself, the blocks are sent again.
        return WriteFailure.TRANSIENT;
    }

    /**
     * Replaces a writer nobody else took over. Fails with {@link WriterFencedException} if
     * the topic's fencing epoch moved since this writer opened it (another writer fenced
     * it, though no write has said so yet), and with {@link CoordinatorMovedException} if
     * this broker no longer owns the coordinator (asked first, and again right before the
     * fencing producer is created). The old writer is closed first, so that none of its
     * writes can land after the new one's (the broker persists a closing producer's pending
     * messages before it confirms the close, and the new writer's fence covers a close that
     * failed).
     *
     * <p>The caller bounds the attempt: completing the returned future (exceptionally) gives
     * it up, and a producer it creates afterwards is closed, never adopted. Attempts run one
     * after another: one starts comparing epochs only once the previous one's producer has
     * been created (a client bounds that by its operation timeout) and adopted or closed.
     */
    @Override
    public CompletableFuture<Boolean> reopen(boolean unread) {
        long attempt = attempts.incrementAndGet();
        CompletableFuture<Boolean> result = new CompletableFuture<>();
        CompletableFuture<Void> mine = new CompletableFuture<>();
        CompletableFuture<Void> previous;
        synchronized (this) {
            previous = settled;
            settled = mine;
        }
        result.whenComplete((recreated, error) -> {
            if (error != null) {
                // Given up on: a producer it creates later is closed, not adopted.
                attempts.compareAndSet(attempt, attempt + 1);
            }
        });
        previous.handle((ignored, error) -> null)
                .thenCompose(ignored -> stillOwned.get())
                .thenCompose(owned -> {
                    if (!owned) {
                        return CompletableFuture.failedFuture(new CoordinatorMovedException(coordinatorId));
                    }
                    return propertiesIfAny().thenCompose(properties -> {
                        String epoch = properties == null ? null : properties.get(EPOCH_PROPERTY);
                        if (properties != null && ownEpoch != null && !ownEpoch.equals(epoch)) {
                            return CompletableFuture.failedFuture(new WriterFencedException(topic, ownEpoch, epoch));
                        }
                        return replaceProducer(properties, unread, attempt);
                    });
                })
                .whenComplete((recreated, error) -> {
                    mine.complete(null);
                    if (error != null) {
                        result.completeExceptionally(error);
                    } else {
                        result.complete(recreated);
                    }
                });
        return result;
    }

    private CompletableFuture<Boolean> replaceProducer(Map<String, String> before, boolean unread, long attempt) {
        boolean topicWasMarked = before != null && before.containsKey(WRITER_PROPERTY);
        Producer<byte[]> old = producer;
        CompletableFuture<Void> oldClosed = old == null ? CompletableFuture.completedFuture(null)
                : old.closeAsync().orTimeout(sendTimeout.toMillis(), TimeUnit.MILLISECONDS)
                        .handle((ignored, error) -> null);
        return oldClosed
                .thenCompose(ignored -> createNonPartitioned(admin, topic))
                .thenCompose(created -> {
                    // Created here, the topic has none of the properties read before (it was
                    // deleted meanwhile): as a new topic, it owes a carrier left behind.
                    Map<String, String> found = created ? null : before;
                    return noteOwed(found)
                            .thenCompose(noted -> fence(attempt))
                            .thenCompose(adopted -> carryBack(adopted, found, attempt))
                            .thenApply(carried -> {
                                // A topic without the writer's mark was created again by someone
                                // else; one whose complete carrier was copied back holds every
                                // record it held.
                                boolean recreated = carried != CarryOver.Carried.COMPLETE
                                        && (created || !topicWasMarked);
                                log.info("Coordinator {}: replaced the writer of state topic {}{}", coordinatorId,
                                        topic, recreated ? " (the topic was gone and is created again)" : "");
                                return recreated;
                            });
                })
                .exceptionallyCompose(error -> {
                    if (!(FutureUtil.unwrapCompletionException(error)
                            instanceof PulsarClientException.TopicTerminatedException)) {
                        return CompletableFuture.failedFuture(error);
                    }
                    if (!unread) {
                        return recreateTerminated(attempt);
                    }
                    log.warn("Coordinator {}: state topic {} is terminated; reading it, then it is created again"
                            + " with every outcome it keeps", coordinatorId, topic);
                    producer = null;
                    // Refused, the fencing producer may still have moved the epoch: as for a
                    // topic found terminated at the open, there is no writer's epoch to compare.
                    ownEpoch = null;
                    return CompletableFuture.completedFuture(false);
                });
    }

    /**
     * Creates this attempt's fencing producer, if it still may, and adopts it (or closes it).
     * If no producer of it is adopted once it asked the broker for one, the epoch is
     * unknown: the broker may have moved it (it does so before it answers, and also for a
     * creation the client gave up on), so the next attempt does not compare epochs and
     * relies on ownership, asked twice, alone.
     */
    private CompletableFuture<Adopted> fence(long attempt) {
        CompletableFuture<Adopted> fenced = mayFence(attempt).thenCompose(mayStill -> {
            CompletableFuture<Adopted> created = newProducer().thenCompose(producer -> adopt(producer, attempt))
                    .whenComplete((adopted, error) -> {
                        if (error != null) {
                            ownEpoch = null;
                        }
                    });
            creating = created;
            return created;
        });
        return fenced;
    }

    /** The topic's properties, or null if the topic does not exist. */
    private CompletableFuture<Map<String, String>> propertiesIfAny() {
        return admin.topics().getPropertiesAsync(topic).exceptionallyCompose(error -> {
            if (FutureUtil.unwrapCompletionException(error) instanceof PulsarAdminException.NotFoundException) {
                return CompletableFuture.completedFuture(null);
            }
            return CompletableFuture.failedFuture(error);
        });
    }

    /**
     * A terminated topic accepts no write ever again: it is deleted and created again, its
     * records carried over through {@link CarryOver} (the coordinator has read it first: see
     * {@link #reopen}). Each destructive step is taken only while the attempt is current and
     * the coordinator owned here.
     */
    private CompletableFuture<Boolean> recreateTerminated(long attempt) {
        log.warn("Coordinator {}: state topic {} was terminated and can never be written again; carrying its records"
                + " over into a new one through {}", coordinatorId, topic, CarryOver.carrierName(coordinatorId));
        return mayFence(attempt)
                .thenCompose(mayStill -> carry.toCarrier(reads, () -> isCurrent(attempt)))
                .thenCompose(copied -> mayFence(attempt))
                .thenCompose(mayStill -> {
                    carrying = true;
                    carries.incrementAndGet();
                    return admin.topics().deleteAsync(topic, true);
                })
                .thenCompose(deleted -> createNonPartitioned(admin, topic))
                // Before anything else: a writer after a crash from here on copies the carrier back.
                .thenCompose(created -> admin.topics().updatePropertiesAsync(topic,
                        Map.of(CarryOver.CARRYING_PROPERTY, "1")))
                .thenCompose(owing -> fence(attempt))
                .thenCompose(adopted -> carryBack(adopted, Map.of(CarryOver.CARRYING_PROPERTY, "1"), attempt))
                .thenApply(carried -> carried != CarryOver.Carried.COMPLETE);
    }

    /**
     * Copies a carrier left behind (by this attempt, or one a crash or a give-up interrupted)
     * into the topic through the new writer, before it writes anything; reads work again once
     * it is done. Whether the topic owes it follows from the properties the topic had before
     * this writer marked it (null: created here).
     */
    private CompletableFuture<CarryOver.Carried> carryBack(Adopted adopted, Map<String, String> properties,
                                                           long attempt) {
        return carry.backIfAny(adopted.producer(), CarryOver.owed(properties),
                        (key, position) -> moved.moved(key, position), () -> isCurrent(attempt))
                .thenCompose(carried -> carriedBack(carried, markedOwing(properties)))
                .thenApply(carried -> {
                    carrying = false;
                    return carried;
                });
    }

    /**
     * A carrier was copied back (or there was none): the topic owes nothing any more, and a
     * topic created again by the carry gets the compaction threshold its deletion took. A
     * topic still marked as owing a carrier that is gone (its mark's removal failed after the
     * carrier's deletion) loses the mark, or it would take a later stray carrier for its own.
     */
    private CompletableFuture<CarryOver.Carried> carriedBack(CarryOver.Carried carried, boolean markedOwing) {
        if (carried == CarryOver.Carried.NONE && !markedOwing) {
            return CompletableFuture.completedFuture(carried);
        }
        return admin.topics().removePropertiesAsync(topic, CarryOver.CARRYING_PROPERTY)
                .exceptionally(error -> null)
                .thenCompose(removed -> {
                    // Read now, not before: the pacing may have set a newer one meanwhile.
                    Long threshold = compactionThreshold;
                    return threshold == null ? CompletableFuture.completedFuture(null)
                            : setCompactionThreshold(threshold).handle((set, error) -> null);
                })
                .thenApply(done -> carried);
    }

    /**
     * A topic that owes a carrier only because no writer marked it yet is marked as owing it
     * before this writer marks it: a copy-back interrupted from here on is then still owed,
     * and the next writer copies the carrier back instead of deleting it unread.
     */
    private CompletableFuture<Void> noteOwed(Map<String, String> before) {
        if (!CarryOver.owed(before) || (before != null && before.containsKey(CarryOver.CARRYING_PROPERTY))) {
            return CompletableFuture.completedFuture(null);
        }
        return carry.exists().thenCompose(exists -> !exists ? CompletableFuture.completedFuture(null)
                : admin.topics().updatePropertiesAsync(topic, Map.of(CarryOver.CARRYING_PROPERTY, "1")));
    }

    private static boolean markedOwing(Map<String, String> properties) {
        return properties != null && properties.containsKey(CarryOver.CARRYING_PROPERTY);
    }

    private boolean isCurrent(long attempt) {
        return !closed && attempts.get() == attempt;
    }

    @Override
    public CompletableFuture<Boolean> checkCreatedAgain() {
        return admin.topics().getPropertiesAsync(topic).thenCompose(properties -> {
            if (properties != null && properties.containsKey(WRITER_PROPERTY)) {
                return CompletableFuture.completedFuture(false);
            }
            return markTopic().thenApply(marked -> true);
        });
    }

    /**
     * A topic policy, kept by the broker in the namespace's {@code __change_events} topic:
     * it outlives this writer, and the coordinator's next owner sets it again.
     */
    @Override
    public CompletableFuture<Boolean> setCompactionThreshold(long bytes) {
        if (!topicPoliciesOn) {
            return CompletableFuture.completedFuture(false);
        }
        return admin.topicPolicies().setCompactionThresholdAsync(topic, bytes).thenApply(done -> {
                    compactionThreshold = bytes;
                    return true;
                })
                .exceptionallyCompose(error -> FutureUtil.unwrapCompletionException(error)
                        instanceof PulsarAdminException.NotAllowedException
                        ? CompletableFuture.completedFuture(false) : CompletableFuture.failedFuture(error));
    }

    /** Sets the writer's property on the topic (after the producer exists, so the topic is loaded here). */
    private CompletableFuture<Void> markTopic() {
        return admin.topics().updatePropertiesAsync(topic, Map.of(WRITER_PROPERTY, "1"));
    }

    @Override
    public CompletableFuture<Void> readToEnd(Visitor visitor, Executor readerThread) {
        Producer<byte[]> writer = producer;
        if (writer == null) {
            return reads.readAll(visitor, readerThread);
        }
        byte[] nonce = UUID.randomUUID().toString().getBytes(StandardCharsets.UTF_8);
        // Bounded as every write is: a wedged writer fails the read as STUCK, and the restore
        // asks for a new one, instead of waiting for a writer that waits for the restore.
        return writer.newMessage().key(BARRIER_KEY).value(nonce).sendAsync()
                .orTimeout(sendTimeout.toMillis() + WEDGED_MARGIN_MILLIS, TimeUnit.MILLISECONDS)
                .thenCompose(barrier -> reads.readUntil(barrier, visitor, readerThread))
                .exceptionallyCompose(error -> FutureUtil.unwrapCompletionException(error)
                        instanceof PulsarClientException.TopicTerminatedException
                        ? reads.readAll(visitor, readerThread) : CompletableFuture.failedFuture(error));
    }

    /**
     * Closes the writer. A replacement in flight creates no fencing producer from now on;
     * one whose producer the broker is creating is waited for (at most the send timeout),
     * so that the producer is closed before the coordinator is: the broker unloads a
     * coordinator, and lets its next owner open it, only once its store has closed.
     */
    @Override
    public CompletableFuture<Void> closeAsync() {
        closed = true;
        attempts.incrementAndGet();
        return creating.handle((created, error) -> null)
                .orTimeout(sendTimeout.toMillis(), TimeUnit.MILLISECONDS)
                .handle((created, error) -> null)
                .thenCompose(created -> {
                    Producer<byte[]> writer = producer;
                    return writer == null ? CompletableFuture.completedFuture(null) : writer.closeAsync();
                });
    }

    @Override
    public String toString() {
        return topic;
    }

    /**
     * Creates a topic of the plugin's as non-partitioned if needed: true if it did, false if
     * it existed (non-partitioned). One found partitioned was never the plugin's (it writes
     * only non-partitioned topics): a read or a lookup racing a deletion made the broker
     * create it again with its default type ({@code pulsar/system} topics are created on
     * demand even with auto-creation off). It is deleted and created again non-partitioned,
     * where otherwise the coordinator could never open again.
     */
    static CompletableFuture<Boolean> createNonPartitioned(PulsarAdmin admin, String topic) {
        return admin.topics().createNonPartitionedTopicAsync(topic)
                .thenApply(created -> true)
                .exceptionallyCompose(error -> {
                    if (!(FutureUtil.unwrapCompletionException(error)
                            instanceof PulsarAdminException.ConflictException)) {
                        return CompletableFuture.failedFuture(error);
                    }
                    return admin.topics().getPartitionedTopicMetadataAsync(topic).thenCompose(metadata -> {
                        if (metadata.partitions == 0) {
                            return CompletableFuture.completedFuture(false);
                        }
                        log.warn("Topic {} exists as a partitioned topic with {} partitions, which the plugin never"
                                + " writes (the broker created it for a read racing a deletion): deleting it and"
                                + " creating it non-partitioned", topic, metadata.partitions);
                        return admin.topics().deletePartitionedTopicAsync(topic, true)
                                .thenCompose(deleted -> admin.topics().createNonPartitionedTopicAsync(topic))
                                .thenApply(created -> true);
                    });
                });
    }
}
