package io.github.txnpreserver.suite;

import static net.bytebuddy.matcher.ElementMatchers.named;
import static net.bytebuddy.matcher.ElementMatchers.takesArguments;

import io.github.txnpreserver.broker.PreservingMetadataStoreProvider;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.lang.instrument.Instrumentation;
import java.net.URISyntaxException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardCopyOption;
import java.util.LinkedHashMap;
import java.util.LinkedHashSet;
import java.util.Map;
import java.util.Set;
import net.bytebuddy.agent.ByteBuddyAgent;
import net.bytebuddy.agent.builder.AgentBuilder;
import net.bytebuddy.asm.Advice;
import org.apache.pulsar.broker.PulsarService;
import org.apache.pulsar.broker.ServiceConfiguration;
import org.apache.pulsar.common.util.FieldParser;
import org.apache.pulsar.transaction.coordinator.impl.MLTransactionMetadataStoreProvider;
import org.testng.IExecutionListener;

/**
 * Switches every broker that Pulsar's tests start onto the plugin, as
 * {@code broker-conf-overlay/install.sh} switches a real one: the overlay's keys are applied
 * to the broker's configuration when it starts, and its protocol handler archive (the plugin
 * jar under the name install.sh gives it) is loaded by the broker from
 * {@code protocolHandlerDirectory}.
 *
 * <p>Pulsar's test classes build their brokers' configurations in many places (some in
 * private methods of their base classes), so the switch sits where every broker passes:
 * {@code PulsarService.start()}, rewritten when the test JVM starts. A test that picks a
 * coordinator store other than the stock managed-ledger one keeps it: the plugin extends
 * that store only.
 *
 * <p>With {@code -Dtxnpreserver.suite.stock=true} nothing is switched: the same selection
 * runs on stock brokers, to compare.
 */
public class PluginSwitch implements IExecutionListener {

    static final String HANDLER_NAME = "txn-preserver";
    /** Keys of the overlay that are the test's choice, not the plugin's. */
    private static final Set<String> LEFT_TO_THE_TEST = Set.of("transactionCoordinatorEnabled");
    private static volatile Map<String, String> overlay;

    @Override
    public void onExecutionStart() {
        if (stockBrokers()) {
            System.out.println("[pulsar-suite] stock brokers: the plugin is not switched on");
            return;
        }
        overlay = readOverlay(prepareHandlerDirectory());
        Instrumentation instrumentation = ByteBuddyAgent.install();
        new AgentBuilder.Default()
                .disableClassFormatChanges()
                .with(AgentBuilder.RedefinitionStrategy.RETRANSFORMATION)
                .type(named("org.apache.pulsar.broker.PulsarService"))
                .transform(new AgentBuilder.Transformer.ForAdvice()
                        .include(PluginSwitch.class.getClassLoader())
                        .advice(named("start").and(takesArguments(0)), OnStart.class.getName()))
                .installOn(instrumentation);
        System.out.println("[pulsar-suite] every broker switched onto the plugin with " + overlay);
    }

    /** Whether this run keeps the brokers stock ({@code -Dtxnpreserver.suite.stock=true}), to compare. */
    static boolean stockBrokers() {
        return Boolean.getBoolean("txnpreserver.suite.stock");
    }

    /** The plugin jar, copied where a broker loads protocol handlers from, as install.sh does. */
    private static Path prepareHandlerDirectory() {
        try {
            Path jar = Path.of(PreservingMetadataStoreProvider.class.getProtectionDomain().getCodeSource()
                    .getLocation().toURI());
            if (!Files.isRegularFile(jar)) {
                throw new IllegalStateException("the plugin is not a packaged jar here (" + jar
                        + "): run the suite with 'mvn verify', which packages it first");
            }
            Path directory = Path.of(System.getProperty("txnpreserver.suite.work.dir", "target/suite"))
                    .toAbsolutePath().resolve("protocols");
            Files.createDirectories(directory);
            Files.copy(jar, directory.resolve(HANDLER_NAME + ".nar"), StandardCopyOption.REPLACE_EXISTING);
            return directory;
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        } catch (URISyntaxException e) {
            throw new IllegalStateException(e);
        }
    }

    /** The keys of broker-conf-overlay/txn-preserver.conf, with install.sh's substitutions. */
    private static Map<String, String> readOverlay(Path handlerDirectory) {
        Path file = Path.of(System.getProperty("txnpreserver.suite.overlay",
                "../broker-conf-overlay/txn-preserver.conf"));
        Map<String, String> keys = new LinkedHashMap<>();
        try {
            for (String line : Files.readAllLines(file)) {
                String trimmed = line.strip();
                int equals = trimmed.indexOf('=');
                if (trimmed.isEmpty() || trimmed.startsWith("#") || equals < 0) {
                    continue;
                }
                String key = trimmed.substring(0, equals).strip();
                String value = trimmed.substring(equals + 1).strip()
                        .replace("@DIRECTORY@", handlerDirectory.toString())
                        .replace("@LIST@", HANDLER_NAME);
                if (key.equals("transactionMetaPersistCount")) {
                    value = System.getProperty("txnpreserver.suite.persistCount", value);
                }
                if (!LEFT_TO_THE_TEST.contains(key)) {
                    keys.put(key, value);
                }
            }
        } catch (IOException e) {
            throw new UncheckedIOException("cannot read the overlay " + file.toAbsolutePath(), e);
        }
        return keys;
    }

    /** Applies the overlay to a broker's configuration before the broker reads it. */
    public static void switchOn(ServiceConfiguration conf) {
        Map<String, String> keys = new LinkedHashMap<>(overlay);
        String provider = conf.getTransactionMetadataStoreProviderClassName();
        if (!MLTransactionMetadataStoreProvider.class.getName().equals(provider)
                && !PreservingMetadataStoreProvider.class.getName().equals(provider)) {
            keys.remove("transactionMetadataStoreProviderClassName");
        }
        Set<String> protocols = new LinkedHashSet<>(conf.getMessagingProtocols());
        protocols.add(HANDLER_NAME);
        keys.put("messagingProtocols", String.join(",", protocols));
        FieldParser.update(keys, conf);
        keys.forEach(conf.getProperties()::setProperty);
    }

    /** Inlined at the start of {@code PulsarService.start()}. */
    public static class OnStart {
        @Advice.OnMethodEnter
        public static void enter(@Advice.This PulsarService pulsar) {
            PluginSwitch.switchOn(pulsar.getConfiguration());
        }
    }
}
