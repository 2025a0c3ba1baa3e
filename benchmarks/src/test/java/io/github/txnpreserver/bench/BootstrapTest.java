package io.github.txnpreserver.bench;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.ArrayList;
import java.util.List;
import java.util.Random;
import org.HdrHistogram.Histogram;
import org.junit.jupiter.api.Test;

class BootstrapTest {

    @Test
    void quantileInterpolatesLinearly() {
        double[] sorted = {1, 2, 3, 4, 5};
        assertEquals(1, Bootstrap.quantile(sorted, 5, 0), 1e-12);
        assertEquals(5, Bootstrap.quantile(sorted, 5, 1), 1e-12);
        assertEquals(3, Bootstrap.quantile(sorted, 5, 0.5), 1e-12);
        assertEquals(1.1, Bootstrap.quantile(sorted, 5, 0.025), 1e-12);
    }

    @Test
    void identityPicksEverySliceOnce() {
        assertArrayEquals(new int[][] {{0, 1, 2}, {0}}, Bootstrap.identity(new int[] {3, 1}));
    }

    @Test
    void aConstantStatisticHasAZeroWidthInterval() {
        Bootstrap.Estimate estimate = Bootstrap.estimate(new int[] {4, 4}, picks -> 1.5);
        assertEquals(1.5, estimate.value());
        assertEquals(1.5, estimate.low());
        assertEquals(1.5, estimate.high());
    }

    @Test
    void theIntervalOfAMeanCoversItAndIsReproducible() {
        double[] slices = {10, 12, 9, 11, 10.5, 9.5, 11.5, 10};
        Bootstrap.Statistic mean = picks -> Bootstrap.sum(slices, picks[0]) / picks[0].length;
        Bootstrap.Estimate estimate = Bootstrap.estimate(new int[] {slices.length}, mean);
        assertEquals(10.4375, estimate.value(), 1e-12);
        assertTrue(estimate.low() < estimate.value() && estimate.value() < estimate.high(), estimate.toString());
        assertTrue(estimate.low() >= 9 && estimate.high() <= 12, estimate.toString());
        // The standard error of the mean of 8 slices is about 0.33; the 95 % interval about +-0.65.
        double width = estimate.high() - estimate.low();
        assertTrue(width > 0.8 && width < 1.8, "width " + width);
        assertEquals(estimate, Bootstrap.estimate(new int[] {slices.length}, mean));
    }

    @Test
    void resamplesDrawFromEachGroupToItsOwnSize() {
        int[] seen = new int[2];
        Bootstrap.interval(new int[] {3, 5}, picks -> {
            assertEquals(3, picks[0].length);
            assertEquals(5, picks[1].length);
            for (int pick : picks[0]) {
                assertTrue(pick >= 0 && pick < 3);
            }
            for (int pick : picks[1]) {
                assertTrue(pick >= 0 && pick < 5);
            }
            seen[0]++;
            return 0;
        }, 100, 1, 0.95);
        assertEquals(100, seen[0]);
    }

    @Test
    void nonFiniteResamplesAreLeftOutAndNoGroupGivesNaN() {
        double[] interval = Bootstrap.interval(new int[] {2}, picks -> picks[0][0] == 0 ? Double.NaN : 7.0, 200, 3,
                0.95);
        assertArrayEquals(new double[] {7.0, 7.0}, interval);
        assertTrue(Double.isNaN(Bootstrap.interval(new int[] {0}, picks -> 1, 10, 1, 0.95)[0]));
    }

    @Test
    void slicedPercentilesAnswerAsTheMergedHistogramDoes() {
        Random random = new Random(42);
        List<Histogram> slices = new ArrayList<>();
        Histogram merged = new Histogram(60_000_000L, 3);
        for (int s = 0; s < 6; s++) {
            Histogram slice = new Histogram(60_000_000L, 3);
            for (int i = 0; i < 5_000; i++) {
                slice.recordValue((long) (4_000 + Math.abs(random.nextGaussian()) * 3_000 * (s + 1)));
            }
            slices.add(slice);
            merged.add(slice);
        }
        Bootstrap.SlicedPercentiles sliced = new Bootstrap.SlicedPercentiles(slices);
        int[] all = {0, 1, 2, 3, 4, 5};
        for (double percentile : new double[] {0.1, 50, 90, 99, 99.9, 100}) {
            assertEquals(merged.getValueAtPercentile(percentile), sliced.percentile(all, percentile),
                    "p" + percentile);
        }
        // Counts whose percentile falls between two ranks (2 932 values, p99.9 at rank 2 929.07).
        List<Histogram> odd = new ArrayList<>();
        Histogram oddMerged = new Histogram(60_000_000L, 3);
        for (int s = 0; s < 2; s++) {
            Histogram slice = new Histogram(60_000_000L, 3);
            slice.recordValueWithCount(100, 1_460);
            // The 12 slowest, each in a bucket of its own: ranks 2 921 to 2 932.
            for (int j = s; j < 12; j += 2) {
                slice.recordValue(10_000L * (j + 1));
            }
            odd.add(slice);
            oddMerged.add(slice);
        }
        Bootstrap.SlicedPercentiles oddSliced = new Bootstrap.SlicedPercentiles(odd);
        for (double percentile : new double[] {50, 99, 99.9, 99.99}) {
            assertEquals(oddMerged.getValueAtPercentile(percentile), oddSliced.percentile(new int[] {0, 1}, percentile),
                    "p" + percentile + " of 2 932");
        }
        // A slice picked twice counts twice.
        Histogram twice = new Histogram(60_000_000L, 3);
        twice.add(slices.get(5));
        twice.add(slices.get(5));
        twice.add(slices.get(0));
        assertEquals(twice.getValueAtPercentile(99), sliced.percentile(new int[] {5, 0, 5}, 99));
    }

    @Test
    void aPercentileRatioOfIdenticalSidesIsOneAndItsIntervalHoldsOne() {
        Random random = new Random(7);
        List<Histogram> stock = new ArrayList<>();
        List<Histogram> plugin = new ArrayList<>();
        for (int s = 0; s < 8; s++) {
            Histogram a = new Histogram(60_000_000L, 3);
            Histogram b = new Histogram(60_000_000L, 3);
            for (int i = 0; i < 2_000; i++) {
                long value = 3_000 + (long) (random.nextDouble() * 10_000);
                a.recordValue(value);
                b.recordValue(value);
            }
            stock.add(a);
            plugin.add(b);
        }
        Bootstrap.Estimate ratio = Bootstrap.percentileRatio(new Bootstrap.SlicedPercentiles(stock),
                new Bootstrap.SlicedPercentiles(plugin), 99);
        assertEquals(1.0, ratio.value(), 1e-12);
        assertTrue(ratio.low() <= 1.0 && ratio.high() >= 1.0, ratio.toString());
    }
}
