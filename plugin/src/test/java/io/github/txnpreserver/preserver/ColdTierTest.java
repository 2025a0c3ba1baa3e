package io.github.txnpreserver.preserver;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.within;

import io.github.txnpreserver.config.PreserverConfig;
import io.github.txnpreserver.preserver.kept.ColdBlocks;
import io.github.txnpreserver.preserver.kept.KeptOutcome;
import io.github.txnpreserver.preserver.kept.Outcome;
import io.github.txnpreserver.preserver.kept.RecentAnswers;
import io.github.txnpreserver.preserver.thread.PreserverUnavailableException;
import io.github.txnpreserver.statetopic.RecordPosition;
import io.github.txnpreserver.testing.CallLog;
import io.github.txnpreserver.testing.Ends;
import io.github.txnpreserver.testing.Futures;
import io.github.txnpreserver.testing.InMemoryStateTopic;
import io.github.txnpreserver.testing.ManualScheduler;
import io.github.txnpreserver.testing.MutableClock;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import org.apache.pulsar.client.api.transaction.TxnID;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.DisplayName;
import org.junit.jupiter.api.Nested;
import org.junit.jupiter.api.Test;

/**
 * The cold tier, through the preserver's public face, on a scheduler that is never pumped:
 * every task runs on the test's thread when the test steps time, so each interleaving below
 * (a read failing, held, racing a compaction, a close, an end in a cold block) is spelled out.
 * The memory bound's step is asked for directly ({@code evictOldestForMemory}), as the broker's
 * bound asks it.
 */
@DisplayName("The cold tier")
class ColdTierTest {

    private static final long TC = 9;
    private static final long NOW = 1_700_000_000_000L;
    private static final Duration TTL = Duration.ofHours(72);
    /** One floor entry per client: the floor answers each client's newest outcome from memory, not the rest. */
    private static final PreserverConfig CONFIG = new PreserverConfig(1, 100, TTL, Duration.ofSeconds(300),
            Duration.ofSeconds(60));
    private static final Duration GROUP = Duration.ofMillis(50);

    /** Wall-clock time moves only when a test says so; the scheduler's steps move monotonic time. */
    private final MutableClock clock = new MutableClock(NOW);
    private final ManualScheduler scheduler = new ManualScheduler(clock);
    private final InMemoryStateTopic topic = new InMemoryStateTopic(new CallLog());
    private int releases;
    private TransactionMetadataPreserver preserver = opened();

    @AfterEach
    void close() {
        scheduler.shutdown();
    }

    private TransactionMetadataPreserver opened() {
        TransactionMetadataPreserver opened = new TransactionMetadataPreserver(TC, CONFIG, topic, scheduler,
                new OutcomeMemoryBudget(CONFIG.maxMemoryBytes()), GROUP);
        opened.releaseCoordinatorWith(() -> {
            releases++;
            return CompletableFuture.completedFuture(null);
        });
        await(opened.startRestore(() -> 1L << 20));
        return opened;
    }

    private void setTime(long millis) {
        clock.advance(Duration.ofMillis(millis - clock.millis()));
    }

    private static TxnID txn(long sequence) {
        return new TxnID(TC, sequence);
    }

    /** Runs what is due, stepping virtual time until the future is done (at most a virtual minute). */
    private <T> T await(CompletableFuture<T> future) {
        for (int step = 0; step < 600 && !future.isDone(); step++) {
            scheduler.runReady();
            if (!future.isDone()) {
                scheduler.advance(Duration.ofMillis(100));
            }
        }
        return Futures.await(future);
    }

    private void end(long sequence, Outcome outcome, String owner) {
        await(Ends.preserve(preserver, txn(sequence), outcome, owner));
    }

    /** The memory bound's step, as the broker's bound asks for it. */
    private void boundStep() {
        preserver.evictOldestForMemory();
        scheduler.runReady();
    }

    private KeptOutcome lookUp(long sequence) {
        return await(preserver.lookUp(txn(sequence)));
    }

    /** What a lookup of {@code sequence} answers when its outcome is kept. */
    private static KeptOutcome kept(long sequence, Outcome outcome, String owner, long endTimeMillis) {
        return new KeptOutcome(txn(sequence), outcome, owner, endTimeMillis);
    }

    private CompletableFuture<KeptOutcome> lookUpAsync(long sequence) {
        CompletableFuture<KeptOutcome> answer = preserver.lookUp(txn(sequence));
        scheduler.advance(io.github.txnpreserver.time.Scheduler.DEFER_BOUND);
        return answer;
    }

    private PreserverFigures figures() {
        return await(PreserverInspection.currentFigures(preserver));
    }

