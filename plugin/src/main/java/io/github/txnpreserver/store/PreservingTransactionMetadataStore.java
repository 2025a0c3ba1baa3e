package io.github.txnpreserver.store;

import io.github.txnpreserver.cleanup.StuckTransactionRedriver;
import io.github.txnpreserver.preserver.KeptOutcome;
import io.github.txnpreserver.preserver.Outcome;
import io.github.txnpreserver.preserver.TransactionMetadataPreserver;
import io.github.txnpreserver.resolution.OutcomeResolver;
import io.github.txnpreserver.testhooks.EndMarkerRefusal;
import java.time.Clock;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ConcurrentHashMap;
import java.util.function.Supplier;
import org.apache.pulsar.client.api.transaction.TxnID;
import org.apache.pulsar.common.util.FutureUtil;
import org.apache.pulsar.transaction.coordinator.TransactionCoordinatorID;
import org.apache.pulsar.transaction.coordinator.TransactionTimeoutTracker;
import org.apache.pulsar.transaction.coordinator.TxnMeta;
import org.apache.pulsar.transaction.coordinator.exceptions.CoordinatorException.InvalidTxnStatusException;
import org.apache.pulsar.transaction.coordinator.exceptions.CoordinatorException.TransactionNotFoundException;
import org.apache.pulsar.transaction.coordinator.impl.MLTransactionLogImpl;
import org.apache.pulsar.transaction.coordinator.impl.MLTransactionMetadataStore;
import org.apache.pulsar.transaction.coordinator.impl.MLTransactionSequenceIdGenerator;
import org.apache.pulsar.transaction.coordinator.proto.TxnStatus;

/**
 * Pulsar's managed-ledger coordinator store, plus a preserver of ended transactions'
 * outcomes.
 *
 * <p>It <em>is</em> an {@link MLTransactionMetadataStore}, so that the transaction log
 * format, admin {@code coordinatorInternalStats}, the transaction-log metrics, the low
 * water mark and the max-active check (all of which test {@code instanceof
 * MLTransactionMetadataStore} or read its map) stay exactly as stock. It changes two
 * things:
 * <ol>
 *   <li>{@link #getTxnMeta} resolves through {@link OutcomeResolver}: a transaction no
 *       longer live is answered from its kept outcome.</li>
 *   <li>{@link #updateTxnStatus} hooks the commit chain:
 *     <pre>
 *   OPEN ──append COMMITTING──▶ startPreserving ─┐ (record written in parallel with the end markers)
 *                                                ▼
 *   markers sent ──▶ awaitPreserved ──▶ append COMMITTED (store forgets the transaction)
 *     </pre>
 *       The terminal entry is appended only once the outcome is durable in the state
 *       topic: after it, the store forgets the transaction and its log entries are
 *       released, so the record is the only trace left.</li>
 * </ol>
 */
public class PreservingTransactionMetadataStore extends MLTransactionMetadataStore {

    private static final Duration MAX_CLEANUP_INTERVAL = Duration.ofSeconds(5);

    private final TransactionMetadataPreserver preserver;
    private final OutcomeResolver resolver;
    private final Runnable onClosed;
    /** Durability of the outcome record of each finishing transaction, by sequence id. */
    private final Map<Long, CompletableFuture<Void>> preserving = new ConcurrentHashMap<>();
    /** The finishing-entry step in flight per transaction, so that concurrent ends share one. */
    private final Map<Long, InFlight> beginning = new ConcurrentHashMap<>();
    /** The terminal-entry step in flight per transaction, so that concurrent ends share one. */
    private final Map<Long, InFlight> ending = new ConcurrentHashMap<>();
    /** Callers waiting for a finishing transaction to leave the live store. */
    private final Map<Long, CompletableFuture<Void>> liveEnds = new ConcurrentHashMap<>();

    public PreservingTransactionMetadataStore(TransactionCoordinatorID tcID, MLTransactionLogImpl transactionLog,
                                              TransactionTimeoutTracker timeoutTracker,
                                              MLTransactionSequenceIdGenerator sequenceIdGenerator,
                                              long maxActiveTransactionsPerCoordinator,
                                              TransactionMetadataPreserver preserver, Runnable onClosed) {
        super(tcID, transactionLog, timeoutTracker, sequenceIdGenerator, maxActiveTransactionsPerCoordinator);
        this.preserver = preserver;
        this.onClosed = onClosed;
        this.resolver = new OutcomeResolver(this::liveTxnMeta, this::liveEnd, preserver);
    }

