package io.github.txnpreserver.preserver.kept;

import static org.assertj.core.api.Assertions.assertThat;

import io.github.txnpreserver.preserver.kept.ColdBlocks;
import io.github.txnpreserver.statetopic.RecordPosition;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import org.apache.pulsar.client.api.transaction.TxnID;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.DisplayName;
import org.junit.jupiter.api.Nested;
import org.junit.jupiter.api.Test;

/** The index of the cold tier: the blocks whose outcomes only their records keep. */
@DisplayName("The cold tier's index")
class ColdBlocksTest {

    private final ColdBlocks cold = new ColdBlocks();

    @Test
    void keepsWhereEachBlocksRecordIsAndFreesAPageWithItsLastBlock() {
        cold.put(3, new RecordPosition(7, 11, 2, 5), 4, 100, 200);
        cold.put(300, new RecordPosition(8, 1, -1, 0), 256, 150, 160);

        assertThat(cold.positionOf(3)).isEqualTo(new RecordPosition(7, 11, 2, 5));
        assertThat(cold.positionOf(4)).isNull();
        assertThat(cold.outcomes()).isEqualTo(260);
        assertThat(cold.bytes()).isEqualTo(2 * ColdBlocks.PAGE_BYTES);
        assertThat(cold.lowest()).isEqualTo(3);
        assertThat(cold.minTime()).isEqualTo(100);
        assertThat(cold.expiredThrough(170).toLongArray()).containsExactly(300L);

        assertThat(cold.remove(3)).isEqualTo(4);
        assertThat(cold.bytes()).isEqualTo(ColdBlocks.PAGE_BYTES);
        assertThat(cold.lowest()).isEqualTo(300);
        assertThat(cold.remove(3)).isZero();
    }

    /** The window and the expiry, asked every second, follow removals within a page. */
    @Test
    void theOldestEndTimesFollowTheBlocksThatLeaveAPage() {
        cold.put(10, new RecordPosition(1, 1, -1, 0), 3, 100, 400);
        cold.put(11, new RecordPosition(1, 2, -1, 0), 3, 200, 250);
        cold.put(12, new RecordPosition(1, 3, -1, 0), 3, 300, 350);
        assertThat(cold.minTime()).isEqualTo(100);
        assertThat(cold.expiredThrough(260).toLongArray()).containsExactly(11L);

        cold.remove(10);
        assertThat(cold.minTime()).isEqualTo(200);
        cold.remove(11);
        assertThat(cold.minTime()).isEqualTo(300);
        assertThat(cold.expiredThrough(260).toLongArray()).isEmpty();
        assertThat(cold.expiredThrough(350).toLongArray()).containsExactly(12L);

        cold.put(13, new RecordPosition(1, 4, -1, 0), 3, 50, 60);
        assertThat(cold.minTime()).isEqualTo(50);
        assertThat(cold.expiredThrough(60).toLongArray()).containsExactly(13L);
        cold.put(13, new RecordPosition(1, 5, -1, 0), 3, 500, 600);
        assertThat(cold.minTime()).as("a block put again replaces its times").isEqualTo(300);
    }

    @Test
    void acrossManyPagesTheOldestAndTheExpiredAreExact() {
        for (int block = 0; block < 256 * 40; block++) {
            cold.put(block, new RecordPosition(1, block, -1, 0), 256, 1000 + block, 2000 + block);
        }
        cold.remove(0);
        assertThat(cold.minTime()).isEqualTo(1001);
        assertThat(cold.expiredThrough(1999).toLongArray()).isEmpty();
        assertThat(cold.expiredThrough(2001).toLongArray()).containsExactly(1L);
    }

    @Test
    void walksTheColdBlocksInIndexOrderAcrossPages() {
        cold.put(3, new RecordPosition(1, 1, -1, 0), 1, 10, 10);
        cold.put(5, new RecordPosition(1, 2, -1, 0), 1, 10, 10);
        cold.put(2 * 256 + 7, new RecordPosition(1, 3, -1, 0), 1, 10, 10);

        assertThat(cold.next(-1)).isEqualTo(3);
        assertThat(cold.next(2)).isEqualTo(3);
        assertThat(cold.next(3)).isEqualTo(5);
        assertThat(cold.next(5)).as("past the rest of its page, an empty page, into the next")
                .isEqualTo(2 * 256 + 7);
        assertThat(cold.next(2 * 256)).as("within a later page").isEqualTo(2 * 256 + 7);
        assertThat(cold.next(2 * 256 + 7)).isEqualTo(-1);
        assertThat(cold.indexes().toLongArray()).containsExactly(3L, 5L, 2 * 256 + 7L);
        assertThat(cold.blocks()).isEqualTo(3);

        cold.remove(5);

        assertThat(cold.blocks()).isEqualTo(2);
        assertThat(cold.next(3)).isEqualTo(2 * 256 + 7);
    }

    @Test
    void keepsEachBlocksOwnEndTimesAndMovesItsRecordOnlyIfCold() {
        cold.put(256 + 5, new RecordPosition(1, 1, -1, 0), 2, 100, 150);
        cold.put(256 + 255, new RecordPosition(1, 2, -1, 0), 2, 300, 350);

        assertThat(cold.minTime(256 + 5)).isEqualTo(100);
        assertThat(cold.maxTime(256 + 5)).isEqualTo(150);
        assertThat(cold.minTime(256 + 255)).isEqualTo(300);

        cold.moved(256 + 5, new RecordPosition(2, 9, 1, 3));
        cold.moved(256 + 6, new RecordPosition(2, 10, -1, 0));

        assertThat(cold.positionOf(256 + 5)).isEqualTo(new RecordPosition(2, 9, 1, 3));
        assertThat(cold.positionOf(256 + 255)).isEqualTo(new RecordPosition(1, 2, -1, 0));
        assertThat(cold.contains(256 + 6)).isFalse();
    }

    @Test
    void theOldestEndTimeFollowsABlockThatHeldItButNotTheOldestNewest() {
        cold.put(1, new RecordPosition(1, 1, -1, 0), 1, 100, 500);
        cold.put(2, new RecordPosition(1, 2, -1, 0), 1, 200, 300);
        assertThat(cold.minTime()).isEqualTo(100);

        cold.remove(1);

        assertThat(cold.minTime()).isEqualTo(200);
    }

    @Test
    void forgetsEveryBlockWhenCleared() {
        cold.put(1, new RecordPosition(1, 1, -1, 0), 4, 100, 500);
        cold.put(700, new RecordPosition(1, 2, -1, 0), 4, 200, 300);

        cold.clear();

        assertThat(cold.contains(1)).isFalse();
        assertThat(cold.lowest()).isEqualTo(-1);
        assertThat(cold.blocks()).isZero();
        assertThat(cold.outcomes()).isZero();
        assertThat(cold.bytes()).isZero();
        assertThat(cold.minTime()).isEqualTo(Integer.MAX_VALUE);
    }

    @Test
    void costsAtMostAQuarterOfAByteAnOutcomeForFullBlocks() {
        int blocks = 10_000;
        for (int block = 0; block < blocks; block++) {
            cold.put(block, new RecordPosition(1, block, -1, 0), 256, 1, 2);
        }
        assertThat((double) cold.bytes() / cold.outcomes()).isLessThanOrEqualTo(0.25);
    }
}
