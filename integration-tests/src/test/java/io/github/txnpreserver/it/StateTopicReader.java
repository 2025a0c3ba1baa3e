package io.github.txnpreserver.it;

import io.github.txnpreserver.statetopic.proto.TerminatedTxnRecord;
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
 * Transactions are named {@code <mostSigBits>:<leastSigBits>}, whichever slot key holds them.
 */
final class StateTopicReader {

    /** The key of the restore barrier the coordinator writes when it opens; not a record. */
    private static final String BARRIER_KEY = "restore-barrier";

    private StateTopicReader() {
    }

    static String nameOf(TxnID txnId) {
        return txnId.getMostSigBits() + ":" + txnId.getLeastSigBits();
    }

    /** The compacted view: each live key and the transaction its newest record holds, in log order. */
    static Map<String, String> liveRecords(PulsarClient client, String topic) throws Exception {
        Map<String, String> live = new LinkedHashMap<>();
        try (Reader<byte[]> reader = client.newReader(Schema.BYTES).topic(topic).readCompacted(true)
                .startMessageId(MessageId.earliest).create()) {
            Message<byte[]> message;
            while ((message = reader.readNext(3, TimeUnit.SECONDS)) != null) {
                if (isRecordKey(message)) {
                    live.remove(message.getKey());
                    if (hasValue(message)) {
                        live.put(message.getKey(), transactionOf(message));
                    }
                }
            }
        }
        return live;
    }

    /**
     * Every record of a state topic, not compacted, in log order, as "transaction OUTCOME"
     * or "key tombstone".
     */
    static List<String> records(PulsarClient client, String topic) throws Exception {
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
                    records.add(transactionOf(message) + " "
                            + TerminatedTxnRecord.parseFrom(message.getData()).getOutcome());
                }
            }
        }
        return records;
    }

    private static boolean isRecordKey(Message<byte[]> message) {
        return message.hasKey() && !BARRIER_KEY.equals(message.getKey());
    }

    private static boolean hasValue(Message<byte[]> message) {
        return message.getData() != null && message.getData().length > 0;
    }

    private static String transactionOf(Message<byte[]> message) throws Exception {
        TerminatedTxnRecord record = TerminatedTxnRecord.parseFrom(message.getData());
        return record.getTxnidMostBits() + ":" + record.getTxnidLeastBits();
    }
}
