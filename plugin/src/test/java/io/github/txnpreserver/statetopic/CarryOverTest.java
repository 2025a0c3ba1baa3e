package io.github.txnpreserver.statetopic;

import static org.assertj.core.api.Assertions.assertThat;
import static org.mockito.ArgumentMatchers.any;
import static org.mockito.ArgumentMatchers.anyString;
import static org.mockito.Mockito.RETURNS_SELF;
import static org.mockito.Mockito.mock;
import static org.mockito.Mockito.never;
import static org.mockito.Mockito.verify;
import static org.mockito.Mockito.when;

import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.Executor;
import java.util.concurrent.atomic.AtomicBoolean;
import org.apache.pulsar.client.admin.PulsarAdmin;
import org.apache.pulsar.client.admin.PulsarAdminException;
import org.apache.pulsar.client.admin.Topics;
import org.apache.pulsar.client.api.MessageId;
import org.apache.pulsar.client.api.Producer;
import org.apache.pulsar.client.api.ProducerBuilder;
import org.apache.pulsar.client.api.PulsarClient;
import org.apache.pulsar.client.api.Schema;
import org.apache.pulsar.client.api.TypedMessageBuilder;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.DisplayName;
import org.junit.jupiter.api.Test;

/**
 * The copy of a terminated state topic into its carrier, against a broker the test plays:
 * the completion record says the carrier holds every record the topic held, so it is
 * written only when that is so.
 */
@DisplayName("The copy of a terminated state topic into its carrier")
class CarryOverTest {

    private static final long TC = 4;
    private static final String TOPIC = PulsarStateTopic.topicName(TC);
    private static final String CARRIER = CarryOver.carrierName(TC);

    private final PulsarClient client = mock(PulsarClient.class);
    private final PulsarAdmin admin = mock(PulsarAdmin.class);
    private final Topics topics = mock(Topics.class);
    @SuppressWarnings("unchecked")
    private final ProducerBuilder<byte[]> builder = mock(ProducerBuilder.class, RETURNS_SELF);
    @SuppressWarnings("unchecked")
    private final Producer<byte[]> producer = mock(Producer.class);
    private final CompactedViewReader view = mock(CompactedViewReader.class);
    /** The keys sent to the carrier, in order. */
    private final List<String> sent = new ArrayList<>();
    private final Map<String, String> topicProperties = new HashMap<>(Map.of(
            PulsarStateTopic.WRITER_PROPERTY, "1", PulsarStateTopic.EPOCH_PROPERTY, "7"));
    private boolean topicExists = true;
    private final CarryOver carry = new CarryOver(client, admin, TC, TOPIC, 30_000);

    @BeforeEach
    @SuppressWarnings("unchecked")
    void aBrokerWithATerminatedTopic() {
        when(admin.topics()).thenReturn(topics);
        when(topics.getPropertiesAsync(TOPIC)).thenAnswer(invocation -> topicExists
                ? CompletableFuture.completedFuture(Map.copyOf(topicProperties))
                : CompletableFuture.failedFuture(new PulsarAdminException.NotFoundException(null, "gone", 404)));
        when(topics.createNonPartitionedTopicAsync(CARRIER)).thenReturn(CompletableFuture.completedFuture(null));
        when(topics.createSubscriptionAsync(CARRIER, CarryOver.RETAINING_SUBSCRIPTION, MessageId.earliest))
                .thenReturn(CompletableFuture.completedFuture(null));
        when(client.newProducer(Schema.BYTES)).thenReturn(builder);
        when(builder.createAsync()).thenReturn(CompletableFuture.completedFuture(producer));
        when(producer.flushAsync()).thenReturn(CompletableFuture.completedFuture(null));
        when(producer.closeAsync()).thenReturn(CompletableFuture.completedFuture(null));
        when(producer.newMessage()).thenAnswer(invocation -> {
            TypedMessageBuilder<byte[]> message = mock(TypedMessageBuilder.class, RETURNS_SELF);
            when(message.key(anyString())).thenAnswer(key -> {
                sent.add(key.getArgument(0));
                return message;
            });
            when(message.sendAsync()).thenReturn(CompletableFuture.completedFuture(mock(MessageId.class)));
            return message;
        });
    }

