package io.github.txnpreserver.preserver.kept;

import io.github.txnpreserver.statetopic.RecordPosition;
import it.unimi.dsi.fastutil.longs.Long2ObjectAVLTreeMap;
import it.unimi.dsi.fastutil.longs.Long2ObjectMap;
import it.unimi.dsi.fastutil.longs.LongArrayList;

/**
 * The cold tier: blocks whose outcomes are kept only in the state topic, each as where its
 * newest record is and the span of its end times. A lookup of one of their outcomes reads
 * that record; nothing else of the block is in memory.
 *
 * <h2>Layout</h2>
 * A coordinator's sequences are consecutive and its blocks leave memory roughly in index
 * order, so cold blocks are dense ranges of indexes: they are kept in pages of 256
 * consecutive blocks, each a few primitive columns (position: ledger, entry, batch index and
 * size; first and last end second; outcome count), 34 bytes a block, 0.13 byte an outcome
 * of a full block. A page is freed once its last block leaves.
 *
 * <h2>Order</h2>
 * When the cold tier itself outgrows the memory bound, the lowest index goes first
 * ({@link #lowest}): with consecutive sequences, the oldest.
 *
 * <p>Not thread-safe: confined to its coordinator's thread, as {@link OutcomeIndex} is.
 */
public final class ColdBlocks {

    private static final int PAGE_SHIFT = 8;
    private static final int PAGE_SIZE = 1 << PAGE_SHIFT;
    private static final int PAGE_MASK = PAGE_SIZE - 1;
    /** Columns and headers of a page, and its tree entry. */
    public static final long PAGE_BYTES = PAGE_SIZE * (8L + 8 + 4 + 4 + 4 + 4 + 2) + 7 * 16 + 64 + 12;

    private static final class Page {
        final long[] ledger = new long[PAGE_SIZE];
        final long[] entry = new long[PAGE_SIZE];
        final int[] batchIndex = new int[PAGE_SIZE];
        final int[] batchSize = new int[PAGE_SIZE];
        final int[] minTime = new int[PAGE_SIZE];
        final int[] maxTime = new int[PAGE_SIZE];
        /** Outcomes of each block; 0 where the page has no block. */
        final short[] outcomes = new short[PAGE_SIZE];
        int blocks;
        /**
         * The page's oldest end time, and the oldest of its blocks' newest end times: so that
         * the window and the expiry, asked every second, visit pages, not blocks. A removal
         * that may have taken either makes them stale, recomputed when next asked.
         */
        int oldest = Integer.MAX_VALUE;
        int oldestNewest = Integer.MAX_VALUE;
        boolean stale;

        void refresh() {
            if (!stale) {
                return;
            }
            oldest = Integer.MAX_VALUE;
            oldestNewest = Integer.MAX_VALUE;
            for (int slot = 0; slot < PAGE_SIZE; slot++) {
                if (outcomes[slot] != 0) {
                    oldest = Math.min(oldest, minTime[slot]);
                    oldestNewest = Math.min(oldestNewest, maxTime[slot]);
                }
            }
            stale = false;
        }
    }

    private final Long2ObjectAVLTreeMap<Page> pages = new Long2ObjectAVLTreeMap<>();
    private long blocks;
    private long outcomes;

    /**
     * Keeps a block cold: its record is at {@code position} and holds {@code count} outcomes
     * that ended between the two times (stored seconds). Replaces what was kept of it.
     */
    void put(long index, RecordPosition position, int count, int minTime, int maxTime) {
        if (count < 1 || count > OutcomeBlock.SIZE) {
            throw new IllegalArgumentException("a cold block holds 1 to " + OutcomeBlock.SIZE + " outcomes: " + count);
        }
        remove(index);
        Page page = pages.get(index >>> PAGE_SHIFT);
        if (page == null) {
            page = new Page();
            pages.put(index >>> PAGE_SHIFT, page);
        }
        int slot = (int) (index & PAGE_MASK);
        page.ledger[slot] = position.ledgerId();
        page.entry[slot] = position.entryId();
        page.batchIndex[slot] = position.batchIndex();
        page.batchSize[slot] = position.batchSize();
        page.minTime[slot] = minTime;
        page.maxTime[slot] = maxTime;
        page.outcomes[slot] = (short) count;
        page.oldest = Math.min(page.oldest, minTime);
        page.oldestNewest = Math.min(page.oldestNewest, maxTime);
        page.blocks++;
        blocks++;
        outcomes += count;
    }

    /** A cold block's record is now at {@code position}; nothing happens if the block is not cold. */
    void moved(long index, RecordPosition position) {
        Page page = pages.get(index >>> PAGE_SHIFT);
        int slot = (int) (index & PAGE_MASK);
        if (page != null && page.outcomes[slot] != 0) {
            page.ledger[slot] = position.ledgerId();
            page.entry[slot] = position.entryId();
            page.batchIndex[slot] = position.batchIndex();
            page.batchSize[slot] = position.batchSize();
        }
    }

    boolean contains(long index) {
        Page page = pages.get(index >>> PAGE_SHIFT);
        return page != null && page.outcomes[(int) (index & PAGE_MASK)] != 0;
    }

