package io.github.txnpreserver.statetopic;

import java.util.List;

/**
 * The state-topic value of one block of 256 consecutive sequence ids: every outcome the
 * coordinator keeps in it, written whole each time one of them changes, under the key
 * {@code c<blockIndex>}, so that the newest value of the key is the block's state and
 * compaction keeps one value per block.
 *
 * @param kept bitmap of the sequences (offset within the block) with an outcome, 4 words
 * @param committed bitmap of those that committed (the others aborted), 4 words
 * @param endSeconds end time of each kept sequence in offset order, seconds since 2020-01-01 UTC
 * @param owners the owner roles named in the block
 * @param ownerRefs per kept sequence in offset order: 0 for no owner, i for {@code owners[i-1]};
 *     null when all share {@code uniformOwnerRef}
 */
public record ChunkRecord(long coordinatorId, long blockIndex, long[] kept, long[] committed, int[] endSeconds,
                          List<String> owners, int[] ownerRefs, int uniformOwnerRef) {

    public int size() {
        return endSeconds.length;
    }
}