    /**
     * Block 0 (alice's commit and bob's abort) goes cold; block 1, with each one's newer end
     * (their floor entries), stays in memory.
     */
    private void blockZeroCold() {
        end(1, Outcome.COMMITTED, "alice");
        end(2, Outcome.ABORTED, "bob");
        clock.advance(Duration.ofSeconds(1));
        end(300, Outcome.COMMITTED, "alice");
        end(301, Outcome.COMMITTED, "bob");
        boundStep();
        assertThat(figures().kept()).isEqualTo(4);
        assertThat(preserver.keptBytes()).as("block 0 is out of memory: a page of the cold tier, block 1")
                .isLessThan(ColdBlocks.PAGE_BYTES + 2_000);
    }

    @Nested
    @DisplayName("answers")
    class Answers {

        @Test
        void aRetryOfAnOutcomeWhoseBlockWentColdIsAnsweredFromItsRecordWithItsOwner() {
            blockZeroCold();
            int readsBefore = topic.coldReadCount();
            long keptLookupsBefore = preserver.stats().keptLookups.sum();

            assertThat(lookUp(1)).isEqualTo(new KeptOutcome(txn(1), Outcome.COMMITTED, "alice", NOW));
            assertThat(lookUp(2)).isEqualTo(new KeptOutcome(txn(2), Outcome.ABORTED, "bob", NOW));
            assertThat(lookUp(3)).as("not in the block's record").isNull();
            assertThat(lookUp(300)).as("in memory").isEqualTo(kept(300, Outcome.COMMITTED, "alice", NOW + 1000));

            assertThat(topic.coldReadCount() - readsBefore).as("the record read once, then remembered").isEqualTo(1);
            assertThat(preserver.stats().coldLookups.sum()).isEqualTo(2);
            assertThat(preserver.stats().keptLookups.sum() - keptLookupsBefore)
                    .as("the two from their record and the one in memory").isEqualTo(3);
            assertThat(figures().memoryEvictions()).isZero();
        }

        /**
         * What the broker shows of the cold tier: the records read (and how long each took),
         * and the lookups answered from a record read shortly before, without reading it.
         */
        @Test
        void countsItsColdReadsTheirLatencyAndTheLookupsAnsweredFromARecordItRemembers() {
            blockZeroCold();
            topic.holdColdReads();
            CompletableFuture<KeptOutcome> read = preserver.lookUp(txn(1));
            scheduler.runReady();
            scheduler.advance(Duration.ofMillis(30));
            topic.releaseColdReads();
            scheduler.runReady();
            assertThat(read).isCompletedWithValue(kept(1, Outcome.COMMITTED, "alice", NOW));

            assertThat(lookUp(2)).isEqualTo(kept(2, Outcome.ABORTED, "bob", NOW));
            assertThat(lookUp(3)).isNull();

            assertThat(preserver.stats().coldReads.sum()).isEqualTo(1);
            assertThat(preserver.stats().coldReadsCached.sum()).as("lookups of 2 and 3").isEqualTo(2);
            assertThat(preserver.stats().coldReadLatency.count()).isEqualTo(1);
            assertThat(preserver.stats().coldReadLatency.sumSeconds()).isCloseTo(0.03, within(1e-9));
        }

        /**
         * A retried end asks about its transaction three times: only the first waits for the
         * coordinator's thread (and the read); the others are answered at once, for a while.
         */
        @Test
        void aRetrysLaterLookupsAreAnsweredAtOnceWithoutTheCoordinatorsThread() {
            blockZeroCold();
            KeptOutcome found = new KeptOutcome(txn(1), Outcome.COMMITTED, "alice", NOW);
            assertThat(lookUp(1)).isEqualTo(found);

            assertThat(preserver.lookUp(txn(1))).as("no step of the scheduler").isCompletedWithValue(found);
            assertThat(preserver.lookUp(txn(2))).as("not asked before").isNotDone();

            scheduler.advance(Duration.ofNanos(RecentAnswers.MAX_AGE_NANOS + 1));
            assertThat(preserver.lookUp(txn(1))).as("answered again by the thread after a while").isNotDone();

            preserver.closeAsync();
            scheduler.runReady();
            assertThat(preserver.lookUp(txn(1))).as("closed: not from memory").isNotDone();
            assertThat(lookUpAsync(1)).as("closed: the next owner answers").isCompletedExceptionally();
        }

