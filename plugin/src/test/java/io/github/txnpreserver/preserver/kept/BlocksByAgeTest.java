package io.github.txnpreserver.preserver.kept;

import static org.assertj.core.api.Assertions.assertThat;

import java.util.ArrayList;
import java.util.List;
import org.junit.jupiter.api.DisplayName;
import org.junit.jupiter.api.Test;

@DisplayName("Blocks by age")
class BlocksByAgeTest {

    private final BlocksByAge byAge = new BlocksByAge();
    private final OutcomeBlock a = new OutcomeBlock(1);
    private final OutcomeBlock b = new OutcomeBlock(2);
    private final OutcomeBlock c = new OutcomeBlock(3);

    private List<Long> oldestFirst() {
        List<Long> order = new ArrayList<>();
        for (OutcomeBlock block = byAge.oldest(); block != null; block = block.newer) {
            order.add(block.index);
        }
        List<Long> backwards = new ArrayList<>();
        for (OutcomeBlock block = byAge.newest(); block != null; block = block.older) {
            backwards.add(0, block.index);
        }
        assertThat(backwards).as("linked both ways").isEqualTo(order);
        return order;
    }

    @Test
    void aWrittenBlockBecomesTheNewest() {
        byAge.linkNewest(a);
        byAge.linkNewest(b);
        byAge.linkNewest(c);

        byAge.touch(a);
        assertThat(oldestFirst()).containsExactly(2L, 3L, 1L);

        byAge.touch(c);
        assertThat(oldestFirst()).containsExactly(2L, 1L, 3L);

        byAge.touch(c);
        assertThat(oldestFirst()).as("already the newest").containsExactly(2L, 1L, 3L);
    }

    @Test
    void aRestoredBlockIsOlderThanAnyWritten() {
        byAge.linkOldest(a);
        byAge.linkNewest(b);
        byAge.linkOldest(c);

        assertThat(oldestFirst()).containsExactly(3L, 1L, 2L);

        byAge.unlink(a);
        assertThat(oldestFirst()).containsExactly(3L, 2L);
        byAge.unlink(c);
        byAge.unlink(b);
        assertThat(oldestFirst()).isEmpty();
        assertThat(byAge.newest()).isNull();
    }
}
