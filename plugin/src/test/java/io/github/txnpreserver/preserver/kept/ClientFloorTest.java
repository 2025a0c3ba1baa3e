package io.github.txnpreserver.preserver.kept;

import static org.assertj.core.api.Assertions.assertThat;

import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Random;
import org.junit.jupiter.api.DisplayName;
import org.junit.jupiter.api.Test;

@DisplayName("Client floor")
class ClientFloorTest {

    private static final int ALICE = 1;
    private static final int BOB = 2;
    private static final int CAROL = 3;
    private static final long NONE = -1;

    /** An entry that left the floor, with the owner its packed outcome named. */
    record Removed(long sequence, int owner) {
    }

    private final List<Removed> removed = new ArrayList<>();

    private void record(long sequence, long packed) {
        removed.add(new Removed(sequence, ClientFloor.ownerOf(packed)));
    }

    private int add(ClientFloor floor, long sequence, int owner, int time) {
        return floor.add(sequence, owner, time, Outcome.COMMITTED, this::record);
    }

    @Test
    void packsAnOutcomesEndTimeOwnerAndOutcomeIntoOneLong() {
        for (int time : new int[] {0, 1, 122_163_200, Integer.MAX_VALUE}) {
            for (int owner : new int[] {0, 1, 65_536, OwnerIds.MAX_ID}) {
                for (Outcome outcome : Outcome.values()) {
                    long packed = ClientFloor.pack(time, owner, outcome);
                    assertThat(ClientFloor.timeOf(packed)).isEqualTo(time);
                    assertThat(ClientFloor.ownerOf(packed)).isEqualTo(owner);
                    assertThat(ClientFloor.outcomeOf(packed)).isEqualTo(outcome);
                    assertThat(packed).as("never the 'none' of a lookup").isNotEqualTo(NONE);
                }
            }
        }
    }

    @Test
    void keepsEachClientsNewestEntriesAndPushesOutItsOldest() {
        ClientFloor floor = new ClientFloor(2, 100);

        assertThat(add(floor, 1, ALICE, 10)).isEqualTo(ClientFloor.ADDED);
        assertThat(add(floor, 2, ALICE, 11)).isEqualTo(ClientFloor.ADDED);
        assertThat(add(floor, 3, BOB, 12)).isEqualTo(ClientFloor.ADDED);
        assertThat(add(floor, 4, ALICE, 13)).isEqualTo(ClientFloor.ADDED);

        assertThat(removed).containsExactly(new Removed(1, ALICE));
        assertThat(floor.contains(1)).isFalse();
        assertThat(floor.get(1, NONE)).isEqualTo(NONE);
        assertThat(floor.get(4, NONE)).isEqualTo(ClientFloor.pack(13, ALICE, Outcome.COMMITTED));
        assertThat(floor.size()).isEqualTo(3);
        assertThat(floor.clients()).isEqualTo(2);
        assertThat(floor.capped()).as("pushed out by its own client, not by the cap").isZero();
    }

    @Test
    void aClientsRingGrowsUpToThePerClientCount() {
        ClientFloor floor = new ClientFloor(100, 1000);
        for (long sequence = 0; sequence < 100; sequence++) {
            add(floor, sequence, ALICE, (int) sequence);
        }
        assertThat(removed).isEmpty();
        assertThat(floor.size()).isEqualTo(100);

        add(floor, 100, ALICE, 100);
        add(floor, 101, ALICE, 101);

        assertThat(removed).containsExactly(new Removed(0, ALICE), new Removed(1, ALICE));
        assertThat(floor.size()).isEqualTo(100);
    }

    @Test
    void aFloorOfOneKeepsEachClientsNewestOnly() {
        ClientFloor floor = new ClientFloor(1, 100);
        add(floor, 1, ALICE, 1);
        add(floor, 2, BOB, 1);
        add(floor, 3, ALICE, 2);

        assertThat(removed).containsExactly(new Removed(1, ALICE));
        assertThat(floor.get(2, NONE)).isEqualTo(ClientFloor.pack(1, BOB, Outcome.COMMITTED));
        assertThat(floor.get(3, NONE)).isEqualTo(ClientFloor.pack(2, ALICE, Outcome.COMMITTED));
    }

    @Test
    void theSameOwnersDecisionReplacesItsEntryInPlace() {
        ClientFloor floor = new ClientFloor(2, 100);
        add(floor, 5, ALICE, 10);

        assertThat(floor.add(5, ALICE, 20, Outcome.ABORTED, this::record)).as("the owner it replaced").isEqualTo(ALICE);

        assertThat(floor.get(5, NONE)).isEqualTo(ClientFloor.pack(20, ALICE, Outcome.ABORTED));
        assertThat(floor.size()).isEqualTo(1);
        add(floor, 6, ALICE, 21);
        assertThat(removed).as("5 holds one slot of alice's ring, not two").isEmpty();
        add(floor, 7, ALICE, 22);
        assertThat(removed).containsExactly(new Removed(5, ALICE));
    }

