package io.github.txnpreserver.store;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import io.github.txnpreserver.config.PreserverConfig;
import io.github.txnpreserver.preserver.OutcomeMemoryBudget;
import io.github.txnpreserver.preserver.TransactionMetadataPreserver;
import io.github.txnpreserver.preserver.kept.Outcome;
import io.github.txnpreserver.testing.CallLog;
import io.github.txnpreserver.testing.InMemoryStateTopic;
import io.github.txnpreserver.testing.InMemoryTransactionLog;
import io.github.txnpreserver.testing.ManualScheduler;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Set;
import java.util.concurrent.CompletableFuture;
import org.apache.bookkeeper.mledger.Position;
import org.apache.pulsar.client.api.transaction.TxnID;
import org.apache.pulsar.transaction.coordinator.TransactionCoordinatorID;
import org.apache.pulsar.transaction.coordinator.impl.MLTransactionLogImpl;
import org.apache.pulsar.transaction.coordinator.proto.TransactionMetadataEntry.TransactionMetadataOp;
import org.apache.pulsar.transaction.coordinator.proto.TransactionMetadataEntry;
import org.apache.pulsar.transaction.coordinator.proto.TxnStatus;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.DisplayName;
import org.junit.jupiter.api.Test;

/**
 * The log's release of ended transactions' entries, one level below the store: the gated log
 * over the in-memory log, the preserver over the in-memory topic, on a scheduler that is never
 * pumped (every task runs on the test's thread when the test steps it), so that a close or a
 * failure can be put between a record's landing and the release it allows.
 */
@DisplayName("The release of the transaction log's entries")
class LogReleaseTest {

    private static final long TC = 3;
    private static final Duration GROUP = TransactionMetadataPreserver.GROUP_COMMIT_INTERVAL;
    private static final Duration PACE = RecordGatedTransactionLog.RELEASE_PACE;
    private static final Duration SPREAD = RecordGatedTransactionLog.RELEASE_SPREAD;
    private static final PreserverConfig CONFIG = new PreserverConfig(10, 1000, Duration.ofHours(72),
            Duration.ofSeconds(300), Duration.ofSeconds(60));

    private ManualScheduler scheduler;
    private CallLog calls;
    private InMemoryStateTopic topic;
    private InMemoryTransactionLog transactionLog;
    private TransactionMetadataPreserver preserver;
    private MLTransactionLogImpl log;

    @BeforeEach
    void restored() {
        open(GROUP);
    }

    /** A coordinator whose preserver writes a group every {@code group}, restored. */
    private void open(Duration group) {
        if (scheduler != null) {
            scheduler.shutdown();
        }
        scheduler = new ManualScheduler(1_700_000_000_000L);
        calls = new CallLog();
        topic = new InMemoryStateTopic(calls);
        transactionLog = new InMemoryTransactionLog(calls);
        preserver = new TransactionMetadataPreserver(TC, CONFIG, topic, scheduler,
                new OutcomeMemoryBudget(CONFIG.maxMemoryBytes()), group);
        log = RecordGatedTransactionLog.gate(new TransactionCoordinatorID(TC), transactionLog.newMock(), preserver,
                new TimeoutAborts());
        CompletableFuture<Void> restored = preserver.startRestore(() -> Long.MAX_VALUE);
        scheduler.runReady();
        assertThat(restored).isCompleted();
    }

    @AfterEach
    void close() {
        scheduler.shutdown();
    }

    /** Steps the clock 1 ms at a time over {@code span}: the steps (ms from now) at which a delete came, one per delete. */
    private List<Integer> deletesOver(Duration span) {
        List<Integer> at = new ArrayList<>();
        for (int step = 1; step <= span.toMillis(); step++) {
            int before = transactionLog.deletes().size();
            scheduler.advance(Duration.ofMillis(1));
            for (int i = before; i < transactionLog.deletes().size(); i++) {
                at.add(step);
            }
        }
        return at;
    }

    /** An end as the stock store drives it: first entry, decision, terminal entry, ended, the release asked for. */
    private void end(long sequence) {
        end(sequence, 0);
    }

