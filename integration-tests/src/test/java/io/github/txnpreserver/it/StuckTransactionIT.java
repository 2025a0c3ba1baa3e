package io.github.txnpreserver.it;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.catchThrowable;
import static org.awaitility.Awaitility.await;

import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import org.apache.pulsar.client.admin.PulsarAdmin;
import org.apache.pulsar.client.api.Consumer;
import org.apache.pulsar.client.api.Message;
import org.apache.pulsar.client.api.Producer;
import org.apache.pulsar.client.api.PulsarClient;
import org.apache.pulsar.client.api.Schema;
import org.apache.pulsar.client.api.SubscriptionInitialPosition;
import org.apache.pulsar.client.api.transaction.Transaction;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.DisplayName;
import org.junit.jupiter.api.Test;

/**
 * A transaction left COMMITTING because its partition refused the end marker with an error
 * the broker does not retry is finished in the background once the partition takes markers
 * again: no client retry, no coordinator reload. The refusal comes from the plugin's test
 * hook, switched on for this broker only.
 */
@DisplayName("A transaction stuck finishing")
class StuckTransactionIT {

    private static LocalPulsar pulsar;
    private static Path refuseMarkers;

    @BeforeAll
    static void startBroker() throws Exception {
        refuseMarkers = Files.createDirectories(LocalPulsar.newDir("stuck-hook")).resolve("refuse-end-markers");
        pulsar = LocalPulsar.startWithTestHooks("stuck", Map.of(
                        "transactionMetaPersistCount", "10",
                        "transactionMetaStuckRedriveAfterInSecond", "2"),
                "-Dtxnpreserver.testhooks.refuseEndMarkersWhileFileExists=" + refuseMarkers);
    }

    @AfterAll
    static void stopBroker() throws Exception {
        pulsar.close();
    }

    @Test
    void isFinishedInTheBackgroundOnceItsPartitionTakesMarkersAgain() throws Exception {
        String topic = Txns.uniqueTopic("stuck");
        try (PulsarClient client = Txns.client(pulsar);
             PulsarAdmin admin = Txns.admin(pulsar);
             Consumer<String> consumer = client.newConsumer(Schema.STRING).topic(topic).subscriptionName("app")
                     .subscriptionInitialPosition(SubscriptionInitialPosition.Earliest).subscribe();
             Producer<String> producer = Txns.producer(client, topic)) {
            Transaction txn = Txns.open(client, Duration.ofMinutes(10));
            for (int i = 0; i < 3; i++) {
                producer.newMessage(txn).value("m" + i).send();
            }
            Files.createFile(refuseMarkers);

            Throwable refused = catchThrowable(() -> txn.commit().get(1, TimeUnit.MINUTES));
            assertThat(refused).as("the broker gives up on the commit")
                    .isInstanceOf(java.util.concurrent.ExecutionException.class);
            System.out.println("the commit's answer while markers are refused: " + refused.getCause());
            assertThat(refused.getCause()).as("answered with the partition's refusal, not timed out")
                    .hasMessageContaining("refused the end marker");
            Thread.sleep(4000);
            assertThat(admin.transactions().getTransactionBufferStats(topic).ongoingTxnSize).isEqualTo(1);
            assertThat(consumer.receive(1, TimeUnit.SECONDS)).as("consumers stopped at the stuck transaction")
                    .isNull();

            Files.delete(refuseMarkers);

            await().atMost(Duration.ofMinutes(1)).until(() ->
                    admin.transactions().getTransactionBufferStats(topic).ongoingTxnSize == 0);
            List<String> read = new ArrayList<>();
            Message<String> message;
            while ((message = consumer.receive(5, TimeUnit.SECONDS)) != null) {
                read.add(message.getValue());
                consumer.acknowledge(message);
            }
            assertThat(read).containsExactly("m0", "m1", "m2");
            try (RetryingEndClient retry = RetryingEndClient.connect(pulsar.serviceUrl())) {
                assertThat(retry.commit(txn.getTxnID())).isEqualTo(EndAnswer.SUCCESS);
                assertThat(retry.abort(txn.getTxnID())).isEqualTo(EndAnswer.REFUSED_AS_COMMITTED);
            }
        }
    }
}
