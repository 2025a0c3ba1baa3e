package io.github.txnpreserver.it;

import static org.assertj.core.api.Assertions.assertThat;

import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;
import org.apache.pulsar.client.api.Producer;
import org.apache.pulsar.client.api.PulsarClient;
import org.apache.pulsar.client.api.transaction.TxnID;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.DisplayName;
import org.junit.jupiter.api.Test;

/**
 * transactionMetaPersistCount bounds each client's kept outcomes per coordinator. With
 * authentication off every transaction has no owner, so all share one client bucket.
 */
@DisplayName("Retention by count")
class RetentionIT {

    private static final int COORDINATORS = 4;
    private static final int KEPT_PER_CLIENT = 3;
    private static LocalPulsar pulsar;

    @BeforeAll
    static void startBroker() throws Exception {
        pulsar = LocalPulsar.start("retention", Map.of(
                "transactionMetaPersistCount", Integer.toString(KEPT_PER_CLIENT)));
        // Standalone creates one coordinator; spread transactions over several.
        pulsar.initializeTransactionCoordinators(COORDINATORS);
    }

    @AfterAll
    static void stopBroker() throws Exception {
        pulsar.close();
    }

    @Test
    void keepsTheNewestOutcomesPerCoordinatorAndForgetsTheOlderOnes() throws Exception {
        Map<Long, List<TxnID>> byCoordinator = new TreeMap<>();
        try (PulsarClient client = Txns.client(pulsar);
             Producer<String> producer = Txns.producer(client, Txns.uniqueTopic("retention"))) {
            for (int i = 0; i < COORDINATORS * (KEPT_PER_CLIENT + 2); i++) {
                TxnID txn = Txns.committed(client, producer, "m" + i);
                byCoordinator.computeIfAbsent(txn.getMostSigBits(), tc -> new ArrayList<>()).add(txn);
            }
        }
        assertThat(byCoordinator).as("transactions spread over coordinators").hasSizeGreaterThan(1);

        try (RetryingEndClient retry = RetryingEndClient.connect(pulsar.serviceUrl())) {
            for (List<TxnID> txns : byCoordinator.values()) {
                int firstKept = Math.max(0, txns.size() - KEPT_PER_CLIENT);
                for (int i = 0; i < txns.size(); i++) {
                    EndAnswer expected = i >= firstKept ? EndAnswer.SUCCESS : EndAnswer.NOT_FOUND;
                    assertThat(retry.commit(txns.get(i))).as("retry of %s", txns.get(i)).isEqualTo(expected);
                }
            }
        }
    }
}