        /**
         * Second review of the cold tier, should-fix 3: a lookup's cold read was in flight when
         * the transaction was decided again (a stale record replaced), which forgets its recent
         * answer. Before the fix the read's late answer was then remembered, and later lookups
         * got the replaced outcome for ten seconds without the coordinator's thread.
         */
        @Test
        void anAnswerReadBeforeADecideIsNotRememberedAfterIt() {
            blockZeroCold();
            topic.holdColdReads();
            CompletableFuture<KeptOutcome> inFlight = lookUpAsync(1);

            preserver.decide(txn(1), Outcome.ABORTED, "alice");
            topic.releaseColdReads();
            scheduler.runReady();
            assertThat(inFlight).as("read before the decide").isCompletedWithValue(
                    new KeptOutcome(txn(1), Outcome.COMMITTED, "alice", NOW));

            assertThat(preserver.lookUp(txn(1))).as("asked of the thread again, not remembered").isNotDone();
        }

        @Test
        void aColdReadInFlightWhenTheCoordinatorClosesIsAnsweredUnavailableAtOnce() {
            blockZeroCold();
            topic.holdColdReads();
            CompletableFuture<KeptOutcome> inFlight = lookUpAsync(1);
            assertThat(inFlight).isNotDone();

            preserver.closeAsync();
            scheduler.runReady();

            assertThat(inFlight).isCompletedExceptionally();
            assertThat(Futures.failureOf(inFlight)).isInstanceOf(PreserverUnavailableException.class);
            topic.releaseColdReads();
        }

        @Test
        void theRecordIsFoundUnderItsPositionAfterTheTopicWasCompacted() {
            blockZeroCold();
            topic.compact();

            assertThat(lookUp(2)).isEqualTo(new KeptOutcome(txn(2), Outcome.ABORTED, "bob", NOW));
        }

        @Test
        void aColdReadThatFailsIsAnsweredUnavailableNeverNotFoundAndTheNextRetryReadsAgain() {
            blockZeroCold();
            topic.failNextColdReads(1);

            CompletableFuture<KeptOutcome> failed = lookUpAsync(1);
            scheduler.runReady();

            assertThat(failed).failsWithin(Duration.ZERO).withThrowableThat()
                    .withCauseInstanceOf(PreserverUnavailableException.class);
            assertThat(lookUp(1)).isEqualTo(kept(1, Outcome.COMMITTED, "alice", NOW));
            assertThat(preserver.stats().coldReadFailures.sum()).isEqualTo(1);
        }

        @Test
        void aColdReadThatDoesNotAnswerInTimeIsAnsweredUnavailable() {
            blockZeroCold();
            topic.holdColdReads();

            CompletableFuture<KeptOutcome> held = lookUpAsync(1);
            scheduler.advance(TransactionMetadataPreserver.COLD_READ_WAIT.minusMillis(20));
            assertThat(held).isNotDone();
            scheduler.advance(Duration.ofMillis(20));

            assertThat(held).failsWithin(Duration.ZERO).withThrowableThat()
                    .withCauseInstanceOf(PreserverUnavailableException.class);
            topic.releaseColdReads();
            scheduler.runReady();
            assertThat(lookUp(1)).as("the late answer is remembered")
                    .isEqualTo(kept(1, Outcome.COMMITTED, "alice", NOW));
        }

        /** Under a burst, a read whose every asker was already answered "unavailable" is not made. */
        @Test
        void aQueuedReadWhoseAskersAllGaveUpIsNotMade() {
            int coldBlocks = ColdReads.MAX_READING + 1;
            for (int block = 0; block < coldBlocks; block++) {
                end(256L * block, Outcome.COMMITTED, "alice");
            }
            clock.advance(Duration.ofSeconds(1));
            end(256L * 20, Outcome.COMMITTED, "alice");
            for (int block = 0; block < coldBlocks; block++) {
                boundStep();
            }
            assertThat(figures().cold()).isEqualTo(coldBlocks);
            topic.holdColdReads();
            int readsBefore = topic.coldReadCount();
            List<CompletableFuture<KeptOutcome>> burst = new ArrayList<>();
            for (int block = 0; block < coldBlocks; block++) {
                burst.add(lookUpAsync(256L * block));
            }
            scheduler.advance(TransactionMetadataPreserver.COLD_READ_WAIT);
            assertThat(burst).allMatch(CompletableFuture::isCompletedExceptionally);

            topic.releaseColdReads();
            scheduler.runReady();

            assertThat(topic.coldReadCount() - readsBefore).as("the queued read is not made").isEqualTo(
                    ColdReads.MAX_READING);
            assertThat(lookUp(256L * (coldBlocks - 1))).as("asked again, it is").isEqualTo(
                    kept(256L * (coldBlocks - 1), Outcome.COMMITTED, "alice", NOW));
        }

