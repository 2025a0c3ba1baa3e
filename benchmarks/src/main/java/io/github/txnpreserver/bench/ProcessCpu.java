package io.github.txnpreserver.bench;

import java.io.IOException;
import java.nio.file.DirectoryStream;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.HashMap;
import java.util.Map;

/** CPU time (user + system) a process has used, from Linux's /proc. */
final class ProcessCpu {

    /** Clock ticks per second of /proc's times; 100 on every Linux this runs on ({@code getconf CLK_TCK}). */
    private static final long TICKS_PER_SECOND = 100;

    private ProcessCpu() {
    }

    static long micros(long pid) throws IOException {
        return microsOfTicks(ticks(Files.readString(Path.of("/proc", Long.toString(pid), "stat"))));
    }

    /** The {@code /proc/<pid>/task/<tid>/stat} line of each of the process's threads, by thread id. */
    static Map<String, String> threadStats(long pid) throws IOException {
        Map<String, String> stats = new HashMap<>();
        try (DirectoryStream<Path> tasks = Files.newDirectoryStream(Path.of("/proc", Long.toString(pid), "task"))) {
            for (Path task : tasks) {
                try {
                    stats.put(task.getFileName().toString(), Files.readString(task.resolve("stat")));
                } catch (IOException threadGone) {
                    // ended between the listing and the read
                }
            }
        }
        return stats;
    }

    /**
     * CPU ticks of the JIT's compiler threads ("C1 CompilerThread0", "C2 CompilerThread1", as
     * the kernel truncates them), by thread id. A compiler thread that ends between two reads
     * takes its ticks along; HotSpot ends them only when compiling is idle.
     */
    static Map<String, Long> compilerTicks(long pid) throws IOException {
        Map<String, Long> ticks = new HashMap<>();
        threadStats(pid).forEach((tid, stat) -> {
            if (name(stat).matches("C[12] CompilerThre.*")) {
                ticks.put(tid, ticks(stat));
            }
        });
        return ticks;
    }

    /** The compiler threads' CPU between two {@link #compilerTicks} reads. */
    static long compilerMicrosBetween(Map<String, Long> before, Map<String, Long> after) {
        long ticks = 0;
        for (Map.Entry<String, Long> thread : after.entrySet()) {
            ticks += thread.getValue() - before.getOrDefault(thread.getKey(), 0L);
        }
        return microsOfTicks(ticks);
    }

    /** User + system clock ticks of a {@code /proc/<pid>/stat} or {@code /proc/<pid>/task/<tid>/stat} line. */
    static long ticks(String stat) {
        String[] fields = fieldsAfterName(stat);
        return Long.parseLong(fields[11]) + Long.parseLong(fields[12]);
    }

    /** The command name (field 2) of a stat line; it may hold spaces. */
    static String name(String stat) {
        return stat.substring(stat.indexOf('(') + 1, stat.lastIndexOf(')'));
    }

    static long microsOfTicks(long ticks) {
        return ticks * 1_000_000 / TICKS_PER_SECOND;
    }

    // Fields are counted after the command name's closing parenthesis.
    private static String[] fieldsAfterName(String stat) {
        return stat.substring(stat.lastIndexOf(')') + 2).split(" ");
    }
}
