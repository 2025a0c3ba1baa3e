/**
 * The state topic's writer: group-committed flushes of changed blocks, the writer's lifecycle
 * ({@code WriterState}: replacement after a lost producer, release when fenced or moved) and
 * the pacing of the topic's compaction.
 *
 * <p>Thread rule: confined to the coordinator's thread; the topic's completions come back onto
 * it through {@code thread.CoordinatorThread}, never run on the client's threads.
 */
package io.github.txnpreserver.preserver.writer;
