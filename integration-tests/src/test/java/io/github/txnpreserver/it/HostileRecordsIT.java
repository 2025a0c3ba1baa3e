package io.github.txnpreserver.it;

import static org.assertj.core.api.Assertions.assertThat;

import io.github.txnpreserver.statetopic.proto.OutcomeBlockRecord;
import java.time.Duration;
import java.time.Instant;
import java.util.ArrayList;
import java.util.Collections;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Random;
import java.util.stream.IntStream;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import org.apache.pulsar.client.api.Message;
import org.apache.pulsar.client.api.MessageId;
import org.apache.pulsar.client.api.Producer;
import org.apache.pulsar.client.api.ProducerAccessMode;
import org.apache.pulsar.client.api.PulsarClient;
import org.apache.pulsar.client.api.Reader;
import org.apache.pulsar.client.api.Schema;
import org.apache.pulsar.client.api.transaction.TxnID;
import org.assertj.core.api.SoftAssertions;
import org.awaitility.Awaitility;
import org.junit.jupiter.api.DisplayName;
import org.junit.jupiter.api.Test;

/**
 * Hostile state-topic records, written by another {@code ExclusiveWithFencing} producer
 * (which fences the coordinator's writer), on a real broker through the stock client: blocks
 * beyond the sequences the coordinator allocated, a block whose sequences overflow a long,
 * non-canonical aliases of block keys, an owner reference out of range, another coordinator's
 * block, bytes that are no record, no key and an empty key. They neither wedge the coordinator
 * nor are adopted as outcomes: after the coordinator reopens, and again after a kill -9, new
 * transactions commit, every real transaction's retry gets its real answer, every made-up
 * transaction of the hostile records is not found, and consumers read each acknowledged
 * commit's message once and no aborted one.
 */
@DisplayName("Hostile state-topic records")
class HostileRecordsIT {

    private static final String STATE_TOPIC = "persistent://pulsar/system/__terminated_txn_state_0";
    private static final long BLOCK = 256;
    private static final long EPOCH_2020 = Instant.parse("2020-01-01T00:00:00Z").getEpochSecond();
    /**
     * Hostile records with a non-empty key and a non-empty value, which every restore reads
     * (compaction keeps each, their keys being distinct) and must skip: c7, c36028797018963968,
     * c007, c-0, c+0 and three values under c0 (an owner out of range, another coordinator's block, bytes
     * that are no record). Not counted: the keyless record and the one under the empty
     * key (compaction may drop them before a restore reads them), and the empty value under c4
     * (compaction takes an empty value for a deletion, like a tombstone).
     */
    private static final int HOSTILE_KEYED = 8;

