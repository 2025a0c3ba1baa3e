package io.github.txnpreserver.statetopic;

/** A state-topic entry the plugin cannot interpret; it is logged, counted and skipped. */
public class MalformedRecordException extends Exception {

    private static final long serialVersionUID = 1L;

    public MalformedRecordException(String message) {
        super(message);
    }

    public MalformedRecordException(String message, Throwable cause) {
        super(message, cause);
    }
}
