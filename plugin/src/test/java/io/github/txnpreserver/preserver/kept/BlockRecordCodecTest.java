package io.github.txnpreserver.preserver.kept;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import com.google.protobuf.DescriptorProtos;
import com.google.protobuf.Descriptors;
import com.google.protobuf.DynamicMessage;
import com.google.protobuf.UnknownFieldSet;
import io.github.txnpreserver.statetopic.MalformedRecordException;
import io.github.txnpreserver.statetopic.proto.OutcomeBlockRecord;
import io.github.txnpreserver.testing.BlockRecordReading;
import java.util.Arrays;
import java.util.List;
import java.util.Map;
import java.util.Random;
import java.util.function.IntFunction;
import java.util.function.UnaryOperator;
import org.apache.pulsar.client.api.transaction.TxnID;
import org.junit.jupiter.api.DisplayName;
import org.junit.jupiter.api.Nested;
import org.junit.jupiter.api.Test;

@DisplayName("Block records")
class BlockRecordCodecTest {

    private static final long TC = 4;
    private static final int ALICE = 1;
    private static final int BOB = 2;
    private static final IntFunction<String> NAMES = Map.of(ALICE, "alice", BOB, "b\u00f6b")::get;
    /** Offsets 0, 5, 64 and 255, their end seconds, and which are committed. */
    private static final int[] OFFSETS = {0, 5, 64, 255};
    private static final int[] SECONDS = {100_000_000, 100_000_010, 99_999_990, Integer.MAX_VALUE};
    private static final boolean[] COMMITTED = {false, true, false, true};

    /** A block of the four outcomes, owned as given (ids of {@link #NAMES}, 0 for none). */
    private static OutcomeBlock block(long index, int... owners) {
        OutcomeBlock block = new OutcomeBlock(index);
        for (int i = 0; i < OFFSETS.length; i++) {
            block.set(OFFSETS[i], COMMITTED[i] ? Outcome.COMMITTED : Outcome.ABORTED, SECONDS[i], owners[i]);
        }
        return block;
    }

    /** Alice, none, bob, alice: one owner reference per outcome. */
    private static byte[] valid() {
        return BlockRecordCodec.encode(TC, block(9, ALICE, 0, BOB, ALICE), NAMES);
    }

    private static OutcomeBlockRecord decode(String key, byte[] value) throws MalformedRecordException {
        return BlockRecordCodec.decode(key, value, TC, BlockRecordCodec.MAX_BLOCK_INDEX);
    }

    /** Encodes, decodes as the restore does, and reads the block back. */
    private static void assertRoundTrips(OutcomeBlock block) throws Exception {
        byte[] value = BlockRecordCodec.encode(TC, block, NAMES);
        OutcomeBlockRecord record = BlockRecordCodec.decode(BlockRecordCodec.key(block.index), value, TC,
                block.index);
        assertThat(record.getFormatVersion()).isEqualTo(BlockRecordCodec.FORMAT_VERSION);
        assertThat(record.getCoordinatorId()).isEqualTo(TC);
        assertThat(record.getBlockIndex()).isEqualTo(block.index);
        RestoredBlocks restored = new RestoredBlocks();
        restored.put(record, null);
        OutcomeBlock read = restored.blocks().get(block.index);
        assertThat(read.count()).isEqualTo(block.count());
        for (int offset = 0; offset < OutcomeBlock.SIZE; offset++) {
            assertThat(read.has(offset)).as("offset %d kept", offset).isEqualTo(block.has(offset));
            if (block.has(offset)) {
                assertThat(read.outcome(offset)).as("offset %d committed", offset)
                        .isEqualTo(block.outcome(offset));
                assertThat(read.time(offset)).as("offset %d end time", offset).isEqualTo(block.time(offset));
                assertThat(restored.owners().nameOf(read.owner(offset))).as("offset %d owner", offset)
                        .isEqualTo(block.owner(offset) == OwnerIds.NO_OWNER ? null : NAMES.apply(block.owner(offset)));
            }
        }
    }

