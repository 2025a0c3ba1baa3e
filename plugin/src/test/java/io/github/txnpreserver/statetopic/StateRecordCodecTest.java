package io.github.txnpreserver.statetopic;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import io.github.txnpreserver.preserver.KeptOutcome;
import io.github.txnpreserver.preserver.Outcome;
import io.github.txnpreserver.statetopic.proto.TerminatedTxnRecord;
import org.apache.pulsar.client.api.transaction.TxnID;
import org.junit.jupiter.api.DisplayName;
import org.junit.jupiter.api.Test;

@DisplayName("State-topic records")
class StateRecordCodecTest {

    @Test
    void roundTripsAnOutcomeWithAndWithoutOwner() throws Exception {
        KeptOutcome withOwner = new KeptOutcome(new TxnID(2, 99), Outcome.ABORTED, "flink-job-1", 1234L);
        KeptOutcome withoutOwner = new KeptOutcome(new TxnID(2, 100), Outcome.COMMITTED, null, 5L);

        assertThat(StateRecordCodec.decode("2:99", StateRecordCodec.encode(withOwner))).isEqualTo(withOwner);
        assertThat(StateRecordCodec.decode("2:100", StateRecordCodec.encode(withoutOwner))).isEqualTo(withoutOwner);
    }

    @Test
    void keysAreOnePerTransaction() throws Exception {
        assertThat(StateRecordCodec.keyOf(new TxnID(3, 42))).isEqualTo("3:42");
        assertThat(StateRecordCodec.parseKey("3:42")).isEqualTo(new TxnID(3, 42));
    }

    @Test
    void aRecordOfAFutureFormatIsRefused() {
        byte[] future = TerminatedTxnRecord.newBuilder().setFormatVersion(StateRecordCodec.FORMAT_VERSION + 1)
                .setTxnidMostBits(1).setTxnidLeastBits(1).build().toByteArray();

        assertThatThrownBy(() -> StateRecordCodec.decode("1:1", future))
                .isInstanceOf(MalformedRecordException.class).hasMessageContaining("format version 2");
    }

    @Test
    void aRecordStoredUnderAnotherTransactionsKeyIsRefused() {
        byte[] record = StateRecordCodec.encode(new KeptOutcome(new TxnID(1, 1), Outcome.COMMITTED, null, 0));

        assertThatThrownBy(() -> StateRecordCodec.decode("1:2", record)).isInstanceOf(MalformedRecordException.class);
    }

    @Test
    void truncatedBytesAreRefused() {
        byte[] record = StateRecordCodec.encode(new KeptOutcome(new TxnID(1, 1), Outcome.COMMITTED, "x", 0));
        byte[] truncated = java.util.Arrays.copyOf(record, record.length - 2);

        assertThatThrownBy(() -> StateRecordCodec.decode("1:1", truncated))
                .isInstanceOf(MalformedRecordException.class);
    }
}
