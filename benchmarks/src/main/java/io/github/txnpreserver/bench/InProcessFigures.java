package io.github.txnpreserver.bench;

import io.github.txnpreserver.config.PreserverConfig;
import io.github.txnpreserver.preserver.KeptOutcome;
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
     * Heap retained per kept outcome: 1 M outcomes of 10 000 clients, measured as the used
     * heap after full collections, before and after, divided by the count.
     */
    static long heapBytesPerOutcome(int outcomes, int clients) {
        String[] owners = new String[clients];
        for (int i = 0; i < clients; i++) {
            owners[i] = "client-" + i;
        }
        long before = usedHeapAfterGc();
        KeptOutcomes kept = new KeptOutcomes(TC, outcomes, outcomes, Duration.ofHours(72).toMillis());
        List<KeptOutcomes.SlotMark> vacated = new ArrayList<>();
        for (int i = 0; i < outcomes; i++) {
            kept.admit(new TxnID(TC, i), i % 7 == 0 ? Outcome.ABORTED : Outcome.COMMITTED, i,
                    kept.reserve(owners[i % clients]), vacated);
        }
        long after = usedHeapAfterGc();
        if (kept.size() != outcomes) {
            throw new IllegalStateException("kept " + kept.size());
        }
        return (after - before) / outcomes;
    }

    /**
     * Heap retained by one coordinator's kept outcomes when {@code clients} distinct clients
     * each end one transaction, with the per-coordinator cap: bounded by the cap, not by the
     * number of clients.
     */
    static long heapBytesUnderDistinctClients(int clients, int perCoordinatorCap) {
        long before = usedHeapAfterGc();
        KeptOutcomes kept = new KeptOutcomes(TC, 100, perCoordinatorCap, Duration.ofHours(72).toMillis());
        List<KeptOutcomes.SlotMark> vacated = new ArrayList<>();
        for (int i = 0; i < clients; i++) {
            kept.admit(new TxnID(TC, i), Outcome.COMMITTED, i, kept.reserve("client-" + i), vacated);
            vacated.clear();
        }
        long after = usedHeapAfterGc();
        if (kept.size() != Math.min(clients, perCoordinatorCap)) {
            throw new IllegalStateException("kept " + kept.size());
        }
        return after - before;
    }

    /** Seconds to restore {@code records} kept outcomes from a state topic already in memory. */
    static double restoreSeconds(int records, int clients) {
        List<byte[]> keys = new ArrayList<>(records);
        List<byte[]> values = new ArrayList<>(records);
        long now = System.currentTimeMillis();
        for (int i = 0; i < records; i++) {
            TxnID txnId = new TxnID(TC, i);
            String client = "client-" + (i % clients);
            keys.add(StateRecordCodec.slotKey(client, i / clients).getBytes(StandardCharsets.UTF_8));
            values.add(StateRecordCodec.encode(new KeptOutcome(txnId, Outcome.COMMITTED, client, now)));
        }
        StateTopic topic = new ReplayOnlyTopic(keys, values);
        PreserverConfig config = new PreserverConfig(records, records, Duration.ofHours(72), Duration.ofMinutes(5),
                Duration.ofMinutes(1));
        ScheduledExecutorService executor = Executors.newSingleThreadScheduledExecutor();
        try {
            // One warm-up pass so that the figure is not the JIT's.
            new TransactionMetadataPreserver(TC, config, topic, Clock.systemUTC(), executor).restore().join();
            TransactionMetadataPreserver preserver = new TransactionMetadataPreserver(TC, config, topic,
                    Clock.systemUTC(), executor);
            long start = System.nanoTime();
            preserver.restore().join();
            double seconds = (System.nanoTime() - start) / 1e9;
            if (preserver.keptCount() != records) {
                throw new IllegalStateException("restored " + preserver.keptCount() + " of " + records);
            }
            return seconds;
        } finally {
            executor.shutdownNow();
        }
    }

    /**
     * Bytes the preserver writes to the state topic (keys and values, records and
     * tombstones) per ended transaction, in steady state: one client ends transactions
     * beyond its retention count, so every new outcome evicts an old one (its record
     * overwrites the evicted one's slot).
     */
    static long stateTopicBytesPerTransaction(int persistCount, int measured) {
        CountingTopic topic = new CountingTopic();
        PreserverConfig config = new PreserverConfig(persistCount, Math.max(persistCount, 1), Duration.ofHours(72),
                Duration.ofMinutes(5), Duration.ofMinutes(1));
        ScheduledExecutorService executor = Executors.newSingleThreadScheduledExecutor();
        try {
            TransactionMetadataPreserver preserver = new TransactionMetadataPreserver(TC, config, topic,
                    Clock.systemUTC(), executor);
            long sequence = 0;
            for (int i = 0; i < persistCount; i++) {
                preserver.preserve(new TxnID(TC, sequence++), Outcome.COMMITTED, "flink-job-7").join();
            }
            long before = topic.bytes.get();
            for (int i = 0; i < measured; i++) {
                preserver.preserve(new TxnID(TC, sequence++), Outcome.COMMITTED, "flink-job-7").join();
            }
            return (topic.bytes.get() - before) / measured;
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

        @Override
        public CompletableFuture<Void> write(String key, byte[] value) {
            bytes.addAndGet(key.length() + value.length);
            return CompletableFuture.completedFuture(null);
        }

        @Override
        public CompletableFuture<Void> delete(String key) {
            bytes.addAndGet(key.length());
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
