package io.github.txnpreserver.client;

/**
 * What became of a transaction, why, and the coordinator's own words: the answer of
 * {@link TransactionEnds#commitAndExplain} and {@link TransactionEnds#abortAndExplain}.
 *
 * @param outcome committed, aborted, or unknown
 * @param reason what the coordinator said beyond the outcome
 * @param coordinatorMessage the coordinator's refusal as it sent it, null when the request succeeded
 */
public record EndResult(TransactionOutcome outcome, Reason reason, String coordinatorMessage) {

    /** What the coordinator said beyond the outcome. */
    public enum Reason {
        /** COMMITTED or ABORTED: the request ended it, or it had ended so (by its client or an admin). */
        ENDED,
        /**
         * ABORTED: the coordinator aborted it because it stayed open past its timeout. A commit
         * of it is refused; records a committer sent in it are in no topic unless it sends
         * them again (docs/flink.md). Said by a broker with the plugin.
         */
        TIMEOUT,
        /**
         * UNKNOWN: the coordinator issued it but no longer keeps its outcome: it ended before
         * the window of kept outcomes (the message says where the window starts), or a limit
         * dropped it. It did end; whether committed or aborted cannot be learnt any more.
         * Said by a broker with the plugin.
         */
        FORGOTTEN,
        /**
         * UNKNOWN: the coordinator never issued it (its sequence is above the highest issued):
         * a wrong id, or another cluster's. Nothing it names exists. Said by a broker with the plugin.
         */
        NEVER_ISSUED,
        /**
         * UNKNOWN: the coordinator said only "not found": stock Pulsar (which forgets a
         * transaction once it ended), the plugin switched off, or a plugin older than 0.7.
         */
        NOT_FOUND
    }
}
