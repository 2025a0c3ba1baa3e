package io.github.txnpreserver.it;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.util.List;
import java.util.concurrent.TimeUnit;

/**
 * The official Pulsar server distribution, unpacked once under the build folder, with the
 * plugin installed exactly as an operator installs it: {@code broker-conf-overlay/install.sh}.
 */
public final class PulsarDistribution {

    private static final String VERSION = "4.0.8";
    private static Path installed;
    private static Path stock;

    private PulsarDistribution() {
    }

    /** PULSAR_HOME of the distribution, unpacked and with the plugin installed. */
    public static synchronized Path withPluginInstalled() throws IOException, InterruptedException {
        if (installed == null) {
            Path home = unpacked("unpacked");
            run(List.of(repoRoot().resolve("broker-conf-overlay/install.sh").toString(), home.toString()),
                    home.getParent().resolve("install.log"));
            installed = home;
        }
        return installed;
    }

    /** PULSAR_HOME of a second, untouched copy of the distribution: stock Pulsar, plugin not installed. */
    public static synchronized Path stock() throws IOException, InterruptedException {
        if (stock == null) {
            stock = unpacked("unpacked-stock");
        }
        return stock;
    }

    public static Path repoRoot() {
        return Paths.get(requiredProperty("txnpreserver.repo.root")).toAbsolutePath().normalize();
    }

    /** Where brokers of this run keep their data and logs. */
    public static Path workDir() {
        return Paths.get(requiredProperty("txnpreserver.work.dir")).toAbsolutePath().normalize();
    }

    private static Path unpacked(String folder) throws IOException, InterruptedException {
        Path archive = Paths.get(requiredProperty("pulsar.distribution.archive")).toAbsolutePath();
        if (!Files.isRegularFile(archive)) {
            throw new IllegalStateException("Pulsar distribution " + archive + " is missing: build with Maven,"
                    + " which fetches org.apache.pulsar:pulsar-server-distribution:" + VERSION + ":tar.gz:bin");
        }
        Path target = archive.getParent().resolve(folder);
        Path home = target.resolve("apache-pulsar-" + VERSION);
        if (!Files.isExecutable(home.resolve("bin/pulsar"))) {
            Files.createDirectories(target);
            // tar keeps the scripts' execute bits, which Maven's unpacking does not.
            run(List.of("tar", "-xzf", archive.toString(), "-C", target.toString()),
                    target.resolve("unpack.log"));
        }
        return home;
    }

    private static void run(List<String> command, Path log) throws IOException, InterruptedException {
        Process process = new ProcessBuilder(command).redirectErrorStream(true)
                .redirectOutput(log.toFile()).start();
        if (!process.waitFor(10, TimeUnit.MINUTES) || process.exitValue() != 0) {
            process.destroyForcibly();
            throw new IllegalStateException(String.join(" ", command) + " failed: "
                    + Files.readString(log).strip());
        }
    }

    private static String requiredProperty(String name) {
        String value = System.getProperty(name);
        if (value == null || value.isBlank()) {
            throw new IllegalStateException("System property " + name + " is not set; run through Maven");
        }
        return value;
    }
}
