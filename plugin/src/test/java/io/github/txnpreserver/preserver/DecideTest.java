package io.github.txnpreserver.preserver;

import static io.github.txnpreserver.testing.Futures.failureOf;
import static org.assertj.core.api.Assertions.assertThat;

import io.github.txnpreserver.config.PreserverConfig;
import io.github.txnpreserver.preserver.kept.KeptOutcome;
import io.github.txnpreserver.preserver.kept.Outcome;
import io.github.txnpreserver.preserver.thread.PreserverUnavailableException;
import io.github.txnpreserver.testing.CallLog;
import io.github.txnpreserver.testing.InMemoryStateTopic;
import io.github.txnpreserver.testing.ManualScheduler;
import io.github.txnpreserver.time.Scheduler;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import org.apache.pulsar.client.api.transaction.TxnID;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.DisplayName;
import org.junit.jupiter.api.Test;

/**
 * An end's decision is answered on the caller's thread and applied later on the
 * coordinator's, so that the terminal entry never waits for that thread to wake. What makes
 * it safe: everything that reads the outcome or releases the transaction's log entries is
 * queued after the decision, and a decision never applied leaves the log holding the
 * outcome. The scheduler is never pumped: a task runs when the test says so.
 */
@DisplayName("An end's decision")
class DecideTest {

    private static final long TC = 7;
    private static final long NOW = 1_700_000_000_000L;
    private static final Duration GROUP = TransactionMetadataPreserver.GROUP_COMMIT_INTERVAL;
    private static final PreserverConfig CONFIG = new PreserverConfig(10, 1000, Duration.ofHours(72),
            Duration.ofSeconds(300), Duration.ofSeconds(60));

    private final ManualScheduler scheduler = new ManualScheduler(NOW);
    private final InMemoryStateTopic topic = new InMemoryStateTopic(new CallLog());
    private final TransactionMetadataPreserver preserver = new TransactionMetadataPreserver(TC, CONFIG, topic,
            scheduler, new OutcomeMemoryBudget(CONFIG.maxMemoryBytes()), GROUP);
    private final List<Long> released = new ArrayList<>();

    DecideTest() {
        preserver.startRestore(() -> Long.MAX_VALUE);
        scheduler.runReady();
    }

    @AfterEach
    void close() {
        scheduler.shutdown();
    }

    private static TxnID txn(long sequence) {
        return new TxnID(TC, sequence);
    }

    @Test
    void isAnsweredBeforeTheCoordinatorsThreadRunsAndALookupQueuedAfterItSeesIt() {
        CompletableFuture<Void> decided = preserver.decide(txn(3), Outcome.COMMITTED, "alice");
        CompletableFuture<KeptOutcome> lookup = preserver.lookUp(txn(3));

        assertThat(decided).isCompleted();
        assertThat(lookup).isNotDone();
        scheduler.runReady();
        assertThat(lookup.join()).isEqualTo(new KeptOutcome(txn(3), Outcome.COMMITTED, "alice", NOW));
    }

    /** Ends {@code sequence} and looks it up once, so that its next lookups are answered from RecentAnswers. */
    private KeptOutcome endedAndLookedUp(long sequence, Outcome outcome) {
        preserver.decide(txn(sequence), outcome, "alice");
        preserver.ended(txn(sequence));
        scheduler.runReady();
        CompletableFuture<KeptOutcome> lookup = preserver.lookUp(txn(sequence));
        scheduler.advance(Scheduler.DEFER_BOUND);
        KeptOutcome found = lookup.join();
        assertThat(preserver.lookUp(txn(sequence))).as("remembered").isCompletedWithValue(found);
        return found;
    }

    /**
     * A kept outcome can change (a stale record of a transaction that was still open is
     * replaced): a lookup made after the decide, before its task runs, is not answered from
     * what a lookup found before it, but queued behind the decision, which it then sees.
     */
    @Test
    void aLookupMadeAfterItIsNotAnsweredWithTheOutcomeRememberedFromBefore() {
        endedAndLookedUp(3, Outcome.COMMITTED);

        preserver.decide(txn(3), Outcome.ABORTED, "alice");
        CompletableFuture<KeptOutcome> after = preserver.lookUp(txn(3));

        assertThat(after).as("not from RecentAnswers").isNotDone();
        scheduler.advance(Scheduler.DEFER_BOUND);
        // Decided 10 ms after NOW: end times are kept in whole seconds, rounded up.
        assertThat(after.join()).isEqualTo(new KeptOutcome(txn(3), Outcome.ABORTED, "alice", NOW + 1000));
    }

