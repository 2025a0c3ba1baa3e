package io.github.txnpreserver.bench;

import java.util.ArrayList;
import java.util.Comparator;
import java.util.List;
import java.util.Locale;

/**
 * When an open-loop slice's slowest commits were intended to start: one stall of the broker
 * (or of the load generator) puts them together in a fraction of a second, a queue that
 * builds spreads them. Printed beside the slice, so that a broker's flight recording or log is
 * read at the moment of the stall, not over the whole slice.
 */
final class SlowCommits implements BrokerDriver.Committed {
    /** Slow commits intended further apart than this belong to different stalls. */
    private static final long GAP_MILLIS = 500;
    private static final int STALLS = 3;

    private record Commit(long intendedWallMillis, long micros) {
    }

    private final List<Commit> commits = new ArrayList<>();

    @Override
    public synchronized void committed(long intendedWallMillis, long micros) {
        commits.add(new Commit(intendedWallMillis, micros));
    }

    /**
     * The commits at or above {@code thresholdMicros} (the slice's p99), grouped into stalls by
     * their intended starts: the largest {@value #STALLS} groups, each with its first intended
     * start, its length, its count and its slowest latency.
     */
    synchronized String describe(long thresholdMicros) {
        List<Commit> slow = commits.stream().filter(commit -> commit.micros() >= thresholdMicros)
                .sorted(Comparator.comparingLong(Commit::intendedWallMillis)).toList();
        if (slow.isEmpty()) {
            return "no commit at or above the p99";
        }
        List<List<Commit>> stalls = new ArrayList<>();
        List<Commit> current = new ArrayList<>();
        for (Commit commit : slow) {
            if (!current.isEmpty()
                    && commit.intendedWallMillis() - current.get(current.size() - 1).intendedWallMillis() > GAP_MILLIS) {
                stalls.add(current);
                current = new ArrayList<>();
            }
            current.add(commit);
        }
        stalls.add(current);
        List<String> parts = new ArrayList<>();
        stalls.stream().sorted(Comparator.comparingInt((List<Commit> stall) -> stall.size()).reversed()).limit(STALLS)
                .forEach(stall -> parts.add(String.format(Locale.ROOT, "%d intended from %s over %d ms (slowest %.1f ms)",
                        stall.size(), WallClock.format(stall.get(0).intendedWallMillis()),
                        stall.get(stall.size() - 1).intendedWallMillis() - stall.get(0).intendedWallMillis(),
                        stall.stream().mapToLong(Commit::micros).max().orElseThrow() / 1000.0)));
        return String.format(Locale.ROOT, "the %d commits at or above the p99 in %d group(s): %s", slow.size(),
                stalls.size(), String.join("; ", parts));
    }
}