    /** Changes to {@link #valid()} that break one rule of the format each. */
    private static List<UnaryOperator<OutcomeBlockRecord.Builder>> corruptions() {
        return List.of(
                // bitmap word counts
                record -> {
                    List<Long> words = List.copyOf(record.getKeptList());
                    return record.clearKept().addAllKept(words.subList(0, 3));
                },
                record -> record.addKept(0),
                record -> record.addCommitted(0),
                record -> record.clearCommitted(),
                record -> record.clearKept().clearCommitted(),
                // outcomes and their columns
                record -> record.setKept(1, record.getKept(1) | 2),
                record -> record.addEndSecondDeltas(1),
                record -> record.clearEndSecondDeltas(),
                record -> record.addOwnerRefs(1),
                record -> {
                    List<Integer> refs = List.copyOf(record.getOwnerRefsList());
                    return record.clearOwnerRefs().addAllOwnerRefs(refs.subList(0, 3));
                },
                // owner references out of range
                record -> record.setOwnerRefs(0, 3),
                record -> record.clearOwnerRefs().setUniformOwnerRef(3),
                record -> record.clearOwners(),
                // end times below zero or past the int range
                record -> record.setEndSecondDeltas(0, -1),
                record -> record.setEndSecondDeltas(1, -100_000_011L),
                record -> record.setEndSecondDeltas(0, Integer.MAX_VALUE + 1L),
                record -> record.setEndSecondDeltas(1, Integer.MAX_VALUE),
                record -> record.setEndSecondDeltas(0, Long.MAX_VALUE),
                record -> record.setEndSecondDeltas(0, Long.MIN_VALUE),
                record -> record.setEndSecondDeltas(3, Integer.MAX_VALUE - 99_999_990L + 1),
                // timed-out bitmap: word count, and a bit that is not a kept abort
                record -> record.addAllTimedOut(List.of(1L, 0L, 0L)),
                record -> record.addAllTimedOut(List.of(1L, 0L, 0L, 0L, 0L)),
                record -> record.addAllTimedOut(List.of(1L << 5, 0L, 0L, 0L)),
                record -> record.addAllTimedOut(List.of(1L << 1, 0L, 0L, 0L)));
    }

    /** The length of {@link #valid()} through its end times: every cut shorter than it is malformed. */
    private static int throughEndTimes() throws Exception {
        return OutcomeBlockRecord.parseFrom(valid()).toBuilder().clearOwners().clearOwnerRefs().build()
                .getSerializedSize();
    }

    private static void assertRefused(String key, byte[] value, long maxBlockIndex) {
        assertThatThrownBy(() -> BlockRecordCodec.decode(key, value, TC, maxBlockIndex))
                .as("key %s", key).isInstanceOf(MalformedRecordException.class);
    }

    @Nested
    @DisplayName("keys")
    class Keys {

        @Test
        void areOnePerBlockInDecimalWithoutSignOrLeadingZero() throws Exception {
            assertThat(BlockRecordCodec.key(0)).isEqualTo("c0");
            assertThat(BlockRecordCodec.key(123_456_789_012L)).isEqualTo("c123456789012");
            assertThat(BlockRecordCodec.blockIndexOf("c123456789012")).isEqualTo(123_456_789_012L);
            assertThat(BlockRecordCodec.blockIndexOf("c0")).isZero();
            assertThat(BlockRecordCodec.blockIndexOf(BlockRecordCodec.key(BlockRecordCodec.MAX_BLOCK_INDEX)))
                    .isEqualTo(BlockRecordCodec.MAX_BLOCK_INDEX);
        }

        @Test
        void aSequencesBlockHoldsItAndTheLastBlockHoldsTheHighestSequence() {
            assertThat(BlockRecordCodec.blockOf(0)).isZero();
            assertThat(BlockRecordCodec.blockOf(255)).isZero();
            assertThat(BlockRecordCodec.blockOf(256)).isEqualTo(1);
            assertThat(BlockRecordCodec.blockOf(Long.MAX_VALUE)).isEqualTo(BlockRecordCodec.MAX_BLOCK_INDEX);
            assertThat(BlockRecordCodec.MAX_BLOCK_INDEX).isEqualTo(36_028_797_018_963_967L);
        }

        @Test
        void aliasesOfABlockKeyAreRefused() {
            for (String key : new String[] {"c007", "c00", "c-0", "c+0", "c-1", "c+1", "c 1", "c1 ", " c1", "C1",
                "c", "cx", "c1x", "c0x1", "c1_000", "\u0441" + "1", "c\u0661", "s1", "1",
                "c99999999999999999999"}) {
                assertThatThrownBy(() -> BlockRecordCodec.blockIndexOf(key)).as(key)
                        .isInstanceOf(MalformedRecordException.class);
                assertRefused(key, valid(), BlockRecordCodec.MAX_BLOCK_INDEX);
            }
        }

