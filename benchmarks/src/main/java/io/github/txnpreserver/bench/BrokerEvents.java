package io.github.txnpreserver.bench;

import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.DirectoryStream;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.OffsetDateTime;
import java.time.format.DateTimeFormatter;
import java.time.format.DateTimeParseException;
import java.util.List;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

/**
 * What a standalone broker's own logs say happened in an interval, besides the load: its
 * bookie's write-cache flushes, its compactions of system topics, ledgers rolled over, and its
 * collector's pauses.
 *
 * <p>Why: an open-loop slice lasts a few seconds, and a standalone bookie flushes its write
 * cache every 10 to 20 s under this load (the cache written to the entry log and its index on
 * the machine's two cores), and the broker compacts its transaction buffers' snapshot topic
 * every minute. Whether a slice's tail is the plugin's or such an event that happened to fall
 * into one side's slice can only be told by asking when each happened. Read from the files
 * after the slice; a line that does not parse is not counted.
 */
final class BrokerEvents {

    /** {@code 2026-12-06T13:53:17,206+0000} at the start of a broker log line. */
    private static final DateTimeFormatter LOG_TIME = DateTimeFormatter.ofPattern("yyyy-MM-dd'T'HH:mm:ss,SSSZ");
    /** {@code [2026-12-06T13:52:06.441+0000]} at the start of a GC log line. */
    private static final DateTimeFormatter GC_TIME = DateTimeFormatter.ofPattern("yyyy-MM-dd'T'HH:mm:ss.SSSZ");
    private static final Pattern PAUSE = Pattern.compile("Pause .* ([0-9.]+)ms$");

    /**
     * Counts in one interval: bookie write-cache flushes, compactions begun (of stock's topics and
     * of the plugin's state topics apart), ledger rollovers, GC pauses and their total and longest.
     */
    record Counts(int bookieFlushes, int compactions, int stateTopicCompactions, int ledgerRolls, int gcPauses,
                  double gcPauseMillis, double longestGcPauseMillis) {

        /**
         * Neither a flush nor a compaction of one of stock's topics: the slice measured the
         * broker's own work, its GC, and the plugin's state topic's compactions, which are
         * the plugin's cost.
         */
        boolean quiet() {
            return bookieFlushes == 0 && compactions == 0;
        }

        String describe() {
            return String.format(java.util.Locale.ROOT, "%d bookie write-cache flush(es), %d compaction(s)"
                            + " (%d of the state topic), %d ledger roll(s), %d GC pause(s) of %.1f ms (longest %.1f)",
                    bookieFlushes, compactions + stateTopicCompactions, stateTopicCompactions, ledgerRolls, gcPauses,
                    gcPauseMillis, longestGcPauseMillis);
        }
    }

    private BrokerEvents() {
    }

    /**
     * A flush or a compaction is logged when it begins, and it loads the machine for a while
     * after: one that began up to this long before an interval counts as in it.
     */
    static final long LEAD_MILLIS = 5_000;

    /**
     * The events logged from {@code fromMillis} to {@code toMillis} (wall clock) by the broker in
     * {@code dir} (flushes and compactions from {@link #LEAD_MILLIS} before); none if the logs
     * cannot be read.
     * The bookie's checkpoint flush (every {@code flushInterval}, 60 s) logs nothing and is not counted.
     */
    static Counts between(Path brokerLog, Path dir, long fromMillis, long toMillis) {
        try {
            return count(brokerLog, dir, fromMillis, toMillis);
        } catch (RuntimeException e) {
            // Information only: a log this reader does not understand must not stop a run.
            return new Counts(0, 0, 0, 0, 0, 0, 0);
        }
    }

    private static Counts count(Path brokerLog, Path dir, long fromMillis, long toMillis) {
        int flushes = 0;
        int compactions = 0;
        int stateTopicCompactions = 0;
        int rolls = 0;
        for (String line : lines(brokerLog)) {
            if (line.length() < 28 || !within(line.substring(0, 28), LOG_TIME, fromMillis - LEAD_MILLIS,
                    toMillis)) {
                continue;
            }
            if (line.contains("Write cache is full, triggering flush")) {
                flushes++;
            } else if (line.contains("Commencing phase one of compaction")) {
                if (line.contains("__terminated_txn_state")) {
                    stateTopicCompactions++;
                } else {
                    compactions++;
                }
            } else if (line.contains("for being full") && within(line.substring(0, 28), LOG_TIME, fromMillis,
                    toMillis)) {
                rolls++;
            }
        }
        int pauses = 0;
        double pauseMillis = 0;
        double longest = 0;
        for (Pause pause : gcPauses(dir)) {
            if (pause.endMillis() >= fromMillis && pause.endMillis() <= toMillis) {
                pauses++;
                pauseMillis += pause.millis();
                longest = Math.max(longest, pause.millis());
            }
        }
        return new Counts(flushes, compactions, stateTopicCompactions, rolls, pauses, pauseMillis, longest);
    }

    /** A collector pause: when it ended (wall-clock millis; the GC log's line is written then) and how long it took. */
    record Pause(long endMillis, double millis) {

        long startMillis() {
            return endMillis - (long) Math.ceil(millis);
        }

        /** Whether the pause meets the interval from {@code fromMillis} to {@code toMillis}. */
        boolean overlaps(long fromMillis, long toMillis) {
            return endMillis >= fromMillis && startMillis() <= toMillis;
        }
    }

    /** Every collector pause the broker in {@code dir} logged, in order. */
    static List<Pause> gcPauses(Path dir) {
        List<Pause> pauses = new java.util.ArrayList<>();
        for (Path gcLog : gcLogs(dir.resolve("logs"))) {
            for (String line : lines(gcLog)) {
                Matcher pause = PAUSE.matcher(line);
                if (line.length() < 30 || !pause.find()) {
                    continue;
                }
                try {
                    long end = OffsetDateTime.parse(line.substring(1, 29), GC_TIME).toInstant().toEpochMilli();
                    pauses.add(new Pause(end, Double.parseDouble(pause.group(1))));
                } catch (RuntimeException e) {
                    // Not a pause line this reader understands.
                }
            }
        }
        pauses.sort(java.util.Comparator.comparingLong(Pause::endMillis));
        return pauses;
    }

    private static boolean within(String time, DateTimeFormatter format, long fromMillis, long toMillis) {
        try {
            long at = OffsetDateTime.parse(time, format).toInstant().toEpochMilli();
            return at >= fromMillis && at <= toMillis;
        } catch (DateTimeParseException e) {
            return false;
        }
    }

    private static List<String> lines(Path file) {
        try {
            return Files.readAllLines(file, StandardCharsets.ISO_8859_1);
        } catch (IOException e) {
            return List.of();
        }
    }

    private static List<Path> gcLogs(Path logs) {
        List<Path> found = new java.util.ArrayList<>();
        try (DirectoryStream<Path> files = Files.newDirectoryStream(logs, "pulsar_gc_*.log")) {
            files.forEach(found::add);
        } catch (IOException e) {
            return List.of();
        }
        return found;
    }
}
