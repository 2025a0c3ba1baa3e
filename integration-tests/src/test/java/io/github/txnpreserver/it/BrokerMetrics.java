package io.github.txnpreserver.it;

import static org.assertj.core.api.Assertions.assertThat;

import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

/** Samples of the plugin's metrics, scraped from a broker's /metrics endpoint. */
final class BrokerMetrics {

    private BrokerMetrics() {
    }

    /** The value of a metric of coordinator 0, whatever its other labels. */
    static double ofCoordinatorZero(LocalPulsar pulsar, String name) throws Exception {
        return ofCoordinatorZero(pulsar.httpUrl(), name);
    }

    /** The same, from the broker at this HTTP address. */
    static double ofCoordinatorZero(String httpUrl, String name) throws Exception {
        String body = HttpClient.newHttpClient().send(HttpRequest.newBuilder(URI.create(httpUrl + "/metrics/"))
                .build(), HttpResponse.BodyHandlers.ofString()).body();
        Matcher matcher = Pattern.compile("^" + Pattern.quote(name) + "\\{[^}]*coordinator_id=\"0\"[^}]*\\} (\\S+)",
                Pattern.MULTILINE).matcher(body);
        assertThat(matcher.find()).as(name).isTrue();
        return Double.parseDouble(matcher.group(1));
    }
}
