package io.github.txnpreserver.bench;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;

/** CPU time (user + system) a process has used, from Linux's /proc. */
final class ProcessCpu {

    /** Clock ticks per second of /proc's times; 100 on every Linux this runs on ({@code getconf CLK_TCK}). */
    private static final long TICKS_PER_SECOND = 100;

    private ProcessCpu() {
    }

    static long micros(long pid) throws IOException {
        return microsOfTicks(ticks(Files.readString(Path.of("/proc", Long.toString(pid), "stat"))));
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
