package io.github.txnpreserver.it;

import java.io.IOException;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.net.ServerSocket;
import java.net.Socket;
import java.time.Duration;
import java.time.Instant;
import java.util.ArrayList;
import java.util.List;

/** Loopback ports for test processes: free ones to start on, and whether anything still answers. */
public final class Ports {

    private Ports() {
    }

    /** Ports that nothing listens on right now. */
    public static int[] free(int count) throws IOException {
        List<ServerSocket> sockets = new ArrayList<>();
        try {
            int[] ports = new int[count];
            for (int i = 0; i < count; i++) {
                ServerSocket socket = new ServerSocket(0, 1, InetAddress.getLoopbackAddress());
                sockets.add(socket);
                ports[i] = socket.getLocalPort();
            }
            return ports;
        } finally {
            for (ServerSocket socket : sockets) {
                socket.close();
            }
        }
    }

    public static boolean answers(int port) {
        try (Socket socket = new Socket()) {
            socket.connect(new InetSocketAddress("127.0.0.1", port), 200);
            return true;
        } catch (IOException e) {
            return false;
        }
    }

    /** Fails if any port answers: a process of an earlier start survived. */
    public static void requireFree(int... ports) {
        for (int port : ports) {
            if (answers(port)) {
                throw new IllegalStateException("Port " + port + " still answers: an earlier process survived");
            }
        }
    }

    /** Waits until no port answers. */
    public static void awaitFree(Duration timeout, String what, int... ports) throws InterruptedException {
        Instant deadline = Instant.now().plus(timeout);
        while (Instant.now().isBefore(deadline)) {
            boolean anyAnswers = false;
            for (int port : ports) {
                anyAnswers |= answers(port);
            }
            if (!anyAnswers) {
                return;
            }
            Thread.sleep(200);
        }
        throw new IllegalStateException("Ports of " + what + " still answer " + timeout.toSeconds() + " s after it ended");
    }

    /** Waits until the port answers, failing early if the process behind it died. */
    public static void awaitAnswer(int port, Duration timeout, ServiceProcess process)
            throws InterruptedException {
        Instant deadline = Instant.now().plus(timeout);
        while (Instant.now().isBefore(deadline)) {
            process.requireAlive();
            if (answers(port)) {
                return;
            }
            Thread.sleep(200);
        }
        throw new IllegalStateException(process + " does not answer on port " + port + " within " + timeout
                + "\n" + process.tail(40));
    }
}