    /** As {@link #end(long)}, with {@code partitions} entries that add a partition between the first and the decision. */
    private void end(long sequence, int partitions) {
        TxnID txn = new TxnID(TC, sequence);
        List<Position> positions = new ArrayList<>();
        positions.add(log.append(entry(sequence, TransactionMetadataOp.NEW, null)).join());
        for (int i = 0; i < partitions; i++) {
            positions.add(log.append(entry(sequence, TransactionMetadataOp.ADD_PARTITION, null)).join());
        }
        preserver.decide(txn, Outcome.COMMITTED, "alice").join();
        positions.add(log.append(entry(sequence, TransactionMetadataOp.UPDATE, TxnStatus.COMMITTED)).join());
        preserver.ended(txn);
        assertThat(log.deletePosition(positions)).as("answered at once").isCompleted();
        scheduler.runReady();
    }

    private static TransactionMetadataEntry entry(long sequence, TransactionMetadataOp op, TxnStatus status) {
        TransactionMetadataEntry entry = new TransactionMetadataEntry().setTxnidMostBits(TC)
                .setTxnidLeastBits(sequence).setMetadataOp(op).setLastModificationTime(0);
        if (status != null) {
            entry.setExpectedStatus(TxnStatus.COMMITTING).setNewStatus(status);
        }
        return entry;
    }

    @Test
    void theEndsOfOneRecordAreReleasedInOneDeleteOnceItLanded() {
        end(1);
        end(2);
        assertThat(transactionLog.deletes()).as("before the record").isEmpty();

        scheduler.advance(GROUP);

        assertThat(transactionLog.deletes()).containsExactly(Set.of(TC + ":1", TC + ":2"));
    }

    @Test
    void theEndsOfTwoBlocksWrittenInOneFlushAreReleasedInOneDelete() {
        end(1);
        end(300);

        scheduler.advance(GROUP);

        assertThat(calls.calls()).contains("state-write c0", "state-write c1");
        assertThat(transactionLog.deletes()).containsExactly(Set.of(TC + ":1", TC + ":300"));
    }

    /**
     * A landing's ends leave in deletes of about {@link RecordGatedTransactionLog#RELEASE_CHUNK}
     * entries (whole transactions until a delete holds that many), the first at once and
     * then one every {@link RecordGatedTransactionLog#RELEASE_PACE}, not one burst: a task
     * that comes meanwhile runs between two deletes.
     */
    @Test
    void aLandingsEntriesLeaveInChunksOnePaceApart() {
        int ends = RecordGatedTransactionLog.RELEASE_CHUNK + RecordGatedTransactionLog.RELEASE_CHUNK / 2 + 3;
        for (long sequence = 1; sequence <= ends; sequence++) {
            end(sequence);
        }
        transactionLog.duringNextDelete(() -> preserver.execute(() -> calls.record("queued during the first delete")));

        scheduler.advance(GROUP);

        assertThat(transactionLog.deletes()).as("the first chunk at the landing").hasSize(1);
        assertThat(calls.calls()).as("what came meanwhile ran before the next chunk")
                .contains("queued during the first delete");
        scheduler.advance(PACE.minusNanos(1));
        assertThat(transactionLog.deletes()).as("not before a pace").hasSize(1);
        scheduler.advance(Duration.ofNanos(1));
        assertThat(transactionLog.deletes()).as("the second chunk a pace later").hasSize(2);
        scheduler.advance(PACE.minusNanos(1));
        assertThat(transactionLog.deletes()).hasSize(2);
        scheduler.advance(PACE.plusNanos(1));

        // Two entries per end: a chunk holds the entries of RELEASE_CHUNK / 2 ends.
        int perChunk = RecordGatedTransactionLog.RELEASE_CHUNK / 2;
        assertThat(transactionLog.deletes()).extracting(Set::size)
                .containsExactly(perChunk, perChunk, perChunk, ends - 3 * perChunk);
        List<String> released = new ArrayList<>();
        transactionLog.deletes().forEach(released::addAll);
        assertThat(released).as("every end's entries, once").hasSize(ends).doesNotHaveDuplicates();
        assertThat(transactionLog.deletes().get(0)).as("oldest first").contains(TC + ":1");
        scheduler.advance(PACE.multipliedBy(10));
        assertThat(transactionLog.deletes()).as("nothing more").hasSize(4);
    }

