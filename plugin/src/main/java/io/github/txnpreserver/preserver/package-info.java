/**
 * A coordinator's preserver: its one public face, {@link
 * io.github.txnpreserver.preserver.TransactionMetadataPreserver}, and the parts that answer
 * from what it keeps (lookups, reads of cold records, its share of the broker's memory bound).
 * Its parts by role are the packages below: the kept outcomes ({@code kept}), what waits for
 * the state topic ({@code durability}), the writer ({@code writer}), the restore
 * ({@code restore}), the coordinator's thread ({@code thread}) and the figures ({@code stats}).
 *
 * <p>Thread rule: the preserver's public methods may be called from any thread; each hands its
 * work to the coordinator's thread ({@code thread.CoordinatorThread}) and answers through a
 * future, or decides on the caller's thread from values the coordinator's thread publishes.
 * {@code LookUps}, {@code ColdReads} and {@code MemoryShare}'s drops run on the coordinator's
 * thread only; {@code MemoryShare}'s published figures and {@code OutcomeMemoryBudget}, shared
 * by the broker's coordinators, are read from any thread.
 */
package io.github.txnpreserver.preserver;
