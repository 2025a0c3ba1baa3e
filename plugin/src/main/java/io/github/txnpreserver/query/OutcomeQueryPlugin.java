package io.github.txnpreserver.query;

import org.apache.pulsar.broker.PulsarService;
import org.apache.pulsar.broker.web.plugin.servlet.AdditionalServletWithPulsarService;
import org.apache.pulsar.common.configuration.PulsarConfiguration;
import org.eclipse.jetty.servlet.ServletHolder;

/**
 * Serves the outcome query ({@link OutcomeQueryServlet}) through the broker's additional-servlet
 * mechanism ({@code additionalServlets=txn-preserver}): the broker mounts it on its web port
 * behind its own authentication filter, as it mounts the admin API.
 *
 * <p>The additional-servlet interface differs between Pulsar lines: 4.0 asks for a Jetty
 * {@link ServletHolder}, 4.2 and later for the servlet itself ({@link #getServletInstance}).
 * Both are here; each line calls only its own, and the other is never linked.
 */
public class OutcomeQueryPlugin implements AdditionalServletWithPulsarService {

    /** Where the broker mounts the query. */
    public static final String BASE_PATH = "/txn-preserver";

    private PulsarService pulsar;
    private OutcomeQueryServlet servlet;

    @Override
    public void loadConfig(PulsarConfiguration pulsarConfiguration) {
    }

    @Override
    public void setPulsarService(PulsarService pulsarService) {
        this.pulsar = pulsarService;
    }

    @Override
    public String getBasePath() {
        return BASE_PATH;
    }

    /** Pulsar 4.0. */
    @Override
    public ServletHolder getServletHolder() {
        return new ServletHolder(servlet());
    }

    /** Pulsar 4.2 and later ({@code AdditionalServlet.getServletInstance}, a javax servlet). */
    public Object getServletInstance() {
        return servlet();
    }

    private synchronized OutcomeQueryServlet servlet() {
        if (servlet == null) {
            servlet = new OutcomeQueryServlet(pulsar);
        }
        return servlet;
    }

    @Override
    public void close() {
    }
}
