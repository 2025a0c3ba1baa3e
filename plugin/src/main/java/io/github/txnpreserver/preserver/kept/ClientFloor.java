package io.github.txnpreserver.preserver.kept;

import it.unimi.dsi.fastutil.ints.Int2ObjectOpenHashMap;
import it.unimi.dsi.fastutil.longs.Long2LongOpenHashMap;
import java.util.Iterator;
import java.util.LinkedHashMap;
import java.util.Map;

/**
 * PIP-255's per-client count as a floor under the time window: each client's (owner role's)
 * newest {@code perClient} decided outcomes, kept even once the memory bound has pushed the
 * window past them, so that a busy role cannot push a quiet role's recent outcomes out.
 *
 * <p>Each client has a ring of its newest sequences, in end order; every entry is also
 * indexed by sequence with its outcome packed in a long (end time, owner id, outcome), so
 * a lookup needs no block. At most {@code cap} entries in all: past it, the client that
 * ended a transaction least recently loses its oldest first.
 *
 * <p>Confined to its coordinator's thread, as {@link OutcomeIndex} is.
 */
public final class ClientFloor {

    /** Ring slot, index entry (at fastutil's load factor), rounded up. */
    static final int BYTES_PER_ENTRY = 40;
    private static final int BYTES_PER_CLIENT = 96;

    private final int perClient;
    private final int cap;
    private final Long2LongOpenHashMap entries = new Long2LongOpenHashMap();
    /** Least recently ending client first. */
    private final LinkedHashMap<Integer, Ring> rings = new LinkedHashMap<>(16, 0.75f, true);
    /** The same rings, looked up without counting as the owner's activity. */
    private final Int2ObjectOpenHashMap<Ring> ringOf = new Int2ObjectOpenHashMap<>();
    private long capped;

    /** Receives an entry that left the floor. */
    @FunctionalInterface
    interface Removal {
        void removed(long sequence, long packed);
    }

    ClientFloor(int perClient, int cap) {
        this.perClient = perClient;
        this.cap = cap;
        entries.defaultReturnValue(0);
    }

    /** Owner ids stay below 2^30 (each names a role string the coordinator holds): two bits are left for the outcome. */
    static long pack(int time, int owner, Outcome outcome) {
        return ((long) time << 32) | ((long) owner << 2) | outcome.ordinal();
    }

    public static int timeOf(long packed) {
        return (int) (packed >> 32);
    }

    public static int ownerOf(long packed) {
        return (int) ((packed & 0xFFFF_FFFFL) >>> 2);
    }

    public static Outcome outcomeOf(long packed) {
        return OUTCOMES[(int) (packed & 3)];
    }

    private static final Outcome[] OUTCOMES = Outcome.values();

    boolean contains(long sequence) {
        return entries.containsKey(sequence);
    }

    /** The packed outcome of a sequence, or {@code none} if it is not in the floor. */
    long get(long sequence, long none) {
        return entries.containsKey(sequence) ? entries.get(sequence) : none;
    }

    /** What {@link #add} returns when the sequence had no entry. */
    static final int ADDED = -1;

    /**
     * Adds a client's newest decided outcome. A sequence that already has an entry (a
     * restored record of a transaction that was still live, or one naming another owner)
     * takes the new outcome and owner, and moves to the new owner's ring. Sequences it pushes out (the
     * client's oldest past {@code perClient}, and what the cap takes) go to {@code removed}.
     *
     * @return {@link #ADDED}, or the owner id of the entry it replaced (the caller holds one
     *     reference per entry)
     */
    int add(long sequence, int owner, int time, Outcome outcome, Removal removed) {
        int replacedOwner = ADDED;
        if (entries.containsKey(sequence)) {
            replacedOwner = ownerOf(entries.get(sequence));
            if (replacedOwner == owner) {
                entries.put(sequence, pack(time, owner, outcome));
                return replacedOwner;
            }
            entries.remove(sequence);
            Ring former = ringOf.get(replacedOwner);
            if (former != null) {
                former.remove(sequence);
                if (former.isEmpty()) {
                    rings.remove(replacedOwner);
                    ringOf.remove(replacedOwner);
                }
            }
        }
        Ring ring = rings.get(owner);
        if (ring == null) {
            ring = new Ring();
            rings.put(owner, ring);
            ringOf.put(owner, ring);
        }
        entries.put(sequence, pack(time, owner, outcome));
        if (ring.size == perClient) {
            long pushedOut = ring.popOldest();
            if (ownedBy(pushedOut, owner)) {
                removed.removed(pushedOut, entries.remove(pushedOut));
            }
        }
        ring.push(sequence, perClient);
        while (entries.size() > cap) {
            Iterator<Map.Entry<Integer, Ring>> leastRecent = rings.entrySet().iterator();
            if (!leastRecent.hasNext()) {
                break;
            }
            Map.Entry<Integer, Ring> client = leastRecent.next();
            long oldest = client.getValue().popOldest();
            if (client.getValue().isEmpty()) {
                leastRecent.remove();
                ringOf.remove((int) client.getKey());
            }
            if (ownedBy(oldest, client.getKey())) {
                removed.removed(oldest, entries.remove(oldest));
                capped++;
            }
        }
        return replacedOwner;
    }

