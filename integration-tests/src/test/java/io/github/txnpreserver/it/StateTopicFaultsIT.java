package io.github.txnpreserver.it;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.time.Duration;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicReference;
import org.apache.pulsar.client.admin.PulsarAdmin;
import org.apache.pulsar.client.admin.PulsarAdminException;
import org.apache.pulsar.client.api.Producer;
import org.apache.pulsar.client.api.ProducerAccessMode;
import org.apache.pulsar.client.api.PulsarClient;
import org.apache.pulsar.client.api.PulsarClientException;
import org.apache.pulsar.client.api.Schema;
import org.apache.pulsar.client.api.transaction.Transaction;
import org.apache.pulsar.client.api.transaction.TxnID;
import org.awaitility.Awaitility;
import org.junit.jupiter.api.DisplayName;
import org.junit.jupiter.api.Test;

/**
 * Faults of the state topic on a real broker: bad records, an operator deleting it, the topic
 * moving under its writer, and another writer fencing it.
 */
@DisplayName("Faults of the state topic")
class StateTopicFaultsIT {

    private static final String STATE_TOPIC = "persistent://pulsar/system/__terminated_txn_state_0";
    /** The name of the other producer that opens the state topic, to tell it from the plugin's writer. */
    private static final String INTRUDER = "txn-preserver-it-intruder";

    /**
     * Records the plugin cannot read: under block 0's key (the one block a fresh coordinator
     * has allocated sequences in, so that its values are decoded) bytes that are no record, a
     * truncated record and a record of a future format version; a key of no block (0.1's
     * per-transaction key, whose format is gone) and a key without the block prefix. The
     * state topic is new and not compacted, so the restore reads each of them: each is
     * skipped, logged and counted, and the coordinator serves.
     */
    @Test
    void garbageTruncatedAndFutureRecordsAreSkippedAndCountedAndTheCoordinatorServes() throws Exception {
        try (LocalPulsar pulsar = LocalPulsar.start("state-garbage", Map.of("transactionMetaPersistCount", "10"))) {
            try (PulsarAdmin admin = Txns.admin(pulsar);
                 PulsarClient plain = PulsarClient.builder().serviceUrl(pulsar.serviceUrl()).build()) {
                // Before any transactional client connects, the coordinator is not loaded yet.
                admin.topics().createNonPartitionedTopic(STATE_TOPIC);
                try (Producer<byte[]> intruder = plain.newProducer(Schema.BYTES).topic(STATE_TOPIC).create()) {
                    intruder.newMessage().key("c0").value("not a record".getBytes(StandardCharsets.UTF_8)).send();
                    // format_version = 2, then field 2 without its value.
                    intruder.newMessage().key("c0").value(new byte[] {0x08, 0x02, 0x10}).send();
                    // format_version = 99 (field 1, varint), coordinator 0, block 0.
                    intruder.newMessage().key("c0").value(new byte[] {0x08, 99, 0x10, 0x00, 0x18, 0x00}).send();
                    intruder.newMessage().key("0:900").value(new byte[] {0x08, 0x01}).send();
                    intruder.newMessage().key("no-colon").value(new byte[] {0x08, 0x02}).send();
                }
            }
            try (PulsarClient client = Txns.client(pulsar);
                 Producer<String> producer = Txns.producer(client, Txns.uniqueTopic("after-garbage"));
                 RetryingEndClient retry = RetryingEndClient.connect(pulsar.serviceUrl())) {
                TxnID txn = Txns.committed(client, producer, "fine");
                assertThat(retry.commit(txn)).isEqualTo(EndAnswer.SUCCESS);
                assertThat(retry.commit(new TxnID(0, 900))).isEqualTo(EndAnswer.NOT_FOUND);
            }
            assertThat(BrokerMetrics.ofCoordinatorZero(pulsar, "pulsar_txn_preserver_malformed_records_total"))
                    .isEqualTo(5);
            String skipped = "skipping malformed state-topic record: ";
            assertThat(Files.readString(pulsar.logFile()))
                    .contains(skipped + "value under key 'c0' is not an OutcomeBlockRecord")
                    .contains(skipped + "block under key 'c0' has format version 99; this plugin reads version 2")
                    .contains(skipped + "key '0:900' is not a block key c<0..36028797018963967>")
                    .contains(skipped + "key 'no-colon' is not a block key c<0..36028797018963967>");
        }
    }

