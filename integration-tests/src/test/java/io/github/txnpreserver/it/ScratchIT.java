package io.github.txnpreserver.it;

import java.util.Map;
import java.util.concurrent.TimeUnit;
import org.apache.pulsar.client.api.PulsarClient;
import org.apache.pulsar.client.api.transaction.Transaction;
import org.junit.jupiter.api.Test;

class ScratchIT {
    @Test
    void scratch() throws Exception {
        for (String count : new String[] {System.getProperty("count", "0")}) {
            try (LocalPulsar pulsar = LocalPulsar.start("scratch", Map.of("transactionMetaPersistCount", count));
                 PulsarClient client = PulsarClient.builder().serviceUrl(pulsar.serviceUrl()).enableTransaction(true)
                         .operationTimeout(15, TimeUnit.SECONDS).build()) {
                long t0 = System.currentTimeMillis();
                Transaction txn = client.newTransaction().withTransactionTimeout(1, TimeUnit.MINUTES).build().get();
                System.out.println("count=" + count + " txn " + txn.getTxnID() + " in " + (System.currentTimeMillis() - t0));
                txn.commit().get();
                System.out.println("committed in " + (System.currentTimeMillis() - t0));
            }
        }
    }
}
