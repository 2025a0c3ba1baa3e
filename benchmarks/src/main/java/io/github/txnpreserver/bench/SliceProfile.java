package io.github.txnpreserver.bench;

import java.io.IOException;
import java.nio.file.Path;
import java.time.Duration;
import java.time.Instant;
import java.time.LocalDate;
import java.time.LocalTime;
import java.time.ZoneOffset;
import java.util.ArrayList;
import java.util.Comparator;
import java.util.HashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.TreeMap;
import jdk.jfr.consumer.RecordedEvent;
import jdk.jfr.consumer.RecordedFrame;
import jdk.jfr.consumer.RecordedStackTrace;
import jdk.jfr.consumer.RecordedThread;
import jdk.jfr.consumer.RecordingFile;

/**
 * What a broker ran during one benchmark slice, from its flight recording: the benchmark
 * prints each latency slice's wall-clock interval, and {@code txnpreserver.bench.brokerJvmOptions}
 * records each broker over a round ({@code docs/performance.md}, "The open-loop tail").
 *
 * <pre>
 * benchmarks/run.sh --slice-profile recording.jfr [--frames N] [--brief] 03:12:01.250-03:12:06.900 ...
 * </pre>
 *
 * Prints, for the interval: the execution samples by thread group (thread names without their
 * numbers) and, for the busiest groups, their most frequent innermost frames; the collector's
 * pauses; the JVM's and the machine's CPU load; and the longest waits the recording kept (monitor
 * entries, parks, socket and file I/O over the recording's thresholds).
 */
public final class SliceProfile {
    private static final int GROUPS = 12;
    private static final int FRAMES_PER_GROUP = 6;
    private static final int WAITS = 15;

    private SliceProfile() {
    }

    public static void main(String[] args) throws IOException {
        if (args.length < 2) {
            System.err.println("usage: SliceProfile <recording.jfr> [--frames N] [--brief]"
                    + " <HH:mm:ss.SSS-HH:mm:ss.SSS>...");
            System.exit(2);
        }
        Path file = Path.of(args[0]);
        int depth = 1;
        boolean brief = false;
        List<String> windows = new ArrayList<>();
        for (int i = 1; i < args.length; i++) {
            switch (args[i]) {
                case "--frames" -> {
                    if (i + 1 == args.length) {
                        throw new IllegalArgumentException("--frames takes a number");
                    }
                    depth = Integer.parseInt(args[++i]);
                }
                case "--brief" -> brief = true;
                default -> windows.add(args[i]);
            }
        }
        if (windows.isEmpty()) {
            throw new IllegalArgumentException("no window given: HH:mm:ss.SSS-HH:mm:ss.SSS (UTC)");
        }
        Instant first = null;
        Instant last = null;
        try (RecordingFile recording = new RecordingFile(file)) {
            while (recording.hasMoreEvents()) {
                Instant at = recording.readEvent().getStartTime();
                first = first == null || at.isBefore(first) ? at : first;
                last = last == null || at.isAfter(last) ? at : last;
            }
        }
        if (first == null) {
            System.out.println("no events in " + file);
            return;
        }
        List<Slice> slices = new ArrayList<>();
        for (String window : windows) {
            String[] bounds = window.split("-");
            if (bounds.length != 2) {
                throw new IllegalArgumentException("a window is HH:mm:ss.SSS-HH:mm:ss.SSS (UTC): " + window);
            }
            // The day on which the window's start lies within the recording (a round can cross
            // midnight); an end earlier than the start is on the next day.
            LocalDate day = first.atOffset(ZoneOffset.UTC).toLocalDate();
            Instant from = LocalTime.parse(bounds[0]).atDate(day).toInstant(ZoneOffset.UTC);
            if (from.isBefore(first.minus(Duration.ofHours(1)))) {
                from = from.plus(Duration.ofDays(1));
            }
            Instant to = LocalTime.parse(bounds[1]).atDate(from.atOffset(ZoneOffset.UTC).toLocalDate())
                    .toInstant(ZoneOffset.UTC);
            if (to.isBefore(from)) {
                to = to.plus(Duration.ofDays(1));
            }
            slices.add(new Slice(from, to, depth, to.isBefore(first) || from.isAfter(last)));
        }
        // One pass for all windows: a round's recording takes seconds to read.
        try (RecordingFile recording = new RecordingFile(file)) {
            while (recording.hasMoreEvents()) {
                RecordedEvent event = recording.readEvent();
                for (Slice slice : slices) {
                    slice.read(event);
                }
            }
        }
        for (Slice slice : slices) {
            if (brief) {
                slice.printBrief();
            } else {
                slice.print(file.getFileName().toString());
            }
        }
    }

