package io.github.txnpreserver.broker;

import static org.assertj.core.api.Assertions.assertThat;

import org.junit.jupiter.api.DisplayName;
import org.junit.jupiter.api.Test;

@DisplayName("What the plugin logs about the Pulsar it runs on")
class PulsarLinesTest {

    @Test
    void aReleaseOfASupportedLineIsNamedWithHowItIsTested() {
        PulsarLines.Assessment assessment = PulsarLines.assess("4.0.8", false);

        assertThat(assessment.warn()).isFalse();
        assertThat(assessment.message()).contains("4.0.8").contains("line 4.0 is supported");
        assertThat(PulsarLines.assess("5.0.1", false).warn()).isFalse();
        assertThat(PulsarLines.assess("4.2.4", false).warn()).isFalse();
        assertThat(PulsarLines.assess("4.0.14", false).warn()).isFalse();
    }

    @Test
    void pulsar4012WithBrokerInterceptorsIsWarnedAboutNamingTheDefectAndTheReleaseThatFixesIt() {
        PulsarLines.Assessment assessment = PulsarLines.assess("4.0.12", true);

        assertThat(assessment.warn()).isTrue();
        assertThat(assessment.message()).contains("26185").contains("HTTP 400").contains("4.0.13");
        assertThat(PulsarLines.assess("4.0.13", true).warn()).isFalse();
    }

    /** The defect is in the broker's interceptor chain, and the plugin is no interceptor. */
    @Test
    void pulsar4012WithoutBrokerInterceptorsIsASupportedRelease() {
        PulsarLines.Assessment assessment = PulsarLines.assess("4.0.12", false);

        assertThat(assessment.warn()).isFalse();
        assertThat(assessment.message()).contains("line 4.0 is supported");
    }

    @Test
    void aLineThatIsNotSupportedIsWarnedAbout() {
        PulsarLines.Assessment assessment = PulsarLines.assess("4.1.3", false);

        assertThat(assessment.warn()).isTrue();
        assertThat(assessment.message()).contains("4.1").contains("not one the plugin supports")
                .contains("4.0.x, 4.2.x, 5.0.x");
        assertThat(PulsarLines.assess("3.0.12", false).warn()).isTrue();
    }

    @Test
    void aVersionThatCannotBeParsedIsWarnedAboutNotFailed() {
        assertThat(PulsarLines.assess("unknown", false).warn()).isTrue();
        assertThat(PulsarLines.assess(null, false).warn()).isTrue();
        assertThat(PulsarLines.assess("4.0.9-SNAPSHOT", false).message()).contains("line 4.0 is supported");
    }
}