    /** The topic's compacted view shows these keys; {@code meanwhile} runs halfway through. */
    private void theViewHolds(int records, Runnable meanwhile) {
        when(view.readAll(any(), any(Executor.class))).thenAnswer(invocation -> {
            StateTopic.Visitor visitor = invocation.getArgument(0);
            for (int i = 0; i < records; i++) {
                if (i == records / 2) {
                    meanwhile.run();
                }
                visitor.accept("block-" + i, new byte[] {1}, null);
            }
            return CompletableFuture.completedFuture(null);
        });
    }

    @Test
    void aWholeCopyEndsWithItsCompletionRecord() {
        theViewHolds(4, () -> { });

        assertThat(carry.toCarrier(view, () -> true)).succeedsWithin(Duration.ofSeconds(5));

        assertThat(sent).containsExactly("block-0", "block-1", "block-2", "block-3", CarryOver.COMPLETE_KEY);
    }

    /**
     * Review of the fix: a terminated topic no writer marked (created again by a stray client,
     * then terminated) is copied whole too. The first fix asked for the writer's mark, so such
     * a carry never completed, and each attempt copied the view into the carrier again.
     */
    @Test
    void anUnmarkedTerminatedTopicIsCopiedWhole() {
        topicProperties.remove(PulsarStateTopic.WRITER_PROPERTY);
        theViewHolds(2, () -> { });

        assertThat(carry.toCarrier(view, () -> true)).succeedsWithin(Duration.ofSeconds(5));

        assertThat(sent).containsExactly("block-0", "block-1", CarryOver.COMPLETE_KEY);
    }

    /**
     * Second review of the carry, should-fix 2: an operator deleted the terminated topic
     * while it was copied. Its view ended early (a reader of a deleted topic sees the end),
     * and before the fix the truncated copy was marked complete: the copy-back then took it
     * for every record, and cold outcomes missing from it were reported as kept. Now the
     * carrier is left without its completion record, and the copy-back counts it partial.
     */
    @Test
    void aTopicDeletedDuringItsCopyLeavesTheCarrierWithoutItsCompletionRecord() {
        theViewHolds(4, () -> topicExists = false);

        assertThat(carry.toCarrier(view, () -> true)).failsWithin(Duration.ofSeconds(5)).withThrowableThat()
                .withMessageContaining("deleted during its carry");

        assertThat(sent).doesNotContain(CarryOver.COMPLETE_KEY);
    }

    /** ... or deleted and created again by someone else: no writer's mark, another epoch. */
    @Test
    void aTopicCreatedAgainDuringItsCopyLeavesTheCarrierWithoutItsCompletionRecord() {
        theViewHolds(4, () -> {
            topicProperties.clear();
            topicProperties.put(PulsarStateTopic.EPOCH_PROPERTY, "1");
        });

        assertThat(carry.toCarrier(view, () -> true)).failsWithin(Duration.ofSeconds(5));

        assertThat(sent).doesNotContain(CarryOver.COMPLETE_KEY);
    }

    /** ... or fenced by another writer (the coordinator's new owner) meanwhile. */
    @Test
    void aTopicWhoseEpochMovedDuringItsCopyLeavesTheCarrierWithoutItsCompletionRecord() {
        theViewHolds(4, () -> topicProperties.put(PulsarStateTopic.EPOCH_PROPERTY, "8"));

        assertThat(carry.toCarrier(view, () -> true)).failsWithin(Duration.ofSeconds(5));

        assertThat(sent).doesNotContain(CarryOver.COMPLETE_KEY);
    }

    /**
     * Second review, note: a carry given up on while its carrier was being prepared creates
     * no fencing producer on the carrier, which would fence a later carry's.
     */
    @Test
    void aCarryGivenUpOnBeforeItsProducerCreatesNone() {
        theViewHolds(4, () -> { });
        AtomicBoolean current = new AtomicBoolean(true);
        when(topics.createSubscriptionAsync(CARRIER, CarryOver.RETAINING_SUBSCRIPTION, MessageId.earliest))
                .thenAnswer(invocation -> {
                    current.set(false);
                    return CompletableFuture.completedFuture(null);
                });

        assertThat(carry.toCarrier(view, current::get)).failsWithin(Duration.ofSeconds(5));

        verify(builder, never()).createAsync();
        assertThat(sent).isEmpty();
    }
}