    /** The figures of one interval, read event by event (a round's recording does not fit a heap). */
    private static final class Slice {
        final Instant from;
        final Instant to;
        final int depth;
        final Map<String, Integer> samplesByGroup = new HashMap<>();
        final Map<String, Map<String, Integer>> framesByGroup = new HashMap<>();
        final List<String> pauses = new ArrayList<>();
        double longestPauseMillis;
        final List<RecordedEvent> waits = new ArrayList<>();
        double jvmUser;
        double jvmSystem;
        double machine;
        int loads;
        int samples;

        /** The window lies outside the recording: nothing read in it says anything. */
        final boolean outside;

        Slice(Instant from, Instant to, int depth, boolean outside) {
            this.from = from;
            this.to = to;
            this.depth = depth;
            this.outside = outside;
        }

        void read(RecordedEvent event) {
            Instant at = event.getStartTime();
            if (event.getEndTime().isBefore(from) || at.isAfter(to)) {
                return;
            }
            String type = event.getEventType().getName();
            switch (type) {
                case "jdk.ExecutionSample" -> {
                    samples++;
                    String group = group(event.getThread("sampledThread"));
                    samplesByGroup.merge(group, 1, Integer::sum);
                    framesByGroup.computeIfAbsent(group, g -> new HashMap<>())
                            .merge(frames(event.getStackTrace(), depth), 1, Integer::sum);
                }
                case "jdk.GarbageCollection" -> {
                    longestPauseMillis = Math.max(longestPauseMillis, millis(event.getDuration("longestPause")));
                    pauses.add(String.format(Locale.ROOT,
                        "%s (%s) at %s, longest pause %.1f ms, total pause %.1f ms", event.getString("name"),
                        event.getString("cause"), at.atOffset(ZoneOffset.UTC).toLocalTime(),
                        millis(event.getDuration("longestPause")), millis(event.getDuration("sumOfPauses"))));
                }
                case "jdk.CPULoad" -> {
                    jvmUser += event.getFloat("jvmUser");
                    jvmSystem += event.getFloat("jvmSystem");
                    machine += event.getFloat("machineTotal");
                    loads++;
                }
                case "jdk.JavaMonitorEnter", "jdk.JavaMonitorWait", "jdk.ThreadPark", "jdk.ThreadSleep",
                        "jdk.SocketRead", "jdk.SocketWrite", "jdk.FileRead", "jdk.FileWrite", "jdk.FileForce",
                        "jdk.SafepointBegin", "jdk.ExecuteVMOperation", "jdk.Compilation" -> {
                    // An I/O or VM wait that overlaps the slice; a park or sleep begun in it (a
                    // pool's idle wait that spans it says nothing of it).
                    if ((!waiting(event) || !at.isBefore(from)) && !idle(event)) {
                        waits.add(event);
                    }
                }
                default -> {
                }
            }
        }

        /**
         * One line: the samples and the busiest thread groups, the collector's pauses, the
         * longest I/O or VM wait, the machine's CPU.
         */
        void printBrief() {
            String busiest = samplesByGroup.entrySet().stream()
                    .sorted(Map.Entry.<String, Integer>comparingByValue().reversed()).limit(3)
                    .map(group -> group.getValue() + " " + group.getKey()).reduce((a, b) -> a + ", " + b).orElse("");
            if (outside) {
                System.out.printf(Locale.ROOT, "%s-%s  outside the recording%n", from.atOffset(ZoneOffset.UTC)
                        .toLocalTime(), to.atOffset(ZoneOffset.UTC).toLocalTime());
                return;
            }
            // A compilation runs beside the application; it holds nothing up by itself.
            String longest = waits.stream().filter(wait -> !waiting(wait)
                            && !wait.getEventType().getName().equals("jdk.Compilation"))
                    .max(Comparator.comparing((RecordedEvent wait) -> wait.getDuration()))
                    .map(wait -> String.format(Locale.ROOT, "%s %.1f ms in %s",
                            wait.getEventType().getName().substring("jdk.".length()), millis(wait.getDuration()),
                            group(wait.getThread())))
                    .orElse("no I/O, lock or VM wait over the thresholds");
            System.out.printf(Locale.ROOT, "%s-%s  %d samples (%s); %d GC pause(s), longest %.1f ms; %s;"
                            + " machine CPU over the second before a reading %s%n",
                    from.atOffset(ZoneOffset.UTC).toLocalTime(), to.atOffset(ZoneOffset.UTC).toLocalTime(), samples,
                    busiest, pauses.size(), longestPauseMillis, longest,
                    loads == 0 ? "not read" : String.format(Locale.ROOT, "%.0f %%", 100 * machine / loads));
        }

