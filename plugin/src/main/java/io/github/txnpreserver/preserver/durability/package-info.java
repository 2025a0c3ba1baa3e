/**
 * What waits for the state topic: the blocks to write, with their offsets and backoff, and
 * the ended transactions whose log entries may be released only once their outcome's record
 * has landed ({@code DurabilityQueue}, {@code LogHold}).
 *
 * <p>Thread rule: confined to the coordinator's thread, but for the count of ends waiting,
 * which it publishes (volatile) for the bound on new ends checked on callers' threads.
 */
package io.github.txnpreserver.preserver.durability;
