package io.github.txnpreserver.preserver;

import io.github.txnpreserver.preserver.kept.OutcomeIndex;

/**
 * What one coordinator keeps, as last published by its thread (at most a second old): read
 * by the metrics exporter from any thread.
 *
 * @param kept outcomes kept, in blocks and floor entries
 * @param windowMillis age of the oldest outcome in the window, 0 when empty
 * @param cold of {@code kept}, the outcomes kept only in the state topic (the cold tier)
 * @param coldLost cold outcomes lost because their records were gone (the topic created again,
 *     a record missing or malformed where the cold tier pointed)
 */
public record PreserverFigures(long kept, long bytes, int floorEntries, int clients, long windowMillis,
                               long memoryEvictions, long floorEvictions, long expirations, long cold,
                               long coldLost) {

    static final PreserverFigures NONE = new PreserverFigures(0, 0, 0, 0, 0, 0, 0, 0, 0, 0);

    /** On the coordinator's thread. */
    static PreserverFigures of(OutcomeIndex index, long nowMillis) {
        return new PreserverFigures(index.size(), index.bytes(), index.floorSize(), index.clients(),
                index.windowMillis(nowMillis), index.memoryEvictions(), index.floorEvictions(), index.expirations(),
                index.coldOutcomes(), index.coldLost());
    }
}
