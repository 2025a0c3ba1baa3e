package io.github.txnpreserver.bench;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import org.junit.jupiter.api.Test;

class OpenLoopScheduleTest {

    @Test
    void intendedStartsAreAtTheRateFromTheStartWithoutDrift() {
        OpenLoopSchedule schedule = new OpenLoopSchedule(1_000, 1000.0);
        assertEquals(1_000, schedule.intendedStart(0));
        assertEquals(1_000 + 1_000_000, schedule.intendedStart(1));
        assertEquals(1_000 + 1_000_000_000L, schedule.intendedStart(1000));
        // 3 per second: a third of a second is not a whole number of nanoseconds; the millionth
        // start is still exactly a million thirds of a second after the first.
        OpenLoopSchedule thirds = new OpenLoopSchedule(0, 3.0);
        assertEquals(333_333_333L, thirds.intendedStart(1));
        assertEquals(666_666_666L, thirds.intendedStart(2));
        assertEquals(1_000_000_000L, thirds.intendedStart(3));
        assertEquals(1_000_000L * 1_000_000_000L / 3, thirds.intendedStart(1_000_000L), 1.0);
    }

    @Test
    void startsDoNotGoBackwardsAndKeepTheirSpacing() {
        OpenLoopSchedule schedule = new OpenLoopSchedule(-5_000_000_000L, 1304.7);
        long interval = (long) (1e9 / 1304.7);
        long previous = schedule.intendedStart(0);
        for (long k = 1; k < 200_000; k++) {
            long start = schedule.intendedStart(k);
            long gap = start - previous;
            assertTrue(gap == interval || gap == interval + 1, "gap " + gap + " at " + k);
            previous = start;
        }
    }

    @Test
    void firstIndexAtOrAfterIsTheFirstIntendedNotBeforeTheTime() {
        long base = 123_456_789L;
        OpenLoopSchedule schedule = new OpenLoopSchedule(base, 777.0);
        assertEquals(0, schedule.firstIndexAtOrAfter(base - 10));
        assertEquals(0, schedule.firstIndexAtOrAfter(base));
        assertEquals(1, schedule.firstIndexAtOrAfter(base + 1));
        for (long k = 1; k < 50_000; k += 7) {
            long at = schedule.intendedStart(k);
            assertEquals(k, schedule.firstIndexAtOrAfter(at));
            assertEquals(k, schedule.firstIndexAtOrAfter(at - 1));
            assertEquals(k + 1, schedule.firstIndexAtOrAfter(at + 1));
        }
    }

    @Test
    void aMeasuredIntervalHoldsRateTimesItsLength() {
        long base = System.nanoTime();
        OpenLoopSchedule schedule = new OpenLoopSchedule(base, 650.0);
        long first = schedule.firstIndexAtOrAfter(base + 5_000_000_000L);
        long end = schedule.firstIndexAtOrAfter(base + 5_000_000_000L + 20_000_000_000L);
        assertEquals(13_000, end - first);
        assertEquals(3_250, first);
    }

    @Test
    void transactionsGoRoundRobinOverTheConnections() {
        assertEquals(0, OpenLoopSchedule.client(0, 32));
        assertEquals(31, OpenLoopSchedule.client(31, 32));
        assertEquals(0, OpenLoopSchedule.client(32, 32));
        assertEquals(5, OpenLoopSchedule.client(32L * 1_000_000_000L + 5, 32));
    }

    @Test
    void aRateMustBePositive() {
        assertThrows(IllegalArgumentException.class, () -> new OpenLoopSchedule(0, 0));
        assertThrows(IllegalArgumentException.class, () -> new OpenLoopSchedule(0, Double.NaN));
        assertThrows(IllegalArgumentException.class, () -> new OpenLoopSchedule(0, -1));
    }
}
