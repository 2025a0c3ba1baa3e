package io.github.txnpreserver.bench;

import io.github.txnpreserver.config.PreserverConfig;
import io.github.txnpreserver.preserver.OutcomeMemoryBudget;
import io.github.txnpreserver.preserver.TransactionMetadataPreserver;
import io.github.txnpreserver.preserver.kept.Outcome;
import io.github.txnpreserver.statetopic.StateTopic;
import io.github.txnpreserver.testing.InMemoryStateTopic;
import io.github.txnpreserver.testing.ManualScheduler;
import java.time.Duration;
import java.util.concurrent.CompletableFuture;
import java.util.function.IntFunction;
import java.util.function.IntToLongFunction;
import org.apache.pulsar.client.api.transaction.TxnID;

/**
 * Figures of the plugin's own code, measured in this JVM without a broker.
 *
 * <p>Since the preserver was rebuilt around one owner thread per coordinator, its kept
 * outcomes ({@code OutcomeIndex}, formerly the public {@code KeptOutcomes}) are reached only
 * through {@link TransactionMetadataPreserver}: every figure drives a preserver on the
 * plugin's test {@link ManualScheduler}, running the tasks handed over on the calling thread,
 * so that {@code decide} and {@code ended} have done their work when they return; delayed
 * tasks run, and time moves, only when a figure says. The heap figures are therefore the
 * whole preserver's (its outcome index, durability queue and writer: the structures
 * {@code KeptOutcomes} held, after its dirty blocks were drained; the topic keeps nothing),
 * and the restore reads records a preserver wrote into the tests' in-memory topic.
 */
final class InProcessFigures {

    private static final long TC = 0;
    /** No memory bound: every outcome of a figure stays kept. */
    private static final long UNBOUNDED = 1L << 40;

    private InProcessFigures() {
    }

    /**
     * Heap retained per kept outcome: {@code outcomes} consecutive transactions ended in
     * order, their owners round-robin over {@code owners} roles (0: no owner, as with
     * authentication off), measured as the used heap after full collections, before and
     * after, divided by the count. The floor (100 per client) and the preserver's own
     * bookkeeping are included; every block was written to a topic that only counts.
     */
    static double heapBytesPerOutcome(int outcomes, int owners) {
        String[] names = new String[Math.max(owners, 1)];
        for (int i = 0; i < names.length; i++) {
            names[i] = owners == 0 ? null : "role-" + i;
        }
        // A small fill first: what its first use loads (classes, logging, a restore thread's
        // leftovers) is not retained per outcome.
        fill(10_000, i -> Outcome.COMMITTED, i -> names[i % names.length], i -> 0,
                InMemoryStateTopic.keepingNothing()).preserver.closeAsync().join();
        long before = usedHeapAfterGc();
        Filled filled = fill(outcomes, i -> i % 7 == 0 ? Outcome.ABORTED : Outcome.COMMITTED,
                i -> names[i % names.length], i -> i / 3, InMemoryStateTopic.keepingNothing());
        long after = usedHeapAfterGc();
        requireKept(filled, outcomes);
        double perOutcome = (after - before) / (double) outcomes;
        filled.preserver.closeAsync().join();
        return perOutcome;
    }

    /**
     * Heap retained per outcome out of memory's hot part (the cold tier). Two fills, of
     * {@code fewer} and of {@code more} consecutive outcomes (each block written, positions
     * given, as it filled), each under a memory bound that leaves the same room beside its
     * cold tier and its floor: the hot part is the same in both, and so is the floor, so
     * the difference of the used heap after full collections over the difference of the
     * counts is what each cold outcome costs. Every outcome must stay kept.
     *
     * @return {measured, as the memory bound counts it}
     */
    static double[] coldHeapBytesPerOutcome(int fewer, int more, int owners) {
        String[] names = new String[Math.max(owners, 1)];
        for (int i = 0; i < names.length; i++) {
            names[i] = owners == 0 ? null : "role-" + i;
        }
        fill(10_000, i -> Outcome.COMMITTED, i -> names[i % names.length], i -> 0,
                InMemoryStateTopic.keepingNothing(), coldConfig(10_000, owners)).preserver.closeAsync().join();
        long[] heap = new long[2];
        long[] accounted = new long[2];
        int[] counts = {fewer, more};
        for (int run = 0; run < 2; run++) {
            long before = usedHeapAfterGc();
            Filled filled = fill(counts[run], i -> i % 7 == 0 ? Outcome.ABORTED : Outcome.COMMITTED,
                    i -> names[i % names.length], i -> i / 3, InMemoryStateTopic.keepingNothing(),
                    coldConfig(counts[run], owners));
            heap[run] = usedHeapAfterGc() - before;
            accounted[run] = filled.preserver.keptBytes();
            requireKept(filled, counts[run]);
            if (filled.preserver.figures().memoryEvictions() != 0 || filled.preserver.figures().cold() == 0) {
                throw new IllegalStateException("the cold figure's bound is wrong: " + filled.preserver.figures());
            }
            filled.preserver.closeAsync().join();
        }
        return new double[] {(heap[1] - heap[0]) / (double) (more - fewer),
                (accounted[1] - accounted[0]) / (double) (more - fewer)};
    }

