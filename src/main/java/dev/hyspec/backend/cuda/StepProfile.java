package dev.hyspec.backend.cuda;

import static jcuda.driver.JCudaDriver.cuEventCreate;
import static jcuda.driver.JCudaDriver.cuEventDestroy;
import static jcuda.driver.JCudaDriver.cuEventElapsedTime;
import static jcuda.driver.JCudaDriver.cuEventRecord;
import static jcuda.driver.JCudaDriver.cuEventRecordWithFlags;
import static jcuda.driver.JCudaDriver.cuGraphExecDestroy;
import static jcuda.driver.JCudaDriver.cuGraphLaunch;
import static jcuda.driver.JCudaDriver.cuStreamSynchronize;

import java.util.ArrayList;
import java.util.Comparator;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import jcuda.driver.CUevent;
import jcuda.driver.CUevent_record_flags;
import jcuda.driver.CUgraphExec;
import jcuda.driver.CUstream;

/**
 * Where a recorded step's device time goes, op by op. While a profile is on, every recorded step
 * is captured twice: as is, and with an event-record node after each op. The plain graph runs
 * twice back to back (the second timed) and once more on an idle stream, as a replayed step does;
 * the other runs twice, the second timed (the step's work runs five times: its results are not
 * those of one step, so profile only a run whose outputs do not matter). The interval between consecutive
 * event nodes is the op's time inside a graph, the node's own launch gap included; the plain graph
 * gives the step's time without the event nodes. Intervals are summed per label (the kernel name,
 * with the product shape for matmuls) over the profiled steps.
 */
public final class StepProfile {
    /** One label's totals over the profiled steps. */
    public record Entry(String label, long count, double micros, long bytes) {
        /** Bytes per second over the label's time (weights for matmuls), NaN where unknown. */
        public double gbPerSecond() {
            return bytes == 0 ? Double.NaN : bytes / (micros * 1e3);
        }
    }

    private static final class Totals {
        long count;
        double micros;
        long bytes;
    }

    private final Map<String, Totals> totals = new LinkedHashMap<>();
    private final List<CUevent> events = new ArrayList<>();
    private int steps;
    private long ops;
    private double plainMicros;
    private double idleMicros;
    private double recordMicros;
    private double eventMicros;

    /** Profiles one step's queued ops; runs them (four times) on {@code stream} and waits. */
    void step(CUstream stream, List<StepGraphs.Op> queued, List<String> labels, List<Long> bytes) {
        while (events.size() < queued.size() + 3) {
            CUevent e = new CUevent();
            cuEventCreate(e, 0);
            events.add(e);
        }
        CUgraphExec plain = capture(stream, queued, false);
        CUgraphExec timed = capture(stream, queued, true);
        try {
            CUevent a = events.get(queued.size() + 1);
            CUevent b = events.get(queued.size() + 2);
            cuGraphLaunch(plain, stream);
            cuEventRecord(a, stream);
            cuGraphLaunch(plain, stream);
            cuEventRecord(b, stream);
            cuStreamSynchronize(stream);
            plainMicros += elapsedMicros(a, b);
            cuEventRecord(a, stream);   // one launch on an idle stream, as a replayed step runs
            cuGraphLaunch(plain, stream);
            cuEventRecord(b, stream);
            cuStreamSynchronize(stream);
            idleMicros += elapsedMicros(a, b);
            cuGraphLaunch(timed, stream);
            cuStreamSynchronize(stream);
            cuGraphLaunch(timed, stream);
            cuStreamSynchronize(stream);
            for (int i = 0; i < queued.size(); i++) {
                double us = elapsedMicros(events.get(i), events.get(i + 1));
                Totals t = totals.computeIfAbsent(labels.get(i), k -> new Totals());
                t.count++;
                t.micros += us;
                t.bytes += bytes.get(i);
                eventMicros += us;
            }
        } finally {
            cuGraphExecDestroy(plain);
            cuGraphExecDestroy(timed);
        }
        steps++;
        ops += queued.size();
    }

    /** The host time a step took to record (the layers' code and the queueing of its ops). */
    void recorded(long nanos) {
        recordMicros += nanos / 1e3;
    }

    /** The step's graph; with events, an event node before the first op and after every op. */
    private CUgraphExec capture(CUstream stream, List<StepGraphs.Op> queued, boolean withEvents) {
        if (!withEvents) {
            return StepGraphs.capture(stream, queued);
        }
        List<StepGraphs.Op> timed = new ArrayList<>(2 * queued.size() + 1);
        timed.add(event(0));
        for (int i = 0; i < queued.size(); i++) {
            timed.add(queued.get(i));
            timed.add(event(i + 1));
        }
        return StepGraphs.capture(stream, timed);
    }

    private StepGraphs.Op event(int i) {
        CUevent e = events.get(i);
        return s -> cuEventRecordWithFlags(e, s, CUevent_record_flags.CU_EVENT_RECORD_EXTERNAL);
    }

    private static double elapsedMicros(CUevent a, CUevent b) {
        float[] ms = new float[1];
        cuEventElapsedTime(ms, a, b);
        return ms[0] * 1e3;
    }

    /** Steps profiled so far. */
    public int steps() {
        return steps;
    }

    /** Per-label totals, the most time first. */
    public List<Entry> entries() {
        return totals.entrySet().stream()
                .map(e -> new Entry(e.getKey(), e.getValue().count, e.getValue().micros, e.getValue().bytes))
                .sorted(Comparator.comparingDouble(Entry::micros).reversed())
                .toList();
    }

    /** The table: per label, per step, count, µs, share, and GB/s where bytes are known. */
    public String table() {
        StringBuilder sb = new StringBuilder();
        int n = Math.max(1, steps);
        sb.append(String.format(Locale.ROOT, "step profile over %d steps: %.1f ops per step, recorded on the host in "
                        + "%.1f µs; graph %.1f µs per step back to back, %.1f µs launched on an idle stream, with an "
                        + "event node after each op %.1f µs%n", steps, (double) ops / n, recordMicros / n,
                plainMicros / n, idleMicros / n, eventMicros / n));
        sb.append(String.format(Locale.ROOT, "%-52s %6s %10s %8s %6s %8s%n", "op", "count", "µs/step", "µs/op",
                "share", "GB/s"));
        for (Entry e : entries()) {
            sb.append(String.format(Locale.ROOT, "%-52s %6.0f %10.1f %8.2f %5.1f%% %8s%n", e.label(),
                    (double) e.count() / n, e.micros() / n, e.micros() / e.count(), 100 * e.micros() / eventMicros,
                    e.bytes() == 0 ? "" : String.format(Locale.ROOT, "%.0f", e.gbPerSecond())));
        }
        return sb.toString();
    }

    void close() {
        for (CUevent e : events) {
            cuEventDestroy(e);
        }
        events.clear();
    }
}
