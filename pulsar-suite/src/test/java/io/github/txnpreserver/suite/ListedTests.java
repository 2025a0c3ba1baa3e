package io.github.txnpreserver.suite;

import java.io.BufferedReader;
import java.io.IOException;
import java.io.InputStream;
import java.io.InputStreamReader;
import java.io.UncheckedIOException;
import java.nio.charset.StandardCharsets;
import java.util.Collections;
import java.util.LinkedHashMap;
import java.util.Map;
import java.util.function.Function;

/**
 * A list of Pulsar's tests kept as a resource, one entry per line with its fields split by
 * {@code " -- "}, blank lines and {@code #} comments skipped; each test listed once. A line
 * that does not parse stops the suite, naming the file and the line.
 */
final class ListedTests {

    private ListedTests() {
    }

    /**
     * Reads {@code resource}: {@code parse} makes an entry of a line's fields or throws
     * {@link IllegalArgumentException} saying what a line must be; {@code test} names the
     * entry's test ({@code class#method}).
     */
    static <T> Map<String, T> read(String resource, Function<String[], T> parse, Function<T, String> test) {
        Map<String, T> entries = new LinkedHashMap<>();
        InputStream in = ListedTests.class.getResourceAsStream("/" + resource);
        if (in == null) {
            throw new IllegalStateException(resource + ": not on the test class path");
        }
        try (BufferedReader reader = new BufferedReader(new InputStreamReader(in, StandardCharsets.UTF_8))) {
            String line;
            while ((line = reader.readLine()) != null) {
                if (line.isBlank() || line.startsWith("#")) {
                    continue;
                }
                T entry;
                try {
                    entry = parse.apply(line.split(" -- ", -1));
                } catch (IllegalArgumentException malformed) {
                    throw new IllegalStateException(resource + ": " + malformed.getMessage() + ": " + line, malformed);
                }
                if (entries.put(test.apply(entry), entry) != null) {
                    throw new IllegalStateException(resource + ": listed twice: " + test.apply(entry));
                }
            }
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        }
        return Collections.unmodifiableMap(entries);
    }
}
