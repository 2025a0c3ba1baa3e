/**
 * A coordinator's counters and latency histograms, which tests and the metrics exporter read.
 *
 * <p>Thread rule: written on the coordinator's thread or on callers' threads, read from any:
 * every field is a {@code LongAdder}, a histogram of them, or volatile.
 */
package io.github.txnpreserver.preserver.stats;
