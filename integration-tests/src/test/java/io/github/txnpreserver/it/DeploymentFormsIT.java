package io.github.txnpreserver.it;

import static org.assertj.core.api.Assertions.assertThat;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;
import java.util.concurrent.TimeUnit;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import java.util.stream.Stream;
import org.apache.pulsar.client.api.Producer;
import org.apache.pulsar.client.api.PulsarClient;
import org.apache.pulsar.client.api.transaction.TxnID;
import org.junit.jupiter.api.DisplayName;
import org.junit.jupiter.api.Test;
import org.yaml.snakeyaml.Yaml;

/**
 * The deployment forms in {@code deploy/}, read from their files and carried out on this
 * machine as the container runtime and the Helm chart would: no Docker engine or cluster is
 * needed. The official image is the server distribution under {@code /pulsar} (here a folder
 * laid out the same way, its paths mapped); a Dockerfile's {@code COPY} and {@code ENV} are
 * applied to it; the chart's {@code configData} becomes environment variables; and before the
 * broker starts, the environment is applied to the configuration file by the rules of the
 * image's {@code bin/apply-config-from-env.py} ({@link #applyConfigFromEnv}). A real broker
 * then starts from it, and the stock client checks the plugin is on. Where a Docker engine
 * exists, {@code ContainerSmokeIT} runs the official image itself with the same two jars
 * and keys.
 */
@DisplayName("The deployment forms in deploy/")
class DeploymentFormsIT {

    private static final Path DEPLOY = PulsarDistribution.repoRoot().resolve("deploy");
    private static final String VERSION = System.getProperty("txnpreserver.version");

    /** The keys README's switch-off removes (the coordinator stays on: transactions go on, stock). */
    private static final List<String> SWITCH_OFF = List.of("transactionMetadataStoreProviderClassName",
            "PULSAR_PREFIX_messagingProtocols", "PULSAR_PREFIX_protocolHandlerDirectory",
            "PULSAR_PREFIX_additionalServlets", "PULSAR_PREFIX_additionalServletDirectory",
            "PULSAR_PREFIX_transactionMetaPersistCount");

    @Test
    void theDockerLayerOnTheOfficialImageWithItsEnvFile() throws Exception {
        Path image = dockerLayer();

        assertPluginOn(image, "docker-layer", envFile(DEPLOY.resolve("docker/txn-preserver.env")),
                Map.of("/pulsar", image));
    }

    /** The switch-off of the Docker form: the same image run without the env file, transactions on. */
    @Test
    void theDockerLayerWithoutItsEnvFileRunsStock() throws Exception {
        Path image = dockerLayer();
        Map<String, String> env = new LinkedHashMap<>(envFile(DEPLOY.resolve("docker/txn-preserver.env")));
        assertThat(env.keySet()).as("the env file holds the keys the switch-off removes, and the coordinator's switch")
                .containsExactlyInAnyOrderElementsOf(concat(SWITCH_OFF, List.of("transactionCoordinatorEnabled")));
        env.keySet().removeAll(SWITCH_OFF);

        assertStock(image, "docker-layer-off", env, Map.of("/pulsar", image));
    }

    @Test
    void helmValuesForAnImageWithThePlugin() throws Exception {
        Path image = dockerLayer();
        Map<String, Object> values = yaml(DEPLOY.resolve("helm/values-custom-image.yaml"));

        assertThat(child(values, "images", "broker", "tag").toString()).as("the image's tag names the plugin's version")
                .endsWith(VERSION);
        assertPluginOn(image, "helm-custom-image", configData(values), Map.of("/pulsar", image));
    }

    /** The switch-off of the Helm form: the switch-off's keys deleted from configData, nothing else changed. */
    @Test
    void helmValuesWithoutThePluginsKeysRunStock() throws Exception {
        Path image = dockerLayer();
        Map<String, String> env = configData(yaml(DEPLOY.resolve("helm/values-custom-image.yaml")));
        assertThat(env.keySet()).containsAll(SWITCH_OFF);
        env.keySet().removeAll(SWITCH_OFF);

        assertStock(image, "helm-custom-image-off", env, Map.of("/pulsar", image));
    }

