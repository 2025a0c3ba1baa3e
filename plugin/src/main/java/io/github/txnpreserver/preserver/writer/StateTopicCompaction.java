package io.github.txnpreserver.preserver.writer;

import io.github.txnpreserver.preserver.thread.CoordinatorThread;
import io.github.txnpreserver.preserver.thread.RateLimitedLog;
import io.github.txnpreserver.statetopic.StateTopic;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * Asks the broker for the state topic's compaction threshold that {@link CompactionPacing}
 * decides, and tells the pacing what the broker answered. Confined to the coordinator's
 * thread; the answer hops back onto it.
 */
public final class StateTopicCompaction {

    private static final Logger log = LoggerFactory.getLogger(StateTopicCompaction.class);
    private static final long REPORT_INTERVAL_SECONDS = 60;

    private final long coordinatorId;
    private final StateTopic stateTopic;
    private final CoordinatorThread thread;
    private final CompactionPacing pacing;
    private final RateLimitedLog failures;

    public StateTopicCompaction(long coordinatorId, StateTopic stateTopic, CoordinatorThread thread, CompactionPacing pacing) {
        this.coordinatorId = coordinatorId;
        this.stateTopic = stateTopic;
        this.thread = thread;
        this.pacing = pacing;
        this.failures = new RateLimitedLog(thread::nanoTime, REPORT_INTERVAL_SECONDS, TimeUnit.SECONDS);
    }

    /** Asks for a new threshold if the compacted view of {@code keys} records no longer fits the one set. */
    public void pace(long keys) {
        assert thread.assertOwner();
        CompactionPacing.Request request = pacing.nextRequest(keys);
        if (request == null) {
            return;
        }
        CompletableFuture<Boolean> answer;
        try {
            answer = stateTopic.setCompactionThreshold(request.bytes());
        } catch (RuntimeException e) {
            answer = CompletableFuture.failedFuture(e);
        }
        answer.whenComplete((set, error) -> thread.execute(() -> answered(request, keys, set, error)));
    }

    private void answered(CompactionPacing.Request request, long keys, Boolean set, Throwable error) {
        if (error != null) {
            if (pacing.failed(request)) {
                failures.occurred(1, count -> log.warn("Coordinator {}: could not set the compaction threshold of"
                        + " state topic {} ({} times in the last {} s; last: {}); asked again later", coordinatorId,
                        stateTopic, count, REPORT_INTERVAL_SECONDS, error.toString()));
            }
        } else if (set) {
            if (pacing.applied(request)) {
                log.info("Coordinator {}: state topic {} is compacted once {} MiB of new records have accumulated"
                        + " ({} records in its compacted view)", coordinatorId, stateTopic, request.bytes() >> 20,
                        keys);
            }
        } else if (pacing.unsupported(request)) {
            log.warn("Coordinator {}: state topic {} takes no compaction threshold (topic-level policies are off),"
                    + " so the broker compacts it every brokerServiceCompactionMonitorIntervalInSeconds it has new"
                    + " records", coordinatorId, stateTopic);
        }
    }
}