    @Test
    void hostileRecordsNeitherWedgeTheCoordinatorNorBecomeOutcomes() throws Exception {
        try (LocalPulsar pulsar = LocalPulsar.start("hostile", Map.of("transactionMetaPersistCount", "10"))) {
            String topic = Txns.uniqueTopic("hostile");
            Map<TxnID, Boolean> real = new LinkedHashMap<>(); // true: committed
            // The data topic's messages: of commits acknowledged, of commits sent whose answer was
            // lost (a failed round of a wait below), of aborts.
            List<String> acknowledged = Collections.synchronizedList(new ArrayList<>());
            List<String> sent = Collections.synchronizedList(new ArrayList<>());
            List<String> aborted = new ArrayList<>();
            try (PulsarClient client = Txns.client(pulsar);
                 Producer<String> producer = Txns.producer(client, topic)) {
                for (int i = 0; i < 12; i++) {
                    boolean commit = i % 2 == 0;
                    if (commit) {
                        real.put(commit(client, producer, "real-" + i, sent, acknowledged), true);
                    } else {
                        real.put(Txns.aborted(client, producer, "dropped-" + i), false);
                        aborted.add("dropped-" + i);
                    }
                }
            }
            assertThat(real.keySet()).allSatisfy(txn -> assertThat(txn.getLeastSigBits()).isBetween(0L, BLOCK - 1));
            try (PulsarClient plain = PulsarClient.builder().serviceUrl(pulsar.serviceUrl()).build()) {
                // Records are written in groups about once a second: wait until block 0 holds all 12.
                Awaitility.await("block 0 holds every real outcome").atMost(Duration.ofSeconds(60))
                        .pollInterval(Duration.ofSeconds(1)).until(() -> keptInBlockZero(plain) >= real.size());

                Map<TxnID, Boolean> madeUp = new LinkedHashMap<>();
                try (Producer<byte[]> intruder = plain.newProducer(Schema.BYTES).topic(STATE_TOPIC)
                        .accessMode(ProducerAccessMode.ExclusiveWithFencing).create()) {
                    // c. (first) An alias of block 7's key: written before c7, whose block a restore
                    // that takes both as block 7 keeps (the newer value of the same block).
                    send(intruder, "c007", block(0, 7, new int[] {9}, new int[0]).build().toByteArray());
                    madeUp.put(new TxnID(0, 7 * BLOCK + 9), true);
                    // a. Beyond the sequences coordinator 0 has allocated.
                    send(intruder, "c7", block(0, 7, new int[] {3, 5}, new int[] {4}).build().toByteArray());
                    madeUp.put(new TxnID(0, 7 * BLOCK + 3), true);
                    madeUp.put(new TxnID(0, 7 * BLOCK + 4), false);
                    // b. Block 2^55: its sequences 2^63 + offset overflow a long.
                    send(intruder, "c36028797018963968", block(0, 1L << 55, new int[] {1}, new int[0])
                            .build().toByteArray());
                    madeUp.put(new TxnID(0, (1L << 55) * BLOCK + 1), true);
                    // c. Aliases of block 0's key. The forged block 0 contradicts every real outcome.
                    int[] wasAborted = real.entrySet().stream().filter(e -> !e.getValue())
                            .mapToInt(e -> (int) e.getKey().getLeastSigBits()).toArray();
                    int[] wasCommitted = real.entrySet().stream().filter(Map.Entry::getValue)
                            .mapToInt(e -> (int) e.getKey().getLeastSigBits()).toArray();
                    int[] forgedCommits = IntStream.concat(IntStream.of(wasAborted), IntStream.of(200)).toArray();
                    send(intruder, "c-0", block(0, 0, forgedCommits, wasCommitted).build().toByteArray());
                    madeUp.put(new TxnID(0, 200), true);
                    send(intruder, "c+0", block(0, 0, new int[] {201}, new int[0]).build().toByteArray());
                    madeUp.put(new TxnID(0, 201), true);
                    // d. Under the real block's own key (so that its value is read, not refused for
                    // its key): owner 5 named when one owner is listed. Skipped, the block's
                    // earlier value stays: garbage under a real key changes no answer.
                    send(intruder, "c0", block(0, 0, new int[] {210}, new int[0]).addOwners("intruder")
                            .addOwnerRefs(5).build().toByteArray());
                    madeUp.put(new TxnID(0, 210), true);
                    // e. Coordinator 5's block 0 under coordinator 0's key c0.
                    send(intruder, "c0", block(5, 0, new int[] {211}, new int[0]).build().toByteArray());
                    madeUp.put(new TxnID(0, 211), true);
                    // f. Bytes that are no record (0x0F: field 1 of wire type 7, which does not exist),
                    // an empty value, a well-formed block without a key and one under the empty key.
                    byte[] garbage = new byte[40];
                    new Random(7).nextBytes(garbage);
                    garbage[0] = 0x0F;
                    send(intruder, "c0", garbage);
                    send(intruder, "c4", new byte[0]);
                    intruder.newMessage().value(block(0, 5, new int[] {1}, new int[0]).build().toByteArray()).send();
                    madeUp.put(new TxnID(0, 5 * BLOCK + 1), true);
                    send(intruder, "", block(0, 6, new int[] {1}, new int[0]).build().toByteArray());
                    madeUp.put(new TxnID(0, 6 * BLOCK + 1), true);
                }

                SoftAssertions softly = new SoftAssertions();
                // The coordinator learns of the fence at its next write (the record of the next
                // commit), closes, and opens again at the client's next request, restoring from
                // the topic: commit until a restore has read the hostile records.
                long fencedAt = System.nanoTime();
                AtomicInteger round = new AtomicInteger();
                try (PulsarClient client = Txns.client(pulsar);
                     Producer<String> producer = Txns.producer(client, topic)) {
                    Awaitility.await("a new commit, and a restore that read the hostile records")
                            .atMost(Duration.ofMinutes(2)).pollInterval(Duration.ofSeconds(1)).ignoreExceptions()
                            .until(() -> commit(client, producer, "after-fence-" + round.incrementAndGet(), sent,
                                    acknowledged) != null && BrokerMetrics.ofCoordinatorZero(pulsar,
                                    "pulsar_txn_preserver_restore_records") > HOSTILE_KEYED);
                    System.out.printf("coordinator reopened and restored %.1f s after the fence%n",
                            (System.nanoTime() - fencedAt) / 1e9);
                    commit(client, producer, "served", sent, acknowledged);
                    Txns.aborted(client, producer, "dropped-after-fence");
                    aborted.add("dropped-after-fence");
                    assertData(softly, client, topic, acknowledged, sent, aborted, "after the fence");
                }
                assertAnswers(softly, pulsar, real, madeUp, "after the fence");
                softly.assertThat(BrokerMetrics.ofCoordinatorZero(pulsar,
                                "pulsar_txn_preserver_malformed_records_total"))
                        .as("malformed records counted by the restore after the fence")
                        .isGreaterThanOrEqualTo(HOSTILE_KEYED);

                pulsar.restartAfterKill();

                try (PulsarClient client = Txns.client(pulsar);
                     Producer<String> producer = Txns.producer(client, topic)) {
                    // The client may reach the coordinator only after it loaded: bounded retries.
                    Awaitility.await("a new commit after the restart").atMost(Duration.ofMinutes(2))
                            .pollInterval(Duration.ofSeconds(1)).ignoreExceptions()
                            .until(() -> commit(client, producer, "after-restart-" + round.incrementAndGet(), sent,
                                    acknowledged) != null);
                    assertData(softly, client, topic, acknowledged, sent, aborted, "after kill -9 and restart");
                }
                assertAnswers(softly, pulsar, real, madeUp, "after kill -9 and restart");
                softly.assertAll();
            }
        }
    }

