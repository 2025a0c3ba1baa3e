package io.github.txnpreserver.testing;

import java.time.Clock;
import java.time.Duration;
import java.time.Instant;
import java.time.ZoneId;
import java.time.ZoneOffset;

/** A wall clock that moves only when a test moves it. */
public final class MutableClock extends Clock {

    private volatile long millis;

    public MutableClock(long startMillis) {
        this.millis = startMillis;
    }

    public void advance(Duration duration) {
        millis += duration.toMillis();
    }

    @Override
    public long millis() {
        return millis;
    }

    @Override
    public Instant instant() {
        return Instant.ofEpochMilli(millis);
    }

    @Override
    public ZoneId getZone() {
        return ZoneOffset.UTC;
    }

    @Override
    public Clock withZone(ZoneId zone) {
        return this;
    }
}
