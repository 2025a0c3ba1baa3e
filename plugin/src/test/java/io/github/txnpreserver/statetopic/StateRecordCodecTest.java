package io.github.txnpreserver.statetopic;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import io.github.txnpreserver.preserver.KeptOutcome;
import io.github.txnpreserver.preserver.Outcome;
import io.github.txnpreserver.statetopic.StateRecordCodec.StoredKey;
import io.github.txnpreserver.statetopic.proto.TerminatedTxnRecord;
import java.util.Arrays;
import org.apache.pulsar.client.api.transaction.TxnID;
import org.junit.jupiter.api.DisplayName;
import org.junit.jupiter.api.Test;

@DisplayName("State-topic records")
class StateRecordCodecTest {

    @Test
    void roundTripsAnOutcomeWithAndWithoutOwner() throws Exception {
        KeptOutcome withOwner = new KeptOutcome(new TxnID(2, 99), Outcome.ABORTED, "flink-job-1", 1234L);
        KeptOutcome withoutOwner = new KeptOutcome(new TxnID(2, 100), Outcome.COMMITTED, null, 5L);

        assertThat(StateRecordCodec.decode("s7:flink-job-1", StateRecordCodec.encode(withOwner)).outcome())
                .isEqualTo(withOwner);
        assertThat(StateRecordCodec.decode("s0", StateRecordCodec.encode(withoutOwner)).outcome())
                .isEqualTo(withoutOwner);
    }

    @Test
    void keysAreOnePerClientSlot() throws Exception {
        assertThat(StateRecordCodec.slotKey("role:with:colons", 42)).isEqualTo("s42:role:with:colons");
        assertThat(StateRecordCodec.slotKey(null, 3)).isEqualTo("s3");
        assertThat(StateRecordCodec.slotKey("", 3)).isEqualTo("s3:");
        assertThat(StateRecordCodec.parseKey("s42:role:with:colons")).isEqualTo(new StoredKey(42, "role:with:colons",
                null));
        assertThat(StateRecordCodec.parseKey("s3")).isEqualTo(new StoredKey(3, null, null));
        assertThat(StateRecordCodec.parseKey("s3:")).isEqualTo(new StoredKey(3, "", null));
    }

    @Test
    void readsTheOnePerTransactionKeysOfVersion01() throws Exception {
        KeptOutcome outcome = new KeptOutcome(new TxnID(3, 42), Outcome.COMMITTED, "alice", 9L);

        StateRecordCodec.StoredRecord stored = StateRecordCodec.decode("3:42", StateRecordCodec.encode(outcome));

        assertThat(stored.key()).isEqualTo(new StoredKey(-1, null, new TxnID(3, 42)));
        assertThat(stored.key().isSlot()).isFalse();
        assertThat(stored.outcome()).isEqualTo(outcome);
    }

    @Test
    void malformedKeysAreRefused() {
        for (String key : new String[] {"", "s", "s-1", "s+1", "sx:alice", "garbage", "1:", ":1", "a:b"}) {
            assertThatThrownBy(() -> StateRecordCodec.parseKey(key)).as(key)
                    .isInstanceOf(MalformedRecordException.class);
        }
    }

    @Test
    void aRecordOfAFutureFormatIsRefused() {
        byte[] future = TerminatedTxnRecord.newBuilder().setFormatVersion(StateRecordCodec.FORMAT_VERSION + 1)
                .setTxnidMostBits(1).setTxnidLeastBits(1).build().toByteArray();

        assertThatThrownBy(() -> StateRecordCodec.decode("s1", future))
                .isInstanceOf(MalformedRecordException.class).hasMessageContaining("format version 2");
    }

    @Test
    void aRecordStoredUnderAnotherClientsOrTransactionsKeyIsRefused() {
        byte[] record = StateRecordCodec.encode(new KeptOutcome(new TxnID(1, 1), Outcome.COMMITTED, "alice", 0));

        assertThatThrownBy(() -> StateRecordCodec.decode("s0:bob", record))
                .isInstanceOf(MalformedRecordException.class);
        assertThatThrownBy(() -> StateRecordCodec.decode("s0", record)).isInstanceOf(MalformedRecordException.class);
        assertThatThrownBy(() -> StateRecordCodec.decode("1:2", record)).isInstanceOf(MalformedRecordException.class);
    }

    @Test
    void truncatedBytesAreRefused() {
        byte[] record = StateRecordCodec.encode(new KeptOutcome(new TxnID(1, 1), Outcome.COMMITTED, "x", 0));
        byte[] truncated = Arrays.copyOf(record, record.length - 2);

        assertThatThrownBy(() -> StateRecordCodec.decode("s0:x", truncated))
                .isInstanceOf(MalformedRecordException.class);
    }
}
