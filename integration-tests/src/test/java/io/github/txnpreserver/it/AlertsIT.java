package io.github.txnpreserver.it;

import static org.assertj.core.api.Assertions.assertThat;

import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.time.Duration;
import java.time.Instant;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.TreeSet;
import java.util.concurrent.TimeUnit;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import org.apache.pulsar.client.admin.PulsarAdmin;
import org.apache.pulsar.client.api.Producer;
import org.apache.pulsar.client.api.PulsarClient;
import org.apache.pulsar.client.api.transaction.Transaction;
import org.apache.pulsar.client.api.transaction.TxnID;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.DisplayName;
import org.junit.jupiter.api.MethodOrderer;
import org.junit.jupiter.api.Order;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.TestMethodOrder;

/**
 * The alert rules and the Grafana dashboard the repository ships ({@code monitoring/}), on a
 * real Prometheus server (Debian's {@code prometheus} package: the server and
 * {@code promtool}) that scrapes a real broker with the plugin; and the rules' unit tests
 * ({@code monitoring/tests/}, {@code promtool test rules}).
 *
 * <p>The tests share the broker and the Prometheus server, and run in order: the healthy
 * broker first (no alert), then the commit after a timeout-abort (its alert alone), then the
 * memory bound's evictions (the window and evictions alerts, which stay firing for the rest of
 * the run).
 */
@DisplayName("The shipped alert rules and dashboard, on a real Prometheus scraping a real broker")
@TestMethodOrder(MethodOrderer.OrderAnnotation.class)
class AlertsIT {

    private static final Path RULES = PulsarDistribution.repoRoot().resolve("monitoring/txn-preserver-rules.yml");
    private static final Path DASHBOARD =
            PulsarDistribution.repoRoot().resolve("monitoring/txn-preserver-dashboard.json");
    private static final Path RULE_TESTS = PulsarDistribution.repoRoot().resolve("monitoring/tests");
    private static final Path PROMETHEUS_RULE = PulsarDistribution.repoRoot().resolve("monitoring/prometheusrule.sh");
    private static final Path BIN = Paths.get(System.getProperty("txnpreserver.prometheus.bin", "/usr/bin"));
    /** The plugin's metrics, and the stock coordinator metric the rules compare them with. */
    private static final Pattern METRIC = Pattern.compile("pulsar_txn_(?:preserver_[a-z_]+|active_count)");
    private static final Pattern ALERT = Pattern.compile("\"alertname\":\"(TxnPreserver[A-Za-z]+)\"");
    private static final Pattern STATE = Pattern.compile("\"state\":\"(pending|firing)\"");
    private static final Duration FIRING_TIMEOUT = Duration.ofMinutes(3);

    private static LocalPulsar pulsar;
    private static ServiceProcess prometheus;
    private static int prometheusPort;

    @BeforeAll
    static void start() throws Exception {
        requireBinary("promtool");
        requireBinary("prometheus");
        // A memory bound far too small for the load below: the window must fall below the
        // rules' retry horizon while the memory bound drops outcomes.
        pulsar = LocalPulsar.start("alerts", Map.of(
                "transactionMetaPersistMaxMemoryInMB", "0.01",
                "transactionMetaPersistCount", "1"));
        // The coordinator opens on the first client's lookup: its metrics exist from then on.
        try (PulsarClient client = Txns.client(pulsar);
             Producer<String> producer = Txns.producer(client, Txns.uniqueTopic("alerts-first"))) {
            Txns.committed(client, producer, "first");
        }
        prometheus = startPrometheus(pulsar);
    }

    @AfterAll
    static void stop() throws Exception {
        if (prometheus != null) {
            prometheus.stop();
        }
        if (pulsar != null) {
            pulsar.close();
        }
    }

    @Test
    void promtoolAcceptsTheRules() throws Exception {
        String output = run(List.of(BIN.resolve("promtool").toString(), "check", "rules", RULES.toString()));
        System.out.println(output);
        assertThat(output).contains("SUCCESS");
    }

