package io.github.txnpreserver.broker;

import io.github.txnpreserver.cleanup.StuckTransactionRedriver;
import io.github.txnpreserver.config.PreserverConfig;
import io.github.txnpreserver.preserver.OutcomeMemoryBudget;
import io.github.txnpreserver.preserver.TransactionMetadataPreserver;
import io.github.txnpreserver.statetopic.StateTopic;
import java.time.Clock;
import java.time.Duration;
import java.util.Map;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.TimeUnit;

/**
 * What the coordinator stores need from the broker, handed over by the plugin's protocol
 * handler ({@link PreserverProtocolHandler}).
 *
 * <p>The broker builds the metadata-store provider by class name, with no access to the
 * broker; the protocol handler is started with the broker. Both load from {@code lib/} (the
 * handler archive's class loader is parent-first), so this static hand-over is seen by
 * both; it is keyed by broker, since one JVM may run several. The handler starts once the
 * broker is ready, and the broker may open a coordinator a moment before: an opening waits
 * for the hand-over, bounded ({@link #await}).
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
     * to the protocol handler (through the broker) and to every {@code openStore} call.
     */
    private static final Map<Object, CompletableFuture<BrokerContext>> INSTALLED = new ConcurrentHashMap<>();

    public static void install(Object broker, BrokerContext context) {
        CompletableFuture<BrokerContext> slot = INSTALLED.compute(broker, (key, awaited) ->
                awaited == null || awaited.isDone() ? new CompletableFuture<>() : awaited);
        // Outside the map's lock: the openings waiting for it go on elsewhere (see await).
        slot.complete(context);
    }

    /** Removes this broker's context only: the other brokers of the JVM keep theirs. */
    public static void clear(Object broker) {
        INSTALLED.remove(broker);
    }

    /**
     * The context of the broker that passes this timer to {@code openStore}, once its
     * protocol handler has started; fails with {@link IllegalStateException} if it has not
     * within {@code wait} (the handler is not loaded).
     */
    public static CompletableFuture<BrokerContext> await(Object broker, Duration wait) {
        if (broker == null) {
            return CompletableFuture.failedFuture(new IllegalStateException("no broker"));
        }
        CompletableFuture<BrokerContext> installed = INSTALLED.computeIfAbsent(broker,
                ignored -> new CompletableFuture<>());
        if (installed.isDone()) {
            return installed;
        }
        CompletableFuture<BrokerContext> answer = new CompletableFuture<>();
        // Not on the thread that installs it (the broker's start, with the archive's class
        // loader as its context): an opening goes on in the common pool.
        installed.whenCompleteAsync((context, error) -> answer.complete(context));
        // Each opening gives up on its own; the slot stays for the others and for the install
        // (a broker that never starts the handler keeps one empty slot).
        CompletableFuture.delayedExecutor(wait.toMillis(), TimeUnit.MILLISECONDS).execute(() ->
                answer.completeExceptionally(new IllegalStateException("not installed within " + wait)));
        return answer;
    }
}
