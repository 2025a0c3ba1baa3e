package io.github.txnpreserver.preserver.kept;

import static org.assertj.core.api.Assertions.assertThat;

import org.junit.jupiter.api.DisplayName;
import org.junit.jupiter.api.Test;

@DisplayName("Blocks kept only for their floor entries")
class FloorOnlyBlocksTest {

    private final FloorOnlyBlocks blocks = new FloorOnlyBlocks();

    @Test
    void countsTheFloorEntriesOfEachBlockPutAgainAsItsNewCount() {
        blocks.put(3, 5);
        blocks.put(7, 2);
        blocks.put(3, 4);

        assertThat(blocks.outcomes()).isEqualTo(6);
        assertThat(blocks.size()).isEqualTo(2);
        assertThat(blocks.bytes()).isEqualTo(2 * 24);

        blocks.remove(3);

        assertThat(blocks.outcomes()).isEqualTo(2);
        assertThat(blocks.contains(3)).isFalse();
        assertThat(blocks.indexes()).containsExactly(7L);
        assertThat(blocks.bytes()).isEqualTo(24);
    }

    @Test
    void theLastFloorEntryLeavingDeletesTheRecord() {
        blocks.put(3, 2);

        assertThat(blocks.removeOne(3)).isFalse();
        assertThat(blocks.outcomes()).isEqualTo(1);
        assertThat(blocks.removeOne(3)).isTrue();
        assertThat(blocks.contains(3)).isFalse();
        assertThat(blocks.outcomes()).isZero();
    }

    @Test
    void anEntryOfABlockNotKeptForItsFloorDeletesNothing() {
        blocks.put(3, 1);

        assertThat(blocks.removeOne(4)).isFalse();
        assertThat(blocks.outcomes()).isEqualTo(1);
    }
}
