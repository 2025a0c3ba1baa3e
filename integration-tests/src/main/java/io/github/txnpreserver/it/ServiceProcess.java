package io.github.txnpreserver.it;

import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;
import java.time.Duration;
import java.time.Instant;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;

/**
 * One {@code bin/pulsar <command>} process of the distribution (ZooKeeper, a bookie, a
 * broker, a standalone), with its own log and ports. {@code bin/pulsar} execs java, so the PID is the
 * JVM's own: kill, pause and resume act on the service itself, never on anything by name.
 */
public final class ServiceProcess {

    private final String name;
    private final List<String> command;
    private final Map<String, String> environment;
    private final Path logFile;
    private final int[] ports;
    private Process process;
    private int starts;

    public ServiceProcess(String name, List<String> command, Map<String, String> environment, Path logFile,
                          int... ports) {
        this.name = name;
        this.command = List.copyOf(command);
        this.environment = Map.copyOf(environment);
        this.logFile = logFile;
        this.ports = ports.clone();
    }

    public void start() throws IOException {
        Ports.requireFree(ports);
        Files.createDirectories(logFile.getParent());
        starts++;
        Files.writeString(logFile, "\n===== " + name + " start " + starts + " at " + Instant.now() + " =====\n",
                StandardOpenOption.CREATE, StandardOpenOption.APPEND);
        ProcessBuilder builder = new ProcessBuilder(command);
        builder.environment().putAll(PulsarDistribution.javaEnvironment());
        builder.environment().putAll(environment);
        builder.redirectErrorStream(true);
        builder.redirectOutput(ProcessBuilder.Redirect.appendTo(logFile.toFile()));
        process = builder.start();
        Process started = process;
        // A test JVM that dies must not leave a service behind.
        Runtime.getRuntime().addShutdownHook(new Thread(started::destroyForcibly, "kill-" + name + "-" + started.pid()));
    }

    public long pid() {
        return process.pid();
    }

    public boolean isAlive() {
        return process != null && process.isAlive();
    }

    public void requireAlive() {
        if (!isAlive()) {
            throw new IllegalStateException(this + " exited with " + process.exitValue() + "; log: " + logFile
                    + "\n" + tail(40));
        }
    }

    /** Waits for the process to exit by itself (a crash); true if it did within the timeout. */
    public boolean awaitExit(Duration timeout) throws InterruptedException {
        return process.waitFor(timeout.toMillis(), TimeUnit.MILLISECONDS);
    }

    /** kill -9; returns once the process is gone and its ports are free. */
    public void kill() throws InterruptedException {
        if (process == null) {
            return;
        }
        resume();
        process.destroyForcibly();
        process.waitFor(30, TimeUnit.SECONDS);
        Ports.awaitFree(Duration.ofSeconds(30), toString(), ports);
    }

    /** A clean stop (SIGTERM), forced after 60 s. */
    public void stop() throws InterruptedException {
        if (process == null || !process.isAlive()) {
            return;
        }
        resume();
        process.destroy();
        if (!process.waitFor(60, TimeUnit.SECONDS)) {
            process.destroyForcibly();
            process.waitFor(30, TimeUnit.SECONDS);
        }
        Ports.awaitFree(Duration.ofSeconds(30), toString(), ports);
    }

    /** SIGSTOP: the process holds its sockets and state but does nothing, as in a long GC pause or a partition. */
    public void pause() throws IOException, InterruptedException {
        signal("-STOP");
    }

    /** SIGCONT after {@link #pause()}. */
    public void resume() throws InterruptedException {
        if (process != null && process.isAlive()) {
            try {
                signal("-CONT");
            } catch (IOException e) {
                throw new UncheckedIOException(e);
            }
        }
    }

    public Path logFile() {
        return logFile;
    }

    /** The last lines of the process's output, for failure messages. */
    public String tail(int lines) {
        try {
            List<String> all = Files.readAllLines(logFile);
            return String.join("\n", all.subList(Math.max(0, all.size() - lines), all.size()));
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        }
    }

    @Override
    public String toString() {
        return name + (process == null ? "" : " (pid " + process.pid() + ")");
    }

    private void signal(String signal) throws IOException, InterruptedException {
        Process kill = new ProcessBuilder("kill", signal, Long.toString(process.pid())).inheritIO().start();
        if (!kill.waitFor(10, TimeUnit.SECONDS) || kill.exitValue() != 0) {
            throw new IllegalStateException("kill " + signal + " " + process.pid() + " failed");
        }
    }
}
