package io.github.txnpreserver.preserver;

import it.unimi.dsi.fastutil.longs.Long2ObjectOpenHashMap;
import it.unimi.dsi.fastutil.longs.LongArrayList;
import java.util.HashMap;
import java.util.Map;
import org.apache.pulsar.client.api.transaction.TxnID;

/**
 * The outcomes one coordinator keeps in memory, bounded three ways.
 *
 * <h2>Policy</h2>
 * <ul>
 *   <li><b>Per client</b>: at most {@code perClientLimit} outcomes per owner role (all
 *       transactions without an owner share one bucket). A client retries only its most
 *       recent transactions, so its oldest outcome is the one to drop.</li>
 *   <li><b>Per coordinator</b>: at most {@code totalLimit} outcomes in all, so that many
 *       distinct clients cannot exhaust the heap. The globally oldest outcome goes first:
 *       it is the least likely to be retried.</li>
 *   <li><b>By age</b>: {@link #expire} drops outcomes kept longer than the time-to-live.</li>
 * </ul>
 *
 * <h2>Why this shape</h2>
 * Outcomes are admitted in end order, so one doubly-linked list in admission order holds
 * them all, oldest first, and each client's outcomes are a sub-sequence of it. Hence the
 * globally oldest outcome is also the oldest of its client, and every removal the policy
 * makes is the head of its client's list: a singly-linked list per client is enough, and
 * every operation is O(1). Entries are intrusive nodes indexed by a primitive-keyed map
 * (the coordinator id is the same for all its transactions) to keep the heap cost per
 * outcome small; the owner string is held once per client, not per outcome.
 *
 * <p>Thread-safe: lookups come from Netty and Jetty threads, admissions from
 * managed-ledger and client threads. Every operation is short and O(1), so one monitor
 * costs less than the bookkeeping of a concurrent structure would.
 */
public final class KeptOutcomes {

    private static final long[] NONE = new long[0];

    private final long coordinatorId;
    private final int perClientLimit;
    private final int totalLimit;
    private final long timeToLiveMillis;

    private final Long2ObjectOpenHashMap<Node> bySequence = new Long2ObjectOpenHashMap<>();
    private final Map<String, Bucket> byOwner = new HashMap<>();
    private final Bucket withoutOwner = new Bucket(null);
    private Node oldest;
    private Node newest;
    private long perClientEvictions;
    private long coordinatorEvictions;
    private long expirations;

    public KeptOutcomes(long coordinatorId, int perClientLimit, int totalLimit, long timeToLiveMillis) {
        if (perClientLimit < 1 || totalLimit < 1 || timeToLiveMillis < 1) {
            throw new IllegalArgumentException("limits must be positive");
        }
        this.coordinatorId = coordinatorId;
        this.perClientLimit = perClientLimit;
        this.totalLimit = totalLimit;
        this.timeToLiveMillis = timeToLiveMillis;
    }

    /**
     * Keeps an outcome, evicting what the limits no longer allow.
     *
     * @return the sequence ids (TxnID least significant bits) evicted to make room; the
     *     caller deletes them from the state topic. Admitting a transaction already kept
     *     evicts nothing; it corrects the outcome if it differs (a stale speculative record
     *     restored for a transaction that then ended the other way).
     */
    public synchronized long[] admit(TxnID txnId, Outcome outcome, String owner, long endTimeMillis) {
        checkCoordinator(txnId);
        long sequence = txnId.getLeastSigBits();
        Node existing = bySequence.get(sequence);
        if (existing != null) {
            existing.committed = outcome == Outcome.COMMITTED;
            return NONE;
        }
        Bucket bucket = bucketOf(owner);
        Node node = new Node(sequence, outcome == Outcome.COMMITTED, endTimeMillis, bucket);
        bySequence.put(sequence, node);
        linkNewest(node);
        bucket.append(node);
        LongArrayList evicted = new LongArrayList(0);
        while (bucket.size > perClientLimit) {
            evicted.add(removeHeadOf(bucket));
            perClientEvictions++;
        }
        while (bySequence.size() > totalLimit) {
            evicted.add(removeHeadOf(oldest.bucket));
            coordinatorEvictions++;
        }
        return evicted.isEmpty() ? NONE : evicted.toLongArray();
    }

