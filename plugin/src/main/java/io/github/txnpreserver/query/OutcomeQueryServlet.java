package io.github.txnpreserver.query;

import io.github.txnpreserver.resolution.TransactionState;
import io.github.txnpreserver.store.PreservingTransactionMetadataStore;
import java.io.IOException;
import java.net.URI;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.time.Instant;
import java.util.Optional;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import javax.servlet.http.HttpServlet;
import javax.servlet.http.HttpServletRequest;
import javax.servlet.http.HttpServletResponse;
import org.apache.pulsar.broker.PulsarService;
import org.apache.pulsar.broker.ServiceConfiguration;
import org.apache.pulsar.broker.TransactionMetadataStoreService;
import org.apache.pulsar.broker.authentication.AuthenticationDataSource;
import org.apache.pulsar.broker.web.AuthenticationFilter;
import org.apache.pulsar.client.api.transaction.TxnID;
import org.apache.pulsar.common.util.FutureUtil;
import org.apache.pulsar.transaction.coordinator.TransactionCoordinatorID;
import org.apache.pulsar.transaction.coordinator.TransactionMetadataStore;
import org.apache.pulsar.transaction.coordinator.exceptions.CoordinatorException.CoordinatorNotFoundException;

/**
 * {@code GET /txn-preserver/transactions/{coordinatorId}/{sequence}}: what the coordinator knows
 * of a transaction, without acting on it (docs/answers.md, "Outcome query"). Answers JSON:
 * <pre>
 *   200 {"txnId":"(1,5)","state":"ABORTED","abortedBy":"TIMEOUT","owner":"alice",
 *        "endedAt":"2026-12-05T15:30:00Z","keptUntil":"2026-12-08T15:30:00Z"}
 *   307 to the broker that serves the coordinator
 *   403 a role that neither owns the transaction nor is a super user (as an end request)
 *   503 the coordinator is loading, moving, or cannot ask its kept outcomes now: retry
 * </pre>
 * The broker's authentication filter runs first (as for the admin API), and its
 * authorization decides as for an end request: with authorization on, only the owner role
 * and super users learn a transaction's state; "forgotten" and "never issued" name no owner
 * and are answered to any authenticated role, as an end request's "not found" is.
 */
final class OutcomeQueryServlet extends HttpServlet {

    private static final Pattern PATH = Pattern.compile("/transactions/(\\d{1,19})/(\\d{1,19})");
    /** The longest a query waits for the coordinator (a restore still reading waits less: then 503). */
    private static final Duration WAIT = Duration.ofSeconds(30);
    private static final String REDIRECTED = "redirected";
    /** The header Pulsar's proxy names the client's role in. */
    private static final String ORIGINAL_PRINCIPAL = "X-Original-Principal";

    private final transient PulsarService pulsar;

    OutcomeQueryServlet(PulsarService pulsar) {
        this.pulsar = pulsar;
    }

    @Override
    protected void doGet(HttpServletRequest request, HttpServletResponse response) throws IOException {
        Matcher path = PATH.matcher(request.getPathInfo() == null ? "" : request.getPathInfo());
        if (!path.matches()) {
            error(response, HttpServletResponse.SC_NOT_FOUND, "expected " + OutcomeQueryPlugin.BASE_PATH
                    + "/transactions/{coordinatorId}/{sequence}");
            return;
        }
        long coordinatorId;
        long sequence;
        try {
            coordinatorId = Long.parseLong(path.group(1));
            sequence = Long.parseLong(path.group(2));
        } catch (NumberFormatException e) {
            error(response, HttpServletResponse.SC_BAD_REQUEST, "coordinator id and sequence must be longs");
            return;
        }
        TransactionMetadataStoreService coordinators = pulsar.getTransactionMetadataStoreService();
        if (coordinators == null) {
            error(response, HttpServletResponse.SC_NOT_FOUND, "transactions are not enabled on this broker"
                    + " (transactionCoordinatorEnabled=false)");
            return;
        }
        TransactionMetadataStore store = coordinators.getStores().get(TransactionCoordinatorID.get(coordinatorId));
        if (store == null) {
            redirectToOwner(request, response, coordinatorId);
            return;
        }
        if (!(store instanceof PreservingTransactionMetadataStore preserving)) {
            error(response, HttpServletResponse.SC_NOT_IMPLEMENTED, "coordinator " + coordinatorId
                    + " keeps no outcomes (transactionMetadataStoreProviderClassName is not the plugin's)");
            return;
        }
        try {
            TransactionState state = preserving.describe(new TxnID(coordinatorId, sequence))
                    .get(WAIT.toMillis(), TimeUnit.MILLISECONDS);
            if (!mayRead(request, state)) {
                error(response, HttpServletResponse.SC_FORBIDDEN, "Client (" + roleOf(request)
                        + ") is neither the owner of the transaction " + state.txnId() + " nor a super user");
                return;
            }
            respond(response, HttpServletResponse.SC_OK, json(state));
        } catch (ExecutionException e) {
            Throwable cause = FutureUtil.unwrapCompletionException(e.getCause());
            if (cause instanceof CoordinatorNotFoundException) {
                unavailable(response, cause.getMessage());
            } else {
                error(response, HttpServletResponse.SC_INTERNAL_SERVER_ERROR, String.valueOf(cause));
            }
        } catch (TimeoutException e) {
            unavailable(response, "coordinator " + coordinatorId + " did not answer within " + WAIT.toSeconds() + " s");
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            unavailable(response, "interrupted");
        }
    }

