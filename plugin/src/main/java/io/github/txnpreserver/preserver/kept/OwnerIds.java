package io.github.txnpreserver.preserver.kept;

import it.unimi.dsi.fastutil.ints.IntArrayList;
import it.unimi.dsi.fastutil.objects.Object2IntOpenHashMap;
import java.util.Arrays;

/**
 * The owner roles of one coordinator's kept outcomes, each held once and named by a small
 * id (0 is "no owner"), counted by how many kept outcomes name it, so that a role whose
 * outcomes are all gone is forgotten and its id reused. Owner strings are kept exactly: the
 * broker's ownership check compares them.
 *
 * <p>Confined to its coordinator's thread, as {@link OutcomeIndex} is.
 */
public final class OwnerIds {

    static final int NO_OWNER = 0;
    /** The highest id: two bits of a packed outcome's owner word are its outcome ({@link ClientFloor#pack}). */
    static final int MAX_ID = (1 << 30) - 1;
    /** Map entry, array slots and the string's own header; the characters are counted apart. */
    private static final int BYTES_PER_OWNER = 64;

    private final Object2IntOpenHashMap<String> ids = new Object2IntOpenHashMap<>();
    private String[] names = new String[16];
    private int[] references = new int[16];
    private int nextId = 1;
    private final IntArrayList freeIds = new IntArrayList();
    private long bytes;

    public OwnerIds() {
        ids.defaultReturnValue(-1);
    }

    /** The id of an owner, created (unreferenced) if new. */
    int idOf(String owner) {
        if (owner == null) {
            return NO_OWNER;
        }
        int id = ids.getInt(owner);
        if (id >= 0) {
            return id;
        }
        if (freeIds.isEmpty() && nextId > MAX_ID) {
            throw new IllegalStateException("more than " + MAX_ID + " owner roles have kept outcomes");
        }
        id = freeIds.isEmpty() ? nextId++ : freeIds.popInt();
        if (id >= names.length) {
            names = Arrays.copyOf(names, names.length * 2);
            references = Arrays.copyOf(references, references.length * 2);
        }
        names[id] = owner;
        references[id] = 0;
        ids.put(owner, id);
        bytes += BYTES_PER_OWNER + 2L * owner.length();
        return id;
    }

    public String nameOf(int id) {
        return id == NO_OWNER ? null : names[id];
    }

    void retain(int id) {
        if (id != NO_OWNER) {
            references[id]++;
        }
    }

    void release(int id) {
        if (id != NO_OWNER && --references[id] == 0) {
            String owner = names[id];
            names[id] = null;
            ids.removeInt(owner);
            freeIds.add(id);
            bytes -= BYTES_PER_OWNER + 2L * owner.length();
        }
    }

    /** The highest id handed out so far. */
    int highestId() {
        return nextId - 1;
    }

    /** Owners named by at least one kept outcome. */
    int size() {
        return ids.size();
    }

    long bytes() {
        return bytes + 8L * names.length;
    }
}
