package io.github.txnpreserver.bench;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import java.util.concurrent.TimeUnit;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

/**
 * The distribution's own {@code bin/pulsar-perf transaction}, so that the figures compare
 * with what Pulsar users measure. Produce-only ({@code -nmc 0}): its consume mode hangs once
 * the topic is drained. It runs inside a hard timeout for the same reason.
 */
final class PulsarPerf {

    private PulsarPerf() {
    }

    /** Transactions per second pulsar-perf reports over its run, or NaN if it reported none. */
    static double transactionsPerSecond(Path pulsarHome, String serviceUrl, String adminUrl, String topic,
                                        int threads, int seconds, Path log) throws IOException, InterruptedException {
        List<String> command = List.of("timeout", "-s", "KILL", Integer.toString(seconds + 60),
                pulsarHome.resolve("bin/pulsar-perf").toString(), "transaction",
                "-u", serviceUrl, "-au", adminUrl, "--topics-p", topic, "--topics-c", topic + "-in",
                "-threads", Integer.toString(threads), "-time", Integer.toString(seconds),
                "-nmp", "1", "-nmc", "0", "-i", "5");
        ProcessBuilder builder = new ProcessBuilder(command).redirectErrorStream(true).redirectOutput(log.toFile());
        builder.environment().put("PULSAR_MEM", "-Xmx256m");
        Process process = builder.start();
        process.waitFor(seconds + 90, TimeUnit.SECONDS);
        process.destroyForcibly();
        return parse(Files.readString(log));
    }

    /**
     * pulsar-perf 4.0.8 ends with "Aggregated throughput stats --- N transaction executed
     * --- X transaction/s ...". Falls back to the mean of its periodic
     * "Throughput transaction: X transaction executes/s" lines.
     */
    static double parse(String output) {
        Matcher aggregated = Pattern.compile("Aggregated throughput stats[^\\n]*?([0-9.]+) transaction/s")
                .matcher(output);
        double last = Double.NaN;
        while (aggregated.find()) {
            last = Double.parseDouble(aggregated.group(1));
        }
        if (!Double.isNaN(last)) {
            return last;
        }
        Matcher periodic = Pattern.compile("Throughput transaction: ([0-9.]+)").matcher(output);
        double sum = 0;
        int count = 0;
        while (periodic.find()) {
            sum += Double.parseDouble(periodic.group(1));
            count++;
        }
        return count == 0 ? Double.NaN : sum / count;
    }
}