    @Test
    void anOperatorDeletingTheTopicCostsOnlyKeptOutcomesNeverALiveTransaction() throws Exception {
        try (LocalPulsar pulsar = LocalPulsar.start("state-deleted", Map.of("transactionMetaPersistCount", "10"))) {
            String topic = Txns.uniqueTopic("state-deleted");
            TxnID endedBefore;
            Transaction live;
            try (PulsarClient client = Txns.client(pulsar);
                 PulsarAdmin admin = Txns.admin(pulsar);
                 Producer<String> producer = Txns.producer(client, topic)) {
                endedBefore = Txns.committed(client, producer, "before");
                live = Txns.open(client, Duration.ofMinutes(10));
                producer.newMessage(live).value("live").send();

                admin.topics().delete(STATE_TOPIC, true);

                live.commit().get(Txns.REQUEST_BOUND.toMillis(), TimeUnit.MILLISECONDS);
                try (RetryingEndClient retry = RetryingEndClient.connect(pulsar.serviceUrl())) {
                    assertThat(retry.commit(live.getTxnID())).isEqualTo(EndAnswer.SUCCESS);
                    assertThat(retry.commit(endedBefore)).as("still kept in memory").isEqualTo(EndAnswer.SUCCESS);
                }
                assertThat(Txns.readAll(client, topic)).containsExactly("before", "live");
            }

            pulsar.stop();
            pulsar.start();

            try (RetryingEndClient retry = RetryingEndClient.connect(pulsar.serviceUrl())) {
                assertThat(retry.commit(live.getTxnID())).as("written after the deletion").isEqualTo(EndAnswer.SUCCESS);
                // Outcomes are stored per block of 256 sequence ids, each record the whole block:
                // the live transaction's commit rewrote the block that also holds endedBefore
                // (still kept in memory), so its outcome is durable again.
                assertThat(endedBefore.getLeastSigBits() >>> 8).as("same block")
                        .isEqualTo(live.getTxnID().getLeastSigBits() >>> 8);
                assertThat(retry.commit(endedBefore)).as("rewritten with its block after the deletion")
                        .isEqualTo(EndAnswer.SUCCESS);
            }
        }
    }