    @Test
    @SuppressWarnings("unchecked")
    void helmValuesForTheOfficialImageAndAnInitContainer() throws Exception {
        Path image = officialImage("helm-init-container");
        Map<String, Object> values = yaml(DEPLOY.resolve("helm/values-init-container.yaml"));
        Dockerfile jarImage = dockerfile(DEPLOY.resolve("helm/jar-image.Dockerfile"));
        assertThat(jarImage.copies()).hasSize(1);
        String[] copy = jarImage.copies().get(0);

        // The init container, its volume a folder here; its image's one file, the built jar.
        Path volume = Files.createDirectories(LocalPulsar.newDir("helm-volume"));
        Map<String, Object> init = ((List<Map<String, Object>>) child(values, "broker", "initContainers")).get(0);
        Map<String, Object> initMount = ((List<Map<String, Object>>) init.get("volumeMounts")).get(0);
        List<String> command = ((List<String>) init.get("command")).stream()
                .map(word -> inFolders(word, Map.of(copy[1], PulsarDistribution.repoRoot().resolve(copy[0]),
                        (String) initMount.get("mountPath"), volume)))
                .toList();
        Process process = new ProcessBuilder(command).redirectErrorStream(true).start();
        assertThat(process.waitFor(1, TimeUnit.MINUTES)).isTrue();
        assertThat(process.exitValue()).as(new String(process.getInputStream().readAllBytes())).isZero();

        Map<String, Object> brokerMount =
                ((List<Map<String, Object>>) child(values, "broker", "extraVolumeMounts")).get(0);
        assertThat(brokerMount.get("name")).isEqualTo(initMount.get("name"));
        Map<String, Path> folders = Map.of((String) brokerMount.get("mountPath"), volume, "/pulsar", image);
        Map<String, String> env = configData(values);
        assertPluginOn(image, "helm-init-container", env, folders);
    }

    /**
     * Applies {@code env} to the image's configuration as the image's script does, starts a
     * broker from it and checks through the stock client that retries are answered from kept
     * outcomes. The broker is a standalone (it needs no ZooKeeper or bookie of its own):
     * {@code conf/standalone.conf} gets what the image and the chart give
     * {@code conf/broker.conf}, which holds for every key the form sets (checked: each is in
     * both files or in neither, so a bare name and a {@code PULSAR_PREFIX_} name act alike on
     * both). The broker's environment holds every variable, as the chart's pod does.
     */
    private static void assertPluginOn(Path image, String name, Map<String, String> env, Map<String, Path> folders)
            throws Exception {
        Map<String, String> mapped = new LinkedHashMap<>();
        env.forEach((key, value) -> mapped.put(key, inFolders(value, folders)));
        Map<String, Integer> brokerKeys = keysOf(Files.readAllLines(image.resolve("conf/broker.conf")));
        Map<String, Integer> standaloneKeys = keysOf(Files.readAllLines(image.resolve("conf/standalone.conf")));
        for (String variable : mapped.keySet()) {
            String key = variable.replaceFirst("^PULSAR_PREFIX_", "");
            assertThat(brokerKeys.containsKey(key)).as("%s in broker.conf as in standalone.conf", key)
                    .isEqualTo(standaloneKeys.containsKey(key));
        }
        applyConfigFromEnv(image.resolve("conf/broker.conf"), mapped);
        applyConfigFromEnv(image.resolve("conf/standalone.conf"), mapped);
        try (LocalPulsar pulsar = LocalPulsar.startFrom(image, name, Map.of(), mapped);
             PulsarClient client = Txns.client(pulsar);
             Producer<String> producer = Txns.producer(client, Txns.uniqueTopic(name));
             RetryingEndClient retry = RetryingEndClient.connect(pulsar.serviceUrl())) {
            TxnID txn = Txns.committed(client, producer, "m");

            assertThat(retry.commit(txn)).isEqualTo(EndAnswer.SUCCESS);
            assertThat(retry.abort(txn)).isEqualTo(EndAnswer.REFUSED_AS_COMMITTED);
            assertThat(pulsar.output()).contains("Transaction outcome preserver " + VERSION + ": Pulsar ");
            assertThat(AdminHttp.get(pulsar.httpUrl(), "/txn-preserver/transactions/" + txn.getMostSigBits() + "/"
                    + txn.getLeastSigBits(), null)).as("the outcome query, mounted by this form")
                    .contains("\"state\":\"COMMITTED\"");
        }
    }

    /**
     * Applies {@code env} as {@link #assertPluginOn} does and checks that the broker runs stock:
     * the plugin is not loaded, transactions work, and a retried commit of a committed
     * transaction gets stock's answer, not found.
     */
    private static void assertStock(Path image, String name, Map<String, String> env, Map<String, Path> folders)
            throws Exception {
        Map<String, String> mapped = new LinkedHashMap<>();
        env.forEach((key, value) -> mapped.put(key, inFolders(value, folders)));
        applyConfigFromEnv(image.resolve("conf/broker.conf"), mapped);
        applyConfigFromEnv(image.resolve("conf/standalone.conf"), mapped);
        try (LocalPulsar pulsar = LocalPulsar.startFrom(image, name, Map.of(), mapped);
             PulsarClient client = Txns.client(pulsar);
             Producer<String> producer = Txns.producer(client, Txns.uniqueTopic(name));
             RetryingEndClient retry = RetryingEndClient.connect(pulsar.serviceUrl())) {
            TxnID txn = Txns.committed(client, producer, "m");

            assertThat(retry.commit(txn)).as("stock: an ended transaction is not found").isEqualTo(EndAnswer.NOT_FOUND);
            assertThat(pulsar.output()).doesNotContain("Transaction outcome preserver");
        }
    }

