package io.github.txnpreserver.suite;

import java.lang.reflect.Field;
import java.util.Collections;
import java.util.IdentityHashMap;
import java.util.List;
import java.util.Map;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import java.util.stream.Collectors;
import org.apache.pulsar.tests.TestRetrySupport;
import org.testng.IInvokedMethod;
import org.testng.IInvokedMethodListener;
import org.testng.IMethodInstance;
import org.testng.IMethodInterceptor;
import org.testng.ITestContext;
import org.testng.ITestNGMethod;
import org.testng.ITestResult;
import org.testng.SkipException;

/**
 * The tests listed in {@code differences.txt}: they assert what stock answers where the plugin
 * answers otherwise on purpose (a retried end gets the transaction's outcome, not
 * {@code TransactionNotFound}). With the plugin on, each is reported as skipped with its
 * reason (the reports' {@code <skipped message="..."/>}):
 * <ul>
 *   <li>an entry of the whole method is skipped before it runs;</li>
 *   <li>a narrowed entry ({@code at LINE EXCEPTION}) runs, and is skipped only if it fails with
 *       exactly that exception thrown from that line of the method itself, its differing
 *       assertion, which is its last check: a failure anywhere else stays a failure, and a pass
 *       fails too (the listed difference no longer shows, so the list is out of date).</li>
 * </ul>
 * A test reported so leaves its class's brokers as a pass on stock leaves them: Pulsar's
 * {@code TestRetrySupport} stops and starts a class's brokers again after any result that is
 * not a success, which would give the tests after it fresh brokers, a start that no stock run
 * gives them (and that some of Pulsar's tests do not survive: a namespace deleted and created
 * again at once, a bundle not yet owned).
 *
 * <p>On stock brokers ({@code -Dtxnpreserver.suite.stock=true}) every test runs whole. With
 * {@code -Dtxnpreserver.suite.onlyDifferences=true} only the listed tests run (the full tier's
 * stock check of the list).
 */
public class KnownDifferences implements IMethodInterceptor, IInvokedMethodListener {

    static final String ONLY_DIFFERENCES = "txnpreserver.suite.onlyDifferences";
    private static final String NARROWED = "narrowed to ";
    private static final String WHOLE = "whole method: ";
    /** {@code class#method [at LINE EXCEPTION]}. */
    private static final Pattern TEST = Pattern.compile(
            "([\\w.$]+#\\w+)(?:\\s+at\\s+(\\d+)\\s+([\\w.$]+))?");

    private static final Map<String, Difference> DIFFERENCES = read();
    /** The test instances whose last test was reported as a listed difference, with that test's result. */
    private static final Map<Object, ITestResult> REPORTED = Collections.synchronizedMap(new IdentityHashMap<>());

    /** One entry of differences.txt. */
    record Difference(String test, int line, String failure, String differs, String narrowing) {

        boolean narrowed() {
            return failure != null;
        }
    }

    @Override
    public List<IMethodInstance> intercept(List<IMethodInstance> methods, ITestContext context) {
        if (!Boolean.getBoolean(ONLY_DIFFERENCES)) {
            return methods;
        }
        List<IMethodInstance> listed = methods.stream()
                .filter(method -> DIFFERENCES.containsKey(name(method.getMethod())))
                .collect(Collectors.toList());
        System.out.println("[pulsar-suite] only the listed differences: " + listed.size() + " of "
                + methods.size() + " test methods");
        return listed;
    }

    @Override
    public void beforeInvocation(IInvokedMethod method, ITestResult result) {
        Difference difference = applicable(method);
        if (difference == null || difference.narrowed() || result.getStatus() == ITestResult.SKIP) {
            // Skipped by TestNG itself (a setup that failed): that reason stands.
            return;
        }
        String message = "differs on purpose: " + difference.differs() + ". Not run with the plugin on ("
                + difference.narrowing() + ")";
        System.out.println("[pulsar-suite] skipped: " + difference.test() + " -- " + message);
        result.setStatus(ITestResult.SKIP);
        result.setThrowable(new SkipException(message));
        REPORTED.put(result.getInstance(), result);
    }

