package io.github.txnpreserver.bench;

import io.github.txnpreserver.it.EndAnswer;
import io.github.txnpreserver.it.LocalPulsar;
import io.github.txnpreserver.it.PulsarDistribution;
import io.github.txnpreserver.it.RetryingEndClient;
import io.github.txnpreserver.preserver.kept.BlockRecordCodec;
import io.github.txnpreserver.statetopic.proto.OutcomeBlockRecord;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.util.Locale;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import org.apache.pulsar.client.admin.PulsarAdmin;
import org.apache.pulsar.client.admin.PulsarAdminException;
import org.apache.pulsar.client.api.Producer;
import org.apache.pulsar.client.api.ProducerAccessMode;
import org.apache.pulsar.client.api.PulsarClient;
import org.apache.pulsar.client.api.Schema;
import org.apache.pulsar.client.api.transaction.Transaction;
import org.apache.pulsar.client.api.transaction.TxnID;

/**
 * A coordinator that keeps {@code outcomes} (100 M by default) opened on a real broker from
 * a real state topic: block records as the plugin writes them, each block's outcomes owned by
 * one of 1 000 roles (but the three the retries ask about, which have none: authentication is
 * off) and ended within a second of each other, the blocks' end times spread
 * over the 72 h retention; the broker stopped and started again (its JIT cold), at the install
 * defaults (64 MiB bound). Printed: when it served a new transaction, and when its restore was
 * done (every kept outcome answerable), both from the broker's being healthy, and retries of
 * the oldest, a middle and the newest outcome. Usage:
 * {@code benchmarks/run.sh --restore-at-scale [outcomes in millions]}.
 */
public final class RestoreAtScale {

    private static final String STATE_TOPIC = "persistent://pulsar/system/__terminated_txn_state_0";
    private static final long FIRST_SEQUENCE = 1_000_000_000L;
    private static final long TIME_EPOCH_MILLIS = 1_577_836_800_000L;
    private static final int ROLES = 1000;
    private static final Pattern RESTORED = Pattern.compile(
            "Coordinator 0: restored (\\d+) kept transaction outcomes from (\\d+) state-topic records in (\\d+) ms");

    private RestoreAtScale() {
    }

    /** What a restore at scale measured, in seconds from the broker being healthy. */
    record Figures(String label, double servingSeconds, double allAnsweredSeconds, double readSeconds) {
        String result() {
            return String.format(Locale.ROOT, "restore_real_%s_serving_seconds=%.2f"
                    + " restore_real_%s_all_answered_seconds=%.2f restore_real_%s_read_seconds=%.2f", label,
                    servingSeconds, label, allAnsweredSeconds, label, readSeconds);
        }
    }

    public static void main(String[] args) throws Exception {
        long outcomes = (args.length > 0 ? Long.parseLong(args[0]) : 100) * 1_000_000L;
        say("RESULT %s", measure(outcomes).result());
    }

    /** Writes {@code outcomes} as the plugin would, opens a broker on them and measures its restore. */
    static Figures measure(long outcomes) throws Exception {
        // The broker's JIT as in production (C2), as every other benchmark runs it: the tests'
        // brokers stop at C1, which decodes a restore's records at about half the speed.
        System.setProperty(PulsarDistribution.FULL_JIT, "true");
        String label = (outcomes / 1_000_000) + "m";
        try (LocalPulsar pulsar = LocalPulsar.startWithTestHooks("restore-" + label, Map.of(
                        "transactionMetaPersistCount", "100"),
                "-Xms2g -Xmx2g -Dtxnpreserver.testhooks.sequenceFloor=" + (FIRST_SEQUENCE + outcomes) + " "
                        // e.g. a flight recording of the restore: -XX:StartFlightRecording=filename=...
                        + System.getProperty("txnpreserver.bench.brokerOpts", ""))) {
            long writeStart = System.nanoTime();
            long records = writeBlocks(pulsar, outcomes);
            say("wrote %d outcomes in %d block records in %.1f s", outcomes, records,
                    (System.nanoTime() - writeStart) / 1e9);

            pulsar.stop();
            pulsar.start();
            long healthy = System.nanoTime();
            double servingSeconds;
            try (PulsarClient client = BrokerDriver.client(pulsar.serviceUrl())) {
                Transaction fresh = client.newTransaction().withTransactionTimeout(1, TimeUnit.MINUTES).build()
                        .get(120, TimeUnit.SECONDS);
                fresh.commit().get(120, TimeUnit.SECONDS);
                servingSeconds = (System.nanoTime() - healthy) / 1e9;
            }
            say("a new transaction committed %.2f s after the broker was healthy", servingSeconds);
            double allAnsweredSeconds;
            try (RetryingEndClient retry = RetryingEndClient.connect(pulsar.serviceUrl())) {
                EndAnswer oldest = retry.commit(new TxnID(0, FIRST_SEQUENCE));
                allAnsweredSeconds = (System.nanoTime() - healthy) / 1e9;
                EndAnswer middle = retry.commit(new TxnID(0, FIRST_SEQUENCE + (outcomes + 255) / 256 / 2 * 256 + 4));
                EndAnswer owned = retry.commit(new TxnID(0, FIRST_SEQUENCE + 256 + 1));
                say("a retry of another role's outcome: %s (%s)", owned, retry.lastMessage());
                EndAnswer newest = retry.abort(new TxnID(0, FIRST_SEQUENCE + outcomes - 1));
                EndAnswer beyond = retry.commit(new TxnID(0, FIRST_SEQUENCE + outcomes));
                say("retries: oldest %s, middle %s, newest (an abort of a commit) %s, one past the last %s", oldest,
                        middle, newest, beyond);
                if (oldest != EndAnswer.SUCCESS || middle != EndAnswer.SUCCESS
                        || newest != EndAnswer.REFUSED_AS_COMMITTED || beyond != EndAnswer.NOT_FOUND) {
                    throw new IllegalStateException("a restored outcome was answered wrongly");
                }
            }
            String logged = restoreLine(pulsar);
            say("broker log: %s", logged);
            Matcher matcher = RESTORED.matcher(logged);
            double restoreSeconds = matcher.find() ? Long.parseLong(matcher.group(3)) / 1000.0 : Double.NaN;
            say("kept %.0f outcomes, %.0f cold; heap of the kept outcomes %.1f MiB", metric(pulsar, "kept_outcomes"),
                    metric(pulsar, "cold_outcomes"), metric(pulsar, "kept_bytes") / (1 << 20));
            return new Figures(label, servingSeconds, allAnsweredSeconds, restoreSeconds);
        }
    }

