package io.github.txnpreserver.store;

import org.apache.pulsar.client.api.PulsarClientException;

/**
 * A kept outcome could not be made durable. It is a {@link PulsarClientException.BrokerPersistenceException}
 * because that is what the broker's end-transaction path retries (every second, without
 * limit): the transaction stays finishing, its terminal log entry is not written, and the
 * next attempt writes the record again.
 */
public class StateTopicWriteException extends PulsarClientException.BrokerPersistenceException {

    private static final long serialVersionUID = 1L;

    public StateTopicWriteException(String message, Throwable cause) {
        super(message + ": " + cause);
        initCause(cause);
    }
}
