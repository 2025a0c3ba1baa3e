package io.github.txnpreserver.bench;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import java.util.Locale;

/**
 * The share of this machine's CPU time its hypervisor gave to others ("steal", from the first
 * line of {@code /proc/stat}), printed beside each slice: on a shared host it reached a third
 * of the CPU for half an hour, and every latency figure of both sides moved with it (p50s of
 * 30 to 75 ms at half load), which the slices' alternation spreads over both sides but the
 * figures alone do not show.
 */
final class HostSteal {

    private static final Path STAT = Path.of("/proc/stat");

    /** Jiffies of steal and in total, summed over the CPUs; null where the file is not there. */
    record Sample(long steal, long total) {
    }

    private HostSteal() {
    }

    static Sample now() {
        try {
            List<String> lines = Files.readAllLines(STAT);
            String[] fields = lines.get(0).trim().split("\\s+");
            // cpu user nice system idle iowait irq softirq steal [guest guest_nice]: guest time
            // is already counted in user and nice.
            long total = 0;
            for (int i = 1; i < Math.min(fields.length, 9); i++) {
                total += Long.parseLong(fields[i]);
            }
            return fields.length > 8 ? new Sample(Long.parseLong(fields[8]), total) : null;
        } catch (IOException | RuntimeException e) {
            return null;
        }
    }

    /** "host CPU steal 3.1 %" from {@code from} to {@code to}, or "host CPU steal unknown". */
    static String between(Sample from, Sample to) {
        if (from == null || to == null || to.total() <= from.total()) {
            return "host CPU steal unknown";
        }
        return String.format(Locale.ROOT, "host CPU steal %.1f %%",
                100.0 * (to.steal() - from.steal()) / (to.total() - from.total()));
    }
}
