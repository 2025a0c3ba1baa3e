package io.github.txnpreserver.statetopic;

import static org.assertj.core.api.Assertions.assertThat;
import static org.mockito.ArgumentMatchers.anyMap;
import static org.mockito.ArgumentMatchers.anyString;
import static org.mockito.Mockito.RETURNS_SELF;
import static org.mockito.Mockito.mock;
import static org.mockito.Mockito.never;
import static org.mockito.Mockito.verify;
import static org.mockito.Mockito.when;

import java.time.Duration;
import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Queue;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeoutException;
import org.apache.pulsar.client.admin.PulsarAdmin;
import org.apache.pulsar.client.admin.PulsarAdminException;
import org.apache.pulsar.client.admin.Topics;
import org.apache.pulsar.client.api.Producer;
import org.apache.pulsar.client.api.ProducerAccessMode;
import org.apache.pulsar.client.api.ProducerBuilder;
import org.apache.pulsar.client.api.PulsarClient;
import org.apache.pulsar.client.api.Schema;
import org.apache.pulsar.common.partition.PartitionedTopicMetadata;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.DisplayName;
import org.junit.jupiter.api.Test;

/**
 * The state topic's writer replacement against a broker the test plays: every producer
 * creation, close and ownership answer is a future the test completes when it says so, and
 * the topic's fencing epoch moves when the broker creates a fencing producer, as Pulsar's
 * does ({@code AbstractTopic.incrementTopicEpochIfNeeded}), which may be before the client
 * hears of it.
 */
@DisplayName("The state topic's writer replacement")
class PulsarStateTopicTest {

    private static final long TC = 3;
    private static final String TOPIC = PulsarStateTopic.topicName(TC);

    private final PulsarClient client = mock(PulsarClient.class);
    private final PulsarAdmin admin = mock(PulsarAdmin.class);
    private final Topics topics = mock(Topics.class);
    @SuppressWarnings("unchecked")
    private final ProducerBuilder<byte[]> builder = mock(ProducerBuilder.class, RETURNS_SELF);
    /** Producer creations asked of the broker, in order; each answered when the test completes it. */
    private final List<CompletableFuture<Producer<byte[]>>> creations = new ArrayList<>();
    private final List<Producer<byte[]>> producers = new ArrayList<>();
    private final List<CompletableFuture<Void>> producerCloses = new ArrayList<>();
    private final Queue<CompletableFuture<Boolean>> ownershipAnswers = new ArrayDeque<>();
    private int ownershipAsked;
    private final Map<String, String> properties = new HashMap<>();
    private long epoch;
    private StateTopic stateTopic;

    @BeforeEach
    void aBrokerWithTheTopic() {
        when(admin.topics()).thenReturn(topics);
        when(client.newProducer(Schema.BYTES)).thenReturn(builder);
        when(builder.createAsync()).thenAnswer(invocation -> {
            CompletableFuture<Producer<byte[]>> creation = new CompletableFuture<>();
            creations.add(creation);
            return creation;
        });
        when(topics.createNonPartitionedTopicAsync(TOPIC)).thenReturn(CompletableFuture.failedFuture(
                new PulsarAdminException.ConflictException(null, "exists", 409)));
        when(topics.getPartitionedTopicMetadataAsync(TOPIC)).thenReturn(CompletableFuture.completedFuture(
                new PartitionedTopicMetadata(0)));
        when(topics.getPropertiesAsync(TOPIC)).thenAnswer(invocation ->
                CompletableFuture.completedFuture(Map.copyOf(properties)));
        // No carrier of a terminated topic is left behind.
        when(topics.getPropertiesAsync(CarryOver.carrierName(TC))).thenReturn(CompletableFuture.failedFuture(
                new PulsarAdminException.NotFoundException(null, "no such topic", 404)));
        when(topics.updatePropertiesAsync(anyString(), anyMap())).thenAnswer(invocation -> {
            properties.putAll(invocation.getArgument(1));
            return CompletableFuture.completedFuture(null);
        });
        CompletableFuture<StateTopic> opening = PulsarStateTopic.open(client, admin, TC, Duration.ofSeconds(30),
                this::owned, false);
        brokerCreates(0);
        stateTopic = opening.getNow(null);
        assertThat(stateTopic).as("opened").isNotNull();
        ownershipAsked = 0;
    }

