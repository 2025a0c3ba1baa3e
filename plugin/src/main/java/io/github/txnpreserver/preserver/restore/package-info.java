/**
 * The restore: when a coordinator opens, its state topic is read to the end, validated, and
 * merged into the kept outcomes once, whole; a read that fails is read again with backoff.
 *
 * <p>Thread rule: the restore's steps run on the coordinator's thread; the read itself blocks,
 * so it runs on a thread of its own and hands what it read back whole.
 */
package io.github.txnpreserver.preserver.restore;