        void print(String name) {
            if (outside) {
                System.out.printf(Locale.ROOT, "%s, %s to %s: outside the recording%n", name, from, to);
                return;
            }
            System.out.printf(Locale.ROOT, "%s, %s to %s: %d execution samples%n", name, from, to, samples);
            if (loads > 0) {
                System.out.printf(Locale.ROOT, "CPU load (mean of %d readings): JVM user %.1f %%, JVM system %.1f %%,"
                        + " machine %.1f %%%n", loads, 100 * jvmUser / loads, 100 * jvmSystem / loads,
                        100 * machine / loads);
            }
            samplesByGroup.entrySet().stream().sorted(Map.Entry.<String, Integer>comparingByValue().reversed())
                    .limit(GROUPS).forEach(group -> {
                        System.out.printf(Locale.ROOT, "%6d  %s%n", group.getValue(), group.getKey());
                        framesByGroup.get(group.getKey()).entrySet().stream()
                                .sorted(Map.Entry.<String, Integer>comparingByValue().reversed())
                                .limit(FRAMES_PER_GROUP)
                                .forEach(frame -> System.out.printf(Locale.ROOT, "          %5d  %s%n",
                                        frame.getValue(), frame.getKey()));
                    });
            pauses.forEach(pause -> System.out.println("GC " + pause));
            waits.sort(Comparator.comparing((RecordedEvent wait) -> wait.getDuration()).reversed());
            Map<String, Integer> waitCounts = new TreeMap<>();
            waits.forEach(wait -> waitCounts.merge(wait.getEventType().getName(), 1, Integer::sum));
            System.out.println("waits over the recording's thresholds, pools' idle waits left out: " + waitCounts);
            // Waits are many and mostly a pool's; the I/O, monitor entries and VM operations first.
            waits.sort(Comparator.comparing(SliceProfile::waiting));
            waits.stream().limit(WAITS).forEach(wait -> System.out.printf(Locale.ROOT,
                    "  %7.1f ms  at %s  %-18s %-34s %s%n", millis(wait.getDuration()),
                    wait.getStartTime().atOffset(ZoneOffset.UTC).toLocalTime(),
                    wait.getEventType().getName().substring("jdk.".length()), group(wait.getThread()),
                    frames(wait.getStackTrace(), 4)));
        }
    }

    /** A thread that waits (parked, asleep, or in a monitor's wait), not one held up by I/O, a lock or the VM. */
    private static boolean waiting(RecordedEvent event) {
        String type = event.getEventType().getName();
        return type.equals("jdk.ThreadPark") || type.equals("jdk.ThreadSleep") || type.equals("jdk.JavaMonitorWait");
    }

    /**
     * A pool's thread waiting for work or a timer (a park, sleep or monitor wait of a second or
     * more, or in a queue's take or poll): it says nothing of what held a commit up.
     */
    private static boolean idle(RecordedEvent event) {
        if (!waiting(event)) {
            return false;
        }
        if (event.getDuration().compareTo(Duration.ofSeconds(1)) >= 0) {
            return true;
        }
        String stack = frames(event.getStackTrace(), 6);
        return stack.contains("Queue.take") || stack.contains("Queue.poll") || stack.contains("Queue$TransferStack")
                || stack.contains("ForkJoinPool.awaitWork") || stack.contains("DelayedWorkQueue");
    }

    private static String group(RecordedThread thread) {
        if (thread == null) {
            return "(no thread)";
        }
        String name = thread.getJavaName() != null ? thread.getJavaName() : thread.getOSName();
        return name == null ? "(unnamed)" : name.replaceAll("[0-9]+", "N");
    }

    private static String frames(RecordedStackTrace stack, int depth) {
        if (stack == null || stack.getFrames().isEmpty()) {
            return "(no stack)";
        }
        List<String> names = new ArrayList<>();
        for (RecordedFrame frame : stack.getFrames().subList(0, Math.min(depth, stack.getFrames().size()))) {
            String type = frame.getMethod().getType().getName();
            names.add(type.substring(type.lastIndexOf('.') + 1) + "." + frame.getMethod().getName());
        }
        return String.join(" < ", names);
    }

    private static double millis(Duration duration) {
        return duration == null ? 0 : duration.toNanos() / 1e6;
    }
}