    /** The kept outcome of a transaction, or null. */
    public synchronized KeptOutcome get(TxnID txnId) {
        if (txnId.getMostSigBits() != coordinatorId) {
            return null;
        }
        Node node = bySequence.get(txnId.getLeastSigBits());
        if (node == null) {
            return null;
        }
        return new KeptOutcome(txnId, node.committed ? Outcome.COMMITTED : Outcome.ABORTED,
                node.bucket.owner, node.endTimeMillis);
    }

    /**
     * Drops outcomes older than the time-to-live.
     *
     * <p>Walks from the oldest and stops at the first outcome still young enough. End times
     * restored from another broker may be slightly out of order with local ones; such an
     * outcome then expires at the next check after its neighbours, never early.
     *
     * @return the sequence ids dropped
     */
    public synchronized long[] expire(long nowMillis) {
        LongArrayList expired = new LongArrayList(0);
        while (oldest != null && isExpired(oldest.endTimeMillis, nowMillis)) {
            expired.add(removeHeadOf(oldest.bucket));
            expirations++;
        }
        return expired.isEmpty() ? NONE : expired.toLongArray();
    }

    /** Whether an outcome that ended at {@code endTimeMillis} is past its time-to-live. */
    public boolean isExpired(long endTimeMillis, long nowMillis) {
        return nowMillis - endTimeMillis >= timeToLiveMillis;
    }

    public synchronized int size() {
        return bySequence.size();
    }

    /** Number of clients (owner roles, plus the shared no-owner bucket) with kept outcomes. */
    public synchronized int clients() {
        return byOwner.size() + (withoutOwner.size > 0 ? 1 : 0);
    }

    /** Outcomes dropped because their client had reached its limit, since creation. */
    public synchronized long perClientEvictions() {
        return perClientEvictions;
    }

    /** Outcomes dropped because the coordinator had reached its total limit, since creation. */
    public synchronized long coordinatorEvictions() {
        return coordinatorEvictions;
    }

    /** Outcomes dropped by age, since creation. */
    public synchronized long expirations() {
        return expirations;
    }

    public synchronized void clear() {
        bySequence.clear();
        byOwner.clear();
        withoutOwner.head = null;
        withoutOwner.tail = null;
        withoutOwner.size = 0;
        oldest = null;
        newest = null;
    }

    public long coordinatorId() {
        return coordinatorId;
    }

    private void checkCoordinator(TxnID txnId) {
        if (txnId.getMostSigBits() != coordinatorId) {
            throw new IllegalArgumentException("Transaction " + txnId + " does not belong to coordinator "
                    + coordinatorId);
        }
    }

    private Bucket bucketOf(String owner) {
        if (owner == null) {
            return withoutOwner;
        }
        return byOwner.computeIfAbsent(owner, Bucket::new);
    }

    private long removeHeadOf(Bucket bucket) {
        Node node = bucket.head;
        bucket.head = node.nextInBucket;
        if (bucket.head == null) {
            bucket.tail = null;
        }
        bucket.size--;
        if (bucket.size == 0 && bucket != withoutOwner) {
            byOwner.remove(bucket.owner);
        }
        unlink(node);
        bySequence.remove(node.sequence);
        return node.sequence;
    }

    private void linkNewest(Node node) {
        node.older = newest;
        if (newest != null) {
            newest.newer = node;
        } else {
            oldest = node;
        }
        newest = node;
    }

    private void unlink(Node node) {
        if (node.older != null) {
            node.older.newer = node.newer;
        } else {
            oldest = node.newer;
        }
        if (node.newer != null) {
            node.newer.older = node.older;
        } else {
            newest = node.older;
        }
        node.older = null;
        node.newer = null;
        node.nextInBucket = null;
    }

    private static final class Node {
        final long sequence;
        final long endTimeMillis;
        final Bucket bucket;
        boolean committed;
        Node older;
        Node newer;
        Node nextInBucket;

        Node(long sequence, boolean committed, long endTimeMillis, Bucket bucket) {
            this.sequence = sequence;
            this.committed = committed;
            this.endTimeMillis = endTimeMillis;
            this.bucket = bucket;
        }
    }

    private static final class Bucket {
        final String owner;
        Node head;
        Node tail;
        int size;

        Bucket(String owner) {
            this.owner = owner;
        }

        void append(Node node) {
            if (tail == null) {
                head = node;
            } else {
                tail.nextInBucket = node;
            }
            tail = node;
            size++;
        }
    }
}