    /**
     * More chunks than paces fit in {@link RecordGatedTransactionLog#RELEASE_SPREAD} (the ends
     * of a state-topic outage, landing at once): the deletes come sooner than a pace apart, so
     * that all have left within the spread.
     */
    @Test
    void moreChunksThanPacesLeaveWithinTheSpread() {
        int chunks = 40;
        int perChunk = RecordGatedTransactionLog.RELEASE_CHUNK / 2;
        assertThat(chunks).as("more chunks than paces in the spread")
                .isGreaterThan((int) (SPREAD.toNanos() / PACE.toNanos()));
        int ends = chunks * perChunk;
        for (long sequence = 1; sequence <= ends; sequence++) {
            end(sequence);
        }

        scheduler.advance(GROUP);
        scheduler.advance(SPREAD.dividedBy(2));

        int halfway = transactionLog.deletes().size();
        assertThat(halfway).as("faster than a pace apart, and not all at once")
                .isGreaterThan((int) (SPREAD.dividedBy(2).toNanos() / PACE.toNanos()) + 1)
                .isLessThan(chunks);
        scheduler.advance(SPREAD.dividedBy(2));
        assertThat(transactionLog.deletes()).as("all within the spread").hasSize(chunks)
                .allSatisfy(delete -> assertThat(delete).hasSize(perChunk));

        // The next landing's few chunks are a pace apart again: what left is no longer counted.
        for (long sequence = ends + 1; sequence <= ends + 3 * perChunk; sequence++) {
            end(sequence);
        }
        scheduler.advance(GROUP);
        assertThat(transactionLog.deletes()).as("the next landing's first chunk").hasSize(chunks + 1);
        assertThat(deletesOver(SPREAD)).containsExactly(10, 20);
    }

    /**
     * More chunks than paces: the deletes after the landing's first are spread evenly over the
     * spread, the last one at its end, not sooner and not bunched there.
     */
    @Test
    void moreChunksThanPacesLeaveEvenlySpacedTheLastAtTheSpreadsEnd() {
        int perChunk = RecordGatedTransactionLog.RELEASE_CHUNK / 2;
        // 40 full chunks and a last one of a single transaction: a partial chunk counts as one.
        int chunks = 41;
        for (long sequence = 1; sequence <= (chunks - 1) * perChunk + 1; sequence++) {
            end(sequence);
        }
        scheduler.advance(GROUP);
        assertThat(transactionLog.deletes()).as("the first at the landing").hasSize(1);

        List<Integer> at = deletesOver(SPREAD);

        assertThat(at).as("the other chunks").hasSize(chunks - 1);
        assertThat(at.get(at.size() - 1)).as("the last at the spread's end").isEqualTo((int) SPREAD.toMillis());
        long even = SPREAD.toNanos() / (chunks - 1);
        for (int k = 1; k <= at.size(); k++) {
            assertThat((long) at.get(k - 1)).as("delete %d, a %d ns share of the spread apart", k, even)
                    .isBetween(k * even / 1_000_000, k * even / 1_000_000 + 1);
        }
    }

