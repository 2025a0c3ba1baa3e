package io.github.txnpreserver.testhooks;

import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.util.List;
import org.apache.pulsar.client.api.transaction.TxnID;
import org.apache.pulsar.transaction.coordinator.TransactionSubscription;
import org.apache.pulsar.transaction.coordinator.TxnMeta;
import org.apache.pulsar.transaction.coordinator.exceptions.CoordinatorException.InvalidTxnStatusException;
import org.apache.pulsar.transaction.coordinator.proto.TxnStatus;

/**
 * Test hook of {@link HookedTransactionMetadataStore}: makes the partitions of finishing transactions refuse their end markers with an
 * error the broker does not retry, as a partition that is fenced or unloaded at the wrong
 * moment does. Tests use it to leave a transaction stuck in COMMITTING/ABORTING and watch
 * the background re-drive finish it.
 *
 * <p>Off unless the broker JVM starts with {@code -D}{@value #PROPERTY}{@code =<file>}; then
 * active exactly while that file exists.
 */
public final class EndMarkerRefusal {

    public static final String PROPERTY = "txnpreserver.testhooks.refuseEndMarkersWhileFileExists";
    private static final Path TRIGGER = triggerFile();

    private EndMarkerRefusal() {
    }

    /** Whether the hook was switched on at start; false in production. */
    public static boolean installed() {
        return TRIGGER != null;
    }

    /** The meta the broker should see: {@code live} itself unless the hook is refusing now. */
    public static TxnMeta apply(TxnMeta live) {
        return TRIGGER != null && Files.exists(TRIGGER) ? new Refusing(live) : live;
    }

    private static Path triggerFile() {
        String path = System.getProperty(PROPERTY);
        return path == null || path.isBlank() ? null : Paths.get(path);
    }

    /** A live finishing transaction whose partition lists cannot be read while refusing. */
    private static final class Refusing implements TxnMeta {
        private final TxnMeta live;

        Refusing(TxnMeta live) {
            this.live = live;
        }

        private static IllegalStateException refusal() {
            return new IllegalStateException("test hook " + PROPERTY + ": partition refused the end marker");
        }

        @Override
        public TxnID id() {
            return live.id();
        }

        @Override
        public TxnStatus status() {
            return live.status();
        }

        @Override
        public List<String> producedPartitions() {
            throw refusal();
        }

        @Override
        public List<TransactionSubscription> ackedPartitions() {
            throw refusal();
        }

        @Override
        public TxnMeta addProducedPartitions(List<String> partitions) throws InvalidTxnStatusException {
            return live.addProducedPartitions(partitions);
        }

        @Override
        public TxnMeta addAckedPartitions(List<TransactionSubscription> subscriptions)
                throws InvalidTxnStatusException {
            return live.addAckedPartitions(subscriptions);
        }

        @Override
        public TxnMeta updateTxnStatus(TxnStatus newStatus, TxnStatus expectedStatus)
                throws InvalidTxnStatusException {
            return live.updateTxnStatus(newStatus, expectedStatus);
        }

        @Override
        public long getOpenTimestamp() {
            return live.getOpenTimestamp();
        }

        @Override
        public long getTimeoutAt() {
            return live.getTimeoutAt();
        }

        @Override
        public String getOwner() {
            return live.getOwner();
        }
    }
}
