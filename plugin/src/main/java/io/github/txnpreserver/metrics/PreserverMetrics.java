package io.github.txnpreserver.metrics;

import io.github.txnpreserver.preserver.PreserverFigures;
import io.github.txnpreserver.preserver.TransactionMetadataPreserver;
import io.github.txnpreserver.preserver.stats.LatencyHistogram;
import io.github.txnpreserver.preserver.stats.PreserverStats;
import io.prometheus.client.Collector;
import io.prometheus.client.CollectorRegistry;
import java.util.ArrayList;
import java.util.Collection;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

/**
 * The preservers' metrics, named {@code pulsar_txn_preserver_*}, labelled by cluster and
 * coordinator like Pulsar's own {@code pulsar_txn_*} coordinator metrics, and served by the
 * broker's {@code /metrics} endpoint through the default Prometheus registry (where the
 * broker's transaction-log metrics live too).
 */
public final class PreserverMetrics extends Collector {

    /** The brokers of this JVM that export, and the one collector that exports them all. */
    private static final Map<Object, PreserverMetrics> BY_BROKER = new LinkedHashMap<>();
    private static Collector exporter;

    private final BrokerLabels broker;
    private final Collection<TransactionMetadataPreserver> preservers;

    PreserverMetrics(BrokerLabels broker, Collection<TransactionMetadataPreserver> preservers) {
        this.broker = broker;
        this.preservers = preservers;
    }

    /**
     * What a broker exports once, beside its coordinators' figures: its cluster, the build, and
     * the settings an operator draws usage against (the bound is shared by all its coordinators).
     *
     * @param memoryBoundBytes {@code transactionMetaPersistMaxMemoryInMB}, in bytes
     * @param retentionSeconds {@code transactionMetaPersistTimeInHour}, in seconds
     */
    public record BrokerLabels(String cluster, String version, String commit, String pulsarVersion,
                               long memoryBoundBytes, double retentionSeconds) {
    }

    /**
     * Exports a broker's live preservers through the default registry, which every broker
     * of the JVM shares: one collector exports the preservers of all of them.
     */
    public static synchronized void register(Object broker, BrokerLabels labels,
                                             Collection<TransactionMetadataPreserver> preservers) {
        BY_BROKER.put(broker, new PreserverMetrics(labels, preservers));
        if (exporter == null) {
            exporter = new Collector() {
                @Override
                public List<MetricFamilySamples> collect() {
                    return collectAll();
                }
            };
            CollectorRegistry.defaultRegistry.register(exporter);
        }
    }

    /** Stops exporting this broker's preservers; the other brokers of the JVM go on. */
    public static synchronized void unregister(Object broker) {
        BY_BROKER.remove(broker);
        if (BY_BROKER.isEmpty() && exporter != null) {
            CollectorRegistry.defaultRegistry.unregister(exporter);
            exporter = null;
        }
    }

    private static synchronized List<MetricFamilySamples> collectAll() {
        Map<String, MetricFamilySamples> merged = new LinkedHashMap<>();
        for (PreserverMetrics metrics : BY_BROKER.values()) {
            for (MetricFamilySamples family : metrics.collect()) {
                merged.merge(family.name, family, (a, b) -> {
                    // The brokers of one JVM may export the same broker-level series (same cluster
                    // and build): once, since a scrape with a repeated series is refused whole.
                    Map<List<String>, MetricFamilySamples.Sample> samples = new LinkedHashMap<>();
                    for (MetricFamilySamples.Sample sample : a.samples) {
                        samples.putIfAbsent(seriesOf(sample), sample);
                    }
                    for (MetricFamilySamples.Sample sample : b.samples) {
                        samples.putIfAbsent(seriesOf(sample), sample);
                    }
                    return new MetricFamilySamples(a.name, a.type, a.help, new ArrayList<>(samples.values()));
                });
            }
        }
        return new ArrayList<>(merged.values());
    }

