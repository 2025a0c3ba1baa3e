package io.github.txnpreserver.testing;

import static org.junit.jupiter.api.Assertions.assertThrows;

import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CompletionException;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;
import org.apache.pulsar.common.util.FutureUtil;

/** Waiting on futures in tests, with a bound so that a hang fails instead of stalling the build. */
public final class Futures {

    private static final long WAIT_SECONDS = 5;

    private Futures() {
    }

    public static <T> T await(CompletableFuture<T> future) {
        try {
            return future.get(WAIT_SECONDS, TimeUnit.SECONDS);
        } catch (ExecutionException e) {
            throw new CompletionException(e.getCause());
        } catch (InterruptedException | TimeoutException e) {
            throw new AssertionError("future did not complete in " + WAIT_SECONDS + " s", e);
        }
    }

    /** The cause the future failed with, unwrapped; fails the test if it succeeded. */
    public static Throwable failureOf(CompletableFuture<?> future) {
        CompletionException failure = assertThrows(CompletionException.class, () -> await(future));
        return FutureUtil.unwrapCompletionException(failure);
    }
}