        @Test
        void anEmptyOrNullKeyIsRefused() {
            assertThatThrownBy(() -> BlockRecordCodec.blockIndexOf("")).isInstanceOf(MalformedRecordException.class);
            assertThatThrownBy(() -> BlockRecordCodec.blockIndexOf(null)).isInstanceOf(MalformedRecordException.class);
            assertRefused("", valid(), BlockRecordCodec.MAX_BLOCK_INDEX);
            assertRefused(null, valid(), BlockRecordCodec.MAX_BLOCK_INDEX);
        }

        @Test
        void aBlockWhoseSequencesOverflowALongIsRefused() throws Exception {
            String key = "c36028797018963968";
            byte[] value = OutcomeBlockRecord.parseFrom(valid()).toBuilder()
                    .setBlockIndex(BlockRecordCodec.MAX_BLOCK_INDEX + 1).build().toByteArray();

            assertThatThrownBy(() -> BlockRecordCodec.blockIndexOf(key)).isInstanceOf(MalformedRecordException.class);
            assertRefused(key, value, Long.MAX_VALUE);
            assertRefused("c" + Long.MAX_VALUE, value, Long.MAX_VALUE);
        }
    }

    /**
     * The timed-out bitmap (field 10) came after 0.6.0 without a new format version: 0.6.0's
     * records have none, and 0.6.0 ignores it (docs/answers.md, "Timeout-aborts").
     */
    @Nested
    @DisplayName("timeout-aborts across versions")
    class TimeoutAbortsAcrossVersions {

        private OutcomeBlock withATimeoutAbort() {
            OutcomeBlock block = block(9, ALICE, 0, BOB, ALICE);
            block.set(64, Outcome.TIMED_OUT, SECONDS[2], BOB);
            return block;
        }

        @Test
        void aBlockWithATimeoutAbortRoundTrips() throws Exception {
            assertRoundTrips(withATimeoutAbort());
        }

        @Test
        void aBlockWithoutOneWritesNoTimedOutBitmapAsZeroPointSixDid() throws Exception {
            OutcomeBlockRecord record = OutcomeBlockRecord.parseFrom(valid());

            assertThat(record.getTimedOutCount()).isZero();
            assertThat(OutcomeBlockRecord.parseFrom(BlockRecordCodec.encode(TC, withATimeoutAbort(), NAMES))
                    .getTimedOutList()).as("offset 64: word 1, bit 0").containsExactly(0L, 1L, 0L, 0L);
        }

        @Test
        void aRecordOfZeroPointSixReadsItsAbortsAsPlainAborts() throws Exception {
            OutcomeBlockRecord record = decode("c9", valid());
            RestoredBlocks restored = new RestoredBlocks();
            restored.put(record, null);
            OutcomeBlock read = restored.blocks().get(9L);

            assertThat(read.outcome(0)).isEqualTo(Outcome.ABORTED);
            assertThat(read.outcome(5)).isEqualTo(Outcome.COMMITTED);
            assertThat(read.outcome(64)).isEqualTo(Outcome.ABORTED);
        }