    public TransactionMetadataPreserver preserver() {
        return preserver;
    }

    public OutcomeResolver resolver() {
        return resolver;
    }

    /**
     * Starts the background re-drive of transactions stuck finishing, on the preserver's
     * executor; it stops when the store closes.
     */
    public void startCleanup(StuckTransactionRedriver.EndRequester endRequester, Duration stuckAfter, Clock clock) {
        StuckTransactionRedriver redriver = new StuckTransactionRedriver(getTransactionCoordinatorID().getId(),
                this::finishingTransactions, this::isEndInFlight, endRequester, clock, stuckAfter,
                preserver.stats(), preserver.executor());
        Duration interval = stuckAfter.compareTo(MAX_CLEANUP_INTERVAL) < 0 ? stuckAfter : MAX_CLEANUP_INTERVAL;
        preserver.scheduleWithFixedDelay(redriver::scan, interval);
    }

    @Override
    public CompletableFuture<TxnMeta> getTxnMeta(TxnID txnId) {
        OutcomeResolver.Answer answer = resolver.resolve(txnId);
        return switch (answer.resolution()) {
            case NOT_FOUND -> FutureUtil.failedFuture(new TransactionNotFoundException(txnId));
            case FINISHING -> CompletableFuture.completedFuture(EndMarkerRefusal.installed()
                    ? EndMarkerRefusal.apply(answer.meta()) : answer.meta());
            default -> CompletableFuture.completedFuture(answer.meta());
        };
    }

    /** The live transactions that are COMMITTING or ABORTING. */
    public List<TxnMeta> finishingTransactions() {
        List<TxnMeta> finishing = new ArrayList<>();
        for (TxnMeta meta : getSlowTransactions(Long.MIN_VALUE)) {
            if (Outcome.of(meta.status()) != null) {
                finishing.add(meta);
            }
        }
        return finishing;
    }

    /** Whether the terminal step of a transaction is running (its markers have all been sent). */
    public boolean isEndInFlight(TxnID txnId) {
        return ending.containsKey(txnId.getLeastSigBits());
    }

    @Override
    public CompletableFuture<TxnStatus> getTxnStatus(TxnID txnId) {
        return getTxnMeta(txnId).thenApply(TxnMeta::status);
    }

    @Override
    public CompletableFuture<Void> updateTxnStatus(TxnID txnId, TxnStatus newStatus, TxnStatus expectedStatus,
                                                   boolean isTimeout) {
        return switch (newStatus) {
            case COMMITTING, ABORTING -> beginEnding(txnId, newStatus, expectedStatus, isTimeout);
            case COMMITTED, ABORTED -> finishEnding(txnId, newStatus, expectedStatus, isTimeout);
            default -> super.updateTxnStatus(txnId, newStatus, expectedStatus, isTimeout);
        };
    }

    @Override
    public CompletableFuture<Void> closeAsync() {
        return super.closeAsync().thenCompose(ignored -> {
            onClosed.run();
            preserving.clear();
            beginning.clear();
            ending.clear();
            liveEnds.values().forEach(waiting -> waiting.completeExceptionally(
                    new IllegalStateException("coordinator " + getTransactionCoordinatorID() + " closed")));
            liveEnds.clear();
            return preserver.closeAsync();
        });
    }

    /**
     * Step 1: the finishing entry; once durable, the outcome record starts on its way.
     * Concurrent identical requests share one entry: the stock store would append a second
     * one and then refuse the request that appended it.
     */
    private CompletableFuture<Void> beginEnding(TxnID txnId, TxnStatus newStatus, TxnStatus expectedStatus,
                                                boolean isTimeout) {
        return joinOrRun(beginning, txnId, newStatus, () -> super.updateTxnStatus(txnId, newStatus, expectedStatus,
                isTimeout).thenRun(() -> startPreserving(txnId)));
    }

    /** Step 2, in parallel with the end markers: write the outcome record, once per transaction. */
    private CompletableFuture<Void> startPreserving(TxnID txnId) {
        return preserving.computeIfAbsent(txnId.getLeastSigBits(), sequence -> preserveLive(txnId));
    }

    private CompletableFuture<Void> preserveLive(TxnID txnId) {
        TxnMeta live = liveTxnMeta(txnId);
        Outcome outcome = live == null ? null : Outcome.of(live.status());
        if (outcome == null) {
            return FutureUtil.failedFuture(new InvalidTxnStatusException(
                    "Transaction " + txnId + " is not finishing; its outcome cannot be preserved"));
        }
        return preserver.preserve(txnId, outcome, live.getOwner());
    }

