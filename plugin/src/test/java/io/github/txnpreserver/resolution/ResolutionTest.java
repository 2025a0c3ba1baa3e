package io.github.txnpreserver.resolution;

import static io.github.txnpreserver.testing.Futures.await;
import static io.github.txnpreserver.testing.Futures.failureOf;
import static org.assertj.core.api.Assertions.assertThat;
import static org.awaitility.Awaitility.await;

import io.github.txnpreserver.preserver.kept.KeptOutcome;
import io.github.txnpreserver.preserver.kept.Outcome;
import io.github.txnpreserver.testing.CoordinatorHarness;
import java.time.Duration;
import java.util.ArrayList;
import java.util.EnumSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import org.apache.pulsar.client.api.transaction.TxnID;
import org.apache.pulsar.transaction.coordinator.TransactionSubscription;
import org.apache.pulsar.transaction.coordinator.TxnMeta;
import org.apache.pulsar.transaction.coordinator.exceptions.CoordinatorException.TransactionNotFoundException;
import org.apache.pulsar.transaction.coordinator.proto.TxnStatus;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.DisplayName;
import org.junit.jupiter.api.Test;

/** The store answers getTxnMeta as the {@link Resolution} table says, in its order. */
@DisplayName("Outcome resolution")
class ResolutionTest {

    /** The lifecycle of {@link Resolution}'s javadoc: each state and the states it may follow. */
    private static final Map<Resolution, Set<Resolution>> VALID_PREVIOUS = Map.of(
            Resolution.PENDING, EnumSet.of(Resolution.NOT_FOUND),
            Resolution.FINISHING, EnumSet.of(Resolution.PENDING),
            Resolution.KEPT, EnumSet.of(Resolution.FINISHING),
            Resolution.NOT_FOUND, EnumSet.of(Resolution.FINISHING, Resolution.KEPT));

    private static final String PARTITION = "persistent://public/default/t-partition-0";
    private final CoordinatorHarness coordinator = CoordinatorHarness.start(10, 100);

    @AfterEach
    void close() {
        coordinator.close();
    }

    private Resolution resolutionOf(TxnID txn) {
        return coordinator.resolution(txn);
    }

    @Test
    void anOpenTransactionIsPendingWithItsPartitions() {
        TxnID txn = coordinator.open("alice");
        coordinator.produce(txn, PARTITION);

        TxnMeta meta = await(coordinator.store().getTxnMeta(txn));

        assertThat(resolutionOf(txn)).isEqualTo(Resolution.PENDING);
        assertThat(meta.status()).isEqualTo(TxnStatus.OPEN);
        assertThat(meta.producedPartitions()).containsExactly(PARTITION);
    }

    @Test
    void aTransactionSendingItsMarkersIsFinishingAndLiveStateWinsOverTheKeptOutcome() {
        TxnID txn = coordinator.open("alice");
        coordinator.produce(txn, PARTITION);
        coordinator.transactionLog().holdAppends(op -> op.equals("COMMITTED"));
        coordinator.commit(txn, "alice");
        await().atMost(Duration.ofSeconds(5)).until(() -> coordinator.kept(txn) != null);
        assertThat(coordinator.kept(txn)).as("kept before its terminal entry")
                .isEqualTo(new KeptOutcome(txn, Outcome.COMMITTED, "alice", CoordinatorHarness.START_MILLIS));

        TxnMeta meta = await(coordinator.store().getTxnMeta(txn));

        assertThat(resolutionOf(txn)).isEqualTo(Resolution.FINISHING);
        assertThat(meta.status()).isEqualTo(TxnStatus.COMMITTING);
        assertThat(meta.producedPartitions()).containsExactly(PARTITION);
        coordinator.transactionLog().releaseHeldAppends();
    }

    @Test
    void anEndedTransactionIsKeptWithItsOwnerAndNoPartitions() {
        TxnID txn = coordinator.open("alice");
        coordinator.produce(txn, PARTITION);
        await(coordinator.abort(txn, "alice"));

        TxnMeta meta = await(coordinator.store().getTxnMeta(txn));

        assertThat(resolutionOf(txn)).isEqualTo(Resolution.KEPT);
        assertThat(meta.id()).isEqualTo(txn);
        assertThat(meta.status()).isEqualTo(TxnStatus.ABORTING);
        assertThat(meta.getOwner()).isEqualTo("alice");
        assertThat(meta.getOpenTimestamp()).as("its end time stands in for its open time")
                .isEqualTo(CoordinatorHarness.START_MILLIS);
        assertThat(meta.getTimeoutAt()).isZero();
        assertThat(meta.producedPartitions()).isEmpty();
        assertThat(meta.ackedPartitions()).isEmpty();
        assertThat(await(coordinator.store().getTxnStatus(txn))).isEqualTo(TxnStatus.ABORTING);
        assertThat(coordinator.kept(txn))
                .isEqualTo(new KeptOutcome(txn, Outcome.ABORTED, "alice", CoordinatorHarness.START_MILLIS));
    }

