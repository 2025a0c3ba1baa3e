package io.github.txnpreserver.bench;

import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.SplittableRandom;
import java.util.TreeMap;
import org.HdrHistogram.Histogram;
import org.HdrHistogram.HistogramIterationValue;

/**
 * Confidence intervals by bootstrap over slices: each group of slices (a side's slices of one
 * figure, across rounds) is resampled with replacement to its own size, the statistic is
 * computed on the resample, and the 2.5th and 97.5th percentiles of {@link #RESAMPLES} such
 * statistics are the 95 % interval. The seed is fixed, so a run's intervals can be computed
 * again from its slices.
 */
final class Bootstrap {

    static final int RESAMPLES = 2000;
    static final long SEED = 20_261_206L;

    private Bootstrap() {
    }

    /** A statistic of one resample: {@code picks[g]} holds the indices drawn from group {@code g}. */
    @FunctionalInterface
    interface Statistic {
        double of(int[][] picks);
    }

    /** A point estimate and its 95 % interval. */
    record Estimate(double value, double low, double high) {

        String interval() {
            return String.format(java.util.Locale.ROOT, "[%.3f, %.3f]", low, high);
        }
    }

    /** The statistic on every slice once (the point estimate) and its bootstrap 95 % interval. */
    static Estimate estimate(int[] groupSizes, Statistic statistic) {
        double[] interval = interval(groupSizes, statistic, RESAMPLES, SEED, 0.95);
        return new Estimate(statistic.of(identity(groupSizes)), interval[0], interval[1]);
    }

    /**
     * The central {@code level} interval of the statistic over {@code resamples} resamples.
     * Resamples whose statistic is not a finite number are left out; with none left, both
     * bounds are NaN.
     */
    static double[] interval(int[] groupSizes, Statistic statistic, int resamples, long seed, double level) {
        for (int size : groupSizes) {
            if (size <= 0) {
                return new double[] {Double.NaN, Double.NaN};
            }
        }
        SplittableRandom random = new SplittableRandom(seed);
        int[][] picks = new int[groupSizes.length][];
        for (int g = 0; g < groupSizes.length; g++) {
            picks[g] = new int[groupSizes[g]];
        }
        double[] values = new double[resamples];
        int n = 0;
        for (int r = 0; r < resamples; r++) {
            for (int g = 0; g < groupSizes.length; g++) {
                for (int i = 0; i < groupSizes[g]; i++) {
                    picks[g][i] = random.nextInt(groupSizes[g]);
                }
            }
            double value = statistic.of(picks);
            if (Double.isFinite(value)) {
                values[n++] = value;
            }
        }
        if (n == 0) {
            return new double[] {Double.NaN, Double.NaN};
        }
        Arrays.sort(values, 0, n);
        double tail = (1 - level) / 2;
        return new double[] {quantile(values, n, tail), quantile(values, n, 1 - tail)};
    }

    /** The {@code q} quantile of the first {@code n} sorted values, interpolated linearly. */
    static double quantile(double[] sorted, int n, double q) {
        double position = q * (n - 1);
        int below = (int) Math.floor(position);
        int above = Math.min(n - 1, below + 1);
        double weight = position - below;
        return sorted[below] * (1 - weight) + sorted[above] * weight;
    }

    /** Every slice once, in order: the picks of the point estimate. */
    static int[][] identity(int[] groupSizes) {
        int[][] picks = new int[groupSizes.length][];
        for (int g = 0; g < groupSizes.length; g++) {
            picks[g] = new int[groupSizes[g]];
            for (int i = 0; i < groupSizes[g]; i++) {
                picks[g][i] = i;
            }
        }
        return picks;
    }

    /**
     * A side's latency slices (HdrHistograms of one configuration) in a form cheap to merge
     * thousands of times: the distinct recorded values (each bucket's highest equivalent value,
     * as {@link Histogram#getValueAtPercentile} answers) and each slice's counts of them.
     */
    static final class SlicedPercentiles {

        private final long[] values;
        private final long[][] counts;

        SlicedPercentiles(List<Histogram> slices) {
            TreeMap<Long, Integer> index = new TreeMap<>();
            List<TreeMap<Long, Long>> perSlice = new ArrayList<>();
            for (Histogram slice : slices) {
                TreeMap<Long, Long> sliceCounts = new TreeMap<>();
                for (HistogramIterationValue v : slice.recordedValues()) {
                    long value = slice.highestEquivalentValue(v.getValueIteratedTo());
                    sliceCounts.merge(value, v.getCountAtValueIteratedTo(), Long::sum);
                    index.put(value, 0);
                }
                perSlice.add(sliceCounts);
            }
            values = new long[index.size()];
            int i = 0;
            for (Long value : index.keySet()) {
                index.put(value, i);
                values[i++] = value;
            }
            counts = new long[slices.size()][values.length];
            for (int s = 0; s < perSlice.size(); s++) {
                for (var entry : perSlice.get(s).entrySet()) {
                    counts[s][index.get(entry.getKey())] += entry.getValue();
                }
            }
        }

        int slices() {
            return counts.length;
        }

        /**
         * The percentile of the picked slices merged (a slice picked twice counts twice), as
         * {@link Histogram#getValueAtPercentile} computes it; NaN if they hold no value.
         */
        double percentile(int[] picks, double percentile) {
            long[] merged = new long[values.length];
            long total = 0;
            for (int pick : picks) {
                long[] slice = counts[pick];
                for (int i = 0; i < slice.length; i++) {
                    merged[i] += slice[i];
                    total += slice[i];
                }
            }
            if (total == 0) {
                return Double.NaN;
            }
            // HdrHistogram 2.2's rank: the percentile nudged down by one ulp, times the count, rounded up.
            double requested = Math.min(Math.max(Math.nextAfter(percentile, Double.NEGATIVE_INFINITY), 0.0), 100.0);
            long rank = Math.max(1, (long) Math.ceil(requested / 100.0 * total));
            long seen = 0;
            for (int i = 0; i < merged.length; i++) {
                seen += merged[i];
                if (seen >= rank) {
                    return values[i];
                }
            }
            return values[values.length - 1];
        }
    }

    /** Plugin/stock ratio of one percentile, slices of each side resampled: groups (stock, plugin). */
    static Estimate percentileRatio(SlicedPercentiles stock, SlicedPercentiles plugin, double percentile) {
        return estimate(new int[] {stock.slices(), plugin.slices()},
                picks -> plugin.percentile(picks[1], percentile) / stock.percentile(picks[0], percentile));
    }

    /** The sum of {@code values} at the picked indices. */
    static double sum(double[] values, int[] picks) {
        double sum = 0;
        for (int pick : picks) {
            sum += values[pick];
        }
        return sum;
    }
}