    /**
     * A bound of the cold tier's pages for {@code outcomes} (8 880 bytes per 65 536
     * outcomes), the floor of {@code owners} clients (100 entries each, 64 bytes counted per
     * entry, generously) and 1 MiB of room for the hot part.
     */
    private static PreserverConfig coldConfig(int outcomes, int owners) {
        long pages = (outcomes + 65_535L) / 65_536;
        long bound = pages * 8_880 + Math.max(owners, 1) * 100L * 64 + (1L << 20);
        return new PreserverConfig(100, 100_000, Duration.ofHours(72), Duration.ofMinutes(5), Duration.ofMinutes(1),
                bound);
    }

    /**
     * Bytes per kept outcome of the state topic's compacted view (each block's newest record,
     * key and value; Pulsar's per-message metadata not counted): {@code outcomes} consecutive
     * outcomes, end times spread as in the heap figures, owners round-robin over
     * {@code owners} roles (0: none).
     */
    static double stateTopicViewBytesPerOutcome(int outcomes, int owners) {
        InMemoryStateTopic topic = new InMemoryStateTopic();
        Filled filled = fill(outcomes, i -> i % 7 == 0 ? Outcome.ABORTED : Outcome.COMMITTED,
                i -> owners == 0 ? null : "role-" + (i % owners), i -> i / 3, topic);
        requireKept(filled, outcomes);
        filled.preserver.closeAsync().join();
        return topic.viewBytes() / (double) outcomes;
    }

    /** The plugin's own estimate of the same heap, as the memory bound counts it. */
    static double accountedBytesPerOutcome(int outcomes, int owners) {
        Filled filled = fill(outcomes, i -> Outcome.COMMITTED, i -> owners == 0 ? null : "role-" + (i % owners),
                i -> i / 3, InMemoryStateTopic.keepingNothing());
        requireKept(filled, outcomes);
        double perOutcome = filled.preserver.keptBytes() / (double) outcomes;
        filled.preserver.closeAsync().join();
        return perOutcome;
    }

    /**
     * Seconds to restore {@code outcomes} kept outcomes (256 per block record) from a state
     * topic in memory: the records a preserver wrote for them, read on the restore's own
     * thread and merged in one task of the preserver's (which the scheduler
     * runs on the thread that hands it over: the restore's, here).
     */
    static double restoreSeconds(int outcomes, int owners) {
        InMemoryStateTopic topic = new InMemoryStateTopic();
        Filled source = fill(outcomes, i -> i % 7 == 0 ? Outcome.ABORTED : Outcome.COMMITTED,
                i -> owners == 0 ? null : "role-" + (i % owners), i -> 0, topic);
        requireKept(source, outcomes);
        source.preserver.closeAsync().join();
        // A restore reads the compacted view: each block's newest record, once.
        topic.compact();
        // One warm-up pass so that the figure is not the JIT's.
        TransactionMetadataPreserver warmUp = newPreserver(unboundedConfig(), topic);
        warmUp.startRestore(() -> Long.MAX_VALUE).join();
        warmUp.closeAsync().join();
        topic.compact();
        TransactionMetadataPreserver preserver = newPreserver(unboundedConfig(), topic);
        long start = System.nanoTime();
        preserver.startRestore(() -> Long.MAX_VALUE).join();
        double seconds = (System.nanoTime() - start) / 1e9;
        // Published by the preserver at the restore's end.
        if (preserver.figures().kept() != outcomes) {
            throw new IllegalStateException("restored " + preserver.figures().kept() + " of " + outcomes);
        }
        preserver.closeAsync().join();
        return seconds;
    }

