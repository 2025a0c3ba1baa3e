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
 * Outcomes are kept by time (transactionMetaPersistTimeInHour) under a memory bound;
 * transactionMetaPersistCount is only a per-client floor that survives memory eviction, not
 * a cap. So with a count of 3, every one of more than 3 transactions per coordinator is
 * still answered. With authentication off every transaction has no owner.
 */
@DisplayName("Retention by time, the count a floor")
class RetentionIT {

    private static final int COORDINATORS = 4;
    private static final int FLOOR_PER_CLIENT = 3;
    private static final int PER_COORDINATOR = FLOOR_PER_CLIENT + 3;
    private static LocalPulsar pulsar;

    @BeforeAll
    static void startBroker() throws Exception {
        pulsar = LocalPulsar.start("retention", Map.of(
                "transactionMetaPersistCount", Integer.toString(FLOOR_PER_CLIENT)));
        // Standalone creates one coordinator; spread transactions over several.
        pulsar.initializeTransactionCoordinators(COORDINATORS);
    }

    @AfterAll
    static void stopBroker() throws Exception {
        pulsar.close();
    }

    @Test
    void keepsEveryOutcomeWithinTheTimeWindowBeyondTheCount() throws Exception {
        Map<Long, List<TxnID>> byCoordinator = new TreeMap<>();
        try (PulsarClient client = Txns.client(pulsar);
             Producer<String> producer = Txns.producer(client, Txns.uniqueTopic("retention"))) {
            for (int i = 0; i < COORDINATORS * PER_COORDINATOR; i++) {
                TxnID txn = Txns.committed(client, producer, "m" + i);
                byCoordinator.computeIfAbsent(txn.getMostSigBits(), tc -> new ArrayList<>()).add(txn);
            }
        }
        assertThat(byCoordinator).as("transactions spread over coordinators").hasSizeGreaterThan(1);
        assertThat(byCoordinator.values()).as("some coordinator ended more than the count")
                .anySatisfy(txns -> assertThat(txns).hasSizeGreaterThan(FLOOR_PER_CLIENT));

        try (RetryingEndClient retry = RetryingEndClient.connect(pulsar.serviceUrl())) {
            for (List<TxnID> txns : byCoordinator.values()) {
                for (TxnID txn : txns) {
                    assertThat(retry.commit(txn)).as("retry of %s", txn).isEqualTo(EndAnswer.SUCCESS);
                }
            }
        }
    }
}