    private static List<String> seriesOf(MetricFamilySamples.Sample sample) {
        List<String> series = new ArrayList<>();
        series.add(sample.name);
        series.addAll(sample.labelNames);
        series.addAll(sample.labelValues);
        return series;
    }

    @Override
    public List<MetricFamilySamples> collect() {
        Family kept = new Family("pulsar_txn_preserver_kept_outcomes", Type.GAUGE,
                "Outcomes of ended transactions the coordinator keeps");
        Family clients = new Family("pulsar_txn_preserver_clients", Type.GAUGE,
                "Clients (owner roles) with kept outcomes");
        Family answered = new Family("pulsar_txn_preserver_retries_answered_total", Type.COUNTER,
                "Retried commits and aborts answered from a kept outcome, by outcome");
        Family timeoutAborts = new Family("pulsar_txn_preserver_timeout_aborts_total", Type.COUNTER,
                "Transactions the coordinator aborted because they stayed open past their timeout");
        Family commitsAfterTimeout = new Family("pulsar_txn_preserver_commits_after_timeout_abort_total",
                Type.COUNTER, "Commits refused because the coordinator had aborted the transaction on its timeout:"
                        + " its records are lost unless the committer sends them again");
        Family lookups = new Family("pulsar_txn_preserver_kept_lookups_total", Type.COUNTER,
                "Transaction lookups answered from a kept outcome (retries, matching or conflicting, and admin)");
        Family evictions = new Family("pulsar_txn_preserver_evictions_total", Type.COUNTER,
                "Kept outcomes dropped before their time-to-live, by limit (memory: the broker's memory bound;"
                        + " floor: the per-coordinator cap of the per-client floor)");
        Family window = new Family("pulsar_txn_preserver_window_seconds", Type.GAUGE,
                "Age of the oldest outcome kept in the window (per-client floor entries past it not counted)");
        Family memory = new Family("pulsar_txn_preserver_kept_bytes", Type.GAUGE,
                "Heap the coordinator's kept outcomes use");
        Family floor = new Family("pulsar_txn_preserver_floor_outcomes", Type.GAUGE,
                "Outcomes kept by the per-client floor (each client's newest transactionMetaPersistCount)");
        Family expirations = new Family("pulsar_txn_preserver_expirations_total", Type.COUNTER,
                "Kept outcomes dropped by age");
        Family cold = new Family("pulsar_txn_preserver_cold_outcomes", Type.GAUGE,
                "Kept outcomes out of memory, answered by reading their block's state-topic record");
        Family coldReads = new Family("pulsar_txn_preserver_cold_reads_total", Type.COUNTER,
                "Reads of cold blocks' state-topic records: read, remembered (answered from the last ones read),"
                        + " failed (answered 'coordinator not found', retried by the client)");
        Family coldReadLatency = new Family("pulsar_txn_preserver_cold_read_latency_seconds", Type.HISTOGRAM,
                "Time to read a cold block's state-topic record");
        Family coldLost = new Family("pulsar_txn_preserver_cold_lost_total", Type.COUNTER,
                "Cold outcomes lost because their records were gone (the state topic deleted, a record missing"
                        + " or malformed where the cold tier pointed)");
        Family writes = new Family("pulsar_txn_preserver_state_write_latency_seconds", Type.HISTOGRAM,
                "Time to make an outcome durable in the state topic");
        Family writeFailures = new Family("pulsar_txn_preserver_state_write_failures_total", Type.COUNTER,
                "State-topic writes of outcomes that failed (each is retried)");
        Family malformed = new Family("pulsar_txn_preserver_malformed_records_total", Type.COUNTER,
                "State-topic records skipped because they could not be read");
        Family restoreSeconds = new Family("pulsar_txn_preserver_restore_duration_seconds", Type.GAUGE,
                "Duration of the coordinator's last restore from its state topic; while one runs, its time so far");
        Family restoreRecords = new Family("pulsar_txn_preserver_restore_records", Type.GAUGE,
                "State-topic records read by the coordinator's last restore");
        Family redrives = new Family("pulsar_txn_preserver_stuck_redrives_total", Type.COUNTER,
                "Background re-drives of transactions stuck finishing");
        Family writerReplacements = new Family("pulsar_txn_preserver_writer_replacements_total", Type.COUNTER,
                "State-topic writers replaced because they were fenced, closed, wedged, or their topic was"
                        + " terminated or deleted");
        Family refused = new Family("pulsar_txn_preserver_ends_refused_total", Type.COUNTER,
                "Ends refused at once with a retryable error because too many were waiting for the state topic");
        Family waiting = new Family("pulsar_txn_preserver_ends_waiting", Type.GAUGE,
                "Ended transactions waiting for their state-topic record");
        Family waitingLimit = new Family("pulsar_txn_preserver_ends_waiting_limit", Type.GAUGE,
                "Ended transactions waiting for the state topic past which terminal steps are refused");
        Family restoring = new Family("pulsar_txn_preserver_restore_in_progress", Type.GAUGE,
                "1 while the coordinator restores its kept outcomes from its state topic (lookups of ended"
                        + " transactions wait), 0 after");
        Family restoreEnd = new Family("pulsar_txn_preserver_restore_end_time_seconds", Type.GAUGE,
                "When the coordinator's last restore ended, in seconds since the epoch; 0 before it ends");
        Family restoreMalformed = new Family("pulsar_txn_preserver_restore_malformed_records", Type.GAUGE,
                "Malformed state-topic records the coordinator's last restore skipped (each restore skips them"
                        + " again until compaction or a newer record removes them)");
        Family memoryBound = new Family("pulsar_txn_preserver_memory_bound_bytes", Type.GAUGE,
                "Heap the kept outcomes of all this broker's coordinators may use"
                        + " (transactionMetaPersistMaxMemoryInMB)", List.of("cluster"));
        Family retention = new Family("pulsar_txn_preserver_retention_seconds", Type.GAUGE,
                "How long an outcome is kept after its end (transactionMetaPersistTimeInHour)", List.of("cluster"));
        Family build = new Family("pulsar_txn_preserver_build_info", Type.GAUGE,
                "The plugin's version and commit, and the broker's Pulsar version; always 1",
                List.of("cluster", "version", "commit", "pulsar_version"));
        memoryBound.add(List.of(broker.cluster()), broker.memoryBoundBytes());
        retention.add(List.of(broker.cluster()), broker.retentionSeconds());
        build.add(List.of(broker.cluster(), broker.version(), broker.commit(), broker.pulsarVersion()), 1);

        for (TransactionMetadataPreserver preserver : preservers) {
            String coordinator = Long.toString(preserver.coordinatorId());
            List<String> labels = List.of(broker.cluster(), coordinator);
            PreserverStats stats = preserver.stats();
            PreserverFigures outcomes = preserver.figures();
            kept.add(labels, outcomes.kept());
            clients.add(labels, outcomes.clients());
            answered.add(labels, "outcome", "committed", stats.retriesAnsweredCommitted.sum());
            answered.add(labels, "outcome", "aborted", stats.retriesAnsweredAborted.sum());
            timeoutAborts.add(labels, stats.timeoutAborts.sum());
            commitsAfterTimeout.add(labels, stats.commitsAfterTimeoutAbort.sum());
            lookups.add(labels, stats.keptLookups.sum());
            evictions.add(labels, "limit", "memory", outcomes.memoryEvictions());
            evictions.add(labels, "limit", "floor", outcomes.floorEvictions());
            window.add(labels, outcomes.windowMillis() / 1000.0);
            memory.add(labels, outcomes.bytes());
            floor.add(labels, outcomes.floorEntries());
            expirations.add(labels, outcomes.expirations());
            cold.add(labels, outcomes.cold());
            coldReads.add(labels, "result", "read", stats.coldReads.sum());
            coldReads.add(labels, "result", "remembered", stats.coldReadsCached.sum());
            coldReads.add(labels, "result", "failed", stats.coldReadFailures.sum());
            coldReadLatency.addHistogram(labels, stats.coldReadLatency);
            coldLost.add(labels, outcomes.coldLost());
            writes.addHistogram(labels, stats.stateWriteLatency);
            writeFailures.add(labels, stats.recordWriteFailures.sum());
            malformed.add(labels, stats.malformedRecords.sum());
            restoreSeconds.add(labels, preserver.restoreSeconds());
            restoring.add(labels, preserver.restoring() ? 1 : 0);
            restoreEnd.add(labels, stats.restoreEndMillis / 1000.0);
            restoreMalformed.add(labels, stats.restoreMalformedRecords);
            waiting.add(labels, preserver.endsWaiting());
            waitingLimit.add(labels, TransactionMetadataPreserver.MAX_UNDURABLE_ENDS);
            restoreRecords.add(labels, stats.restoredRecords);
            redrives.add(labels, stats.stuckRedrives.sum());
            writerReplacements.add(labels, stats.writerReplacements.sum());
            refused.add(labels, stats.endsRefusedWhileWaiting.sum());
        }
        List<MetricFamilySamples> families = new ArrayList<>();
        for (Family family : List.of(kept, clients, answered, timeoutAborts, commitsAfterTimeout, lookups, evictions, window, memory, floor, expirations,
                cold, coldReads, coldReadLatency, coldLost, writes,
                writeFailures, malformed, restoreSeconds, restoreRecords, redrives,
                writerReplacements, refused, waiting, waitingLimit, restoring, restoreEnd, restoreMalformed, memoryBound,
                retention, build)) {
            families.add(family.build());
        }
        return families;
    }

