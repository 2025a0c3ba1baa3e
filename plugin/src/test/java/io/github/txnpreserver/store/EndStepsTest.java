package io.github.txnpreserver.store;

import static org.assertj.core.api.Assertions.assertThat;
import static org.awaitility.Awaitility.await;

import io.github.txnpreserver.cleanup.StuckTransactionRedriver;
import io.github.txnpreserver.config.PreserverConfig;
import io.github.txnpreserver.preserver.kept.Outcome;
import io.github.txnpreserver.resolution.Resolution;
import io.github.txnpreserver.testing.CoordinatorHarness;
import java.time.Duration;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import org.apache.pulsar.client.api.transaction.TxnID;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.DisplayName;
import org.junit.jupiter.api.Test;

/**
 * The store's end steps when a step throws instead of failing its future: the broker's real
 * end-transaction chain over a store whose {@code keepDecided} throws, synchronously, once.
 */
@DisplayName("An end step that throws")
class EndStepsTest {

    private static final String ALICE = "alice";
    private static final String PARTITION = "persistent://public/default/payments-partition-0";
    private static final Duration STUCK_AFTER = Duration.ofSeconds(60);
    private static final PreserverConfig CONFIG = new PreserverConfig(10, 1000, Duration.ofHours(72),
            Duration.ofSeconds(300), STUCK_AFTER);

    /** How many of the next calls of {@code keepDecided} throw. */
    private final AtomicInteger throwsLeft = new AtomicInteger();
    private final CoordinatorHarness coordinator = CoordinatorHarness.start(CONFIG,
            (tcId, log, timeoutTracker, sequenceIds, maxActive, preserver, onClosed) ->
                    new PreservingTransactionMetadataStore(tcId, log, timeoutTracker, sequenceIds, maxActive,
                            preserver, onClosed) {
                        @Override
                        protected CompletableFuture<Void> keepDecided(TxnID txnId, Outcome decided, String owner) {
                            if (throwsLeft.getAndUpdate(n -> Math.max(0, n - 1)) > 0) {
                                throw new IllegalStateException("injected: keepDecided threw");
                            }
                            return super.keepDecided(txnId, decided, owner);
                        }
                    });

    @AfterEach
    void close() {
        coordinator.close();
    }

    /** A committing transaction whose terminal step threw: the client's commit failed, the transaction is left finishing. */
    private TxnID commitWhoseTerminalStepThrew() {
        TxnID txn = coordinator.open(ALICE);
        coordinator.produce(txn, PARTITION);
        throwsLeft.set(1);

        CompletableFuture<Void> commit = coordinator.commit(txn, ALICE);

        assertThat(commit).failsWithin(5, TimeUnit.SECONDS).withThrowableOfType(ExecutionException.class)
                .withMessageContaining("injected: keepDecided threw");
        assertThat(throwsLeft).hasValue(0);
        assertThat(coordinator.resolution(txn)).isEqualTo(Resolution.FINISHING);
        return txn;
    }

    /** The broker's chain runs on real threads: waits a few seconds at most. */
    private static void completesWithinSeconds(CompletableFuture<Void> future) {
        assertThat(future).succeedsWithin(5, TimeUnit.SECONDS);
    }

    /**
     * Review of 22cce46, finding 3: the store's {@code joinOrRun} registered the step as in
     * flight, then called it; a step that threw (rather than returning a failed future) left
     * through {@code joinOrRun} with its entry still registered and its shared result never
     * completed. Every later end of that transaction found the entry, joined its result, and
     * hung for ever; and {@code isEndActive} stayed true, so the stuck-transaction re-drive
     * skipped it. Now a step that throws is a step that failed: its entry goes with it.
     */
    @Test
    void aTerminalStepThatThrowsLeavesNoEndInFlightAndARetriedCommitCompletes() {
        TxnID txn = commitWhoseTerminalStepThrew();

        assertThat(coordinator.store().isEndActive(txn)).as("no end in flight once the step failed").isFalse();
        CompletableFuture<Void> retried = coordinator.commit(txn, ALICE);

        completesWithinSeconds(retried);
        assertThat(coordinator.store().isEndActive(txn)).isFalse();
        assertThat(coordinator.resolution(txn)).isEqualTo(Resolution.KEPT);
        assertThat(coordinator.kept(txn).outcome()).isEqualTo(Outcome.COMMITTED);
        coordinator.awaitRecordDurable(txn);
    }

    /** Finding 3's other half: with the entry leaked, the re-drive took the transaction's end for one in flight. */
    @Test
    void theStuckTransactionReDriveFinishesATransactionWhoseTerminalStepThrew() {
        TxnID txn = commitWhoseTerminalStepThrew();
        StuckTransactionRedriver redriver = new StuckTransactionRedriver(CoordinatorHarness.TC_ID,
                coordinator.store()::finishingTransactions, coordinator.store()::isEndActive,
                coordinator.preserver()::refusesEnds,
                coordinator::endThroughBroker, coordinator.preserver().thread(), STUCK_AFTER, coordinator.preserver().stats());
        coordinator.scheduler().execute(redriver::scan);
        coordinator.settle();

        coordinator.clock().advance(STUCK_AFTER);
        coordinator.scheduler().execute(redriver::scan);
        coordinator.settle();

        await().atMost(Duration.ofSeconds(5)).until(() -> coordinator.resolution(txn) == Resolution.KEPT);
        assertThat(coordinator.preserver().stats().stuckRedrives.sum()).isEqualTo(1);
        assertThat(coordinator.kept(txn).outcome()).isEqualTo(Outcome.COMMITTED);
        completesWithinSeconds(coordinator.commit(txn, ALICE));
    }
}
