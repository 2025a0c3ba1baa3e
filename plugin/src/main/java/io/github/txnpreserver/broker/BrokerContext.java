package io.github.txnpreserver.broker;

import io.github.txnpreserver.cleanup.StuckTransactionRedriver;
import io.github.txnpreserver.config.PreserverConfig;
import io.github.txnpreserver.preserver.OutcomeMemoryBudget;
import io.github.txnpreserver.preserver.TransactionMetadataPreserver;
import io.github.txnpreserver.statetopic.StateTopic;
import java.time.Clock;
import java.util.Map;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ConcurrentHashMap;

/**
 * What the coordinator stores need from the broker, handed over by the broker interceptor.
 *
 * <p>The broker builds the metadata-store provider by class name, with no access to the
 * broker; an interceptor is the only plugin the broker initializes with itself, and it runs
 * before the transaction service is built. Both load from {@code lib/} (the interceptor
 * archive's class loader is parent-first), so this static hand-over is seen by both; it is
 * keyed by broker, since one JVM may run several.
 *
 * @param config the validated settings
 * @param stateTopics opens one coordinator's state topic
 * @param clock wall clock for end times and expiry
 * @param endRequester ends a transaction through the broker's end-transaction chain
 * @param releaser closes a coordinator this broker no longer owns
 * @param preservers the preservers of the coordinators this broker serves, by coordinator id
 * @param budget the memory bound shared by those coordinators
 */
public record BrokerContext(PreserverConfig config, StateTopicOpener stateTopics, Clock clock,
                            StuckTransactionRedriver.EndRequester endRequester, CoordinatorReleaser releaser,
                            Map<Long, TransactionMetadataPreserver> preservers, OutcomeMemoryBudget budget) {

    public BrokerContext(PreserverConfig config, StateTopicOpener stateTopics, Clock clock,
                         StuckTransactionRedriver.EndRequester endRequester, CoordinatorReleaser releaser) {
        this(config, stateTopics, clock, endRequester, releaser, new ConcurrentHashMap<>(),
                new OutcomeMemoryBudget(config.maxMemoryBytes()));
    }

    /** Closes a coordinator here, as the broker does when its log is fenced by a new owner. */
    @FunctionalInterface
    public interface CoordinatorReleaser {
        /**
         * Closes {@code store} if it is still the broker's store of the coordinator (one
         * that a newer store replaced is closed already, or being closed).
         */
        CompletableFuture<Void> release(long coordinatorId, Object store);
    }

    /** Opens the state topic of a coordinator as its only writer. */
    @FunctionalInterface
    public interface StateTopicOpener {
        CompletableFuture<StateTopic> open(long coordinatorId);
    }

    /**
     * The contexts of the brokers of this JVM (Pulsar's own tests and embedded brokers run
     * several), each under the broker's client timer: the one object the broker hands both
     * to the interceptor (through the broker) and to every {@code openStore} call.
     */
    private static final Map<Object, BrokerContext> INSTALLED = new ConcurrentHashMap<>();

    public static void install(Object broker, BrokerContext context) {
        INSTALLED.put(broker, context);
    }

    /** Removes this broker's context only: the other brokers of the JVM keep theirs. */
    public static void clear(Object broker) {
        INSTALLED.remove(broker);
    }

    /** The context of the broker that passes this timer to {@code openStore}, or null if its interceptor did not run. */
    public static BrokerContext of(Object broker) {
        return broker == null ? null : INSTALLED.get(broker);
    }
}