        /**
         * A burst of lookups of more cold blocks than are read at once: the reads beyond
         * {@link ColdReads#MAX_READING} wait in a queue, and each read that ends starts the next,
         * so every lookup is answered, none left waiting for another lookup to come along (or
         * answered "unavailable" at its bound).
         */
        @Test
        void aBurstOfColdLookupsBeyondTheReadsMadeAtOnceIsAnsweredWhole() {
            int coldBlocks = ColdReads.MAX_READING + 1;
            for (int block = 0; block < coldBlocks; block++) {
                end(256L * block, Outcome.COMMITTED, "alice");
            }
            clock.advance(Duration.ofSeconds(1));
            end(256L * 20, Outcome.COMMITTED, "alice");
            for (int block = 0; block < coldBlocks; block++) {
                boundStep();
            }
            assertThat(figures().cold()).isEqualTo(coldBlocks);
            topic.holdColdReads();
            List<CompletableFuture<KeptOutcome>> burst = new ArrayList<>();
            for (int block = 0; block < coldBlocks; block++) {
                burst.add(lookUpAsync(256L * block));
            }

            topic.releaseColdReads();
            scheduler.runReady();
            scheduler.advance(Duration.ofMillis(100));

            for (int block = 0; block < coldBlocks; block++) {
                assertThat(burst.get(block)).as("block %d", block)
                        .isCompletedWithValue(kept(256L * block, Outcome.COMMITTED, "alice", NOW));
            }
        }

        @Test
        void aLookupWaitingForAColdReadWhenTheCoordinatorClosesIsAnsweredUnavailable() {
            blockZeroCold();
            topic.holdColdReads();
            CompletableFuture<KeptOutcome> held = lookUpAsync(1);

            preserver.closeAsync();
            scheduler.runReady();

            assertThat(held).failsWithin(Duration.ZERO).withThrowableThat()
                    .withCauseInstanceOf(PreserverUnavailableException.class);
        }

        @Test
        void aRecordMissingWhereTheColdTierPointsIsCountedAndItsOutcomesAreAbsent() {
            blockZeroCold();
            // Another writer put a value under the key: compaction keeps only that one.
            topic.appendRaw("c0", new byte[] {1, 2, 3});
            topic.compact();

            assertThat(lookUp(1)).isNull();
            assertThat(preserver.stats().malformedRecords.sum()).isEqualTo(1);
            assertThat(figures().kept()).as("the cold tier forgot the block").isEqualTo(2);
            assertThat(lookUp(2)).isNull();
            assertThat(preserver.stats().malformedRecords.sum()).as("not read again").isEqualTo(1);
            assertThat(preserver.stats().restoreMalformedRecords).as("found by a cold read, not by the restore")
                    .isZero();
        }
    }

    @Nested
    @DisplayName("keeps")
    class Keeps {

        @Test
        void aColdBlockWhoseOutcomesExpiredIsDeletedFromTheTopic() {
            blockZeroCold();
            setTime(NOW + TTL.toMillis() + 500);

            preserver.expire();
            scheduler.advance(GROUP.multipliedBy(2));

            assertThat(topic.liveKeys()).doesNotContain("c0").contains("c1");
            assertThat(lookUp(1)).isNull();
            assertThat(figures().expirations()).isEqualTo(2);
            assertThat(lookUp(300)).as("a second newer").isEqualTo(kept(300, Outcome.COMMITTED, "alice", NOW + 1000));
        }

        /**
         * The memory bound asks again before the coordinator's thread has acted on its first
         * request (every change of any coordinator of the broker reclaims): the requests make
         * one step, the oldest block cold, not one block each, which would send more cold than
         * the bound needs and, once nothing more can go cold, drop outcomes.
         */
        @Test
        void requestsOfTheMemoryBoundMadeBeforeTheThreadActsMakeOneStep() {
            end(1, Outcome.COMMITTED, "alice");
            end(2, Outcome.ABORTED, "bob");
            clock.advance(Duration.ofSeconds(1));
            end(300, Outcome.COMMITTED, "alice");
            end(301, Outcome.COMMITTED, "bob");
            clock.advance(Duration.ofSeconds(1));
            end(600, Outcome.COMMITTED, "alice");

            preserver.evictOldestForMemory();
            preserver.evictOldestForMemory();
            scheduler.runReady();

            assertThat(figures().cold()).as("block 0 only").isEqualTo(2);
            assertThat(lookUp(300)).isEqualTo(kept(300, Outcome.COMMITTED, "alice", NOW + 1000));
            assertThat(preserver.stats().coldLookups.sum()).as("block 1 is still in memory").isZero();
        }

