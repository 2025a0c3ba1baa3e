package io.github.txnpreserver.it;

import java.io.IOException;
import java.io.InputStream;
import java.net.HttpURLConnection;
import java.net.URI;
import java.nio.charset.StandardCharsets;

/** Plain admin GETs, for readiness checks that must not depend on a client library's retries. */
public final class AdminHttp {

    private AdminHttp() {
    }

    /** The body of a 200 answer, or null for any other answer or none. */
    public static String get(String httpUrl, String path, String bearerToken) {
        try {
            HttpURLConnection connection = (HttpURLConnection) URI.create(httpUrl + path).toURL().openConnection();
            connection.setConnectTimeout(1000);
            connection.setReadTimeout(5000);
            if (bearerToken != null) {
                connection.setRequestProperty("Authorization", "Bearer " + bearerToken);
            }
            try {
                if (connection.getResponseCode() != 200) {
                    return null;
                }
                try (InputStream body = connection.getInputStream()) {
                    return new String(body.readAllBytes(), StandardCharsets.UTF_8);
                }
            } finally {
                connection.disconnect();
            }
        } catch (IOException e) {
            return null;
        }
    }
}
