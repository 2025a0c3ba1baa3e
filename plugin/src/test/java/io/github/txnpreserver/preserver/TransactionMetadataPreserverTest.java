package io.github.txnpreserver.preserver;

import static io.github.txnpreserver.testing.Futures.await;
import static io.github.txnpreserver.testing.Futures.failureOf;
import static org.assertj.core.api.Assertions.assertThat;
import static org.awaitility.Awaitility.await;

import io.github.txnpreserver.config.PreserverConfig;
import io.github.txnpreserver.statetopic.StateRecordCodec;
import io.github.txnpreserver.statetopic.proto.TerminatedTxnRecord;
import io.github.txnpreserver.statetopic.proto.TxnOutcome;
import io.github.txnpreserver.testing.CallLog;
import io.github.txnpreserver.testing.InMemoryStateTopic;
import io.github.txnpreserver.testing.MutableClock;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.List;
import java.util.concurrent.Executors;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.ScheduledExecutorService;
import org.apache.pulsar.client.api.transaction.TxnID;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.DisplayName;
import org.junit.jupiter.api.Nested;
import org.junit.jupiter.api.Test;

@DisplayName("The preserver")
class TransactionMetadataPreserverTest {

    private static final long TC = 7;
    private static final long NOW = 1_700_000_000_000L;

    private final CallLog callLog = new CallLog();
    private final InMemoryStateTopic topic = new InMemoryStateTopic(callLog);
    private final MutableClock clock = new MutableClock(NOW);
    private final ScheduledExecutorService executor = Executors.newSingleThreadScheduledExecutor();
    private TransactionMetadataPreserver preserver = newPreserver(2, 100);

    private TransactionMetadataPreserver newPreserver(int perClient, int total) {
        return new TransactionMetadataPreserver(TC, new PreserverConfig(perClient, total, Duration.ofHours(72),
                Duration.ofSeconds(300), Duration.ofSeconds(60)), topic, clock, executor);
    }

    @AfterEach
    void close() {
        executor.shutdownNow();
    }

    private static TxnID txn(long sequence) {
        return new TxnID(TC, sequence);
    }

    /** A transaction as the in-memory topic names it in its call log and liveTransactions(). */
    private static String t(long sequence) {
        return TC + ":" + sequence;
    }

    private static byte[] record(long sequence, String owner, TxnOutcome outcome, long endTime) {
        TerminatedTxnRecord.Builder record = TerminatedTxnRecord.newBuilder()
                .setFormatVersion(StateRecordCodec.FORMAT_VERSION).setTxnidMostBits(TC).setTxnidLeastBits(sequence)
                .setOutcome(outcome).setEndTimeMillis(endTime);
        if (owner != null) {
            record.setOwner(owner);
        }
        return record.build().toByteArray();
    }

    private static byte[] record(long sequence, TxnOutcome outcome, long endTime) {
        return record(sequence, "alice", outcome, endTime);
    }

    /** Runs after every task the preserver's executor has due within {@code millis}. */
    private void letScheduledWorkRun(long millis) throws Exception {
        executor.schedule(() -> { }, millis, TimeUnit.MILLISECONDS).get(5, TimeUnit.SECONDS);
    }

    @Nested
    @DisplayName("preserving")
    class Preserving {

        @Test
        void keepsAnOutcomeOnlyOnceItIsDurable() {
            topic.holdWrites();
            var durable = preserver.preserve(txn(1), Outcome.COMMITTED, "alice");

            assertThat(preserver.find(txn(1))).isNull();
            topic.releaseHeldWrites();
            await(durable);

            assertThat(preserver.find(txn(1))).isEqualTo(new KeptOutcome(txn(1), Outcome.COMMITTED, "alice", NOW));
            assertThat(topic.liveKeys()).containsExactly("s0:alice");
        }