    /**
     * A record lands while the deletes of the one before are still paced (groups a tenth of
     * a second apart): its entries join the same deletes, after the earlier ones, one delete
     * at a time, and all have left within the spread of the later landing.
     */
    @Test
    void aLandingDuringAPacedReleaseJoinsItAndExtendsItsSpread() {
        Duration group = Duration.ofMillis(100);
        open(group);
        int perChunk = RecordGatedTransactionLog.RELEASE_CHUNK / 2;
        int firstEnds = 40 * perChunk;
        for (long sequence = 1; sequence <= firstEnds; sequence++) {
            end(sequence);
        }
        scheduler.advance(group);
        assertThat(transactionLog.deletes()).as("the first landing's first chunk").hasSize(1);
        List<Integer> before = deletesOver(Duration.ofMillis(50));
        int secondEnds = 4 * perChunk;
        for (long sequence = firstEnds + 1; sequence <= firstEnds + secondEnds; sequence++) {
            end(sequence);
        }

        // The second record is written a group after its first change and lands at once: 150 ms after the first.
        int secondLandedAt = 100;
        List<Integer> after = deletesOver(Duration.ofMillis(secondLandedAt).plus(SPREAD).plus(PACE));

        assertThat(before).as("one delete per step").doesNotHaveDuplicates();
        assertThat(after).as("one delete per step: one chain, not two").doesNotHaveDuplicates();
        assertThat(1 + before.size() + after.size()).as("every chunk of both landings, once").isEqualTo(44);
        List<Integer> afterSecond = after.stream().filter(step -> step > secondLandedAt).toList();
        for (int i = 1; i < afterSecond.size(); i++) {
            assertThat(afterSecond.get(i) - afterSecond.get(i - 1))
                    .as("a pace apart: fewer chunks than paces in the later landing's spread").isEqualTo(10);
        }
        assertThat(afterSecond.get(afterSecond.size() - 1)).as("within the later landing's spread")
                .isLessThanOrEqualTo(secondLandedAt + (int) SPREAD.toMillis());
        List<Long> released = new ArrayList<>();
        transactionLog.deletes().forEach(delete -> released.addAll(
                delete.stream().map(LogReleaseTest::sequenceOf).sorted().toList()));
        assertThat(released).as("oldest first, every end once").hasSize(firstEnds + secondEnds)
                .doesNotHaveDuplicates().isSorted();
    }

    private static long sequenceOf(String key) {
        return Long.parseLong(key.substring(key.indexOf(':') + 1));
    }

    /**
     * The log closes (the stock store closes it before the preserver closes) while chunks wait
     * for their pace: they are deleted at once, before the cursor closes, and nothing reaches
     * the closed log afterwards, neither a paced delete nor a later landing's.
     */
    @Test
    void aCloseOfTheLogDeletesWhatWaitsAtOnceAndNothingAfter() {
        int perChunk = RecordGatedTransactionLog.RELEASE_CHUNK / 2;
        for (long sequence = 1; sequence <= 4 * perChunk; sequence++) {
            end(sequence);
        }
        scheduler.advance(GROUP);
        assertThat(transactionLog.deletes()).hasSize(1);

        CompletableFuture<Void> closed = log.closeAsync();
        scheduler.runReady();

        assertThat(closed).succeedsWithin(Duration.ofSeconds(10));
        assertThat(transactionLog.deletes()).as("what waited, at once").hasSize(4);
        List<String> order = calls.calls();
        assertThat(order.indexOf("log closed")).as("after the last delete")
                .isGreaterThan(order.lastIndexOf("log released " + TC + ":" + 4 * perChunk));
        for (long sequence = 4 * perChunk + 1; sequence <= 5 * perChunk; sequence++) {
            end(sequence);
        }
        scheduler.advance(GROUP.plus(SPREAD));
        assertThat(transactionLog.deletes()).as("none after the close").hasSize(4);
    }

    /** The stock log closes only once the deletes of the close are answered: its cursor is still open for them. */
    @Test
    void aCloseWaitsForItsDeletesBeforeItClosesTheStockLog() {
        int perChunk = RecordGatedTransactionLog.RELEASE_CHUNK / 2;
        for (long sequence = 1; sequence <= 2 * perChunk; sequence++) {
            end(sequence);
        }
        scheduler.advance(GROUP);
        CompletableFuture<Void> heldDelete = new CompletableFuture<>();
        transactionLog.answerNextDeleteWith(heldDelete);

        CompletableFuture<Void> closed = log.closeAsync();
        scheduler.runReady();

        assertThat(transactionLog.deletes()).as("the waiting chunk, asked at once").hasSize(2);
        assertThat(closed).as("its delete unanswered").isNotDone();
        assertThat(calls.calls()).doesNotContain("log closed");
        heldDelete.complete(null);
        scheduler.runReady();
        assertThat(closed).succeedsWithin(Duration.ofSeconds(10));
        assertThat(calls.calls()).contains("log closed");
    }

