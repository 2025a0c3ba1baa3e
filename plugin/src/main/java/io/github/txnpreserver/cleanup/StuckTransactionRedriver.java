package io.github.txnpreserver.cleanup;

import io.github.txnpreserver.preserver.Outcome;
import io.github.txnpreserver.preserver.PreserverStats;
import io.github.txnpreserver.time.Scheduler;
import java.time.Duration;
import java.util.Collection;
import java.util.HashMap;
import java.util.HashSet;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.CompletableFuture;
import java.util.function.Predicate;
import java.util.function.Supplier;
import org.apache.pulsar.client.api.transaction.TxnID;
import org.apache.pulsar.transaction.coordinator.TxnMeta;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * Finishes transactions stuck in COMMITTING or ABORTING (IGNITE-20445 carried into Pulsar).
 *
 * <p>A transaction gets stuck when a partition refuses its end marker with an error the
 * broker does not retry: the broker then leaves it finishing until a client retries or the
 * coordinator reloads, and meanwhile its partitions' {@code maxReadPosition} is pinned, so
 * their consumers stop. This re-drives such a transaction through the broker's own
 * end-transaction chain, in the background, until every partition has its marker.
 *
 * <p>Policy: a transaction is stuck once it has been seen finishing for {@code stuckAfter}
 * with no end step of its own in flight. It is re-driven with the action of the outcome it
 * is finishing to (so no marker ever conflicts with the outcome), one re-drive at a time,
 * and a failed re-drive is tried again after an exponential backoff from 1 s to 5 min.
 *
 * <p>Not thread-safe: {@link #scan} runs on the coordinator's thread (its {@link Scheduler});
 * re-drive completions hop back onto it.
 */
public final class StuckTransactionRedriver {

    private static final Logger log = LoggerFactory.getLogger(StuckTransactionRedriver.class);
    static final long FIRST_BACKOFF_MILLIS = 1_000;
    static final long MAX_BACKOFF_MILLIS = 300_000;

    /** Ends a transaction through the broker's end-transaction chain. */
    @FunctionalInterface
    public interface EndRequester {
        CompletableFuture<Void> end(TxnID txnId, Outcome outcome);
    }

    private final long coordinatorId;
    private final Supplier<Collection<TxnMeta>> finishingTransactions;
    private final Predicate<TxnID> endInFlight;
    private final EndRequester endRequester;
    private final Scheduler scheduler;
    private final long stuckAfterMillis;
    private final PreserverStats stats;
    private final Map<TxnID, Tracked> tracked = new HashMap<>();

    public StuckTransactionRedriver(long coordinatorId, Supplier<Collection<TxnMeta>> finishingTransactions,
                                    Predicate<TxnID> endInFlight, EndRequester endRequester, Scheduler scheduler,
                                    Duration stuckAfter, PreserverStats stats) {
        this.coordinatorId = coordinatorId;
        this.finishingTransactions = finishingTransactions;
        this.endInFlight = endInFlight;
        this.endRequester = endRequester;
        this.scheduler = scheduler;
        this.stuckAfterMillis = stuckAfter.toMillis();
        this.stats = stats;
    }

    /** One pass: notes finishing transactions, forgets finished ones, re-drives stuck ones. */
    public void scan() {
        long now = scheduler.millis();
        Set<TxnID> stillFinishing = new HashSet<>();
        for (TxnMeta meta : finishingTransactions.get()) {
            Outcome outcome = Outcome.of(meta.status());
            if (outcome == null) {
                continue;
            }
            TxnID txnId = meta.id();
            stillFinishing.add(txnId);
            Tracked state = tracked.computeIfAbsent(txnId, id -> new Tracked(now));
            if (isDue(txnId, state, now)) {
                redrive(txnId, outcome, state);
            }
        }
        tracked.keySet().removeIf(txnId -> !stillFinishing.contains(txnId) && !tracked.get(txnId).inFlight);
    }

    /** Transactions currently tracked as finishing, for tests and diagnostics. */
    public int trackedCount() {
        return tracked.size();
    }

    private boolean isDue(TxnID txnId, Tracked state, long now) {
        return !state.inFlight
                && now - state.firstSeenMillis >= stuckAfterMillis
                && now >= state.nextAttemptMillis
                && !endInFlight.test(txnId);
    }

    private void redrive(TxnID txnId, Outcome outcome, Tracked state) {
        state.inFlight = true;
        state.attempts++;
        stats.stuckRedrives.increment();
        log.warn("Coordinator {}: {} has been finishing as {} for {} ms; re-driving its end (attempt {})",
                coordinatorId, txnId, outcome, scheduler.millis() - state.firstSeenMillis, state.attempts);
        CompletableFuture<Void> end;
        try {
            end = endRequester.end(txnId, outcome);
        } catch (RuntimeException e) {
            end = CompletableFuture.failedFuture(e);
        }
        end.whenComplete((ignored, error) -> scheduler.execute(() -> redriveDone(txnId, state, error)));
    }

    private void redriveDone(TxnID txnId, Tracked state, Throwable error) {
        state.inFlight = false;
        if (error == null) {
            log.info("Coordinator {}: stuck transaction {} finished after {} re-drive(s)", coordinatorId, txnId,
                    state.attempts);
            tracked.remove(txnId, state);
            return;
        }
        state.nextAttemptMillis = scheduler.millis() + state.backoffMillis;
        log.warn("Coordinator {}: re-drive of {} failed, next in {} ms: {}", coordinatorId, txnId,
                state.backoffMillis, error.toString());
        state.backoffMillis = Math.min(state.backoffMillis * 2, MAX_BACKOFF_MILLIS);
    }

    private static final class Tracked {
        final long firstSeenMillis;
        long nextAttemptMillis;
        long backoffMillis = FIRST_BACKOFF_MILLIS;
        int attempts;
        boolean inFlight;

        Tracked(long firstSeenMillis) {
            this.firstSeenMillis = firstSeenMillis;
        }
    }
}
