package io.github.txnpreserver.preserver;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import org.junit.jupiter.api.DisplayName;
import org.junit.jupiter.api.Test;

/**
 * The broker's bound on kept outcomes: past it, the oldest block that can go cold does,
 * whichever coordinator holds it; once none can, the oldest droppable block is dropped.
 */
@DisplayName("The broker's memory bound")
class OutcomeMemoryBudgetTest {

    /** A coordinator as the budget sees it, counting the drops it is asked for. */
    private static class Member implements OutcomeMemoryBudget.Member {
        final long bytes;
        final Long oldestMillis;
        int asked;

        Member(long bytes, Long oldestMillis) {
            this.bytes = bytes;
            this.oldestMillis = oldestMillis;
        }

        @Override
        public long keptBytes() {
            return bytes;
        }

        @Override
        public Long oldestEvictableMillis() {
            return oldestMillis;
        }

        @Override
        public void evictOldestForMemory() {
            asked++;
        }
    }

    /** A member whose first block to act on goes cold. */
    private static final class GoesCold extends Member {
        GoesCold(long bytes, Long oldestMillis) {
            super(bytes, oldestMillis);
        }

        @Override
        public boolean evictionGoesCold() {
            return true;
        }
    }

    @Test
    void takesAPositiveLimitOnly() {
        assertThat(new OutcomeMemoryBudget(1).limitBytes()).isEqualTo(1);
        assertThatThrownBy(() -> new OutcomeMemoryBudget(0)).isInstanceOf(IllegalArgumentException.class);
    }

    @Test
    void asksNothingWhileTheMembersFitExactly() {
        OutcomeMemoryBudget budget = new OutcomeMemoryBudget(100);
        Member first = new Member(60, 1L);
        Member second = new Member(40, 2L);
        budget.register(first);
        budget.register(second);

        budget.reclaim();

        assertThat(budget.usedBytes()).isEqualTo(100);
        assertThat(first.asked + second.asked).isZero();
    }

    @Test
    void overTheLimitAsksTheMemberWithTheOldestBlockToDropIt() {
        OutcomeMemoryBudget budget = new OutcomeMemoryBudget(100);
        Member newer = new Member(60, 2_000L);
        Member older = new Member(60, 1_000L);
        Member nothingToDrop = new Member(60, null);
        budget.register(newer);
        budget.register(older);
        budget.register(nothingToDrop);

        budget.reclaim();

        assertThat(older.asked).isEqualTo(1);
        assertThat(newer.asked).isZero();
        assertThat(nothingToDrop.asked).isZero();
    }

    @Test
    void aBlockThatGoesColdIsPreferredToAnOlderDropWhicheverMemberHasIt() {
        OutcomeMemoryBudget budget = new OutcomeMemoryBudget(100);
        Member drops = new Member(60, 1_000L);
        Member goesCold = new GoesCold(60, 2_000L);
        budget.register(drops);
        budget.register(goesCold);

        budget.reclaim();

        assertThat(goesCold.asked).as("a member says whether its block goes cold; by default it drops").isEqualTo(1);
        assertThat(drops.asked).isZero();
    }

    @Test
    void aBlockThatGoesColdIsPreferredAlsoWhenItsMemberComesSecond() {
        OutcomeMemoryBudget budget = new OutcomeMemoryBudget(100);
        Member goesCold = new GoesCold(60, 2_000L);
        Member drops = new Member(60, 1_000L);
        budget.register(goesCold);
        budget.register(drops);

        budget.reclaim();

        assertThat(goesCold.asked).isEqualTo(1);
        assertThat(drops.asked).isZero();
    }

    @Test
    void amongBlocksThatGoColdTheOldestGoesFirst() {
        OutcomeMemoryBudget budget = new OutcomeMemoryBudget(100);
        Member newer = new GoesCold(60, 2_000L);
        Member older = new GoesCold(60, 1_000L);
        Member drops = new Member(60, 500L);
        budget.register(newer);
        budget.register(older);
        budget.register(drops);

        budget.reclaim();

        assertThat(older.asked).isEqualTo(1);
        assertThat(newer.asked + drops.asked).isZero();
    }

    @Test
    void aMemberUnregisteredCountsForNothing() {
        OutcomeMemoryBudget budget = new OutcomeMemoryBudget(100);
        Member leaving = new Member(200, 1L);
        budget.register(leaving);

        budget.unregister(leaving);
        budget.reclaim();

        assertThat(budget.usedBytes()).isZero();
        assertThat(leaving.asked).isZero();
    }
}
