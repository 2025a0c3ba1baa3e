package io.github.txnpreserver.it;

import static org.assertj.core.api.Assertions.assertThat;

import io.github.txnpreserver.client.OutcomeQuery;
import io.github.txnpreserver.client.TransactionState;
import java.nio.file.Path;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import org.apache.pulsar.client.admin.PulsarAdmin;
import org.apache.pulsar.client.api.Producer;
import org.apache.pulsar.client.api.PulsarClient;
import org.apache.pulsar.client.api.transaction.TxnID;
import org.junit.jupiter.api.DisplayName;
import org.junit.jupiter.api.Test;

/**
 * An upgrade from 0.6.0, built from this repository's history and installed with its own
 * install.sh: it keeps a committed, an aborted and a timed-out transaction, is killed with
 * SIGKILL, and this build is installed over it with install.sh (the documented upgrade step).
 * 0.6.0's records are read as they are; its aborts, timeout-aborts among them, stay plain
 * aborts (it did not tell them apart) unless the log still holds their terminal entries, whose
 * replay tells a timeout-abort apart; what ends after the upgrade is told apart.
 */
@DisplayName("An upgrade from 0.6.0 with a kill -9 between")
class UpgradeFrom060IT {

    /**
     * 0.6.0 as released: the last commit whose CHANGELOG's newest version is 0.6.0 (its tag,
     * v0.6.0, is not in every clone).
     */
    private static final String V060 = "67973129bc4c685cdc426825ab94b3a80789d84b";

    @Test
    void outcomesKeptBy060AreAnsweredAfterTheUpgradeAndNewTimeoutAbortsAreToldApart() throws Exception {
        Path home = PulsarDistribution.withReleaseInstalled("0.6.0", V060);
        String topic = Txns.uniqueTopic("upgrade");
        TxnID committed;
        TxnID aborted;
        TxnID timedOut;
        try (LocalPulsar pulsar = LocalPulsar.startFrom(home, "upgrade-060", Map.of(), Map.of())) {
            assertThat(pulsar.output()).contains("Transaction outcome preserver 0.6.0: Pulsar ");
            try (PulsarClient client = Txns.client(pulsar); PulsarAdmin admin = Txns.admin(pulsar);
                 Producer<String> producer = Txns.producer(client, topic)) {
                committed = Txns.committed(client, producer, "kept");
                aborted = Txns.aborted(client, producer, "dropped");
                timedOut = Txns.timedOut(client, admin, producer, "expired");
            }
            // 0.6.0 writes its records a group interval (1 s) after the ends: these are its records.
            Thread.sleep(5_000);
            pulsar.kill();
            // The operator had tuned 0.6.0's block (whose header said edits are replaced): the
            // upgrade keeps the value.
            Path conf = home.resolve("conf/standalone.conf");
            String tuned = java.nio.file.Files.readString(conf).replace("\ntransactionMetaPersistMaxMemoryInMB=64\n",
                    "\ntransactionMetaPersistMaxMemoryInMB=48\n");
            assertThat(tuned).contains("\ntransactionMetaPersistMaxMemoryInMB=48\n");
            java.nio.file.Files.writeString(conf, tuned);

            PulsarDistribution.installThisBuild(home);
            pulsar.start();

            assertThat(pulsar.output()).contains("Transaction outcome preserver " + System.getProperty("txnpreserver.version")
                    + ": Pulsar ");
            assertThat(pulsar.output()).contains("maxMemoryBytes=" + (48L << 20) + "]");
            try (PulsarClient client = Txns.client(pulsar); PulsarAdmin admin = Txns.admin(pulsar);
                 Producer<String> producer = Txns.producer(client, topic);
                 RetryingEndClient retry = RetryingEndClient.connect(pulsar.serviceUrl())) {
                assertThat(retry.commit(committed)).isEqualTo(EndAnswer.SUCCESS);
                assertThat(retry.abort(committed)).isEqualTo(EndAnswer.REFUSED_AS_COMMITTED);
                assertThat(retry.commit(aborted)).isEqualTo(EndAnswer.REFUSED_AS_ABORTED);
                assertThat(retry.commit(timedOut)).isEqualTo(EndAnswer.REFUSED_AS_ABORTED);
                String said = retry.lastMessage();
                assertThat(retry.abort(timedOut)).isEqualTo(EndAnswer.SUCCESS);

                // 0.6.0's record says a plain abort; if the log still holds the terminal entry
                // (a kill -9 can leave the log's releases unpersisted), the replay tells the
                // timeout apart. Either way the answer and the query agree.
                OutcomeQuery query = OutcomeQuery.of(pulsar.httpUrl());
                TransactionState state = query.ask(timedOut).get(2, TimeUnit.MINUTES);
                assertThat(state.state()).isEqualTo(TransactionState.State.ABORTED);
                System.out.println("UpgradeFrom060IT: 0.6.0's timeout-abort is answered: " + said + "; abortedBy "
                        + state.abortedBy());
                if (state.abortedBy() == TransactionState.AbortedBy.TIMEOUT) {
                    assertThat(said).contains("was aborted on its timeout at");
                } else {
                    assertThat(state.abortedBy()).isEqualTo(TransactionState.AbortedBy.CLIENT_OR_ADMIN);
                    assertThat(said).as("0.6.0 kept it as a plain abort").contains("ABORTING");
                }
                assertThat(query.ask(committed).get(2, TimeUnit.MINUTES).state())
                        .isEqualTo(TransactionState.State.COMMITTED);

                TxnID timedOutAfter = Txns.timedOut(client, admin, producer, "expired-after");
                assertThat(retry.commit(timedOutAfter)).isEqualTo(EndAnswer.REFUSED_AS_ABORTED);
                assertThat(retry.lastMessage()).contains("was aborted on its timeout at");

                assertThat(BrokerMetrics.ofCoordinatorZero(pulsar, "pulsar_txn_preserver_malformed_records_total"))
                        .as("0.6.0's records are read as they are").isZero();
                assertThat(Txns.readAll(client, topic)).containsExactly("kept");
            }
        }
    }
}