    /**
     * The rules' unit tests: every alert fires on the series it must fire on, with its labels and
     * annotations, and stays silent on those it must not fire on. And the PrometheusRule resource
     * that {@code prometheusrule.sh} prints (the release bundle's) holds the same rules.
     */
    @Test
    void promtoolUnitTestsPass() throws Exception {
        List<String> command = new ArrayList<>(List.of(BIN.resolve("promtool").toString(), "test", "rules"));
        try (var files = Files.list(RULE_TESTS)) {
            files.map(path -> PulsarDistribution.repoRoot().relativize(path).toString())
                    .filter(name -> name.endsWith(".test.yml")).sorted().forEach(command::add);
        }
        assertThat(command).as("unit tests in %s", RULE_TESTS).hasSizeGreaterThan(3);
        String output = run(command, PulsarDistribution.repoRoot());
        System.out.println(output);
        assertThat(output).contains("SUCCESS").doesNotContain("FAILED");

        String resource = run(List.of("bash", PROMETHEUS_RULE.toString()), PulsarDistribution.repoRoot());
        assertThat(resource).contains("apiVersion: monitoring.coreos.com/v1\nkind: PrometheusRule\n")
                .contains("\n  name: txn-preserver\n")
                .contains("\n    app.kubernetes.io/name: \"pulsar-txn-preserver\"\n");
        // spec: is the rules file's groups, indented by two spaces: take them back out.
        String spec = resource.substring(resource.indexOf("\nspec:\n") + "\nspec:\n".length())
                .replaceAll("(?m)^  ", "");
        String rules = Files.readString(RULES);
        assertThat(spec).as("spec of the PrometheusRule").isEqualTo(rules.substring(rules.indexOf("\ngroups:\n") + 1));
        Path specFile = LocalPulsar.newDir("prometheusrule").resolve("spec.yml");
        Files.createDirectories(specFile.getParent());
        Files.writeString(specFile, spec);
        String checked = run(List.of(BIN.resolve("promtool").toString(), "check", "rules", specFile.toString()));
        assertThat(checked).contains("SUCCESS");
    }

    /**
     * A healthy broker with the plugin: the thresholds group loaded, every rule evaluates
     * without error, the stock coordinator metric is there with the plugin's beside it, and no
     * alert fires (in particular not TxnPreserverCoordinatorWithoutPlugin).
     */
    @Test
    @Order(1)
    void noAlertFiresForAHealthyBrokerWithThePlugin() throws Exception {
        awaitQuery("txn_preserver:retry_horizon_seconds == 3600");
        awaitQuery("pulsar_txn_active_count");
        awaitQuery("pulsar_txn_preserver_kept_outcomes and on (cluster, coordinator_id) pulsar_txn_active_count");
        assertThat(get(query("pulsar_txn_active_count unless on (cluster, coordinator_id)"
                + " pulsar_txn_preserver_kept_outcomes")))
                .as("every coordinator with stock's metric has the plugin's").contains("\"result\":[]");
        // A few evaluations of every rule after Prometheus had the series.
        Thread.sleep(3_000);
        String rules = get("/api/v1/rules");
        assertThat(rules).as("the thresholds group is loaded: %s", rules).contains("\"name\":\"txn-preserver-thresholds\"");
        assertThat(rules).as("every rule evaluates without error: %s", rules).doesNotContain("\"health\":\"err\"");
        String alerts = get("/api/v1/alerts");
        assertThat(active(alerts)).as("no alert on a healthy broker; alerts: %s", alerts).isEmpty();
    }