        @Test
        void anOutcomeOfAColdBlockPastItsTimeIsNotAnsweredWhileItsNeighboursAre() {
            end(1, Outcome.COMMITTED, "alice");
            setTime(NOW + 10_000);
            end(2, Outcome.COMMITTED, "alice");
            end(300, Outcome.COMMITTED, "alice");
            boundStep();
            setTime(NOW + TTL.toMillis() + 5_000);

            assertThat(lookUp(1)).as("past its time").isNull();
            assertThat(lookUp(2)).isEqualTo(kept(2, Outcome.COMMITTED, "alice", NOW + 10_000));
        }

        @Test
        void anEndInAColdBlockHoldsItUntilItsColdPartIsReadThenWritesTheBlockWhole() {
            blockZeroCold();
            topic.holdColdReads();

            CompletableFuture<Void> late = Ends.preserve(preserver, txn(3), Outcome.ABORTED, "carol");
            scheduler.advance(GROUP.multipliedBy(4));
            assertThat(late).as("its log entries wait: the block is not written yet").isNotDone();
            assertThat(topic.newestOutcomeOf(txn(3))).isNull();
            assertThat(topic.newestOutcomeOf(txn(1))).as("the record is not written over").isEqualTo(Outcome.COMMITTED);
            CompletableFuture<KeptOutcome> neighbour = lookUpAsync(2);
            assertThat(neighbour).as("a neighbour is read from the cold record").isNotDone();

            topic.releaseColdReads();
            await(late);

            assertThat(neighbour.join()).isEqualTo(kept(2, Outcome.ABORTED, "bob", NOW));
            assertThat(topic.newestOutcomeOf(txn(1))).isEqualTo(Outcome.COMMITTED);
            assertThat(topic.newestOutcomeOf(txn(2))).isEqualTo(Outcome.ABORTED);
            assertThat(topic.newestOutcomeOf(txn(3))).isEqualTo(Outcome.ABORTED);
            assertThat(lookUp(2)).isEqualTo(new KeptOutcome(txn(2), Outcome.ABORTED, "bob", NOW));
            assertThat(lookUp(3)).isEqualTo(kept(3, Outcome.ABORTED, "carol", NOW + 1000));
        }

        /**
         * The bound on new ends counts an end waiting for its cold part apart while the read
         * lasts, and with the rest once the part is merged: until its block lands.
         */
        @Test
        void anEndWaitingForItsColdPartCountsAgainstTheBoundOnNewEndsOnceThePartIsRead() {
            blockZeroCold();
            topic.holdColdReads();
            topic.holdWrites();

            CompletableFuture<Void> late = Ends.preserve(preserver, txn(3), Outcome.ABORTED, "carol");
            scheduler.advance(GROUP.multipliedBy(4));
            assertThat(preserver.endsWaiting()).as("held for its cold part").isZero();

            topic.releaseColdReads();
            scheduler.advance(GROUP.multipliedBy(4));
            assertThat(late).isNotDone();
            assertThat(preserver.endsWaiting()).as("it waits for the state topic now").isEqualTo(1);

            topic.releaseHeldWrites();
            await(late);
            assertThat(preserver.endsWaiting()).isZero();
        }

        /**
         * An end waiting for its cold part when the topic is found created again: the cold
         * part is lost with the old topic, so the end waits no more for it, but for the block's
         * write into the new topic, and counts against the bound on new ends until it lands.
         */
        @Test
        void anEndThatWaitedForItsColdPartCountsAgainstTheBoundOnNewEndsOnceTheTopicIsCreatedAgain() {
            blockZeroCold();
            topic.holdColdReads();
            topic.holdWrites();
            CompletableFuture<Void> late = Ends.preserve(preserver, txn(3), Outcome.ABORTED, "carol");
            scheduler.advance(GROUP.multipliedBy(4));
            assertThat(preserver.endsWaiting()).as("held for its cold part").isZero();
            topic.deleteTopicAndComeBackEmpty();

            preserver.checkTopicCreatedAgain();
            scheduler.advance(GROUP.multipliedBy(4));

            assertThat(late).isNotDone();
            assertThat(preserver.endsWaiting()).as("it waits for the new topic now").isEqualTo(1);
            topic.releaseHeldWrites();
            await(late);
            assertThat(preserver.endsWaiting()).isZero();
            topic.releaseColdReads();
        }