    @Test
    void writesThatMeetTheStateTopicMovingAreRetriedUntilDurable() throws Exception {
        try (LocalPulsar pulsar = LocalPulsar.start("state-unloads", Map.of("transactionMetaPersistCount", "1000"))) {
            String topic = Txns.uniqueTopic("state-unloads");
            List<TxnID> committed = new ArrayList<>();
            List<String> values = new ArrayList<>();
            try (PulsarClient client = Txns.client(pulsar);
                 PulsarAdmin admin = Txns.admin(pulsar);
                 Producer<String> producer = Txns.producer(client, topic)) {
                Txns.committed(client, producer, "loads-the-coordinator");
                values.add("loads-the-coordinator");
                AtomicBoolean running = new AtomicBoolean(true);
                AtomicInteger unloads = new AtomicInteger();
                AtomicReference<Throwable> unloaderFailure = new AtomicReference<>();
                // The topic is closed, fenced and reopened over and over, under the coordinator's writer.
                Thread unloader = new Thread(() -> {
                    try {
                        while (running.get()) {
                            try {
                                admin.topics().unload(STATE_TOPIC);
                                unloads.incrementAndGet();
                            } catch (PulsarAdminException e) {
                                // Unloading a topic that is just reloading fails; the next round unloads it.
                            }
                            Thread.sleep(150);
                        }
                    } catch (InterruptedException e) {
                        Thread.currentThread().interrupt();
                    } catch (RuntimeException | Error e) {
                        unloaderFailure.set(e);
                    }
                }, "state-topic-unloader");
                unloader.start();
                long longestCommitNanos = 0;
                try {
                    for (int i = 0; i < 60; i++) {
                        long start = System.nanoTime();
                        committed.add(Txns.committed(client, producer, "value-" + i));
                        longestCommitNanos = Math.max(longestCommitNanos, System.nanoTime() - start);
                        values.add("value-" + i);
                    }
                    // Commits do not wait for their records: the records meet the moving topic
                    // until every one has landed (and at least ten unloads happened).
                    try (PulsarClient reader = PulsarClient.builder().serviceUrl(pulsar.serviceUrl()).build()) {
                        List<String> expected = committed.stream().map(StateTopicReader::nameOf).toList();
                        Awaitility.await().atMost(Duration.ofSeconds(90)).pollInterval(Duration.ofSeconds(1))
                                .until(() -> unloads.get() > 10 && StateTopicReader.liveTransactions(reader,
                                        STATE_TOPIC).containsAll(expected));
                    }
                } finally {
                    running.set(false);
                    // An unload takes at most the admin client's timeout: bounded, and checked.
                    unloader.join(Duration.ofMinutes(2).toMillis());
                }
                assertThat(unloader.isAlive()).as("the unloader ended").isFalse();
                assertThat(unloaderFailure.get()).as("the unloader's failure").isNull();
                System.out.printf("state topic unloaded %d times while 60 commits and their records were written;"
                        + " longest commit %.1f s%n", unloads.get(), longestCommitNanos / 1e9);
            }

            pulsar.stop();
            pulsar.start();

            try (PulsarClient client = Txns.client(pulsar);
                 RetryingEndClient retry = RetryingEndClient.connect(pulsar.serviceUrl())) {
                for (TxnID txn : committed) {
                    assertThat(retry.commit(txn)).as("retry of %s after a restart", txn).isEqualTo(EndAnswer.SUCCESS);
                }
                assertThat(Txns.readAll(client, topic)).containsExactlyElementsOf(values);
            }
        }
    }
    /**
     * Another producer opens the state topic with {@code ExclusiveWithFencing} and closes it
     * again (issue 13: every commit then timed out until a restart). The coordinator's
     * writer is fenced; the next write finds it so and the coordinator closes here (the
     * other writer might be a new owner); the client's retry reconnects, the broker opens
     * the coordinator again (fencing in turn), and the commit completes with no operator.
     * The new writer writes every outcome ended since, before any restart.
     */
    @Test
    void aWriterFencedByAnotherProducerClosesTheCoordinatorWhichReopensAndTheCommitCompletes() throws Exception {
        try (LocalPulsar pulsar = LocalPulsar.start("state-fenced", Map.of("transactionMetaPersistCount", "10"))) {
            String topic = Txns.uniqueTopic("state-fenced");
            List<TxnID> committed = new ArrayList<>();
            try (PulsarClient client = Txns.client(pulsar);
                 PulsarClient other = PulsarClient.builder().serviceUrl(pulsar.serviceUrl()).build();
                 PulsarAdmin admin = Txns.admin(pulsar);
                 Producer<String> producer = Txns.producer(client, topic)) {
                TxnID before = Txns.committed(client, producer, "before");
                Transaction afterFence = Txns.open(client, Duration.ofMinutes(10));
                producer.newMessage(afterFence).value("after-fence").send();

                other.newProducer(Schema.BYTES).topic(STATE_TOPIC).producerName(INTRUDER)
                        .accessMode(ProducerAccessMode.ExclusiveWithFencing).create().close();

                long start = System.nanoTime();
                afterFence.commit().get(30, TimeUnit.SECONDS);
                System.out.printf("fenced by another producer: the commit completed %.1f s after the fence%n",
                        (System.nanoTime() - start) / 1e9);
                TxnID next = Txns.committed(client, producer, "next");
                TxnID dropped = Txns.aborted(client, producer, "dropped");
                committed.addAll(List.of(before, afterFence.getTxnID(), next));
                try (RetryingEndClient retry = RetryingEndClient.connect(pulsar.serviceUrl())) {
                    assertThat(retry.commit(before)).isEqualTo(EndAnswer.SUCCESS);
                    assertThat(retry.commit(afterFence.getTxnID())).isEqualTo(EndAnswer.SUCCESS);
                    assertThat(retry.commit(next)).isEqualTo(EndAnswer.SUCCESS);
                    assertThat(retry.abort(dropped)).isEqualTo(EndAnswer.SUCCESS);
                    assertThat(retry.commit(dropped)).isEqualTo(EndAnswer.REFUSED_AS_ABORTED);
                    awaitThePluginWritesAgain(admin, other, retry,
                            Map.of(afterFence.getTxnID(), true, next, true, dropped, false));
                }
                assertThat(Txns.readAll(client, topic)).as("each acknowledged commit's data once, no aborted data")
                        .containsExactly("before", "after-fence", "next");
            }
            assertThat(Files.readString(pulsar.logFile())).as("not fenced back from the fenced writer")
                    .contains("closing the coordinator here, to be opened again where it is owned");
            assertOutcomesSurviveARestart(pulsar, committed);
        }
    }