    /**
     * State-topic cost per ended transaction when one client ends its transactions one after
     * another (no two in one flush, the worst case for grouping): {bytes, messages}. Each
     * outcome is made durable (its block written) before the next transaction ends.
     */
    static double[] stateTopicCostPerTransaction(int persistCount, int measured) {
        InMemoryStateTopic topic = InMemoryStateTopic.keepingNothing();
        PreserverConfig config = new PreserverConfig(persistCount, Math.max(persistCount, 1), Duration.ofHours(72),
                Duration.ofMinutes(5), Duration.ofMinutes(1));
        ManualScheduler scheduler = direct();
        TransactionMetadataPreserver preserver = new TransactionMetadataPreserver(TC, config, topic, scheduler,
                new OutcomeMemoryBudget(config.maxMemoryBytes()), Duration.ZERO);
        preserver.startRestore(() -> Long.MAX_VALUE).join();
        long sequence = 0;
        for (int i = 0; i < 1000; i++) {
            preserveOne(preserver, scheduler, sequence++);
        }
        long bytesBefore = topic.writtenBytes();
        long messagesBefore = topic.writtenMessages();
        for (int i = 0; i < measured; i++) {
            preserveOne(preserver, scheduler, sequence++);
        }
        double[] cost = {(topic.writtenBytes() - bytesBefore) / (double) measured,
                (topic.writtenMessages() - messagesBefore) / (double) measured};
        preserver.closeAsync().join();
        return cost;
    }

    /**
     * Ends one transaction as the store's terminal step does (decide, then the terminal
     * entry) and writes its block at once (the group interval is zero).
     */
    private static void preserveOne(TransactionMetadataPreserver preserver, ManualScheduler scheduler,
                                    long sequence) {
        TxnID txn = new TxnID(TC, sequence);
        preserver.decide(txn, Outcome.COMMITTED, "flink-job-7").join();
        preserver.ended(txn);
        CompletableFuture<Void> durable = new CompletableFuture<>();
        preserver.afterOutcomeDurable(sequence, () -> durable.complete(null));
        scheduler.runReady();
        if (!durable.isDone()) {
            throw new IllegalStateException("transaction " + sequence + " not durable after its flush");
        }
        durable.join();
    }

    private static PreserverConfig unboundedConfig() {
        return new PreserverConfig(100, 100_000, Duration.ofHours(72), Duration.ofMinutes(5), Duration.ofMinutes(1),
                UNBOUNDED);
    }

    private static TransactionMetadataPreserver newPreserver(PreserverConfig config, StateTopic topic) {
        return new TransactionMetadataPreserver(TC, config, topic, direct(),
                new OutcomeMemoryBudget(config.maxMemoryBytes()), Duration.ZERO);
    }

    private record Filled(TransactionMetadataPreserver preserver, ManualScheduler scheduler) {
    }

    /** Starts at the wall clock's time, as end times in the real coordinator do. */
    private static ManualScheduler direct() {
        return new ManualScheduler(System.currentTimeMillis()).runningHandedOverAtOnce();
    }

    /**
     * A preserver (after a restore of an empty topic) in which {@code outcomes} consecutive
     * transactions were decided and ended, the i-th at the start time plus
     * {@code endOffsetMillis(i)}, their blocks written to {@code topic} as they filled.
     */
    private static Filled fill(int outcomes, IntFunction<Outcome> outcome, IntFunction<String> owner,
                               IntToLongFunction endOffsetMillis,
                               StateTopic topic) {
        return fill(outcomes, outcome, owner, endOffsetMillis, topic, unboundedConfig());
    }

    private static Filled fill(int outcomes, IntFunction<Outcome> outcome, IntFunction<String> owner,
                               IntToLongFunction endOffsetMillis, StateTopic topic, PreserverConfig config) {
        ManualScheduler scheduler = direct();
        TransactionMetadataPreserver preserver = new TransactionMetadataPreserver(TC, config, topic,
                scheduler, new OutcomeMemoryBudget(config.maxMemoryBytes()), Duration.ZERO);
        preserver.startRestore(() -> Long.MAX_VALUE).join();
        long now = scheduler.millis();
        for (int i = 0; i < outcomes; i++) {
            TxnID txnId = new TxnID(TC, i);
            // keepFromLog is decide and ended at a given end time, as a replayed terminal entry.
            preserver.keepFromLog(txnId, outcome.apply(i), owner.apply(i), now + endOffsetMillis.applyAsLong(i));
            if ((i & 255) == 255) {
                scheduler.runReady();
            }
        }
        scheduler.runReady();
        // The preserver publishes its figures every second: one second on.
        preserver.start();
        scheduler.advance(Duration.ofSeconds(1));
        return new Filled(preserver, scheduler);
    }

    private static void requireKept(Filled filled, int outcomes) {
        if (filled.preserver.figures().kept() != outcomes) {
            throw new IllegalStateException("kept " + filled.preserver.figures().kept() + " of " + outcomes);
        }
    }

    private static long usedHeapAfterGc() {
        Runtime runtime = Runtime.getRuntime();
        for (int i = 0; i < 4; i++) {
            System.gc();
            try {
                Thread.sleep(100);
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
            }
        }
        return runtime.totalMemory() - runtime.freeMemory();
    }
}
