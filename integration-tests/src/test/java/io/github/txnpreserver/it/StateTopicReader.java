package io.github.txnpreserver.it;

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

/** Reads a state topic's compacted view as a test sees it: the transaction keys whose newest entry is a value. */
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
}