    /**
     * An intruder keeps the state topic while commits go on: the coordinator closes and the
     * broker opens it again, which fences the intruder back (its next send fails as fenced);
     * the plugin's writer writes again with no restart, and no commit is lost or confirmed
     * without its record.
     */
    @Test
    void anIntruderThatStaysIsFencedBackAndEveryCommitCompletes() throws Exception {
        try (LocalPulsar pulsar = LocalPulsar.start("state-intruder", Map.of("transactionMetaPersistCount", "10"))) {
            String topic = Txns.uniqueTopic("state-intruder");
            List<TxnID> committed = new ArrayList<>();
            List<String> committedValues = new ArrayList<>();
            try (PulsarClient client = Txns.client(pulsar);
                 PulsarClient other = PulsarClient.builder().serviceUrl(pulsar.serviceUrl()).build();
                 PulsarAdmin admin = Txns.admin(pulsar);
                 Producer<String> producer = Txns.producer(client, topic);
                 RetryingEndClient retry = RetryingEndClient.connect(pulsar.serviceUrl())) {
                committed.add(Txns.committed(client, producer, "before"));
                committedValues.add("before");
                Map<TxnID, Boolean> endedDuringTheIntrusion = new LinkedHashMap<>();
                try (Producer<byte[]> intruder = other.newProducer(Schema.BYTES).topic(STATE_TOPIC)
                        .producerName(INTRUDER).accessMode(ProducerAccessMode.ExclusiveWithFencing)
                        .sendTimeout(30, TimeUnit.SECONDS).create()) {
                    for (int i = 0; i < 5; i++) {
                        TxnID txn = Txns.committed(client, producer, "value-" + i);
                        committed.add(txn);
                        committedValues.add("value-" + i);
                        endedDuringTheIntrusion.put(txn, true);
                    }
                    endedDuringTheIntrusion.put(Txns.aborted(client, producer, "dropped-during"), false);

                    awaitThePluginWritesAgain(admin, other, retry, endedDuringTheIntrusion);
                    // Fenced back, the intruder is refused, not taken back: its reconnection finds
                    // the topic's epoch moved on.
                    assertThatThrownBy(() -> intruder.newMessage().key("intruder")
                            .value("not a record".getBytes(StandardCharsets.UTF_8)).send())
                            .as("the intruder's next send").isInstanceOf(PulsarClientException.ProducerFencedException.class);
                }

                // The intruder's last reconnection closed the writer once more on its way out:
                // what ends now is written all the same.
                TxnID after = Txns.committed(client, producer, "after-fenced-back");
                committed.add(after);
                committedValues.add("after-fenced-back");
                TxnID droppedAfter = Txns.aborted(client, producer, "dropped-after");
                awaitThePluginWritesAgain(admin, other, retry, Map.of(after, true, droppedAfter, false));
                for (Map.Entry<TxnID, Boolean> txn : endedDuringTheIntrusion.entrySet()) {
                    assertThat(txn.getValue() ? retry.commit(txn.getKey()) : retry.abort(txn.getKey()))
                            .as("retried end of %s", txn.getKey()).isEqualTo(EndAnswer.SUCCESS);
                    assertThat(txn.getValue() ? retry.abort(txn.getKey()) : retry.commit(txn.getKey()))
                            .as("the other end of %s", txn.getKey())
                            .isEqualTo(txn.getValue() ? EndAnswer.REFUSED_AS_COMMITTED : EndAnswer.REFUSED_AS_ABORTED);
                }
                assertThat(Txns.readAll(client, topic)).as("each acknowledged commit's data once, no aborted data")
                        .containsExactlyElementsOf(committedValues);
            }
            assertOutcomesSurviveARestart(pulsar, committed);
        }
    }