        @Test
        void anEndInAColdBlockWhoseReadFailsReadsItAgain() {
            blockZeroCold();
            topic.failNextColdReads(2);

            await(Ends.preserve(preserver, txn(3), Outcome.ABORTED, "carol"));

            assertThat(topic.newestOutcomeOf(txn(1))).isEqualTo(Outcome.COMMITTED);
            assertThat(topic.newestOutcomeOf(txn(3))).isEqualTo(Outcome.ABORTED);
        }

        @Test
        void aTopicCreatedAgainLosesTheColdOutcomesAndSaysSo() {
            blockZeroCold();
            topic.deleteTopicAndComeBackEmpty();

            preserver.checkTopicCreatedAgain();
            scheduler.advance(GROUP.multipliedBy(2));

            assertThat(lookUp(1)).isNull();
            assertThat(lookUp(300)).as("memory's blocks are written again")
                    .isEqualTo(kept(300, Outcome.COMMITTED, "alice", NOW + 1000));
            assertThat(topic.liveKeys()).containsExactly("c1");
            assertThat(figures().kept()).isEqualTo(2);
            assertThat(figures().coldLost()).isEqualTo(2);
        }

        @Test
        void aTopicCreatedAgainKeepsTheFloorEntriesOfItsColdBlocksAndCountsOnlyTheRestLost() {
            end(1, Outcome.COMMITTED, "alice");
            end(2, Outcome.ABORTED, "carol");
            clock.advance(Duration.ofSeconds(1));
            end(300, Outcome.COMMITTED, "alice");
            boundStep();
            assertThat(figures().cold()).isEqualTo(2);
            topic.deleteTopicAndComeBackEmpty();

            preserver.checkTopicCreatedAgain();
            scheduler.advance(GROUP.multipliedBy(2));

            assertThat(lookUp(2)).as("carol's newest: her floor entry").isEqualTo(new KeptOutcome(txn(2),
                    Outcome.ABORTED, "carol", NOW));
            assertThat(lookUp(1)).isNull();
            assertThat(figures().coldLost()).isEqualTo(1);
            assertThat(topic.newestOutcomeOf(txn(2))).as("written again, as a floor-only record")
                    .isEqualTo(Outcome.ABORTED);
            assertThat(topic.liveKeys()).containsExactlyInAnyOrder("c0", "c1");
        }
    }

    /**
     * A terminated state topic can never be written again: it is deleted and created again,
     * and its records, the only copy of the cold outcomes, are carried over into the new one
     * (the real topic through a carrier topic: StateTopicFaultsIT). The cold tier follows
     * them to their new positions; nothing is lost or answered "not found" meanwhile.
     */
    @Nested
    @DisplayName("follows a terminated topic's records into the topic created again")
    class CarriedOver {

        /** Termination shows at the next write, which fails and has the writer replaced. */
        private CompletableFuture<Void> terminatedAndWrittenTo() {
            topic.terminateTopic();
            CompletableFuture<Void> next = Ends.preserve(preserver, txn(600), Outcome.COMMITTED, "carol");
            scheduler.advance(GROUP.multipliedBy(4));
            return next;
        }

        @Test
        void coldOutcomesAreAnsweredFromTheirNewPositionsAndNoneIsLost() {
            blockZeroCold();
            RecordPosition before = topic.entries().stream().filter(entry -> entry.key().equals("c0")).findFirst()
                    .orElseThrow().position();

            await(terminatedAndWrittenTo());

            assertThat(lookUp(1)).isEqualTo(new KeptOutcome(txn(1), Outcome.COMMITTED, "alice", NOW));
            assertThat(lookUp(2)).isEqualTo(new KeptOutcome(txn(2), Outcome.ABORTED, "bob", NOW));
            assertThat(lookUp(600)).isEqualTo(kept(600, Outcome.COMMITTED, "carol", NOW + 1000));
            RecordPosition after = topic.entries().stream().filter(entry -> entry.key().equals("c0")).findFirst()
                    .orElseThrow().position();
            assertThat(after.ledgerId()).as("carried into a new ledger").isGreaterThan(before.ledgerId());
            assertThat(figures().coldLost()).isZero();
            assertThat(figures().kept()).isEqualTo(5);
        }

        @Test
        void aColdLookupWhileTheRecordsAreCarriedIsAnsweredUnavailableNeverNotFound() {
            blockZeroCold();
            topic.holdCarry();
            CompletableFuture<Void> next = terminatedAndWrittenTo();

            CompletableFuture<KeptOutcome> during = lookUpAsync(1);
            scheduler.runReady();

            assertThat(during).failsWithin(Duration.ZERO).withThrowableThat()
                    .withCauseInstanceOf(PreserverUnavailableException.class);
            assertThat(next).as("the end waits for the new topic").isNotDone();
            topic.releaseCarry();
            await(next);
            assertThat(lookUp(1)).isEqualTo(kept(1, Outcome.COMMITTED, "alice", NOW));
            assertThat(preserver.stats().malformedRecords.sum()).isZero();
        }

