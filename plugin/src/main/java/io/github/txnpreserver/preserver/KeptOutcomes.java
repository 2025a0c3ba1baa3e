package io.github.txnpreserver.preserver;

import it.unimi.dsi.fastutil.longs.Long2ObjectOpenHashMap;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import org.apache.pulsar.client.api.transaction.TxnID;

/**
 * The outcomes one coordinator keeps in memory, bounded three ways, and the slots they
 * occupy in the state topic.
 *
 * <h2>Policy</h2>
 * <ul>
 *   <li><b>Per client</b>: each owner role (all transactions without an owner share one)
 *       has {@code perClientLimit} slots, used round-robin. A transaction whose end starts
 *       takes the client's next slot ({@link #reserve}) and its record overwrites that
 *       slot's key in the state topic, so the outcome that held the slot, the client's
 *       oldest, is evicted then, from memory as from the topic, with no tombstone. A client
 *       retries only its most recent transactions.</li>
 *   <li><b>Per coordinator</b>: at most {@code totalLimit} outcomes in all, so that many
 *       distinct clients cannot exhaust the heap. The globally oldest outcome goes first:
 *       it is the least likely to be retried.</li>
 *   <li><b>By age</b>: {@link #expire} drops outcomes kept longer than the time-to-live.</li>
 * </ul>
 * The last two leave a slot empty, and the caller deletes its key, guarded by a
 * {@link SlotMark} so that a late tombstone never deletes a newer record.
 *
 * <h2>Why slots</h2>
 * A key per transaction would make every ended transaction cost a record and, once its
 * client is at its limit, a tombstone for the outcome it evicts: two state-topic messages
 * (two produces through the broker, two entries for compaction to read). A key per client
 * slot makes it one, and the bytes per transaction still do not depend on the limit.
 *
 * <p>Slots are taken when a record is written, which is when the end starts, not when it
 * is decided; so a client's slots hold its newest ended <em>and ending</em> transactions.
 * With more transactions of one client ending at once than it has slots, a decided
 * outcome can lose its slot to a later one before it is admitted: it is then not kept
 * ({@link #admit} returns false), as the per-key design would have evicted it at once.
 *
 * <h2>Why this shape</h2>
 * Outcomes are admitted in end order, so one doubly-linked list in admission order holds
 * them all, oldest first, for the coordinator limit and expiry; each client's slots are an
 * array grown up to its limit. Every operation is O(1). Entries are intrusive nodes indexed
 * by a primitive-keyed map (the coordinator id is the same for all its transactions) to
 * keep the heap cost per outcome small; the owner string is held once per client.
 *
 * <p>Thread-safe: lookups come from Netty and Jetty threads, reservations and admissions
 * from store and client threads. Every operation is short and O(1), so one monitor costs
 * less than the bookkeeping of a concurrent structure would.
 */
public final class KeptOutcomes {

    private static final int INITIAL_SLOTS = 4;

    private final long coordinatorId;
    private final int perClientLimit;
    private final int totalLimit;
    private final long timeToLiveMillis;