    @Test
    void anotherOwnersDecisionTakesTheEntryIntoItsOwnRing() {
        ClientFloor floor = new ClientFloor(2, 100);
        add(floor, 5, ALICE, 10);

        assertThat(floor.add(5, BOB, 20, Outcome.ABORTED, this::record)).as("the owner it replaced").isEqualTo(ALICE);

        assertThat(floor.get(5, NONE)).isEqualTo(ClientFloor.pack(20, BOB, Outcome.ABORTED));
        assertThat(floor.size()).isEqualTo(1);
        add(floor, 6, ALICE, 21);
        add(floor, 7, ALICE, 22);
        add(floor, 8, ALICE, 23);
        assertThat(removed).as("alice's ring pushes out her own entries only").containsExactly(new Removed(6, ALICE));
        assertThat(floor.get(5, NONE)).isEqualTo(ClientFloor.pack(20, BOB, Outcome.ABORTED));

        add(floor, 9, BOB, 24);
        add(floor, 10, BOB, 25);
        assertThat(removed).as("bob's ring pushed 5 out").containsExactly(new Removed(6, ALICE), new Removed(5, BOB));
        assertThat(floor.contains(5)).isFalse();
    }

    @Test
    void theCapTakesTheOldestEntryOfTheClientThatEndedATransactionLeastRecently() {
        ClientFloor floor = new ClientFloor(2, 3);
        add(floor, 0, ALICE, 0);
        add(floor, 1, BOB, 1);
        add(floor, 2, ALICE, 2);

        add(floor, 3, CAROL, 3);

        assertThat(removed).containsExactly(new Removed(1, BOB));
        assertThat(floor.size()).isEqualTo(3);
        assertThat(floor.capped()).isEqualTo(1);
        assertThat(floor.clients()).as("bob has no entry left").isEqualTo(2);
    }

    @Test
    void theCapTakesEntriesWhateverTheirSequence() {
        ClientFloor floor = new ClientFloor(2, 2);
        add(floor, 0, ALICE, 0);
        add(floor, Long.MAX_VALUE, BOB, 1);

        add(floor, 1, CAROL, 2);
        add(floor, 2, CAROL, 3);

        assertThat(removed).containsExactly(new Removed(0, ALICE), new Removed(Long.MAX_VALUE, BOB));
        assertThat(floor.size()).isEqualTo(2);
        assertThat(floor.clients()).isEqualTo(1);
    }

    @Test
    void theCapSkipsSlotsAnotherOwnerTookAndRemovesEachEntryFromItsOwnRing() {
        ClientFloor floor = new ClientFloor(3, 3);
        add(floor, 10, ALICE, 1);
        add(floor, 11, ALICE, 2);
        assertThat(add(floor, 11, BOB, 3)).isEqualTo(ALICE);

        add(floor, 20, CAROL, 4);
        add(floor, 21, CAROL, 5);
        assertThat(removed).containsExactly(new Removed(10, ALICE));
        add(floor, 22, CAROL, 6);

        assertThat(removed).as("alice's slot of 11 is stale: bob's entry goes from bob's ring")
                .containsExactly(new Removed(10, ALICE), new Removed(11, BOB));
        assertThat(floor.capped()).as("the stale slot is no entry").isEqualTo(2);
        assertThat(floor.size()).isEqualTo(3);
        assertThat(floor.clients()).isEqualTo(1);
    }

    @Test
    void expiresEachClientsEntriesInItsEndOrderUpToTheFirstItKeeps() {
        ClientFloor floor = new ClientFloor(3, 100);
        add(floor, 1, ALICE, 10);
        add(floor, 2, ALICE, 5);
        add(floor, 3, ALICE, 20);
        add(floor, 4, BOB, 30);
        add(floor, 5, BOB, 5);
        add(floor, 6, CAROL, 1);

        floor.expire(10, this::record);

        assertThat(removed).containsExactlyInAnyOrder(new Removed(1, ALICE), new Removed(2, ALICE),
                new Removed(6, CAROL));
        assertThat(floor.get(3, NONE)).isEqualTo(ClientFloor.pack(20, ALICE, Outcome.COMMITTED));
        assertThat(floor.get(5, NONE)).as("behind bob's 4, which is kept")
                .isEqualTo(ClientFloor.pack(5, BOB, Outcome.COMMITTED));
        assertThat(floor.clients()).as("carol has no entry left").isEqualTo(2);
        assertThat(floor.capped()).isZero();
    }

    @Test
    void expiringSkipsASlotAnotherOwnerTookWithoutTouchingItsEntry() {
        ClientFloor floor = new ClientFloor(3, 100);
        add(floor, 5, ALICE, 1);
        add(floor, 5, BOB, 100);
        assertThat(floor.clients()).as("alice's only entry left her ring with it").isEqualTo(1);

        floor.expire(50, this::record);

        assertThat(removed).isEmpty();
        assertThat(floor.get(5, NONE)).isEqualTo(ClientFloor.pack(100, BOB, Outcome.COMMITTED));
        assertThat(floor.clients()).as("alice's ring held only the stale slot").isEqualTo(1);

        floor.expire(100, this::record);
        assertThat(removed).containsExactly(new Removed(5, BOB));
        assertThat(floor.size()).isZero();
        assertThat(floor.clients()).isZero();
    }