        /**
         * A downgrade: 0.6.0 parses the record with its schema (fields 1 to 9), so a
         * timeout-abort reads as a kept, uncommitted offset, an abort, and the bitmap is an
         * unknown field it drops when it writes the block again.
         */
        @Test
        void zeroPointSixReadsATimeoutAbortAsAnAbortAndDropsTheBitmap() throws Exception {
            DescriptorProtos.FileDescriptorProto file = OutcomeBlockRecord.getDescriptor().getFile().toProto();
            DescriptorProtos.DescriptorProto.Builder message = file.getMessageType(0).toBuilder();
            for (int i = 0; i < message.getFieldCount(); i++) {
                if (message.getField(i).getNumber() == OutcomeBlockRecord.TIMED_OUT_FIELD_NUMBER) {
                    message.removeField(i);
                }
            }
            Descriptors.Descriptor zeroPointSix = Descriptors.FileDescriptor.buildFrom(
                    file.toBuilder().setMessageType(0, message).build(), new Descriptors.FileDescriptor[0])
                    .getMessageTypes().get(0);

            DynamicMessage read = DynamicMessage.parseFrom(zeroPointSix,
                    BlockRecordCodec.encode(TC, withATimeoutAbort(), NAMES));

            long keptWord1 = (Long) read.getRepeatedField(zeroPointSix.findFieldByName("kept"), 1);
            long committedWord1 = (Long) read.getRepeatedField(zeroPointSix.findFieldByName("committed"), 1);
            assertThat(keptWord1 & 1).as("offset 64 kept").isEqualTo(1);
            assertThat(committedWord1 & 1).as("offset 64 not committed: an abort").isZero();
            assertThat(read.getUnknownFields().hasField(OutcomeBlockRecord.TIMED_OUT_FIELD_NUMBER)).isTrue();

            byte[] rewritten = read.toBuilder().setUnknownFields(UnknownFieldSet.getDefaultInstance()).build()
                    .toByteArray();
            RestoredBlocks restored = new RestoredBlocks();
            restored.put(decode("c9", rewritten), null);
            assertThat(restored.blocks().get(9L).outcome(64)).as("upgraded again").isEqualTo(Outcome.ABORTED);
        }
    }

    @Nested
    @DisplayName("round trips")
    class RoundTrips {

        @Test
        void aBlockWhoseOutcomesShareOneOwner() throws Exception {
            OutcomeBlock block = block(9, ALICE, ALICE, ALICE, ALICE);

            assertRoundTrips(block);
            OutcomeBlockRecord record = OutcomeBlockRecord.parseFrom(BlockRecordCodec.encode(TC, block, NAMES));
            assertThat(record.getOwnerRefsCount()).as("one reference for the block").isZero();
            assertThat(record.getUniformOwnerRef()).isEqualTo(1);
            assertThat(record.getOwnersList()).containsExactly("alice");
        }

        @Test
        void aBlockOfSeveralOwnersAndNone() throws Exception {
            OutcomeBlock block = block(9, ALICE, 0, BOB, ALICE);

            assertRoundTrips(block);
            OutcomeBlockRecord record = OutcomeBlockRecord.parseFrom(BlockRecordCodec.encode(TC, block, NAMES));
            assertThat(record.getOwnersList()).containsExactly("alice", "b\u00f6b");
            assertThat(record.getOwnerRefsList()).containsExactly(1, 0, 2, 1);
        }

        @Test
        void aBlockWithoutOwners() throws Exception {
            OutcomeBlock block = block(0, 0, 0, 0, 0);

            assertRoundTrips(block);
            assertThat(OutcomeBlockRecord.parseFrom(BlockRecordCodec.encode(TC, block, NAMES)).getOwnersCount())
                    .isZero();
        }

        @Test
        void theFirstAndTheLastBlock() throws Exception {
            assertRoundTrips(block(0, ALICE, BOB, 0, BOB));
            assertRoundTrips(block(BlockRecordCodec.MAX_BLOCK_INDEX, BOB, BOB, ALICE, 0));
        }

        @Test
        void endTimesOfZeroAndOfTheHighestSecond() throws Exception {
            OutcomeBlock block = new OutcomeBlock(3);
            block.set(1, Outcome.COMMITTED, Integer.MAX_VALUE, ALICE);
            block.set(2, Outcome.ABORTED, 0, ALICE);
            block.set(3, Outcome.COMMITTED, 0, BOB);

            assertRoundTrips(block);
        }

        @Test
        void aFullBlock() throws Exception {
            OutcomeBlock block = new OutcomeBlock(7);
            for (int offset = 0; offset < OutcomeBlock.SIZE; offset++) {
                block.set(offset, offset % 3 == 0 ? Outcome.COMMITTED : offset % 3 == 1 ? Outcome.TIMED_OUT : Outcome.ABORTED, 100_000 + offset * 7, offset % 5 == 0 ? 0 : 1 + offset % 2);
            }

            assertRoundTrips(block);
        }

        @Test
        void anEmptyBlockIsAValidRecordOfNothing() throws Exception {
            OutcomeBlock empty = new OutcomeBlock(2);

            assertRoundTrips(empty);
        }

