package io.github.txnpreserver.resolution;

/**
 * Whether a lookup comes from the broker's end-transaction chain, which reads the reported
 * status to decide whether to hand the end's action to the store (docs/DESIGN.md,
 * "Timeout-aborts"). The store interface does not say who asks; the call stack does. Read
 * only for a transaction aborted on its timeout that is not live or still finishing (a retry,
 * an admin view), never on a commit's own path. Should a Pulsar line rename the chain's
 * method, the answer is false: the commit is refused with the broker's own message, as before
 * this plugin knew timeout-aborts, and only the count and the warning are lost.
 */
final class BrokerEndCheck {

    /** {@code TransactionMetadataStoreService.endTransaction}, which calls {@code getTxnMeta} directly. */
    private static final String SERVICE = "org.apache.pulsar.broker.TransactionMetadataStoreService";
    private static final String METHOD = "endTransaction";
    /** This class, the resolver, the store's getTxnMeta, the service's getTxnMeta, then the end chain: a margin above. */
    private static final int FRAMES = 10;
    private static final StackWalker WALKER = StackWalker.getInstance();

    private BrokerEndCheck() {
    }

    static boolean isCaller() {
        return WALKER.walk(frames -> frames.limit(FRAMES)
                .anyMatch(frame -> METHOD.equals(frame.getMethodName()) && SERVICE.equals(frame.getClassName())));
    }
}
