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
    /** The provider of the test-hooks module (fault injection), for the brokers of fault tests only. */
    public static final String HOOKED_PROVIDER = "io.github.txnpreserver.testhooks.HookedMetadataStoreProvider";
    private static Path installed;
    private static Path withTestHooks;
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

    /**
     * PULSAR_HOME of another copy with the plugin installed the same way, and the test-hooks
     * jar in {@code lib/} beside it: brokers started from it name {@link #HOOKED_PROVIDER}.
     * The copy every other test uses has no test code.
     */
    public static synchronized Path withTestHooksInstalled() throws IOException, InterruptedException {
        if (withTestHooks == null) {
            Path home = unpacked("unpacked-test-hooks");
            run(List.of(repoRoot().resolve("broker-conf-overlay/install.sh").toString(), home.toString()),
                    home.getParent().resolve("install-test-hooks.log"));
            Path jar = testHooksJar();
            Files.copy(jar, home.resolve("lib").resolve("io.github.txnpreserver-" + jar.getFileName()),
                    java.nio.file.StandardCopyOption.REPLACE_EXISTING);
            withTestHooks = home;
        }
        return withTestHooks;
    }

    private static Path testHooksJar() throws IOException {
        Path target = repoRoot().resolve("test-hooks/target");
        try (var jars = Files.list(target)) {
            return jars.filter(path -> path.getFileName().toString().matches("pulsar-txn-preserver-test-hooks-.*\\.jar")
                            && !path.getFileName().toString().endsWith("-sources.jar"))
                    .findFirst()
                    .orElseThrow(() -> new IllegalStateException("No test-hooks jar in " + target
                            + ": build with Maven from the repository root"));
        } catch (java.nio.file.NoSuchFileException e) {
            throw new IllegalStateException("No " + target + ": build with Maven from the repository root", e);
        }
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