    /** Every real transaction's retry gets its real answer; every made-up one is not found. */
    private static void assertAnswers(SoftAssertions softly, LocalPulsar pulsar, Map<TxnID, Boolean> real,
            Map<TxnID, Boolean> madeUp, String when) throws Exception {
        try (RetryingEndClient retry = RetryingEndClient.connect(pulsar.serviceUrl())) {
            for (Map.Entry<TxnID, Boolean> txn : real.entrySet()) {
                softly.assertThat(txn.getValue() ? retry.commit(txn.getKey()) : retry.abort(txn.getKey()))
                        .as("%s: retried %s of real %s", when, txn.getValue() ? "commit" : "abort", txn.getKey())
                        .isEqualTo(EndAnswer.SUCCESS);
            }
            for (Map.Entry<TxnID, Boolean> txn : madeUp.entrySet()) {
                softly.assertThat(txn.getValue() ? retry.commit(txn.getKey()) : retry.abort(txn.getKey()))
                        .as("%s: retried %s of made-up %s", when, txn.getValue() ? "commit" : "abort", txn.getKey())
                        .isEqualTo(EndAnswer.NOT_FOUND);
            }
        }
    }

    /**
     * Commits a transaction holding {@code value}, noted as sent first and as acknowledged once
     * the commit is: a commit that fails may still have landed.
     */
    private static TxnID commit(PulsarClient client, Producer<String> producer, String value, List<String> sent,
                                List<String> acknowledged) throws Exception {
        sent.add(value);
        TxnID txn = Txns.committed(client, producer, value);
        acknowledged.add(value);
        return txn;
    }