    /** Builds one metric family's samples. */
    private static final class Family {
        private static final List<String> COORDINATOR_LABELS = List.of("cluster", "coordinator_id");

        private final String name;
        private final Type type;
        private final String help;
        private final List<String> labels;
        private final List<MetricFamilySamples.Sample> samples = new ArrayList<>();

        Family(String name, Type type, String help) {
            this(name, type, help, COORDINATOR_LABELS);
        }

        Family(String name, Type type, String help, List<String> labels) {
            this.name = name;
            this.type = type;
            this.help = help;
            this.labels = labels;
        }

        void add(List<String> labelValues, double value) {
            samples.add(new MetricFamilySamples.Sample(name, labels, labelValues, value));
        }

        void add(List<String> labelValues, String extraLabel, String extraValue, double value) {
            List<String> names = new ArrayList<>(labels);
            names.add(extraLabel);
            List<String> values = new ArrayList<>(labelValues);
            values.add(extraValue);
            samples.add(new MetricFamilySamples.Sample(name, names, values, value));
        }

        void addHistogram(List<String> labelValues, LatencyHistogram histogram) {
            long[] cumulative = histogram.cumulativeCounts();
            for (int i = 0; i < cumulative.length; i++) {
                String bound = Collector.doubleToGoString(LatencyHistogram.upperBoundSeconds(i));
                List<String> names = new ArrayList<>(labels);
                names.add("le");
                List<String> values = new ArrayList<>(labelValues);
                values.add(bound);
                samples.add(new MetricFamilySamples.Sample(name + "_bucket", names, values, cumulative[i]));
            }
            samples.add(new MetricFamilySamples.Sample(name + "_count", labels, labelValues, histogram.count()));
            samples.add(new MetricFamilySamples.Sample(name + "_sum", labels, labelValues, histogram.sumSeconds()));
        }

        MetricFamilySamples build() {
            String familyName = type == Type.COUNTER && name.endsWith("_total")
                    ? name.substring(0, name.length() - "_total".length()) : name;
            return new MetricFamilySamples(familyName, type, help, samples);
        }
    }
}
