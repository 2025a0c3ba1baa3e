package io.github.txnpreserver.preserver.thread;

/**
 * The preserver cannot answer now: its coordinator closed, its restore did not end within
 * the wait a request is given, or too many ended transactions wait for the state topic.
 * Retryable: the store answers it as "coordinator not found", which the client retries
 * (after looking the coordinator up again) and the broker does not loop on.
 */
public class PreserverUnavailableException extends RuntimeException {

    private static final long serialVersionUID = 1L;

    public PreserverUnavailableException(String message) {
        super(message, null, false, false);
    }
}
