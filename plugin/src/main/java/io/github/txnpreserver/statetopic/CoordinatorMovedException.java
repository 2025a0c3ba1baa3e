package io.github.txnpreserver.statetopic;

/**
 * The state topic's writer was lost and this broker no longer owns the coordinator: the
 * coordinator must close here, as the stock store does when its log is fenced, so that its
 * clients move to the new owner.
 */
public class CoordinatorMovedException extends RuntimeException {

    private static final long serialVersionUID = 1L;

    public CoordinatorMovedException(long coordinatorId) {
        super("coordinator " + coordinatorId + " is no longer owned by this broker");
    }
}
