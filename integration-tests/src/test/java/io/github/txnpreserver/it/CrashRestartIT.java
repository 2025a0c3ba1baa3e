package io.github.txnpreserver.it;

import static org.assertj.core.api.Assertions.assertThat;

import java.util.Map;
import org.apache.pulsar.client.admin.PulsarAdmin;
import org.apache.pulsar.client.api.Producer;
import org.apache.pulsar.client.api.PulsarClient;
import org.apache.pulsar.client.api.transaction.TxnID;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.DisplayName;
import org.junit.jupiter.api.Test;

@DisplayName("After a kill -9 and a restart of the broker")
class CrashRestartIT {

    private static LocalPulsar pulsar;

    @BeforeAll
    static void startBroker() throws Exception {
        pulsar = LocalPulsar.start("crash", Map.of("transactionMetaPersistCount", "50"));
    }

    @AfterAll
    static void stopBroker() throws Exception {
        pulsar.close();
    }

    @Test
    void retriesStillGetEachTransactionsRealOutcome() throws Exception {
        String topic = Txns.uniqueTopic("crash");
        TxnID committed;
        TxnID aborted;
        TxnID timedOut;
        try (PulsarClient client = Txns.client(pulsar);
             PulsarAdmin admin = Txns.admin(pulsar);
             Producer<String> producer = Txns.producer(client, topic)) {
            committed = Txns.committed(client, producer, "kept-1", "kept-2");
            aborted = Txns.aborted(client, producer, "dropped");
            timedOut = Txns.timedOut(client, admin, producer, "expired");
        }
        long killedPid = pulsar.pid();

        pulsar.restartAfterKill();

        assertThat(pulsar.pid()).isNotEqualTo(killedPid);
        try (PulsarClient client = Txns.client(pulsar);
             RetryingEndClient retry = RetryingEndClient.connect(pulsar.serviceUrl())) {
            assertThat(retry.commit(committed)).isEqualTo(EndAnswer.SUCCESS);
            assertThat(retry.abort(committed)).isEqualTo(EndAnswer.REFUSED_AS_COMMITTED);
            assertThat(retry.abort(aborted)).isEqualTo(EndAnswer.SUCCESS);
            assertThat(retry.commit(aborted)).isEqualTo(EndAnswer.REFUSED_AS_ABORTED);
            assertThat(retry.commit(timedOut)).isEqualTo(EndAnswer.REFUSED_AS_ABORTED);

            assertThat(Txns.readAll(client, topic)).containsExactly("kept-1", "kept-2");
        }
    }
}
