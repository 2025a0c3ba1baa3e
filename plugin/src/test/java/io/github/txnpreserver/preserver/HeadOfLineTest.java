package io.github.txnpreserver.preserver;

import static org.assertj.core.api.Assertions.assertThat;

import io.github.txnpreserver.config.PreserverConfig;
import io.github.txnpreserver.preserver.kept.Outcome;
import io.github.txnpreserver.testing.CallLog;
import io.github.txnpreserver.testing.InMemoryStateTopic;
import io.github.txnpreserver.testing.ManualScheduler;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import org.apache.pulsar.client.api.transaction.TxnID;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.DisplayName;
import org.junit.jupiter.api.Test;

/**
 * Review of 22cce46, finding 6, one level up from {@link DurabilityQueueTest}: the whole
 * preserver over a state topic that refuses every write of block 0, on a scheduler that is
 * never pumped (every task runs on the test's thread when the test steps time).
 */
@DisplayName("A block whose writes always fail")
class HeadOfLineTest {

    private static final long TC = 7;
    private static final long NOW = 1_700_000_000_000L;
    private static final Duration GROUP = TransactionMetadataPreserver.GROUP_COMMIT_INTERVAL;
    private static final PreserverConfig CONFIG = new PreserverConfig(10, 1000, Duration.ofHours(72),
            Duration.ofSeconds(300), Duration.ofSeconds(60));

    private final ManualScheduler scheduler = new ManualScheduler(NOW);
    private final InMemoryStateTopic topic = new InMemoryStateTopic(new CallLog());
    /** When each write of block 0 was refused (monotonic nanos). */
    private final List<Long> blockZeroRefused = new ArrayList<>();
    /** When each write of block 1 landed (monotonic nanos). */
    private final List<Long> blockOneLanded = new ArrayList<>();
    private final List<Long> released = new ArrayList<>();
    private final TransactionMetadataPreserver preserver = new TransactionMetadataPreserver(TC, CONFIG,
            topic, scheduler, new OutcomeMemoryBudget(CONFIG.maxMemoryBytes()), GROUP);

    HeadOfLineTest() {
        // As a broker that keeps refusing block 0's key.
        topic.refuseWritesOf("c0");
        topic.onWriteAnswered((key, landed) -> {
            if (key.equals("c0") && !landed) {
                blockZeroRefused.add(scheduler.nanoTime());
            } else if (key.equals("c1") && landed) {
                blockOneLanded.add(scheduler.nanoTime());
            }
        });
    }

    @AfterEach
    void close() {
        scheduler.shutdown();
    }

    private static TxnID txn(long sequence) {
        return new TxnID(TC, sequence);
    }

    /** An end as the commit chain drives it: decided, terminal entry durable, the log's release waiting for the record. */
    private void end(long sequence) {
        preserver.decide(txn(sequence), Outcome.COMMITTED, "alice");
        preserver.ended(txn(sequence));
        preserver.afterOutcomeDurable(sequence, () -> released.add(sequence));
        scheduler.runReady();
    }

    /**
     * On 22cce46 one durability watermark stood for all blocks: with block 0 refused at every
     * write, no flush landed whole, the watermark never moved, and the release of block 1's
     * ended transactions (their log entries) waited with block 0's, until the bound of
     * waiting ends was reached and every terminal step was refused; the flush's backoff, up
     * to 5 s, delayed block 1's writes too. Now block 1's end is released as soon as its own
     * record lands, within the group interval of its end, whatever block 0's backoff.
     *
     * <p>At 0f69d69 the queue kept blocks apart, but the writer did not: the flush it had
     * scheduled for block 0's next attempt (up to 5 s away) made {@code requestFlush}
     * return for block 1's change, so block 1 was written only at block 0's next attempt,
     * and its end released seconds late.
     */
    @Test
    void aBlockWhoseWritesAlwaysFailHoldsBackOnlyItsOwnEnds() {
        CompletableFuture<Void> restored = preserver.startRestore(() -> Long.MAX_VALUE);
        scheduler.runReady();
        assertThat(restored).isCompleted();
        end(1);
        // Block 0 is refused again and again: its backoff grows to its 5 s bound.
        scheduler.advance(Duration.ofSeconds(20));
        assertThat(blockZeroRefused).hasSizeGreaterThanOrEqualTo(7);
        long lastGap = blockZeroRefused.get(blockZeroRefused.size() - 1)
                - blockZeroRefused.get(blockZeroRefused.size() - 2);
        assertThat(Duration.ofNanos(lastGap)).as("block 0 backs off 5 s").isGreaterThanOrEqualTo(Duration.ofSeconds(5));
        // The next end comes once the group flush after block 0's last refusal has run, well
        // before block 0's next attempt.
        while (scheduler.nanoTime() < blockZeroRefused.get(blockZeroRefused.size() - 1) + GROUP.toNanos()
                + Duration.ofMillis(100).toNanos()) {
            scheduler.advance(Duration.ofMillis(100));
        }
        long endedAt = scheduler.nanoTime();
        int refusedBefore = blockZeroRefused.size();

        end(300);
        scheduler.advance(GROUP);

        assertThat(blockOneLanded).as("block 1's record landed").hasSize(1);
        assertThat(Duration.ofNanos(blockOneLanded.get(0) - endedAt)).as("within the group interval of its end,"
                + " not at block 0's next attempt").isLessThanOrEqualTo(GROUP);
        assertThat(blockZeroRefused).as("block 0 is still backing off").hasSize(refusedBefore);
        assertThat(released).as("block 1's end is released, block 0's is not").containsExactly(300L);
        assertThat(topic.newestOutcomeOf(txn(300))).isEqualTo(Outcome.COMMITTED);
        assertThat(topic.newestOutcomeOf(txn(1))).isNull();

        scheduler.advance(Duration.ofSeconds(30));
        assertThat(released).as("block 0's end waits for its own record, for ever").containsExactly(300L);
        assertThat(blockZeroRefused.size()).isGreaterThan(refusedBefore);
    }
}
