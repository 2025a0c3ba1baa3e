package io.github.txnpreserver.client;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import java.time.Instant;
import org.junit.jupiter.api.Test;

class OutcomeQueryTest {

    @Test
    void readsATimeoutAbortWithItsTimes() {
        TransactionState state = OutcomeQuery.parse("{\"txnId\":\"(1,5)\",\"state\":\"ABORTED\",\"abortedBy\":\"TIMEOUT\","
                + "\"owner\":\"al\\\"i\\u00e7e\",\"endedAt\":\"2026-12-05T15:30:00Z\",\"keptUntil\":\"2026-12-08T15:30:00Z\"}");

        assertThat(state).isEqualTo(new TransactionState("(1,5)", TransactionState.State.ABORTED,
                TransactionState.AbortedBy.TIMEOUT, "al\"i\u00e7e", null, null, Instant.parse("2026-12-05T15:30:00Z"),
                Instant.parse("2026-12-08T15:30:00Z"), null, null));
    }

    @Test
    void readsAnOpenAndAForgottenTransaction() {
        assertThat(OutcomeQuery.parse(" { \"txnId\" : \"(1,6)\", \"state\" : \"OPEN\", \"openedAt\" : "
                + "\"2026-12-05T15:30:00.123Z\", \"timeoutMillis\" : 60000 } ")).isEqualTo(new TransactionState("(1,6)",
                TransactionState.State.OPEN, null, null, Instant.parse("2026-12-05T15:30:00.123Z"), 60_000L, null,
                null, null, null));
        assertThat(OutcomeQuery.parse("{\"txnId\":\"(1,2)\",\"state\":\"FORGOTTEN\",\"highestIssued\":9}"))
                .isEqualTo(new TransactionState("(1,2)", TransactionState.State.FORGOTTEN, null, null, null, null, null,
                        null, null, 9L));
    }

    @Test
    void refusesWhatIsNoAnswer() {
        assertThatThrownBy(() -> OutcomeQuery.parse("{\"txnId\":\"(1,5)\"}")).hasMessageContaining("state");
        assertThatThrownBy(() -> OutcomeQuery.parse("{\"state\":\"OPEN\"")).isInstanceOf(IllegalArgumentException.class);
        assertThatThrownBy(() -> OutcomeQuery.of("pulsar://broker:6650")).isInstanceOf(IllegalArgumentException.class);
    }
}
