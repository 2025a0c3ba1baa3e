package io.github.txnpreserver.broker;

import static org.assertj.core.api.Assertions.assertThat;

import org.junit.jupiter.api.DisplayName;
import org.junit.jupiter.api.Test;

@DisplayName("What the plugin logs about the Pulsar it runs on")
class PulsarLinesTest {

    @Test
    void aReleaseOfASupportedLineIsNamedWithHowItIsTested() {
        PulsarLines.Assessment assessment = PulsarLines.assess("4.0.8");

        assertThat(assessment.warn()).isFalse();
        assertThat(assessment.message()).contains("4.0.8").contains("line 4.0 is supported");
        assertThat(PulsarLines.assess("5.0.1").warn()).isFalse();
        assertThat(PulsarLines.assess("4.2.4").warn()).isFalse();
        assertThat(PulsarLines.assess("4.0.14").warn()).isFalse();
    }

    @Test
    void pulsar4012IsWarnedAboutNamingTheDefectAndTheReleaseThatFixesIt() {
        PulsarLines.Assessment assessment = PulsarLines.assess("4.0.12");

        assertThat(assessment.warn()).isTrue();
        assertThat(assessment.message()).contains("26185").contains("HTTP 400").contains("4.0.13");
        assertThat(PulsarLines.assess("4.0.13").warn()).isFalse();
    }

    @Test
    void aLineThatIsNotSupportedIsWarnedAbout() {
        PulsarLines.Assessment assessment = PulsarLines.assess("4.1.3");

        assertThat(assessment.warn()).isTrue();
        assertThat(assessment.message()).contains("4.1").contains("not one the plugin supports")
                .contains("4.0.x, 4.2.x, 5.0.x");
        assertThat(PulsarLines.assess("3.0.12").warn()).isTrue();
    }

    @Test
    void aVersionThatCannotBeParsedIsWarnedAboutNotFailed() {
        assertThat(PulsarLines.assess("unknown").warn()).isTrue();
        assertThat(PulsarLines.assess(null).warn()).isTrue();
        assertThat(PulsarLines.assess("4.0.9-SNAPSHOT").message()).contains("line 4.0 is supported");
    }
}
