package io.github.txnpreserver.config;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import java.time.Duration;
import java.util.Properties;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.CsvSource;
import org.junit.jupiter.api.DisplayName;
import org.junit.jupiter.api.Test;

@DisplayName("Configuration from broker.conf")
class PreserverConfigTest {

    private static final long MIB = 1024 * 1024;

    private static Properties properties(String... keyValues) {
        Properties properties = new Properties();
        for (int i = 0; i < keyValues.length; i += 2) {
            properties.setProperty(keyValues[i], keyValues[i + 1]);
        }
        return properties;
    }

    @Test
    void defaultsFollowPip255AndLeaveThePluginAsAPassThrough() {
        PreserverConfig config = PreserverConfig.fromProperties(new Properties());

        assertThat(config.enabled()).isFalse();
        assertThat(config.persistCountPerClient()).isZero();
        assertThat(config.persistTime()).isEqualTo(Duration.ofHours(72));
        assertThat(config.expireCheckInterval()).isEqualTo(Duration.ofSeconds(300));
        assertThat(config.maxKeptPerCoordinator()).isEqualTo(100_000);
        assertThat(config.stuckRedriveAfter()).isEqualTo(Duration.ofSeconds(60));
        assertThat(config.maxMemoryBytes()).isEqualTo(64L * MIB);
    }

    @Test
    void readsEveryKey() {
        PreserverConfig config = PreserverConfig.fromProperties(properties(
                "transactionMetaPersistCount", " 50 ",
                "transactionMetaPersistTimeInHour", "1",
                "transactionMetaExpireCheckIntervalInSecond", "10",
                "transactionMetaPersistMaxCountPerCoordinator", "5000",
                "transactionMetaStuckRedriveAfterInSecond", "7",
                "transactionMetaPersistMaxMemoryInMB", "16"));

        assertThat(config).isEqualTo(new PreserverConfig(50, 5000, Duration.ofHours(1), Duration.ofSeconds(10),
                Duration.ofSeconds(7), 16 * MIB));
        assertThat(config.enabled()).isTrue();
    }

    @Test
    void theTimeToLiveMayBeAFractionOfAnHour() {
        PreserverConfig config = PreserverConfig.fromProperties(properties("transactionMetaPersistTimeInHour", "0.001"));

        assertThat(config.persistTime()).isEqualTo(Duration.ofMillis(3600));
    }

    @Test
    void anEmptyValueMeansTheDefault() {
        assertThat(PreserverConfig.fromProperties(properties("transactionMetaPersistCount", "")).enabled()).isFalse();
    }

    @ParameterizedTest(name = "{0}={1} is refused: {2}")
    @CsvSource({
            "transactionMetaPersistCount, -1, must be at least 0",
            "transactionMetaPersistCount, ten, is not a whole number",
            "transactionMetaPersistCount, 3000000000, must be at most 2147483647",
            "transactionMetaPersistTimeInHour, 0, must be greater than 0",
            "transactionMetaPersistTimeInHour, -5, must be greater than 0",
            "transactionMetaPersistTimeInHour, soon, is not a number of hours",
            "transactionMetaExpireCheckIntervalInSecond, 0, must be at least 1",
            "transactionMetaExpireCheckIntervalInSecond, 1.5, is not a whole number",
            "transactionMetaExpireCheckIntervalInSecond, 31536001, must be at most 31536000",
            "transactionMetaExpireCheckIntervalInSecond, 9300000000, must be at most 31536000",
            "transactionMetaStuckRedriveAfterInSecond, 31536001, must be at most 31536000",
            "transactionMetaPersistTimeInHour, 876001, must be at most 876000 (a hundred years)",
            "transactionMetaPersistTimeInHour, 0.0000000001, must be at least 1 ms",
            "transactionMetaPersistMaxCountPerCoordinator, 0, must be at least 1",
            "transactionMetaStuckRedriveAfterInSecond, 0, must be at least 1",
            "transactionMetaPersistMaxMemoryInMB, 0, must be at least 0.01",
            "transactionMetaPersistMaxMemoryInMB, -64, must be at least 0.01",
            "transactionMetaPersistMaxMemoryInMB, 0.005, must be at least 0.01",
            "transactionMetaPersistMaxMemoryInMB, 64MB, is not a number of MiB",
            "transactionMetaPersistMaxMemoryInMB, 8796093022208, must be at most 8796093022207"
    })
    void aWrongValueIsRefusedWithAMessageNamingTheKeyAndTheValue(String key, String value, String problem) {
        assertThatThrownBy(() -> PreserverConfig.fromProperties(properties(key, value)))
                .isInstanceOf(InvalidConfigException.class)
                .hasMessage("Invalid broker configuration " + key + "=" + value + ": " + problem);
    }

    /** The largest values allowed open a coordinator: a scheduler can take each as a delay. */
    @Test
    void theLargestIntervalsAndRetentionAreAccepted() {
        Properties largest = new Properties();
        largest.setProperty("transactionMetaExpireCheckIntervalInSecond", "31536000");
        largest.setProperty("transactionMetaStuckRedriveAfterInSecond", "31536000");
        largest.setProperty("transactionMetaPersistTimeInHour", "876000");
        PreserverConfig config = PreserverConfig.fromProperties(largest);

        assertThat(config.expireCheckInterval().toNanos()).isEqualTo(31_536_000L * 1_000_000_000L);
        assertThat(config.stuckRedriveAfter().toNanos()).isEqualTo(31_536_000L * 1_000_000_000L);
        assertThat(System.currentTimeMillis() + config.persistTime().toMillis()).as("an end time plus the retention")
                .isPositive();
    }

    @ParameterizedTest(name = "{0} MiB is {1} bytes")
    @CsvSource({"1, 1048576", "0.5, 524288", "0.01, 10485", "2048, 2147483648"})
    void theMemoryBoundIsReadInMebibytesWithAnOptionalFraction(String mebibytes, long bytes) {
        PreserverConfig config = PreserverConfig.fromProperties(properties("transactionMetaPersistMaxMemoryInMB",
                mebibytes));

        assertThat(config.maxMemoryBytes()).isEqualTo(bytes);
    }

    @Test
    void aMemoryBoundUnderTheMinimumIsRefusedNamingItsKey() {
        assertThatThrownBy(() -> new PreserverConfig(1, 1, Duration.ofHours(1), Duration.ofSeconds(1),
                Duration.ofSeconds(1), MIB / 100 - 1))
                .isInstanceOf(InvalidConfigException.class)
                .hasMessageStartingWith("Invalid broker configuration transactionMetaPersistMaxMemoryInMB=")
                .satisfies(e -> assertThat(((InvalidConfigException) e).key())
                        .isEqualTo(PreserverConfig.MAX_MEMORY_IN_MB));
    }
}
