package io.github.txnpreserver.it;

import static org.assertj.core.api.Assertions.assertThatThrownBy;

import java.util.Map;
import org.junit.jupiter.api.DisplayName;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.CsvSource;

@DisplayName("A wrong value in broker.conf")
class BadConfigurationIT {

    @ParameterizedTest(name = "{0}={1}")
    @CsvSource({
            "transactionMetaPersistCount, -1",
            "transactionMetaExpireCheckIntervalInSecond, 0",
            "transactionMetaPersistTimeInHour, soon",
            // Above each bound: before the bounds, an interval this long failed inside the
            // coordinator's open, after its replay, leaking its log, producer and thread.
            "transactionMetaExpireCheckIntervalInSecond, 9300000000",
            "transactionMetaStuckRedriveAfterInSecond, 31536001",
            "transactionMetaPersistTimeInHour, 876001"
    })
    void stopsTheBrokerAtStartWithAMessageNamingTheKeyAndTheValue(String key, String value) {
        assertThatThrownBy(() -> LocalPulsar.start("bad-config", Map.of(key, value)).close())
                .isInstanceOf(IllegalStateException.class)
                .hasMessageContaining("exited with")
                .hasMessageContaining("Invalid broker configuration " + key + "=" + value);
    }
}
