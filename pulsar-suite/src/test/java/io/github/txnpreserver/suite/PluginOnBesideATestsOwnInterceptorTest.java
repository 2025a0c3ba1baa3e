package io.github.txnpreserver.suite;

import org.apache.pulsar.broker.transaction.TransactionTestBase;
import org.testng.annotations.AfterClass;
import org.testng.annotations.BeforeClass;
import org.testng.annotations.Test;

/**
 * The brokers of {@code TransactionTestBase} get an interceptor object from the test, which
 * makes a broker skip the interceptors it is configured with; the plugin, a protocol
 * handler, comes in through the configuration all the same. Three brokers, so that
 * coordinators are spread over them as in the assignment tests.
 */
@Test(groups = "broker")
public class PluginOnBesideATestsOwnInterceptorTest extends TransactionTestBase {

    @BeforeClass(alwaysRun = true)
    protected void setup() throws Exception {
        setUpBase(3, 4, null, 0);
    }

    @AfterClass(alwaysRun = true)
    protected void cleanup() {
        internalCleanup();
    }

    public void aRetriedCommitIsAnsweredAsConfigured() throws Exception {
        RetriedCommit.assertAnsweredAsConfigured(pulsarClient, pulsarServiceList);
    }
}
