package io.github.txnpreserver.testhooks;

import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.util.concurrent.TimeUnit;

/**
 * Test hook of {@link HookedTransactionMetadataStore}: kills the broker (kill -9 of its own
 * JVM) when the commit or abort chain reaches a chosen step, so that crash tests can stop the
 * broker exactly there.
 *
 * <p>Off unless the broker JVM starts with {@code -D}{@value #PROPERTY}{@code =<file>}; then,
 * when the chain reaches the step named in that file, the file is deleted (so the restarted
 * broker does not crash again) and the JVM is killed. Without the property the store never
 * looks at a file.
 */
public final class CrashPoint {

    public static final String PROPERTY = "txnpreserver.testhooks.crashPointFile";
    private static final Path TRIGGER = triggerFile();

    /** The steps of the end chain where a crash can be injected. */
    public enum Step {
        /** The COMMITTING/ABORTING entry is durable; no marker has been sent. */
        AFTER_FINISHING_ENTRY,
        /** The broker has just asked for the partitions to send the end markers to. */
        DURING_MARKERS,
        /** The decided outcome is kept in memory (its record on its way); the terminal entry is not written. */
        AFTER_KEPT_BEFORE_TERMINAL_ENTRY,
        /**
         * The terminal COMMITTED/ABORTED entry is durable; the outcome's record waits for its
         * group (up to 1 s), so the transaction log is usually its only durable copy.
         */
        AFTER_TERMINAL_ENTRY
    }

    private CrashPoint() {
    }

    public static boolean installed() {
        return TRIGGER != null;
    }

    /** Kills the JVM if the hook is armed for {@code step}; {@code delayMillis} lets work in flight start first. */
    public static void reached(Step step, long delayMillis) {
        if (TRIGGER == null || !armedFor(step)) {
            return;
        }
        try {
            Files.deleteIfExists(TRIGGER);
        } catch (IOException e) {
            // still crash: the test restarts without the hook armed only if the file is gone,
            // and a failed delete shows up there
        }
        Thread killer = new Thread(() -> {
            try {
                TimeUnit.MILLISECONDS.sleep(delayMillis);
                Process kill = new ProcessBuilder("kill", "-9", Long.toString(ProcessHandle.current().pid()))
                        .inheritIO().start();
                kill.waitFor(5, TimeUnit.SECONDS);
            } catch (IOException | InterruptedException e) {
                // fall through to halt
            }
            Runtime.getRuntime().halt(137);
        }, "txnpreserver-crash-point");
        killer.setDaemon(true);
        killer.start();
        if (delayMillis == 0) {
            try {
                killer.join();
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
            }
        }
    }

    private static boolean armedFor(Step step) {
        try {
            return Files.exists(TRIGGER)
                    && Files.readString(TRIGGER, StandardCharsets.UTF_8).trim().equals(step.name());
        } catch (IOException e) {
            return false;
        }
    }

    private static Path triggerFile() {
        String path = System.getProperty(PROPERTY);
        return path == null || path.isBlank() ? null : Paths.get(path);
    }
}
