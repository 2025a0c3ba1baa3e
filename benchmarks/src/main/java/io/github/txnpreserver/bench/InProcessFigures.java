package io.github.txnpreserver.bench;

import io.github.txnpreserver.config.PreserverConfig;
import io.github.txnpreserver.preserver.KeptOutcomes;
import io.github.txnpreserver.preserver.Outcome;
import io.github.txnpreserver.preserver.TransactionMetadataPreserver;
import io.github.txnpreserver.statetopic.StateRecordCodec;
import io.github.txnpreserver.statetopic.StateTopic;
import java.nio.charset.StandardCharsets;
import java.time.Clock;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.Executor;
import java.util.concurrent.Executors;
import java.util.concurrent.ScheduledExecutorService;
import java.util.concurrent.atomic.AtomicLong;
import org.apache.pulsar.client.api.transaction.TxnID;

/** Figures of the plugin's own code, measured in this JVM without a broker. */
final class InProcessFigures {

    private static final long TC = 0;

    private InProcessFigures() {
    }

    /**
     * Heap retained per kept outcome: {@code outcomes} consecutive transactions ended in
     * order, their owners round-robin over {@code owners} roles (0: no owner, as with
     * authentication off), measured as the used heap after full collections, before and
     * after, divided by the count. The floor (100 per client) is included.
     */
    static double heapBytesPerOutcome(int outcomes, int owners) {
        String[] names = new String[Math.max(owners, 1)];
        for (int i = 0; i < names.length; i++) {
            names[i] = owners == 0 ? null : "role-" + i;
        }
        long before = usedHeapAfterGc();
        KeptOutcomes kept = new KeptOutcomes(TC, 100, 100_000, Duration.ofHours(72).toMillis());
        long now = System.currentTimeMillis();
        for (int i = 0; i < outcomes; i++) {
            TxnID txnId = new TxnID(TC, i);
            kept.decide(txnId, i % 7 == 0 ? Outcome.ABORTED : Outcome.COMMITTED, names[i % names.length],
                    now + i / 3);
            kept.ended(txnId);
            if ((i & 255) == 255) {
                kept.drainDirty();
            }
        }
        kept.drainDirty();
        long after = usedHeapAfterGc();
        if (kept.size() != outcomes) {
            throw new IllegalStateException("kept " + kept.size());
        }
        return (after - before) / (double) outcomes;
    }

    /** The plugin's own estimate of the same heap, as the memory bound counts it. */
    static double accountedBytesPerOutcome(int outcomes, int owners) {
        KeptOutcomes kept = new KeptOutcomes(TC, 100, 100_000, Duration.ofHours(72).toMillis());
        long now = System.currentTimeMillis();
        for (int i = 0; i < outcomes; i++) {
            TxnID txnId = new TxnID(TC, i);
            kept.decide(txnId, Outcome.COMMITTED, owners == 0 ? null : "role-" + (i % owners), now + i / 3);
            kept.ended(txnId);
            if ((i & 255) == 255) {
                kept.drainDirty();
            }
        }
        kept.drainDirty();
        return kept.bytes() / (double) outcomes;
    }

    /** Seconds to restore {@code outcomes} kept outcomes (256 per block record) from a state topic in memory. */
    static double restoreSeconds(int outcomes, int owners) {
        List<byte[]> keys = new ArrayList<>();
        List<byte[]> values = new ArrayList<>();
        long now = System.currentTimeMillis();
        KeptOutcomes source = new KeptOutcomes(TC, 100, 100_000, Duration.ofHours(72).toMillis());
        for (int i = 0; i < outcomes; i++) {
            TxnID txnId = new TxnID(TC, i);
            source.decide(txnId, i % 7 == 0 ? Outcome.ABORTED : Outcome.COMMITTED,
                    owners == 0 ? null : "role-" + (i % owners), now);
            source.ended(txnId);
            if ((i & 255) == 255 || i == outcomes - 1) {
                for (KeptOutcomes.BlockWrite block : source.drainDirty()) {
                    keys.add(StateRecordCodec.blockKey(block.blockIndex()).getBytes(StandardCharsets.UTF_8));
                    values.add(StateRecordCodec.encodeBlock(block.recordOrNull()));
                }
                source.clear();
            }
        }
        StateTopic topic = new ReplayOnlyTopic(keys, values);
        PreserverConfig config = new PreserverConfig(100, 100_000, Duration.ofHours(72), Duration.ofMinutes(5),
                Duration.ofMinutes(1), 1L << 40);
        ScheduledExecutorService executor = Executors.newSingleThreadScheduledExecutor();
        try {
            // One warm-up pass so that the figure is not the JIT's.
            TransactionMetadataPreserver warmUp = new TransactionMetadataPreserver(TC, config, topic,
                    Clock.systemUTC(), executor);
            warmUp.restore().join();
            warmUp.keptOutcomes().clear();
            TransactionMetadataPreserver preserver = new TransactionMetadataPreserver(TC, config, topic,
                    Clock.systemUTC(), executor);
            long start = System.nanoTime();
            preserver.restore().join();
            double seconds = (System.nanoTime() - start) / 1e9;
            if (preserver.keptCount() != outcomes) {
                throw new IllegalStateException("restored " + preserver.keptCount() + " of " + outcomes);
            }
            return seconds;
        } finally {
            executor.shutdownNow();
        }
    }