    @Test
    void visitsEveryEntryCountsItsBytesAndClears() {
        ClientFloor floor = new ClientFloor(2, 100);
        add(floor, 1, ALICE, 1);
        add(floor, 2, BOB, 2);
        Map<Long, Long> visited = new HashMap<>();

        floor.forEach(visited::put);

        assertThat(visited).containsOnly(Map.entry(1L, ClientFloor.pack(1, ALICE, Outcome.COMMITTED)),
                Map.entry(2L, ClientFloor.pack(2, BOB, Outcome.COMMITTED)));
        assertThat(floor.bytes()).isGreaterThanOrEqualTo(2L * ClientFloor.BYTES_PER_ENTRY);
        floor.clear();
        assertThat(floor.size()).isZero();
        assertThat(floor.clients()).isZero();
        assertThat(floor.bytes()).isZero();
        assertThat(floor.contains(1)).isFalse();
    }

    /**
     * Many adds, replacements by the same and by other owners, caps and expiries, checked
     * against the entries the floor reported: every entry it removes is one it holds, with
     * the outcome and owner it holds, and every entry it holds is one it was given. As
     * {@link OutcomeIndex} uses it, a sequence taken by another owner never goes back to one
     * that held it before.
     */
    @Test
    void itsRingsStayConsistentThroughReplacementsCapsAndExpiries() {
        Random random = new Random(20_261_203L);
        int perClient = 3;
        int cap = 8;
        int owners = 6;
        ClientFloor floor = new ClientFloor(perClient, cap);
        Map<Long, Long> model = new HashMap<>();
        Map<Long, List<Integer>> ownersOf = new HashMap<>();
        long next = 0;
        int time = 0;
        int takeovers = 0;
        for (int step = 0; step < 20_000; step++) {
            if (random.nextInt(20) == 0) {
                int through = time - 1 - random.nextInt(30);
                floor.expire(through, (sequence, packed) -> {
                    assertThat(model.remove(sequence)).as("expired %d", sequence).isEqualTo(packed);
                    assertThat(ClientFloor.timeOf(packed)).isLessThanOrEqualTo(through);
                });
            } else {
                long sequence;
                int owner;
                if (next > 0 && random.nextInt(4) == 0) {
                    sequence = Math.max(0, next - 1 - random.nextInt(20));
                    List<Integer> former = ownersOf.get(sequence);
                    int last = former.get(former.size() - 1);
                    owner = random.nextBoolean() ? last : random.nextInt(owners);
                    if (owner != last && former.contains(owner)) {
                        owner = last;
                    }
                } else {
                    sequence = next++;
                    owner = random.nextInt(owners);
                }
                boolean committed = random.nextBoolean();
                time += random.nextInt(3);
                Long before = model.get(sequence);
                long added = sequence;
                int replaced = floor.add(sequence, owner, time, outcomeOf(committed), (gone, packed) -> {
                    assertThat(gone).as("the entry just added stays").isNotEqualTo(added);
                    assertThat(model.remove(gone)).as("removed %d", gone).isEqualTo(packed);
                });
                assertThat(replaced).isEqualTo(before == null ? ClientFloor.ADDED : ClientFloor.ownerOf(before));
                if (before != null && ClientFloor.ownerOf(before) != owner) {
                    takeovers++;
                }
                model.put(sequence, ClientFloor.pack(time, owner, outcomeOf(committed)));
                List<Integer> former = ownersOf.computeIfAbsent(sequence, ignored -> new ArrayList<>());
                if (former.isEmpty() || former.get(former.size() - 1) != owner) {
                    former.add(owner);
                }
            }
            Map<Long, Long> held = new HashMap<>();
            floor.forEach(held::put);
            assertThat(held).as("step %d", step).isEqualTo(model);
            assertThat(floor.size()).isLessThanOrEqualTo(cap);
            Map<Integer, Integer> perOwner = new HashMap<>();
            held.values().forEach(packed -> perOwner.merge(ClientFloor.ownerOf(packed), 1, Integer::sum));
            assertThat(perOwner.values()).allSatisfy(count -> assertThat(count).isLessThanOrEqualTo(perClient));
            assertThat(floor.clients()).isGreaterThanOrEqualTo(perOwner.size());
        }
        assertThat(takeovers).as("the run took entries over from other owners").isGreaterThan(100);
        assertThat(floor.capped()).as("and the cap took entries").isGreaterThan(100);
    }

    private static Outcome outcomeOf(boolean committed) {
        return committed ? Outcome.COMMITTED : Outcome.ABORTED;
    }
}