    private final Long2ObjectOpenHashMap<Node> bySequence = new Long2ObjectOpenHashMap<>();
    private final Map<String, Bucket> byOwner = new HashMap<>();
    private Bucket withoutOwner;
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
        // A client can never keep more than the coordinator does: more slots would only
        // grow its slot array, never what it keeps.
        this.perClientLimit = Math.min(perClientLimit, totalLimit);
        this.totalLimit = totalLimit;
        this.timeToLiveMillis = timeToLiveMillis;
    }

    /** A slot taken for a record being written; {@link #admit} checks it is still the record's. */
    public record Reservation(Object bucket, String owner, int slot, long writeIndex) {
    }

    /**
     * A client's slot as of one moment (emptied by the coordinator limit or by expiry, or
     * written at restore), so that a write to its key can be skipped once a later record
     * has taken the slot ({@link #isTakenSince}).
     */
    public record SlotMark(Object bucket, String owner, int slot, long writesAtMark) {
    }

    /**
     * Takes the client's next slot for a record about to be written, evicting the outcome
     * that held it: the record overwrites it in the state topic.
     */
    public synchronized Reservation reserve(String owner) {
        Bucket bucket = bucketOf(owner);
        long writeIndex = bucket.writes++;
        int slot = (int) (writeIndex % perClientLimit);
        Node occupant = bucket.at(slot);
        if (occupant != null) {
            remove(occupant, false);
            perClientEvictions++;
        }
        return new Reservation(bucket, owner, slot, writeIndex);
    }

    /**
     * Whether a reservation's slot is still the record's: no later record of the client has
     * taken it. A rewrite of the same transaction reuses such a slot, so that it overwrites
     * the record it supersedes.
     */
    public synchronized boolean isCurrent(Reservation reservation) {
        Bucket current = bucketFor(reservation.owner());
        return current == reservation.bucket() && current.writes <= reservation.writeIndex() + perClientLimit;
    }

    /**
     * Keeps a decided outcome whose record is durable in its reserved slot.
     *
     * <p>A transaction already kept in another slot (a stale record restored for a
     * transaction that then ended) leaves that slot, which the caller deletes: a
     * transaction is kept in one slot, its newest.
     *
     * @param vacated receives the slots emptied: the transaction's earlier slot and those
     *     the coordinator limit evicts
     * @return false if the slot was taken by a later record before this admission (the
     *     record is overwritten, the outcome not kept)
     */
    public synchronized boolean admit(TxnID txnId, Outcome outcome, long endTimeMillis, Reservation reservation,
                                      List<SlotMark> vacated) {
        checkCoordinator(txnId);
        Node existing = bySequence.get(txnId.getLeastSigBits());
        if (existing != null) {
            vacated.add(vacate(existing, false));
        }
        Bucket bucket = homeOf(reservation);
        if (bucket == null) {
            perClientEvictions++;
            Bucket current = bucketFor(reservation.owner());
            if (current != null && current.size == 0) {
                forget(current);
            }
            return false;
        }
        place(new Node(txnId.getLeastSigBits(), outcome == Outcome.COMMITTED, endTimeMillis, bucket,
                reservation.slot()));
        enforceTotalLimit(vacated);
        return true;
    }

    /**
     * Keeps an outcome restored from the state topic in the given slot, as the newest so
     * far; the client's next record goes to the slot after it. Restored outcomes must come
     * in log order.
     *
     * @param vacated receives the slots emptied by the coordinator limit, and the slot of
     *     an earlier restored record of the same transaction
     */
    public synchronized void restore(TxnID txnId, Outcome outcome, String owner, long endTimeMillis, int slot,
                                     List<SlotMark> vacated) {
        checkCoordinator(txnId);
        if (slot < 0 || slot >= perClientLimit) {
            throw new IllegalArgumentException("slot " + slot + " outside 0.." + (perClientLimit - 1));
        }
        Node earlier = bySequence.get(txnId.getLeastSigBits());
        if (earlier != null) {
            vacated.add(vacate(earlier, true));
        }
        Bucket bucket = bucketOf(owner);
        Node occupant = bucket.at(slot);
        if (occupant != null) {
            remove(occupant, false);
        }
        bucket.writes = slot + 1;
        place(new Node(txnId.getLeastSigBits(), outcome == Outcome.COMMITTED, endTimeMillis, bucket, slot));
        enforceTotalLimit(vacated);
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
     * @return the slots emptied
     */
    public synchronized List<SlotMark> expire(long nowMillis) {
        List<SlotMark> vacated = new ArrayList<>(0);
        while (oldest != null && isExpired(oldest.endTimeMillis, nowMillis)) {
            vacated.add(vacate(oldest, true));
            expirations++;
        }
        return vacated;
    }

    /** A client's slot as of now: for the writes restore decides, sent once it is done. */
    public synchronized SlotMark markOf(String owner, int slot) {
        Bucket bucket = bucketFor(owner);
        return new SlotMark(bucket, owner, slot, bucket == null ? 0 : bucket.writes);
    }

    /**
     * Whether a new record took the slot after the mark: its key then holds that record,
     * and a late write to it (a retried tombstone) must not be sent.
     */
    public synchronized boolean isTakenSince(SlotMark mark) {
        Bucket current = bucketFor(mark.owner());
        if (current == null || mark.slot() >= perClientLimit) {
            return false;
        }
        if (current != mark.bucket()) {
            // Started (again) from slot 0 since.
            return current.writes > mark.slot();
        }
        long writes = mark.writesAtMark();
        long nextUse = writes + Math.floorMod(mark.slot() - writes, perClientLimit);
        return nextUse < current.writes;
    }

    /** Whether an outcome that ended at {@code endTimeMillis} is past its time-to-live. */
    public boolean isExpired(long endTimeMillis, long nowMillis) {
        return nowMillis - endTimeMillis >= timeToLiveMillis;
    }

    /** Slots per client: the per-client limit, at most the per-coordinator one. */
    public int perClientLimit() {
        return perClientLimit;
    }

    public synchronized int size() {
        return bySequence.size();
    }

    /** Number of clients (owner roles, plus the shared no-owner bucket) with kept outcomes. */
    public synchronized int clients() {
        int clients = 0;
        for (Bucket bucket : byOwner.values()) {
            if (bucket.size > 0) {
                clients++;
            }
        }
        return clients + (withoutOwner != null && withoutOwner.size > 0 ? 1 : 0);
    }

    /** Outcomes dropped because their client's slot was taken by a newer record, since creation. */
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
        withoutOwner = null;
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

    /**
     * The client whose slot a reservation still holds, or null if a later record took it.
     * A client forgotten since (all its outcomes gone) started again from slot 0; the
     * reservation's slot is then still its own until the new round reaches it.
     */
    private Bucket homeOf(Reservation reservation) {
        Bucket current = bucketFor(reservation.owner());
        if (current == reservation.bucket()) {
            return current.writes > reservation.writeIndex() + perClientLimit ? null : current;
        }
        if (current != null && current.writes > reservation.slot()) {
            return null;
        }
        return bucketOf(reservation.owner());
    }

    private Bucket bucketFor(String owner) {
        return owner == null ? withoutOwner : byOwner.get(owner);
    }

    private Bucket bucketOf(String owner) {
        if (owner == null) {
            if (withoutOwner == null) {
                withoutOwner = new Bucket(null);
            }
            return withoutOwner;
        }
        return byOwner.computeIfAbsent(owner, Bucket::new);
    }

    private void forget(Bucket bucket) {
        if (bucket.owner == null) {
            withoutOwner = null;
        } else {
            byOwner.remove(bucket.owner);
        }
    }

    private void place(Node node) {
        bySequence.put(node.sequence, node);
        linkNewest(node);
        node.bucket.put(node);
    }

    private void enforceTotalLimit(List<SlotMark> vacated) {
        while (bySequence.size() > totalLimit) {
            vacated.add(vacate(oldest, true));
            coordinatorEvictions++;
        }
    }

    private SlotMark vacate(Node node, boolean forgetEmptyClient) {
        Bucket bucket = node.bucket;
        SlotMark vacated = new SlotMark(bucket, bucket.owner, node.slot, bucket.writes);
        remove(node, forgetEmptyClient);
        return vacated;
    }

    /** Removes a node; its client is forgotten once empty unless a reservation is being made for it. */
    private void remove(Node node, boolean forgetEmptyClient) {
        Bucket bucket = node.bucket;
        bucket.clear(node);
        if (forgetEmptyClient && bucket.size == 0) {
            forget(bucket);
        }
        unlink(node);
        bySequence.remove(node.sequence);
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
    }

    private static final class Node {
        final long sequence;
        final long endTimeMillis;
        final Bucket bucket;
        final int slot;
        boolean committed;
        Node older;
        Node newer;

        Node(long sequence, boolean committed, long endTimeMillis, Bucket bucket, int slot) {
            this.sequence = sequence;
            this.committed = committed;
            this.endTimeMillis = endTimeMillis;
            this.bucket = bucket;
            this.slot = slot;
        }
    }

    /** One client's slots; the array grows with use up to the per-client limit. */
    private final class Bucket {
        final String owner;
        Node[] slots = new Node[Math.min(INITIAL_SLOTS, perClientLimit)];
        int size;
        /** Records written for this client so far; the next one goes to slot {@code writes % limit}. */
        long writes;

        Bucket(String owner) {
            this.owner = owner;
        }

        Node at(int slot) {
            return slot < slots.length ? slots[slot] : null;
        }

        void put(Node node) {
            if (node.slot >= slots.length) {
                slots = Arrays.copyOf(slots, Math.min(perClientLimit, Math.max(node.slot + 1, slots.length * 2)));
            }
            if (slots[node.slot] == null) {
                size++;
            }
            slots[node.slot] = node;
        }

        void clear(Node node) {
            if (node.slot < slots.length && slots[node.slot] == node) {
                slots[node.slot] = null;
                size--;
            }
        }
    }
}
