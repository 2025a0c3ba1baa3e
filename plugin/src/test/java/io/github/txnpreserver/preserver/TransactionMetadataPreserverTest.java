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
import java.util.concurrent.Executors;
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

    private static String key(long sequence) {
        return StateRecordCodec.keyOf(txn(sequence));
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
            assertThat(topic.liveKeys()).containsExactly(key(1));
        }

        @Test
        void aFailedWriteKeepsNothingAndReportsTheFailure() {
            topic.failNextWrites(1);

            failureOf(preserver.preserve(txn(1), Outcome.COMMITTED, "alice"));

            assertThat(preserver.find(txn(1))).isNull();
            assertThat(preserver.stats().recordWriteFailures.sum()).isEqualTo(1);
        }

        @Test
        void deletesEvictedOutcomesFromTheStateTopic() {
            for (long i = 1; i <= 3; i++) {
                await(preserver.preserve(txn(i), Outcome.COMMITTED, "alice"));
            }

            assertThat(preserver.find(txn(1))).isNull();
            assertThat(topic.liveKeys()).containsExactly(key(2), key(3));
        }

        @Test
        void retriesAFailedTombstoneUntilItLands() {
            await(preserver.preserve(txn(1), Outcome.COMMITTED, "alice"));
            await(preserver.preserve(txn(2), Outcome.COMMITTED, "alice"));
            topic.failNextDeletes(2);

            await(preserver.preserve(txn(3), Outcome.COMMITTED, "alice"));

            await().atMost(Duration.ofSeconds(5)).until(() -> !topic.liveKeys().contains(key(1)));
            assertThat(callLog.count("state-delete failed " + key(1))).isEqualTo(2);
            assertThat(preserver.stats().tombstoneWriteRetries.sum()).isEqualTo(2);
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
            assertThat(topic.liveKeys()).containsExactly(key(2));
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
        void appliesTombstonesInLogOrder() {
            topic.appendRaw(key(1), record(1, TxnOutcome.COMMITTED, NOW));
            topic.appendRaw(key(1), null);
            topic.appendRaw(key(2), record(2, TxnOutcome.ABORTED, NOW));

            await(preserver.restore());

            assertThat(preserver.find(txn(1))).isNull();
            assertThat(preserver.find(txn(2)).outcome()).isEqualTo(Outcome.ABORTED);
        }

        @Test
        void skipsAndCountsMalformedRecords() {
            topic.appendRaw(key(1), "not a protobuf record".getBytes(StandardCharsets.UTF_8));
            topic.appendRaw("garbage-key", record(2, TxnOutcome.COMMITTED, NOW));
            topic.appendRaw(null, record(3, TxnOutcome.COMMITTED, NOW));
            topic.appendRaw(key(4), TerminatedTxnRecord.newBuilder().setFormatVersion(99).setTxnidMostBits(TC)
                    .setTxnidLeastBits(4).setOutcome(TxnOutcome.COMMITTED).build().toByteArray());
            topic.appendRaw(key(5), record(6, TxnOutcome.COMMITTED, NOW));
            topic.appendRaw(StateRecordCodec.keyOf(new TxnID(TC + 1, 7)), record(7, TxnOutcome.COMMITTED, NOW));
            topic.appendRaw(key(8), record(8, TxnOutcome.ABORTED, NOW));

            await(preserver.restore());

            assertThat(preserver.stats().malformedRecords.sum()).isEqualTo(6);
            assertThat(preserver.keptCount()).isEqualTo(1);
            assertThat(preserver.find(txn(8)).outcome()).isEqualTo(Outcome.ABORTED);
        }

        @Test
        void deletesExpiredRecordsInsteadOfKeepingThem() {
            topic.appendRaw(key(1), record(1, TxnOutcome.COMMITTED, NOW - Duration.ofHours(73).toMillis()));
            topic.appendRaw(key(2), record(2, TxnOutcome.COMMITTED, NOW - Duration.ofHours(1).toMillis()));

            await(preserver.restore());

            assertThat(preserver.find(txn(1))).isNull();
            assertThat(preserver.find(txn(2))).isNotNull();
            await().atMost(Duration.ofSeconds(5)).until(() -> topic.liveKeys().equals(java.util.List.of(key(2))));
        }

        @Test
        void appliesTheCurrentLimitsAndDeletesWhatTheyNoLongerAllow() {
            for (long i = 1; i <= 5; i++) {
                topic.appendRaw(key(i), record(i, TxnOutcome.COMMITTED, NOW));
            }

            await(preserver.restore());

            assertThat(preserver.keptCount()).isEqualTo(2);
            assertThat(preserver.find(txn(4))).isNotNull();
            assertThat(preserver.find(txn(5))).isNotNull();
            await().atMost(Duration.ofSeconds(5)).until(() -> topic.liveKeys().equals(java.util.List.of(key(4),
                    key(5))));
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

        private byte[] record(long sequence, TxnOutcome outcome, long endTime) {
            return TerminatedTxnRecord.newBuilder().setFormatVersion(StateRecordCodec.FORMAT_VERSION)
                    .setTxnidMostBits(TC).setTxnidLeastBits(sequence).setOutcome(outcome).setOwner("alice")
                    .setEndTimeMillis(endTime).build().toByteArray();
        }
    }
}
