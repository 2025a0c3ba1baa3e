package io.github.txnpreserver.suite;

import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import org.apache.pulsar.broker.PulsarService;
import org.apache.pulsar.broker.namespace.LookupOptions;
import org.apache.pulsar.broker.namespace.NamespaceService;
import org.apache.pulsar.broker.transaction.TransactionTestBase;
import org.apache.pulsar.common.naming.NamespaceBundle;
import org.apache.pulsar.common.naming.NamespaceName;
import org.testng.IInvokedMethod;
import org.testng.IInvokedMethodListener;
import org.testng.ITestResult;

/**
 * The tests listed in {@code owned-bundles.txt}: Pulsar tests that open a topic on a broker
 * directly ({@code BrokerService.getTopic}) without looking it up first, so they pass only if
 * an earlier test of their class happened to make that broker own the topic's namespace
 * bundle. Before each, the bundles of the listed namespace are looked up on the test's first
 * broker, as a client's lookup of a topic in each would, so the test no longer depends on
 * what ran before it (which differs with the plugin on: the differences skipped before they
 * start own nothing). On stock brokers too, so both runs start the test alike.
 */
public class OwnedBundles implements IInvokedMethodListener {

    private static final long WAIT_SECONDS = 30;
    private static final Map<String, Entry> ENTRIES = read();

    /** One line of owned-bundles.txt. */
    record Entry(String test, NamespaceName namespace, String why) {
    }

    @Override
    public void beforeInvocation(IInvokedMethod method, ITestResult result) {
        if (!method.isTestMethod()) {
            return;
        }
        String test = method.getTestMethod().getRealClass().getName() + "#" + method.getTestMethod().getMethodName();
        Entry entry = ENTRIES.get(test);
        if (entry == null) {
            return;
        }
        if (!(result.getInstance() instanceof TransactionTestBase base)) {
            throw new IllegalStateException("owned-bundles.txt lists " + test
                    + ", which is not a TransactionTestBase: its brokers cannot be reached");
        }
        List<String> lookedUp = own(base.getPulsarServiceList().get(0), entry.namespace());
        System.out.println("[pulsar-suite] before " + test + ": every bundle of " + entry.namespace()
                + " owned by its first broker (looked up now: " + (lookedUp.isEmpty() ? "none" : lookedUp) + ")");
    }

    /** Looks up each bundle of the namespace that the broker does not own yet; the ranges looked up. */
    static List<String> own(PulsarService broker, NamespaceName namespace) {
        NamespaceService service = broker.getNamespaceService();
        List<String> lookedUp = new ArrayList<>();
        try {
            for (NamespaceBundle bundle : service.getNamespaceBundleFactory().getBundlesAsync(namespace)
                    .get(WAIT_SECONDS, TimeUnit.SECONDS).getBundles()) {
                if (service.isServiceUnitOwnedAsync(bundle).get(WAIT_SECONDS, TimeUnit.SECONDS)) {
                    continue;
                }
                service.getWebServiceUrlAsync(bundle, LookupOptions.builder().authoritative(true).build())
                        .get(WAIT_SECONDS, TimeUnit.SECONDS);
                if (!service.isServiceUnitOwnedAsync(bundle).get(WAIT_SECONDS, TimeUnit.SECONDS)) {
                    throw new IllegalStateException("the lookup of " + bundle + " left it to another broker");
                }
                lookedUp.add(bundle.getBundleRange());
            }
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            throw new IllegalStateException("interrupted while owning the bundles of " + namespace, e);
        } catch (Exception e) {
            throw new IllegalStateException("could not own the bundles of " + namespace, e);
        }
        return lookedUp;
    }

    static Map<String, Entry> read() {
        return ListedTests.read("owned-bundles.txt", OwnedBundles::parse, Entry::test);
    }

    private static Entry parse(String[] parts) {
        String[] head = parts[0].strip().split("\\s+");
        if (parts.length != 2 || head.length != 2 || !head[0].matches("[\\w.$]+#\\w+") || parts[1].isBlank()) {
            throw new IllegalArgumentException("not 'class#method NAMESPACE -- why'");
        }
        return new Entry(head[0], NamespaceName.get(head[1]), parts[1].strip());
    }
}
