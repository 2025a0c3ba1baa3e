package io.github.txnpreserver.preserver;

import io.github.txnpreserver.preserver.kept.ClientFloor;
import io.github.txnpreserver.preserver.kept.KeptOutcome;
import io.github.txnpreserver.preserver.kept.OutcomeBlock;
import io.github.txnpreserver.preserver.kept.OutcomeIndex;
import io.github.txnpreserver.preserver.stats.PreserverStats;
import io.github.txnpreserver.preserver.thread.CoordinatorThread;
import io.github.txnpreserver.preserver.thread.PreserverUnavailableException;
import io.github.txnpreserver.statetopic.RecordPosition;
import io.github.txnpreserver.time.Scheduler;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import org.apache.pulsar.client.api.transaction.TxnID;
import org.apache.pulsar.common.util.FutureUtil;

/**
 * Answers "what was the outcome of transaction X" from a coordinator's {@link OutcomeIndex}:
 * from memory, or from the record of its cold block ({@link ColdReads}), whose read failing
 * or timing out is answered "unavailable" (retryable), never "not found".
 * While the coordinator's restore reads, an outcome may be in what is not read yet: a
 * lookup then waits for the restore's end, at most {@code restoreWait}, and is answered
 * "unavailable" (retryable) if it does not come, or if the coordinator closes.
 *
 * <p>Confined to the coordinator's thread.
 */
final class LookUps {

    /** A lookup waiting for the restore's end. */
    private record Parked(TxnID txnId, CompletableFuture<KeptOutcome> answer, Scheduler.Cancellable giveUp) {
    }

    private final long coordinatorId;
    private final OutcomeIndex index;
    private final CoordinatorThread thread;
    private final PreserverStats stats;
    private final Duration restoreWait;
    private final ColdReads coldReads;
    private final List<Parked> parked = new ArrayList<>();
    private boolean restored;

    LookUps(long coordinatorId, OutcomeIndex index, ColdReads coldReads, CoordinatorThread thread, PreserverStats stats,
            Duration restoreWait) {
        this.coordinatorId = coordinatorId;
        this.coldReads = coldReads;
        this.index = index;
        this.thread = thread;
        this.stats = stats;
        this.restoreWait = restoreWait;
    }

    /** Answers now, or once the restore is done; counted as a lookup when found. */
    void lookUp(TxnID txnId, CompletableFuture<KeptOutcome> answer) {
        assert thread.assertOwner();
        if (restored) {
            answer(txnId, answer);
            return;
        }
        Parked[] mine = new Parked[1];
        Scheduler.Cancellable giveUp = thread.schedule(() -> {
            parked.remove(mine[0]);
            answer.completeExceptionally(unavailable("is still reading its state topic"));
        }, restoreWait);
        mine[0] = new Parked(txnId, answer, giveUp);
        parked.add(mine[0]);
    }

    /** The restore is done: the lookups waiting for it are answered. */
    void restoreDone() {
        restored = true;
        parked.forEach(waiting -> {
            waiting.giveUp().cancel();
            answer(waiting.txnId(), waiting.answer());
        });
        parked.clear();
    }

    /** The coordinator closed: the lookups waiting are answered "unavailable". */
    void close() {
        parked.forEach(waiting -> waiting.answer().completeExceptionally(unavailable("closed")));
        parked.clear();
    }

    /** From memory if it has the outcome, else from its cold block's record, else absent. */
    private void answer(TxnID txnId, CompletableFuture<KeptOutcome> answer) {
        if (txnId.getMostSigBits() != coordinatorId || txnId.getLeastSigBits() < 0) {
            answer.complete(null);
            return;
        }
        long sequence = txnId.getLeastSigBits();
        long packed = index.find(sequence, -1);
        if (packed != -1) {
            stats.keptLookups.increment();
            answer.complete(new KeptOutcome(txnId, ClientFloor.outcomeOf(packed), index.ownerName(ClientFloor.ownerOf(packed)),
                    OutcomeIndex.millisOf(ClientFloor.timeOf(packed))));
            return;
        }
        long blockIndex = OutcomeBlock.indexOf(sequence);
        RecordPosition position = index.coldRecordOf(blockIndex);
        if (position == null) {
            answer.complete(null);
            return;
        }
        coldReads.read(blockIndex, position).whenComplete((decoded, error) -> {
            if (error != null) {
                answer.completeExceptionally(FutureUtil.unwrapCompletionException(error));
                return;
            }
            if (decoded == null) {
                if (!position.equals(index.coldRecordOf(blockIndex))) {
                    // The record moved (carried over) or the block left the cold tier meanwhile.
                    answer(txnId, answer);
                    return;
                }
                index.coldRecordUnusable(blockIndex, position);
                answer.complete(null);
                return;
            }
            int offset = OutcomeBlock.offsetOf(sequence);
            OutcomeBlock block = decoded.block();
            if (!block.has(offset) || index.expired(block.time(offset), thread.millis())) {
                answer.complete(null);
                return;
            }
            stats.keptLookups.increment();
            stats.coldLookups.increment();
            answer.complete(new KeptOutcome(txnId, block.outcome(offset),
                    decoded.owners().nameOf(block.owner(offset)), OutcomeIndex.millisOf(block.time(offset))));
        });
    }

    private PreserverUnavailableException unavailable(String why) {
        return new PreserverUnavailableException("coordinator " + coordinatorId + " " + why);
    }
}
