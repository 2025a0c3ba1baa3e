package io.github.txnpreserver.resolution;

import java.util.regex.Pattern;

/**
 * Whether a transaction's status is read by the broker's end-transaction chain, which reads it
 * to decide whether to hand the end's action to the store (docs/DESIGN.md, "Timeout-aborts").
 * The store interface does not say who asks; the call stack does. Asked only when a status is
 * read and the answer depends on it (a transaction aborted on its timeout, finishing or kept),
 * never on a lookup: the broker's timeout tracker looks up every transaction once at its
 * timeout, and a stack walk each time cost it about 5 µs per transaction (docs/performance.md,
 * "Where the CPU goes"). The chain reads the status in a lambda of its method, so that lambda
 * is the reader's direct caller, on whichever thread completed the lookup. Should a Pulsar
 * line rename the method, or read the status elsewhere than in a lambda of it, the answer is
 * false: the commit is refused with the broker's own message, as before this plugin knew
 * timeout-aborts, and only the count and the warning are lost.
 */
final class BrokerEndCheck {

    private static final String SERVICE = "org.apache.pulsar.broker.TransactionMetadataStoreService";
    /**
     * javac's name of a lambda in {@code endTransaction}, which reads the status of
     * {@code getTxnMeta}'s answer (not {@code endTransactionForTimeout}'s, the timeout tracker's).
     */
    private static final Pattern LAMBDA = Pattern.compile("lambda\\$endTransaction\\$\\d+");
    /** This class, the status read, then the chain's lambda: a margin above. */
    private static final int FRAMES = 6;
    private static final StackWalker WALKER = StackWalker.getInstance();

    private BrokerEndCheck() {
    }

    static boolean isCaller() {
        return WALKER.walk(frames -> frames.limit(FRAMES).anyMatch(frame -> SERVICE.equals(frame.getClassName())
                && LAMBDA.matcher(frame.getMethodName()).matches()));
    }
}
