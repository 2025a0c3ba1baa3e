package io.github.txnpreserver.client;

import java.io.IOException;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.time.Duration;
import java.time.Instant;
import java.util.HashMap;
import java.util.Map;
import java.util.Objects;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.Executor;
import java.util.concurrent.TimeUnit;
import org.apache.pulsar.client.api.Authentication;
import org.apache.pulsar.client.api.AuthenticationDataProvider;
import org.apache.pulsar.client.api.PulsarClientException;
import org.apache.pulsar.client.api.transaction.TxnID;

/**
 * Asks a broker with the plugin what became of a transaction, without ending it: the outcome
 * query, {@code GET /txn-preserver/transactions/{coordinatorId}/{sequence}} on the broker's web
 * service (docs/answers.md, "Outcome query"). The owner role and super users may ask (as for
 * an end request); any broker forwards to the one that serves the coordinator; a coordinator
 * loading or moving is asked again within the policy.
 *
 * <pre>{@code
 * OutcomeQuery query = OutcomeQuery.of("http://broker:8080", AuthenticationFactory.token(jwt));
 * TransactionState state = query.ask(txnId).get();   // state(), abortedBy(), endedAt(), ...
 * }</pre>
 *
 * <p>Authentication by HTTP headers (tokens, basic, or a custom provider's headers); a TLS
 * client certificate is not sent.
 */
public final class OutcomeQuery {

    private static final String PATH = "/txn-preserver/transactions/";

    private final URI webService;
    private final Authentication authentication;
    private final EndRetryPolicy policy;
    private final HttpClient http;

    private OutcomeQuery(URI webService, Authentication authentication, EndRetryPolicy policy) {
        this.webService = webService;
        this.authentication = authentication;
        this.policy = policy;
        this.http = HttpClient.newBuilder().followRedirects(HttpClient.Redirect.NORMAL)
                .connectTimeout(Duration.ofSeconds(10)).build();
    }

    /** Asks through {@code webServiceUrl} (any broker's, e.g. {@code http://broker:8080}) without authentication. */
    public static OutcomeQuery of(String webServiceUrl) {
        return of(webServiceUrl, null, EndRetryPolicy.DEFAULT);
    }

    public static OutcomeQuery of(String webServiceUrl, Authentication authentication) {
        return of(webServiceUrl, authentication, EndRetryPolicy.DEFAULT);
    }

    /** @param authentication the client's, or null for none; started here */
    public static OutcomeQuery of(String webServiceUrl, Authentication authentication, EndRetryPolicy policy) {
        URI uri = URI.create(Objects.requireNonNull(webServiceUrl, "webServiceUrl").replaceAll("/+$", ""));
        if (!"http".equals(uri.getScheme()) && !"https".equals(uri.getScheme())) {
            throw new IllegalArgumentException("not a web service URL (http or https): " + webServiceUrl);
        }
        if (authentication != null) {
            try {
                authentication.start();
            } catch (PulsarClientException e) {
                throw new IllegalArgumentException("the authentication could not start", e);
            }
        }
        return new OutcomeQuery(uri, authentication, Objects.requireNonNull(policy, "policy"));
    }

    /**
     * What the coordinator knows of the transaction. Fails with {@link OutcomeQueryException}
     * when the broker refuses (another role's transaction: 403; no plugin: 404 or 501), or
     * when no answer came within the policy (the last 503's body, or the connection error).
     */
    public CompletableFuture<TransactionState> ask(TxnID txnId) {
        Objects.requireNonNull(txnId, "txnId");
        CompletableFuture<TransactionState> result = new CompletableFuture<>();
        attempt(txnId, result, System.nanoTime() + policy.giveUpAfter().toNanos(), null);
        return result;
    }

    private void attempt(TxnID txnId, CompletableFuture<TransactionState> result, long deadlineNanos,
                         Duration previousBackoff) {
        HttpRequest request;
        try {
            request = request(txnId);
        } catch (PulsarClientException | RuntimeException e) {
            result.completeExceptionally(e);
            return;
        }
        http.sendAsync(request, HttpResponse.BodyHandlers.ofString())
                .whenComplete((response, error) -> {
                    if (error == null && response.statusCode() == 200) {
                        try {
                            result.complete(parse(response.body()));
                        } catch (RuntimeException e) {
                            result.completeExceptionally(new OutcomeQueryException(200, response.body(), e));
                        }
                        return;
                    }
                    if (error == null && response.statusCode() != 503) {
                        result.completeExceptionally(new OutcomeQueryException(response.statusCode(),
                                response.body(), null));
                        return;
                    }
                    Duration backoff = policy.backoffAfter(previousBackoff);
                    if (System.nanoTime() + backoff.toNanos() > deadlineNanos) {
                        result.completeExceptionally(error != null ? error
                                : new OutcomeQueryException(response.statusCode(), response.body(), null));
                        return;
                    }
                    Executor later = CompletableFuture.delayedExecutor(backoff.toNanos(), TimeUnit.NANOSECONDS);
                    later.execute(() -> attempt(txnId, result, deadlineNanos, backoff));
                });
    }

