package io.github.txnpreserver.it;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.DisplayName;
import org.junit.jupiter.api.Test;

/**
 * {@code broker-conf-overlay/install.sh} never overrides a value the operator set: on the first
 * install, after an edit of its block, and on every run again (the upgrade step). Each case
 * starts from a new copy of the official distribution.
 */
@DisplayName("install.sh keeps the operator's values")
class InstallScriptIT {

    private static final Path SCRIPT = PulsarDistribution.repoRoot().resolve("broker-conf-overlay/install.sh");

    /**
     * Tuning set before the first install (in both files) and inside the block afterwards
     * survives two more runs, and the broker's startup line shows it in force.
     */
    @Test
    void tuningBeforeAndInsideTheBlockSurvivesReinstallsAndIsInForce() throws Exception {
        Path home = PulsarDistribution.freshCopy("install-tuning");
        for (String file : List.of("broker.conf", "standalone.conf")) {
            append(home.resolve("conf").resolve(file), "transactionMetaPersistMaxMemoryInMB=256");
        }
        PulsarDistribution.runInstall(SCRIPT, home);
        for (String file : List.of("broker.conf", "standalone.conf")) {
            Path conf = home.resolve("conf").resolve(file);
            List<String> block = block(conf);
            assertThat(block).as("the operator's key is not repeated in the block").noneMatch(line ->
                    line.startsWith("transactionMetaPersistMaxMemoryInMB="));
            assertThat(block).contains("transactionMetaPersistCount=100", "#transactionMetaPersistTimeInHour=72");
            // The operator edits the block: a count of their own, a default uncommented and changed.
            Files.writeString(conf, Files.readString(conf)
                    .replace("\ntransactionMetaPersistCount=100\n", "\ntransactionMetaPersistCount=7\n")
                    .replace("\n#transactionMetaPersistTimeInHour=72\n", "\ntransactionMetaPersistTimeInHour=0.5\n"));
        }
        String edited = Files.readString(home.resolve("conf/standalone.conf"));

        PulsarDistribution.runInstall(SCRIPT, home);
        PulsarDistribution.runInstall(SCRIPT, home);

        assertThat(Files.readString(home.resolve("conf/standalone.conf"))).as("running it again changes nothing")
                .isEqualTo(edited);
        assertThat(block(home.resolve("conf/broker.conf")))
                .contains("transactionMetaPersistCount=7", "transactionMetaPersistTimeInHour=0.5")
                .noneMatch(line -> line.startsWith("transactionMetaPersistMaxMemoryInMB="));
        try (LocalPulsar pulsar = LocalPulsar.startFrom(home, "install-tuning", Map.of(), Map.of())) {
            assertThat(pulsar.output()).contains("configured: PreserverConfig[persistCountPerClient=7,"
                    + " maxKeptPerCoordinator=100000, persistTime=PT30M, expireCheckInterval=PT5M,"
                    + " stuckRedriveAfter=PT1M, maxMemoryBytes=268435456]");
        }
    }

    /**
     * Protocol handlers and servlets already listed stay listed, and a directory the operator
     * set is where the archive goes; the block names neither directory then.
     */
    @Test
    void theOperatorsListsAndDirectoriesAreKept() throws Exception {
        Path home = PulsarDistribution.freshCopy("install-lists");
        Path conf = home.resolve("conf/broker.conf");
        append(conf, "messagingProtocols=kafka");
        append(conf, "protocolHandlerDirectory=./my-handlers");
        append(conf, "additionalServlets = prometheus-extra");

        String output = PulsarDistribution.runInstall(SCRIPT, home);
        PulsarDistribution.runInstall(SCRIPT, home);

        List<String> block = block(conf);
        assertThat(block).contains("messagingProtocols=kafka,txn-preserver",
                        "additionalServlets=prometheus-extra,txn-preserver",
                        "# protocolHandlerDirectory: set elsewhere in this file (./my-handlers); install.sh leaves it there")
                .filteredOn(line -> line.startsWith("protocolHandlerDirectory=")).isEmpty();
        assertThat(block).as("the servlets' directory defaults to the handlers' one")
                .contains("additionalServletDirectory=" + home.resolve("my-handlers"));
        assertThat(home.resolve("my-handlers/txn-preserver.nar")).isRegularFile();
        assertThat(block(home.resolve("conf/standalone.conf"))).as("each file by its own keys: none set here")
                .contains("messagingProtocols=txn-preserver", "protocolHandlerDirectory=" + home.resolve("protocols"));
        assertThat(home.resolve("protocols/txn-preserver.nar")).isRegularFile();
        assertThat(output).contains(home.resolve("my-handlers/txn-preserver.nar").toString());
        assertThat(Files.readString(conf)).as("one block, however often it runs")
                .containsOnlyOnce("# >>> txn-preserver overlay").containsOnlyOnce("# <<< txn-preserver overlay");
    }

