package io.github.txnpreserver.bench;

import java.time.Instant;
import java.time.ZoneOffset;
import java.time.format.DateTimeFormatter;
import java.util.Locale;

/** Wall-clock times as the benchmark prints them (UTC, to the millisecond), the form `--slice-profile` reads. */
final class WallClock {
    private static final DateTimeFormatter CLOCK =
            DateTimeFormatter.ofPattern("HH:mm:ss.SSS", Locale.ROOT).withZone(ZoneOffset.UTC);

    private WallClock() {
    }

    static String format(long epochMillis) {
        return CLOCK.format(Instant.ofEpochMilli(epochMillis));
    }
}