    /**
     * A terminated topic can never be written again: the coordinator carries its records
     * into a carrier topic, deletes it, creates it again and copies them back, so nothing
     * kept is lost (the cold tier's records among them: ColdTierIT).
     */
    @Test
    void aTerminatedStateTopicIsCreatedAgainWithEveryKeptOutcome() throws Exception {
        try (LocalPulsar pulsar = LocalPulsar.start("state-terminated", Map.of("transactionMetaPersistCount", "10"))) {
            String topic = Txns.uniqueTopic("state-terminated");
            List<TxnID> committed = new ArrayList<>();
            try (PulsarClient client = Txns.client(pulsar);
                 PulsarAdmin admin = Txns.admin(pulsar);
                 Producer<String> producer = Txns.producer(client, topic)) {
                committed.add(Txns.committed(client, producer, "before"));
                admin.topics().terminateTopic(STATE_TOPIC);

                long start = System.nanoTime();
                committed.add(Txns.committed(client, producer, "after-termination"));
                System.out.printf("state topic terminated: the next commit completed in %.1f s%n",
                        (System.nanoTime() - start) / 1e9);
                committed.add(Txns.committed(client, producer, "next"));
                assertThat(Txns.readAll(client, topic)).containsExactly("before", "after-termination", "next");
            }
            assertOutcomesSurviveARestart(pulsar, committed);
        }
    }

    /**
     * A force-deleted state topic comes back empty as soon as the writer reconnects (Pulsar
     * creates a system topic for its producer even with auto-creation off), and no write
     * fails to tell. The writer's mark on the topic is gone with it: the coordinator sees
     * that within seconds and writes every outcome it keeps into the new topic, so that a
     * restart still answers an outcome that ended before the deletion.
     */
    @Test
    void aStateTopicDeletedUnderItsWriterGetsEveryKeptOutcomeBackWithAutoCreationOff() throws Exception {
        try (LocalPulsar pulsar = LocalPulsar.start("state-deleted-no-auto", Map.of(
                "transactionMetaPersistCount", "10", "allowAutoTopicCreation", "false"))) {
            String topic = Txns.uniqueTopic("state-deleted-no-auto");
            TxnID before;
            List<TxnID> committed;
            try (PulsarClient client = Txns.client(pulsar);
                 PulsarAdmin admin = Txns.admin(pulsar)) {
                admin.topics().createNonPartitionedTopic(topic);
                try (Producer<String> producer = Txns.producer(client, topic)) {
                    before = Txns.committed(client, producer, "before");
                    admin.topics().delete(STATE_TOPIC, true);
                    long start = System.nanoTime();
                    try (PulsarClient reader = PulsarClient.builder().serviceUrl(pulsar.serviceUrl()).build()) {
                        Awaitility.await().atMost(Duration.ofSeconds(30)).pollInterval(Duration.ofMillis(500))
                                .until(() -> StateTopicReader.liveTransactions(reader, STATE_TOPIC)
                                        .contains(StateTopicReader.nameOf(before)));
                    }
                    System.out.printf("state topic deleted: every kept outcome was in it again %.1f s later%n",
                            (System.nanoTime() - start) / 1e9);
                    TxnID after = Txns.committed(client, producer, "after-deletion");
                    assertThat(Txns.readAll(client, topic)).containsExactly("before", "after-deletion");
                    committed = List.of(before, after);
                }
            }
            assertOutcomesSurviveARestart(pulsar, committed);
        }
    }

