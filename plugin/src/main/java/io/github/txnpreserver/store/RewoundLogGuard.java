package io.github.txnpreserver.store;

import io.github.txnpreserver.preserver.TransactionMetadataPreserver;
import io.github.txnpreserver.preserver.kept.BlockRecordCodec;
import io.github.txnpreserver.preserver.thread.CoordinatorThread;
import io.github.txnpreserver.time.Scheduler;
import java.time.Duration;
import java.util.HashMap;
import java.util.Map;
import java.util.concurrent.CompletableFuture;
import java.util.function.Supplier;
import org.apache.pulsar.common.util.FutureUtil;
import org.apache.pulsar.transaction.coordinator.exceptions.CoordinatorException.CoordinatorNotFoundException;
import org.apache.pulsar.transaction.coordinator.impl.MLTransactionSequenceIdGenerator;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * Keeps a coordinator whose transaction log was created again from issuing an id its state
 * topic keeps an outcome for (docs/DESIGN.md, "A log created again").
 *
 * <p>A transaction's id is its coordinator and a sequence its log allocates. A log deleted and
 * created again within the retention time starts over at sequence 0 while the state topic
 * keeps the old sequences' outcomes: a new transaction would get the id of a kept one, and a
 * retry of the old one by the same role would get the new one's outcome. So a <b>new log</b>
 * (no sequence allocated) opens and replays as any other, but issues no transaction until its
 * restore has read the state topic, taking every plausible block as this coordinator's (a new
 * log cannot tell them apart; they are answered as before the deletion); then its next
 * sequence is moved to the first multiple of {@link #MARGIN} past the highest block read, so
 * that ids issued before the deletion but never kept (open then, or not yet durable) are not
 * issued again either. A new transaction asked for meanwhile waits at most
 * {@link TransactionMetadataPreserver#RESTORE_WAIT}, then is answered "coordinator not found",
 * which the client retries; a new coordinator's topic is read in milliseconds.
 *
 * <p>A log that has allocated sequences issues at once, as stock: its restore skips a block past
 * them as a record it could not have written.
 */
public final class RewoundLogGuard {

    private static final Logger log = LoggerFactory.getLogger(RewoundLogGuard.class);
    /** A moved log starts at a multiple of this: room for the ids a log issues between two durable groups. */
    static final long MARGIN = 1L << 32;

    private final long coordinatorId;
    private final CoordinatorThread thread;
    private final CompletableFuture<Void> issuing;

    private RewoundLogGuard(long coordinatorId, CoordinatorThread thread, CompletableFuture<Void> issuing) {
        this.coordinatorId = coordinatorId;
        this.thread = thread;
        this.issuing = issuing;
    }

    /** Starts the preserver's restore, and with it the guard of a new log. Before the log's replay. */
    static RewoundLogGuard startRestore(long coordinatorId, TransactionMetadataPreserver preserver,
                                        MLTransactionSequenceIdGenerator generator) {
        if (highestSequence(generator) >= 0) {
            preserver.startRestore(() -> highestSequence(generator));
            return new RewoundLogGuard(coordinatorId, preserver.thread(), CompletableFuture.completedFuture(null));
        }
        CompletableFuture<Void> restored = preserver.startRestore(() -> BlockRecordCodec.MAX_PLAUSIBLE_SEQUENCE);
        // Completes on the coordinator's thread, before any transaction is issued.
        CompletableFuture<Void> issuing = restored.thenRun(() -> moveNewLog(coordinatorId,
                preserver.highestSequenceInStateTopic(), generator));
        return new RewoundLogGuard(coordinatorId, preserver.thread(), issuing);
    }

    /**
     * Runs {@code issue} once this coordinator may issue sequences: at once, or after a new
     * log's restore, waiting at most {@link TransactionMetadataPreserver#RESTORE_WAIT}.
     *
     * @return completes as {@code issue}'s future does, with its exception itself (the broker
     *     tells the max-active refusal by its class, unwrapped); fails with
     *     {@link CoordinatorNotFoundException}, which the client retries, if the restore does not
     *     end in time or the coordinator closes first
     */
    <T> CompletableFuture<T> whenIssuing(Supplier<CompletableFuture<T>> issue) {
        if (issuing.isDone() && !issuing.isCompletedExceptionally()) {
            return issue.get();
        }
        CompletableFuture<T> answer = new CompletableFuture<>();
        Scheduler.Cancellable timeout = thread.schedule(() -> answer.completeExceptionally(
                new CoordinatorNotFoundException("Coordinator " + coordinatorId + " issues no transaction yet: its"
                        + " transaction log is new, and its state topic, whose kept outcomes may hold the ids the log"
                        + " would issue, is still being read")), TransactionMetadataPreserver.RESTORE_WAIT);
        issuing.whenComplete((ignored, error) -> {
            timeout.cancel();
            if (error != null) {
                answer.completeExceptionally(new CoordinatorNotFoundException("Coordinator " + coordinatorId
                        + " closed before its new transaction log could issue transactions"));
            } else if (!answer.isDone()) {
                issue.get().whenComplete((issued, issueError) -> {
                    if (issueError != null) {
                        answer.completeExceptionally(FutureUtil.unwrapCompletionException(issueError));
                    } else {
                        answer.complete(issued);
                    }
                });
            }
        });
        return answer;
    }

    /** Moves a new log's next sequence past every block the state topic keeps, with a margin. */
    static void moveNewLog(long coordinatorId, long highestInStateTopic, MLTransactionSequenceIdGenerator generator) {
        if (highestInStateTopic < 0) {
            return;
        }
        long next = (highestInStateTopic / MARGIN + 1) * MARGIN;
        Map<String, String> properties = new HashMap<>();
        properties.put(MLTransactionSequenceIdGenerator.MAX_LOCAL_TXN_ID, Long.toString(next - 1));
        generator.onManagedLedgerPropertiesInitialize(properties);
        log.warn("Coordinator {}: its transaction log is new, but its state topic keeps outcomes up to sequence {}:"
                + " the log was deleted within the retention time. New transactions start at sequence {}, so that"
                + " none gets the id of a transaction issued before", coordinatorId, highestInStateTopic, next);
    }

    /**
     * The highest sequence the log has allocated, -1 for a new log. The generator's getter is
     * package-private; the properties it writes at ledger roll-over are its public view.
     */
    public static long highestSequence(MLTransactionSequenceIdGenerator generator) {
        Map<String, String> properties = new HashMap<>();
        generator.onUpdateManagedLedgerInfo(properties);
        return Long.parseLong(properties.get(MLTransactionSequenceIdGenerator.MAX_LOCAL_TXN_ID));
    }
}