    /** Whether a ring's slot still names a live entry of that ring's owner. */
    private boolean ownedBy(long sequence, int owner) {
        return entries.containsKey(sequence) && ownerOf(entries.get(sequence)) == owner;
    }

    /** Drops entries whose end time is at or before {@code expiredThrough}; their sequences go to {@code removed}. */
    void expire(int expiredThrough, Removal removed) {
        for (Iterator<Map.Entry<Integer, Ring>> clients = rings.entrySet().iterator(); clients.hasNext(); ) {
            Map.Entry<Integer, Ring> client = clients.next();
            Ring ring = client.getValue();
            while (!ring.isEmpty()) {
                long oldest = ring.peekOldest();
                boolean live = ownedBy(oldest, client.getKey());
                if (live && timeOf(entries.get(oldest)) > expiredThrough) {
                    break;
                }
                ring.popOldest();
                if (live) {
                    removed.removed(oldest, entries.remove(oldest));
                }
            }
            if (ring.isEmpty()) {
                clients.remove();
                ringOf.remove((int) client.getKey());
            }
        }
    }

    int size() {
        return entries.size();
    }

    /** Entries dropped by the cap, since creation. */
    long capped() {
        return capped;
    }

    /** Visits every entry. */
    void forEach(Removal visitor) {
        entries.long2LongEntrySet().fastForEach(entry -> visitor.removed(entry.getLongKey(), entry.getLongValue()));
    }

    int clients() {
        return rings.size();
    }

    long bytes() {
        return (long) BYTES_PER_ENTRY * entries.size() + (long) BYTES_PER_CLIENT * rings.size();
    }

    void clear() {
        entries.clear();
        rings.clear();
        ringOf.clear();
    }

    /** Puts the entries of a block's 256 sequences into it. */
    void fill(OutcomeBlock block) {
        long first = block.firstSequence();
        for (int offset = 0; offset < OutcomeBlock.SIZE; offset++) {
            long packed = get(first + offset, -1);
            if (packed != -1) {
                block.set(offset, outcomeOf(packed), timeOf(packed), ownerOf(packed));
            }
        }
    }

    /** Entries among a block's 256 sequences, whether or not the block still has them. */
    int entriesOfBlock(long blockIndex) {
        int count = 0;
        long first = blockIndex << OutcomeBlock.SHIFT;
        for (int offset = 0; offset < OutcomeBlock.SIZE; offset++) {
            if (contains(first + offset)) {
                count++;
            }
        }
        return count;
    }

    /** The block's outcomes that no entry keeps: what dropping the block loses. */
    int outside(OutcomeBlock block) {
        int outside = 0;
        long first = block.firstSequence();
        for (int offset = block.nextKept(0); offset >= 0; offset = block.nextKeptAfter(offset)) {
            if (!contains(first + offset)) {
                outside++;
            }
        }
        return outside;
    }

    /** One client's newest sequences, oldest first; grown with use up to the per-client count. */
    private static final class Ring {
        private long[] sequences = new long[4];
        private int head;
        private int size;

        /** Appends; the caller has made room below {@code limit}. */
        void push(long sequence, int limit) {
            if (size == sequences.length) {
                long[] grown = new long[Math.max(1, Math.min(limit, sequences.length * 2))];
                for (int i = 0; i < size; i++) {
                    grown[i] = sequences[(head + i) % sequences.length];
                }
                sequences = grown;
                head = 0;
            }
            sequences[(head + size) % sequences.length] = sequence;
            size++;
        }

        long peekOldest() {
            return sequences[head];
        }

        /** Removes a sequence wherever it is (another owner took it over: rare, so linear). */
        void remove(long sequence) {
            int kept = 0;
            for (int i = 0; i < size; i++) {
                long at = sequences[(head + i) % sequences.length];
                if (at != sequence) {
                    sequences[(head + kept) % sequences.length] = at;
                    kept++;
                }
            }
            size = kept;
        }

        /** The oldest sequence, removed; the ring is not empty. */
        long popOldest() {
            long oldest = sequences[head];
            head = (head + 1) % sequences.length;
            size--;
            return oldest;
        }

        boolean isEmpty() {
            return size == 0;
        }
    }
}