    /**
     * State-topic cost per ended transaction when one client ends its transactions one after
     * another (no two in one flush, the worst case for grouping): {bytes, messages}.
     */
    static double[] stateTopicCostPerTransaction(int persistCount, int measured) {
        CountingTopic topic = new CountingTopic();
        PreserverConfig config = new PreserverConfig(persistCount, Math.max(persistCount, 1), Duration.ofHours(72),
                Duration.ofMinutes(5), Duration.ofMinutes(1));
        ScheduledExecutorService executor = Executors.newSingleThreadScheduledExecutor();
        try {
            TransactionMetadataPreserver preserver = new TransactionMetadataPreserver(TC, config, topic,
                    Clock.systemUTC(), executor);
            preserver.restore().join();
            long sequence = 0;
            for (int i = 0; i < 1000; i++) {
                preserver.preserve(new TxnID(TC, sequence++), Outcome.COMMITTED, "flink-job-7").join();
            }
            long bytesBefore = topic.bytes.get();
            long messagesBefore = topic.messages.get();
            for (int i = 0; i < measured; i++) {
                preserver.preserve(new TxnID(TC, sequence++), Outcome.COMMITTED, "flink-job-7").join();
            }
            return new double[] {(topic.bytes.get() - bytesBefore) / (double) measured,
                    (topic.messages.get() - messagesBefore) / (double) measured};
        } finally {
            executor.shutdownNow();
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

    /** A state topic that only replays what it was given. */
    private static final class ReplayOnlyTopic implements StateTopic {
        private final List<byte[]> keys;
        private final List<byte[]> values;

        ReplayOnlyTopic(List<byte[]> keys, List<byte[]> values) {
            this.keys = keys;
            this.values = values;
        }

        @Override
        public CompletableFuture<Void> write(String key, byte[] value) {
            return CompletableFuture.completedFuture(null);
        }

        @Override
        public CompletableFuture<Void> delete(String key) {
            return CompletableFuture.completedFuture(null);
        }

        @Override
        public CompletableFuture<Void> readToEnd(Visitor visitor, Executor reader) {
            return CompletableFuture.runAsync(() -> {
                for (int i = 0; i < keys.size(); i++) {
                    visitor.accept(new String(keys.get(i), StandardCharsets.UTF_8), values.get(i));
                }
            }, reader);
        }

        @Override
        public CompletableFuture<Void> closeAsync() {
            return CompletableFuture.completedFuture(null);
        }
    }

    /** A state topic that counts the bytes written to it. */
    private static final class CountingTopic implements StateTopic {
        final AtomicLong bytes = new AtomicLong();
        final AtomicLong messages = new AtomicLong();

        @Override
        public CompletableFuture<Void> write(String key, byte[] value) {
            bytes.addAndGet(key.length() + value.length);
            messages.incrementAndGet();
            return CompletableFuture.completedFuture(null);
        }

        @Override
        public CompletableFuture<Void> delete(String key) {
            bytes.addAndGet(key.length());
            messages.incrementAndGet();
            return CompletableFuture.completedFuture(null);
        }

        @Override
        public CompletableFuture<Void> readToEnd(Visitor visitor, Executor reader) {
            return CompletableFuture.completedFuture(null);
        }

        @Override
        public CompletableFuture<Void> closeAsync() {
            return CompletableFuture.completedFuture(null);
        }
    }
}
