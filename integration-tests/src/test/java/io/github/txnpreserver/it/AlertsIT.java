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
import org.junit.jupiter.api.Test;

/**
 * The alert rules and the Grafana dashboard the repository ships ({@code monitoring/}), on a
 * real Prometheus server (Debian's {@code prometheus} package: the server and
 * {@code promtool}) that scrapes a real broker with the plugin.
 */
@DisplayName("The shipped alert rules and dashboard, on a real Prometheus scraping a real broker")
class AlertsIT {

    private static final Path RULES = PulsarDistribution.repoRoot().resolve("monitoring/txn-preserver-rules.yml");
    private static final Path DASHBOARD =
            PulsarDistribution.repoRoot().resolve("monitoring/txn-preserver-dashboard.json");
    private static final Path BIN = Paths.get(System.getProperty("txnpreserver.prometheus.bin", "/usr/bin"));
    private static final Pattern METRIC = Pattern.compile("pulsar_txn_preserver_[a-z_]+");
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

    @Test
    void theWindowAlertFiresWhileTheMemoryBoundDropsOutcomes() throws Exception {
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
        assertThat(firing(alerts, "TxnPreserverMemoryEvictions")).as("and the evictions warning").isTrue();
    }

    /**
     * A timeout-abort alone is harmless (a failed attempt's leftover): the alert stays silent
     * through it, and fires once a commit meets it.
     */
    @Test
    void theCommitAfterTimeoutAbortAlertStaysSilentForATimeoutAbortAndFiresForACommitOfIt() throws Exception {
        String alert = "TxnPreserverCommitAfterTimeoutAbort";
        try (PulsarClient client = Txns.client(pulsar); PulsarAdmin admin = Txns.admin(pulsar);
             Producer<String> producer = Txns.producer(client, Txns.uniqueTopic("alerts-timeout"));
             RetryingEndClient retry = RetryingEndClient.connect(pulsar.serviceUrl())) {
            TxnID txn = Txns.timedOut(client, admin, producer, "lost");
            awaitQuery("sum(pulsar_txn_preserver_timeout_aborts_total) >= 1");
            // Two more evaluations after Prometheus saw the timeout-abort.
            Thread.sleep(2_500);
            assertThat(firing(get("/api/v1/alerts"), alert)).as("silent for a timeout-abort nobody commits")
                    .isFalse();

            assertThat(retry.commit(txn)).isEqualTo(EndAnswer.REFUSED_AS_ABORTED);

            Instant deadline = Instant.now().plus(FIRING_TIMEOUT);
            String alerts = get("/api/v1/alerts");
            while (!firing(alerts, alert) && Instant.now().isBefore(deadline)) {
                Thread.sleep(500);
                alerts = get("/api/v1/alerts");
            }
            assertThat(firing(alerts, alert)).as("fires for the commit; alerts: %s", alerts).isTrue();
        }
    }

    /** Waits until a PromQL expression has a result (a filter that holds). */
    private static void awaitQuery(String promql) throws Exception {
        Instant deadline = Instant.now().plus(Duration.ofSeconds(60));
        String query = "/api/v1/query?query=" + java.net.URLEncoder.encode(promql, java.nio.charset.StandardCharsets.UTF_8);
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
        Process process = new ProcessBuilder(command).redirectErrorStream(true).start();
        String output = new String(process.getInputStream().readAllBytes());
        assertThat(process.waitFor(60, TimeUnit.SECONDS)).isTrue();
        assertThat(process.exitValue()).as("%s: %s", command, output).isZero();
        return output;
    }
}