        @Test
        void aCommittedBitWithoutItsKeptBitIsIgnored() throws Exception {
            OutcomeBlockRecord record = OutcomeBlockRecord.parseFrom(valid()).toBuilder()
                    .setCommitted(0, (1L << 5) | (1L << 6)).build();

            RestoredBlocks restored = new RestoredBlocks();
            restored.put(decode("c9", record.toByteArray()), null);

            OutcomeBlock read = restored.blocks().get(9);
            assertThat(read.has(6)).isFalse();
            assertThat(read.outcome(6)).isEqualTo(Outcome.ABORTED);
            assertThat(read.outcome(5)).isEqualTo(Outcome.COMMITTED);
            assertThat(read.count()).isEqualTo(4);
        }

        @Test
        void aLaterRecordOfABlockReplacesTheEarlierAndATombstoneDeletesIt() throws Exception {
            RestoredBlocks restored = new RestoredBlocks();
            restored.put(decode("c9", valid()), null);
            OutcomeBlock later = new OutcomeBlock(9);
            later.set(7, Outcome.COMMITTED, 5, BOB);

            restored.put(decode("c9", BlockRecordCodec.encode(TC, later, NAMES)), null);

            assertThat(restored.blocks().get(9).count()).isEqualTo(1);
            assertThat(restored.blocks().get(9).has(7)).isTrue();
            restored.deleted(9);
            assertThat(restored.blocks()).isEmpty();
        }
    }

    @Nested
    @DisplayName("refused records")
    class Refused {

        @Test
        void theValidRecordTheCorruptionsStartFromIsAccepted() throws Exception {
            OutcomeBlockRecord record = decode("c9", valid());

            assertThat(record.getOwnerRefsCount()).isEqualTo(4);
            assertThat(record.getOwnersList()).containsExactly("alice", "b\u00f6b");
        }

        @Test
        void aBlockBeyondTheSequencesTheCoordinatorHasAllocatedIsRefused() throws Exception {
            assertThat(BlockRecordCodec.decode("c9", valid(), TC, 9)).as("its last allowed block")
                    .isEqualTo(decode("c9", valid()));
            assertThatThrownBy(() -> BlockRecordCodec.decode("c9", valid(), TC, 8))
                    .isInstanceOf(MalformedRecordException.class).hasMessageContaining("past the sequences");
            assertRefused("c0", BlockRecordCodec.encode(TC, block(0, 0, 0, 0, 0), NAMES), -1);
        }

        @Test
        void anotherCoordinatorsBlockIsRefused() {
            assertThatThrownBy(() -> BlockRecordCodec.decode("c9", valid(), TC + 1, BlockRecordCodec.MAX_BLOCK_INDEX))
                    .isInstanceOf(MalformedRecordException.class).hasMessageContaining("of coordinator " + TC);
        }

        @Test
        void aRecordOfAnotherBlockThanItsKeyIsRefused() {
            assertThatThrownBy(() -> decode("c10", valid())).isInstanceOf(MalformedRecordException.class)
                    .hasMessageContaining("is block 9");
            assertThatThrownBy(() -> decode("c0", valid())).isInstanceOf(MalformedRecordException.class);
        }

        @Test
        void aRecordOfAnotherFormatVersionIsRefusedNamingTheVersions() throws Exception {
            for (int version : new int[] {0, 1, BlockRecordCodec.FORMAT_VERSION + 1, -1}) {
                byte[] value = OutcomeBlockRecord.parseFrom(valid()).toBuilder().setFormatVersion(version).build()
                        .toByteArray();

                assertThatThrownBy(() -> decode("c9", value)).as("version %s", Integer.toUnsignedString(version))
                        .isInstanceOf(MalformedRecordException.class)
                        .hasMessageContaining("format version " + version)
                        .hasMessageContaining("reads version " + BlockRecordCodec.FORMAT_VERSION);
            }
        }

        @Test
        void malformedBlocksAreRefused() throws Exception {
            List<UnaryOperator<OutcomeBlockRecord.Builder>> corruptions = corruptions();
            for (int i = 0; i < corruptions.size(); i++) {
                byte[] corrupt = corruptions.get(i).apply(OutcomeBlockRecord.parseFrom(valid()).toBuilder()).build()
                        .toByteArray();

                assertThatThrownBy(() -> decode("c9", corrupt)).as("corruption %d", i)
                        .isInstanceOf(MalformedRecordException.class);
            }
        }