    private CompletableFuture<Boolean> owned() {
        ownershipAsked++;
        CompletableFuture<Boolean> answer = ownershipAnswers.poll();
        return answer != null ? answer : CompletableFuture.completedFuture(true);
    }

    /** The broker creates the fencing producer asked for by creation {@code which}: the epoch moves first. */
    private void brokerMovesTheEpochFor(int which) {
        assertThat(creations).hasSizeGreaterThan(which);
        epoch++;
        properties.put(PulsarStateTopic.EPOCH_PROPERTY, Long.toString(epoch));
    }

    /** ... and the client hears of it. */
    @SuppressWarnings("unchecked")
    private void clientHearsOf(int which) {
        Producer<byte[]> producer = mock(Producer.class);
        CompletableFuture<Void> closing = new CompletableFuture<>();
        when(producer.closeAsync()).thenReturn(closing);
        producers.add(producer);
        producerCloses.add(closing);
        creations.get(which).complete(producer);
    }

    private void brokerCreates(int which) {
        brokerMovesTheEpochFor(which);
        clientHearsOf(which);
    }

    /** The open's producer is the writer; the old producer's close answers at once from here on. */
    private void closesAnswerAtOnce() {
        producerCloses.forEach(closing -> closing.complete(null));
    }

    @Test
    void theOpenCreatesOneFencingProducer() {
        verify(builder, org.mockito.Mockito.atLeastOnce()).accessMode(ProducerAccessMode.ExclusiveWithFencing);
        assertThat(properties).containsEntry(PulsarStateTopic.WRITER_PROPERTY, "1")
                .containsEntry(PulsarStateTopic.EPOCH_PROPERTY, "1");
    }

    /**
     * Review of 3e78710, finding 1(a): during a rolling restart the old owner's replacement
     * is in flight (its old producer is closing) when the broker closes the coordinator here
     * and its new owner opens it. Before the fix, the replacement went on to create its
     * fencing producer, which fenced the new owner's writer (only then was it refused and
     * closed), and the new owner released the coordinator. Now a closed state topic creates
     * no producer.
     */
    @Test
    void aReplacementInFlightWhenTheCoordinatorClosesCreatesNoFencingProducer() {
        CompletableFuture<Boolean> reopen = stateTopic.reopen(false);
        assertThat(creations).as("the old producer is closing").hasSize(1);

        stateTopic.closeAsync();
        closesAnswerAtOnce();

        assertThat(creations).as("no fencing producer after the close").hasSize(1);
        assertThat(reopen).isCompletedExceptionally();
    }

    /**
     * Finding 1(a), the other way in: the broker still owned the coordinator when the
     * replacement began, and lost it while the old producer closed (the new owner has it,
     * or is about to). Before the fix ownership was asked once, at the start; now it is asked
     * again right before the fencing producer, and the replacement fails as "coordinator
     * moved" (the writer then releases the coordinator here) without fencing anyone.
     */
    @Test
    void aReplacementWhoseBrokerLostTheCoordinatorMeanwhileCreatesNoFencingProducer() {
        ownershipAnswers.add(CompletableFuture.completedFuture(true));
        ownershipAnswers.add(CompletableFuture.completedFuture(false));
        CompletableFuture<Boolean> reopen = stateTopic.reopen(false);

        closesAnswerAtOnce();

        assertThat(ownershipAsked).isEqualTo(2);
        assertThat(creations).as("no fencing producer").hasSize(1);
        assertThat(reopen).failsWithin(Duration.ZERO).withThrowableThat()
                .withCauseInstanceOf(CoordinatorMovedException.class);
    }

