package io.github.txnpreserver.it;

import static org.assertj.core.api.Assertions.assertThat;

import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import org.apache.pulsar.client.api.Producer;
import org.apache.pulsar.client.api.PulsarClient;
import org.apache.pulsar.client.api.transaction.Transaction;
import org.apache.pulsar.client.api.transaction.TxnID;
import org.awaitility.Awaitility;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.DisplayName;
import org.junit.jupiter.api.Test;

/**
 * A coordinator's transaction log deleted and created again within the retention time, on a
 * real broker (the test hook deletes the managed ledger before the coordinator opens): the log
 * starts over with no sequence allocated while the state topic keeps the old outcomes
 * (docs/DESIGN.md, "A log created again").
 */
@DisplayName("A transaction log deleted and created again")
class RewoundLogIT {

    private static final long MARGIN = 1L << 32;
    private static final String STATE_TOPIC = "persistent://pulsar/system/__terminated_txn_state_0";

    private static LocalPulsar pulsar;
    private static Path deleteLog;

    @BeforeAll
    static void startBroker() throws Exception {
        deleteLog = Files.createDirectories(LocalPulsar.newDir("rewound-hook")).resolve("delete-transaction-log");
        pulsar = LocalPulsar.startWithTestHooks("rewound", Map.of("transactionMetaPersistCount", "10"),
                "-Dtxnpreserver.testhooks.deleteTransactionLogWhenFileExists=" + deleteLog);
    }

    @AfterAll
    static void stopBroker() throws Exception {
        pulsar.close();
    }

    @Test
    void issuesNoKeptIdAgainAndAnswersTheOldTransactionsAsBefore() throws Exception {
        String topic = Txns.uniqueTopic("rewound");
        TxnID committed;
        TxnID aborted;
        try (PulsarClient client = Txns.client(pulsar);
             Producer<String> producer = Txns.producer(client, topic)) {
            committed = Txns.committed(client, producer, "before-1", "before-2");
            aborted = Txns.aborted(client, producer, "dropped");
            // The deletion takes the log's copy of the outcomes: wait for the state topic's.
            Awaitility.await().atMost(Duration.ofSeconds(30)).pollInterval(Duration.ofMillis(500)).until(() ->
                    StateTopicReader.records(client, STATE_TOPIC).containsAll(List.of(
                            StateTopicReader.nameOf(committed) + " COMMITTED",
                            StateTopicReader.nameOf(aborted) + " ABORTED")));
        }
        assertThat(committed.getMostSigBits()).as("one coordinator").isZero();

        Files.createFile(deleteLog);
        pulsar.restartAfterKill();

        try (PulsarClient client = Txns.client(pulsar);
             Producer<String> producer = Txns.producer(client, topic);
             RetryingEndClient retry = RetryingEndClient.connect(pulsar.serviceUrl())) {
            // The coordinator opens when the first client asks for it.
            Transaction next = Txns.open(client, Duration.ofMinutes(1));
            assertThat(deleteLog).as("the hook deleted the log at the opening").doesNotExist();
            assertThat(next.getTxnID().getLeastSigBits())
                    .as("the first multiple of 2^32 past the kept outcomes, not the new log's 0").isEqualTo(MARGIN);
            producer.newMessage(next).value("after").send();
            next.commit().get(1, TimeUnit.MINUTES);

            assertThat(retry.commit(committed)).isEqualTo(EndAnswer.SUCCESS);
            assertThat(retry.abort(committed)).isEqualTo(EndAnswer.REFUSED_AS_COMMITTED);
            assertThat(retry.abort(aborted)).isEqualTo(EndAnswer.SUCCESS);
            assertThat(retry.commit(aborted)).isEqualTo(EndAnswer.REFUSED_AS_ABORTED);
            assertThat(retry.commit(next.getTxnID())).isEqualTo(EndAnswer.SUCCESS);
            assertThat(Txns.readAll(client, topic)).containsExactly("before-1", "before-2", "after");
        }
        assertThat(pulsar.output()).contains("its transaction log is new, but its state topic keeps outcomes up to"
                + " sequence 255").contains("New transactions start at sequence " + MARGIN);
    }
}
