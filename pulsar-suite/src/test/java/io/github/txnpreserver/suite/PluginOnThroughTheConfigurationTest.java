package io.github.txnpreserver.suite;

import java.util.List;
import java.util.Set;
import org.apache.pulsar.broker.ServiceConfiguration;
import org.apache.pulsar.broker.service.BrokerTestBase;
import org.apache.pulsar.client.api.PulsarClient;
import org.apache.pulsar.common.naming.NamespaceName;
import org.apache.pulsar.common.naming.SystemTopicNames;
import org.apache.pulsar.common.policies.data.TenantInfoImpl;
import org.testng.annotations.AfterClass;
import org.testng.annotations.BeforeClass;
import org.testng.annotations.Test;

/**
 * The brokers of {@code MockedPulsarServiceBaseTest} load their protocol handlers from the
 * configuration, as a real broker does: the plugin's archive comes in through
 * {@code protocolHandlerDirectory}.
 */
@Test(groups = "broker")
public class PluginOnThroughTheConfigurationTest extends BrokerTestBase {

    private PulsarClient transactionalClient;

    @BeforeClass(alwaysRun = true)
    @Override
    protected void setup() throws Exception {
        ServiceConfiguration conf = getDefaultConf();
        conf.setTransactionCoordinatorEnabled(true);
        baseSetup(conf);
        admin.tenants().createTenant(NamespaceName.SYSTEM_NAMESPACE.getTenant(),
                new TenantInfoImpl(Set.of("appid1"), Set.of("test")));
        admin.namespaces().createNamespace(NamespaceName.SYSTEM_NAMESPACE.toString());
        createTransactionCoordinatorAssign(2);
        admin.lookups().lookupPartitionedTopic(SystemTopicNames.TRANSACTION_COORDINATOR_ASSIGN.toString());
        transactionalClient = PulsarClient.builder().serviceUrl(lookupUrl.toString()).enableTransaction(true).build();
    }

    @AfterClass(alwaysRun = true)
    @Override
    protected void cleanup() throws Exception {
        if (transactionalClient != null) {
            transactionalClient.close();
        }
        internalCleanup();
    }

    public void aRetriedCommitIsAnsweredAsConfigured() throws Exception {
        RetriedCommit.assertAnsweredAsConfigured(transactionalClient, List.of(pulsar));
    }
}
