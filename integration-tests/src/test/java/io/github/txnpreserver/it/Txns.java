package io.github.txnpreserver.it;

import java.time.Duration;
import java.time.Instant;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.TimeUnit;
import org.apache.pulsar.client.admin.PulsarAdmin;
import org.apache.pulsar.client.admin.PulsarAdminException;
import org.apache.pulsar.client.api.Consumer;
import org.apache.pulsar.client.api.Message;
import org.apache.pulsar.client.api.Producer;
import org.apache.pulsar.client.api.PulsarClient;
import org.apache.pulsar.client.api.PulsarClientException;
import org.apache.pulsar.client.api.Schema;
import org.apache.pulsar.client.api.SubscriptionInitialPosition;
import org.apache.pulsar.client.api.transaction.Transaction;
import org.apache.pulsar.client.api.transaction.TxnID;

/** What the tests do with the stock client, in one place. */
final class Txns {

    private static final String END_MARK = "end of the test's read ";
    /**
     * How long an open, commit or abort may take: far past the client's operation timeout
     * (30 s), after which the client fails the request itself. A request left unanswered fails
     * the test here instead of holding it.
     */
    static final Duration REQUEST_BOUND = Duration.ofMinutes(2);

    private Txns() {
    }

    static PulsarClient client(LocalPulsar pulsar) throws PulsarClientException {
        return client(pulsar.serviceUrl());
    }

    /** A client with transactions on, for a broker or a cluster (a service URL naming several brokers). */
    static PulsarClient client(String serviceUrl) throws PulsarClientException {
        return PulsarClient.builder().serviceUrl(serviceUrl).enableTransaction(true)
                .operationTimeout(30, TimeUnit.SECONDS).build();
    }

    static PulsarAdmin admin(LocalPulsar pulsar) throws PulsarClientException {
        return PulsarAdmin.builder().serviceHttpUrl(pulsar.httpUrl()).build();
    }

    static Producer<String> producer(PulsarClient client, String topic) throws PulsarClientException {
        return client.newProducer(Schema.STRING).topic(topic).sendTimeout(0, TimeUnit.SECONDS).create();
    }

    static Transaction open(PulsarClient client, Duration timeout) throws Exception {
        return client.newTransaction().withTransactionTimeout(timeout.toMillis(), TimeUnit.MILLISECONDS).build()
                .get(REQUEST_BOUND.toMillis(), TimeUnit.MILLISECONDS);
    }

    /** A transaction holding {@code values} on the producer's topic, committed. */
    static TxnID committed(PulsarClient client, Producer<String> producer, String... values) throws Exception {
        Transaction txn = open(client, Duration.ofMinutes(5));
        for (String value : values) {
            producer.newMessage(txn).value(value).send();
        }
        txn.commit().get(REQUEST_BOUND.toMillis(), TimeUnit.MILLISECONDS);
        return txn.getTxnID();
    }

    /** A transaction holding {@code values} on the producer's topic, aborted by the client. */
    static TxnID aborted(PulsarClient client, Producer<String> producer, String... values) throws Exception {
        Transaction txn = open(client, Duration.ofMinutes(5));
        for (String value : values) {
            producer.newMessage(txn).value(value).send();
        }
        txn.abort().get(REQUEST_BOUND.toMillis(), TimeUnit.MILLISECONDS);
        return txn.getTxnID();
    }

    /** A transaction holding {@code value}, left open until the coordinator aborts it on timeout. */
    static TxnID timedOut(PulsarClient client, PulsarAdmin admin, Producer<String> producer, String value)
            throws Exception {
        Transaction txn = open(client, Duration.ofSeconds(2));
        producer.newMessage(txn).value(value).send();
        awaitStatus(admin, txn.getTxnID(), "ABORT");
        return txn.getTxnID();
    }

    /** Waits until admin shows the transaction in a status starting with {@code prefix}. */
    static void awaitStatus(PulsarAdmin admin, TxnID txnId, String prefix) throws Exception {
        Instant deadline = Instant.now().plus(Duration.ofMinutes(1));
        String status = null;
        while (Instant.now().isBefore(deadline)) {
            try {
                status = admin.transactions().getTransactionMetadata(txnId).status;
                if (status.startsWith(prefix)) {
                    return;
                }
            } catch (PulsarAdminException e) {
                status = e.getMessage();
            }
            Thread.sleep(300);
        }
        throw new AssertionError(txnId + " did not reach " + prefix + "; last status: " + status);
    }

    /**
     * Everything a new subscription reads from the start of the topic, up to an end mark this
     * publishes after it: every transaction the test ended before sits before the mark, and the
     * broker delivers nothing past an open one, so the read is complete when the mark arrives
     * (marks of earlier reads are skipped). Fails if it does not arrive within two minutes,
     * which a transaction left open longer than that would cause.
     */
    static List<String> readAll(PulsarClient client, String topic) throws Exception {
        String mark = END_MARK + System.nanoTime();
        List<String> values = new ArrayList<>();
        try (Consumer<String> consumer = client.newConsumer(Schema.STRING).topic(topic)
                .subscriptionName("verify-" + System.nanoTime())
                .subscriptionInitialPosition(SubscriptionInitialPosition.Earliest).subscribe()) {
            try (Producer<String> marker = client.newProducer(Schema.STRING).topic(topic).create()) {
                marker.send(mark);
            }
            Instant deadline = Instant.now().plus(Duration.ofMinutes(2));
            while (Instant.now().isBefore(deadline)) {
                Message<String> message = consumer.receive(1, TimeUnit.SECONDS);
                if (message == null) {
                    continue;
                }
                consumer.acknowledge(message);
                if (mark.equals(message.getValue())) {
                    return values;
                }
                if (!message.getValue().startsWith(END_MARK)) {
                    values.add(message.getValue());
                }
            }
        }
        throw new AssertionError("The end mark of " + topic + " did not arrive within 2 minutes; read before it: "
                + values);
    }

    static String uniqueTopic(String name) {
        return "persistent://public/default/" + name + "-" + System.nanoTime();
    }
}
