package io.github.txnpreserver.statetopic;

/**
 * Another writer fenced the state topic since this one opened it (its fencing epoch moved):
 * the writer must not be replaced from here, since the other may be the coordinator's new
 * owner.
 */
public class WriterFencedException extends RuntimeException {

    private static final long serialVersionUID = 1L;

    public WriterFencedException(String topic, String ownEpoch, String epochNow) {
        super("state topic " + topic + " was fenced by another writer (epoch " + ownEpoch + " when opened, "
                + epochNow + " now)");
    }
}
