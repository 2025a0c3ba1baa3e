package io.github.txnpreserver.it;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import io.github.txnpreserver.client.EndResult;
import io.github.txnpreserver.client.OutcomeQuery;
import io.github.txnpreserver.client.TransactionEnds;
import io.github.txnpreserver.client.TransactionOutcome;
import io.github.txnpreserver.client.TransactionState;
import java.time.Duration;
import java.time.Instant;
import java.util.EnumSet;
import java.util.LinkedHashMap;
import java.util.Map;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import org.apache.pulsar.client.admin.PulsarAdmin;
import org.apache.pulsar.client.api.AuthenticationFactory;
import org.apache.pulsar.client.api.Producer;
import org.apache.pulsar.client.api.PulsarClient;
import org.apache.pulsar.client.api.transaction.Transaction;
import org.apache.pulsar.client.api.transaction.TxnID;
import org.apache.pulsar.common.policies.data.AuthAction;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.DisplayName;
import org.junit.jupiter.api.Test;

/**
 * The answers that tell more than stock Pulsar's, on a real broker with authentication and
 * authorization on, through the stock client: a commit of a transaction the coordinator
 * aborted on its timeout (refused as stock refuses it, but named, counted, warned about),
 * "not found" that says "never issued" or "no longer kept", and the outcome query (owner,
 * another role, a super user).
 */
@DisplayName("On a real broker, the answers about timeout-aborts, forgotten transactions, and the outcome query")
class OutcomeAnswersIT {

    private static final Tokens TOKENS = Tokens.withRandomSecret();
    /** Outcomes kept 36 s, expiry every second: a forgotten transaction within a test. */
    private static final Duration RETENTION = Duration.ofSeconds(36);
    private static final Duration TXN_TIMEOUT = Duration.ofSeconds(2);
    private static LocalPulsar pulsar;

    @BeforeAll
    static void startBroker() throws Exception {
        Map<String, String> config = new LinkedHashMap<>();
        config.put("authenticationEnabled", "true");
        config.put("authorizationEnabled", "true");
        config.put("authenticationProviders", "org.apache.pulsar.broker.authentication.AuthenticationProviderToken");
        config.put("tokenSecretKey", TOKENS.secretKeyConfig());
        config.put("superUserRoles", "admin");
        config.put("brokerClientAuthenticationPlugin", "org.apache.pulsar.client.impl.auth.AuthenticationToken");
        config.put("brokerClientAuthenticationParameters", "token:" + TOKENS.tokenFor("admin"));
        config.put("transactionMetaPersistCount", "10");
        config.put("transactionMetaPersistTimeInHour", "0.01");
        config.put("transactionMetaExpireCheckIntervalInSecond", "1");
        pulsar = LocalPulsar.start("answers", config);
        try (PulsarAdmin admin = PulsarAdmin.builder().serviceHttpUrl(pulsar.httpUrl())
                .authentication(AuthenticationFactory.token(TOKENS.tokenFor("admin"))).build()) {
            for (String role : new String[] {"alice", "bob"}) {
                admin.namespaces().grantPermissionOnNamespace("public/default", role,
                        EnumSet.of(AuthAction.produce, AuthAction.consume));
                admin.topics().grantPermission("persistent://pulsar/system/transaction_coordinator_assign", role,
                        EnumSet.of(AuthAction.consume));
            }
        }
    }

    @AfterAll
    static void stopBroker() throws Exception {
        pulsar.close();
    }

    private static PulsarClient clientOf(String role) throws Exception {
        return PulsarClient.builder().serviceUrl(pulsar.serviceUrl()).enableTransaction(true)
                .authentication(AuthenticationFactory.token(TOKENS.tokenFor(role)))
                .operationTimeout(30, TimeUnit.SECONDS).build();
    }

    private static RetryingEndClient retriesOf(String role) throws Exception {
        return new RetryingEndClient(PulsarClient.builder().serviceUrl(pulsar.serviceUrl())
                .authentication(AuthenticationFactory.token(TOKENS.tokenFor(role)))
                .operationTimeout(30, TimeUnit.SECONDS));
    }

    private static OutcomeQuery queryAs(String role) {
        return OutcomeQuery.of(pulsar.httpUrl(), AuthenticationFactory.token(TOKENS.tokenFor(role)));
    }