        @Test
        void aFailedWriteKeepsNothingAndReportsTheFailure() {
            topic.failNextWrites(1);

            failureOf(preserver.preserve(txn(1), Outcome.COMMITTED, "alice"));

            assertThat(preserver.find(txn(1))).isNull();
            assertThat(preserver.stats().recordWriteFailures.sum()).isEqualTo(1);
        }

        @Test
        void aClientsNewRecordOverwritesItsOldestOutcomeOneWritePerTransaction() {
            for (long i = 1; i <= 5; i++) {
                await(preserver.preserve(txn(i), Outcome.COMMITTED, "alice"));
            }

            assertThat(preserver.find(txn(3))).isNull();
            assertThat(topic.liveTransactions()).containsExactly(t(4), t(5));
            assertThat(topic.entries()).hasSize(5);
            assertThat(callLog.calls()).noneMatch(call -> call.startsWith("state-delete"));
        }

        @Test
        void aRecordSupersedingOneOfTheSameTransactionOverwritesItInItsSlot() {
            var speculative = preserver.persist(txn(1), Outcome.COMMITTED, "alice", null);
            var decided = preserver.persist(txn(1), Outcome.ABORTED, "alice", speculative);
            preserver.keep(await(decided.durable()));

            assertThat(topic.entries()).extracting(InMemoryStateTopic.Entry::key)
                    .containsExactly("s0:alice", "s0:alice");
            assertThat(topic.liveTransactions()).containsExactly(t(1));
            assertThat(preserver.find(txn(1)).outcome()).isEqualTo(Outcome.ABORTED);
        }

        @Test
        void deletesWhatTheCoordinatorLimitEvicts() {
            preserver = newPreserver(10, 2);
            await(preserver.preserve(txn(1), Outcome.COMMITTED, "alice"));
            await(preserver.preserve(txn(2), Outcome.COMMITTED, "bob"));
            await(preserver.preserve(txn(3), Outcome.COMMITTED, "carol"));

            assertThat(preserver.find(txn(1))).isNull();
            assertThat(topic.liveTransactions()).containsExactly(t(2), t(3));
            assertThat(callLog.calls()).contains("state-delete s0:alice");
        }

        @Test
        void retriesAFailedTombstoneUntilItLands() {
            preserver = newPreserver(10, 2);
            await(preserver.preserve(txn(1), Outcome.COMMITTED, "alice"));
            await(preserver.preserve(txn(2), Outcome.COMMITTED, "bob"));
            topic.failNextDeletes(2);

            await(preserver.preserve(txn(3), Outcome.COMMITTED, "carol"));

            await().atMost(Duration.ofSeconds(5)).until(() -> !topic.liveKeys().contains("s0:alice"));
            assertThat(callLog.count("state-delete failed s0:alice")).isEqualTo(2);
            assertThat(preserver.stats().tombstoneWriteRetries.sum()).isEqualTo(2);
        }

        @Test
        void aRetriedTombstoneNeverDeletesANewerRecordThatTookTheSlot() throws Exception {
            preserver = newPreserver(1, 2);
            await(preserver.preserve(txn(1), Outcome.COMMITTED, "alice"));
            await(preserver.preserve(txn(2), Outcome.COMMITTED, "bob"));
            topic.failNextDeletes(1);
            await(preserver.preserve(txn(3), Outcome.COMMITTED, "carol"));
            assertThat(callLog.count("state-delete failed s0:alice")).isEqualTo(1);

            await(preserver.preserve(txn(4), Outcome.ABORTED, "alice"));
            letScheduledWorkRun(1_000);

            assertThat(topic.liveTransactions()).contains(t(4));
            assertThat(callLog.count("state-delete s0:alice")).isZero();
            assertThat(preserver.find(txn(4)).outcome()).isEqualTo(Outcome.ABORTED);
        }
    }

    @Nested
    @DisplayName("expiry")
    class Expiry {