    /** An env file's variables ({@code docker run --env-file}: NAME=value lines, # comments). */
    private static Map<String, String> envFile(Path file) throws IOException {
        Map<String, String> env = new LinkedHashMap<>();
        for (String line : Files.readAllLines(file)) {
            String stripped = line.strip();
            if (stripped.isEmpty() || stripped.startsWith("#")) {
                continue;
            }
            String[] pair = stripped.split("=", 2);
            env.put(pair[0], pair[1]);
        }
        return env;
    }

    private static List<String> concat(List<String> a, List<String> b) {
        List<String> all = new ArrayList<>(a);
        all.addAll(b);
        return all;
    }

    /** The official image with deploy/docker/Dockerfile's layer on it: the jar, and no key. */
    private static Path dockerLayer() throws IOException, InterruptedException {
        Dockerfile dockerfile = dockerfile(DEPLOY.resolve("docker/Dockerfile"));
        assertThat(dockerfile.args()).as("the Dockerfile's defaults: this build's plugin, the release CI runs")
                .containsEntry("PLUGIN_VERSION", VERSION)
                .containsEntry("PULSAR_IMAGE", "apachepulsar/pulsar:" + PulsarDistribution.brokerVersion());
        assertThat(dockerfile.env()).as("no key baked into the image: removing the keys given at run time switches off")
                .isEmpty();
        Path image = officialImage("docker-layer");
        for (String[] copy : dockerfile.copies()) {
            Path target = inFolder(copy[1], "/pulsar", image);
            Files.createDirectories(target.getParent());
            Files.copy(PulsarDistribution.repoRoot().resolve(copy[0]), target);
        }
        return image;
    }

    /**
     * A folder laid out as the official image's {@code /pulsar}: the server distribution, its
     * configuration and scripts copied (they are changed), lib/ a folder of links to its jars
     * (a layer adds jars), the rest linked.
     */
    private static Path officialImage(String name) throws IOException, InterruptedException {
        Path stock = PulsarDistribution.stock();
        Path image = Files.createDirectories(LocalPulsar.newDir(name + "-image"));
        try (Stream<Path> entries = Files.list(stock)) {
            for (Path entry : entries.toList()) {
                Path target = image.resolve(entry.getFileName().toString());
                switch (entry.getFileName().toString()) {
                    case "conf", "bin" -> copyTree(entry, target);
                    case "lib" -> {
                        Files.createDirectories(target);
                        try (Stream<Path> jars = Files.list(entry)) {
                            for (Path jar : jars.toList()) {
                                Files.createSymbolicLink(target.resolve(jar.getFileName()), jar);
                            }
                        }
                    }
                    default -> Files.createSymbolicLink(target, entry);
                }
            }
        }
        return image;
    }

    private static void copyTree(Path from, Path to) throws IOException {
        try (Stream<Path> paths = Files.walk(from)) {
            for (Path path : paths.toList()) {
                Path target = to.resolve(from.relativize(path).toString());
                if (Files.isDirectory(path)) {
                    Files.createDirectories(target);
                } else {
                    Files.copy(path, target, java.nio.file.StandardCopyOption.COPY_ATTRIBUTES);
                }
            }
        }
    }

    /**
     * The rules of the official image's {@code bin/apply-config-from-env.py}: first every
     * variable, its {@code PULSAR_PREFIX_} stripped, sets the line of a key the file has (also
     * a commented-out key); then every {@code PULSAR_PREFIX_} variable sets its key's line or,
     * if the file lacks the key, adds one (so the prefixed form wins over the bare one). Values
     * are stripped; a value {@code ${NAME}} stands for variable NAME's value.
     */
    static void applyConfigFromEnv(Path conf, Map<String, String> env) throws IOException {
        String prefix = "PULSAR_PREFIX_";
        List<String> lines = new ArrayList<>(Files.readAllLines(conf));
        Map<String, Integer> keys = keysOf(lines);
        Map<String, String> sorted = new TreeMap<>(env);
        sorted.forEach((variable, value) -> {
            String key = variable.startsWith(prefix) ? variable.substring(prefix.length()) : variable;
            if (keys.containsKey(key)) {
                lines.set(keys.get(key), key + "=" + dereferenced(value, env));
            }
        });
        sorted.forEach((variable, value) -> {
            if (variable.startsWith(prefix)) {
                String key = variable.substring(prefix.length());
                if (keys.containsKey(key)) {
                    lines.set(keys.get(key), key + "=" + dereferenced(value, env));
                } else {
                    lines.add(key + "=" + dereferenced(value, env));
                    keys.put(key, lines.size() - 1);
                }
            }
        });
        Files.write(conf, lines);
    }