    /**
     * Finding 1(a), the attempt given up on: the writer gave the replacement up (its timeout)
     * while the old producer closed. The attempt creates no fencing producer afterwards.
     */
    @Test
    void aReplacementGivenUpOnBeforeItsProducerCreatesNone() {
        CompletableFuture<Boolean> reopen = stateTopic.reopen(false);
        reopen.completeExceptionally(new TimeoutException("given up on"));

        closesAnswerAtOnce();

        assertThat(creations).as("no fencing producer for an attempt given up on").hasSize(1);
    }

    /**
     * Review of 3e78710, finding 1(b): an attempt given up on while its producer was being
     * created; the broker created it (the epoch moved) before the next attempt compared
     * epochs. Before the fix the next attempt read the moved epoch as another writer's fence
     * and the coordinator was released here. Now the next attempt starts only once the late
     * producer has been created and closed, and, the epoch being unknown after an attempt
     * that asked for a producer and adopted none, relies on ownership alone: it replaces the
     * writer.
     */
    @Test
    void theEpochMovedByAnAttemptGivenUpOnIsNotTakenForAnotherWritersFence() {
        CompletableFuture<Boolean> first = stateTopic.reopen(false);
        closesAnswerAtOnce();
        assertThat(creations).as("the first attempt's producer is being created").hasSize(2);
        first.completeExceptionally(new TimeoutException("given up on"));
        brokerMovesTheEpochFor(1);

        CompletableFuture<Boolean> second = stateTopic.reopen(false);
        assertThat(second).as("waits for the first attempt's producer").isNotDone();

        clientHearsOf(1);
        verify(producers.get(1)).closeAsync();
        assertThat(creations).as("the second attempt creates its producer").hasSize(3);
        brokerCreates(2);

        assertThat(second).isCompletedWithValue(false);
        assertThat(properties).containsEntry(PulsarStateTopic.EPOCH_PROPERTY, "3");
    }

    /**
     * The fence check itself still holds: an epoch moved by a writer that is not this one's
     * fails the replacement as fenced, creating nothing (the coordinator is then released
     * here, never fenced back).
     */
    @Test
    void anEpochMovedByAnotherWriterFailsTheReplacementAsFenced() {
        epoch = 7;
        properties.put(PulsarStateTopic.EPOCH_PROPERTY, "7");

        CompletableFuture<Boolean> reopen = stateTopic.reopen(false);

        assertThat(reopen).failsWithin(Duration.ZERO).withThrowableThat()
                .withCauseInstanceOf(WriterFencedException.class);
        assertThat(creations).hasSize(1);
        verify(producers.get(0), never()).closeAsync();
    }

    /**
     * Cold-tier review, carry finding 4: a carrier the topic does not owe (a carry given up
     * on left it, or a stray reader created it again empty) is deleted unread by the next
     * replacement: copied back, it would replay old records over newer ones, or, empty, make
     * the topic look created again and cost every cold outcome.
     */
    @Test
    void aCarrierTheTopicDoesNotOweIsDeletedUnreadAndTheTopicIsNotCreatedAgain() {
        String carrier = CarryOver.carrierName(TC);
        when(topics.getPropertiesAsync(carrier)).thenReturn(CompletableFuture.completedFuture(Map.of()));
        when(topics.deleteAsync(carrier, true)).thenReturn(CompletableFuture.completedFuture(null));
        closesAnswerAtOnce();

        CompletableFuture<Boolean> reopen = stateTopic.reopen(false);
        brokerCreates(1);

        assertThat(reopen).as("not created again").isCompletedWithValue(false);
        verify(topics).deleteAsync(carrier, true);
        verify(client, never()).newReader(Schema.BYTES);
    }