        @Test
        void dropsExpiredOutcomesFromMemoryAndTheStateTopic() {
            await(preserver.preserve(txn(1), Outcome.COMMITTED, "alice"));
            clock.advance(Duration.ofHours(1));
            await(preserver.preserve(txn(2), Outcome.ABORTED, "bob"));

            clock.advance(Duration.ofHours(71));
            preserver.expire();

            assertThat(preserver.find(txn(1))).isNull();
            assertThat(preserver.find(txn(2))).isNotNull();
            assertThat(topic.liveTransactions()).containsExactly(t(2));
        }
    }

    @Nested
    @DisplayName("restoring")
    class Restoring {

        @Test
        void restoresWhatAnEarlierIncarnationKept() {
            await(preserver.preserve(txn(1), Outcome.COMMITTED, "alice"));
            await(preserver.preserve(txn(2), Outcome.ABORTED, null));

            TransactionMetadataPreserver restored = newPreserver(2, 100);
            await(restored.restore());

            assertThat(restored.find(txn(1))).isEqualTo(new KeptOutcome(txn(1), Outcome.COMMITTED, "alice", NOW));
            assertThat(restored.find(txn(2)).owner()).isNull();
            assertThat(restored.keptCount()).isEqualTo(2);
        }

        @Test
        void appliesTombstonesAndNewerRecordsUnderTheSameKeyInLogOrder() {
            topic.appendRaw("s0:alice", record(1, TxnOutcome.COMMITTED, NOW));
            topic.appendRaw("s0:alice", null);
            topic.appendRaw("s1:alice", record(2, TxnOutcome.ABORTED, NOW));
            topic.appendRaw("s0:bob", record(3, "bob", TxnOutcome.COMMITTED, NOW));
            topic.appendRaw("s0:bob", record(4, "bob", TxnOutcome.ABORTED, NOW));

            await(preserver.restore());

            assertThat(preserver.find(txn(1))).isNull();
            assertThat(preserver.find(txn(2)).outcome()).isEqualTo(Outcome.ABORTED);
            assertThat(preserver.find(txn(3))).isNull();
            assertThat(preserver.find(txn(4)).outcome()).isEqualTo(Outcome.ABORTED);
        }

        @Test
        void skipsAndCountsMalformedRecords() {
            topic.appendRaw("s0:alice", "not a protobuf record".getBytes(StandardCharsets.UTF_8));
            topic.appendRaw("garbage-key", record(2, TxnOutcome.COMMITTED, NOW));
            topic.appendRaw(null, record(3, TxnOutcome.COMMITTED, NOW));
            topic.appendRaw("s1:alice", TerminatedTxnRecord.newBuilder().setFormatVersion(99).setTxnidMostBits(TC)
                    .setTxnidLeastBits(4).setOutcome(TxnOutcome.COMMITTED).build().toByteArray());
            topic.appendRaw("s0:bob", record(6, "alice", TxnOutcome.COMMITTED, NOW));
            topic.appendRaw("s0:carol", TerminatedTxnRecord.newBuilder().setFormatVersion(1).setTxnidMostBits(TC + 1)
                    .setTxnidLeastBits(7).setOutcome(TxnOutcome.COMMITTED).setOwner("carol").build().toByteArray());
            topic.appendRaw("s1:alice", record(8, TxnOutcome.ABORTED, NOW));

            await(preserver.restore());

            assertThat(preserver.stats().malformedRecords.sum()).isEqualTo(6);
            assertThat(preserver.keptCount()).isEqualTo(1);
            assertThat(preserver.find(txn(8)).outcome()).isEqualTo(Outcome.ABORTED);
        }

        @Test
        void deletesExpiredRecordsInsteadOfKeepingThem() {
            topic.appendRaw("s0:alice", record(1, TxnOutcome.COMMITTED, NOW - Duration.ofHours(73).toMillis()));
            topic.appendRaw("s1:alice", record(2, TxnOutcome.COMMITTED, NOW - Duration.ofHours(1).toMillis()));

            await(preserver.restore());

            assertThat(preserver.find(txn(1))).isNull();
            assertThat(preserver.find(txn(2))).isNotNull();
            assertThat(topic.liveTransactions()).containsExactly(t(2));
        }