    @Test
    void theOldestLiveTransactionAndOneAboveAnEndedOneStayPendingAsTheLowWaterMarkMoves() {
        TxnID oldest = coordinator.open("alice");
        TxnID ended = coordinator.open("alice");
        TxnID newest = coordinator.open("alice");
        assertThat(oldest.getLeastSigBits()).as("the coordinator's first sequence").isZero();
        await(coordinator.abort(ended, "alice"));

        assertThat(await(coordinator.store().getTxnMeta(oldest)).status()).isEqualTo(TxnStatus.OPEN);
        assertThat(await(coordinator.store().getTxnMeta(newest)).status()).isEqualTo(TxnStatus.OPEN);
        assertThat(resolutionOf(ended)).isEqualTo(Resolution.KEPT);

        await(coordinator.commit(oldest, "alice"));

        assertThat(coordinator.store().getLowWaterMark()).as("below the newest, the one live")
                .isEqualTo(newest.getLeastSigBits() - 1);
        assertThat(await(coordinator.store().getTxnMeta(newest)).status()).isEqualTo(TxnStatus.OPEN);
        assertThat(await(coordinator.store().getTxnMeta(oldest)).status()).isEqualTo(TxnStatus.COMMITTING);
        assertThat(resolutionOf(oldest)).isEqualTo(Resolution.KEPT);
        assertThat(resolutionOf(ended)).as("at the mark").isEqualTo(Resolution.KEPT);
        await(coordinator.abort(newest, "alice"));
        assertThat(coordinator.store().getLowWaterMark()).as("none live").isZero();
        assertThat(await(coordinator.store().getTxnMeta(newest)).status()).isEqualTo(TxnStatus.ABORTING);
    }

    @Test
    void aTransactionsObservedLifecycleFollowsTheTransitionTable() {
        TxnID txn = new TxnID(CoordinatorHarness.TC_ID, 0);
        List<Resolution> observed = new ArrayList<>();
        observed.add(resolutionOf(txn));
        TxnID opened = coordinator.open("alice");
        assertThat(opened).isEqualTo(txn);
        observed.add(resolutionOf(txn));
        coordinator.produce(txn, PARTITION);
        coordinator.transactionLog().holdAppends(op -> op.equals("COMMITTED"));
        coordinator.commit(txn, "alice");
        await().atMost(Duration.ofSeconds(5)).until(() -> coordinator.store().isEndActive(txn));
        observed.add(resolutionOf(txn));
        coordinator.transactionLog().releaseHeldAppends();
        await().atMost(Duration.ofSeconds(5)).until(() -> resolutionOf(txn) == Resolution.KEPT);
        observed.add(resolutionOf(txn));
        coordinator.clock().advance(Duration.ofHours(72));
        coordinator.preserver().expire();
        coordinator.settle();
        observed.add(resolutionOf(txn));

        assertThat(observed).containsExactly(Resolution.NOT_FOUND, Resolution.PENDING, Resolution.FINISHING,
                Resolution.KEPT, Resolution.NOT_FOUND);
        for (int i = 1; i < observed.size(); i++) {
            assertThat(VALID_PREVIOUS.get(observed.get(i)))
                    .as("%s -> %s", observed.get(i - 1), observed.get(i)).contains(observed.get(i - 1));
        }
    }

    @Test
    void aTimeoutAbortReportedOpenToTheEndChainIsOtherwiseTheLiveTransaction() throws Exception {
        TxnID txn = coordinator.open("alice");
        coordinator.produce(txn, PARTITION);
        coordinator.acknowledge(txn, "persistent://public/default/in", "sub");
        TxnMeta live = await(coordinator.store().getTxnMeta(txn));

        TxnMeta reported = new ReportedOpen(live);

        assertThat(reported.status()).isEqualTo(TxnStatus.OPEN);
        assertThat(reported.id()).isEqualTo(txn);
        assertThat(reported.producedPartitions()).containsExactly(PARTITION);
        assertThat(reported.ackedPartitions()).containsExactly(
                TransactionSubscription.builder().topic("persistent://public/default/in").subscription("sub").build());
        assertThat(reported.getOwner()).isEqualTo("alice");
        assertThat(reported.getOpenTimestamp()).isEqualTo(live.getOpenTimestamp()).isPositive();
        assertThat(reported.getTimeoutAt()).isEqualTo(live.getTimeoutAt()).isPositive();
        // Changes are the live transaction's own.
        String other = "persistent://public/default/t-partition-1";
        TransactionSubscription otherSub = TransactionSubscription.builder()
                .topic("persistent://public/default/in").subscription("sub-2").build();
        assertThat(reported.addProducedPartitions(List.of(other))).isSameAs(live);
        assertThat(reported.addAckedPartitions(List.of(otherSub))).isSameAs(live);
        assertThat(live.producedPartitions()).contains(other);
        assertThat(live.ackedPartitions()).contains(otherSub);
        assertThat(reported.updateTxnStatus(TxnStatus.ABORTING, TxnStatus.OPEN)).isSameAs(live);
        assertThat(live.status()).isEqualTo(TxnStatus.ABORTING);
        // OPEN to the broker's end chain only (TimeoutAbortTest drives it): any other reader sees the live status.
        assertThat(reported.status()).isEqualTo(TxnStatus.ABORTING);
    }

    @Test
    void anUnknownTransactionIsNotFound() {
        TxnID unknown = new TxnID(CoordinatorHarness.TC_ID, 99);

        assertThat(resolutionOf(unknown)).isEqualTo(Resolution.NOT_FOUND);
        assertThat(failureOf(coordinator.store().getTxnMeta(unknown))).isInstanceOf(TransactionNotFoundException.class);
    }

    @Test
    void keptOutcomesStayOutOfTheLiveCountsAndTheLowWaterMark() {
        TxnID ended = coordinator.open("alice");
        await(coordinator.commit(ended, "alice"));
        TxnID open = coordinator.open("alice");

        assertThat(coordinator.store().getMetadataStoreStats().getActives()).isEqualTo(1);
        assertThat(coordinator.store().getLowWaterMark()).isEqualTo(open.getLeastSigBits() - 1);
        assertThat(coordinator.store().getSlowTransactions(Long.MIN_VALUE)).extracting(TxnMeta::id)
                .containsExactly(open);
    }
}
