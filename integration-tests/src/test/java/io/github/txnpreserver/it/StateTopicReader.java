package io.github.txnpreserver.it;

import io.github.txnpreserver.testing.BlockRecordReading;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import org.apache.pulsar.client.api.Message;
import org.apache.pulsar.client.api.MessageId;
import org.apache.pulsar.client.api.PulsarClient;
import org.apache.pulsar.client.api.Reader;
import org.apache.pulsar.client.api.Schema;
import org.apache.pulsar.client.api.transaction.TxnID;

/**
 * Reads a state topic as a test sees it: its compacted view, or every record in log order.
 * Transactions are named {@code <mostSigBits>:<leastSigBits>}.
 *
 * <p>The plugin writes one format: a block record ({@code c<blockIndex>}, an
 * OutcomeBlockRecord) holding every kept outcome of its 256 sequence ids. Records are read
 * from the format's specification ({@link BlockRecordReading}), not through the plugin's codec,
 * and must be this topic's coordinator's; a record the plugin could not have written (another
 * key, a malformed value) fails the read.
 */
final class StateTopicReader {

    /** The key of the restore barrier the coordinator writes when it opens; not a record. */
    private static final String BARRIER_KEY = "restore-barrier";
    private static final String STATE_TOPIC_PREFIX = "__terminated_txn_state_";

    private StateTopicReader() {
    }

    static String nameOf(TxnID txnId) {
        return txnId.getMostSigBits() + ":" + txnId.getLeastSigBits();
    }

    /**
     * The compacted view: each live key and the transactions its newest record holds
     * ("most:least"), keys in log order.
     */
    static Map<String, List<String>> liveRecords(PulsarClient client, String topic) throws Exception {
        long coordinatorId = coordinatorOf(topic);
        Map<String, List<String>> live = new LinkedHashMap<>();
        try (Reader<byte[]> reader = client.newReader(Schema.BYTES).topic(topic).readCompacted(true)
                .startMessageId(MessageId.earliest).create()) {
            Message<byte[]> message;
            while ((message = reader.readNext(3, TimeUnit.SECONDS)) != null) {
                if (isRecordKey(message)) {
                    live.remove(message.getKey());
                    if (hasValue(message)) {
                        List<String> txns = new ArrayList<>();
                        for (String outcome : outcomesOf(message, coordinatorId)) {
                            txns.add(outcome.substring(0, outcome.indexOf(' ')));
                        }
                        live.put(message.getKey(), txns);
                    }
                }
            }
        }
        return live;
    }

    /** Every transaction the compacted view holds, in key order. */
    static List<String> liveTransactions(PulsarClient client, String topic) throws Exception {
        return liveRecords(client, topic).values().stream().flatMap(List::stream).toList();
    }

    /**
     * Every record of a state topic, not compacted, in log order: one "transaction OUTCOME"
     * line per transaction the record holds (for a block, one per kept outcome, in sequence
     * order), or "key tombstone".
     */
    static List<String> records(PulsarClient client, String topic) throws Exception {
        long coordinatorId = coordinatorOf(topic);
        List<String> records = new ArrayList<>();
        try (Reader<byte[]> reader = client.newReader(Schema.BYTES).topic(topic)
                .startMessageId(MessageId.earliest).create()) {
            Message<byte[]> message;
            while ((message = reader.readNext(3, TimeUnit.SECONDS)) != null) {
                if (!isRecordKey(message)) {
                    continue;
                }
                if (!hasValue(message)) {
                    records.add(message.getKey() + " tombstone");
                } else {
                    records.addAll(outcomesOf(message, coordinatorId));
                }
            }
        }
        return records;
    }

    /**
     * "most:least COMMITTED|ABORTED" for each transaction a block record holds, in sequence
     * order (a timeout-abort is an abort here).
     */
    private static List<String> outcomesOf(Message<byte[]> message, long coordinatorId) throws Exception {
        BlockRecordReading.Block block = BlockRecordReading.read(message.getKey(), message.getData());
        if (block.coordinatorId() != coordinatorId) {
            throw new AssertionError("the record under key '" + message.getKey() + "' is coordinator "
                    + block.coordinatorId() + "'s, in coordinator " + coordinatorId + "'s state topic");
        }
        List<String> outcomes = new ArrayList<>();
        for (BlockRecordReading.RecordedOutcome recorded : block.outcomes()) {
            outcomes.add(nameOf(recorded.txn())
                    + (recorded.ending() == BlockRecordReading.Ending.COMMITTED ? " COMMITTED" : " ABORTED"));
        }
        return outcomes;
    }

    private static long coordinatorOf(String topic) {
        int at = topic.lastIndexOf(STATE_TOPIC_PREFIX);
        if (at < 0) {
            throw new IllegalArgumentException(topic + " is not a state topic");
        }
        return Long.parseLong(topic.substring(at + STATE_TOPIC_PREFIX.length()));
    }

    private static boolean isRecordKey(Message<byte[]> message) {
        return message.hasKey() && !BARRIER_KEY.equals(message.getKey());
    }

    private static boolean hasValue(Message<byte[]> message) {
        return message.getData() != null && message.getData().length > 0;
    }
}