    /**
     * Review of the carry fixes, must-fix 1: a topic that owes its carrier only because no
     * writer marked it yet is marked as owing it before the new writer marks it, so that a
     * copy-back interrupted afterwards is still owed (not deleted unread by the next writer).
     */
    @Test
    void anUnmarkedTopicWithACarrierIsMarkedAsOwingItBeforeItsWriterIsCreated() {
        String carrier = CarryOver.carrierName(TC);
        when(topics.getPropertiesAsync(carrier)).thenReturn(CompletableFuture.completedFuture(Map.of()));
        properties.remove(PulsarStateTopic.WRITER_PROPERTY);
        closesAnswerAtOnce();

        stateTopic.reopen(false);

        assertThat(creations).as("the new writer asked for").hasSize(2);
        assertThat(properties).containsEntry(CarryOver.CARRYING_PROPERTY, "1");
    }

    /** A topic owes a carrier while the carry's property is on it, or before any writer marked it. */
    @Test
    void aTopicOwesItsCarrierOnlyWhileItsCopyBackIsNotDone() {
        assertThat(CarryOver.owed(null)).as("created again before the property").isTrue();
        assertThat(CarryOver.owed(Map.of())).isTrue();
        assertThat(CarryOver.owed(Map.of(PulsarStateTopic.WRITER_PROPERTY, "1"))).isFalse();
        assertThat(CarryOver.owed(Map.of(PulsarStateTopic.WRITER_PROPERTY, "1", CarryOver.CARRYING_PROPERTY, "1")))
                .isTrue();
    }

    /** A producer created for a replacement after the coordinator closed is closed, never adopted. */
    @Test
    void aProducerCreatedAfterTheCloseIsClosed() {
        CompletableFuture<Boolean> reopen = stateTopic.reopen(false);
        closesAnswerAtOnce();
        assertThat(creations).hasSize(2);

        stateTopic.closeAsync();
        brokerCreates(1);

        verify(producers.get(1)).closeAsync();
        assertThat(reopen).isCompletedExceptionally();
    }


    /**
     * Review of the fix, its first must-fix: the broker created the producer (the epoch
     * moved), then marking the topic failed (an admin call refused while bundles move), and
     * the producer was closed unadopted. The next attempt must not take the moved epoch for
     * another writer's fence.
     */
    @Test
    void anEpochMovedByAnAttemptWhoseAdoptionFailedIsNotTakenForAnotherWritersFence() {
        when(topics.updatePropertiesAsync(anyString(), anyMap())).thenReturn(CompletableFuture.failedFuture(
                new PulsarAdminException.ServerSideErrorException(null, "service unavailable", "", 503)));
        CompletableFuture<Boolean> first = stateTopic.reopen(false);
        closesAnswerAtOnce();
        brokerCreates(1);
        assertThat(first).isCompletedExceptionally();
        verify(producers.get(1)).closeAsync();

        // No carrier of a terminated topic is left behind.
        when(topics.getPropertiesAsync(CarryOver.carrierName(TC))).thenReturn(CompletableFuture.failedFuture(
                new PulsarAdminException.NotFoundException(null, "no such topic", 404)));
        when(topics.updatePropertiesAsync(anyString(), anyMap())).thenAnswer(invocation -> {
            properties.putAll(invocation.getArgument(1));
            return CompletableFuture.completedFuture(null);
        });
        CompletableFuture<Boolean> second = stateTopic.reopen(false);
        brokerCreates(2);

        assertThat(second).isCompletedWithValue(false);
    }

    /**
     * Review of the fix, its second must-fix: the coordinator closes while the broker is
     * creating its replacement producer. The close waits for it and closes it, so that the
     * broker, which lets the coordinator's next owner open it only once its store closed,
     * never sees this producer fence the next owner's.
     */
    @Test
    void aCloseWhileTheBrokerCreatesAReplacementWaitsForItAndClosesIt() {
        stateTopic.reopen(false);
        closesAnswerAtOnce();
        assertThat(creations).as("being created").hasSize(2);

        CompletableFuture<Void> closed = stateTopic.closeAsync();
        assertThat(closed).as("waits for the producer being created").isNotDone();

        brokerCreates(1);
        verify(producers.get(1)).closeAsync();
        producerCloses.get(1).complete(null);
        assertThat(closed).isDone();
    }

