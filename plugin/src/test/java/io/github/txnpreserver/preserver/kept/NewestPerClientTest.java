package io.github.txnpreserver.preserver.kept;

import static org.assertj.core.api.Assertions.assertThat;

import java.util.ArrayList;
import java.util.Comparator;
import java.util.List;
import java.util.Random;
import org.junit.jupiter.api.DisplayName;
import org.junit.jupiter.api.Test;

@DisplayName("A client's newest outcomes, rebuilt for the floor")
class NewestPerClientTest {

    record Kept(int time, long sequence, Outcome outcome) {
    }

    private static List<Kept> inOrder(NewestPerClient client) {
        List<Kept> kept = new ArrayList<>();
        client.inOrder((time, sequence, outcome) -> kept.add(new Kept(time, sequence, outcome)));
        return kept;
    }

    @Test
    void keepsEveryOfferedOutcomeUpToTheLimitVisitedOldestFirst() {
        NewestPerClient client = new NewestPerClient(10);
        // More than the first capacity (4): the columns grow, up to the limit.
        int[] times = {50, 10, 90, 30, 70, 20, 80, 60, 40, 0};
        for (int i = 0; i < times.length; i++) {
            client.offer(times[i], 1000 + i, i % 2 == 0 ? Outcome.COMMITTED : Outcome.ABORTED);
        }

        List<Kept> kept = inOrder(client);

        assertThat(kept).extracting(Kept::time).containsExactly(0, 10, 20, 30, 40, 50, 60, 70, 80, 90);
        assertThat(kept).contains(new Kept(0, 1009, Outcome.ABORTED), new Kept(90, 1002, Outcome.COMMITTED));
        assertThat(client.newestTime()).isEqualTo(90);
    }

    @Test
    void outcomesEndedInTheSameSecondAreOrderedBySequence() {
        NewestPerClient client = new NewestPerClient(4);
        client.offer(7, 30, Outcome.COMMITTED);
        client.offer(7, 10, Outcome.ABORTED);
        client.offer(5, 40, Outcome.TIMED_OUT);
        client.offer(7, 20, Outcome.COMMITTED);

        assertThat(inOrder(client)).containsExactly(
                new Kept(5, 40, Outcome.TIMED_OUT),
                new Kept(7, 10, Outcome.ABORTED),
                new Kept(7, 20, Outcome.COMMITTED),
                new Kept(7, 30, Outcome.COMMITTED));
    }

    @Test
    void atTheLimitAnOfferNoNewerThanTheOldestKeptIsTurnedAway() {
        NewestPerClient client = new NewestPerClient(2);
        client.offer(10, 5, Outcome.COMMITTED);
        client.offer(20, 6, Outcome.COMMITTED);

        client.offer(10, 5, Outcome.ABORTED);
        client.offer(10, 4, Outcome.ABORTED);
        client.offer(9, 9, Outcome.ABORTED);

        assertThat(inOrder(client)).containsExactly(
                new Kept(10, 5, Outcome.COMMITTED), new Kept(20, 6, Outcome.COMMITTED));

        client.offer(10, 7, Outcome.ABORTED);

        assertThat(inOrder(client)).as("same second, later sequence: newer")
                .containsExactly(new Kept(10, 7, Outcome.ABORTED), new Kept(20, 6, Outcome.COMMITTED));
    }

    @Test
    void theNewestTimeCountsOutcomesTurnedAwayToo() {
        NewestPerClient client = new NewestPerClient(1);
        assertThat(client.newestTime()).isEqualTo(Integer.MIN_VALUE);
        client.offer(30, 1, Outcome.COMMITTED);
        client.offer(20, 2, Outcome.COMMITTED);

        assertThat(client.newestTime()).isEqualTo(30);
        assertThat(inOrder(client)).containsExactly(new Kept(30, 1, Outcome.COMMITTED));
    }

    @Test
    void keepsTheNewestWhateverOrderTheOutcomesComeIn() {
        Random random = new Random(38);
        for (int limit : new int[] {1, 2, 3, 5, 8, 13}) {
            for (int round = 0; round < 50; round++) {
                NewestPerClient client = new NewestPerClient(limit);
                List<Kept> offered = new ArrayList<>();
                int count = random.nextInt(40);
                for (int i = 0; i < count; i++) {
                    // Few distinct seconds: many ties broken by sequence (each sequence offered once).
                    Kept outcome = new Kept(random.nextInt(12), 64L * random.nextInt(1_000) + i, Outcome.COMMITTED);
                    offered.add(outcome);
                    client.offer(outcome.time(), outcome.sequence(), outcome.outcome());
                }
                Comparator<Kept> oldestFirst = Comparator.comparingInt(Kept::time).thenComparingLong(Kept::sequence);
                List<Kept> expected = offered.stream().sorted(oldestFirst).toList();
                expected = expected.subList(Math.max(0, expected.size() - limit), expected.size());

                assertThat(inOrder(client)).as("limit %d, offered %s", limit, offered)
                        .containsExactlyElementsOf(expected);
            }
        }
    }
}
