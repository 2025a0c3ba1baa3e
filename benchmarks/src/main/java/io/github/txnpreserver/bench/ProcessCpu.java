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
        String stat = Files.readString(Path.of("/proc", Long.toString(pid), "stat"));
        // The command name (field 2) may hold spaces; fields are counted after its closing parenthesis.
        String[] fields = stat.substring(stat.lastIndexOf(')') + 2).split(" ");
        long ticks = Long.parseLong(fields[11]) + Long.parseLong(fields[12]);
        return ticks * 1_000_000 / TICKS_PER_SECOND;
    }
}