    /**
     * Step 3: the terminal entry, once the record is durable. A transaction no longer live
     * has ended already: a retry of the same end succeeds, a conflicting one is refused.
     */
    private CompletableFuture<Void> finishEnding(TxnID txnId, TxnStatus newStatus, TxnStatus expectedStatus,
                                                 boolean isTimeout) {
        TxnMeta live = liveTxnMeta(txnId);
        if (live == null) {
            return answerFromKeptOutcome(txnId, newStatus);
        }
        if (Outcome.of(live.status()) != Outcome.of(newStatus)) {
            return super.updateTxnStatus(txnId, newStatus, expectedStatus, isTimeout);
        }
        return joinOrRun(ending, txnId, newStatus, () -> awaitPreserved(txnId)
                .thenCompose(ignored -> super.updateTxnStatus(txnId, newStatus, expectedStatus, isTimeout))
                .thenRun(() -> ended(txnId)));
    }

    /** The terminal entry is durable: the transaction is no longer live. */
    private void ended(TxnID txnId) {
        preserving.remove(txnId.getLeastSigBits());
        CompletableFuture<Void> waiting = liveEnds.remove(txnId.getLeastSigBits());
        if (waiting != null) {
            waiting.complete(null);
        }
    }

    /** Completes once the transaction is no longer live (at once if it is not). */
    private CompletableFuture<Void> liveEnd(TxnID txnId) {
        CompletableFuture<Void> end = liveEnds.computeIfAbsent(txnId.getLeastSigBits(),
                sequence -> new CompletableFuture<>());
        // It may have ended between the caller's look and the registration.
        if (liveTxnMeta(txnId) == null) {
            liveEnds.remove(txnId.getLeastSigBits(), end);
            end.complete(null);
        }
        return end;
    }

    /**
     * The record's durability. A failed write is forgotten so that the broker's retry of the
     * end writes it again, and reported as a failure the broker retries.
     */
    private CompletableFuture<Void> awaitPreserved(TxnID txnId) {
        CompletableFuture<Void> durable = startPreserving(txnId);
        return durable.exceptionallyCompose(error -> {
            preserving.remove(txnId.getLeastSigBits(), durable);
            return FutureUtil.failedFuture(new StateTopicWriteException(
                    "Outcome of " + txnId + " is not durable in the state topic yet",
                    FutureUtil.unwrapCompletionException(error)));
        });
    }

    private CompletableFuture<Void> answerFromKeptOutcome(TxnID txnId, TxnStatus newStatus) {
        KeptOutcome kept = preserver.find(txnId);
        if (kept == null) {
            return FutureUtil.failedFuture(new TransactionNotFoundException(txnId));
        }
        if (kept.outcome() != Outcome.of(newStatus)) {
            return FutureUtil.failedFuture(new InvalidTxnStatusException(
                    "Transaction " + txnId + " was already " + kept.outcome().name().toLowerCase()
                            + "; it cannot become " + newStatus));
        }
        if (kept.outcome() == Outcome.COMMITTED) {
            preserver.stats().retriesAnsweredCommitted.increment();
        } else {
            preserver.stats().retriesAnsweredAborted.increment();
        }
        return CompletableFuture.completedFuture(null);
    }

    /**
     * Runs {@code step} for a transaction unless the same step towards the same status is in
     * flight, in which case the caller shares its result. A step towards another status runs
     * on its own, and the stock store refuses whichever loses.
     */
    private static CompletableFuture<Void> joinOrRun(Map<Long, InFlight> inFlight, TxnID txnId, TxnStatus newStatus,
                                                     Supplier<CompletableFuture<Void>> step) {
        long sequence = txnId.getLeastSigBits();
        InFlight mine = new InFlight(newStatus, new CompletableFuture<>());
        InFlight running = inFlight.putIfAbsent(sequence, mine);
        if (running != null) {
            return running.status() == newStatus ? running.result() : step.get();
        }
        step.get().whenComplete((ignored, error) -> {
            inFlight.remove(sequence, mine);
            if (error == null) {
                mine.result().complete(null);
            } else {
                mine.result().completeExceptionally(FutureUtil.unwrapCompletionException(error));
            }
        });
        return mine.result();
    }

    private record InFlight(TxnStatus status, CompletableFuture<Void> result) {
    }

    private TxnMeta liveTxnMeta(TxnID txnId) {
        CompletableFuture<TxnMeta> live = super.getTxnMeta(txnId);
        return live.isDone() && !live.isCompletedExceptionally() ? live.join() : null;
    }
}
