package io.github.txnpreserver.it;

import static org.assertj.core.api.Assertions.assertThat;

import java.util.List;
import java.util.Map;
import org.apache.pulsar.client.admin.PulsarAdmin;
import org.apache.pulsar.client.api.Producer;
import org.apache.pulsar.client.api.PulsarClient;
import org.apache.pulsar.client.api.transaction.TxnID;
import org.apache.pulsar.common.policies.data.TransactionMetadata;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.DisplayName;
import org.junit.jupiter.api.Test;

/** BRIEF §1's table, row by row, on a real broker through the stock client. */
@DisplayName("On a real broker, a retried end of an ended transaction")
class RetrySemanticsIT {

    private static LocalPulsar pulsar;
    private static PulsarClient client;
    private static PulsarAdmin admin;
    private static RetryingEndClient retry;

    @BeforeAll
    static void startBroker() throws Exception {
        pulsar = LocalPulsar.start("semantics", Map.of("transactionMetaPersistCount", "50"));
        client = Txns.client(pulsar);
        admin = Txns.admin(pulsar);
        retry = RetryingEndClient.connect(pulsar.serviceUrl());
    }

    @AfterAll
    static void stopBroker() throws Exception {
        retry.close();
        admin.close();
        client.close();
        pulsar.close();
    }

    @Test
    void ofACommittedTransactionCommitsAgainAndRefusesTheAbortAsCommitted() throws Exception {
        String topic = Txns.uniqueTopic("committed");
        try (Producer<String> producer = Txns.producer(client, topic)) {
            TxnID txn = Txns.committed(client, producer, "a", "b");

            assertThat(retry.commit(txn)).isEqualTo(EndAnswer.SUCCESS);
            assertThat(retry.commit(txn)).isEqualTo(EndAnswer.SUCCESS);
            assertThat(retry.abort(txn)).isEqualTo(EndAnswer.REFUSED_AS_COMMITTED);
            assertThat(retry.lastMessage()).contains("but it is in COMMITTING status");

            assertThat(Txns.readAll(client, topic)).containsExactly("a", "b");
        }
    }

    @Test
    void ofAnAbortedTransactionAbortsAgainAndRefusesTheCommitAsAborted() throws Exception {
        String topic = Txns.uniqueTopic("aborted");
        try (Producer<String> producer = Txns.producer(client, topic)) {
            TxnID txn = Txns.aborted(client, producer, "never");

            assertThat(retry.abort(txn)).isEqualTo(EndAnswer.SUCCESS);
            assertThat(retry.commit(txn)).isEqualTo(EndAnswer.REFUSED_AS_ABORTED);
            assertThat(retry.lastMessage()).contains("but it is in ABORTING status");

            assertThat(Txns.readAll(client, topic)).isEmpty();
        }
    }

    @Test
    void ofATransactionTheCoordinatorAbortedOnTimeoutRefusesTheCommitAsAborted() throws Exception {
        String topic = Txns.uniqueTopic("timed-out");
        try (Producer<String> producer = Txns.producer(client, topic)) {
            TxnID txn = Txns.timedOut(client, admin, producer, "never");

            assertThat(retry.commit(txn)).isEqualTo(EndAnswer.REFUSED_AS_ABORTED);
            assertThat(retry.lastMessage()).startsWith("Transaction " + txn + " was aborted on its timeout at ")
                    .endsWith("it cannot be committed");
            assertThat(retry.abort(txn)).isEqualTo(EndAnswer.SUCCESS);

            assertThat(Txns.readAll(client, topic)).isEmpty();
        }
    }

    @Test
    void ofATransactionAnAdminAbortedRefusesTheCommitAsAborted() throws Exception {
        String topic = Txns.uniqueTopic("admin-aborted");
        try (Producer<String> producer = Txns.producer(client, topic)) {
            var txn = Txns.open(client, java.time.Duration.ofMinutes(5));
            producer.newMessage(txn).value("never").send();

            admin.transactions().abortTransaction(txn.getTxnID());

            assertThat(retry.commit(txn.getTxnID())).isEqualTo(EndAnswer.REFUSED_AS_ABORTED);
            assertThat(retry.lastMessage()).as("not a timeout's refusal").contains("but it is in ABORTING status");
            assertThat(retry.abort(txn.getTxnID())).isEqualTo(EndAnswer.SUCCESS);
            assertThat(Txns.readAll(client, topic)).isEmpty();
        }
    }

