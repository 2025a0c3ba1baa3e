package io.github.txnpreserver.statetopic;

import com.google.protobuf.CodedOutputStream;
import java.io.IOException;
import java.io.UncheckedIOException;
import org.apache.pulsar.client.api.MessageId;
import org.apache.pulsar.client.api.MessageIdAdv;

/**
 * Where a record is in the state topic: the message id its send returned. A compacted topic
 * keeps each key's newest message under this id (the compacted ledger stores the original
 * id with each message it keeps), so the id finds the record before and after compaction.
 *
 * @param batchIndex the record's index in its batch, -1 if it was sent alone
 * @param batchSize the number of messages of its batch, 0 if it was sent alone
 */
public record RecordPosition(long ledgerId, long entryId, int batchIndex, int batchSize) {

    /** The position of a message id the client returned (a non-partitioned topic's). */
    public static RecordPosition of(MessageId id) {
        if (!(id instanceof MessageIdAdv adv)) {
            throw new IllegalArgumentException("not a message id of the Pulsar client: " + id);
        }
        return new RecordPosition(adv.getLedgerId(), adv.getEntryId(), adv.getBatchIndex(),
                adv.getBatchIndex() < 0 ? 0 : adv.getBatchSize());
    }

    /** Whether both name the same message (a compacted batch may count its messages otherwise). */
    public boolean sameMessage(RecordPosition other) {
        return ledgerId == other.ledgerId && entryId == other.entryId && batchIndex == other.batchIndex;
    }

    /**
     * The message id, through its wire form ({@code MessageIdData}, fields 1 to 6 of
     * PulsarApi.proto: stable across releases, unlike the client's implementation classes).
     */
    public MessageId toMessageId() {
        byte[] bytes = new byte[64];
        CodedOutputStream out = CodedOutputStream.newInstance(bytes);
        try {
            out.writeUInt64(1, ledgerId);
            out.writeUInt64(2, entryId);
            out.writeInt32(3, -1);
            if (batchIndex >= 0) {
                out.writeInt32(4, batchIndex);
                out.writeInt32(6, batchSize);
            }
            int length = out.getTotalBytesWritten();
            byte[] exact = new byte[length];
            System.arraycopy(bytes, 0, exact, 0, length);
            return MessageId.fromByteArray(exact);
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        }
    }
}
