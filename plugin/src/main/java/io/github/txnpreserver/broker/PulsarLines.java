package io.github.txnpreserver.broker;

import java.util.List;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

/**
 * Where the plugin runs: which Pulsar lines it supports, and the releases with a known
 * defect that bears on it. Logged once at start, so that an operator reads in the broker's
 * log what the README's compatibility table says about this broker.
 */
final class PulsarLines {

    /** A release line the plugin supports, and how it is tested there. */
    record Line(int major, int minor, String testedOn) {
    }

    /**
     * A release whose defect bears on a broker the plugin runs on, and the release that fixes
     * it; {@code withInterceptors}: only where broker interceptors are configured.
     */
    record KnownDefect(String version, String defect, String fixedIn, boolean withInterceptors) {
    }

    static final List<Line> TESTED = List.of(
            new Line(4, 0, "tested on 4.0.8, its official distribution"),
            new Line(4, 2, "tested on 4.2.4, its broker jars"),
            new Line(5, 0, "tested on 5.0.1, its broker jars; Java 21 or later"));

    static final List<KnownDefect> DEFECTS = List.of(
            new KnownDefect("4.0.12", "with any broker interceptor loaded (this plugin loads none), every admin"
                    + " POST or PUT request with a JSON body fails with HTTP 400 (FAIL_ON_TRAILING_TOKENS,"
                    + " apache/pulsar#26185): the operator's admin tools break", "4.0.13", true));

    private static final Pattern VERSION = Pattern.compile("(\\d+)\\.(\\d+)\\.(\\d+).*");

    /** What to log about this broker's release. */
    record Assessment(boolean warn, String message) {
    }

    private PulsarLines() {
    }

    /** @param interceptors whether the broker is configured with broker interceptors (the plugin is none) */
    static Assessment assess(String version, boolean interceptors) {
        Matcher matcher = VERSION.matcher(version == null ? "" : version.trim());
        if (!matcher.matches()) {
            return new Assessment(true, "Pulsar version '" + version + "' not recognised; the plugin supports "
                    + lines());
        }
        String release = matcher.group(1) + "." + matcher.group(2) + "." + matcher.group(3);
        for (KnownDefect known : DEFECTS) {
            if (known.version().equals(release) && (interceptors || !known.withInterceptors())) {
                return new Assessment(true, "Pulsar " + version + ": " + known.defect() + "; fixed in "
                        + known.fixedIn() + ", upgrade the broker to it or later");
            }
        }
        int major = Integer.parseInt(matcher.group(1));
        int minor = Integer.parseInt(matcher.group(2));
        for (Line line : TESTED) {
            if (line.major() == major && line.minor() == minor) {
                return new Assessment(false, "Pulsar " + version + ": line " + major + "." + minor
                        + " is supported (" + line.testedOn() + ")");
            }
        }
        return new Assessment(true, "Pulsar " + version + ": line " + major + "." + minor
                + " is not one the plugin supports (" + lines() + ")");
    }

    private static String lines() {
        StringBuilder text = new StringBuilder();
        for (Line line : TESTED) {
            text.append(text.length() == 0 ? "" : ", ").append(line.major()).append('.').append(line.minor())
                    .append(".x");
        }
        return text.toString();
    }
}
