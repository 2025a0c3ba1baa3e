package io.github.txnpreserver.preserver.kept;

import java.util.Arrays;

/**
 * One client's newest outcomes while the floor is rebuilt at a restore's end: a min-heap of
 * (end time, sequence) of bounded size, so that the newest {@code limit} survive whatever
 * order the blocks are visited in.
 */
final class NewestPerClient {

    private final int limit;
    private int[] times = new int[4];
    private long[] sequences = new long[4];
    private Outcome[] outcomes = new Outcome[4];
    private int size;
    private int newestTime = Integer.MIN_VALUE;

    NewestPerClient(int limit) {
        this.limit = limit;
    }

    void offer(int time, long sequence, Outcome outcome) {
        newestTime = Math.max(newestTime, time);
        if (size == limit) {
            if (compare(time, sequence, 0) <= 0) {
                return;
            }
            set(0, time, sequence, outcome);
            siftDown(0);
            return;
        }
        if (size == times.length) {
            int grown = Math.min(limit, times.length * 2);
            times = Arrays.copyOf(times, grown);
            sequences = Arrays.copyOf(sequences, grown);
            outcomes = Arrays.copyOf(outcomes, grown);
        }
        int at = size++;
        set(at, time, sequence, outcome);
        while (at > 0 && compare(times[at], sequences[at], (at - 1) / 2) < 0) {
            swap(at, (at - 1) / 2);
            at = (at - 1) / 2;
        }
    }

    int newestTime() {
        return newestTime;
    }

    /** Visits the kept outcomes oldest first. */
    void inOrder(Visitor visitor) {
        Integer[] order = new Integer[size];
        for (int i = 0; i < size; i++) {
            order[i] = i;
        }
        Arrays.sort(order, (a, b) -> {
            int byTime = Integer.compare(times[a], times[b]);
            return byTime != 0 ? byTime : Long.compare(sequences[a], sequences[b]);
        });
        for (int i : order) {
            visitor.visit(times[i], sequences[i], outcomes[i]);
        }
    }

    private void set(int at, int time, long sequence, Outcome outcome) {
        times[at] = time;
        sequences[at] = sequence;
        outcomes[at] = outcome;
    }

    private int compare(int time, long sequence, int at) {
        int byTime = Integer.compare(time, times[at]);
        return byTime != 0 ? byTime : Long.compare(sequence, sequences[at]);
    }

    private void siftDown(int at) {
        while (true) {
            int smallest = at;
            int left = 2 * at + 1;
            int right = left + 1;
            if (left < size && compare(times[left], sequences[left], smallest) < 0) {
                smallest = left;
            }
            if (right < size && compare(times[right], sequences[right], smallest) < 0) {
                smallest = right;
            }
            if (smallest == at) {
                return;
            }
            swap(at, smallest);
            at = smallest;
        }
    }

    private void swap(int a, int b) {
        int time = times[a];
        long sequence = sequences[a];
        Outcome outcome = outcomes[a];
        set(a, times[b], sequences[b], outcomes[b]);
        set(b, time, sequence, outcome);
    }

    interface Visitor {
        void visit(int time, long sequence, Outcome outcome);
    }
}
