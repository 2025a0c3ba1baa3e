package io.github.txnpreserver.it;

import static org.assertj.core.api.Assertions.assertThat;

import java.util.EnumSet;
import java.util.Map;
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
 * With token authentication and authorization on, an ended transaction is guarded exactly as
 * a live one: only its owner role ends it or learns its outcome. The broker's internal
 * client, which writes the state topic, is a superuser (see README, "Security").
 */
@DisplayName("With authentication and authorization on")
class AuthorizationIT {

    private static final Tokens TOKENS = Tokens.withRandomSecret();
    private static LocalPulsar pulsar;

    @BeforeAll
    static void startBroker() throws Exception {
        pulsar = LocalPulsar.start("auth", Map.of(
                "transactionMetaPersistCount", "10",
                "authenticationEnabled", "true",
                "authorizationEnabled", "true",
                "authenticationProviders", "org.apache.pulsar.broker.authentication.AuthenticationProviderToken",
                "tokenSecretKey", TOKENS.secretKeyConfig(),
                "superUserRoles", "admin",
                "brokerClientAuthenticationPlugin", "org.apache.pulsar.client.impl.auth.AuthenticationToken",
                "brokerClientAuthenticationParameters", "token:" + TOKENS.tokenFor("admin")));
        try (PulsarAdmin admin = PulsarAdmin.builder().serviceHttpUrl(pulsar.httpUrl())
                .authentication(AuthenticationFactory.token(TOKENS.tokenFor("admin"))).build()) {
            for (String role : new String[] {"alice", "bob"}) {
                admin.namespaces().grantPermissionOnNamespace("public/default", role,
                        EnumSet.of(AuthAction.produce, AuthAction.consume));
                // A transactional client must look up the coordinators: grant exactly that topic,
                // never the pulsar/system namespace (its state topics are the brokers' alone).
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

    @Test
    void anotherRoleCanNeitherEndNorLearnTheOutcomeOfAnEndedTransactionAsOfALiveOne() throws Exception {
        TxnID ended;
        Transaction live;
        try (PulsarClient alice = clientOf("alice");
             Producer<String> producer = Txns.producer(alice, Txns.uniqueTopic("auth"))) {
            ended = Txns.committed(alice, producer, "a");
            live = Txns.open(alice, java.time.Duration.ofMinutes(5));
            producer.newMessage(live).value("b").send();

            try (RetryingEndClient bob = retriesOf("bob")) {
                assertThat(bob.commit(live.getTxnID())).as("live, stock").isEqualTo(EndAnswer.NOT_FOUND);
                assertThat(bob.commit(ended)).as("ended, kept").isEqualTo(EndAnswer.NOT_FOUND);
                assertThat(bob.lastMessage()).contains("neither the owner").doesNotContain("COMMIT");
                assertThat(bob.abort(ended)).isEqualTo(EndAnswer.NOT_FOUND);
                assertThat(bob.lastMessage()).doesNotContain("COMMIT");
            }
            try (RetryingEndClient owner = retriesOf("alice")) {
                assertThat(owner.commit(ended)).isEqualTo(EndAnswer.SUCCESS);
                assertThat(owner.abort(ended)).isEqualTo(EndAnswer.REFUSED_AS_COMMITTED);
            }
            live.abort().get();
        }
    }
}
