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

/** Reads a state topic as a test sees it: its compacted view, or every record in log order. */
final class StateTopicReader {

    private StateTopicReader() {
    }

    static List<String> liveKeys(PulsarClient client, String topic) throws Exception {
        Map<String, Boolean> live = new LinkedHashMap<>();
        try (Reader<byte[]> reader = client.newReader(Schema.BYTES).topic(topic).readCompacted(true)
                .startMessageId(MessageId.earliest).create()) {
            Message<byte[]> message;
            while ((message = reader.readNext(3, TimeUnit.SECONDS)) != null) {
                if (message.hasKey() && message.getKey().contains(":")) {
                    live.remove(message.getKey());
                    live.put(message.getKey(), message.getData() != null);
                }
            }
        }
        List<String> keys = new ArrayList<>();
        live.forEach((key, hasValue) -> {
            if (hasValue) {
                keys.add(key);
            }
        });
        return keys;
    }

    /**
     * Every transaction record of a state topic, not compacted, in log order, as
     * "key OUTCOME" or "key tombstone".
     */
    static List<String> records(PulsarClient client, String topic) throws Exception {
        List<String> records = new ArrayList<>();
        try (Reader<byte[]> reader = client.newReader(Schema.BYTES).topic(topic)
                .startMessageId(MessageId.earliest).create()) {
            Message<byte[]> message;
            while ((message = reader.readNext(3, TimeUnit.SECONDS)) != null) {
                if (!message.hasKey() || !message.getKey().contains(":")) {
                    continue;
                }
                if (message.getData() == null || message.getData().length == 0) {
                    records.add(message.getKey() + " tombstone");
                } else {
                    records.add(message.getKey() + " "
                            + TerminatedTxnRecord.parseFrom(message.getData()).getOutcome());
                }
            }
        }
        return records;
    }
}