    /**
     * Second review of the carry, note: removing the carry's mark failed once its carrier was
     * deleted. The next writer finds the mark and no carrier: it removes the mark, or the
     * topic would take any later stray carrier for its own.
     */
    @Test
    void aMarkOwingACarrierThatIsGoneIsRemoved() {
        properties.put(CarryOver.CARRYING_PROPERTY, "1");
        when(topics.removePropertiesAsync(TOPIC, CarryOver.CARRYING_PROPERTY)).thenAnswer(invocation -> {
            properties.remove(CarryOver.CARRYING_PROPERTY);
            return CompletableFuture.completedFuture(null);
        });
        closesAnswerAtOnce();

        CompletableFuture<Boolean> reopen = stateTopic.reopen(false);
        brokerCreates(1);

        assertThat(reopen).isCompletedWithValue(false);
        assertThat(properties).doesNotContainKey(CarryOver.CARRYING_PROPERTY);
    }

    /**
     * Second review of the carry, should-fix 4, and its review: a read of the state topic
     * racing a deletion (the carry's, or anyone's) made the client look the topic up, and the
     * broker (its default topic type partitioned) created it partitioned; {@code pulsar/system}
     * topics are created on demand even with auto-creation off. The plugin never writes a
     * partitioned topic: it is deleted and created again non-partitioned, where before the
     * coordinator could never open again.
     */
    @Test
    void aPartitionedStateTopicIsCreatedAgainNonPartitioned() {
        int[] partitions = {2};
        when(topics.createNonPartitionedTopicAsync(TOPIC)).thenAnswer(invocation -> partitions[0] > 0
                ? CompletableFuture.failedFuture(new PulsarAdminException.ConflictException(null, "exists", 409))
                : CompletableFuture.completedFuture(null));
        when(topics.getPartitionedTopicMetadataAsync(TOPIC)).thenAnswer(invocation ->
                CompletableFuture.completedFuture(new PartitionedTopicMetadata(partitions[0])));
        when(topics.deletePartitionedTopicAsync(TOPIC, true)).thenAnswer(invocation -> {
            partitions[0] = 0;
            properties.clear();
            return CompletableFuture.completedFuture(null);
        });
        closesAnswerAtOnce();

        CompletableFuture<Boolean> reopen = stateTopic.reopen(false);
        brokerCreates(1);

        verify(topics).deletePartitionedTopicAsync(TOPIC, true);
        assertThat(reopen).as("the topic is created again").isCompletedWithValue(true);
    }

    /**
     * Review of the fixes, note: the topic was deleted between the replacement reading its
     * properties (marked, owing nothing) and creating it. Created here, it owes a carrier
     * left behind: the carrier is copied back, where before it was deleted unread and its
     * outcomes lost.
     */
    @Test
    void aTopicCreatedByTheReplacementOwesTheCarrierLeftBehind() {
        when(topics.createNonPartitionedTopicAsync(TOPIC)).thenReturn(CompletableFuture.completedFuture(null));
        String carrier = CarryOver.carrierName(TC);
        when(topics.getPropertiesAsync(carrier)).thenReturn(CompletableFuture.completedFuture(Map.of()));
        when(topics.deleteAsync(carrier, true)).thenReturn(CompletableFuture.completedFuture(null));
        closesAnswerAtOnce();

        stateTopic.reopen(false);
        brokerCreates(1);

        verify(client).newReader(Schema.BYTES);
        verify(topics, never()).deleteAsync(carrier, true);
        assertThat(properties).as("marked as owing it first").containsEntry(CarryOver.CARRYING_PROPERTY, "1");
    }
}