    /** Where the block's record is, or null if the block is not cold. */
    RecordPosition positionOf(long index) {
        Page page = pages.get(index >>> PAGE_SHIFT);
        int slot = (int) (index & PAGE_MASK);
        if (page == null || page.outcomes[slot] == 0) {
            return null;
        }
        return new RecordPosition(page.ledger[slot], page.entry[slot], page.batchIndex[slot], page.batchSize[slot]);
    }

    /** The block's oldest end time (stored seconds); the block must be cold. */
    int minTime(long index) {
        return page(index).minTime[(int) (index & PAGE_MASK)];
    }

    /** The block's newest end time (stored seconds); the block must be cold. */
    int maxTime(long index) {
        return page(index).maxTime[(int) (index & PAGE_MASK)];
    }

    int outcomes(long index) {
        Page page = pages.get(index >>> PAGE_SHIFT);
        return page == null ? 0 : page.outcomes[(int) (index & PAGE_MASK)];
    }

    /**
     * Forgets a cold block.
     *
     * @return how many outcomes it held, 0 if it was not cold
     */
    int remove(long index) {
        Page page = pages.get(index >>> PAGE_SHIFT);
        int slot = (int) (index & PAGE_MASK);
        if (page == null || page.outcomes[slot] == 0) {
            return 0;
        }
        int count = page.outcomes[slot];
        page.outcomes[slot] = 0;
        if (page.minTime[slot] <= page.oldest || page.maxTime[slot] <= page.oldestNewest) {
            page.stale = true;
        }
        blocks--;
        outcomes -= count;
        if (--page.blocks == 0) {
            pages.remove(index >>> PAGE_SHIFT);
        }
        return count;
    }

    /** The lowest cold block's index above {@code index}, or -1 if none is. */
    long next(long index) {
        long after = index + 1;
        long pageKey = after >>> PAGE_SHIFT;
        Page page = pages.get(pageKey);
        if (page != null) {
            for (int slot = (int) (after & PAGE_MASK); slot < PAGE_SIZE; slot++) {
                if (page.outcomes[slot] != 0) {
                    return (pageKey << PAGE_SHIFT) + slot;
                }
            }
        }
        for (Long2ObjectMap.Entry<Page> entry : pages.tailMap(pageKey + 1).long2ObjectEntrySet()) {
            for (int slot = 0; slot < PAGE_SIZE; slot++) {
                if (entry.getValue().outcomes[slot] != 0) {
                    return (entry.getLongKey() << PAGE_SHIFT) + slot;
                }
            }
        }
        return -1;
    }

    /** The lowest cold block's index, or -1 if none is cold. */
    long lowest() {
        for (Long2ObjectMap.Entry<Page> entry : pages.long2ObjectEntrySet()) {
            Page page = entry.getValue();
            for (int slot = 0; slot < PAGE_SIZE; slot++) {
                if (page.outcomes[slot] != 0) {
                    return (entry.getLongKey() << PAGE_SHIFT) + slot;
                }
            }
        }
        return -1;
    }

    /** The cold blocks whose every outcome ended at or before {@code through} (stored seconds). */
    LongArrayList expiredThrough(int through) {
        LongArrayList expired = new LongArrayList();
        for (Long2ObjectMap.Entry<Page> entry : pages.long2ObjectEntrySet()) {
            Page page = entry.getValue();
            page.refresh();
            if (page.oldestNewest > through) {
                continue;
            }
            for (int slot = 0; slot < PAGE_SIZE; slot++) {
                if (page.outcomes[slot] != 0 && page.maxTime[slot] <= through) {
                    expired.add((entry.getLongKey() << PAGE_SHIFT) + slot);
                }
            }
        }
        return expired;
    }

    /** The oldest end time of any cold outcome (stored seconds), or {@code Integer.MAX_VALUE} if none. */
    int minTime() {
        int min = Integer.MAX_VALUE;
        for (Page page : pages.values()) {
            page.refresh();
            min = Math.min(min, page.oldest);
        }
        return min;
    }

    /** Every cold block's index, lowest first. */
    LongArrayList indexes() {
        LongArrayList indexes = new LongArrayList((int) Math.min(Integer.MAX_VALUE - 8, blocks));
        for (Long2ObjectMap.Entry<Page> entry : pages.long2ObjectEntrySet()) {
            Page page = entry.getValue();
            for (int slot = 0; slot < PAGE_SIZE; slot++) {
                if (page.outcomes[slot] != 0) {
                    indexes.add((entry.getLongKey() << PAGE_SHIFT) + slot);
                }
            }
        }
        return indexes;
    }

    void clear() {
        pages.clear();
        blocks = 0;
        outcomes = 0;
    }

    long blocks() {
        return blocks;
    }

    long outcomes() {
        return outcomes;
    }

    long bytes() {
        return pages.size() * PAGE_BYTES;
    }

    private Page page(long index) {
        Page page = pages.get(index >>> PAGE_SHIFT);
        if (page == null || page.outcomes[(int) (index & PAGE_MASK)] == 0) {
            throw new IllegalArgumentException("block " + index + " is not cold");
        }
        return page;
    }
}