    /**
     * The data topic as a consumer reads it (committed data only, the default): every
     * acknowledged commit's message once, in the order sent, no aborted one, and of the commits
     * whose answer was lost none twice.
     */
    private static void assertData(SoftAssertions softly, PulsarClient client, String topic,
            List<String> acknowledged, List<String> sent, List<String> aborted, String when) throws Exception {
        List<String> read = Txns.readAll(client, topic);
        List<String> answerLost;
        synchronized (sent) {
            answerLost = sent.stream().filter(value -> !acknowledged.contains(value)).toList();
        }
        softly.assertThat(read).as("%s: the data, no message twice", when).doesNotHaveDuplicates()
                .doesNotContainAnyElementsOf(aborted);
        softly.assertThat(read).as("%s: the data of acknowledged commits, each once, in order", when)
                .filteredOn(value -> !answerLost.contains(value)).containsExactlyElementsOf(List.copyOf(acknowledged));
        softly.assertThat(sent).as("%s: every message read was sent in a commit", when).containsAll(read);
    }

    private static void send(Producer<byte[]> producer, String key, byte[] value) throws Exception {
        producer.newMessage().key(key).value(value).send();
    }

    /**
     * A well-formed block record (format 2, 4 bitmap words, one recent end time per kept
     * offset, no owners) keeping these offsets as committed and as aborted.
     */
    private static OutcomeBlockRecord.Builder block(long coordinatorId, long blockIndex, int[] committed,
            int[] aborted) {
        long[] keptWords = new long[4];
        long[] committedWords = new long[4];
        for (int offset : committed) {
            keptWords[offset >>> 6] |= 1L << (offset & 63);
            committedWords[offset >>> 6] |= 1L << (offset & 63);
        }
        for (int offset : aborted) {
            keptWords[offset >>> 6] |= 1L << (offset & 63);
        }
        OutcomeBlockRecord.Builder record = OutcomeBlockRecord.newBuilder().setFormatVersion(2)
                .setCoordinatorId(coordinatorId).setBlockIndex(blockIndex).setUniformOwnerRef(0);
        int kept = 0;
        for (int i = 0; i < 4; i++) {
            record.addKept(keptWords[i]).addCommitted(committedWords[i]);
            kept += Long.bitCount(keptWords[i]);
        }
        long recentSecond = Instant.now().getEpochSecond() - EPOCH_2020 - 60;
        for (int i = 0; i < kept; i++) {
            record.addEndSecondDeltas(i == 0 ? recentSecond : 1); // deltas: each a second after the one before
        }
        return record;
    }

    /** Outcomes kept in the newest record of key c0 of the state topic (not compacted), 0 if none. */
    private static int keptInBlockZero(PulsarClient client) throws Exception {
        byte[] newest = null;
        try (Reader<byte[]> reader = client.newReader(Schema.BYTES).topic(STATE_TOPIC)
                .startMessageId(MessageId.earliest).create()) {
            Message<byte[]> message;
            while ((message = reader.readNext(3, TimeUnit.SECONDS)) != null) {
                if ("c0".equals(message.getKey())) {
                    newest = message.getData();
                }
            }
        }
        if (newest == null || newest.length == 0) {
            return 0;
        }
        int kept = 0;
        for (long word : OutcomeBlockRecord.parseFrom(newest).getKeptList()) {
            kept += Long.bitCount(word);
        }
        return kept;
    }
}
