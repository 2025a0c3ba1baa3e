package io.github.txnpreserver.broker;

import java.io.IOException;
import java.io.InputStream;
import java.util.Properties;

/**
 * The plugin's version and the commit it was built from, as the build wrote them beside the
 * classes: named in the startup line and in the {@code build_info} metric, so that an operator
 * can tell a release from a build of main.
 *
 * @param version the Maven version ({@code -SNAPSHOT} for a build of main)
 * @param commit the abbreviated commit, or "unknown" where the sources were not a git checkout
 */
public record PluginBuild(String version, String commit) {

    static final String UNKNOWN = "unknown";

    /** This jar's build. */
    public static final PluginBuild CURRENT = read();

    private static PluginBuild read() {
        try (InputStream in = PluginBuild.class.getResourceAsStream("/io/github/txnpreserver/txn-preserver.properties")) {
            if (in == null) {
                return new PluginBuild(UNKNOWN, UNKNOWN);
            }
            Properties properties = new Properties();
            properties.load(in);
            return new PluginBuild(filled(properties.getProperty("version")), filled(properties.getProperty("commit")));
        } catch (IOException e) {
            return new PluginBuild(UNKNOWN, UNKNOWN);
        }
    }

    /** A value the build filled in; an empty or unfilled one ({@code ${...}}) is unknown. */
    static String filled(String value) {
        return value == null || value.isBlank() || value.startsWith("${") ? UNKNOWN : value.trim();
    }

    /** As the startup line names it: {@code 0.7.0 (commit 1a2b3c4d5e6f)}. */
    @Override
    public String toString() {
        return version + " (commit " + commit + ")";
    }
}