    @Test
    @Order(3)
    void theWindowAlertFiresWhileTheMemoryBoundDropsOutcomes() throws Exception {
        String before = get("/api/v1/alerts");
        assertThat(active(before)).as("before outcomes are dropped; alerts: %s", before)
                .doesNotContain("TxnPreserverWindowBelowRetryHorizon", "TxnPreserverMemoryEvictions");
        Instant deadline = Instant.now().plus(FIRING_TIMEOUT);
        String alerts = "";
        try (PulsarClient client = Txns.client(pulsar);
             Producer<String> producer = Txns.producer(client, Txns.uniqueTopic("alerts"))) {
            int committed = 0;
            while (Instant.now().isBefore(deadline)) {
                // Transactions keep ending, as on a busy coordinator, until Prometheus fires.
                for (int i = 0; i < 100; i++) {
                    Transaction txn = Txns.open(client, Duration.ofMinutes(5));
                    producer.newMessage(txn).value("m" + committed).send();
                    txn.commit().get(30, TimeUnit.SECONDS);
                    committed++;
                }
                alerts = get("/api/v1/alerts");
                if (firing(alerts, "TxnPreserverWindowBelowRetryHorizon")) {
                    break;
                }
            }
            System.out.println("AlertsIT: " + committed + " transactions committed; Prometheus alerts: " + alerts);
        }
        assertThat(firing(alerts, "TxnPreserverWindowBelowRetryHorizon"))
                .as("the window alert fires on the real Prometheus within %s; alerts: %s", FIRING_TIMEOUT, alerts)
                .isTrue();
        assertThat(firing(alerts, "TxnPreserverMemoryEvictions")).as("and the evictions info").isTrue();
        // Nothing else: the state topic takes the writes, the coordinator has the plugin. (The
        // commit after a timeout-abort of the test before may still be in its 15 minutes.)
        assertThat(active(alerts)).as("only the memory bound's alerts; alerts: %s", alerts)
                .isSubsetOf("TxnPreserverWindowBelowRetryHorizon", "TxnPreserverMemoryEvictions",
                        "TxnPreserverCommitAfterTimeoutAbort");
    }

    /**
     * A timeout-abort alone is harmless (a failed attempt's leftover): the alert stays silent
     * through it, and fires once a commit meets it.
     */
    @Test
    @Order(2)
    void theCommitAfterTimeoutAbortAlertStaysSilentForATimeoutAbortAndFiresForACommitOfIt() throws Exception {
        String alert = "TxnPreserverCommitAfterTimeoutAbort";
        try (PulsarClient client = Txns.client(pulsar); PulsarAdmin admin = Txns.admin(pulsar);
             Producer<String> producer = Txns.producer(client, Txns.uniqueTopic("alerts-timeout"));
             RetryingEndClient retry = RetryingEndClient.connect(pulsar.serviceUrl())) {
            TxnID txn = Txns.timedOut(client, admin, producer, "lost");
            awaitQuery("sum(pulsar_txn_preserver_timeout_aborts_total) >= 1");
            // Two more evaluations after Prometheus saw the timeout-abort.
            Thread.sleep(2_500);
            String silent = get("/api/v1/alerts");
            assertThat(active(silent)).as("silent for a timeout-abort nobody commits; alerts: %s", silent).isEmpty();

            assertThat(retry.commit(txn)).isEqualTo(EndAnswer.REFUSED_AS_ABORTED);

            Instant deadline = Instant.now().plus(FIRING_TIMEOUT);
            String alerts = get("/api/v1/alerts");
            while (!firing(alerts, alert) && Instant.now().isBefore(deadline)) {
                Thread.sleep(500);
                alerts = get("/api/v1/alerts");
            }
            assertThat(firing(alerts, alert)).as("fires for the commit; alerts: %s", alerts).isTrue();
            assertThat(active(alerts)).as("and no other alert; alerts: %s", alerts).containsExactly(alert);
        }
    }

    /** Waits until a PromQL expression has a result (a filter that holds). */
    private static void awaitQuery(String promql) throws Exception {
        Instant deadline = Instant.now().plus(Duration.ofSeconds(60));
        String query = query(promql);
        while (!get(query).contains("\"value\"")) {
            if (Instant.now().isAfter(deadline)) {
                throw new AssertionError("Prometheus never had " + promql + ": " + get(query));
            }
            Thread.sleep(500);
        }
    }

    @Test
    void everyMetricTheRulesAndTheDashboardQueryIsInTheBrokersScrape() throws Exception {
        Set<String> queried = new TreeSet<>();
        for (Path file : List.of(RULES, DASHBOARD)) {
            Matcher matcher = METRIC.matcher(Files.readString(file));
            while (matcher.find()) {
                queried.add(matcher.group());
            }
        }
        String scrape = AdminHttp.get(pulsar.httpUrl(), "/metrics/", null);
        assertThat(queried).as("metrics named in %s and %s", RULES, DASHBOARD).hasSizeGreaterThan(10);
        for (String metric : queried) {
            assertThat(scrape).as("%s in the broker's /metrics", metric).containsPattern("(?m)^" + metric + "\\{");
        }
    }

    /** The API path of an instant query. */
    private static String query(String promql) {
        return "/api/v1/query?query=" + java.net.URLEncoder.encode(promql, java.nio.charset.StandardCharsets.UTF_8);
    }