    /**
     * A delete that throws while the closing log deletes what waits costs only its own
     * entries: the rest are deleted, and the log still closes.
     */
    @Test
    void aDeleteThatThrowsWhileTheLogClosesLeavesOnlyItsEntriesAndTheLogCloses() {
        int perChunk = RecordGatedTransactionLog.RELEASE_CHUNK / 2;
        for (long sequence = 1; sequence <= 4 * perChunk; sequence++) {
            end(sequence);
        }
        scheduler.advance(GROUP);
        transactionLog.throwNextDeletes(1);

        CompletableFuture<Void> closed = log.closeAsync();
        scheduler.runReady();

        assertThat(closed).succeedsWithin(Duration.ofSeconds(10));
        assertThat(calls.calls()).containsOnlyOnce("log release threw").contains("log closed");
        assertThat(transactionLog.deletes()).as("the first chunk, then the last two").hasSize(3);
        assertThat(transactionLog.deletes().get(1)).as("the second chunk's entries stay")
                .doesNotContain(TC + ":" + (perChunk + 1)).contains(TC + ":" + (2 * perChunk + 1));
    }

    /**
     * The coordinator closed first (its writer was fenced), or its thread is shut down: the
     * log still closes when the stock store closes it, and what waited stays for the next
     * owner's replay.
     */
    @Test
    void aLogWhoseCoordinatorClosedFirstStillCloses() {
        int perChunk = RecordGatedTransactionLog.RELEASE_CHUNK / 2;
        for (long sequence = 1; sequence <= 2 * perChunk; sequence++) {
            end(sequence);
        }
        scheduler.advance(GROUP);
        CompletableFuture<Void> coordinatorClosed = preserver.closeAsync();
        scheduler.runReady();
        assertThat(coordinatorClosed).isCompleted();

        CompletableFuture<Void> closed = log.closeAsync();
        scheduler.runReady();

        assertThat(closed).succeedsWithin(Duration.ofSeconds(10));
        assertThat(calls.calls()).contains("log closed");
        assertThat(transactionLog.deletes()).as("the second chunk stays").hasSize(1);

        scheduler.shutdown();
        assertThat(RecordGatedTransactionLog.gate(new TransactionCoordinatorID(TC), transactionLog.newMock(), preserver,
                new TimeoutAborts()).closeAsync()).as("its thread shut down").succeedsWithin(Duration.ofSeconds(10));
    }

    /**
     * The coordinator closes between two chunks (its broker loses it): the chunks not yet
     * deleted stay in the log, and the next owner's replay keeps their outcomes again; none
     * is deleted after the close.
     */
    @Test
    void aCloseBetweenTwoChunksLeavesTheRestInTheLog() {
        int ends = RecordGatedTransactionLog.RELEASE_CHUNK;
        for (long sequence = 1; sequence <= ends; sequence++) {
            end(sequence);
        }
        CompletableFuture<Void>[] closed = new CompletableFuture[1];
        transactionLog.duringNextDelete(() -> closed[0] = preserver.closeAsync());

        scheduler.advance(GROUP);
        scheduler.advance(SPREAD);

        assertThat(closed[0]).isCompleted();
        assertThat(transactionLog.deletes()).as("the first chunk only").hasSize(1);
        assertThat(transactionLog.deletes().get(0)).hasSize(ends / 2).contains(TC + ":1")
                .doesNotContain(TC + ":" + ends);
    }

