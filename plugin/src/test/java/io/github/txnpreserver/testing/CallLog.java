package io.github.txnpreserver.testing;

import java.util.ArrayList;
import java.util.List;

/** The order in which a coordinator's collaborators were called, for ordering assertions. */
public final class CallLog {

    private final List<String> calls = new ArrayList<>();

    public synchronized void record(String call) {
        calls.add(call);
    }

    public synchronized List<String> calls() {
        return List.copyOf(calls);
    }

    public synchronized int indexOf(String call) {
        return calls.indexOf(call);
    }

    public synchronized long count(String call) {
        return calls.stream().filter(call::equals).count();
    }
}
