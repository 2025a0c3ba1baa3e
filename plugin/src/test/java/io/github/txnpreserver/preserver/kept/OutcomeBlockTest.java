package io.github.txnpreserver.preserver.kept;

import static org.assertj.core.api.Assertions.assertThat;

import org.junit.jupiter.api.DisplayName;
import org.junit.jupiter.api.Nested;
import org.junit.jupiter.api.Test;

@DisplayName("Outcome block")
class OutcomeBlockTest {

    /** Header, fields and index entry, and the three bitmaps (12 words). */
    private static final long EMPTY = 152 + 16 + 8 * 12;
    private static final long NARROW_COLUMN = 16 + 2 * 256;
    private static final long WIDE_COLUMN = 16 + 4 * 256;
    private static final int ALICE = 1;
    private static final int BOB = 2;
    private static final int T = 1_700_000_000;

    @Test
    void theLastSequenceOfABlockIsItsLastOffset() {
        assertThat(OutcomeBlock.lastSequenceOf(0)).isEqualTo(255);
        assertThat(OutcomeBlock.lastSequenceOf(3)).isEqualTo(3 * 256 + 255);
        assertThat(OutcomeBlock.indexOf(OutcomeBlock.lastSequenceOf(3))).isEqualTo(3);
    }

    @Test
    void keepingAnOffsetAgainReplacesItsOutcomeAndCountsItOnce() {
        OutcomeBlock block = new OutcomeBlock(0);
        assertThat(block.set(3, Outcome.ABORTED, T, OwnerIds.NO_OWNER)).isEqualTo(-1);

        assertThat(block.set(3, Outcome.COMMITTED, T, OwnerIds.NO_OWNER))
                .as("the owner it replaced: none").isEqualTo(OwnerIds.NO_OWNER);

        assertThat(block.count()).isEqualTo(1);
        assertThat(block.outcome(3)).isEqualTo(Outcome.COMMITTED);
    }

    @Test
    void droppingAnOutcomeReturnsItsOwnerAndAnEmptyOffsetNone() {
        OutcomeBlock block = new OutcomeBlock(0);
        block.set(0, Outcome.COMMITTED, T, ALICE);
        block.set(1, Outcome.TIMED_OUT, T, ALICE);

        assertThat(block.clear(1)).isEqualTo(ALICE);
        assertThat(block.clear(1)).isEqualTo(-1);
        assertThat(block.clear(200)).isEqualTo(-1);

        assertThat(block.count()).isEqualTo(1);
        assertThat(block.has(1)).isFalse();
        assertThat(block.nextKept(1)).isEqualTo(-1);
    }

    @Test
    void theOldestEndTimeIsRecomputedFromTheOutcomesLeft() {
        OutcomeBlock block = new OutcomeBlock(0);
        block.set(0, Outcome.COMMITTED, T + 50, ALICE);
        block.set(1, Outcome.COMMITTED, T + 40, ALICE);
        block.set(255, Outcome.COMMITTED, T + 60, ALICE);
        assertThat(block.minTime()).isEqualTo(T + 40);

        block.clear(1);
        block.recomputeMinTime();

        assertThat(block.minTime()).as("offset 0 counts").isEqualTo(T + 50);

        block.clear(0);
        block.recomputeMinTime();

        assertThat(block.minTime()).as("the last offset counts").isEqualTo(T + 60);
    }

    @Test
    void theRecomputedOldestEndTimeIsTheOldestOfEveryOutcomeLeft() {
        OutcomeBlock block = new OutcomeBlock(0);
        block.set(0, Outcome.COMMITTED, T + 50, ALICE);
        block.set(1, Outcome.COMMITTED, T + 40, ALICE);
        block.set(2, Outcome.COMMITTED, T + 30, ALICE);

        block.clear(2);
        block.recomputeMinTime();

        assertThat(block.minTime()).isEqualTo(T + 40);
    }

    @Nested
    @DisplayName("End times")
    class EndTimes {

        @Test
        void endsWithinEighteenHoursOfTheFirstTakeTwoBytesEach() {
            OutcomeBlock block = new OutcomeBlock(0);
            assertThat(block.bytes()).isEqualTo(EMPTY);

            block.set(0, Outcome.COMMITTED, T, ALICE);
            block.set(1, Outcome.COMMITTED, T + Character.MAX_VALUE, ALICE);

            assertThat(block.time(1)).isEqualTo(T + Character.MAX_VALUE);
            assertThat(block.bytes()).isEqualTo(EMPTY + NARROW_COLUMN);
        }

        @Test
        void anEndOneSecondFurtherWidensTheColumnAndKeepsEveryTime() {
            OutcomeBlock block = new OutcomeBlock(0);
            block.set(0, Outcome.COMMITTED, T, ALICE);
            block.set(1, Outcome.COMMITTED, T + Character.MAX_VALUE + 1, ALICE);

            assertThat(block.time(0)).isEqualTo(T);
            assertThat(block.time(1)).isEqualTo(T + Character.MAX_VALUE + 1);
            assertThat(block.bytes()).isEqualTo(EMPTY + WIDE_COLUMN);
        }

        @Test
        void anEarlierEndWithinRangeMovesTheOffsetsUp() {
            OutcomeBlock block = new OutcomeBlock(0);
            block.set(0, Outcome.COMMITTED, T, ALICE);
            block.set(1, Outcome.COMMITTED, T + 10, ALICE);

            block.set(2, Outcome.COMMITTED, T + 10 - Character.MAX_VALUE, ALICE);
            block.set(3, Outcome.COMMITTED, T, ALICE);

            assertThat(block.time(0)).isEqualTo(T);
            assertThat(block.time(1)).isEqualTo(T + 10);
            assertThat(block.time(2)).isEqualTo(T + 10 - Character.MAX_VALUE);
            assertThat(block.time(3)).isEqualTo(T);
            assertThat(block.minTime()).isEqualTo(T + 10 - Character.MAX_VALUE);
            assertThat(block.maxTime()).isEqualTo(T + 10);
            assertThat(block.bytes()).as("still two bytes a time").isEqualTo(EMPTY + NARROW_COLUMN);
        }

