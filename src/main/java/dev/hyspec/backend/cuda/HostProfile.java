package dev.hyspec.backend.cuda;

import java.util.Arrays;
import java.util.Locale;

/**
 * Where the host's time goes in a decode step that runs as a graph (the GPU idles while the host
 * works: a step's recording starts after the previous step's tokens came back). Each step's wall
 * time splits at four marks into: (a) the engine before the recording begins (scheduling, the
 * batch, the model's preparation), (b) the recording (the layers' code queueing their ops), (c)
 * {@code endGraph} (the signature lookup and the graph launch), (d) the wait for the device (the
 * argmax's launch and its download, which waits for the graph), (e) the engine after the download
 * (verification, commits, output). Inside (b), the time spent queueing launches, staging host
 * arrays, and allocating or releasing device memory is summed apart (two clock reads each).
 * Off unless {@link CudaBackend#startHostProfile()} set it: the runtime then checks a null field.
 */
public final class HostProfile {
    private static final String[] PHASES = {"(a) engine before recording", "(b) recording",
            "(c) endGraph: lookup + launch", "(d) wait for the device", "(e) engine after download", "step"};

    private long stepBegin;
    private long recordBegin;
    private long recordEnd;
    private long launched;
    private long synced;
    private long queueNanos;
    private long stageNanos;
    private long memoryNanos;
    private int ops;
    private long[][] steps = new long[64][];   // per counted step: the five phases, the step, queue, stage, memory, ops
    private int count;

    /** A step begins (the engine is about to schedule). */
    public void stepBegin() {
        stepBegin = System.nanoTime();
        recordBegin = recordEnd = launched = synced = 0;
        queueNanos = stageNanos = memoryNanos = 0;
        ops = 0;
    }

    /** The step is done; {@code counted}: a decode step, whose phases go into the table. */
    public void stepEnd(boolean counted) {
        long end = System.nanoTime();
        if (!counted || recordBegin == 0 || recordEnd == 0 || launched == 0 || synced == 0) {
            return;
        }
        if (count == steps.length) {
            steps = Arrays.copyOf(steps, 2 * count);
        }
        steps[count++] = new long[] {recordBegin - stepBegin, recordEnd - recordBegin, launched - recordEnd,
                synced - launched, end - synced, end - stepBegin, queueNanos, stageNanos, memoryNanos, ops};
    }

    void recordBegan() {
        recordBegin = System.nanoTime();
    }

    void recordEnded(int queuedOps) {
        recordEnd = System.nanoTime();
        ops = queuedOps;
    }

    void launched() {
        launched = System.nanoTime();
    }

    /** A download or sync returned; the first after the launch ends phase (d). */
    void synced() {
        if (launched != 0 && synced == 0) {
            synced = System.nanoTime();
        }
    }

    void queued(long nanos) {
        queueNanos += nanos;
    }

    void staged(long nanos) {
        stageNanos += nanos;
    }

    void memory(long nanos) {
        memoryNanos += nanos;
    }

    /** Decode steps profiled. */
    public int steps() {
        return count;
    }

    /** The table: per phase, mean and median µs per step and share of the step. */
    public String table() {
        StringBuilder sb = new StringBuilder();
        if (count == 0) {
            return "host profile: no decode step ran as a recorded graph\n";
        }
        double meanOps = column(9)[0];
        sb.append(String.format(Locale.ROOT, "host profile over %d decode steps, %.1f ops recorded per step%n", count,
                meanOps));
        sb.append(String.format(Locale.ROOT, "%-40s %10s %10s %7s%n", "phase", "mean µs", "median µs", "share"));
        double step = column(5)[0];
        for (int p = 0; p < PHASES.length; p++) {
            double[] c = column(p);
            sb.append(String.format(Locale.ROOT, "%-40s %10.1f %10.1f %6.1f%%%n", PHASES[p], c[0], c[1],
                    100 * c[0] / step));
        }
        double recording = column(1)[0];
        String[] parts = {"  (b) of it: queueing launches", "  (b) of it: staging host arrays",
                "  (b) of it: device memory alloc/release"};
        for (int i = 0; i < parts.length; i++) {
            double[] c = column(6 + i);
            sb.append(String.format(Locale.ROOT, "%-40s %10.1f %10.1f %6.1f%%%n", parts[i], c[0], c[1],
                    100 * c[0] / step));
        }
        sb.append(String.format(Locale.ROOT, "recording per op: %.2f µs; host time besides the wait: %.1f µs per step%n",
                recording / Math.max(1, meanOps), step - column(3)[0]));
        return sb.toString();
    }

    /** Mean and median of column {@code i} over the counted steps, µs (ops: as is). */
    private double[] column(int i) {
        double scale = i == 9 ? 1 : 1e-3;
        double[] v = new double[count];
        double sum = 0;
        for (int s = 0; s < count; s++) {
            v[s] = steps[s][i] * scale;
            sum += v[s];
        }
        Arrays.sort(v);
        return new double[] {sum / count, v[count / 2]};
    }
}
