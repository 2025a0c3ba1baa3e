package io.github.txnpreserver.it;

import static org.assertj.core.api.Assertions.assertThat;

import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import org.apache.pulsar.client.api.Producer;
import org.apache.pulsar.client.api.PulsarClient;
import org.apache.pulsar.client.api.transaction.Transaction;
import org.apache.pulsar.client.api.transaction.TxnID;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.DisplayName;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.CsvSource;

/**
 * kill -9 of the broker at each step of the commit and of the abort chain, then a restart:
 * every retried commit and abort answers the true outcome, and consumers see each committed
 * message exactly once and each aborted message never. The kill comes from the plugin's
 * crash-point test hook, switched on for this broker only.
 */
@DisplayName("kill -9 at a step of the end chain, then restart")
class CrashAtEachStepIT {

    private static LocalPulsar pulsar;
    private static Path crashPoint;

    @BeforeAll
    static void startBroker() throws Exception {
        crashPoint = Files.createDirectories(LocalPulsar.newDir("crash-hook")).resolve("crash-point");
        pulsar = LocalPulsar.startWithTestHooks("crash-steps", Map.of("transactionMetaPersistCount", "100"),
                "-Dtxnpreserver.testhooks.crashPointFile=" + crashPoint);
    }

    @AfterAll
    static void stopBroker() throws Exception {
        pulsar.close();
    }

    @ParameterizedTest(name = "{1} killed {0}")
    @CsvSource({
            "AFTER_FINISHING_ENTRY, commit",
            "DURING_MARKERS, commit",
            "AFTER_KEPT_BEFORE_TERMINAL_ENTRY, commit",
            "AFTER_TERMINAL_ENTRY, commit",
            "AFTER_FINISHING_ENTRY, abort",
            "DURING_MARKERS, abort",
            "AFTER_KEPT_BEFORE_TERMINAL_ENTRY, abort",
            "AFTER_TERMINAL_ENTRY, abort"
    })
    void retriesAnswerTheTrueOutcomeAndConsumersSeeItOnce(String step, String action) throws Exception {
        boolean commit = action.equals("commit");
        List<String> topics = List.of(Txns.uniqueTopic("crash-a"), Txns.uniqueTopic("crash-b"));
        TxnID txnId;
        PulsarClient client = Txns.client(pulsar);
        try {
            Transaction txn = Txns.open(client, Duration.ofMinutes(10));
            for (String topic : topics) {
                try (Producer<String> producer = Txns.producer(client, topic)) {
                    producer.newMessage(txn).value(topic + "-1").send();
                    producer.newMessage(txn).value(topic + "-2").send();
                }
            }
            txnId = txn.getTxnID();
            Files.writeString(crashPoint, step);

            CompletableFuture<Void> end = commit ? txn.commit() : txn.abort();

            assertThat(pulsar.awaitExit(Duration.ofSeconds(60))).as("broker killed at " + step).isTrue();
            end.exceptionally(ignored -> null);
        } finally {
            client.closeAsync();
        }
        assertThat(crashPoint).doesNotExist();

        pulsar.restartAfterKill();

        try (RetryingEndClient retry = RetryingEndClient.connect(pulsar.serviceUrl());
             PulsarClient reader = Txns.client(pulsar)) {
            if (commit) {
                assertThat(retry.commit(txnId)).isEqualTo(EndAnswer.SUCCESS);
                assertThat(retry.abort(txnId)).isEqualTo(EndAnswer.REFUSED_AS_COMMITTED);
            } else {
                assertThat(retry.abort(txnId)).isEqualTo(EndAnswer.SUCCESS);
                assertThat(retry.commit(txnId)).isEqualTo(EndAnswer.REFUSED_AS_ABORTED);
            }
            for (String topic : topics) {
                List<String> read = Txns.readAll(reader, topic);
                if (commit) {
                    assertThat(read).as(topic).containsExactly(topic + "-1", topic + "-2");
                } else {
                    assertThat(read).as(topic).isEmpty();
                }
            }
        }
    }
}
