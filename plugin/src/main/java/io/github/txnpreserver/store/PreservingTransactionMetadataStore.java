package io.github.txnpreserver.store;

import io.github.txnpreserver.cleanup.StuckTransactionRedriver;
import io.github.txnpreserver.preserver.PreserverFigures;
import io.github.txnpreserver.preserver.TransactionMetadataPreserver;
import io.github.txnpreserver.preserver.kept.KeptOutcome;
import io.github.txnpreserver.preserver.kept.Outcome;
import io.github.txnpreserver.preserver.thread.PreserverUnavailableException;
import io.github.txnpreserver.resolution.OutcomeResolver;
import io.github.txnpreserver.resolution.Resolution;
import io.github.txnpreserver.resolution.TransactionState;
import java.time.Duration;
import java.time.Instant;
import java.time.temporal.ChronoUnit;
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
import org.apache.pulsar.transaction.coordinator.exceptions.CoordinatorException.CoordinatorNotFoundException;
import org.apache.pulsar.transaction.coordinator.exceptions.CoordinatorException.InvalidTxnStatusException;
import org.apache.pulsar.transaction.coordinator.exceptions.CoordinatorException.TransactionNotFoundException;
import org.apache.pulsar.transaction.coordinator.impl.MLTransactionLogImpl;
import org.apache.pulsar.transaction.coordinator.impl.MLTransactionMetadataStore;
import org.apache.pulsar.transaction.coordinator.impl.MLTransactionSequenceIdGenerator;
import org.apache.pulsar.transaction.coordinator.proto.TxnStatus;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * Pulsar's managed-ledger coordinator store, plus a preserver of ended transactions'
 * outcomes.
 *
 * <p>It <em>is</em> an {@link MLTransactionMetadataStore}, so that the transaction log
 * format, admin {@code coordinatorInternalStats}, the transaction-log metrics, the low
 * water mark and the max-active check (all of which test {@code instanceof
 * MLTransactionMetadataStore} or read its map) stay exactly as stock. It changes three
 * things:
 * <ol>
 *   <li>{@link #getTxnMeta} resolves through {@link OutcomeResolver}: a transaction no
 *       longer live is answered from its kept outcome.</li>
 *   <li>{@link #updateTxnStatus} hooks the terminal step:
 *     <pre>
 *   OPEN ── append COMMITTING ──▶ markers sent ──▶ keep outcome ──▶ append COMMITTED
 *                                                  (in memory)      (store forgets the transaction)
 *     </pre>
 *       The outcome is kept in memory before the terminal entry, so that a retry never
 *       finds neither; the commit waits for nothing more than stock.</li>
 *   <li>Its log is a {@link RecordGatedTransactionLog}: the ended transaction's log entries
 *       are released only once its outcome is durable in the state topic, which the
 *       preserver writes in groups. Until then the terminal entry is the outcome's durable
 *       copy, replayed into the preserver when the coordinator opens.</li>
 * </ol>
 *
 * <p>Only decided outcomes are kept and written (the finishing entry is durable when the
 * terminal step runs), so the newest record of a transaction is always its decided outcome.
 *
 * <p>When the preserver cannot answer (its coordinator closed, its restore still reading
 * after {@link TransactionMetadataPreserver#RESTORE_WAIT}, or too many ended transactions
 * waiting for the state topic), the request fails with {@link CoordinatorNotFoundException}:
 * the client looks the coordinator up again and retries, and the broker's end chain does not
 * loop on it, so client retries during a long outage add no broker retry loops; the
 * stuck-transaction re-drive finishes what is left finishing.
 */
public class PreservingTransactionMetadataStore extends MLTransactionMetadataStore {

    private static final Logger log = LoggerFactory.getLogger(PreservingTransactionMetadataStore.class);
    private static final Duration MAX_CLEANUP_INTERVAL = Duration.ofSeconds(5);

    private final TransactionMetadataPreserver preserver;
    private final OutcomeResolver resolver;
    private final TimeoutAborts timeoutAborts;
    private static final long HIGHEST_REREAD_NANOS = Duration.ofSeconds(1).toNanos();
    private volatile long highestIssued = -1;
    private volatile long highestReadAtNanos;
    private final Runnable onClosed;
    private final MLTransactionSequenceIdGenerator sequenceIdGenerator;
    /** Set by {@link #startRestore}, before the replay. */
    private volatile RewoundLogGuard rewoundLogGuard;
    /** The finishing-entry step in flight per transaction, so that concurrent ends share one. */
    private final Map<Long, InFlight> beginning = new ConcurrentHashMap<>();
    /** The terminal-entry step in flight per transaction, so that concurrent ends share one. */
    private final Map<Long, InFlight> ending = new ConcurrentHashMap<>();

    public PreservingTransactionMetadataStore(TransactionCoordinatorID tcID, MLTransactionLogImpl transactionLog,
                                              TransactionTimeoutTracker timeoutTracker,
                                              MLTransactionSequenceIdGenerator sequenceIdGenerator,
                                              long maxActiveTransactionsPerCoordinator,
                                              TransactionMetadataPreserver preserver, Runnable onClosed) {
        this(tcID, transactionLog, timeoutTracker, sequenceIdGenerator, maxActiveTransactionsPerCoordinator,
                preserver, onClosed, new TimeoutAborts());
    }

    private PreservingTransactionMetadataStore(TransactionCoordinatorID tcID, MLTransactionLogImpl transactionLog,
                                               TransactionTimeoutTracker timeoutTracker,
                                               MLTransactionSequenceIdGenerator sequenceIdGenerator,
                                               long maxActiveTransactionsPerCoordinator,
                                               TransactionMetadataPreserver preserver, Runnable onClosed,
                                               TimeoutAborts timeoutAborts) {
        super(tcID, RecordGatedTransactionLog.gate(tcID, transactionLog, preserver, timeoutAborts), timeoutTracker,
                sequenceIdGenerator, maxActiveTransactionsPerCoordinator);
        this.preserver = preserver;
        this.onClosed = onClosed;
        this.sequenceIdGenerator = sequenceIdGenerator;
        this.timeoutAborts = timeoutAborts;
        this.resolver = new OutcomeResolver(this::liveTxnMeta, timeoutAborts::isFinishing, preserver);
    }

    public TransactionMetadataPreserver preserver() {
        return preserver;
    }

    public OutcomeResolver resolver() {
        return resolver;
    }

    /**
     * Starts reading the state topic in the background, before the log's replay ({@link #init}),
     * whose outcomes go into the blocks it holds. A new log issues no transaction until it is
     * done ({@link RewoundLogGuard}).
     */
    public void startRestore() {
        rewoundLogGuard = RewoundLogGuard.startRestore(getTransactionCoordinatorID().getId(), preserver,
                sequenceIdGenerator);
    }

    /** The guard of a new log, once the restore started (tests reach it to issue through it). */
    RewoundLogGuard rewoundLogGuard() {
        return rewoundLogGuard;
    }

    @Override
    public CompletableFuture<TxnID> newTransaction(long timeOut, String owner) {
        RewoundLogGuard guard = rewoundLogGuard;
        if (guard == null) {
            return FutureUtil.failedFuture(new CoordinatorNotFoundException("Coordinator "
                    + getTransactionCoordinatorID().getId() + " has not started its restore"));
        }
        return guard.whenIssuing(() -> super.newTransaction(timeOut, owner));
    }

    /**
     * Starts the background re-drive of transactions stuck finishing, on the coordinator's
     * thread; it stops when the store closes.
     */
    public void startCleanup(StuckTransactionRedriver.EndRequester endRequester, Duration stuckAfter) {
        StuckTransactionRedriver redriver = new StuckTransactionRedriver(getTransactionCoordinatorID().getId(),
                this::finishingTransactions, this::isEndActive, preserver::refusesEnds, endRequester,
                preserver.thread(), stuckAfter,
                preserver.stats());
        Duration interval = stuckAfter.compareTo(MAX_CLEANUP_INTERVAL) < 0 ? stuckAfter : MAX_CLEANUP_INTERVAL;
        preserver.thread().every(interval, redriver::scan);
    }

    @Override
    public CompletableFuture<TxnMeta> getTxnMeta(TxnID txnId) {
        CompletableFuture<OutcomeResolver.Answer> resolved = resolver.resolve(txnId);
        // A live transaction's answer is there at once: the broker asks twice per end, so it
        // is answered without the stages an answer of the coordinator's thread needs.
        if (resolved.isDone() && !resolved.isCompletedExceptionally()) {
            return metaOf(txnId, resolved.join());
        }
        return unavailableAsNotFoundCoordinator(resolved).thenCompose(answer -> metaOf(txnId, answer));
    }

    private CompletableFuture<TxnMeta> metaOf(TxnID txnId, OutcomeResolver.Answer answer) {
        return answer.resolution() == Resolution.NOT_FOUND
                ? FutureUtil.failedFuture(notFound(txnId))
                : CompletableFuture.completedFuture(answer.meta());
    }

    /**
     * "Not found", saying which (docs/answers.md, "Not found, said which"): a sequence this coordinator issued
     * was forgotten (its outcome ended before the window, or a limit dropped it), one above
     * the highest it issued never existed. Both stay {@code TransactionNotFound} to the client;
     * neither names an owner, so they tell a role no more than which sequences were issued.
     */
    private TransactionNotFoundException notFound(TxnID txnId) {
        TransactionState unknown = unknown(txnId);
        if (unknown.state() == TransactionState.State.NEVER_ISSUED) {
            return new TransactionNotFoundException("Transaction " + txnId + " was never issued: coordinator "
                    + getTransactionCoordinatorID().getId() + " has issued sequences up to " + unknown.highestIssued());
        }
        String window = unknown.windowStartMillis() == 0 ? "no ended transaction is kept now"
                : "kept outcomes reach back to " + Instant.ofEpochMilli(unknown.windowStartMillis())
                        .truncatedTo(ChronoUnit.SECONDS);
        return new TransactionNotFoundException("Transaction " + txnId + " is no longer kept: its outcome is"
                + " forgotten (it ended before the window, " + window + ", or a limit dropped it)");
    }

    /** A transaction neither live nor kept: forgotten, or never issued. */
    private TransactionState unknown(TxnID txnId) {
        long sequence = txnId.getLeastSigBits();
        long highest = highestIssued(sequence);
        if (txnId.getMostSigBits() != getTransactionCoordinatorID().getId() || sequence < 0 || sequence > highest) {
            return new TransactionState(txnId.toString(), TransactionState.State.NEVER_ISSUED, null, null, 0, 0, 0, 0,
                    0, highest);
        }
        PreserverFigures figures = preserver.figures();
        long windowStart = figures.kept() == 0 ? 0 : preserver.thread().millis() - figures.windowMillis();
        return new TransactionState(txnId.toString(), TransactionState.State.FORGOTTEN, null, null, 0, 0, 0, 0,
                windowStart, highest);
    }

    /**
     * The highest sequence this coordinator has issued, as far as it tells {@code sequence}
     * apart: read again (the stock store's stats walk every live transaction) only for a
     * sequence above the last value read, at most once a second, so that a flood of unknown
     * ids costs a comparison each.
     */
    private long highestIssued(long sequence) {
        long known = highestIssued;
        long now = System.nanoTime();
        if (known >= 0 && (sequence <= known || now - highestReadAtNanos < HIGHEST_REREAD_NANOS)) {
            return known;
        }
        highestReadAtNanos = now;
        known = getCoordinatorStats().getLeastSigBits();
        highestIssued = known;
        return known;
    }

    /**
     * What this coordinator knows of a transaction, read without acting (the outcome query,
     * docs/answers.md, "Outcome query"): fails, as {@link #getTxnMeta} does, with
     * {@link CoordinatorNotFoundException} while the kept outcomes cannot be asked.
     */
    public CompletableFuture<TransactionState> describe(TxnID txnId) {
        TxnMeta live = liveTxnMeta(txnId);
        if (live != null) {
            TransactionState.State state = switch (live.status()) {
                case COMMITTING -> TransactionState.State.COMMITTING;
                case ABORTING -> TransactionState.State.ABORTING;
                default -> TransactionState.State.OPEN;
            };
            TransactionState.AbortedBy abortedBy = state != TransactionState.State.ABORTING ? null
                    : timeoutAborts.isFinishing(txnId.getLeastSigBits()) ? TransactionState.AbortedBy.TIMEOUT
                    : TransactionState.AbortedBy.CLIENT_OR_ADMIN;
            return CompletableFuture.completedFuture(new TransactionState(txnId.toString(), state, abortedBy,
                    live.getOwner(), live.getOpenTimestamp(), live.getTimeoutAt(), 0, 0, 0, 0));
        }
        return unavailableAsNotFoundCoordinator(preserver.lookUp(txnId)).thenApply(kept -> {
            if (kept == null) {
                return unknown(txnId);
            }
            TransactionState.State state = kept.outcome() == Outcome.COMMITTED ? TransactionState.State.COMMITTED
                    : TransactionState.State.ABORTED;
            TransactionState.AbortedBy abortedBy = switch (kept.outcome()) {
                case COMMITTED -> null;
                case ABORTED -> TransactionState.AbortedBy.CLIENT_OR_ADMIN;
                case TIMED_OUT -> TransactionState.AbortedBy.TIMEOUT;
            };
            return new TransactionState(txnId.toString(), state, abortedBy, kept.owner(), 0, 0, kept.endTimeMillis(),
                    kept.endTimeMillis() + preserver.config().persistTime().toMillis(), 0, 0);
        });
    }

    /** A preserver that cannot answer now is, to the broker and the client, a coordinator to look up again. */
    private static <T> CompletableFuture<T> unavailableAsNotFoundCoordinator(CompletableFuture<T> answer) {
        return answer.exceptionallyCompose(error -> {
            Throwable cause = FutureUtil.unwrapCompletionException(error);
            return FutureUtil.failedFuture(cause instanceof PreserverUnavailableException
                    ? new CoordinatorNotFoundException(cause.getMessage()) : cause);
        });
    }

    /** The live transactions that are COMMITTING or ABORTING. */
    public List<TxnMeta> finishingTransactions() {
        List<TxnMeta> finishing = new ArrayList<>();
        for (TxnMeta meta : getSlowTransactions(Long.MIN_VALUE)) {
            if (meta.status() == TxnStatus.COMMITTING || meta.status() == TxnStatus.ABORTING) {
                finishing.add(meta);
            }
        }
        return finishing;
    }

    /** Whether the terminal step of a transaction is running. */
    public boolean isEndActive(TxnID txnId) {
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
        return super.closeAsync().handle((ignored, error) -> error).thenCompose(error -> {
            beginning.clear();
            ending.clear();
            // Closed whether or not the stock store closed cleanly: the preserver holds the
            // state topic's exclusive producer and a share of the broker's memory bound.
            return preserver.closeAsync().handle((closed, closeError) -> {
                onClosed.run();
                return null;
            }).thenCompose(closed -> error == null
                    ? CompletableFuture.<Void>completedFuture(null) : CompletableFuture.<Void>failedFuture(error));
        });
    }

    /**
     * Step 1: the finishing entry, as stock. Concurrent identical requests share one entry:
     * the stock store would append a second one and then refuse the request that appended it.
     *
     * <p>Protected as a seam of the {@code test-hooks} module ({@code HookedTransactionMetadataStore}),
     * which delays or fails this step on a real broker; the plugin's own code does not override it.
     */
    protected CompletableFuture<Void> beginEnding(TxnID txnId, TxnStatus newStatus, TxnStatus expectedStatus,
                                                  boolean isTimeout) {
        long sequence = txnId.getLeastSigBits();
        if (newStatus == TxnStatus.COMMITTING && timeoutAborts.isFinishing(sequence)) {
            // Reported OPEN (see OutcomeResolver) so that the broker hands this step the action.
            TxnMeta live = liveTxnMeta(txnId);
            if (live == null) {
                // Its terminal entry is durable and the stock store is about to forget it: kept.
                return answerFromKeptOutcome(txnId, newStatus);
            }
            if (live.status() == TxnStatus.ABORTING) {
                return FutureUtil.failedFuture(commitAfterTimeoutAbort(txnId, live.getOwner(),
                        timeoutAborts.beganAt(sequence), live.getTimeoutAt()));
            }
        }
        return joinOrRun(beginning, txnId, newStatus, () -> {
            // The stock step changes an OPEN transaction's status or fails; this step runs alone
            // for this status, so an OPEN status now means the timeout's step is the one that
            // aborts, unless a commit's step wins the race, and then this one fails. Marked
            // before the step, so that a commit losing that race is told why.
            TxnMeta live = isTimeout && newStatus == TxnStatus.ABORTING ? liveTxnMeta(txnId) : null;
            boolean byTimeout = live != null && live.status() == TxnStatus.OPEN;
            if (byTimeout) {
                timeoutAborts.began(sequence, preserver.thread().millis());
            }
            CompletableFuture<Void> step = stockStep(txnId, newStatus, expectedStatus, isTimeout);
            if (byTimeout) {
                step = step.whenComplete((ignored, error) -> {
                    // Failed: a commit's finishing entry landed first. Not live any more: ended
                    // meanwhile (answered from the kept outcome), nothing left to mark.
                    if (error != null || liveTxnMeta(txnId) == null) {
                        timeoutAborts.ended(sequence);
                    }
                });
            }
            if (newStatus == TxnStatus.COMMITTING) {
                step = step.exceptionallyCompose(error -> {
                    if (!(FutureUtil.unwrapCompletionException(error) instanceof InvalidTxnStatusException)
                            || !timeoutAborts.isFinishing(sequence)) {
                        return FutureUtil.failedFuture(error);
                    }
                    // The timeout's finishing entry landed first.
                    TxnMeta now = liveTxnMeta(txnId);
                    return now == null ? answerFromKeptOutcome(txnId, newStatus)
                            : FutureUtil.failedFuture(commitAfterTimeoutAbort(txnId, now.getOwner(),
                                    timeoutAborts.beganAt(sequence), now.getTimeoutAt()));
                });
            }
            return step;
        });
    }

    /**
     * A commit of a transaction the coordinator aborted on its timeout: refused, as any commit
     * of an aborted transaction, but named, counted and warned about, because a committer that
     * sent records in it (a Flink sink) has lost them unless it sends them again.
     */
    private InvalidTxnStatusException commitAfterTimeoutAbort(TxnID txnId, String owner, long abortedAtMillis,
                                                              long timeoutMillis) {
        preserver.stats().commitsAfterTimeoutAbort.increment();
        Instant abortedAt = Instant.ofEpochMilli(abortedAtMillis).truncatedTo(ChronoUnit.SECONDS);
        String timeout = timeoutMillis > 0 ? "its timeout of " + timeoutMillis + " ms" : "its timeout";
        if (timeoutAborts.firstWarning(txnId.getLeastSigBits())) {
            log.warn("Coordinator {}: commit of transaction {} (owner {}) refused: the coordinator aborted it at {},"
                            + " when it had stayed open past {}. Records sent in it are in no topic and its"
                            + " acknowledgements are undone: a Flink sink (or any two-phase committer) that took this"
                            + " commit as done lost them unless its job sends them again. See docs/flink.md",
                    getTransactionCoordinatorID().getId(), txnId, owner == null ? "none" : "'" + owner + "'",
                    abortedAt, timeout);
        }
        return new InvalidTxnStatusException("Transaction " + txnId + " was aborted on its timeout at " + abortedAt
                + " (" + timeout + " passed while it was open); it cannot be committed");
    }

    /**
     * The stock store's status change: a transaction it no longer finds was live when the
     * caller checked (the broker for the finishing entry, {@link #finishEnding} for the
     * terminal one) and a concurrent end of it finished meanwhile, between that check and
     * this step, which runs on the stock store's executor: it is answered from the kept
     * outcome, as a retry is, never refused as not found.
     */
    private CompletableFuture<Void> stockStep(TxnID txnId, TxnStatus newStatus, TxnStatus expectedStatus,
                                              boolean isTimeout) {
        return super.updateTxnStatus(txnId, newStatus, expectedStatus, isTimeout).exceptionallyCompose(error ->
                FutureUtil.unwrapCompletionException(error) instanceof TransactionNotFoundException
                        ? answerFromKeptOutcome(txnId, newStatus) : FutureUtil.failedFuture(error));
    }

    /**
     * Step 3: the terminal entry, once the outcome is kept. A transaction no longer live has
     * ended already: a retry of the same end succeeds, a conflicting one is refused.
     */
    private CompletableFuture<Void> finishEnding(TxnID txnId, TxnStatus newStatus, TxnStatus expectedStatus,
                                                 boolean isTimeout) {
        TxnMeta live = liveTxnMeta(txnId);
        long sequence = txnId.getLeastSigBits();
        if (live == null) {
            return answerFromKeptOutcome(txnId, newStatus);
        }
        if (Outcome.of(live.status()) != Outcome.of(newStatus)) {
            return stockStep(txnId, newStatus, expectedStatus, isTimeout);
        }
        Outcome decided = newStatus == TxnStatus.ABORTED && timeoutAborts.isFinishing(sequence)
                ? Outcome.TIMED_OUT : Outcome.of(newStatus);
        return joinOrRun(ending, txnId, newStatus, () -> keepDecided(txnId, decided, live.getOwner())
                .thenCompose(ignored -> stockStep(txnId, newStatus, expectedStatus, isTimeout))
                .thenRun(() -> {
                    if (decided == Outcome.TIMED_OUT) {
                        preserver.stats().timeoutAborts.increment();
                        timeoutAborts.endedOnTimeout(sequence, live.getTimeoutAt());
                    } else {
                        timeoutAborts.ended(sequence);
                    }
                })
                // Also when answered as a retry: this step's decision pinned the outcome's block
                // again, and only the end unpins it (ending twice changes nothing).
                .thenRun(() -> ended(txnId)));
    }

    /**
     * Step 3 (docs/DESIGN.md, "Commit"), once the markers are sent: the decided outcome (its
     * finishing entry is durable) is kept in memory before the terminal entry makes the live
     * transaction disappear. It is
     * written to the state topic with the next group; the transaction's log entries stay
     * until then. Refused only while the preserver is unavailable (too many ended
     * transactions wait for the state topic): the transaction stays finishing.
     *
     * <p>Protected as a seam of the {@code test-hooks} module ({@code HookedTransactionMetadataStore}),
     * which delays or fails this step on a real broker; the plugin's own code does not override it.
     */
    protected CompletableFuture<Void> keepDecided(TxnID txnId, Outcome decided, String owner) {
        return unavailableAsNotFoundCoordinator(preserver.decide(txnId, decided, owner));
    }

    /**
     * The terminal entry is durable: the transaction is no longer live.
     *
     * <p>Protected as a seam of the {@code test-hooks} module ({@code HookedTransactionMetadataStore}),
     * which delays or fails this step on a real broker; the plugin's own code does not override it.
     */
    protected void ended(TxnID txnId) {
        preserver.ended(txnId);
    }

    private CompletableFuture<Void> answerFromKeptOutcome(TxnID txnId, TxnStatus newStatus) {
        return unavailableAsNotFoundCoordinator(preserver.lookUp(txnId))
                .thenCompose(kept -> answer(txnId, kept, newStatus));
    }

    private CompletableFuture<Void> answer(TxnID txnId, KeptOutcome kept, TxnStatus newStatus) {
        if (kept == null) {
            return FutureUtil.failedFuture(notFound(txnId));
        }
        if (kept.outcome() == Outcome.TIMED_OUT && !kept.outcome().endsAs(newStatus)) {
            return FutureUtil.failedFuture(commitAfterTimeoutAbort(txnId, kept.owner(), kept.endTimeMillis(),
                    timeoutAborts.timeoutOf(txnId.getLeastSigBits())));
        }
        if (!kept.outcome().endsAs(newStatus)) {
            return FutureUtil.failedFuture(new InvalidTxnStatusException(
                    "Transaction " + txnId + " was already " + Outcome.of(kept.outcome().finishingStatus()).name()
                            .toLowerCase()
                            + "; it cannot become " + newStatus));
        }
        // Counted at the terminal step only: a request answered at its finishing step goes on
        // to its terminal step, which is answered too, and is one answered retry.
        if (newStatus == TxnStatus.COMMITTED) {
            preserver.stats().retriesAnsweredCommitted.increment();
        } else if (newStatus == TxnStatus.ABORTED) {
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
        InFlight mine = new InFlight(newStatus);
        InFlight running = inFlight.putIfAbsent(sequence, mine);
        if (running != null) {
            return running.status == newStatus ? running : call(step);
        }
        call(step).whenComplete((ignored, error) -> {
            inFlight.remove(sequence, mine);
            if (error == null) {
                mine.complete(null);
            } else {
                mine.completeExceptionally(FutureUtil.unwrapCompletionException(error));
            }
        });
        return mine;
    }

    /** A step that throws is a step that failed: its in-flight entry must not outlive it. */
    private static CompletableFuture<Void> call(Supplier<CompletableFuture<Void>> step) {
        try {
            return step.get();
        } catch (RuntimeException e) {
            return FutureUtil.failedFuture(e);
        }
    }

    /** A step towards {@code status}, its result shared by the identical requests that join it. */
    private static final class InFlight extends CompletableFuture<Void> {
        private final TxnStatus status;

        private InFlight(TxnStatus status) {
            this.status = status;
        }
    }


    /**
     * The live transaction, or null. A transaction whose terminal entry is durable is not
     * live, although the stock store holds it, COMMITTED or ABORTED, for a moment after
     * updating its status and before removing it: a request in that moment is answered from
     * the kept outcome (kept before the terminal entry), not refused for its status.
     */
    private TxnMeta liveTxnMeta(TxnID txnId) {
        // At or below the stock store's low water mark (its oldest live sequence, less one) no
        // transaction is live. The broker's timeout tracker asks about every transaction at its
        // timeout, long after most have ended: asked, the stock store would answer each with a
        // stack-traced TransactionNotFoundException (docs/performance.md, "The open-loop tail").
        // With no transaction live, the mark is itself a caught exception: then the ask costs
        // one more, on a coordinator that is idle.
        if (txnId.getLeastSigBits() <= getLowWaterMark()) {
            return null;
        }
        CompletableFuture<TxnMeta> live = super.getTxnMeta(txnId);
        if (!live.isDone() || live.isCompletedExceptionally()) {
            return null;
        }
        TxnMeta meta = live.join();
        return isTerminal(meta.status()) ? null : meta;
    }

    private static boolean isTerminal(TxnStatus status) {
        return status == TxnStatus.COMMITTED || status == TxnStatus.ABORTED;
    }
}
