package io.github.txnpreserver.preserver.stats;

import static org.assertj.core.api.Assertions.assertThat;

import org.junit.jupiter.api.DisplayName;
import org.junit.jupiter.api.Test;

/** The step-latency histogram the metrics export: Prometheus's cumulative buckets, "le" inclusive. */
@DisplayName("The latency histogram")
class LatencyHistogramTest {

    private static final long MS = 1_000_000L;

    private final LatencyHistogram histogram = new LatencyHistogram();

    @Test
    void aLatencyOnABoundCountsInThatBucketAndOneJustAboveInTheNext() {
        histogram.recordNanos(1 * MS);
        histogram.recordNanos(1 * MS + 1);
        histogram.recordNanos(2 * MS);

        long[] cumulative = histogram.cumulativeCounts();
        assertThat(cumulative[0]).as("le 1 ms").isEqualTo(1);
        assertThat(cumulative[1]).as("le 2 ms").isEqualTo(3);
        assertThat(cumulative[2]).as("le 5 ms").isEqualTo(3);
    }

    @Test
    void zeroIsInTheFirstBucketAndBeyondTheLastBoundOnlyInInf() {
        histogram.recordNanos(0);
        histogram.recordNanos(30_000 * MS + 1);

        long[] cumulative = histogram.cumulativeCounts();
        assertThat(cumulative).hasSize(LatencyHistogram.BOUNDS_MILLIS.length + 1);
        assertThat(cumulative[0]).isEqualTo(1);
        assertThat(cumulative[cumulative.length - 2]).as("le 30 s").isEqualTo(1);
        assertThat(cumulative[cumulative.length - 1]).as("+Inf").isEqualTo(2);
        assertThat(histogram.count()).isEqualTo(2);
    }

    @Test
    void theSumIsInSecondsAtMicrosecondResolution() {
        histogram.recordNanos(1_500_999);
        histogram.recordNanos(2_000_000_000L);

        assertThat(histogram.sumSeconds()).isEqualTo(2.0015);
        assertThat(histogram.count()).isEqualTo(2);
    }

    @Test
    void boundsAreInSecondsAndTheLastIsInfinite() {
        assertThat(LatencyHistogram.upperBoundSeconds(0)).isEqualTo(0.001);
        assertThat(LatencyHistogram.upperBoundSeconds(LatencyHistogram.BOUNDS_MILLIS.length - 1)).isEqualTo(30.0);
        assertThat(LatencyHistogram.upperBoundSeconds(LatencyHistogram.BOUNDS_MILLIS.length))
                .isEqualTo(Double.POSITIVE_INFINITY);
    }
}
