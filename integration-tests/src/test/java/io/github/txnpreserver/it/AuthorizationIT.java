package io.github.txnpreserver.it;

import static org.assertj.core.api.Assertions.assertThat;

import java.util.ArrayList;
import java.util.EnumSet;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import org.apache.pulsar.client.admin.PulsarAdmin;
import org.apache.pulsar.client.api.AuthenticationFactory;
import org.apache.pulsar.client.api.Producer;
import org.apache.pulsar.client.api.PulsarClient;
import org.apache.pulsar.client.api.transaction.Transaction;
import org.apache.pulsar.client.api.transaction.TransactionCoordinatorClientException;
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
        pulsar = startWithAuth("auth", Map.of("transactionMetaPersistCount", "10"), "alice", "bob");
    }

    /** A broker with token authentication and authorization on, and these roles granted what a client needs. */
    private static LocalPulsar startWithAuth(String name, Map<String, String> extra, String... roles)
            throws Exception {
        Map<String, String> config = new java.util.LinkedHashMap<>(Map.of(
                "authenticationEnabled", "true",
                "authorizationEnabled", "true",
                "authenticationProviders", "org.apache.pulsar.broker.authentication.AuthenticationProviderToken",
                "tokenSecretKey", TOKENS.secretKeyConfig(),
                "superUserRoles", "admin",
                "brokerClientAuthenticationPlugin", "org.apache.pulsar.client.impl.auth.AuthenticationToken",
                "brokerClientAuthenticationParameters", "token:" + TOKENS.tokenFor("admin")));
        config.putAll(extra);
        LocalPulsar broker = LocalPulsar.start(name, config);
        try (PulsarAdmin admin = PulsarAdmin.builder().serviceHttpUrl(broker.httpUrl())
                .authentication(AuthenticationFactory.token(TOKENS.tokenFor("admin"))).build()) {
            for (String role : roles) {
                admin.namespaces().grantPermissionOnNamespace("public/default", role,
                        EnumSet.of(AuthAction.produce, AuthAction.consume));
                // A transactional client must look up the coordinators: grant exactly that topic,
                // never the pulsar/system namespace (its state topics are the brokers' alone).
                admin.topics().grantPermission("persistent://pulsar/system/transaction_coordinator_assign", role,
                        EnumSet.of(AuthAction.consume));
            }
        }
        return broker;
    }

    @AfterAll
    static void stopBroker() throws Exception {
        pulsar.close();
    }

    private static PulsarClient clientOf(String role) throws Exception {
        return clientOf(pulsar, role);
    }

    private static PulsarClient clientOf(LocalPulsar pulsar, String role) throws Exception {
        return PulsarClient.builder().serviceUrl(pulsar.serviceUrl()).enableTransaction(true)
                .authentication(AuthenticationFactory.token(TOKENS.tokenFor(role)))
                .operationTimeout(30, TimeUnit.SECONDS).build();
    }

    private static RetryingEndClient retriesOf(String role) throws Exception {
        return retriesOf(pulsar, role);
    }

    private static RetryingEndClient retriesOf(LocalPulsar pulsar, String role) throws Exception {
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
                // TransactionNotFound naming the owner check: the client helper fails it, an
                // authorization error that no retry changes, not an unknown outcome.
                assertThat(bob.commit(live.getTxnID())).as("live, stock").isEqualTo(EndAnswer.FAILED);
                assertRefusedAsNotTheOwner(bob);
                assertThat(bob.commit(ended)).as("ended, kept").isEqualTo(EndAnswer.FAILED);
                assertRefusedAsNotTheOwner(bob);
                assertThat(bob.abort(ended)).isEqualTo(EndAnswer.FAILED);
                assertRefusedAsNotTheOwner(bob);
            }
            try (RetryingEndClient owner = retriesOf("alice")) {
                assertThat(owner.commit(ended)).isEqualTo(EndAnswer.SUCCESS);
                assertThat(owner.abort(ended)).isEqualTo(EndAnswer.REFUSED_AS_COMMITTED);
            }
            live.abort().get(60, TimeUnit.SECONDS);
        }
    }

    /**
     * Past a memory bound this small (0.02 MiB), a busy role's outcomes leave memory: the
     * oldest are answered from the state topic (the cold tier), and, cold as hot, only to
     * their owner. A quiet role's few outcomes stay answerable (its floor entries) while the
     * busy role pushes memory's window far past them.
     */
    @Test
    void aBusyRolesOldOutcomesAreAnsweredFromTheColdTierToItsOwnerOnly() throws Exception {
        int floor = 5;
        int busyCount = 10_000;
        try (LocalPulsar broker = startWithAuth("auth-floor", Map.of(
                "transactionMetaPersistCount", Integer.toString(floor),
                "transactionMetaPersistMaxMemoryInMB", "0.02"), "quiet", "busy", "other")) {
            List<TxnID> quiet = new ArrayList<>();
            try (PulsarClient client = clientOf(broker, "quiet")) {
                for (int i = 0; i < floor; i++) {
                    Transaction txn = Txns.open(client, java.time.Duration.ofMinutes(5));
                    txn.commit().get(60, TimeUnit.SECONDS);
                    quiet.add(txn.getTxnID());
                }
            }

            List<TxnID> busy = java.util.Collections.synchronizedList(new ArrayList<>());
            long start = System.nanoTime();
            try (PulsarClient client = clientOf(broker, "busy")) {
                java.util.concurrent.ExecutorService threads = java.util.concurrent.Executors.newFixedThreadPool(8);
                java.util.concurrent.atomic.AtomicInteger left = new java.util.concurrent.atomic.AtomicInteger(busyCount);
                List<java.util.concurrent.Future<?>> workers = new ArrayList<>();
                for (int t = 0; t < 8; t++) {
                    workers.add(threads.submit(() -> {
                        while (left.getAndDecrement() > 0) {
                            Transaction txn = Txns.open(client, java.time.Duration.ofMinutes(5));
                            txn.commit().get(60, TimeUnit.SECONDS);
                            busy.add(txn.getTxnID());
                        }
                        return null;
                    }));
                }
                for (java.util.concurrent.Future<?> worker : workers) {
                    worker.get(5, TimeUnit.MINUTES);
                }
                threads.shutdown();
            }
            System.out.printf("busy role committed %d transactions in %.1f s%n", busy.size(),
                    (System.nanoTime() - start) / 1e9);
            List<TxnID> busyBySequence = new ArrayList<>(busy);
            busyBySequence.sort(java.util.Comparator.comparingLong(TxnID::getMostSigBits)
                    .thenComparingLong(TxnID::getLeastSigBits));

            try (RetryingEndClient owner = retriesOf(broker, "quiet")) {
                for (TxnID txn : quiet) {
                    assertThat(owner.commit(txn)).as("the quiet role's %s, kept by the floor", txn)
                            .isEqualTo(EndAnswer.SUCCESS);
                }
            }
            try (RetryingEndClient retry = retriesOf(broker, "busy")) {
                for (TxnID txn : busyBySequence.subList(0, 20)) {
                    // 0.02 MiB hold about ten blocks besides a page of the cold tier: these are cold.
                    assertThat(retry.commit(txn)).as("the busy role's old %s, out of memory", txn)
                            .isEqualTo(EndAnswer.SUCCESS);
                }
                for (TxnID txn : busyBySequence.subList(busyBySequence.size() - floor, busyBySequence.size())) {
                    assertThat(retry.commit(txn)).as("the busy role's newest %s", txn).isEqualTo(EndAnswer.SUCCESS);
                }
            }
            try (RetryingEndClient other = retriesOf(broker, "other")) {
                assertThat(other.commit(quiet.get(0))).as("another role, the quiet role's transaction")
                        .isEqualTo(EndAnswer.FAILED);
                assertRefusedAsNotTheOwner(other);
                for (TxnID txn : busyBySequence.subList(0, 5)) {
                    assertThat(other.commit(txn)).as("another role, the busy role's cold %s", txn)
                            .isEqualTo(EndAnswer.FAILED);
                    assertRefusedAsNotTheOwner(other);
                    assertThat(other.abort(txn)).isEqualTo(EndAnswer.FAILED);
                    assertRefusedAsNotTheOwner(other);
                }
            }
        }
    }

    /**
     * The last end was refused as to any role that does not own the transaction, live or
     * ended: the stock client's TransactionNotFound with the broker's ownership message, which
     * tells nothing of the outcome.
     */
    private static void assertRefusedAsNotTheOwner(RetryingEndClient retries) {
        assertThat(retries.lastFailure()).isInstanceOf(TransactionCoordinatorClientException.TransactionNotFoundException.class);
        assertThat(retries.lastMessage()).contains("is neither the owner of the transaction")
                .doesNotContain("COMMIT").doesNotContain("ABORT");
    }
}