        /**
         * Owner references are uint32 on the wire: one of 2^31 or more reads as a negative
         * int. In 45163af that passed the check against the owner count (it is not greater),
         * and the restore then indexed the owners with it.
         */
        @Test
        void anOwnerReferenceOfTwoToThe31OrMoreIsRefused() throws Exception {
            for (int ref : new int[] {Integer.MIN_VALUE, Integer.MIN_VALUE + 1, -1}) {
                byte[] perOffset = OutcomeBlockRecord.parseFrom(valid()).toBuilder().setOwnerRefs(2, ref).build()
                        .toByteArray();
                byte[] uniform = OutcomeBlockRecord.parseFrom(valid()).toBuilder().clearOwnerRefs()
                        .setUniformOwnerRef(ref).build().toByteArray();

                assertThatThrownBy(() -> decode("c9", perOffset)).as("owner ref %s", Integer.toUnsignedString(ref))
                        .isInstanceOf(MalformedRecordException.class).hasMessageContaining("names owner");
                assertThatThrownBy(() -> decode("c9", uniform))
                        .as("uniform owner ref %s", Integer.toUnsignedString(ref))
                        .isInstanceOf(MalformedRecordException.class).hasMessageContaining("names owner");
            }
        }

        @Test
        void truncatedAndRandomBytesAreRefused() throws Exception {
            byte[] valid = valid();
            // Every cut before the end times are complete, and every cut into the owner references.
            int throughEndTimes = throughEndTimes();
            int intoOwnerRefs = valid.length - OutcomeBlockRecord.newBuilder()
                    .addAllOwnerRefs(OutcomeBlockRecord.parseFrom(valid).getOwnerRefsList()).build().getSerializedSize();
            for (int length = 1; length < valid.length; length++) {
                if (length >= throughEndTimes && length <= intoOwnerRefs) {
                    continue;
                }
                byte[] truncated = Arrays.copyOf(valid, length);
                assertThatThrownBy(() -> decode("c9", truncated)).as("first %d bytes", length)
                        .isInstanceOf(MalformedRecordException.class);
            }
            assertThatThrownBy(() -> decode("c9", new byte[] {(byte) 0xff, 1}))
                    .isInstanceOf(MalformedRecordException.class);
            assertThatThrownBy(() -> decode("c9", new byte[0])).as("no bytes: version 0")
                    .isInstanceOf(MalformedRecordException.class);
            Random random = new Random(42);
            for (int i = 0; i < 2000; i++) {
                byte[] bytes = new byte[1 + random.nextInt(200)];
                random.nextBytes(bytes);
                assertThatThrownBy(() -> decode("c9", bytes)).as("random bytes %d", i)
                        .isInstanceOf(MalformedRecordException.class);
            }
        }
    }

    /**
     * What the codec writes, read by the tests' own reading of the format
     * ({@link BlockRecordReading}, from the .proto and DESIGN.md): both agree on every field,
     * and the reading refuses every record the codec refuses. The tests that read the plugin's
     * records through it, in memory and on real brokers, check them against the format, not
     * against the codec that wrote them.
     */
    @Nested
    @DisplayName("read from the format's specification")
    class ReadFromTheSpecification {

        private BlockRecordReading.RecordedOutcome recorded(int offset, BlockRecordReading.Ending ending, long seconds,
                                                            String owner) {
            return new BlockRecordReading.RecordedOutcome(new TxnID(TC, 9 * 256 + offset), ending,
                    BlockRecordReading.EPOCH_2020_SECONDS + seconds, owner);
        }

        @Test
        void everyOutcomeTheCodecWritesReadsAsWritten() throws Exception {
            OutcomeBlock block = block(9, ALICE, 0, BOB, ALICE);
            block.set(7, Outcome.TIMED_OUT, 100_000_005, BOB);

            BlockRecordReading.Block read = BlockRecordReading.read("c9", BlockRecordCodec.encode(TC, block, NAMES));

            assertThat(read.coordinatorId()).isEqualTo(TC);
            assertThat(read.blockIndex()).isEqualTo(9);
            assertThat(read.outcomes()).containsExactly(
                    recorded(0, BlockRecordReading.Ending.ABORTED, 100_000_000, "alice"),
                    recorded(5, BlockRecordReading.Ending.COMMITTED, 100_000_010, null),
                    recorded(7, BlockRecordReading.Ending.TIMED_OUT, 100_000_005, "b\u00f6b"),
                    recorded(64, BlockRecordReading.Ending.ABORTED, 99_999_990, "b\u00f6b"),
                    recorded(255, BlockRecordReading.Ending.COMMITTED, Integer.MAX_VALUE, "alice"));
        }