    private static TransactionState ask(String role, TxnID txn) throws Exception {
        return queryAs(role).ask(txn).get(2, TimeUnit.MINUTES);
    }

    private static int refusalStatus(String role, TxnID txn) {
        Throwable failure = null;
        try {
            ask(role, txn);
        } catch (Exception e) {
            failure = e instanceof ExecutionException ? e.getCause() : e;
        }
        assertThat(failure).as("the query of %s by %s is refused", txn, role)
                .isInstanceOf(OutcomeQuery.OutcomeQueryException.class);
        return ((OutcomeQuery.OutcomeQueryException) failure).status();
    }

    private static TransactionState awaitState(String role, TxnID txn, TransactionState.State state,
                                               Duration within) throws Exception {
        Instant deadline = Instant.now().plus(within);
        TransactionState last = null;
        while (Instant.now().isBefore(deadline)) {
            last = ask(role, txn);
            if (last.state() == state) {
                return last;
            }
            Thread.sleep(200);
        }
        throw new AssertionError(txn + " did not become " + state + " within " + within + "; last: " + last);
    }

    private static double metric(String name) throws Exception {
        return BrokerMetrics.ofCoordinatorZero(pulsar, name);
    }

    private static long warningsAbout(TxnID txn) throws Exception {
        String warning = "commit of transaction " + txn + " (owner 'alice') refused: the coordinator aborted it at";
        return pulsar.output().lines().filter(line -> line.contains(warning)).count();
    }

    @Test
    void aCommitOfATransactionTheCoordinatorAbortedOnItsTimeoutIsRefusedNamingItCountedAndWarnedAboutOnce()
            throws Exception {
        String topic = Txns.uniqueTopic("timeout-abort");
        double timeoutAbortsBefore = metric("pulsar_txn_preserver_timeout_aborts_total");
        double refusedBefore = metric("pulsar_txn_preserver_commits_after_timeout_abort_total");
        try (PulsarClient alice = clientOf("alice"); Producer<String> producer = Txns.producer(alice, topic);
             RetryingEndClient retries = retriesOf("alice")) {
            Transaction txn = Txns.open(alice, TXN_TIMEOUT);
            producer.newMessage(txn).value("lost").send();
            TxnID id = txn.getTxnID();
            TransactionState aborted = awaitState("alice", id, TransactionState.State.ABORTED, Duration.ofMinutes(1));

            assertThat(aborted.abortedBy()).isEqualTo(TransactionState.AbortedBy.TIMEOUT);
            assertThat(aborted.owner()).isEqualTo("alice");
            assertThat(aborted.keptUntil()).isEqualTo(aborted.endedAt().plus(RETENTION));

            assertThat(retries.commit(id)).isEqualTo(EndAnswer.REFUSED_AS_ABORTED);
            String said = retries.lastMessage();
            System.out.println("OutcomeAnswersIT: a commit after the timeout-abort is answered: " + said);
            assertThat(said).startsWith("Transaction " + id + " was aborted on its timeout at ")
                    .contains("(its timeout of " + TXN_TIMEOUT.toMillis() + " ms passed while it was open)")
                    .endsWith("it cannot be committed");
            assertThat(retries.commit(id)).isEqualTo(EndAnswer.REFUSED_AS_ABORTED);
            assertThat(retries.abort(id)).as("an abort retry").isEqualTo(EndAnswer.SUCCESS);

            EndResult explained = TransactionEnds.of(alice).commitAndExplain(id).get(2, TimeUnit.MINUTES);
            assertThat(explained.outcome()).isEqualTo(TransactionOutcome.ABORTED);
            assertThat(explained.reason()).isEqualTo(EndResult.Reason.TIMEOUT);

            assertThat(metric("pulsar_txn_preserver_timeout_aborts_total") - timeoutAbortsBefore).isEqualTo(1);
            assertThat(metric("pulsar_txn_preserver_commits_after_timeout_abort_total") - refusedBefore)
                    .as("three commits: two retries, one commitAndExplain").isEqualTo(3);
            assertThat(warningsAbout(id)).as("warned once, naming the owner and the timeout").isEqualTo(1);
            assertThat(pulsar.output()).contains("when it had stayed open past its timeout of "
                    + TXN_TIMEOUT.toMillis() + " ms");
            assertThat(Txns.readAll(alice, topic)).as("the records are in no topic").isEmpty();
        }
    }

