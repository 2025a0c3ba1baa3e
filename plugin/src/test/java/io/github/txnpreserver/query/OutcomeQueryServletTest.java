package io.github.txnpreserver.query;

import static org.assertj.core.api.Assertions.assertThat;

import io.github.txnpreserver.resolution.TransactionState;
import org.junit.jupiter.api.Test;

class OutcomeQueryServletTest {

    @Test
    void writesOnlyTheFieldsThatApply() {
        assertThat(OutcomeQueryServlet.json(new TransactionState("(1,5)", TransactionState.State.ABORTED,
                TransactionState.AbortedBy.TIMEOUT, "al\"i\\ce\n", 0, 0, 1_764_948_600_000L, 1_765_207_800_000L, 0,
                0))).isEqualTo("{\"txnId\":\"(1,5)\",\"state\":\"ABORTED\",\"abortedBy\":\"TIMEOUT\","
                + "\"owner\":\"al\\\"i\\\\ce\\u000a\",\"endedAt\":\"2025-12-05T15:30:00Z\","
                + "\"keptUntil\":\"2025-12-08T15:30:00Z\"}");
        assertThat(OutcomeQueryServlet.json(new TransactionState("(1,9)", TransactionState.State.NEVER_ISSUED, null,
                null, 0, 0, 0, 0, 0, 7))).isEqualTo("{\"txnId\":\"(1,9)\",\"state\":\"NEVER_ISSUED\",\"highestIssued\":7}");
        assertThat(OutcomeQueryServlet.json(new TransactionState("(1,2)", TransactionState.State.OPEN, null, null,
                1_764_948_600_123L, 60_000, 0, 0, 0, 0))).isEqualTo("{\"txnId\":\"(1,2)\",\"state\":\"OPEN\","
                + "\"openedAt\":\"2025-12-05T15:30:00.123Z\",\"timeoutMillis\":60000}");
    }
}
