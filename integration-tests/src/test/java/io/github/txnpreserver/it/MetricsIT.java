package io.github.txnpreserver.it;

import static org.assertj.core.api.Assertions.assertThat;

import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.util.Map;
import java.util.Set;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import org.apache.pulsar.client.admin.PulsarAdmin;
import org.apache.pulsar.client.api.MessageId;
import org.apache.pulsar.client.api.Producer;
import org.apache.pulsar.client.api.PulsarClient;
import org.apache.pulsar.client.api.transaction.TxnID;
import org.apache.pulsar.common.policies.data.RetentionPolicies;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.DisplayName;
import org.junit.jupiter.api.Test;

/** What an operator sees of a broker with the plugin, on whichever Pulsar line the run is on. */
@DisplayName("A broker with the plugin, as its operator sees it: /metrics, the admin API, the startup line")
class MetricsIT {

    private static LocalPulsar pulsar;

    @BeforeAll
    static void startBroker() throws Exception {
        pulsar = LocalPulsar.start("metrics", Map.of("transactionMetaPersistCount", "2"));
    }

    @AfterAll
    static void stopBroker() throws Exception {
        pulsar.close();
    }

    @Test
    void exportsThePreserversMetrics() throws Exception {
        try (PulsarClient client = Txns.client(pulsar);
             Producer<String> producer = Txns.producer(client, Txns.uniqueTopic("metrics"));
             RetryingEndClient retry = RetryingEndClient.connect(pulsar.serviceUrl())) {
            Txns.committed(client, producer, "1");
            TxnID aborted = Txns.aborted(client, producer, "2");
            TxnID committed = Txns.committed(client, producer, "3");
            assertThat(retry.commit(committed)).isEqualTo(EndAnswer.SUCCESS);
            assertThat(retry.abort(aborted)).isEqualTo(EndAnswer.SUCCESS);
            assertThat(retry.abort(committed)).isEqualTo(EndAnswer.REFUSED_AS_COMMITTED);
        }

        String metrics = scrape();

        assertThat(sample(metrics, "pulsar_txn_preserver_kept_outcomes", "")).as("all three: retention is by time")
                .isEqualTo(3);
        assertThat(sample(metrics, "pulsar_txn_preserver_floor_outcomes", "")).as("the newest 2 of the one client")
                .isEqualTo(2);
        assertThat(sample(metrics, "pulsar_txn_preserver_kept_bytes", "")).isPositive();
        assertThat(sample(metrics, "pulsar_txn_preserver_window_seconds", "")).isBetween(0.0, 600.0);
        assertThat(sample(metrics, "pulsar_txn_preserver_retries_answered_total", ",outcome=\"committed\""))
                .isEqualTo(1);
        assertThat(sample(metrics, "pulsar_txn_preserver_retries_answered_total", ",outcome=\"aborted\""))
                .isEqualTo(1);
        assertThat(sample(metrics, "pulsar_txn_preserver_kept_lookups_total", "")).isGreaterThanOrEqualTo(3);
        assertThat(sample(metrics, "pulsar_txn_preserver_evictions_total", ",limit=\"memory\"")).isZero();
        assertThat(sample(metrics, "pulsar_txn_preserver_evictions_total", ",limit=\"floor\"")).isZero();
        assertThat(sample(metrics, "pulsar_txn_preserver_state_write_latency_seconds_count", ""))
                .as("one flush per end at most (ends of one flush share it)").isBetween(1.0, 6.0);
        assertThat(sample(metrics, "pulsar_txn_preserver_state_write_failures_total", "")).isZero();
        assertThat(sample(metrics, "pulsar_txn_preserver_restore_duration_seconds", ""))
                .as("the restore of a new, empty state topic: done in moments").isBetween(0.0, 60.0);
        assertThat(sample(metrics, "pulsar_txn_preserver_restore_in_progress", "")).isZero();
        assertThat(sample(metrics, "pulsar_txn_preserver_restore_malformed_records", "")).isZero();
        assertThat(sample(metrics, "pulsar_txn_preserver_ends_waiting", "")).isBetween(0.0, 3.0);
        assertThat(sample(metrics, "pulsar_txn_preserver_ends_waiting_limit", "")).isEqualTo(50_000);
        // The broker's own series: the configured bound and retention (the overlay's defaults), and the build.
        assertThat(brokerSample(metrics, "pulsar_txn_preserver_memory_bound_bytes", "")).isEqualTo(64.0 * 1024 * 1024);
        assertThat(brokerSample(metrics, "pulsar_txn_preserver_retention_seconds", "")).isEqualTo(72.0 * 3600);
        assertThat(brokerSample(metrics, "pulsar_txn_preserver_build_info", ",version=\""
                + System.getProperty("txnpreserver.version") + "\",commit=\"" + PulsarDistribution.expectedCommit()
                + "\",pulsar_version=\""
                + PulsarDistribution.brokerVersion() + "\"")).isEqualTo(1);
        assertThat(metrics).as("stock coordinator metrics still exported").contains("pulsar_txn_active_count{").contains("pulsar_txn_committed_total{");
    }

