package io.github.txnpreserver.query;

import java.lang.reflect.InvocationTargetException;
import java.lang.reflect.Method;
import java.net.URI;
import java.net.URL;
import java.util.Optional;
import java.util.concurrent.CompletableFuture;
import org.apache.pulsar.broker.PulsarService;
import org.apache.pulsar.broker.lookup.LookupResult;
import org.apache.pulsar.broker.namespace.LookupOptions;
import org.apache.pulsar.broker.namespace.NamespaceService;
import org.apache.pulsar.common.lookup.data.LookupData;
import org.apache.pulsar.common.naming.ServiceUnitId;
import org.apache.pulsar.common.naming.SystemTopicNames;
import org.apache.pulsar.common.naming.TopicName;

/**
 * The web address of the broker that serves a coordinator, for a query that reached another
 * one. The broker's call for it changed between lines (4.x: {@code getWebServiceUrlAsync};
 * 5.0: {@code getLookupResultForWebRequestAsync}), so it is found by name, once.
 */
final class CoordinatorOwner {

    private static final Method WEB_SERVICE_URL = method("getWebServiceUrlAsync");
    private static final Method WEB_LOOKUP_RESULT = WEB_SERVICE_URL != null ? null
            : method("getLookupResultForWebRequestAsync");

    private CoordinatorOwner() {
    }

    /** The owner's web service address (scheme, host and port), empty when no broker owns it now. */
    @SuppressWarnings("unchecked")
    static CompletableFuture<Optional<URI>> webServiceOf(PulsarService pulsar, long coordinatorId, boolean https) {
        TopicName topic = SystemTopicNames.TRANSACTION_COORDINATOR_ASSIGN.getPartition((int) coordinatorId);
        LookupOptions.LookupOptionsBuilder builder = LookupOptions.builder().authoritative(false).readOnly(false);
        if (https) {
            invokeIfPresent(builder, "requestHttps");
        }
        LookupOptions options = builder.build();
        NamespaceService namespaces = pulsar.getNamespaceService();
        try {
            if (WEB_SERVICE_URL != null) {
                return ((CompletableFuture<Optional<URL>>) WEB_SERVICE_URL.invoke(namespaces, topic, options))
                        .thenApply(url -> url.map(CoordinatorOwner::toUri));
            }
            if (WEB_LOOKUP_RESULT != null) {
                return ((CompletableFuture<Optional<LookupResult>>) WEB_LOOKUP_RESULT.invoke(namespaces, topic,
                        options)).thenApply(result -> result.map(LookupResult::getLookupData)
                        .map(data -> https ? data.getHttpUrlTls() : httpUrl(data)).map(URI::create));
            }
            return CompletableFuture.failedFuture(new UnsupportedOperationException(
                    "this Pulsar's NamespaceService has no web-service lookup"));
        } catch (IllegalAccessException | InvocationTargetException e) {
            return CompletableFuture.failedFuture(e.getCause() != null ? e.getCause() : e);
        }
    }

    private static String httpUrl(LookupData data) {
        return data.getHttpUrl() != null ? data.getHttpUrl() : data.getHttpUrlTls();
    }

    private static URI toUri(URL url) {
        try {
            return url.toURI();
        } catch (java.net.URISyntaxException e) {
            throw new IllegalArgumentException(e);
        }
    }

    private static Method method(String name) {
        try {
            return NamespaceService.class.getMethod(name, ServiceUnitId.class, LookupOptions.class);
        } catch (NoSuchMethodException e) {
            return null;
        }
    }

    private static void invokeIfPresent(LookupOptions.LookupOptionsBuilder builder, String name) {
        try {
            builder.getClass().getMethod(name, boolean.class).invoke(builder, true);
        } catch (ReflectiveOperationException e) {
            // Not on this line: it answers the address it has.
        }
    }
}