    /**
     * The plugin's writer has the state topic again and writes it, with no restart: the
     * topic's one producer is an {@code ExclusiveWithFencing} one other than the intruder, and
     * the records of these transactions (all ended since the intruder came, true for
     * committed) have landed, each with its outcome. Each round first retries the end of one of
     * them, answered success: a coordinator closed after a fence opens again at a request.
     */
    private static void awaitThePluginWritesAgain(PulsarAdmin admin, PulsarClient reader, RetryingEndClient retry,
                                                  Map<TxnID, Boolean> endedSince) {
        Map.Entry<TxnID, Boolean> probe = endedSince.entrySet().iterator().next();
        List<String> expected = endedSince.entrySet().stream().map(txn -> StateTopicReader.nameOf(txn.getKey())
                + (txn.getValue() ? " COMMITTED" : " ABORTED")).toList();
        long start = System.nanoTime();
        Awaitility.await("the plugin's writer writes the state topic again").atMost(Duration.ofMinutes(2))
                .pollInterval(Duration.ofSeconds(1)).ignoreExceptions().untilAsserted(() -> {
                    assertThat(probe.getValue() ? retry.commit(probe.getKey()) : retry.abort(probe.getKey()))
                            .as("retried end of %s", probe.getKey()).isEqualTo(EndAnswer.SUCCESS);
                    assertThat(admin.topics().getStats(STATE_TOPIC).getPublishers()).as("the state topic's writers")
                            .singleElement().satisfies(writer -> {
                                assertThat(writer.getProducerName()).isNotEqualTo(INTRUDER);
                                assertThat(writer.getAccessMode()).isEqualTo(ProducerAccessMode.ExclusiveWithFencing);
                            });
                    assertThat(StateTopicReader.records(reader, STATE_TOPIC)).containsAll(expected);
                });
        System.out.printf("the plugin's writer wrote the state topic again %.1f s later%n",
                (System.nanoTime() - start) / 1e9);
    }

    /**
     * After a restart each committed transaction answers its retry with success, and the
     * state topic holds every one of their outcomes.
     */
    private static void assertOutcomesSurviveARestart(LocalPulsar pulsar, List<TxnID> committed) throws Exception {
        pulsar.stop();
        pulsar.start();
        try (RetryingEndClient retry = RetryingEndClient.connect(pulsar.serviceUrl())) {
            for (TxnID txn : committed) {
                assertThat(retry.commit(txn)).as("retry of %s after a restart", txn).isEqualTo(EndAnswer.SUCCESS);
            }
        }
        // Whatever had not landed before (a coordinator closed here after a fence waits for a
        // request or a restart to open again) was in the log, replayed and written.
        List<String> expected = committed.stream().map(StateTopicReader::nameOf).toList();
        try (PulsarClient reader = PulsarClient.builder().serviceUrl(pulsar.serviceUrl()).build()) {
            Awaitility.await().atMost(Duration.ofSeconds(30)).pollInterval(Duration.ofMillis(500))
                    .until(() -> StateTopicReader.liveTransactions(reader, STATE_TOPIC).containsAll(expected));
        }
    }
}
