package io.github.txnpreserver.suite;

import java.io.BufferedReader;
import java.io.IOException;
import java.io.InputStreamReader;
import java.io.UncheckedIOException;
import java.nio.charset.StandardCharsets;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.stream.Collectors;
import org.testng.IMethodInstance;
import org.testng.IMethodInterceptor;
import org.testng.ITestContext;

/**
 * Leaves out, with the plugin on, the tests listed in {@code differences.txt}: they assert
 * what stock answers where the plugin answers otherwise on purpose (a retried end gets the
 * transaction's outcome, not {@code TransactionNotFound}). Each is listed with its reason,
 * printed when it is left out; on stock brokers ({@code -Dtxnpreserver.suite.stock=true})
 * every test runs.
 */
public class KnownDifferences implements IMethodInterceptor {

    private static final Map<String, String> DIFFERENCES = read();

    @Override
    public List<IMethodInstance> intercept(List<IMethodInstance> methods, ITestContext context) {
        if (PluginSwitch.stockBrokers()) {
            return methods;
        }
        return methods.stream().filter(method -> {
            String name = method.getMethod().getRealClass().getName() + "#" + method.getMethod().getMethodName();
            String reason = DIFFERENCES.get(name);
            if (reason != null) {
                System.out.println("[pulsar-suite] left out, differs on purpose: " + name + " -- " + reason);
            }
            return reason == null;
        }).collect(Collectors.toList());
    }

    private static Map<String, String> read() {
        Map<String, String> differences = new LinkedHashMap<>();
        try (BufferedReader reader = new BufferedReader(new InputStreamReader(
                KnownDifferences.class.getResourceAsStream("/differences.txt"), StandardCharsets.UTF_8))) {
            for (String line : reader.lines().collect(Collectors.toList())) {
                if (line.isBlank() || line.startsWith("#")) {
                    continue;
                }
                int separator = line.indexOf(" -- ");
                if (separator < 0) {
                    throw new IllegalStateException("differences.txt: no ' -- reason' in: " + line);
                }
                differences.put(line.substring(0, separator).strip(), line.substring(separator + 4).strip());
            }
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        }
        return differences;
    }
}
