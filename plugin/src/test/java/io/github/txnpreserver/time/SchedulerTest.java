package io.github.txnpreserver.time;

import static org.assertj.core.api.Assertions.assertThat;

import io.github.txnpreserver.testing.ManualScheduler;
import java.util.ArrayList;
import java.util.List;
import org.junit.jupiter.api.DisplayName;
import org.junit.jupiter.api.Test;

/** What {@link Scheduler} gives a scheduler that has no defer of its own. */
@DisplayName("A scheduler's defer by default")
class SchedulerTest {

    @Test
    void runsTheTaskAsExecuteDoesAndRefusesItOnceShutDown() {
        ManualScheduler scheduler = new ManualScheduler(0);
        List<String> ran = new ArrayList<>();

        assertThat(scheduler.defer(() -> ran.add("deferred"))).isTrue();
        scheduler.runReady();
        scheduler.shutdown();

        assertThat(ran).containsExactly("deferred");
        assertThat(scheduler.defer(() -> ran.add("after shutdown"))).isFalse();
    }
}
