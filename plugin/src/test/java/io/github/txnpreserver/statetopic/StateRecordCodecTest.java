package io.github.txnpreserver.statetopic;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import io.github.txnpreserver.preserver.KeptOutcome;
import io.github.txnpreserver.preserver.Outcome;
import io.github.txnpreserver.statetopic.StateRecordCodec.StoredKey;
import io.github.txnpreserver.statetopic.proto.OutcomeBlockRecord;
import io.github.txnpreserver.statetopic.proto.TerminatedTxnRecord;
import java.util.Arrays;
import java.util.List;
import java.util.function.UnaryOperator;
import org.apache.pulsar.client.api.transaction.TxnID;
import org.junit.jupiter.api.DisplayName;
import org.junit.jupiter.api.Nested;
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

    @Nested
    @DisplayName("block records")
    class Blocks {

        private static final long TC = 4;

        /** Offsets 0, 5, 64 and 255 kept; 5 and 255 committed. */
        private static final long[] KEPT = {1L | (1L << 5), 1L, 0, 1L << 63};
        private static final long[] COMMITTED = {1L << 5, 0, 0, 1L << 63};
        private static final int[] SECONDS = {100_000_000, 100_000_010, 99_999_990, Integer.MAX_VALUE};

        private static void assertSameBlock(ChunkRecord decoded, ChunkRecord expected) {
            assertThat(decoded.coordinatorId()).isEqualTo(expected.coordinatorId());
            assertThat(decoded.blockIndex()).isEqualTo(expected.blockIndex());
            assertThat(decoded.kept()).containsExactly(expected.kept());
            assertThat(decoded.committed()).containsExactly(expected.committed());
            assertThat(decoded.endSeconds()).containsExactly(expected.endSeconds());
            assertThat(decoded.owners()).containsExactlyElementsOf(expected.owners());
            if (expected.ownerRefs() == null) {
                assertThat(decoded.ownerRefs()).isNull();
                assertThat(decoded.uniformOwnerRef()).isEqualTo(expected.uniformOwnerRef());
            } else {
                assertThat(decoded.ownerRefs()).containsExactly(expected.ownerRefs());
            }
            assertThat(decoded.size()).isEqualTo(4);
        }

        private static ChunkRecord roundTrip(ChunkRecord block) throws Exception {
            return StateRecordCodec.decodeBlock(StateRecordCodec.blockKey(block.blockIndex()),
                    StateRecordCodec.encodeBlock(block), block.coordinatorId());
        }

        @Test
        void keysAreOnePerBlock() throws Exception {
            assertThat(StateRecordCodec.blockKey(0)).isEqualTo("c0");
            assertThat(StateRecordCodec.blockKey(123_456_789_012L)).isEqualTo("c123456789012");
            assertThat(StateRecordCodec.blockIndexOf("c123456789012")).isEqualTo(123_456_789_012L);
            assertThat(StateRecordCodec.isBlockKey("c7")).isTrue();
            assertThat(StateRecordCodec.isBlockKey("s7:c")).isFalse();
            assertThat(StateRecordCodec.isBlockKey("7:1")).isFalse();
            for (String key : new String[] {"c", "c-1", "c+1", "cx", "c1x", "c99999999999999999999"}) {
                assertThatThrownBy(() -> StateRecordCodec.blockIndexOf(key)).as(key)
                        .isInstanceOf(MalformedRecordException.class);
            }
        }

        @Test
        void roundTripsABlockWhoseOutcomesShareOneOwner() throws Exception {
            ChunkRecord block = new ChunkRecord(TC, 9, KEPT, COMMITTED, SECONDS, List.of("role:with:colons"), null, 1);

            assertSameBlock(roundTrip(block), block);
        }

        @Test
        void roundTripsABlockOfSeveralOwnersAndNone() throws Exception {
            ChunkRecord block = new ChunkRecord(TC, 9, KEPT, COMMITTED, SECONDS, List.of("alice", "b\u00f6b"),
                    new int[] {1, 0, 2, 1}, 0);

            assertSameBlock(roundTrip(block), block);
        }

        @Test
        void roundTripsABlockWithoutOwners() throws Exception {
            ChunkRecord block = new ChunkRecord(TC, 0, KEPT, COMMITTED, new int[] {0, 0, 1, 0}, List.of(), null, 0);

            assertSameBlock(roundTrip(block), block);
        }

        @Test
        void aCommittedBitWithoutItsKeptBitIsIgnored() throws Exception {
            long[] committed = {(1L << 5) | (1L << 6), 0, 0, 1L << 63};
            ChunkRecord block = new ChunkRecord(TC, 9, KEPT, committed, SECONDS, List.of(), null, 0);

            assertThat(roundTrip(block).committed()).containsExactly(COMMITTED);
        }

        @Test
        void malformedBlocksAreRefused() throws Exception {
            byte[] valid = StateRecordCodec.encodeBlock(new ChunkRecord(TC, 9, KEPT, COMMITTED, SECONDS,
                    List.of("alice", "bob"), new int[] {1, 0, 2, 1}, 0));
            List<UnaryOperator<OutcomeBlockRecord.Builder>> corruptions = List.of(
                    record -> record.setCoordinatorId(TC + 1),
                    record -> record.setBlockIndex(10),
                    record -> record.setFormatVersion(StateRecordCodec.BLOCK_FORMAT_VERSION + 1),
                    record -> record.setFormatVersion(StateRecordCodec.BLOCK_FORMAT_VERSION - 1),
                    record -> record.clearKept().addAllKept(List.of(KEPT[0], KEPT[1], KEPT[2])),
                    record -> record.addCommitted(0),
                    record -> record.addEndSecondDeltas(1),
                    record -> record.addOwnerRefs(1),
                    record -> record.setOwnerRefs(0, 3),
                    record -> record.clearOwnerRefs().setUniformOwnerRef(3),
                    record -> record.setEndSecondDeltas(0, -1),
                    record -> record.setEndSecondDeltas(1, Integer.MAX_VALUE));
            for (int i = 0; i < corruptions.size(); i++) {
                byte[] corrupt = corruptions.get(i).apply(OutcomeBlockRecord.parseFrom(valid).toBuilder()).build()
                        .toByteArray();
                assertThatThrownBy(() -> StateRecordCodec.decodeBlock("c9", corrupt, TC)).as("corruption %d", i)
                        .isInstanceOf(MalformedRecordException.class);
            }
            assertThat(StateRecordCodec.decodeBlock("c9", valid, TC).size()).as("the valid record").isEqualTo(4);
        }

        /**
         * Owner references are uint32 on the wire: one of 2^31 or more reads as a negative
         * int. In 45163af that passed the check against the owner count (it is not greater),
         * and the restore then indexed the owners with it.
         */
        @Test
        void anOwnerReferenceOfTwoToThe31OrMoreIsRefused() throws Exception {
            byte[] valid = StateRecordCodec.encodeBlock(new ChunkRecord(TC, 9, KEPT, COMMITTED, SECONDS,
                    List.of("alice", "bob"), new int[] {1, 0, 2, 1}, 0));
            for (int ref : new int[] {Integer.MIN_VALUE, -1}) {
                byte[] perOffset = OutcomeBlockRecord.parseFrom(valid).toBuilder().setOwnerRefs(2, ref).build()
                        .toByteArray();
                byte[] uniform = OutcomeBlockRecord.parseFrom(valid).toBuilder().clearOwnerRefs()
                        .setUniformOwnerRef(ref).build().toByteArray();

                assertThatThrownBy(() -> StateRecordCodec.decodeBlock("c9", perOffset, TC))
                        .as("owner ref %s", Integer.toUnsignedString(ref))
                        .isInstanceOf(MalformedRecordException.class).hasMessageContaining("names owner");
                assertThatThrownBy(() -> StateRecordCodec.decodeBlock("c9", uniform, TC))
                        .as("uniform owner ref %s", Integer.toUnsignedString(ref))
                        .isInstanceOf(MalformedRecordException.class).hasMessageContaining("names owner");
            }
        }

        @Test
        void aBlockOfANewerFormatIsRefusedNamingTheVersions() throws Exception {
            byte[] newer = OutcomeBlockRecord.parseFrom(StateRecordCodec.encodeBlock(new ChunkRecord(TC, 9, KEPT,
                    COMMITTED, SECONDS, List.of(), null, 0))).toBuilder()
                    .setFormatVersion(StateRecordCodec.BLOCK_FORMAT_VERSION + 1).build().toByteArray();

            assertThatThrownBy(() -> StateRecordCodec.decodeBlock("c9", newer, TC))
                    .isInstanceOf(MalformedRecordException.class)
                    .hasMessageContaining("format version " + (StateRecordCodec.BLOCK_FORMAT_VERSION + 1));
        }

        @Test
        void bytesThatAreNoBlockAreRefused() {
            byte[] valid = StateRecordCodec.encodeBlock(new ChunkRecord(TC, 9, KEPT, COMMITTED, SECONDS, List.of(),
                    null, 0));

            assertThatThrownBy(() -> StateRecordCodec.decodeBlock("c9", Arrays.copyOf(valid, valid.length - 3), TC))
                    .isInstanceOf(MalformedRecordException.class);
            assertThatThrownBy(() -> StateRecordCodec.decodeBlock("c9", new byte[] {(byte) 0xff, 1}, TC))
                    .isInstanceOf(MalformedRecordException.class);
        }
    }
}
