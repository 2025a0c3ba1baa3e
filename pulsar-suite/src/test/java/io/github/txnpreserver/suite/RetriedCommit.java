package io.github.txnpreserver.suite;

import static org.testng.Assert.assertEquals;
import static org.testng.Assert.assertFalse;
import static org.testng.Assert.assertTrue;
import static org.testng.Assert.expectThrows;

import io.github.txnpreserver.store.PreservingTransactionMetadataStore;
import java.util.Collection;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import org.apache.pulsar.broker.PulsarService;
import org.apache.pulsar.client.api.PulsarClient;
import org.apache.pulsar.client.api.transaction.Transaction;
import org.apache.pulsar.client.api.transaction.TransactionCoordinatorClientException;
import org.apache.pulsar.client.api.transaction.TxnID;
import org.apache.pulsar.client.impl.PulsarClientImpl;
import org.apache.pulsar.transaction.coordinator.TransactionMetadataStore;

/**
 * What tells a broker of Pulsar's tests that runs the plugin from one that does not: a commit
 * sent again for a committed transaction. Asserts the plugin's answer when the suite switches
 * brokers on, stock's when it runs them stock, so the switch itself is under test.
 */
final class RetriedCommit {

    /** Each wait on a broker is bounded: a hang fails the test instead of holding the build. */
    private static final long WAIT_SECONDS = 30;

    private RetriedCommit() {
    }

    static void assertAnsweredAsConfigured(PulsarClient client, Collection<PulsarService> brokers) throws Exception {
        Transaction txn = client.newTransaction().withTransactionTimeout(1, TimeUnit.MINUTES).build()
                .get(WAIT_SECONDS, TimeUnit.SECONDS);
        txn.commit().get(WAIT_SECONDS, TimeUnit.SECONDS);
        TxnID txnId = txn.getTxnID();
        var coordinators = ((PulsarClientImpl) client).getTcClient();
        if (PluginSwitch.stockBrokers()) {
            ExecutionException refused = expectThrows(ExecutionException.class,
                    () -> coordinators.commitAsync(txnId).get(WAIT_SECONDS, TimeUnit.SECONDS));
            assertTrue(refused.getCause() instanceof TransactionCoordinatorClientException.TransactionNotFoundException,
                    "stock answers TransactionNotFound, got " + refused.getCause());
            return;
        }
        coordinators.commitAsync(txnId).get(WAIT_SECONDS, TimeUnit.SECONDS);
        long coordinatorsServed = 0;
        for (PulsarService broker : brokers) {
            for (TransactionMetadataStore store : broker.getTransactionMetadataStoreService().getStores().values()) {
                assertTrue(store instanceof PreservingTransactionMetadataStore,
                        "a coordinator runs on " + store.getClass().getName());
                coordinatorsServed++;
            }
        }
        assertFalse(coordinatorsServed == 0, "no coordinator is served");
        ExecutionException conflicting = expectThrows(ExecutionException.class,
                () -> coordinators.abortAsync(txnId).get(WAIT_SECONDS, TimeUnit.SECONDS));
        assertEquals(conflicting.getCause().getClass(),
                TransactionCoordinatorClientException.InvalidTxnStatusException.class,
                "an abort of the committed transaction is refused as stock refuses a conflicting end");
    }
}
