package io.github.txnpreserver.preserver;

import java.util.concurrent.CompletableFuture;

/**
 * What tests outside this package read of a preserver that the broker never asks for: the
 * product class keeps these package-private, so its public face is the broker's.
 */
public final class PreserverInspection {

    private PreserverInspection() {
    }

    /** The figures as of now, published on the coordinator's thread after what is queued there. */
    public static CompletableFuture<PreserverFigures> currentFigures(TransactionMetadataPreserver preserver) {
        return preserver.currentFigures();
    }

    /** Completes once the restore is done; fails only if the coordinator closes first. */
    public static CompletableFuture<Void> whenRestored(TransactionMetadataPreserver preserver) {
        return preserver.whenRestored();
    }
}