    private HttpRequest request(TxnID txnId) throws PulsarClientException {
        URI uri = URI.create(webService + PATH + txnId.getMostSigBits() + "/" + txnId.getLeastSigBits());
        HttpRequest.Builder request = HttpRequest.newBuilder(uri).GET().timeout(policy.attemptTimeout())
                .header("Accept", "application/json");
        if (authentication != null) {
            try {
                AuthenticationDataProvider data = authentication.getAuthData(uri.getHost());
                if (data.hasDataForHttp() && data.getHttpHeaders() != null) {
                    for (Map.Entry<String, String> header : data.getHttpHeaders()) {
                        request.header(header.getKey(), header.getValue());
                    }
                }
            } catch (PulsarClientException e) {
                throw e;
            } catch (Exception e) {
                throw new PulsarClientException(e);
            }
        }
        return request.build();
    }

    /** The query's JSON: one flat object of strings and numbers. */
    static TransactionState parse(String json) {
        Map<String, String> fields = FlatJson.parse(json);
        return new TransactionState(fields.get("txnId"), TransactionState.State.valueOf(required(fields, "state")),
                fields.containsKey("abortedBy") ? TransactionState.AbortedBy.valueOf(fields.get("abortedBy")) : null,
                fields.get("owner"), instant(fields, "openedAt"), number(fields, "timeoutMillis"),
                instant(fields, "endedAt"), instant(fields, "keptUntil"), instant(fields, "windowStart"),
                number(fields, "highestIssued"));
    }

    private static String required(Map<String, String> fields, String name) {
        String value = fields.get(name);
        if (value == null) {
            throw new IllegalArgumentException("the answer has no " + name);
        }
        return value;
    }

    private static Instant instant(Map<String, String> fields, String name) {
        return fields.containsKey(name) ? Instant.parse(fields.get(name)) : null;
    }

    private static Long number(Map<String, String> fields, String name) {
        return fields.containsKey(name) ? Long.valueOf(fields.get(name)) : null;
    }

    /** The broker refused the query, or answered something that is not an answer. */
    public static final class OutcomeQueryException extends IOException {
        private final int status;

        OutcomeQueryException(int status, String body, Throwable cause) {
            super("outcome query answered HTTP " + status + ": " + body, cause);
            this.status = status;
        }

        /** The HTTP status: 403 another role's transaction, 404 no plugin or no such path, 501 no plugin on the coordinator. */
        public int status() {
            return status;
        }
    }

    /** A reader of one flat JSON object whose values are strings, numbers, booleans or null. */
    static final class FlatJson {
        private final String text;
        private int at;

        private FlatJson(String text) {
            this.text = text;
        }

        static Map<String, String> parse(String text) {
            FlatJson json = new FlatJson(text);
            Map<String, String> fields = new HashMap<>();
            json.expect('{');
            if (json.peek() == '}') {
                json.at++;
                return fields;
            }
            while (true) {
                String name = json.string();
                json.expect(':');
                String value = json.value();
                if (value != null) {
                    fields.put(name, value);
                }
                char next = json.next();
                if (next == '}') {
                    return fields;
                }
                if (next != ',') {
                    throw new IllegalArgumentException("expected , or } at " + (json.at - 1));
                }
            }
        }

        private String value() {
            char c = peek();
            if (c == '"') {
                return string();
            }
            int start = at;
            while (at < text.length() && ",}".indexOf(text.charAt(at)) < 0 && !Character.isWhitespace(text.charAt(at))) {
                at++;
            }
            String literal = text.substring(start, at);
            return "null".equals(literal) ? null : literal;
        }

        private String string() {
            expect('"');
            StringBuilder value = new StringBuilder();
            while (true) {
                if (at >= text.length()) {
                    throw new IllegalArgumentException("unterminated string");
                }
                char c = text.charAt(at++);
                if (c == '"') {
                    return value.toString();
                }
                if (c == '\\') {
                    char escaped = text.charAt(at++);
                    switch (escaped) {
                        case 'u' -> {
                            value.append((char) Integer.parseInt(text.substring(at, at + 4), 16));
                            at += 4;
                        }
                        case 'n' -> value.append('\n');
                        case 't' -> value.append('\t');
                        case 'r' -> value.append('\r');
                        case 'b' -> value.append('\b');
                        case 'f' -> value.append('\f');
                        default -> value.append(escaped);
                    }
                } else {
                    value.append(c);
                }
            }
        }

        private void expect(char expected) {
            char c = next();
            if (c != expected) {
                throw new IllegalArgumentException("expected " + expected + " at " + (at - 1) + " in " + text);
            }
        }

        private char next() {
            char c = peek();
            at++;
            return c;
        }

        private char peek() {
            while (at < text.length() && Character.isWhitespace(text.charAt(at))) {
                at++;
            }
            if (at >= text.length()) {
                throw new IllegalArgumentException("unexpected end of " + text);
            }
            return text.charAt(at);
        }
    }
}