    /**
     * The log's replay meets a terminal entry whose outcome differs from the one kept (and
     * already answered): once replayed, lookups are answered with the log's outcome and end
     * time, not with what RecentAnswers remembered from before.
     */
    @Test
    void anOutcomeReplayedFromTheLogIsNotAnsweredWithTheOneRememberedFromBefore() {
        endedAndLookedUp(3, Outcome.COMMITTED);

        preserver.keepFromLog(txn(3), Outcome.ABORTED, "bob", NOW - 60_000);
        scheduler.runReady();

        CompletableFuture<KeptOutcome> after = preserver.lookUp(txn(3));
        assertThat(after).as("not from RecentAnswers").isNotDone();
        scheduler.advance(Scheduler.DEFER_BOUND);
        assertThat(after.join()).isEqualTo(new KeptOutcome(txn(3), Outcome.ABORTED, "bob", NOW - 60_000));
    }

    @Test
    void theReleaseOfTheLogEntriesQueuedAfterItWaitsForTheOutcomesRecord() {
        preserver.decide(txn(3), Outcome.ABORTED, "alice");
        preserver.ended(txn(3));
        preserver.afterOutcomeDurable(3, () -> released.add(3L));

        scheduler.runReady();
        assertThat(released).as("before the group is written").isEmpty();
        assertThat(topic.newestOutcomeOf(txn(3))).isNull();

        scheduler.advance(GROUP);
        assertThat(topic.newestOutcomeOf(txn(3))).isEqualTo(Outcome.ABORTED);
        assertThat(released).containsExactly(3L);
    }

    @Test
    void acceptedJustBeforeTheCoordinatorClosesIsDroppedAndTheLogKeepsTheOutcome() {
        // The close is queued first; the caller does not see it yet and is answered.
        preserver.closeAsync();
        CompletableFuture<Void> decided = preserver.decide(txn(3), Outcome.COMMITTED, "alice");
        preserver.ended(txn(3));
        preserver.afterOutcomeDurable(3, () -> released.add(3L));

        scheduler.runReady();
        scheduler.advance(GROUP.multipliedBy(10));

        assertThat(decided).isCompleted();
        assertThat(released).as("the log's entries stay for the next owner's replay").isEmpty();
        assertThat(topic.newestOutcomeOf(txn(3))).isNull();
    }

    @Test
    void isRefusedOnceTheCoordinatorHasClosed() {
        preserver.closeAsync();
        scheduler.runReady();

        assertThat(failureOf(preserver.decide(txn(3), Outcome.COMMITTED, "alice")))
                .isInstanceOf(PreserverUnavailableException.class);
    }

    @Test
    void ofAnotherCoordinatorsTransactionIsRefusedOnTheCallersThread() {
        CompletableFuture<Void> decided = preserver.decide(new TxnID(TC + 1, 3), Outcome.COMMITTED, "alice");

        assertThat(failureOf(decided)).isInstanceOf(IllegalArgumentException.class);
        assertThat(scheduler.pending()).isZero();
    }

    /**
     * A decision answered and then not kept (its keeping failed, as an entry the log's replay
     * could not follow): the transaction ended here with an outcome this coordinator does not
     * know. A retry is told to try again (the next owner replays the outcome from the log),
     * never "not found", and the log's entries are never released here.
     */
    @Test
    void whoseOutcomeCouldNotBeKeptIsAnsweredUnavailableNotNotFoundAndKeepsItsLogEntries() {
        preserver.decide(txn(3), Outcome.COMMITTED, "alice");
        preserver.notKept(4, new IllegalStateException("injected"));
        preserver.afterOutcomeDurable(4, () -> released.add(4L));
        CompletableFuture<KeptOutcome> lookup = preserver.lookUp(txn(4));
        CompletableFuture<KeptOutcome> other = preserver.lookUp(txn(5));

        scheduler.runReady();
        scheduler.advance(GROUP.multipliedBy(3));

        assertThat(failureOf(lookup)).isInstanceOf(PreserverUnavailableException.class);
        assertThat(other.join()).as("another transaction of the block").isNull();
        assertThat(released).isEmpty();
    }
}
