package io.github.txnpreserver.preserver.kept;

import static org.assertj.core.api.Assertions.assertThat;

import org.junit.jupiter.api.DisplayName;
import org.junit.jupiter.api.Test;

@DisplayName("Owner ids")
class OwnerIdsTest {

    /** The name table's first 16 slots, 8 bytes each. */
    private static final long EMPTY_BYTES = 16 * 8;

    @Test
    void namesEachOwnerOnceFromOneUpAndNoOwnerZero() {
        OwnerIds owners = new OwnerIds();

        assertThat(owners.idOf(null)).isEqualTo(OwnerIds.NO_OWNER);
        assertThat(owners.highestId()).as("none handed out").isZero();
        assertThat(owners.idOf("alice")).isEqualTo(1);
        assertThat(owners.idOf("bob")).isEqualTo(2);
        assertThat(owners.idOf("alice")).isEqualTo(1);
        assertThat(owners.nameOf(2)).isEqualTo("bob");
        assertThat(owners.nameOf(OwnerIds.NO_OWNER)).isNull();
        assertThat(owners.highestId()).isEqualTo(2);
        assertThat(owners.size()).isEqualTo(2);
    }

    @Test
    void anOwnerNoKeptOutcomeNamesIsForgottenAndItsIdReused() {
        OwnerIds owners = new OwnerIds();
        int alice = owners.idOf("alice");
        owners.retain(alice);
        owners.retain(alice);
        int bob = owners.idOf("bob");
        owners.retain(bob);

        owners.release(alice);
        assertThat(owners.nameOf(alice)).as("one outcome still names it").isEqualTo("alice");
        owners.release(alice);

        assertThat(owners.nameOf(alice)).isNull();
        assertThat(owners.size()).isEqualTo(1);
        assertThat(owners.idOf("carol")).isEqualTo(alice);
        assertThat(owners.highestId()).isEqualTo(2);
    }

    @Test
    void countsEachOwnerAndTwoBytesACharacterUntilItIsForgotten() {
        OwnerIds owners = new OwnerIds();
        assertThat(owners.bytes()).isEqualTo(EMPTY_BYTES);

        int alice = owners.idOf("alice");
        owners.retain(alice);
        int bo = owners.idOf("bo");
        owners.retain(bo);
        assertThat(owners.bytes()).isEqualTo(EMPTY_BYTES + (64 + 2 * 5) + (64 + 2 * 2));

        owners.release(alice);
        assertThat(owners.bytes()).isEqualTo(EMPTY_BYTES + 64 + 2 * 2);
        owners.release(bo);
        assertThat(owners.bytes()).isEqualTo(EMPTY_BYTES);
    }

    @Test
    void theNameTableGrowsPastSixteenOwnersAndIsCounted() {
        OwnerIds owners = new OwnerIds();
        for (int i = 0; i < 20; i++) {
            assertThat(owners.idOf("o" + i)).isEqualTo(i + 1);
        }
        assertThat(owners.nameOf(20)).isEqualTo("o19");
        assertThat(owners.bytes()).as("32 slots, 20 owners of 2 or 3 characters")
                .isEqualTo(32 * 8 + 20 * 64 + 2 * (10 * 2 + 10 * 3));
    }
}
