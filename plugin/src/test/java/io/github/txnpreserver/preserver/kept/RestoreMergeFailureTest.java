package io.github.txnpreserver.preserver.kept;

import static org.assertj.core.api.Assertions.assertThat;
import static org.mockito.ArgumentMatchers.any;
import static org.mockito.ArgumentMatchers.anyInt;
import static org.mockito.Mockito.doThrow;
import static org.mockito.Mockito.mockConstruction;

import io.github.txnpreserver.config.PreserverConfig;
import io.github.txnpreserver.preserver.OutcomeMemoryBudget;
import io.github.txnpreserver.preserver.TransactionMetadataPreserver;
import io.github.txnpreserver.preserver.thread.PreserverUnavailableException;
import io.github.txnpreserver.testing.CallLog;
import io.github.txnpreserver.testing.InMemoryStateTopic;
import io.github.txnpreserver.testing.ManualScheduler;
import io.github.txnpreserver.time.Scheduler;
import java.time.Duration;
import java.util.concurrent.CompletableFuture;
import org.apache.pulsar.client.api.transaction.TxnID;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.DisplayName;
import org.junit.jupiter.api.Test;
import org.mockito.MockedConstruction;

/**
 * Review of 3e78710, finding 2: a restore whose merge throws. Before the fix the hold ended
 * anyway, and a lookup of an outcome the merge had not taken in was answered "not found"
 * (a retried commit got {@code TransactionNotFound}), against the design's rule that an
 * outcome the coordinator could not keep is answered "coordinator not found". Now the held
 * blocks stay held (nothing is written over their records, no lookup is answered from
 * them), and the coordinator is released here, to be opened again with a new index: a
 * merge that threw may have left this one in part merged.
 *
 * <p>The merge is made to throw by Mockito's construction mock of {@link RestoreMerge}, which
 * acts on the test's thread only: the scheduler here is never pumped, so every task runs on
 * it when the test steps time.
 */
@DisplayName("A restore whose merge throws")
class RestoreMergeFailureTest {

    private static final long TC = 5;
    private static final long NOW = 1_700_000_000_000L;
    private static final Duration TTL = Duration.ofHours(72);
    private static final PreserverConfig CONFIG = new PreserverConfig(2, 100, TTL, Duration.ofSeconds(300),
            Duration.ofSeconds(60));

    private final ManualScheduler scheduler = new ManualScheduler(NOW);
    private final InMemoryStateTopic topic = new InMemoryStateTopic(new CallLog());
    private int releases;

    @BeforeEach
    void anEarlierIncarnationKeptACommit() {
        OutcomeIndex earlier = new OutcomeIndex(2, 100, TTL.toMillis(), changed -> { });
        earlier.decide(1, Outcome.COMMITTED, "alice", NOW);
        topic.appendRaw("c0", BlockRecordCodec.encode(TC, earlier.recordOf(0), earlier::ownerName));
    }

    @AfterEach
    void close() {
        scheduler.shutdown();
    }

    private TransactionMetadataPreserver newPreserver() {
        TransactionMetadataPreserver preserver = new TransactionMetadataPreserver(TC, CONFIG, topic, scheduler,
                new OutcomeMemoryBudget(CONFIG.maxMemoryBytes()), Duration.ofMillis(50));
        preserver.releaseCoordinatorWith(() -> {
            releases++;
            return CompletableFuture.completedFuture(null);
        });
        return preserver;
    }

    private static MockedConstruction<RestoreMerge> mergesThrow() {
        return mockConstruction(RestoreMerge.class, (merge, context) ->
                doThrow(new IllegalStateException("injected merge failure")).when(merge).merge(any(), anyInt()));
    }

    @Test
    void keepsItsBlocksHeldAnswersNoLookupNotFoundAndReleasesTheCoordinator() {
        TransactionMetadataPreserver preserver = newPreserver();
        try (MockedConstruction<RestoreMerge> merges = mergesThrow()) {
            CompletableFuture<Void> restored = preserver.startRestore(() -> 300);
            scheduler.runReady();
            assertThat(merges.constructed()).as("the read was merged once, and that threw").hasSize(1);
            assertThat(releases).as("the coordinator is released here").isEqualTo(1);

            CompletableFuture<KeptOutcome> lookup = preserver.lookUp(new TxnID(TC, 1));
            CompletableFuture<KeptOutcome> unknown = preserver.lookUp(new TxnID(TC, 9));
            scheduler.advance(Scheduler.DEFER_BOUND);
            assertThat(lookup).as("not answered \"not found\"").isNotDone();
            assertThat(unknown).isNotDone();
            assertThat(restored).isNotDone();

            // An end in the held block meanwhile: its block is not written over the record it did not merge.
            preserver.decide(new TxnID(TC, 2), Outcome.ABORTED, "bob");
            preserver.ended(new TxnID(TC, 2));
            scheduler.advance(Duration.ofMillis(60));
            assertThat(topic.entries()).as("nothing written").hasSize(1);

            scheduler.advance(TransactionMetadataPreserver.RESTORE_WAIT);
            assertThat(merges.constructed()).as("not merged again here").hasSize(1);
            assertThat(lookup).failsWithin(Duration.ZERO).withThrowableThat()
                    .withCauseInstanceOf(PreserverUnavailableException.class);
            assertThat(unknown).failsWithin(Duration.ZERO).withThrowableThat()
                    .withCauseInstanceOf(PreserverUnavailableException.class);
            preserver.closeAsync();
            scheduler.runReady();
            assertThat(restored).isCompletedExceptionally();
        }

        TransactionMetadataPreserver again = newPreserver();
        again.startRestore(() -> 300);
        scheduler.runReady();
        CompletableFuture<KeptOutcome> lookup = again.lookUp(new TxnID(TC, 1));
        scheduler.advance(Scheduler.DEFER_BOUND);
        assertThat(lookup.join()).as("opened again, it restores the record")
                .isEqualTo(new KeptOutcome(new TxnID(TC, 1), Outcome.COMMITTED, "alice", NOW));
    }
}
