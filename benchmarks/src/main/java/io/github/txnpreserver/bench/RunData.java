package io.github.txnpreserver.bench;

import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Comparator;
import java.util.List;
import java.util.stream.Stream;

/**
 * Drops what a stopped benchmark broker stored (its bookie's and ZooKeeper's data, several GB a
 * run) and keeps what a run is read by afterwards: its configuration, {@code broker.out} and
 * {@code logs/}. A day of runs kept filled the disk, and a bookie refuses writes at 95 %.
 */
final class RunData {

    private static final List<String> DATA = List.of("bookkeeper", "bookkeeper0", "zookeeper", "tmp");

    private RunData() {
    }

    static void drop(Path brokerDir) {
        for (String name : DATA) {
            Path data = brokerDir.resolve(name);
            if (!Files.isDirectory(data)) {
                continue;
            }
            try (Stream<Path> paths = Files.walk(data)) {
                for (Path path : paths.sorted(Comparator.reverseOrder()).toList()) {
                    Files.deleteIfExists(path);
                }
            } catch (IOException | UncheckedIOException e) {
                System.err.println("could not delete " + data + ": " + e);
            }
        }
    }
}