    @Test
    void ofAnUnknownTransactionIsNotFoundAsStock() throws Exception {
        TxnID unknown = new TxnID(0, 987_654_321L);

        assertThat(retry.commit(unknown)).isEqualTo(EndAnswer.NOT_FOUND);
        assertThat(retry.lastMessage()).contains("was never issued");
        assertThat(retry.abort(unknown)).isEqualTo(EndAnswer.NOT_FOUND);
        assertThat(retry.lastMessage()).contains("was never issued");
    }

    @Test
    void neverDeliversACommittedMessageTwiceNorAnAbortedOneAtAll() throws Exception {
        String topic = Txns.uniqueTopic("exactly-once");
        try (Producer<String> producer = Txns.producer(client, topic)) {
            TxnID first = Txns.committed(client, producer, "c1");
            TxnID dropped = Txns.aborted(client, producer, "x1");
            TxnID second = Txns.committed(client, producer, "c2", "c3");
            for (int attempt = 0; attempt < 3; attempt++) {
                assertThat(retry.commit(first)).as("commit %d of first", attempt).isEqualTo(EndAnswer.SUCCESS);
                assertThat(retry.abort(first)).as("abort %d of first", attempt)
                        .isEqualTo(EndAnswer.REFUSED_AS_COMMITTED);
                assertThat(retry.commit(dropped)).as("commit %d of dropped", attempt)
                        .isEqualTo(EndAnswer.REFUSED_AS_ABORTED);
                assertThat(retry.abort(dropped)).as("abort %d of dropped", attempt).isEqualTo(EndAnswer.SUCCESS);
                assertThat(retry.commit(second)).as("commit %d of second", attempt).isEqualTo(EndAnswer.SUCCESS);
            }

            assertThat(Txns.readAll(client, topic)).containsExactly("c1", "c2", "c3");
        }
    }

    @Test
    void adminTransactionMetadataShowsTheOutcomeOfAnEndedTransaction() throws Exception {
        try (Producer<String> producer = Txns.producer(client, Txns.uniqueTopic("admin-view"))) {
            TxnID committed = Txns.committed(client, producer, "a");
            TxnID aborted = Txns.aborted(client, producer, "b");

            TransactionMetadata committedView = admin.transactions().getTransactionMetadata(committed);
            TransactionMetadata abortedView = admin.transactions().getTransactionMetadata(aborted);

            assertThat(committedView.status).isEqualTo("COMMITTING");
            assertThat(abortedView.status).isEqualTo("ABORTING");
            assertThat(committedView.producedPartitions).isEmpty();
            assertThat(committedView.txnId).isEqualTo(committed.toString());
        }
    }

    @Test
    void keepsOutcomesInANonPartitionedCompactedSystemTopic() throws Exception {
        try (Producer<String> producer = Txns.producer(client, Txns.uniqueTopic("state"))) {
            Txns.committed(client, producer, "a");
        }
        String stateTopic = "persistent://pulsar/system/__terminated_txn_state_0";

        assertThat(admin.topics().getPartitionedTopicMetadata(stateTopic).partitions).isZero();
        assertThat(admin.topics().getStats(stateTopic).getPublishers()).singleElement()
                .satisfies(writer -> assertThat(writer.getAccessMode())
                        .isEqualTo(org.apache.pulsar.client.api.ProducerAccessMode.ExclusiveWithFencing));

        admin.topics().triggerCompaction(stateTopic);
        org.awaitility.Awaitility.await().atMost(java.time.Duration.ofMinutes(1)).until(() ->
                admin.topics().compactionStatus(stateTopic).status
                        == org.apache.pulsar.client.admin.LongRunningProcessStatus.Status.SUCCESS);
        assertThat(admin.topics().getInternalStats(stateTopic).compactedLedger.ledgerId).isPositive();
        Map<String, java.util.List<String>> live = StateTopicReader.liveRecords(client, stateTopic);
        assertThat(live).as("one key per block of sequence ids, each holding transactions of coordinator 0")
                .isNotEmpty()
                .allSatisfy((key, txns) -> {
                    assertThat(key).startsWith("c");
                    assertThat(txns).isNotEmpty().allSatisfy(txn -> assertThat(txn).startsWith("0:"));
                });
    }
}
