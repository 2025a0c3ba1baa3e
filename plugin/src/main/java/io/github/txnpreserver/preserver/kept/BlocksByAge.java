package io.github.txnpreserver.preserver.kept;

/**
 * The blocks of an {@link OutcomeIndex} in the order they were last written, least recently
 * first: the order the memory bound drops them in (with sequences allocated consecutively,
 * the oldest outcomes first). An intrusive list through {@link OutcomeBlock#older} and
 * {@link OutcomeBlock#newer}: no node per block. Confined to the coordinator's thread.
 */
final class BlocksByAge {

    private OutcomeBlock oldest;
    private OutcomeBlock newest;

    OutcomeBlock oldest() {
        return oldest;
    }

    OutcomeBlock newest() {
        return newest;
    }

    /** A block was written: it becomes the newest. */
    void touch(OutcomeBlock block) {
        if (block != newest) {
            unlink(block);
            linkNewest(block);
        }
    }

    void linkNewest(OutcomeBlock block) {
        block.older = newest;
        block.newer = null;
        if (newest != null) {
            newest.newer = block;
        } else {
            oldest = block;
        }
        newest = block;
    }

    /** A block read at a restore: older than anything written since the coordinator opened. */
    void linkOldest(OutcomeBlock block) {
        block.newer = oldest;
        block.older = null;
        if (oldest != null) {
            oldest.older = block;
        } else {
            newest = block;
        }
        oldest = block;
    }

    void unlink(OutcomeBlock block) {
        if (block.older != null) {
            block.older.newer = block.newer;
        } else {
            oldest = block.newer;
        }
        if (block.newer != null) {
            block.newer.older = block.older;
        } else {
            newest = block.older;
        }
        block.older = null;
        block.newer = null;
    }
}