    /**
     * The value in force stays in force whichever way the file sets it (review of issue 37): a
     * value edited into the block over one set above it, a directory edited into the block,
     * the blank separator and a continued line java.util.Properties reads too.
     */
    @Test
    void theValueInForceStaysInForceWhateverTheFormOfTheFile() throws Exception {
        Path home = PulsarDistribution.freshCopy("install-forms");
        Path conf = home.resolve("conf/broker.conf");
        String shipped = Files.readString(conf);

        // Set above, then edited in the block: the block's value was in force and stays so.
        append(conf, "transactionMetaPersistMaxMemoryInMB=256");
        PulsarDistribution.runInstall(SCRIPT, home);
        Files.writeString(conf, Files.readString(conf).replaceFirst(
                "(?m)^# transactionMetaPersistMaxMemoryInMB: set elsewhere.*$", "transactionMetaPersistMaxMemoryInMB=512"));
        // A directory and a list edited in the block.
        Path handlers = home.resolve("my-handlers");
        Files.writeString(conf, Files.readString(conf)
                .replaceFirst("(?m)^protocolHandlerDirectory=.*$", "protocolHandlerDirectory=" + handlers)
                .replaceFirst("(?m)^messagingProtocols=txn-preserver$", "messagingProtocols=kafka,txn-preserver"));
        PulsarDistribution.runInstall(SCRIPT, home);
        PulsarDistribution.runInstall(SCRIPT, home);

        assertThat(block(conf)).contains("transactionMetaPersistMaxMemoryInMB=512", "protocolHandlerDirectory=" + handlers,
                "messagingProtocols=kafka,txn-preserver");
        assertThat(handlers.resolve("txn-preserver.nar")).isRegularFile();

        // The blank separator, and a list continued on the next line.
        Files.writeString(conf, shipped + "\ntransactionMetaPersistCount 5\nmessagingProtocols=kafka,\\\n    mqtt\n");
        PulsarDistribution.runInstall(SCRIPT, home);

        assertThat(block(conf)).contains("messagingProtocols=kafka,mqtt,txn-preserver",
                "# transactionMetaPersistCount: set elsewhere in this file (5); install.sh leaves it there");
    }

    /** A block whose end marker was damaged: nothing is changed, and the error says what to repair. */
    @Test
    void aDamagedBlockIsRefusedAndNothingChanged() throws Exception {
        Path home = PulsarDistribution.freshCopy("install-damaged");
        Path conf = home.resolve("conf/broker.conf");
        PulsarDistribution.runInstall(SCRIPT, home);
        Files.writeString(conf, Files.readString(conf).replace("# <<< txn-preserver overlay\n", "")
                + "webServicePort=8081\n");
        String damaged = Files.readString(conf);

        assertThatThrownBy(() -> PulsarDistribution.runInstall(SCRIPT, home))
                .hasMessageContaining("the txn-preserver block is damaged: its begin marker at line")
                .hasMessageContaining("has no end marker");
        assertThat(Files.readString(conf)).isEqualTo(damaged);
    }

    private static void append(Path conf, String line) throws Exception {
        Files.writeString(conf, Files.readString(conf) + "\n" + line + "\n");
    }

    /** The lines between the block's markers. */
    static List<String> block(Path conf) throws Exception {
        List<String> lines = Files.readAllLines(conf);
        int begin = -1;
        int end = -1;
        for (int i = 0; i < lines.size(); i++) {
            if (lines.get(i).startsWith("# >>> txn-preserver overlay")) {
                assertThat(begin).as("one block").isEqualTo(-1);
                begin = i;
            } else if (lines.get(i).equals("# <<< txn-preserver overlay")) {
                end = i;
            }
        }
        assertThat(begin).as("a block in " + conf).isNotNegative();
        assertThat(end).isGreaterThan(begin);
        return lines.subList(begin + 1, end);
    }
}
