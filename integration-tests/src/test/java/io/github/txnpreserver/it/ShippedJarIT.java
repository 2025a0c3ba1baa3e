package io.github.txnpreserver.it;

import static org.assertj.core.api.Assertions.assertThat;

import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import java.util.jar.JarEntry;
import java.util.jar.JarFile;
import org.junit.jupiter.api.DisplayName;
import org.junit.jupiter.api.Test;

/** What the install step puts into a broker: product code only. */
@DisplayName("The jar the install step ships")
class ShippedJarIT {

    @Test
    void holdsNoTestHookAndNoTestSeamClass() throws Exception {
        Path lib = PulsarDistribution.withPluginInstalled().resolve("lib");
        List<Path> plugin;
        try (var jars = Files.list(lib)) {
            plugin = jars.filter(path -> path.getFileName().toString().startsWith("io.github.txnpreserver-")).toList();
        }
        assertThat(plugin).as("only the plugin's own jar is installed").hasSize(1);
        assertThat(plugin.get(0).getFileName().toString()).doesNotContain("test-hooks");

        List<String> entries;
        try (JarFile jar = new JarFile(plugin.get(0).toFile())) {
            entries = jar.stream().map(JarEntry::getName).toList();
        }
        assertThat(entries).anyMatch(name -> name.endsWith("PreservingMetadataStoreProvider.class"));
        assertThat(entries).noneMatch(name -> name.contains("testhooks") || name.contains("CrashPoint")
                || name.contains("EndMarkerRefusal") || name.contains("Hooked"));
    }
}
