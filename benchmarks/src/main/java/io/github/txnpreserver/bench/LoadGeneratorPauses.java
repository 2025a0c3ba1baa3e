package io.github.txnpreserver.bench;

import java.lang.management.GarbageCollectorMXBean;
import java.lang.management.ManagementFactory;
import java.util.Locale;

/**
 * The load generator's own collections over a slice (this JVM: the benchmark's clients). A
 * pause here holds up the commits' completions of whichever broker is measured, and is printed
 * beside the slice so that it is not taken for that broker's.
 */
final class LoadGeneratorPauses {
    record Sample(long count, long millis) {
    }

    private LoadGeneratorPauses() {
    }

    static Sample now() {
        long count = 0;
        long millis = 0;
        for (GarbageCollectorMXBean collector : ManagementFactory.getGarbageCollectorMXBeans()) {
            count += Math.max(0, collector.getCollectionCount());
            millis += Math.max(0, collector.getCollectionTime());
        }
        return new Sample(count, millis);
    }

    static String between(Sample from, Sample to) {
        return String.format(Locale.ROOT, "load generator's collector %d pause(s) of %d ms", to.count() - from.count(),
                to.millis() - from.millis());
    }
}
