package io.github.txnpreserver.bench;

import io.github.txnpreserver.it.LocalPulsar;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.Random;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import org.apache.pulsar.client.admin.LongRunningProcessStatus;
import org.apache.pulsar.client.admin.PulsarAdmin;
import org.apache.pulsar.client.api.Message;
import org.apache.pulsar.client.api.MessageId;
import org.apache.pulsar.client.api.Producer;
import org.apache.pulsar.client.api.ProducerAccessMode;
import org.apache.pulsar.client.api.PulsarClient;
import org.apache.pulsar.client.api.Reader;
import org.apache.pulsar.client.api.Schema;

/**
 * How long a point read of one record of a compacted state topic takes through the stock
 * client, by the message id its send returned: a reader opened at that id (inclusive) on the
 * compacted view, one message read, closed. Records are written as the plugin writes them
 * (keyed, batched, an exclusive fencing producer), some keys written again, the topic
 * compacted (with the original ledgers rolled), then more written above the compaction
 * horizon. Usage: {@code benchmarks/run.sh --cold-read-probe [records] [reads]}.
 */
public final class ColdReadProbe {

    private static final String TOPIC = "persistent://pulsar/system/__terminated_txn_state_99";

    private ColdReadProbe() {
    }

    public static void main(String[] args) throws Exception {
        int records = args.length > 0 ? Integer.parseInt(args[0]) : 50_000;
        int reads = args.length > 1 ? Integer.parseInt(args[1]) : 400;
        try (LocalPulsar broker = LocalPulsar.startStock("cold-read-probe", Map.of(
                "managedLedgerMaxEntriesPerLedger", "2000", "managedLedgerMinLedgerRolloverTimeMinutes", "0"));
             PulsarClient client = PulsarClient.builder().serviceUrl(broker.serviceUrl()).build();
             PulsarAdmin admin = PulsarAdmin.builder().serviceHttpUrl(broker.httpUrl()).build()) {
            admin.topics().createNonPartitionedTopic(TOPIC);
            MessageId[] newest = new MessageId[records];
            Random random = new Random(7);
            byte[] value = new byte[350];
            try (Producer<byte[]> producer = client.newProducer(Schema.BYTES).topic(TOPIC)
                    .accessMode(ProducerAccessMode.ExclusiveWithFencing).enableBatching(true)
                    .batchingMaxPublishDelay(1, TimeUnit.MILLISECONDS).batchingMaxMessages(1000)
                    .blockIfQueueFull(true).create()) {
                write(producer, newest, 0, records, value, random);
                write(producer, newest, 0, records / 10, value, random);
                admin.topics().triggerCompaction(TOPIC);
                while (admin.topics().compactionStatus(TOPIC).status == LongRunningProcessStatus.Status.RUNNING) {
                    Thread.sleep(200);
                }
                System.out.println("compaction: " + admin.topics().compactionStatus(TOPIC).status);
                write(producer, newest, records / 2, records / 2 + records / 20, value, random);
            }
            System.out.println("ledgers: " + admin.topics().getInternalStats(TOPIC).ledgers.size()
                    + ", compacted ledger: " + admin.topics().getInternalStats(TOPIC).compactedLedger.ledgerId);
            // Warm-up, then sequential and concurrent reads.
            pointReads(client, newest, 50, 1, random);
            long[] sequential = pointReads(client, newest, reads, 1, random);
            long[] concurrent = pointReads(client, newest, reads, 8, random);
            System.out.printf(Locale.ROOT, "RESULT cold_read_sequential_p50_ms=%.2f cold_read_sequential_p99_ms=%.2f"
                    + " cold_read_8_concurrent_p50_ms=%.2f cold_read_8_concurrent_p99_ms=%.2f%n",
                    percentile(sequential, 50), percentile(sequential, 99), percentile(concurrent, 50),
                    percentile(concurrent, 99));
        }
    }

    private static void write(Producer<byte[]> producer, MessageId[] newest, int from, int to, byte[] value,
                              Random random) {
        List<CompletableFuture<MessageId>> sends = new ArrayList<>();
        for (int key = from; key < to; key++) {
            random.nextBytes(value);
            sends.add(producer.newMessage().key("c" + key).value(value.clone()).sendAsync());
        }
        producer.flushAsync().join();
        for (int i = 0; i < sends.size(); i++) {
            newest[from + i] = sends.get(i).join();
        }
    }

    /** {@code count} point reads of random keys, {@code parallel} at a time; each read's nanos. */
    private static long[] pointReads(PulsarClient client, MessageId[] newest, int count, int parallel, Random random)
            throws Exception {
        long[] nanos = new long[count];
        for (int done = 0; done < count; done += parallel) {
            List<CompletableFuture<Void>> batch = new ArrayList<>();
            for (int i = done; i < Math.min(count, done + parallel); i++) {
                int key = random.nextInt(newest.length);
                int slot = i;
                batch.add(CompletableFuture.runAsync(() -> nanos[slot] = read(client, key, newest[key])));
            }
            CompletableFuture.allOf(batch.toArray(new CompletableFuture[0])).get(60, TimeUnit.SECONDS);
        }
        return nanos;
    }

    private static long read(PulsarClient client, int key, MessageId id) {
        long start = System.nanoTime();
        try (Reader<byte[]> reader = client.newReader(Schema.BYTES).topic(TOPIC).startMessageId(id)
                .startMessageIdInclusive().readCompacted(true).receiverQueueSize(1).create()) {
            Message<byte[]> message = reader.readNext(10, TimeUnit.SECONDS);
            if (message == null || !("c" + key).equals(message.getKey()) || !message.getMessageId().equals(id)) {
                throw new IllegalStateException("key c" + key + " at " + id + ": read "
                        + (message == null ? "nothing" : message.getKey() + " at " + message.getMessageId()));
            }
            return System.nanoTime() - start;
        } catch (Exception e) {
            throw new IllegalStateException(e);
        }
    }

    private static double percentile(long[] nanos, int p) {
        long[] sorted = nanos.clone();
        Arrays.sort(sorted);
        return sorted[Math.min(sorted.length - 1, (int) Math.ceil(p / 100.0 * sorted.length) - 1)] / 1e6;
    }
}