        @Test
        void aLookupThatReadTheOldPositionOnceTheRecordMovedReadsItAgainWhereItIsNow() {
            blockZeroCold();
            topic.holdColdReads();
            CompletableFuture<KeptOutcome> early = lookUpAsync(2);

            await(terminatedAndWrittenTo());
            topic.releaseColdReads();

            assertThat(await(early)).isEqualTo(new KeptOutcome(txn(2), Outcome.ABORTED, "bob", NOW));
            assertThat(preserver.stats().malformedRecords.sum()).as("a moved record is not a missing one").isZero();
            assertThat(figures().coldLost()).isZero();
        }

        /**
         * A read at the record's old position, still in flight when a lookup reads it where it
         * is now, is no longer the block's read; at the close its asker is answered all the
         * same (its give-up timer is dropped with the coordinator).
         */
        @Test
        void aColdReadDisplacedByOneAtTheRecordsNewPositionIsAnsweredUnavailableWhenTheCoordinatorCloses() {
            blockZeroCold();
            topic.holdColdReads();
            CompletableFuture<KeptOutcome> early = lookUpAsync(2);
            await(terminatedAndWrittenTo());
            CompletableFuture<KeptOutcome> late = lookUpAsync(1);
            assertThat(early).isNotDone();
            assertThat(late).isNotDone();

            preserver.closeAsync();
            scheduler.runReady();

            assertThat(early).as("the displaced read's asker").isCompletedExceptionally();
            assertThat(Futures.failureOf(early)).isInstanceOf(PreserverUnavailableException.class);
            assertThat(Futures.failureOf(late)).isInstanceOf(PreserverUnavailableException.class);
            topic.releaseColdReads();
        }

        /**
         * A lookup made once the record moved reads it at its new position, even while a read
         * at the old one is still in flight. Joined to that read, it would get its "moved"
         * answer back while holding the position the cold tier points to now, take the record
         * for missing, answer a committed transaction "not found", and drop the block's
         * outcomes from the cold tier.
         */
        @Test
        void aLookupAtTheRecordsNewPositionDoesNotJoinAReadStillInFlightAtItsOldOne() {
            blockZeroCold();
            topic.holdColdReads();
            CompletableFuture<KeptOutcome> early = lookUpAsync(2);
            await(terminatedAndWrittenTo());
            CompletableFuture<KeptOutcome> late = lookUpAsync(1);

            topic.releaseColdReads();

            assertThat(await(late)).isEqualTo(new KeptOutcome(txn(1), Outcome.COMMITTED, "alice", NOW));
            assertThat(await(early)).isEqualTo(kept(2, Outcome.ABORTED, "bob", NOW));
            assertThat(figures().coldLost()).isZero();
            assertThat(preserver.stats().malformedRecords.sum()).isZero();
        }

        /**
         * An end brought its cold block back into memory, and the read of the block's cold part
         * was in flight at the record's old position when the record was carried over: that
         * read finds nothing there because the record moved, not because it is missing, so the
         * part is read again where the record is now and the block is written whole. Taken for
         * missing, the block would be written without its cold outcomes (lost from the topic);
         * not read again, the block's ends would wait for ever.
         */
        @Test
        void anEndWhoseColdPartWasReadAtTheOldPositionReadsItAgainWhereTheRecordIsNow() {
            blockZeroCold();
            topic.holdColdReads();
            CompletableFuture<Void> late = Ends.preserve(preserver, txn(3), Outcome.ABORTED, "carol");
            scheduler.advance(GROUP.multipliedBy(4));
            await(terminatedAndWrittenTo());
            assertThat(late).as("its block waits for its cold part").isNotDone();

            topic.releaseColdReads();
            await(late);

            assertThat(topic.newestOutcomeOf(txn(1))).as("the block written whole").isEqualTo(Outcome.COMMITTED);
            assertThat(topic.newestOutcomeOf(txn(2))).isEqualTo(Outcome.ABORTED);
            assertThat(topic.newestOutcomeOf(txn(3))).isEqualTo(Outcome.ABORTED);
            assertThat(lookUp(1)).isEqualTo(new KeptOutcome(txn(1), Outcome.COMMITTED, "alice", NOW));
            assertThat(figures().coldLost()).isZero();
            assertThat(preserver.stats().malformedRecords.sum()).isZero();
        }