        @Test
        void anEarlierEndOutOfRangeWidensTheColumn() {
            OutcomeBlock block = new OutcomeBlock(0);
            block.set(0, Outcome.COMMITTED, T, ALICE);
            block.set(1, Outcome.COMMITTED, T + 10, ALICE);

            block.set(2, Outcome.COMMITTED, T + 9 - Character.MAX_VALUE, ALICE);

            assertThat(block.time(0)).isEqualTo(T);
            assertThat(block.time(1)).isEqualTo(T + 10);
            assertThat(block.time(2)).isEqualTo(T + 9 - Character.MAX_VALUE);
            assertThat(block.bytes()).isEqualTo(EMPTY + WIDE_COLUMN);
        }
    }

    @Nested
    @DisplayName("Owners")
    class Owners {

        @Test
        void oneOwnerForTheWholeBlockTakesNoColumn() {
            OutcomeBlock block = new OutcomeBlock(0);
            block.set(0, Outcome.COMMITTED, T, ALICE);
            block.set(1, Outcome.COMMITTED, T, ALICE);

            assertThat(block.owner(1)).isEqualTo(ALICE);
            assertThat(block.bytes()).isEqualTo(EMPTY + NARROW_COLUMN);
        }

        @Test
        void ownersUpToTheSixteenBitLimitTakeTwoBytesEach() {
            OutcomeBlock block = new OutcomeBlock(0);
            block.set(0, Outcome.COMMITTED, T, Character.MAX_VALUE);
            block.set(1, Outcome.COMMITTED, T, ALICE);
            block.set(2, Outcome.COMMITTED, T, Character.MAX_VALUE);

            assertThat(block.owner(0)).isEqualTo(Character.MAX_VALUE);
            assertThat(block.owner(1)).isEqualTo(ALICE);
            assertThat(block.owner(2)).isEqualTo(Character.MAX_VALUE);
            assertThat(block.bytes()).isEqualTo(EMPTY + NARROW_COLUMN + NARROW_COLUMN);

            OutcomeBlock other = new OutcomeBlock(1);
            other.set(0, Outcome.COMMITTED, T, ALICE);
            other.set(1, Outcome.COMMITTED, T, Character.MAX_VALUE);

            assertThat(other.owner(1)).isEqualTo(Character.MAX_VALUE);
            assertThat(other.bytes()).isEqualTo(EMPTY + NARROW_COLUMN + NARROW_COLUMN);
        }

        @Test
        void aSecondOwnerPastTheSixteenBitLimitTakesFourBytesEach() {
            OutcomeBlock block = new OutcomeBlock(0);
            block.set(0, Outcome.COMMITTED, T, ALICE);
            block.set(1, Outcome.COMMITTED, T, Character.MAX_VALUE + 1);

            assertThat(block.owner(0)).isEqualTo(ALICE);
            assertThat(block.owner(1)).isEqualTo(Character.MAX_VALUE + 1);
            assertThat(block.bytes()).isEqualTo(EMPTY + NARROW_COLUMN + WIDE_COLUMN);
        }

        @Test
        void aTwoByteColumnWidensForAnOwnerPastItsLimit() {
            OutcomeBlock block = new OutcomeBlock(0);
            block.set(0, Outcome.COMMITTED, T, ALICE);
            block.set(1, Outcome.COMMITTED, T, BOB);
            block.set(2, Outcome.COMMITTED, T, Character.MAX_VALUE);
            assertThat(block.bytes()).isEqualTo(EMPTY + NARROW_COLUMN + NARROW_COLUMN);

            block.set(3, Outcome.COMMITTED, T, Character.MAX_VALUE + 1);

            assertThat(block.owner(0)).isEqualTo(ALICE);
            assertThat(block.owner(1)).isEqualTo(BOB);
            assertThat(block.owner(2)).isEqualTo(Character.MAX_VALUE);
            assertThat(block.owner(3)).isEqualTo(Character.MAX_VALUE + 1);
            assertThat(block.bytes()).isEqualTo(EMPTY + NARROW_COLUMN + WIDE_COLUMN);
        }

        @Test
        void remappingTwoByteOwnersKeepsTheColumnWhileTheNewIdsFit() {
            OutcomeBlock block = new OutcomeBlock(0);
            block.set(0, Outcome.COMMITTED, T, ALICE);
            block.set(1, Outcome.COMMITTED, T, BOB);

            block.remapOwners(new int[] {0, Character.MAX_VALUE, 7});

            assertThat(block.owner(0)).isEqualTo(Character.MAX_VALUE);
            assertThat(block.owner(1)).isEqualTo(7);
            assertThat(block.bytes()).isEqualTo(EMPTY + NARROW_COLUMN + NARROW_COLUMN);
        }

        @Test
        void remappingTwoByteOwnersPastTheirLimitWidensTheColumn() {
            OutcomeBlock block = new OutcomeBlock(0);
            block.set(0, Outcome.COMMITTED, T, ALICE);
            block.set(1, Outcome.COMMITTED, T, BOB);

            block.remapOwners(new int[] {0, 5, Character.MAX_VALUE + 1});

            assertThat(block.owner(0)).isEqualTo(5);
            assertThat(block.owner(1)).isEqualTo(Character.MAX_VALUE + 1);
            assertThat(block.bytes()).isEqualTo(EMPTY + NARROW_COLUMN + WIDE_COLUMN);
        }
    }
}
