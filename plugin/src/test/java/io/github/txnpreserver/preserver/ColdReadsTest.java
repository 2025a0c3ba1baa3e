package io.github.txnpreserver.preserver;

import static org.assertj.core.api.Assertions.assertThat;

import io.github.txnpreserver.preserver.kept.BlockRecordCodec;
import io.github.txnpreserver.preserver.kept.Outcome;
import io.github.txnpreserver.preserver.kept.OutcomeIndex;
import io.github.txnpreserver.preserver.stats.PreserverStats;
import io.github.txnpreserver.preserver.thread.CoordinatorThread;
import io.github.txnpreserver.preserver.thread.PreserverUnavailableException;
import io.github.txnpreserver.statetopic.RecordPosition;
import io.github.txnpreserver.testing.CallLog;
import io.github.txnpreserver.testing.InMemoryStateTopic;
import io.github.txnpreserver.testing.ManualScheduler;
import it.unimi.dsi.fastutil.longs.Long2ObjectOpenHashMap;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.DisplayName;
import org.junit.jupiter.api.Test;

/**
 * The reads of cold blocks' records, driven directly: the bounds a preserver's tests cannot
 * reach without thousands of cold blocks. The scheduler is never pumped: a read's answer is
 * applied when the test runs what is due.
 */
@DisplayName("Cold reads")
class ColdReadsTest {

    private static final long TC = 9;
    private static final long NOW = 1_700_000_000_000L;

    private final ManualScheduler scheduler = new ManualScheduler(NOW);
    private final InMemoryStateTopic topic = new InMemoryStateTopic(new CallLog());
    private final Long2ObjectOpenHashMap<RecordPosition> positions = new Long2ObjectOpenHashMap<>();
    private final ColdReads coldReads = new ColdReads(TC, topic, new CoordinatorThread(TC, scheduler),
            new PreserverStats(), TransactionMetadataPreserver.COLD_READ_WAIT, positions::get);

    @AfterEach
    void close() {
        scheduler.shutdown();
    }

    /** Writes the records of blocks {@code 0..count-1}, one committed outcome in each, where the cold tier points. */
    private void coldBlocks(int count) {
        OutcomeIndex earlier = new OutcomeIndex(10, 1000, Duration.ofHours(72).toMillis(), changed -> { });
        for (long block = 0; block < count; block++) {
            earlier.decide(256L * block, Outcome.COMMITTED, "alice", NOW);
            earlier.ended(256L * block);
            topic.appendRaw(BlockRecordCodec.key(block),
                    BlockRecordCodec.encode(TC, earlier.recordOf(block), earlier::ownerName));
            List<InMemoryStateTopic.Entry> entries = topic.entries();
            positions.put(block, entries.get(entries.size() - 1).position());
        }
    }

    /** Reads the block's record where the cold tier points, and applies the answer. */
    private ColdReads.Decoded read(long block) {
        CompletableFuture<ColdReads.Decoded> answer = coldReads.read(block, positions.get(block));
        scheduler.runReady();
        assertThat(answer).as("block %d", block).isCompleted();
        return answer.join();
    }

    /**
     * At most {@value ColdReads#MAX_READING} reads in flight and {@value ColdReads#MAX_QUEUED}
     * blocks waiting: a read of one more block is answered "unavailable" at once (the client
     * retries), not queued behind them. A block already waiting is still joined: the bound
     * counts blocks, not askers.
     */
    @Test
    void aReadOfOneBlockMoreThanItReadsAndQueuesIsAnsweredUnavailableAtOnce() {
        topic.holdColdReads();
        int bound = ColdReads.MAX_READING + ColdReads.MAX_QUEUED;
        List<CompletableFuture<ColdReads.Decoded>> accepted = new ArrayList<>();
        for (long block = 0; block < bound; block++) {
            accepted.add(coldReads.read(block, new RecordPosition(1, block, -1, 0)));
        }
        assertThat(accepted).noneMatch(CompletableFuture::isDone);
        assertThat(topic.coldReadCount()).isEqualTo(ColdReads.MAX_READING);

        CompletableFuture<ColdReads.Decoded> refused = coldReads.read(bound, new RecordPosition(1, bound, -1, 0));
        CompletableFuture<ColdReads.Decoded> joined = coldReads.read(bound - 1, new RecordPosition(1, bound - 1, -1, 0));

        assertThat(refused).failsWithin(Duration.ZERO).withThrowableThat()
                .withCauseInstanceOf(PreserverUnavailableException.class);
        assertThat(joined).as("a block already waiting").isNotDone();
        assertThat(topic.coldReadCount()).isEqualTo(ColdReads.MAX_READING);
    }

    /**
     * The last {@value ColdReads#CACHED} blocks read are remembered, a block read again
     * counting as read last: a burst of retries of neighbouring transactions reads each record
     * once. One more block makes room by forgetting the one read longest ago.
     */
    @Test
    void remembersTheLastBlocksItReadAndForgetsTheOneReadLongestAgo() {
        coldBlocks(ColdReads.CACHED + 1);
        for (long block = 0; block < ColdReads.CACHED; block++) {
            assertThat(read(block).block().outcome(0)).isEqualTo(Outcome.COMMITTED);
        }
        assertThat(topic.coldReadCount()).isEqualTo(ColdReads.CACHED);

        assertThat(read(0).block().outcome(0)).isEqualTo(Outcome.COMMITTED);
        assertThat(topic.coldReadCount()).as("block 0 remembered").isEqualTo(ColdReads.CACHED);

        read(ColdReads.CACHED);
        assertThat(topic.coldReadCount()).isEqualTo(ColdReads.CACHED + 1);
        read(0);
        assertThat(topic.coldReadCount()).as("block 0, read again last, still remembered")
                .isEqualTo(ColdReads.CACHED + 1);
        read(1);
        assertThat(topic.coldReadCount()).as("block 1 forgotten").isEqualTo(ColdReads.CACHED + 2);
    }
}