        @Test
        void anEndInAColdBlockWhoseRecordIsCarriedMeanwhileReadsItsColdPartWhereItIsNow() {
            blockZeroCold();
            topic.holdCarry();
            CompletableFuture<Void> next = terminatedAndWrittenTo();
            CompletableFuture<Void> late = Ends.preserve(preserver, txn(3), Outcome.ABORTED, "carol");
            scheduler.advance(TransactionMetadataPreserver.COLD_PART_RETRY.multipliedBy(2));

            topic.releaseCarry();
            await(next);
            await(late);

            assertThat(topic.newestOutcomeOf(txn(1))).as("the block written whole").isEqualTo(Outcome.COMMITTED);
            assertThat(topic.newestOutcomeOf(txn(2))).isEqualTo(Outcome.ABORTED);
            assertThat(topic.newestOutcomeOf(txn(3))).isEqualTo(Outcome.ABORTED);
        }
    }

    @Nested
    @DisplayName("restores")
    class Restores {

        @Test
        void aCoordinatorOpenedAgainAnswersItsColdOutcomesFromThePositionsItsReadFound() {
            blockZeroCold();
            preserver.closeAsync();
            scheduler.runReady();

            preserver = opened();

            assertThat(lookUp(1)).isEqualTo(new KeptOutcome(txn(1), Outcome.COMMITTED, "alice", NOW));
            boundStep();
            boundStep();
            assertThat(lookUp(300)).as("restored blocks go cold too")
                    .isEqualTo(kept(300, Outcome.COMMITTED, "alice", NOW + 1000));
            assertThat(lookUp(2)).isEqualTo(kept(2, Outcome.ABORTED, "bob", NOW));
        }

        /**
         * A lookup that waited for the restore is answered once it is done, even from a cold
         * record whose read is still in flight when the restore's wait would have run out: its
         * wait for the restore ends with the restore, and only the read's own bound applies.
         */
        @Test
        void aLookupThatWaitedForTheRestoreIsAnsweredFromAColdRecordReadPastTheRestoresWait() {
            for (int block = 0; block < 40; block++) {
                clock.advance(Duration.ofSeconds(1));
                end(256L * block, Outcome.COMMITTED, "alice");
            }
            preserver.closeAsync();
            scheduler.runReady();
            preserver = new TransactionMetadataPreserver(TC, CONFIG, topic, scheduler,
                    new OutcomeMemoryBudget(ColdBlocks.PAGE_BYTES + 10 * 900), GROUP);
            topic.holdReads();
            CompletableFuture<Void> restored = preserver.startRestore(() -> 1L << 20);
            CompletableFuture<KeptOutcome> parked = lookUpAsync(0);
            scheduler.advance(TransactionMetadataPreserver.RESTORE_WAIT.minusSeconds(1));
            assertThat(parked).as("waits for the restore").isNotDone();

            topic.holdColdReads();
            topic.releaseReads();
            scheduler.runReady();
            assertThat(restored).isCompleted();
            scheduler.advance(Duration.ofSeconds(2));
            assertThat(parked).as("its block went cold at the restore: read from its record").isNotDone();
            topic.releaseColdReads();
            scheduler.runReady();

            assertThat(parked).isCompletedWithValue(kept(0, Outcome.COMMITTED, "alice", NOW + 1000));
        }

        @Test
        void aReadLargerThanTheMemoryLeftKeepsTheOldestColdAndAnswersEveryOutcome() {
            for (int block = 0; block < 40; block++) {
                clock.advance(Duration.ofSeconds(1));
                end(256L * block, block % 2 == 0 ? Outcome.COMMITTED : Outcome.ABORTED, "client-" + block % 3);
            }
            preserver.closeAsync();
            scheduler.runReady();
            OutcomeMemoryBudget small = new OutcomeMemoryBudget(ColdBlocks.PAGE_BYTES + 10 * 900);
            preserver = new TransactionMetadataPreserver(TC, CONFIG, topic, scheduler, small, GROUP);

            await(preserver.startRestore(() -> 1L << 20));

            assertThat(preserver.keptBytes()).isLessThanOrEqualTo(small.limitBytes());
            assertThat(figures().kept()).isEqualTo(40);
            assertThat(figures().memoryEvictions()).isZero();
            for (int block = 0; block < 40; block++) {
                assertThat(lookUp(256L * block)).as("block %d", block).isEqualTo(new KeptOutcome(txn(256L * block),
                        block % 2 == 0 ? Outcome.COMMITTED : Outcome.ABORTED, "client-" + block % 3,
                        NOW + 1000L * (block + 1)));
            }
            assertThat(preserver.stats().coldLookups.sum()).isPositive();
        }
    }
}