    private static ServiceProcess startPrometheus(LocalPulsar broker) throws Exception {
        Path dir = LocalPulsar.newDir("prometheus");
        Files.createDirectories(dir);
        // The shipped rules as they are, but for their "for:" clauses: a test does not wait minutes.
        Path rules = dir.resolve("rules.yml");
        Files.writeString(rules, Files.readString(RULES).replaceAll("(?m)^(\\s+)for: \\S+$", "$1for: 0s"));
        Path config = dir.resolve("prometheus.yml");
        URI web = URI.create(broker.httpUrl());
        Files.writeString(config, String.join("\n",
                "global:",
                "  scrape_interval: 1s",
                "  evaluation_interval: 1s",
                "rule_files:",
                "  - " + rules,
                "scrape_configs:",
                "  - job_name: pulsar",
                "    metrics_path: /metrics/",
                "    static_configs:",
                "      - targets: ['127.0.0.1:" + web.getPort() + "']",
                ""));
        prometheusPort = Ports.free(1)[0];
        ServiceProcess process = new ServiceProcess("prometheus", List.of(BIN.resolve("prometheus").toString(),
                "--config.file=" + config, "--storage.tsdb.path=" + dir.resolve("data"),
                "--web.listen-address=127.0.0.1:" + prometheusPort),
                Map.of(), dir.resolve("prometheus.out"), prometheusPort);
        process.start();
        Ports.awaitAnswer(prometheusPort, Duration.ofSeconds(60), process);
        // Its first scrapes, before any outcome is dropped: the counters' increase is seen.
        Instant deadline = Instant.now().plus(Duration.ofSeconds(60));
        while (!get("/api/v1/query?query=pulsar_txn_preserver_kept_outcomes").contains("\"value\"")) {
            if (Instant.now().isAfter(deadline)) {
                throw new IllegalStateException("Prometheus scraped nothing of the broker: "
                        + get("/api/v1/targets") + "\nlog:\n" + process.tail(30));
            }
            Thread.sleep(500);
        }
        return process;
    }

    /** Whether Prometheus's /api/v1/alerts answer has the alert in state firing. */
    private static boolean firing(String alerts, String name) {
        for (String alert : alerts.split("\\{\"labels\":")) {
            if (alert.contains("\"alertname\":\"" + name + "\"") && alert.contains("\"state\":\"firing\"")) {
                return true;
            }
        }
        return false;
    }

    /** The TxnPreserver* alerts in Prometheus's /api/v1/alerts answer that are pending or firing. */
    private static Set<String> active(String alerts) {
        Set<String> names = new TreeSet<>();
        for (String alert : alerts.split("\\{\"labels\":")) {
            Matcher name = ALERT.matcher(alert);
            if (name.find() && STATE.matcher(alert).find()) {
                names.add(name.group(1));
            }
        }
        return names;
    }

    private static String get(String path) throws Exception {
        HttpResponse<String> response = HttpClient.newHttpClient().send(
                HttpRequest.newBuilder(URI.create("http://127.0.0.1:" + prometheusPort + path)).build(),
                HttpResponse.BodyHandlers.ofString());
        return response.body();
    }

    private static void requireBinary(String name) {
        if (!Files.isExecutable(BIN.resolve(name))) {
            throw new IllegalStateException("No " + BIN.resolve(name) + ": install Debian's prometheus package"
                    + " (apt-get install prometheus), or set -Dtxnpreserver.prometheus.bin to the folder of"
                    + " Prometheus's binaries");
        }
    }

    private static String run(List<String> command) throws Exception {
        return run(command, null);
    }

    /** Runs a command in a folder (null: this process's), asserts it succeeds, and returns its output. */
    private static String run(List<String> command, Path dir) throws Exception {
        ProcessBuilder builder = new ProcessBuilder(command).redirectErrorStream(true);
        if (dir != null) {
            builder.directory(dir.toFile());
        }
        Process process = builder.start();
        String output = new String(process.getInputStream().readAllBytes());
        assertThat(process.waitFor(60, TimeUnit.SECONDS)).isTrue();
        assertThat(process.exitValue()).as("%s: %s", command, output).isZero();
        return output;
    }
}
