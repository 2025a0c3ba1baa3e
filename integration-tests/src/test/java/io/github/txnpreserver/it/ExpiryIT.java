package io.github.txnpreserver.it;

import static org.assertj.core.api.Assertions.assertThat;
import static org.awaitility.Awaitility.await;

import java.time.Duration;
import java.util.Map;
import org.apache.pulsar.client.api.Producer;
import org.apache.pulsar.client.api.PulsarClient;
import org.apache.pulsar.client.api.transaction.TxnID;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.DisplayName;
import org.junit.jupiter.api.Test;

@DisplayName("Retention by age")
class ExpiryIT {

    /** 0.003 h = 10.8 s. */
    private static final String TIME_TO_LIVE_HOURS = "0.003";
    private static LocalPulsar pulsar;

    @BeforeAll
    static void startBroker() throws Exception {
        pulsar = LocalPulsar.start("expiry", Map.of(
                "transactionMetaPersistCount", "100",
                "transactionMetaPersistTimeInHour", TIME_TO_LIVE_HOURS,
                "transactionMetaExpireCheckIntervalInSecond", "1"));
    }

    @AfterAll
    static void stopBroker() throws Exception {
        pulsar.close();
    }

    @Test
    void forgetsAnOutcomeOnceItIsOlderThanTheTimeToLive() throws Exception {
        TxnID txn;
        try (PulsarClient client = Txns.client(pulsar);
             Producer<String> producer = Txns.producer(client, Txns.uniqueTopic("expiry"))) {
            txn = Txns.committed(client, producer, "m");
        }
        try (RetryingEndClient retry = RetryingEndClient.connect(pulsar.serviceUrl())) {
            assertThat(retry.commit(txn)).isEqualTo(EndAnswer.SUCCESS);

            await().atMost(Duration.ofMinutes(1)).pollInterval(Duration.ofSeconds(1))
                    .until(() -> retry.abort(txn) == EndAnswer.NOT_FOUND);
            assertThat(retry.commit(txn)).isEqualTo(EndAnswer.NOT_FOUND);
        }
    }
}
