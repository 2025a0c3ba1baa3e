package io.github.txnpreserver.it;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;

/**
 * The official Pulsar server distribution, unpacked once under the build folder, with the
 * plugin installed exactly as an operator installs it: {@code broker-conf-overlay/install.sh}.
 *
 * <p><b>Another Pulsar line.</b> With {@value #LINE_LIB} set to a folder of another release's
 * broker jars (see {@code pulsar-lines/}), each copy has its {@code lib/} replaced by those
 * jars: the distribution's scripts and configuration run that release's broker, as an
 * operator's image of it would, and every test started from here runs on it.
 * {@value #LINE_JAVA_HOME} names the JDK its brokers run on (Pulsar 5.0 needs Java 21).
 */
public final class PulsarDistribution {

    private static final String VERSION = "4.0.8";
    /** System property: a folder of another Pulsar release's broker jars, laid out as lib/. */
    public static final String LINE_LIB = "txnpreserver.line.lib";
    /** System property: JAVA_HOME of the brokers, when not the tests' own. */
    public static final String LINE_JAVA_HOME = "txnpreserver.line.java.home";
    /** System property: true where the brokers' speed is measured (see {@link #gcAndJitOptions()}). */
    public static final String FULL_JIT = "txnpreserver.brokers.fullJit";
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
                    // The one this build made: an earlier version's jar may be left in target/.
                    .max(java.util.Comparator.comparing(path -> {
                        try {
                            return Files.getLastModifiedTime(path);
                        } catch (IOException e) {
                            throw new java.io.UncheckedIOException(e);
                        }
                    }))
                    .orElseThrow(() -> new IllegalStateException("No test-hooks jar in " + target
                            + ": build with Maven from the repository root"));
        } catch (java.nio.file.NoSuchFileException e) {
            throw new IllegalStateException("No " + target + ": build with Maven from the repository root", e);
        }
    }

    /**
     * PULSAR_HOME of a copy with an earlier release of the plugin installed by that release's
     * own {@code install.sh}: the release's sources are taken from this repository's history
     * ({@code git archive}) and built with Maven. Installed again at each call (a test may have
     * upgraded the copy).
     */
    public static synchronized Path withReleaseInstalled(String release, String commit)
            throws IOException, InterruptedException {
        Path source = workDir().resolve("release-" + release);
        Path built = source.resolve("plugin/target/pulsar-txn-preserver-" + release + ".jar");
        if (!Files.isRegularFile(built)) {
            Files.createDirectories(source);
            run(List.of("sh", "-c", "git -C '" + repoRoot() + "' archive " + commit + " | tar -x -C '" + source + "'"),
                    workDir().resolve("release-" + release + "-archive.log"));
            run(List.of("mvn", "-B", "-q", "-f", source.resolve("pom.xml").toString(), "-pl", "plugin", "-am",
                    "package", "-DskipTests"), workDir().resolve("release-" + release + "-build.log"));
        }
        Path home = unpacked("unpacked-release-" + release);
        run(List.of(source.resolve("broker-conf-overlay/install.sh").toString(), home.toString()),
                home.getParent().resolve("install.log"));
        return home;
    }

    /** Installs this build's plugin into {@code home} with {@code install.sh}, as the documented upgrade step does. */
    public static void installThisBuild(Path home) throws IOException, InterruptedException {
        run(List.of(repoRoot().resolve("broker-conf-overlay/install.sh").toString(), home.toString()),
                home.getParent().resolve("install-upgrade.log"));
    }

    /** PULSAR_HOME of a new, untouched copy of the distribution under {@code folder} (an earlier one there is removed). */
    public static synchronized Path freshCopy(String folder) throws IOException, InterruptedException {
        Path archive = Paths.get(requiredProperty("pulsar.distribution.archive")).toAbsolutePath();
        Path target = archive.getParent().resolve(folder);
        run(List.of("rm", "-rf", target.toString()), workDir().resolve(folder + "-remove.log"));
        return unpacked(folder);
    }

    /** Runs {@code script} (an install.sh: the source tree's, or an unpacked bundle's) on {@code home}; its output. */
    public static String runInstall(Path script, Path home) throws IOException, InterruptedException {
        Path log = workDir().resolve("install-" + home.getParent().getFileName() + ".log");
        run(List.of(script.toString(), home.toString()), log);
        return Files.readString(log);
    }

    /** PULSAR_HOME of a second, untouched copy of the distribution: stock Pulsar, plugin not installed. */
    public static synchronized Path stock() throws IOException, InterruptedException {
        if (stock == null) {
            stock = unpacked("unpacked-stock");
        }
        return stock;
    }

    /**
     * The commit the build names in the plugin's startup line and build_info, found the way the
     * build finds it (git rev-parse on the sources): "unknown" where the sources are no git checkout.
     */
    public static String expectedCommit() throws IOException, InterruptedException {
        Process git = new ProcessBuilder("git", "rev-parse", "--short=12", "HEAD").directory(repoRoot().toFile())
                .redirectErrorStream(false).start();
        String out = new String(git.getInputStream().readAllBytes()).strip();
        boolean done = git.waitFor(1, TimeUnit.MINUTES);
        return done && git.exitValue() == 0 && !out.isEmpty() ? out : "unknown";
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
        String line = System.getProperty(LINE_LIB, "").isBlank() ? "" : "-" + lineVersion();
        Path target = archive.getParent().resolve(folder + line);
        Path home = target.resolve("apache-pulsar-" + VERSION);
        if (!Files.isExecutable(home.resolve("bin/pulsar"))) {
            Files.createDirectories(target);
            // tar keeps the scripts' execute bits, which Maven's unpacking does not.
            run(List.of("tar", "-xzf", archive.toString(), "-C", target.toString()),
                    target.resolve("unpack.log"));
            if (!line.isEmpty()) {
                replaceLib(home, Paths.get(System.getProperty(LINE_LIB)));
            }
        }
        return home;
    }

    /** The Pulsar release the brokers run: this distribution's, or the one of the jars in {@value #LINE_LIB}. */
    public static String brokerVersion() {
        return System.getProperty(LINE_LIB, "").isBlank() ? VERSION : lineVersion();
    }

    /**
     * What every process started from the distribution gets in its environment: JAVA_HOME
     * when {@value #LINE_JAVA_HOME} is set.
     */
    public static Map<String, String> javaEnvironment() {
        String javaHome = System.getProperty(LINE_JAVA_HOME, "");
        if (javaHome.isBlank()) {
            return Map.of();
        }
        if (!Files.isExecutable(Paths.get(javaHome, "bin/java"))) {
            throw new IllegalStateException(LINE_JAVA_HOME + "=" + javaHome + " has no bin/java: Pulsar "
                    + brokerVersion() + " needs a newer JDK than the tests' (set -D" + LINE_JAVA_HOME + ")");
        }
        return Map.of("JAVA_HOME", javaHome);
    }

    /**
     * The garbage collector and compiler of every process started from the distribution. Test
     * brokers live for seconds to minutes, so they run with C1 alone: a start takes about a
     * quarter less time, and the tests start about a hundred. Measurements need the compiler a
     * production broker runs with: {@value #FULL_JIT}=true (the benchmarks set it).
     */
    public static String gcAndJitOptions() {
        return Boolean.getBoolean(FULL_JIT) ? "-XX:+UseSerialGC" : "-XX:+UseSerialGC -XX:TieredStopAtLevel=1";
    }

    /** The version of the pulsar-broker jar in {@value #LINE_LIB}. */
    private static String lineVersion() {
        Path versions = Paths.get(requiredProperty(LINE_LIB)).resolve("org/apache/pulsar/pulsar-broker");
        try (var files = Files.list(versions)) {
            return files.filter(Files::isDirectory).map(path -> path.getFileName().toString()).findFirst()
                    .orElseThrow(() -> new IllegalStateException(versions + " is empty"));
        } catch (IOException e) {
            throw new IllegalStateException("No " + versions + ": build pulsar-lines/ with Maven (-Pfull)", e);
        }
    }

    /**
     * The distribution's lib/ with another release's broker jars instead of its own, named as
     * the distribution names them ({@code groupId-artifactId-version.jar}, which install.sh
     * reads), from a folder in the repository's layout ({@code group/path/artifact/version/}).
     */
    private static void replaceLib(Path home, Path jars) throws IOException {
        Path lib = home.resolve("lib");
        try (var files = Files.list(lib)) {
            for (Path jar : files.filter(path -> path.getFileName().toString().endsWith(".jar")).toList()) {
                Files.delete(jar);
            }
        }
        List<Path> replacement;
        try (var files = Files.walk(jars)) {
            replacement = files.filter(path -> path.getFileName().toString().endsWith(".jar")).toList();
        }
        for (Path jar : replacement) {
            Path relative = jars.relativize(jar);
            int depth = relative.getNameCount();
            if (depth < 4) {
                throw new IllegalStateException(jar + " is not in the repository's layout under " + jars);
            }
            String group = relative.subpath(0, depth - 3).toString().replace('/', '.');
            Files.copy(jar, lib.resolve(group + "-" + jar.getFileName()));
        }
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