    /**
     * As stock's, a transaction's entries leave in one delete: a delete that failed would
     * otherwise leave its first entry without its terminal entry, and the next replay would
     * bring a committed transaction back as open.
     */
    @Test
    void aTransactionsEntriesAreNeverSplitBetweenTwoDeletes() {
        // Three entries each: the entries of the end that reaches RELEASE_CHUNK straddle it.
        int straddling = (RecordGatedTransactionLog.RELEASE_CHUNK + 2) / 3;
        assertThat(3 * straddling).as("the chunk ends inside an end").isNotEqualTo(RecordGatedTransactionLog.RELEASE_CHUNK);
        int ends = straddling + 14;
        for (long sequence = 1; sequence <= ends; sequence++) {
            end(sequence, 1);
        }

        scheduler.advance(GROUP.plus(PACE));

        List<Set<String>> deletes = transactionLog.deletes();
        assertThat(deletes).extracting(Set::size).containsExactly(straddling, 14);
        assertThat(deletes.get(0)).contains(TC + ":" + straddling);
        assertThat(deletes.get(1)).doesNotContain(TC + ":" + straddling);
    }

    /** A failed chunk leaves its entries only: the chunks after it are still released. */
    @Test
    void aFailedChunkLeavesItsEntriesAndTheNextChunksAreReleased() {
        int ends = RecordGatedTransactionLog.RELEASE_CHUNK;
        for (long sequence = 1; sequence <= ends; sequence++) {
            end(sequence);
        }
        transactionLog.failNextDeletes(1);

        scheduler.advance(GROUP.plus(PACE));

        assertThat(calls.calls()).containsOnlyOnce("log release failed");
        assertThat(transactionLog.deletes()).hasSize(1);
        assertThat(transactionLog.deletes().get(0)).hasSize(ends / 2)
                .as("the second half of the ends").contains(TC + ":" + ends).doesNotContain(TC + ":1");
    }

    /**
     * A delete that throws (an error, not only an exception) instead of answering is a failed
     * one: the thread's runner logs it (here the test's scheduler hands it to the test), and
     * the chunks after it are still released.
     */
    @Test
    void aDeleteThatThrowsLeavesItsEntriesAndTheNextChunksAreReleased() {
        int ends = RecordGatedTransactionLog.RELEASE_CHUNK;
        for (long sequence = 1; sequence <= ends; sequence++) {
            end(sequence);
        }
        transactionLog.throwNextDeletes(1);

        assertThatThrownBy(() -> scheduler.advance(GROUP)).isInstanceOf(LinkageError.class);
        scheduler.runReady();
        scheduler.advance(PACE);

        assertThat(calls.calls()).containsOnlyOnce("log release threw");
        assertThat(transactionLog.deletes()).hasSize(1);
        assertThat(transactionLog.deletes().get(0)).hasSize(ends / 2).contains(TC + ":" + ends);
    }

    /**
     * The coordinator closes here (its broker loses it) while the landing of a record is
     * handled: the release that landing allowed is queued behind the close and never runs, so
     * the log keeps the entries and the next owner replays them (their outcomes are durable
     * already; keeping them again changes nothing).
     */
    @Test
    void aCloseBetweenARecordsLandingAndItsReleaseKeepsTheEntries() {
        topic.holdWrites();
        end(1);
        end(2);
        scheduler.advance(GROUP);
        assertThat(topic.heldWriteCount()).isEqualTo(1);

        topic.releaseHeldWrites();
        CompletableFuture<Void> closed = preserver.closeAsync();
        scheduler.runReady();

        assertThat(closed).isCompleted();
        assertThat(topic.newestOutcomeOf(new TxnID(TC, 2))).as("the record landed").isEqualTo(Outcome.COMMITTED);
        assertThat(transactionLog.deletes()).as("the entries stay for the next owner's replay").isEmpty();
    }

    /** As stock: a failed delete leaves the entries (the next replay releases them); later ends are still released. */
    @Test
    void aFailedDeleteIsNotRetriedAndLaterEndsAreStillReleased() {
        transactionLog.failNextDeletes(1);
        end(1);
        scheduler.advance(GROUP);
        assertThat(calls.calls()).contains("log release failed");

        end(2);
        scheduler.advance(GROUP);

        assertThat(transactionLog.deletes()).containsExactly(Set.of(TC + ":2"));
    }
}
