package io.github.txnpreserver.config;

import java.math.BigDecimal;
import java.time.Duration;
import java.util.Properties;

/**
 * The plugin's settings, read from broker.conf.
 *
 * <p>Keys follow PIP-255 and broker.conf conventions (lower camel case). Every
 * value is validated when the broker starts: a wrong value stops the broker
 * with a message naming the key and the value, instead of letting a coordinator
 * run with a retention nobody asked for.
 */
public record PreserverConfig(
        int persistCountPerClient,
        int maxKeptPerCoordinator,
        Duration persistTime,
        Duration expireCheckInterval,
        Duration stuckRedriveAfter,
        long maxMemoryBytes) {

    /** How many ended transactions are kept per client; 0 turns the plugin into a pass-through. */
    public static final String PERSIST_COUNT = "transactionMetaPersistCount";
    /** Age after which a kept outcome expires, in hours (a fraction is allowed). */
    public static final String PERSIST_TIME_IN_HOUR = "transactionMetaPersistTimeInHour";
    /** How often expiry runs. */
    public static final String EXPIRE_CHECK_INTERVAL_IN_SECOND = "transactionMetaExpireCheckIntervalInSecond";
    /**
     * Cap on the outcomes one coordinator keeps by the per-client floor (each client's newest
     * {@link #PERSIST_COUNT}), across all clients, so that many distinct clients cannot
     * exhaust the heap through the floor.
     */
    public static final String MAX_KEPT_PER_COORDINATOR = "transactionMetaPersistMaxCountPerCoordinator";
    /**
     * Heap the kept outcomes of all the coordinators of one broker may use, in MiB. When the
     * retention time would need more, the oldest outcomes go first (the per-client floor
     * excepted).
     */
    public static final String MAX_MEMORY_IN_MB = "transactionMetaPersistMaxMemoryInMB";
    /**
     * How long a transaction may stay COMMITTING/ABORTING with no end step in flight before
     * the plugin re-drives its end in the background (stock Pulsar waits for a client retry
     * or a coordinator reload, while its partitions' consumers are stopped).
     */
    public static final String STUCK_REDRIVE_AFTER_IN_SECOND = "transactionMetaStuckRedriveAfterInSecond";

    public static final int DEFAULT_PERSIST_COUNT = 0;
    public static final long DEFAULT_PERSIST_TIME_IN_HOUR = 72;
    public static final long DEFAULT_EXPIRE_CHECK_INTERVAL_IN_SECOND = 300;
    public static final int DEFAULT_MAX_KEPT_PER_COORDINATOR = 100_000;
    public static final long DEFAULT_STUCK_REDRIVE_AFTER_IN_SECOND = 60;
    /** 64 MiB: about 24 M outcomes with one owner role, 12 M with many (docs/DESIGN.md, "Cost"). */
    public static final long DEFAULT_MAX_MEMORY_IN_MB = 64;
    /**
     * The longest interval or delay a key may name, in seconds: a year. Longer ones mean
     * "never" in practice, and past about 292 years in nanoseconds a scheduler's delay
     * overflows (the opening would fail after the log's replay, leaking what it had opened).
     */
    public static final long MAX_SECONDS = 365L * 24 * 3600;
    /**
     * The longest retention, in hours: a hundred years, so that an end time plus the retention
     * (the time until which an outcome stays known) cannot overflow.
     */
    public static final long MAX_PERSIST_TIME_IN_HOUR = 100L * 365 * 24;
    private static final long MIB = 1024 * 1024;
    /** 0.01 MiB: a few blocks of outcomes; small bounds exist for tests of the bound itself. */
    private static final long MIN_MEMORY_BYTES = MIB / 100;

    /** Settings with the default memory bound. */
    public PreserverConfig(int persistCountPerClient, int maxKeptPerCoordinator, Duration persistTime,
                           Duration expireCheckInterval, Duration stuckRedriveAfter) {
        this(persistCountPerClient, maxKeptPerCoordinator, persistTime, expireCheckInterval, stuckRedriveAfter,
                DEFAULT_MAX_MEMORY_IN_MB * MIB);
    }

    public PreserverConfig {
        requireAtLeast(PERSIST_COUNT, persistCountPerClient, 0);
        requireAtLeast(MAX_KEPT_PER_COORDINATOR, maxKeptPerCoordinator, 1);
        if (persistTime.isNegative() || persistTime.isZero()) {
            throw new InvalidConfigException(PERSIST_TIME_IN_HOUR, persistTime, "must be greater than 0");
        }
        if (expireCheckInterval.isNegative() || expireCheckInterval.isZero()) {
            throw new InvalidConfigException(EXPIRE_CHECK_INTERVAL_IN_SECOND, expireCheckInterval.toSeconds(),
                    "must be at least 1");
        }
        if (stuckRedriveAfter.isNegative() || stuckRedriveAfter.isZero()) {
            throw new InvalidConfigException(STUCK_REDRIVE_AFTER_IN_SECOND, stuckRedriveAfter.toSeconds(),
                    "must be at least 1");
        }
        if (maxMemoryBytes < MIN_MEMORY_BYTES) {
            throw new InvalidConfigException(MAX_MEMORY_IN_MB, maxMemoryBytes / (double) MIB, "must be at least 0.01");
        }
    }

    /** Reads the plugin's keys from the broker's properties (broker.conf and its overrides). */
    public static PreserverConfig fromProperties(Properties properties) {
        int count = (int) readLong(properties, PERSIST_COUNT, DEFAULT_PERSIST_COUNT, 0, Integer.MAX_VALUE);
        int maxKept = (int) readLong(properties, MAX_KEPT_PER_COORDINATOR, DEFAULT_MAX_KEPT_PER_COORDINATOR,
                1, Integer.MAX_VALUE);
        Duration persistTime = readHours(properties, PERSIST_TIME_IN_HOUR, DEFAULT_PERSIST_TIME_IN_HOUR);
        long seconds = readLong(properties, EXPIRE_CHECK_INTERVAL_IN_SECOND, DEFAULT_EXPIRE_CHECK_INTERVAL_IN_SECOND,
                1, MAX_SECONDS);
        long stuckSeconds = readLong(properties, STUCK_REDRIVE_AFTER_IN_SECOND, DEFAULT_STUCK_REDRIVE_AFTER_IN_SECOND,
                1, MAX_SECONDS);
        long memoryBytes = readMebibytes(properties, MAX_MEMORY_IN_MB, DEFAULT_MAX_MEMORY_IN_MB);
        return new PreserverConfig(count, maxKept, persistTime, Duration.ofSeconds(seconds),
                Duration.ofSeconds(stuckSeconds), memoryBytes);
    }

    /** Whether outcomes are kept at all; when not, the coordinator is the stock one. */
    public boolean enabled() {
        return persistCountPerClient > 0;
    }

    /**
     * Hours may have a fraction (0.5 is 30 minutes): PIP-255 declares a whole number, which
     * this reads unchanged, and a fraction lets a test or a short-lived deployment use a
     * time-to-live under an hour without a second key for the same setting.
     */
    private static Duration readHours(Properties properties, String key, long defaultHours) {
        String text = valueOf(properties, key);
        if (text == null) {
            return Duration.ofHours(defaultHours);
        }
        BigDecimal hours;
        try {
            hours = new BigDecimal(text);
        } catch (NumberFormatException e) {
            throw new InvalidConfigException(key, text, "is not a number of hours");
        }
        if (hours.signum() <= 0) {
            throw new InvalidConfigException(key, text, "must be greater than 0");
        }
        BigDecimal millis = hours.multiply(BigDecimal.valueOf(Duration.ofHours(1).toMillis()));
        if (millis.compareTo(BigDecimal.ONE) < 0) {
            throw new InvalidConfigException(key, text, "must be at least 1 ms");
        }
        if (hours.compareTo(BigDecimal.valueOf(MAX_PERSIST_TIME_IN_HOUR)) > 0) {
            throw new InvalidConfigException(key, text, "must be at most " + MAX_PERSIST_TIME_IN_HOUR
                    + " (a hundred years)");
        }
        return Duration.ofMillis(millis.longValue());
    }

    /** MiB with an optional fraction (0.5 is 512 KiB), as hours are read. */
    private static long readMebibytes(Properties properties, String key, long defaultMebibytes) {
        String text = valueOf(properties, key);
        if (text == null) {
            return defaultMebibytes * MIB;
        }
        BigDecimal mebibytes;
        try {
            mebibytes = new BigDecimal(text);
        } catch (NumberFormatException e) {
            throw new InvalidConfigException(key, text, "is not a number of MiB");
        }
        BigDecimal bytes = mebibytes.multiply(BigDecimal.valueOf(MIB));
        if (bytes.compareTo(BigDecimal.valueOf(MIN_MEMORY_BYTES)) < 0) {
            throw new InvalidConfigException(key, text, "must be at least 0.01");
        }
        if (bytes.compareTo(BigDecimal.valueOf(Long.MAX_VALUE)) > 0) {
            throw new InvalidConfigException(key, text, "must be at most " + Long.MAX_VALUE / MIB);
        }
        return bytes.longValue();
    }

    private static String valueOf(Properties properties, String key) {
        Object raw = properties.get(key);
        if (raw == null) {
            return null;
        }
        String text = raw.toString().trim();
        return text.isEmpty() ? null : text;
    }

    private static long readLong(Properties properties, String key, long defaultValue, long min, long max) {
        String text = valueOf(properties, key);
        if (text == null) {
            return defaultValue;
        }
        long value;
        try {
            value = Long.parseLong(text);
        } catch (NumberFormatException e) {
            throw new InvalidConfigException(key, text, "is not a whole number");
        }
        if (value < min) {
            throw new InvalidConfigException(key, text, "must be at least " + min);
        }
        if (value > max) {
            throw new InvalidConfigException(key, text, "must be at most " + max);
        }
        return value;
    }

    private static void requireAtLeast(String key, long value, long min) {
        if (value < min) {
            throw new InvalidConfigException(key, value, "must be at least " + min);
        }
    }
}