    /** Each key of a configuration file (a commented-out one too) and its line. */
    private static Map<String, Integer> keysOf(List<String> lines) {
        Map<String, Integer> keys = new LinkedHashMap<>();
        for (int i = 0; i < lines.size(); i++) {
            String line = lines.get(i).strip();
            int equals = line.indexOf('=');
            if (equals > 0) {
                String key = line.substring(0, equals);
                keys.put((key.startsWith("#") ? key.substring(1) : key).strip(), i);
            }
        }
        return keys;
    }

    private static String dereferenced(String value, Map<String, String> env) {
        String stripped = value.strip();
        return stripped.startsWith("${") && stripped.endsWith("}")
                ? env.getOrDefault(stripped.substring(2, stripped.length() - 1), "") : stripped;
    }

    /**
     * A value with each container path in it (a key of {@code folders}, as a whole path
     * element) replaced by the folder it is here, in one pass.
     */
    private static String inFolders(String value, Map<String, Path> folders) {
        String paths = folders.keySet().stream()
                .sorted((a, b) -> b.length() - a.length())
                .map(Pattern::quote)
                .reduce((a, b) -> a + "|" + b).orElseThrow();
        Matcher matcher = Pattern.compile("(?<![\\w.-])(" + paths + ")(?=/|\\s|$)").matcher(value);
        StringBuilder result = new StringBuilder();
        while (matcher.find()) {
            matcher.appendReplacement(result, Matcher.quoteReplacement(folders.get(matcher.group(1)).toString()));
        }
        return matcher.appendTail(result).toString();
    }

    private static Path inFolder(String containerPath, String containerFolder, Path folder) {
        assertThat(containerPath).startsWith(containerFolder + "/");
        return folder.resolve(containerPath.substring(containerFolder.length() + 1));
    }

    /** A Dockerfile's build arguments (their defaults), its COPY sources and destinations, its ENV. */
    private record Dockerfile(Map<String, String> args, List<String[]> copies, Map<String, String> env) {
    }

    private static final Pattern VARIABLE = Pattern.compile("\\$\\{(\\w+)}");
    private static final Pattern ASSIGNMENT = Pattern.compile("(\\w+)=(\\S+)");

    private static Dockerfile dockerfile(Path file) throws IOException {
        Map<String, String> args = new LinkedHashMap<>();
        List<String[]> copies = new ArrayList<>();
        Map<String, String> env = new LinkedHashMap<>();
        String joined = Files.readString(file).replaceAll("(?m)^\\s*#.*\\n", "").replace("\\\n", " ");
        for (String line : joined.split("\n")) {
            String[] words = line.strip().split("\\s+", 2);
            if (words.length < 2) {
                continue;
            }
            String rest = substitute(words[1], args);
            switch (words[0]) {
                case "ARG" -> {
                    String[] arg = rest.split("=", 2);
                    args.put(arg[0], arg.length > 1 ? arg[1] : "");
                }
                case "COPY" -> copies.add(rest.split("\\s+"));
                case "ENV" -> {
                    Matcher matcher = ASSIGNMENT.matcher(rest);
                    while (matcher.find()) {
                        env.put(matcher.group(1), matcher.group(2));
                    }
                }
                default -> {
                }
            }
        }
        return new Dockerfile(args, copies, env);
    }

    private static String substitute(String text, Map<String, String> args) {
        Matcher matcher = VARIABLE.matcher(text);
        StringBuilder result = new StringBuilder();
        while (matcher.find()) {
            matcher.appendReplacement(result, Matcher.quoteReplacement(args.getOrDefault(matcher.group(1), "")));
        }
        return matcher.appendTail(result).toString();
    }

    private static Map<String, Object> yaml(Path file) throws IOException {
        return new Yaml().load(Files.readString(file));
    }

    @SuppressWarnings("unchecked")
    private static Object child(Map<String, Object> values, String... path) {
        Object node = values;
        for (String name : path) {
            node = ((Map<String, Object>) node).get(name);
            assertThat(node).as(String.join(".", path)).isNotNull();
        }
        return node;
    }

    /** broker.configData: the chart passes each entry as an environment variable, its value a string. */
    @SuppressWarnings("unchecked")
    private static Map<String, String> configData(Map<String, Object> values) {
        Map<String, String> env = new LinkedHashMap<>();
        ((Map<String, Object>) child(values, "broker", "configData")).forEach((key, value) -> {
            assertThat(value).as("configData.%s is quoted (the chart needs strings)", key).isInstanceOf(String.class);
            env.put(key, (String) value);
        });
        return env;
    }
}