        @Test
        void keepsAClientsRecordsInTheirSlotsAndContinuesAfterTheNewest() {
            topic.appendRaw("s1:alice", record(1, TxnOutcome.COMMITTED, NOW));
            topic.appendRaw("s0:alice", record(2, TxnOutcome.COMMITTED, NOW));

            await(preserver.restore());
            assertThat(topic.entries()).as("nothing to move").hasSize(2);
            await(preserver.preserve(txn(3), Outcome.COMMITTED, "alice"));

            assertThat(preserver.find(txn(1))).isNull();
            assertThat(preserver.find(txn(2))).isNotNull();
            assertThat(topic.liveKeys()).containsExactlyInAnyOrder("s0:alice", "s1:alice");
            assertThat(topic.liveTransactions()).containsExactly(t(2), t(3));
        }

        @Test
        void movesAClientsNewestRecordsIntoSlotsWhenTheCountChanged() {
            for (long i = 1; i <= 5; i++) {
                topic.appendRaw("s" + (i - 1) + ":alice", record(i, TxnOutcome.COMMITTED, NOW));
            }

            await(preserver.restore());

            assertThat(preserver.keptCount()).isEqualTo(2);
            assertThat(preserver.find(txn(4))).isNotNull();
            assertThat(preserver.find(txn(5))).isNotNull();
            assertThat(topic.liveKeys()).containsExactlyInAnyOrder("s0:alice", "s1:alice");
            assertThat(topic.liveTransactions()).containsExactly(t(4), t(5));

            TransactionMetadataPreserver again = newPreserver(2, 100);
            int entries = topic.entries().size();
            await(again.restore());
            assertThat(again.keptCount()).isEqualTo(2);
            assertThat(topic.entries()).as("moved once only").hasSize(entries);
        }

        @Test
        void movesTheOnePerTransactionRecordsOfVersion01IntoSlots() {
            for (long i = 1; i <= 3; i++) {
                topic.appendRaw(StateRecordCodec.legacyKeyOf(txn(i)), record(i, TxnOutcome.COMMITTED, NOW));
            }
            topic.appendRaw(StateRecordCodec.legacyKeyOf(txn(4)), record(4, null, TxnOutcome.ABORTED, NOW));

            await(preserver.restore());

            assertThat(preserver.find(txn(1))).isNull();
            assertThat(preserver.find(txn(3))).isNotNull();
            assertThat(preserver.find(txn(4)).owner()).isNull();
            assertThat(topic.liveKeys()).containsExactlyInAnyOrder("s0:alice", "s1:alice", "s0");
            assertThat(topic.liveTransactions()).containsExactly(t(2), t(3), t(4));
        }

        @Test
        void appliesTheCoordinatorLimitAndDeletesWhatItNoLongerAllows() {
            preserver = newPreserver(10, 2);
            topic.appendRaw("s0:alice", record(1, TxnOutcome.COMMITTED, NOW));
            topic.appendRaw("s0:bob", record(2, "bob", TxnOutcome.COMMITTED, NOW));
            topic.appendRaw("s0:carol", record(3, "carol", TxnOutcome.COMMITTED, NOW));

            await(preserver.restore());

            assertThat(preserver.keptCount()).isEqualTo(2);
            assertThat(preserver.find(txn(1))).isNull();
            assertThat(topic.liveTransactions()).containsExactly(t(2), t(3));
        }

        @Test
        void readsTheSameFromACompactedTopic() {
            for (long i = 1; i <= 3; i++) {
                await(preserver.preserve(txn(i), Outcome.COMMITTED, "alice"));
            }
            topic.compact();

            TransactionMetadataPreserver restored = newPreserver(2, 100);
            await(restored.restore());

            assertThat(restored.find(txn(1))).isNull();
            assertThat(restored.find(txn(2))).isNotNull();
            assertThat(restored.find(txn(3))).isNotNull();
        }
    }
}
