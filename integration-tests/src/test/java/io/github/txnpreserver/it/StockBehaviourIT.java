package io.github.txnpreserver.it;

import static org.assertj.core.api.Assertions.assertThat;

import java.util.Map;
import org.apache.pulsar.client.admin.PulsarAdmin;
import org.apache.pulsar.client.admin.PulsarAdminException;
import org.apache.pulsar.client.api.Producer;
import org.apache.pulsar.client.api.PulsarClient;
import org.apache.pulsar.client.api.transaction.TxnID;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.DisplayName;
import org.junit.jupiter.api.Test;

@DisplayName("With transactionMetaPersistCount=0 the plugin is installed but behaves as stock")
class StockBehaviourIT {

    private static LocalPulsar pulsar;

    @BeforeAll
    static void startBroker() throws Exception {
        pulsar = LocalPulsar.start("stock", Map.of("transactionMetaPersistCount", "0"));
    }

    @AfterAll
    static void stopBroker() throws Exception {
        pulsar.close();
    }

    @Test
    void aRetryOfAnEndedTransactionIsNotFoundAndNoStateTopicIsCreated() throws Exception {
        String topic = Txns.uniqueTopic("stock");
        try (PulsarClient client = Txns.client(pulsar);
             PulsarAdmin admin = Txns.admin(pulsar);
             Producer<String> producer = Txns.producer(client, topic);
             RetryingEndClient retry = RetryingEndClient.connect(pulsar.serviceUrl())) {
            TxnID committed = Txns.committed(client, producer, "a");
            TxnID aborted = Txns.aborted(client, producer, "b");

            assertThat(retry.commit(committed)).isEqualTo(EndAnswer.NOT_FOUND);
            assertThat(retry.abort(committed)).isEqualTo(EndAnswer.NOT_FOUND);
            assertThat(retry.abort(aborted)).isEqualTo(EndAnswer.NOT_FOUND);
            assertThat(Txns.readAll(client, topic)).containsExactly("a");
            org.assertj.core.api.Assertions.assertThatThrownBy(() -> admin.topics()
                    .getStats("persistent://pulsar/system/__terminated_txn_state_0"))
                    .isInstanceOf(PulsarAdminException.NotFoundException.class);
        }
    }
}