    @Override
    public void afterInvocation(IInvokedMethod method, ITestResult result) {
        if (method.isConfigurationMethod()) {
            keepBrokers(method, result);
            return;
        }
        Difference difference = applicable(method);
        if (difference == null || !difference.narrowed()) {
            return;
        }
        String where = method.getTestMethod().getConstructorOrMethod().getDeclaringClass().getSimpleName()
                + ".java:" + difference.line();
        if (result.getStatus() == ITestResult.SUCCESS) {
            result.setStatus(ITestResult.FAILURE);
            result.setThrowable(new AssertionError("listed in differences.txt as failing with the plugin on with "
                    + difference.failure() + " at " + where + " (" + difference.differs()
                    + "), but it passed: the difference no longer shows; update differences.txt"));
            return;
        }
        if (result.getStatus() != ITestResult.FAILURE) {
            return;
        }
        Throwable failure = result.getThrowable();
        if (failure == null || !failure.getClass().getName().equals(difference.failure())
                || thrownAt(failure, method.getTestMethod()) != difference.line()) {
            System.out.println("[pulsar-suite] " + difference.test() + " failed before or other than at its"
                    + " differing assertion (" + difference.failure() + " at " + where + "): a real failure");
            return;
        }
        String firstLine = String.valueOf(failure.getMessage()).lines().findFirst().orElse("");
        String message = "differs on purpose: " + difference.differs() + ". Ran with the plugin on and failed"
                + " only at its differing assertion, " + where + " [" + failure.getClass().getSimpleName() + ": "
                + firstLine + "] (" + difference.narrowing() + ")";
        System.out.println("[pulsar-suite] skipped after its run: " + difference.test() + " -- " + message);
        result.setStatus(ITestResult.SKIP);
        result.setThrowable(new SkipException(message, failure));
        REPORTED.put(result.getInstance(), result);
    }

    /**
     * After {@code TestRetrySupport.failureCheck} saw a listed difference as "not a success":
     * its mark cleared, so the class's brokers are not stopped and started again.
     */
    private static void keepBrokers(IInvokedMethod method, ITestResult check) {
        Object instance = check.getInstance();
        if (!(instance instanceof TestRetrySupport) || !method.getTestMethod().getMethodName().equals("failureCheck")) {
            return;
        }
        ITestResult reported = REPORTED.remove(instance);
        if (reported == null || !checks(check, reported)) {
            return;
        }
        String test = name(reported.getMethod());
        try {
            Field failedSetupNumber = TestRetrySupport.class.getDeclaredField("failedSetupNumber");
            failedSetupNumber.setAccessible(true);
            failedSetupNumber.setInt(instance, -1);
        } catch (ReflectiveOperationException e) {
            throw new IllegalStateException("cannot keep the brokers after " + test
                    + ": TestRetrySupport has no int failedSetupNumber (another Pulsar version?)", e);
        }
        System.out.println("[pulsar-suite] brokers kept after " + test + ", as after a pass on stock");
    }

    /**
     * Whether this run of {@code failureCheck} is about {@code reported}: TestNG hands it the
     * result of the test it follows (its first parameter), so a check that follows another
     * test (or a setup that failed) keeps its mark.
     */
    private static boolean checks(ITestResult check, ITestResult reported) {
        Object[] parameters = check.getParameters();
        return parameters != null && parameters.length > 0 && parameters[0] == reported;
    }

    /** The listed difference for this invocation, if it is a listed test and the plugin is on. */
    private static Difference applicable(IInvokedMethod method) {
        if (!method.isTestMethod() || PluginSwitch.stockBrokers()) {
            return null;
        }
        return DIFFERENCES.get(name(method.getTestMethod()));
    }

    private static String name(ITestNGMethod method) {
        return method.getRealClass().getName() + "#" + method.getMethodName();
    }

    /** The line of the test method's own frame nearest to where the failure was thrown, or -1. */
    private static int thrownAt(Throwable failure, ITestNGMethod method) {
        String declaringClass = method.getConstructorOrMethod().getDeclaringClass().getName();
        for (StackTraceElement frame : failure.getStackTrace()) {
            if (frame.getClassName().equals(declaringClass) && frame.getMethodName().equals(method.getMethodName())) {
                return frame.getLineNumber();
            }
        }
        return -1;
    }

    static Map<String, Difference> read() {
        return ListedTests.read("differences.txt", KnownDifferences::parse, Difference::test);
    }

    private static Difference parse(String[] parts) {
        Matcher test = parts.length == 3 ? TEST.matcher(parts[0].strip()) : null;
        if (test == null || !test.matches() || parts[1].isBlank()) {
            throw new IllegalArgumentException("not 'class#method [at LINE EXCEPTION] -- what differs -- narrowing'");
        }
        boolean narrowed = test.group(2) != null;
        String narrowing = parts[2].strip();
        if (!narrowing.startsWith(narrowed ? NARROWED : WHOLE)) {
            throw new IllegalArgumentException("the narrowing of "
                    + (narrowed ? "an entry with 'at LINE EXCEPTION' starts '" + NARROWED
                            : "an entry of the whole method starts '" + WHOLE) + "'");
        }
        return new Difference(test.group(1), narrowed ? Integer.parseInt(test.group(2)) : -1, test.group(3),
                parts[1].strip(), narrowing);
    }
}
