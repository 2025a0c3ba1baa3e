package io.github.txnpreserver.statetopic;

import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CompletionException;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;
import java.util.function.BooleanSupplier;
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
 * Carries a terminated state topic's records into the topic created again under its name.
 * A terminated topic accepts no write ever again, so it must be deleted; but once outcomes
 * went cold its records are their only copy. So before the deletion its compacted view is
 * copied into a <em>carrier</em> topic, {@code persistent://pulsar/system/__txn_preserver_carrier_<TCid>},
 * closed by a completion record; after the topic is created again, the carrier is copied
 * back through the new writer (each record's new position reported) and deleted.
 *
 * <p>The carrier is created non-partitioned (whatever the broker's default topic type) with
 * a durable subscription at its start before anything is written to it: a topic in
 * {@code pulsar/system} is compacted as soon as it has a backlog, and a topic without a
 * durable cursor has its closed ledgers trimmed, so without it a broker restart could leave
 * the carrier empty while it holds the only copy of the records.
 *
 * <p>Each step survives a crash or a replacement given up on: the topic created again
 * carries the property {@value #CARRYING_PROPERTY} until its copy-back is done, and a
 * carrier left behind is copied back by the next writer ({@link #backIfAny}) only if the
 * topic still owes it (that property, or a topic no writer marked yet: created again before
 * the property was set); a carrier the topic does not owe (left by a writer given up on, or
 * created again by a stray client) is deleted unread, so that it never replays old records
 * over newer ones. A copy into the carrier that did not finish is made again (a key's later
 * value wins, so copies of copies change nothing). A carrier without its completion record
 * means the topic was deleted by someone else meanwhile: what it has is copied back, and the
 * topic counts as created again.
 *
 * <p>Runs its blocking reads on a thread of its own, one carry at a time; the caller checks,
 * between windows of {@value #WINDOW} records, that it may still go on.
 */
final class CarryOver {

    private static final Logger log = LoggerFactory.getLogger(CarryOver.class);
    private static final String CARRIER_PREFIX = "persistent://pulsar/system/__txn_preserver_carrier_";
    /** The durable subscription that keeps the carrier's records from being trimmed. */
    static final String RETAINING_SUBSCRIPTION = "txn-preserver-carry";
    /** A property of the state topic created again, until its carrier is copied back. */
    static final String CARRYING_PROPERTY = "txn-preserver-carrying";
    /** The last record of a carrier whose copy finished. */
    static final String COMPLETE_KEY = "carry-complete";
    static final int WINDOW = 1_000;
    private static final int READ_TIMEOUT_SECONDS = 60;

    /** What {@link #backIfAny} found. */
    enum Carried {
        /** No carrier: nothing to copy back. */
        NONE,
        /** A complete carrier was copied back: the topic holds every record it held. */
        COMPLETE,
        /** A carrier without its completion record was copied back: records may be missing. */
        PARTIAL
    }

    private final PulsarClient client;
    private final PulsarAdmin admin;
    private final String topic;
    private final String carrier;
    private final long sendTimeoutMillis;
    private final AtomicLong progress = new AtomicLong();

    CarryOver(PulsarClient client, PulsarAdmin admin, long coordinatorId, String topic, long sendTimeoutMillis) {
        this.client = client;
        this.admin = admin;
        this.topic = topic;
        this.carrier = CARRIER_PREFIX + coordinatorId;
        this.sendTimeoutMillis = sendTimeoutMillis;
    }

    static String carrierName(long coordinatorId) {
        return CARRIER_PREFIX + coordinatorId;
    }

    /** Records copied so far, ever: a carry that moves this is making progress. */
    long progress() {
        return progress.get();
    }

    /**
     * Copies the terminated topic's compacted view (tombstones included, the restore barrier
     * not) to the end of the carrier, then the completion record.
     *
     * @param mayGoOn asked between windows: false stops the copy (it fails)
     */
    CompletableFuture<Void> toCarrier(CompactedViewReader view, BooleanSupplier mayGoOn) {
        return admin.topics().getPropertiesAsync(topic).thenCompose(terminated -> PulsarStateTopic
                .createNonPartitioned(admin, carrier)
                .thenCompose(created -> admin.topics().createSubscriptionAsync(carrier, RETAINING_SUBSCRIPTION,
                        MessageId.earliest).exceptionallyCompose(error -> FutureUtil.unwrapCompletionException(error)
                        instanceof PulsarAdminException.ConflictException ? CompletableFuture.completedFuture(null)
                        : CompletableFuture.failedFuture(error)))
                .thenCompose(retained -> {
                    // Asked right before the fencing producer: one of a carry given up on
                    // would fence the carrier's producer of a later one.
                    if (!mayGoOn.getAsBoolean()) {
                        return CompletableFuture.failedFuture(stopped());
                    }
                    return client.newProducer(Schema.BYTES)
                            .topic(carrier)
                            .accessMode(ProducerAccessMode.ExclusiveWithFencing)
                            .enableBatching(true)
                            .blockIfQueueFull(true)
                            .sendTimeout((int) sendTimeoutMillis, TimeUnit.MILLISECONDS)
                            .createAsync();
                })
                .thenCompose(producer -> {
                    ExecutorService thread = newThread();
                    Window window = new Window(producer, mayGoOn);
                    return view.readAll((key, value, position) -> window.send(key, value, null), thread)
                            .thenRunAsync(window::drain, thread)
                            .thenCompose(read -> sameTopic(terminated))
                            .thenAcceptAsync(same -> {
                                // Checked once more: a copy given up on must not look complete.
                                if (!mayGoOn.getAsBoolean()) {
                                    throw new CompletionException(stopped());
                                }
                                // Deleted (or created again) by someone else during the read, the
                                // topic may have shown only part of its records: no completion
                                // record, so that the copy-back counts it as partial.
                                if (!same) {
                                    throw new CompletionException(new IllegalStateException("state topic " + topic
                                            + " was deleted during its carry; carrier " + carrier
                                            + " is left without its completion record"));
                                }
                                window.send(COMPLETE_KEY, new byte[0], null);
                                window.drain();
                                log.info("Copied {} records of terminated state topic {} into {}", window.sent,
                                        topic, carrier);
                            }, thread)
                            .whenComplete((done, error) -> {
                                thread.shutdown();
                                producer.closeAsync();
                            });
                }));
    }

    /**
     * Whether the topic is still the one whose properties were these when its copy began: a
     * topic deleted meanwhile is gone or, created again, has another writer's mark (none, or
     * a new owner's) or another fencing epoch (none, or its fencer's).
     */
    private CompletableFuture<Boolean> sameTopic(Map<String, String> before) {
        return admin.topics().getPropertiesAsync(topic)
                .thenApply(now -> now != null && before != null
                        && now.containsKey(PulsarStateTopic.WRITER_PROPERTY)
                                == before.containsKey(PulsarStateTopic.WRITER_PROPERTY)
                        && Objects.equals(now.get(PulsarStateTopic.EPOCH_PROPERTY),
                                before.get(PulsarStateTopic.EPOCH_PROPERTY)))
                .exceptionallyCompose(error -> FutureUtil.unwrapCompletionException(error)
                        instanceof PulsarAdminException.NotFoundException ? CompletableFuture.completedFuture(false)
                        : CompletableFuture.failedFuture(error));
    }

    /**
     * Whether a topic whose properties (before this writer marked it) are these owes a
     * carrier's records: it was created again by a carry whose copy-back is not done.
     */
    static boolean owed(Map<String, String> propertiesBefore) {
        return propertiesBefore == null || !propertiesBefore.containsKey(PulsarStateTopic.WRITER_PROPERTY)
                || propertiesBefore.containsKey(CARRYING_PROPERTY);
    }

    /**
     * Copies a carrier left behind, if any and if the topic owes it ({@link #owed}), into the
     * topic through its writer, reporting each record's new position, then deletes the
     * carrier; a carrier the topic does not owe is deleted unread.
     *
     * @param mayGoOn asked between windows and before the deletion: false stops (it fails)
     */
    CompletableFuture<Carried> backIfAny(Producer<byte[]> writer, boolean owed, StateTopic.RecordsMoved moved,
                                         BooleanSupplier mayGoOn) {
        return exists().thenCompose(exists -> !exists ? CompletableFuture.completedFuture(Carried.NONE)
                : !owed ? deleteUnread(mayGoOn)
                : client.newReader(Schema.BYTES)
                        .topic(carrier)
                        .startMessageId(MessageId.earliest)
                        .receiverQueueSize(WINDOW)
                        .createAsync()
                        .thenCompose(reader -> {
                            ExecutorService thread = newThread();
                            return CompletableFuture.supplyAsync(() -> copyBack(reader, writer, moved, mayGoOn),
                                    thread).whenComplete((carried, error) -> {
                                        thread.shutdown();
                                        reader.closeAsync();
                                    });
                        })
                        .thenCompose(carried -> {
                            if (!mayGoOn.getAsBoolean()) {
                                return CompletableFuture.failedFuture(stopped());
                            }
                            return admin.topics().deleteAsync(carrier, true).thenApply(deleted -> carried);
                        }));
    }

    private CompletableFuture<Carried> deleteUnread(BooleanSupplier mayGoOn) {
        if (!mayGoOn.getAsBoolean()) {
            return CompletableFuture.failedFuture(stopped());
        }
        log.warn("Deleting carrier {} unread: state topic {} does not owe its records (a carry given up on left it,"
                + " or a stray client created it again)", carrier, topic);
        return admin.topics().deleteAsync(carrier, true).thenApply(deleted -> Carried.NONE);
    }

    private Carried copyBack(Reader<byte[]> reader, Producer<byte[]> writer, StateTopic.RecordsMoved moved,
                             BooleanSupplier mayGoOn) {
        Window window = new Window(writer, mayGoOn);
        boolean complete = false;
        while (hasMore(reader)) {
            Message<byte[]> message = next(reader);
            if (message == null) {
                throw new IllegalStateException("no record of carrier " + carrier + " within " + READ_TIMEOUT_SECONDS
                        + " s");
            }
            if (COMPLETE_KEY.equals(message.getKey())) {
                complete = true;
                continue;
            }
            complete = false;
            window.send(message.getKey(), message.getData(), moved);
        }
        window.drain();
        log.info("Copied {} records of carrier {} back into state topic {} ({})", window.sent, carrier, topic,
                complete ? "complete" : "without its completion record");
        return complete ? Carried.COMPLETE : Carried.PARTIAL;
    }

    CompletableFuture<Boolean> exists() {
        return admin.topics().getPropertiesAsync(carrier).thenApply(properties -> true).exceptionallyCompose(error ->
                FutureUtil.unwrapCompletionException(error) instanceof PulsarAdminException.NotFoundException
                        ? CompletableFuture.completedFuture(false) : CompletableFuture.failedFuture(error));
    }

    /** Sends in windows: each waited for (bounded) before the next, and the caller asked in between. */
    private final class Window {
        private final Producer<byte[]> producer;
        private final BooleanSupplier mayGoOn;
        private final List<CompletableFuture<?>> sends = new ArrayList<>(WINDOW);
        private long sent;

        Window(Producer<byte[]> producer, BooleanSupplier mayGoOn) {
            this.producer = producer;
            this.mayGoOn = mayGoOn;
        }

        void send(String key, byte[] valueOrNull, StateTopic.RecordsMoved moved) {
            if (key == null || PulsarStateTopic.BARRIER_KEY.equals(key)) {
                return;
            }
            CompletableFuture<MessageId> send = producer.newMessage().key(key).value(valueOrNull).sendAsync();
            send.thenRun(progress::incrementAndGet);
            sends.add(moved == null || valueOrNull == null ? send
                    : send.thenAccept(id -> moved.moved(key, RecordPosition.of(id))));
            if (sends.size() >= WINDOW) {
                drain();
            }
        }

        void drain() {
            producer.flushAsync();
            CompletableFuture.allOf(sends.toArray(new CompletableFuture[0]))
                    .orTimeout(sendTimeoutMillis + READ_TIMEOUT_SECONDS * 1000L, TimeUnit.MILLISECONDS).join();
            sent += sends.size();
            sends.clear();
            if (!mayGoOn.getAsBoolean()) {
                throw new CompletionException(stopped());
            }
        }
    }

    private PulsarClientException.AlreadyClosedException stopped() {
        return new PulsarClientException.AlreadyClosedException("the carry of state topic " + topic
                + " was given up on");
    }

    private static boolean hasMore(Reader<byte[]> reader) {
        try {
            return reader.hasMessageAvailable();
        } catch (PulsarClientException e) {
            throw new CompletionException(e);
        }
    }

    private static Message<byte[]> next(Reader<byte[]> reader) {
        try {
            return reader.readNext(READ_TIMEOUT_SECONDS, TimeUnit.SECONDS);
        } catch (PulsarClientException e) {
            throw new CompletionException(e);
        }
    }

    /** A thread of its own for one carry's blocking reads (never a client thread: its sends need those). */
    private static ExecutorService newThread() {
        return Executors.newSingleThreadExecutor(runnable -> {
            Thread carrying = new Thread(runnable, "txn-preserver-carry");
            carrying.setDaemon(true);
            return carrying;
        });
    }
}