    /** The outcomes as block records, as the plugin writes them; returns how many records. */
    private static long writeBlocks(LocalPulsar pulsar, long outcomes) throws Exception {
        long nowSecond = (System.currentTimeMillis() - TIME_EPOCH_MILLIS) / 1000;
        long spanSeconds = 72 * 3600 - 600;
        long blocks = (outcomes + 255) / 256;
        long records = 0;
        try (PulsarAdmin admin = PulsarAdmin.builder().serviceHttpUrl(pulsar.httpUrl()).build();
             PulsarClient plain = PulsarClient.builder().serviceUrl(pulsar.serviceUrl()).build()) {
            try {
                admin.topics().createNonPartitionedTopic(STATE_TOPIC);
            } catch (PulsarAdminException.ConflictException alreadyThere) {
                // The coordinator opened it already; this writer fences it and takes over.
            }
            try (Producer<byte[]> writer = plain.newProducer(Schema.BYTES).topic(STATE_TOPIC)
                    .accessMode(ProducerAccessMode.ExclusiveWithFencing)
                    .enableBatching(true).batchingMaxMessages(1000).batchingMaxBytes(1024 * 1024)
                    .batchingMaxPublishDelay(5, TimeUnit.MILLISECONDS)
                    .maxPendingMessages(10_000).blockIfQueueFull(true).create()) {
                for (long block = 0; block < blocks; block++) {
                    long first = FIRST_SEQUENCE + block * 256;
                    int size = (int) Math.min(256, FIRST_SEQUENCE + outcomes - first);
                    long blockIndex = first >>> 8;
                    long[] kept = new long[4];
                    long[] committed = new long[4];
                    for (int offset = 0; offset < size; offset++) {
                        int at = (int) ((first + offset) & 255);
                        kept[at >>> 6] |= 1L << (at & 63);
                        if ((first + offset) % 7 != 3) {
                            committed[at >>> 6] |= 1L << (at & 63);
                        }
                    }
                    OutcomeBlockRecord.Builder record = OutcomeBlockRecord.newBuilder()
                            .setFormatVersion(BlockRecordCodec.FORMAT_VERSION).setCoordinatorId(0)
                            .setBlockIndex(blockIndex);
                    // The blocks the retries ask about have no owner (authentication is off, so the
                    // retrying client has none); every other is owned by one of the roles.
                    if (block == 0 || block == blocks / 2 || block == blocks - 1) {
                        record.setUniformOwnerRef(0);
                    } else {
                        record.addOwners("role-" + (block % ROLES)).setUniformOwnerRef(1);
                    }
                    for (int word = 0; word < 4; word++) {
                        record.addKept(kept[word]).addCommitted(committed[word]);
                    }
                    long endSecond = nowSecond - spanSeconds + spanSeconds * block / blocks;
                    for (int offset = 0; offset < size; offset++) {
                        record.addEndSecondDeltas(offset == 0 ? endSecond : (offset % 3 == 0 ? 1 : 0));
                    }
                    writer.newMessage().key(BlockRecordCodec.key(blockIndex)).value(record.build().toByteArray())
                            .sendAsync();
                    records++;
                }
                writer.flush();
            }
        }
        return records;
    }

    private static String restoreLine(LocalPulsar pulsar) throws Exception {
        String found = "(no restore line found)";
        for (String line : pulsar.output().split("\n")) {
            if (RESTORED.matcher(line).find()) {
                found = line.substring(line.indexOf("Coordinator 0:"));
            }
        }
        return found;
    }

    private static double metric(LocalPulsar broker, String name) throws Exception {
        String body = HttpClient.newHttpClient().send(HttpRequest.newBuilder(URI.create(broker.httpUrl()
                + "/metrics/")).build(), HttpResponse.BodyHandlers.ofString()).body();
        Matcher matcher = Pattern.compile("^pulsar_txn_preserver_" + Pattern.quote(name)
                + "\\{[^}]*coordinator_id=\"0\"[^}]*\\} (\\S+)", Pattern.MULTILINE).matcher(body);
        return matcher.find() ? Double.parseDouble(matcher.group(1)) : Double.NaN;
    }

    private static void say(String format, Object... args) {
        System.out.printf(Locale.ROOT, format + "%n", args);
        System.out.flush();
    }
}
