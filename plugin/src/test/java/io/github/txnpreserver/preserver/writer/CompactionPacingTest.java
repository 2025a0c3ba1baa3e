package io.github.txnpreserver.preserver.writer;

import static io.github.txnpreserver.preserver.writer.CompactionPacing.MIN_THRESHOLD_BYTES;
import static org.assertj.core.api.Assertions.assertThat;

import org.junit.jupiter.api.DisplayName;
import org.junit.jupiter.api.Test;

@DisplayName("The state topic's compaction threshold")
class CompactionPacingTest {

    private static final long MIB = 1L << 20;
    private final CompactionPacing pacing = new CompactionPacing();

    /** The threshold the next check asks for, answered as set; -1 if it asks for none. */
    private long check(long keys) {
        CompactionPacing.Request request = pacing.nextRequest(keys);
        if (request == null) {
            return -1;
        }
        assertThat(pacing.applied(request)).isTrue();
        return request.bytes();
    }

    @Test
    void isNeverBelowTheLeastThreshold() {
        assertThat(CompactionPacing.thresholdFor(0)).isEqualTo(MIN_THRESHOLD_BYTES);
        assertThat(CompactionPacing.thresholdFor(MIN_THRESHOLD_BYTES)).isEqualTo(MIN_THRESHOLD_BYTES);
    }

    @Test
    void isTheNextPowerOfTwoAtOrAboveTheCompactedView() {
        assertThat(CompactionPacing.thresholdFor(16 * MIB + 1)).isEqualTo(32 * MIB);
        assertThat(CompactionPacing.thresholdFor(32 * MIB)).isEqualTo(32 * MIB);
        assertThat(CompactionPacing.thresholdFor(100 * MIB)).isEqualTo(128 * MIB);
    }

    @Test
    void estimatesTheViewAsTheMeanRecordTimesTheKeys() {
        pacing.recordsRead(1_000, 800_000);
        assertThat(pacing.estimatedViewBytes(100_000)).isEqualTo(80_000_000);
        for (int i = 0; i < 10_000; i++) {
            pacing.recordSeen(400);
        }
        assertThat(pacing.estimatedViewBytes(1)).isBetween(400L, 401L);
    }

    @Test
    void isRaisedAsSoonAsTheViewOutgrowsIt() {
        pacing.recordSeen(1_000);
        assertThat(check(10)).isEqualTo(MIN_THRESHOLD_BYTES);
        assertThat(check(16_000)).as("a view of 16 MB: no change").isEqualTo(-1);
        assertThat(check(20_000)).as("a view of 20 MB").isEqualTo(32 * MIB);
        assertThat(check(30_000)).isEqualTo(-1);
        assertThat(check(70_000)).isEqualTo(128 * MIB);
    }

    @Test
    void isLoweredOnlyOnceFourTimesWhatTheViewNeeds() {
        pacing.recordSeen(1_000);
        assertThat(check(100_000)).isEqualTo(128 * MIB);
        assertThat(check(60_000)).as("needs 64 MiB: kept").isEqualTo(-1);
        assertThat(check(34_000)).as("needs 64 MiB: kept").isEqualTo(-1);
        assertThat(check(30_000)).as("needs 32 MiB, a quarter").isEqualTo(32 * MIB);
        assertThat(check(1_000)).as("needs 16 MiB, a half: kept").isEqualTo(-1);
    }

    @Test
    void asksNothingMoreWhileARequestIsInFlight() {
        CompactionPacing.Request first = pacing.nextRequest(1);
        assertThat(first.bytes()).isEqualTo(MIN_THRESHOLD_BYTES);
        assertThat(pacing.nextRequest(1)).isNull();
        assertThat(pacing.applied(first)).isTrue();
        assertThat(pacing.applied()).isEqualTo(MIN_THRESHOLD_BYTES);
    }

    @Test
    void asksAgainAfterAFailureLessAndLessOften() {
        assertThat(pacing.failed(pacing.nextRequest(1))).isTrue();
        assertThat(checksUntilAskedAndFailed()).as("after one failure").isEqualTo(1);
        assertThat(checksUntilAskedAndFailed()).as("after two").isEqualTo(2);
        assertThat(checksUntilAskedAndFailed()).as("after three").isEqualTo(4);
        for (int i = 0; i < 10; i++) {
            checksUntilAskedAndFailed();
        }
        assertThat(checksUntilAskedAndFailed()).as("at most every 33 checks").isEqualTo(33);
        assertThat(pacing.applied(askedAfterChecks(33))).isTrue();
        assertThat(check(1)).as("once set, nothing more to ask").isEqualTo(-1);
    }

    /** Checks until one asks; that request fails. */
    private int checksUntilAskedAndFailed() {
        for (int checks = 1; checks < 100; checks++) {
            CompactionPacing.Request request = pacing.nextRequest(1);
            if (request != null) {
                assertThat(pacing.failed(request)).isTrue();
                return checks;
            }
        }
        throw new AssertionError("never asked");
    }

    private CompactionPacing.Request askedAfterChecks(int checks) {
        for (int i = 1; i < checks; i++) {
            assertThat(pacing.nextRequest(1)).as("check %d", i).isNull();
        }
        return pacing.nextRequest(1);
    }

    @Test
    void asksNeverAgainOnceTheTopicTakesNone() {
        assertThat(pacing.unsupported(pacing.nextRequest(1))).isTrue();
        assertThat(pacing.nextRequest(1)).isNull();
        assertThat(pacing.applied()).isEqualTo(-1);
    }

    @Test
    void asksAfreshOnceTheTopicWasCreatedAgainAndIgnoresAnAnswerForTheOldOne() {
        assertThat(check(1)).isEqualTo(MIN_THRESHOLD_BYTES);
        assertThat(check(1)).isEqualTo(-1);
        pacing.reset();
        CompactionPacing.Request forTheNewTopic = pacing.nextRequest(1);
        assertThat(forTheNewTopic.bytes()).isEqualTo(MIN_THRESHOLD_BYTES);

        CompactionPacing.Request stale = pacing.nextRequest(1);
        assertThat(stale).isNull();
        pacing.reset();
        assertThat(pacing.applied(forTheNewTopic)).as("asked before the last reset").isFalse();
        assertThat(pacing.applied()).isEqualTo(-1);
    }

    @Test
    void ignoresAFailureOrARefusalAnsweredForARequestAskedBeforeAReset() {
        CompactionPacing.Request old = pacing.nextRequest(1);
        pacing.reset();

        assertThat(pacing.failed(old)).isFalse();
        assertThat(pacing.unsupported(old)).isFalse();
        assertThat(check(1)).as("neither backs off nor stops the requests").isEqualTo(MIN_THRESHOLD_BYTES);
    }

    @Test
    void aRestoreThatReadNoRecordLeavesTheMeanRecordSizeAsItWas() {
        pacing.recordSeen(1_000);

        pacing.recordsRead(0, 0);

        assertThat(pacing.estimatedViewBytes(100)).isEqualTo(100_000);
    }
}
