package io.github.txnpreserver.cleanup;

import io.github.txnpreserver.preserver.kept.Outcome;
import io.github.txnpreserver.preserver.stats.PreserverStats;
import io.github.txnpreserver.preserver.thread.CoordinatorThread;
import io.github.txnpreserver.time.Backoff;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Collection;
import java.util.Comparator;
import java.util.HashMap;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import java.util.function.BooleanSupplier;
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
 * <p>Many transactions get stuck at once when the state topic was out long enough for
 * terminal steps to be refused: each re-drive sends its markers to every partition of its
 * transaction again. So at most {@link #MAX_CONCURRENT_REDRIVES} re-drives of a coordinator
 * are in flight, the longest stuck first, and none starts while terminal steps are still
 * refused (its markers would be sent only for its terminal step to be refused again).
 *
 * <p>Not thread-safe: {@link #scan} runs on the coordinator's thread (its {@link CoordinatorThread});
 * re-drive completions hop back onto it.
 */
public final class StuckTransactionRedriver {

    private static final Logger log = LoggerFactory.getLogger(StuckTransactionRedriver.class);
    /** A re-drive that failed: its partitions or the coordinator are still in trouble, so waited on longer each time. */
    static final Backoff BACKOFF = new Backoff(Duration.ofSeconds(1), Duration.ofMinutes(5));
    /**
     * Re-drives of one coordinator in flight at once: a few partitions' markers each, a small
     * load beside the coordinator's clients, and a backlog of thousands drains in minutes.
     */
    static final int MAX_CONCURRENT_REDRIVES = 8;

    /** Ends a transaction through the broker's end-transaction chain. */
    @FunctionalInterface
    public interface EndRequester {
        CompletableFuture<Void> end(TxnID txnId, Outcome outcome);
    }

    private final long coordinatorId;
    private final Supplier<Collection<TxnMeta>> finishingTransactions;
    private final Predicate<TxnID> endInFlight;
    private final BooleanSupplier endsRefused;
    private final EndRequester endRequester;
    private final CoordinatorThread thread;
    private final long stuckAfterMillis;
    private final PreserverStats stats;
    private final Map<TxnID, Tracked> tracked = new HashMap<>();

    /**
     * @param endsRefused whether the coordinator refuses terminal steps now (too many ends wait
     *     for the state topic): no re-drive starts then
     */
    public StuckTransactionRedriver(long coordinatorId, Supplier<Collection<TxnMeta>> finishingTransactions,
                                    Predicate<TxnID> endInFlight, BooleanSupplier endsRefused,
                                    EndRequester endRequester, CoordinatorThread thread, Duration stuckAfter,
                                    PreserverStats stats) {
        this.coordinatorId = coordinatorId;
        this.finishingTransactions = finishingTransactions;
        this.endInFlight = endInFlight;
        this.endsRefused = endsRefused;
        this.endRequester = endRequester;
        this.thread = thread;
        this.stuckAfterMillis = stuckAfter.toMillis();
        this.stats = stats;
    }

    /**
     * One pass: notes finishing transactions, forgets finished ones, re-drives stuck ones, the
     * longest stuck first, up to the bound of re-drives in flight.
     */
    public void scan() {
        assert thread.assertOwner();
        long now = thread.millis();
        Set<TxnID> stillFinishing = new HashSet<>();
        List<Due> due = new ArrayList<>();
        for (TxnMeta meta : finishingTransactions.get()) {
            Outcome outcome = Outcome.of(meta.status());
            if (outcome == null) {
                continue;
            }
            TxnID txnId = meta.id();
            stillFinishing.add(txnId);
            Tracked state = tracked.computeIfAbsent(txnId, id -> new Tracked(now));
            if (isDue(txnId, state, now)) {
                due.add(new Due(txnId, outcome, state));
            }
        }
        tracked.keySet().removeIf(txnId -> !stillFinishing.contains(txnId) && !tracked.get(txnId).inFlight);
        if (due.isEmpty()) {
            return;
        }
        if (endsRefused.getAsBoolean()) {
            log.info("Coordinator {}: {} stuck transactions wait to be re-driven until its terminal steps are no"
                    + " longer refused (too many ends wait for the state topic)", coordinatorId, due.size());
            return;
        }
        int free = MAX_CONCURRENT_REDRIVES - inFlight();
        due.sort(Comparator.comparingLong((Due d) -> d.state.firstSeenMillis)
                .thenComparingLong(d -> d.txnId.getLeastSigBits()));
        for (Due next : due.subList(0, Math.max(0, Math.min(free, due.size())))) {
            redrive(next.txnId, next.outcome, next.state);
        }
    }

    private int inFlight() {
        int count = 0;
        for (Tracked state : tracked.values()) {
            if (state.inFlight) {
                count++;
            }
        }
        return count;
    }

    private record Due(TxnID txnId, Outcome outcome, Tracked state) {
    }

    /** Transactions tracked as finishing: read by this package's tests, which check that an ended one is forgotten. */
    int trackedCount() {
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
                coordinatorId, txnId, outcome, thread.millis() - state.firstSeenMillis, state.attempts);
        CompletableFuture<Void> end;
        try {
            end = endRequester.end(txnId, outcome);
        } catch (RuntimeException e) {
            end = CompletableFuture.failedFuture(e);
        }
        end.whenComplete((ignored, error) -> thread.execute(() -> redriveDone(txnId, state, error)));
    }

    private void redriveDone(TxnID txnId, Tracked state, Throwable error) {
        state.inFlight = false;
        if (error == null) {
            log.info("Coordinator {}: stuck transaction {} finished after {} re-drive(s)", coordinatorId, txnId,
                    state.attempts);
            tracked.remove(txnId, state);
            return;
        }
        state.backoffNanos = BACKOFF.nextNanos(state.backoffNanos);
        long backoffMillis = TimeUnit.NANOSECONDS.toMillis(state.backoffNanos);
        state.nextAttemptMillis = thread.millis() + backoffMillis;
        log.warn("Coordinator {}: re-drive of {} failed, next in {} ms: {}", coordinatorId, txnId,
                backoffMillis, error.toString());
    }

    private static final class Tracked {
        final long firstSeenMillis;
        long nextAttemptMillis;
        /** The delay after its last failed re-drive ({@link #BACKOFF}), 0 before the first. */
        long backoffNanos;
        int attempts;
        boolean inFlight;

        Tracked(long firstSeenMillis) {
            this.firstSeenMillis = firstSeenMillis;
        }
    }
}