    /** As an end request: the owner, a super user, anyone for a transaction without owner or with authorization off. */
    private boolean mayRead(HttpServletRequest request, TransactionState state)
            throws ExecutionException, InterruptedException, TimeoutException {
        ServiceConfiguration config = pulsar.getConfiguration();
        if (state.owner() == null || !config.isAuthenticationEnabled() || !config.isAuthorizationEnabled()) {
            return true;
        }
        String role = roleOf(request);
        if (state.owner().equals(role)) {
            return true;
        }
        AuthenticationDataSource data = (AuthenticationDataSource) request.getAttribute(
                AuthenticationFilter.AuthenticatedDataAttributeName);
        return role != null && pulsar.getBrokerService().getAuthorizationService().isSuperUser(role, data)
                .get(WAIT.toMillis(), TimeUnit.MILLISECONDS);
    }

    /** The authenticated role, or the client's behind one of the broker's proxy roles. */
    private String roleOf(HttpServletRequest request) {
        String role = (String) request.getAttribute(AuthenticationFilter.AuthenticatedRoleAttributeName);
        String original = request.getHeader(ORIGINAL_PRINCIPAL);
        return role != null && original != null && pulsar.getConfiguration().getProxyRoles().contains(role)
                ? original : role;
    }

    private void redirectToOwner(HttpServletRequest request, HttpServletResponse response, long coordinatorId)
            throws IOException {
        if (request.getParameter(REDIRECTED) != null) {
            unavailable(response, "coordinator " + coordinatorId + " is not loaded on the broker that owns it yet");
            return;
        }
        Optional<URI> owner;
        try {
            owner = CoordinatorOwner.webServiceOf(pulsar, coordinatorId, request.isSecure())
                    .get(WAIT.toMillis(), TimeUnit.MILLISECONDS);
        } catch (ExecutionException | TimeoutException e) {
            unavailable(response, "coordinator " + coordinatorId + " has no owner now: " + e);
            return;
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            unavailable(response, "interrupted");
            return;
        }
        if (owner.isEmpty()) {
            error(response, HttpServletResponse.SC_NOT_FOUND, "coordinator " + coordinatorId + " does not exist");
            return;
        }
        response.setStatus(HttpServletResponse.SC_TEMPORARY_REDIRECT);
        response.setHeader("Location", owner.get().resolve(request.getRequestURI()) + "?" + REDIRECTED + "=true");
    }

    private static void unavailable(HttpServletResponse response, String message) throws IOException {
        response.setHeader("Retry-After", "1");
        error(response, HttpServletResponse.SC_SERVICE_UNAVAILABLE, message);
    }

    private static void error(HttpServletResponse response, int status, String message) throws IOException {
        respond(response, status, "{\"error\":" + quote(message) + "}");
    }

    private static void respond(HttpServletResponse response, int status, String json) throws IOException {
        response.setStatus(status);
        response.setContentType("application/json");
        byte[] body = json.getBytes(StandardCharsets.UTF_8);
        response.setContentLength(body.length);
        response.getOutputStream().write(body);
    }

    static String json(TransactionState state) {
        StringBuilder json = new StringBuilder("{\"txnId\":").append(quote(state.txnId()))
                .append(",\"state\":").append(quote(state.state().name()));
        if (state.abortedBy() != null) {
            json.append(",\"abortedBy\":").append(quote(state.abortedBy().name()));
        }
        if (state.owner() != null) {
            json.append(",\"owner\":").append(quote(state.owner()));
        }
        time(json, "openedAt", state.openedAtMillis());
        if (state.timeoutMillis() > 0) {
            json.append(",\"timeoutMillis\":").append(state.timeoutMillis());
        }
        time(json, "endedAt", state.endedAtMillis());
        time(json, "keptUntil", state.keptUntilMillis());
        time(json, "windowStart", state.windowStartMillis());
        if (state.state() == TransactionState.State.FORGOTTEN
                || state.state() == TransactionState.State.NEVER_ISSUED) {
            json.append(",\"highestIssued\":").append(state.highestIssued());
        }
        return json.append('}').toString();
    }

    private static void time(StringBuilder json, String name, long millis) {
        if (millis > 0) {
            json.append(",\"").append(name).append("\":").append(quote(Instant.ofEpochMilli(millis).toString()));
        }
    }

    static String quote(String value) {
        StringBuilder quoted = new StringBuilder("\"");
        for (int i = 0; i < value.length(); i++) {
            char c = value.charAt(i);
            switch (c) {
                case '"' -> quoted.append("\\\"");
                case '\\' -> quoted.append("\\\\");
                default -> {
                    if (c < 0x20) {
                        quoted.append(String.format("\\u%04x", (int) c));
                    } else {
                        quoted.append(c);
                    }
                }
            }
        }
        return quoted.append('"').toString();
    }
}