        @Test
        void aBlockOfOneOwnerAndAnEmptyBlockReadAsWritten() throws Exception {
            BlockRecordReading.Block uniform = BlockRecordReading.read("c9",
                    BlockRecordCodec.encode(TC, block(9, BOB, BOB, BOB, BOB), NAMES));
            BlockRecordReading.Block empty = BlockRecordReading.read("c2",
                    BlockRecordCodec.encode(TC, new OutcomeBlock(2), NAMES));

            assertThat(uniform.outcomes()).extracting(BlockRecordReading.RecordedOutcome::owner)
                    .containsExactly("b\u00f6b", "b\u00f6b", "b\u00f6b", "b\u00f6b");
            assertThat(empty.blockIndex()).isEqualTo(2);
            assertThat(empty.outcomes()).isEmpty();
        }

        @Test
        void everyRecordTheCodecRefusesIsRefused() throws Exception {
            List<UnaryOperator<OutcomeBlockRecord.Builder>> corruptions = corruptions();
            for (int i = 0; i < corruptions.size(); i++) {
                byte[] corrupt = corruptions.get(i).apply(OutcomeBlockRecord.parseFrom(valid()).toBuilder()).build()
                        .toByteArray();

                assertThatThrownBy(() -> BlockRecordReading.read("c9", corrupt)).as("corruption %d", i)
                        .isInstanceOf(BlockRecordReading.NotABlockRecord.class);
            }
            for (int ref : new int[] {Integer.MIN_VALUE, -1}) {
                byte[] uniform = OutcomeBlockRecord.parseFrom(valid()).toBuilder().clearOwnerRefs()
                        .setUniformOwnerRef(ref).build().toByteArray();
                assertThatThrownBy(() -> BlockRecordReading.read("c9", uniform))
                        .as("uniform owner ref %s", Integer.toUnsignedString(ref))
                        .isInstanceOf(BlockRecordReading.NotABlockRecord.class);
            }
            for (int version : new int[] {0, 1, 3}) {
                byte[] value = OutcomeBlockRecord.parseFrom(valid()).toBuilder().setFormatVersion(version).build()
                        .toByteArray();
                assertThatThrownBy(() -> BlockRecordReading.read("c9", value)).as("version %d", version)
                        .isInstanceOf(BlockRecordReading.NotABlockRecord.class);
            }
            for (String key : new String[] {"c10", "c09", "c+9", "c-9", "d9", "c", "c99999999999999999999", "C9", " c9",
                    "c9 ", "c\u0669", "\u0441" + "9", "c009", "c00", null}) {
                assertThatThrownBy(() -> BlockRecordReading.read(key, valid())).as("key %s", key)
                        .isInstanceOf(BlockRecordReading.NotABlockRecord.class);
            }
            assertThatThrownBy(() -> BlockRecordReading.read("c36028797018963968",
                    BlockRecordCodec.encode(TC, new OutcomeBlock(1L << 55), NAMES)))
                    .as("a block whose sequences pass a long").isInstanceOf(BlockRecordReading.NotABlockRecord.class);
            byte[] valid = valid();
            int throughEndTimes = throughEndTimes();
            for (int length = 0; length < throughEndTimes; length++) {
                byte[] truncated = Arrays.copyOf(valid, length);
                assertThatThrownBy(() -> BlockRecordReading.read("c9", truncated)).as("first %d bytes", length)
                        .isInstanceOf(BlockRecordReading.NotABlockRecord.class);
            }
            Random random = new Random(42);
            for (int i = 0; i < 2000; i++) {
                byte[] bytes = new byte[1 + random.nextInt(200)];
                random.nextBytes(bytes);
                assertThatThrownBy(() -> BlockRecordReading.read("c9", bytes)).as("random bytes %d", i)
                        .isInstanceOf(BlockRecordReading.NotABlockRecord.class);
            }
        }

    }
}