    @Test
    void theQueryAnswersEachStateToItsOwnerAndASuperUserAndRefusesAnotherRole() throws Exception {
        try (PulsarClient alice = clientOf("alice");
             Producer<String> producer = Txns.producer(alice, Txns.uniqueTopic("query"))) {
            Transaction open = Txns.open(alice, Duration.ofMinutes(5));
            producer.newMessage(open).value("o").send();
            TxnID committed = Txns.committed(alice, producer, "c");
            TxnID aborted = Txns.aborted(alice, producer, "a");

            TransactionState openState = ask("alice", open.getTxnID());
            assertThat(openState.state()).isEqualTo(TransactionState.State.OPEN);
            assertThat(openState.timeoutMillis()).isEqualTo(Duration.ofMinutes(5).toMillis());
            assertThat(openState.openedAt()).isBefore(Instant.now().plusSeconds(1));
            assertThat(ask("alice", committed).state()).isEqualTo(TransactionState.State.COMMITTED);
            TransactionState abortedState = ask("alice", aborted);
            assertThat(abortedState.state()).isEqualTo(TransactionState.State.ABORTED);
            assertThat(abortedState.abortedBy()).isEqualTo(TransactionState.AbortedBy.CLIENT_OR_ADMIN);

            assertThat(ask("admin", committed).state()).as("a super user").isEqualTo(TransactionState.State.COMMITTED);
            assertThat(ask("admin", committed).owner()).isEqualTo("alice");
            assertThat(refusalStatus("bob", committed)).as("another role, ended").isEqualTo(403);
            assertThat(refusalStatus("bob", open.getTxnID())).as("another role, live").isEqualTo(403);

            assertThat(ask("alice", open.getTxnID()).state()).as("the queries acted on nothing")
                    .isEqualTo(TransactionState.State.OPEN);
            open.abort().get(30, TimeUnit.SECONDS);
        }
    }

    @Test
    void notFoundSaysWhetherTheSequenceWasNeverIssuedOrIsNoLongerKept() throws Exception {
        try (PulsarClient alice = clientOf("alice");
             Producer<String> producer = Txns.producer(alice, Txns.uniqueTopic("forgotten"));
             RetryingEndClient retries = retriesOf("alice")) {
            TxnID ended = Txns.committed(alice, producer, "c");
            TxnID never = new TxnID(ended.getMostSigBits(), ended.getLeastSigBits() + 1_000_000);

            assertThat(retries.commit(never)).isEqualTo(EndAnswer.NOT_FOUND);
            String neverSaid = retries.lastMessage();
            TransactionState neverState = ask("bob", never);
            assertThat(neverState.state()).as("any role").isEqualTo(TransactionState.State.NEVER_ISSUED);
            assertThat(neverState.highestIssued()).isGreaterThanOrEqualTo(ended.getLeastSigBits());

            TransactionState forgotten = awaitState("alice", ended, TransactionState.State.FORGOTTEN,
                    RETENTION.plusSeconds(30));
            assertThat(retries.commit(ended)).isEqualTo(EndAnswer.NOT_FOUND);
            String forgottenSaid = retries.lastMessage();
            System.out.println("OutcomeAnswersIT: never issued: " + neverSaid);
            System.out.println("OutcomeAnswersIT: no longer kept: " + forgottenSaid);
            assertThat(neverSaid).isEqualTo("Transaction " + never + " was never issued: coordinator "
                    + never.getMostSigBits() + " has issued sequences up to " + neverState.highestIssued());
            assertThat(forgottenSaid).startsWith("Transaction " + ended + " is no longer kept: its outcome is forgotten");
            assertThat(forgotten.highestIssued()).isGreaterThanOrEqualTo(ended.getLeastSigBits());

            TransactionEnds ends = TransactionEnds.of(alice);
            assertThat(ends.commitAndExplain(ended).get(2, TimeUnit.MINUTES).reason())
                    .isEqualTo(EndResult.Reason.FORGOTTEN);
            assertThat(ends.abortAndExplain(never).get(2, TimeUnit.MINUTES).reason())
                    .isEqualTo(EndResult.Reason.NEVER_ISSUED);
            assertThat(ends.commitAndExplain(never).get(2, TimeUnit.MINUTES).outcome())
                    .isEqualTo(TransactionOutcome.UNKNOWN);
        }
    }
}
