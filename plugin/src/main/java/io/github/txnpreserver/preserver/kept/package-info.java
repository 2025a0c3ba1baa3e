/**
 * The kept outcomes: the index of ended transactions' outcomes by block ({@code
 * OutcomeIndex}, with the per-client floor, the cold tier's index, the owner names and the
 * merge of a restore), a block's record format ({@code BlockRecordCodec}), and the outcome
 * types the rest of the plugin reads. Pure data: no I/O, no clock, no thread of its own.
 *
 * <p>Thread rule: confined to the coordinator's thread, with no lock; the only exceptions are
 * the immutable values ({@code Outcome}, {@code KeptOutcome}), the stateless codec, and
 * {@code RestoredBlocks}, which the restore's reading thread fills and then hands over whole.
 */
package io.github.txnpreserver.preserver.kept;
