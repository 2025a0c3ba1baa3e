package io.github.txnpreserver.preserver.kept;

import java.util.LinkedHashMap;
import java.util.LinkedHashSet;
import java.util.Map;
import java.util.Set;

/** State-topic records as a coordinator writes them, for tests outside this package. */
public final class BlockRecords {

    private BlockRecords() {
    }

    /**
     * The records (key to value) an earlier incarnation of coordinator {@code coordinatorId}
     * wrote for these sequences, committed by {@code owner} at {@code endMillis}.
     */
    public static Map<String, byte[]> committed(long coordinatorId, String owner, long endMillis, long... sequences) {
        Set<Long> changed = new LinkedHashSet<>();
        OutcomeIndex earlier = new OutcomeIndex(10, 1000, Long.MAX_VALUE / 4, changed::add);
        for (long sequence : sequences) {
            earlier.decide(sequence, Outcome.COMMITTED, owner, endMillis);
            earlier.ended(sequence);
        }
        Map<String, byte[]> records = new LinkedHashMap<>();
        for (long index : changed) {
            records.put(BlockRecordCodec.key(index),
                    BlockRecordCodec.encode(coordinatorId, earlier.recordOf(index), earlier::ownerName));
        }
        return records;
    }
}