    /**
     * Admin requests that carry a JSON body (POST and PUT) are served with the plugin loaded:
     * on 4.0.12 any broker interceptor made each of them fail with HTTP 400 (apache/pulsar#26185);
     * the plugin loads none.
     */
    @Test
    void servesAdminRequestsWithAJsonBody() throws Exception {
        try (PulsarAdmin admin = PulsarAdmin.builder().serviceHttpUrl(pulsar.httpUrl()).build()) {
            String namespace = "public/admin-" + System.nanoTime();
            admin.namespaces().createNamespace(namespace, Set.of("standalone"));
            admin.namespaces().setRetention(namespace, new RetentionPolicies(60, 10));
            String topic = "persistent://" + namespace + "/t";
            admin.topics().createNonPartitionedTopic(topic, Map.of("owner", "metrics-it"));
            admin.topics().createSubscription(topic, "s", MessageId.earliest);
            admin.topics().updateProperties(topic, Map.of("purpose", "admin writes"));

            assertThat(admin.namespaces().getRetention(namespace).getRetentionTimeInMinutes()).isEqualTo(60);
            assertThat(admin.topics().getSubscriptions(topic)).containsExactly("s");
            assertThat(admin.topics().getProperties(topic)).containsEntry("purpose", "admin writes");
        }
    }

    /** The plugin names the broker's Pulsar release at startup, and whether its line is supported. */
    @Test
    void namesTheBrokersReleaseAtStartup() throws Exception {
        String release = PulsarDistribution.brokerVersion();
        assertThat(pulsar.output()).contains("Transaction outcome preserver " + System.getProperty("txnpreserver.version") + ": Pulsar " + release + ": line "
                + release.substring(0, release.lastIndexOf('.')) + " is supported");
    }

    private static String scrape() throws Exception {
        HttpResponse<String> response = HttpClient.newHttpClient().send(
                HttpRequest.newBuilder(URI.create(pulsar.httpUrl() + "/metrics/")).build(),
                HttpResponse.BodyHandlers.ofString());
        assertThat(response.statusCode()).isEqualTo(200);
        return response.body();
    }

    /** The value of a broker-level sample of the standalone cluster, with extra labels as given. */
    private static double brokerSample(String metrics, String name, String extraLabels) {
        Matcher matcher = Pattern.compile("(?m)^" + Pattern.quote(name + "{cluster=\"standalone\"" + extraLabels)
                + ",?\\} (\\S+)$").matcher(metrics);
        assertThat(matcher.find()).as(name + extraLabels).isTrue();
        return Double.parseDouble(matcher.group(1));
    }

    /** The value of a sample of coordinator 0 of the standalone cluster, with extra labels as given. */
    private static double sample(String metrics, String name, String extraLabels) {
        Pattern line = Pattern.compile("^" + Pattern.quote(name + "{cluster=\"standalone\",coordinator_id=\"0\""
                + extraLabels + "}") + " (\\S+)", Pattern.MULTILINE);
        Matcher matcher = line.matcher(metrics);
        assertThat(matcher.find()).as("%s%s in /metrics", name, extraLabels).isTrue();
        return Double.parseDouble(matcher.group(1));
    }
}
