package dev.hyspec.backend.cuda;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assertions.fail;

import dev.hyspec.backend.GdnDims;
import dev.hyspec.backend.StateLayout;
import dev.hyspec.backend.Tensor;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Locale;
import java.util.Random;
import java.util.stream.Stream;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.Arguments;
import org.junit.jupiter.params.provider.MethodSource;

/**
 * The batched Gated DeltaNet kernels (scan, scan-states, replay verify: R rows of T tokens, one
 * launch) against the CPU backend's batched defaults on fresh random inputs: R ∈ {1, 3, 8},
 * T ∈ {1, 4, 6}, both layouts, shapes from the CPU fixture's to Qwen3.5's, replay counts from 0 to T,
 * under both mappings of the batched kernels (narrow and wide) and the automatic choice. Outputs,
 * scratch states and histories are NaN-poisoned before each launch; history rows the kernels must
 * not read are NaN too. Plus a recorded step replayed as a graph with new counts, and the speed of
 * replay verify against scan-states + commit at the Qwen3.5 shape (printed, not asserted).
 */
@Tag("gpu")
class GdnBatchKernelsTest {
    private static final int[] ROWS = {1, 3, 8};
    private static final int[] TOKENS = {1, 4, 6};
    private static final GdnDims QWEN35 = new GdnDims(16, 32, 128, 128);
    /** Automatic, then columns per thread: narrow 2, wide 8. */
    private static final int[] TILINGS = {0, 2, 8};

    static Stream<Arguments> cases() {
        GdnDims[] shapes = {
            new GdnDims(2, 4, 5, 3),      // the CPU fixture's: ragged rows and columns
            new GdnDims(2, 4, 32, 40),    // partial column tiles in both layouts, with 1 and 2 columns per thread
            new GdnDims(1, 2, 100, 24),   // 4 rows per lane, the last one partial
            QWEN35,
        };
        List<Arguments> out = new ArrayList<>();
        for (GdnDims d : shapes) {
            for (StateLayout l : StateLayout.values()) {
                out.add(Arguments.of(d, l));
            }
        }
        return out.stream();
    }

    /** Random inputs of one batched call; {@code previous} holds the rows' last-step histories. */
    record Batch(GdnDims dims, StateLayout layout, int rows, int tokens, float[][] states, float[] qkv, float[] a,
                 float[] b, float[] aLog, float[] dtBias, float[][] previous, int[] counts) {
        static Batch random(Random r, GdnDims d, StateLayout layout, int rows, int tokens) {
            int hv = d.numValueHeads();
            int n = rows * tokens;
            float[][] states = new float[rows][];
            float[][] previous = new float[rows][];
            int[] counts = new int[rows];
            float[] aLog = Gpu.uniform(r, hv, -1, 1);
            float[] dtBias = Gpu.uniform(r, hv, -1, 1);
            for (int i = 0; i < rows; i++) {
                states[i] = Gpu.normal(r, stateSize(d), 0.5);
                counts[i] = i == 0 ? 0 : i == 1 ? tokens : r.nextInt(tokens + 1);
                previous[i] = history(r, d, layout, tokens, counts[i], aLog, dtBias);
            }
            return new Batch(d, layout, rows, tokens, states, Gpu.normal(r, n * d.convDim(), 1),
                    Gpu.normal(r, n * hv, 1), Gpu.normal(r, n * hv, 1.5), aLog, dtBias, previous, counts);
        }

        /** A step's history rows as the CPU writes them, plus one row; rows from {@code count} on are NaN. */
        private static float[] history(Random r, GdnDims d, StateLayout layout, int tokens, int count, float[] aLog,
                                       float[] dtBias) {
            int hv = d.numValueHeads();
            int w = historyWidth(d);
            Tensor hist = Gpu.CPU.zeros(tokens + 1, w);
            Gpu.CPU.gatedDeltaReplayOutputs(Gpu.CPU.upload(Gpu.normal(r, stateSize(d), 0.5), stateShape(d, layout)),
                    layout, Gpu.CPU.upload(Gpu.normal(r, tokens * d.convDim(), 1), tokens, d.convDim()),
                    Gpu.CPU.upload(Gpu.normal(r, tokens * hv, 1), tokens, hv),
                    Gpu.CPU.upload(Gpu.normal(r, tokens * hv, 1.5), tokens, hv), Gpu.CPU.upload(aLog, hv),
                    Gpu.CPU.upload(dtBias, hv), d, hist, Gpu.CPU.zeros(tokens, d.valueDim()));
            float[] h = Gpu.CPU.download(hist);
            Arrays.fill(h, count * w, h.length, Float.NaN);
            return h;
        }
    }

    static int stateSize(GdnDims d) {
        return d.numValueHeads() * d.keyHeadDim() * d.valueHeadDim();
    }

    static int[] stateShape(GdnDims d, StateLayout layout) {
        return layout == StateLayout.KV
                ? new int[] {d.numValueHeads(), d.keyHeadDim(), d.valueHeadDim()}
                : new int[] {d.numValueHeads(), d.valueHeadDim(), d.keyHeadDim()};
    }

    static int historyWidth(GdnDims d) {
        return d.keyDim() + d.valueDim() + 2 * d.numValueHeads();
    }

    /** The worst relative error of one quantity over rows and mappings, reported once. */
    private static final class Worst {
        final String what;
        double err;
        String where = "";
        int elements;

        Worst(String what) {
            this.what = what;
        }

        void add(String where, float[] cpu, float[] gpu) {
            double e = Gpu.relativeError(cpu, gpu);
            elements += cpu.length;
            if (!Double.isNaN(err) && !(e <= err)) {
                err = e;
                this.where = where;
            }
        }

        void report(List<String> failures, long seed) {
            Gpu.report(what, err, Gpu.F32_TOL, elements);
            if (!(err <= Gpu.F32_TOL)) {
                failures.add(String.format(Locale.ROOT, "%s: relative error %.3e > %.0e at %s (seed %d)", what, err,
                        Gpu.F32_TOL, where, seed));
            }
        }
    }

    @ParameterizedTest(name = "{0} {1}")
    @MethodSource("cases")
    void batchedOperationsMatchCpu(GdnDims d, StateLayout layout) {
        CudaBackend gpu = Gpu.backend();
        long[] seed = new long[1];
        Random r = Gpu.random(seed);
        List<String> failures = new ArrayList<>();
        long live = gpu.liveBytes();
        try {
            for (int rows : ROWS) {
                for (int tokens : TOKENS) {
                    Batch in = Batch.random(r, d, layout, rows, tokens);
                    String tag = String.format(Locale.ROOT, "gdn %%s batch %s Hk=%d Hv=%d Dk=%d Dv=%d R=%d T=%d",
                            layout, d.numKeyHeads(), d.numValueHeads(), d.keyHeadDim(), d.valueHeadDim(), rows, tokens);
                    run(failures, String.format(tag, "scan"), () -> checkScan(gpu, in, tag, failures, seed[0]));
                    run(failures, String.format(tag, "scanStates"),
                            () -> checkScanStates(gpu, in, tag, failures, seed[0]));
                    run(failures, String.format(tag, "replayVerify"),
                            () -> checkReplayVerify(gpu, in, tag, failures, seed[0]));
                }
            }
        } finally {
            gpu.gdnKernels().batchMapping(0);
        }
        run(failures, "device memory", () -> assertEquals(live, gpu.liveBytes(), "tensors left allocated"));
        if (!failures.isEmpty()) {
            failures.forEach(f -> System.out.println("[gdn-batch] FAILED " + f));
            fail(failures.size() + " checks failed:\n" + String.join("\n", failures));
        }
    }

    private static void run(List<String> failures, String what, Runnable check) {
        try {
            check.run();
        } catch (AssertionError | RuntimeException e) {
            failures.add(what + ": " + e);
        }
    }

    /** The call's tensors on one backend. */
    private static final class Io {
        final Tensor[] states;
        final Tensor qkv;
        final Tensor a;
        final Tensor b;
        final Tensor aLog;
        final Tensor dtBias;

        Io(dev.hyspec.backend.Backend be, Batch in) {
            GdnDims d = in.dims();
            int n = in.rows() * in.tokens();
            states = new Tensor[in.rows()];
            for (int i = 0; i < in.rows(); i++) {
                states[i] = be.upload(in.states()[i], stateShape(d, in.layout()));
            }
            qkv = be.upload(in.qkv(), n, d.convDim());
            a = be.upload(in.a(), n, d.numValueHeads());
            b = be.upload(in.b(), n, d.numValueHeads());
            aLog = be.upload(in.aLog(), d.numValueHeads());
            dtBias = be.upload(in.dtBias(), d.numValueHeads());
        }

        void free(CudaBackend gpu) {
            Gpu.free(gpu, states);
            Gpu.free(gpu, qkv, a, b, aLog, dtBias);
        }
    }

    private static float[][] download(dev.hyspec.backend.Backend be, Tensor[] ts) {
        float[][] out = new float[ts.length][];
        for (int i = 0; i < ts.length; i++) {
            out[i] = be.download(ts[i]);
        }
        return out;
    }

    private static String mapping(int t) {
        return t == 0 ? "automatic mapping" : t == 8 ? "wide mapping" : "narrow mapping";
    }

    private static void checkScan(CudaBackend gpu, Batch in, String tag, List<String> failures, long seed) {
        GdnDims d = in.dims();
        int n = in.rows() * in.tokens();
        Io cpu = new Io(Gpu.CPU, in);
        Tensor cpuOut = Gpu.CPU.zeros(n, d.valueDim());
        Gpu.CPU.gatedDeltaScanBatch(cpu.states, in.layout(), cpu.qkv, cpu.a, cpu.b, cpu.aLog, cpu.dtBias, d, in.tokens(),
                cpuOut);
        float[] wantOut = Gpu.CPU.download(cpuOut);
        float[][] wantStates = download(Gpu.CPU, cpu.states);
        Worst out = new Worst(String.format(tag, "scan out"));
        Worst states = new Worst(String.format(tag, "scan states"));
        for (int t : TILINGS) {
            gpu.gdnKernels().batchMapping(t);
            Io g = new Io(gpu, in);
            Tensor o = Gpu.poisoned(n, d.valueDim());
            try {
                gpu.gatedDeltaScanBatch(g.states, in.layout(), g.qkv, g.a, g.b, g.aLog, g.dtBias, d, in.tokens(), o);
                out.add(mapping(t), wantOut, gpu.download(o));
                float[][] got = download(gpu, g.states);
                for (int i = 0; i < in.rows(); i++) {
                    states.add(mapping(t) + ", row " + i, wantStates[i], got[i]);
                }
            } finally {
                g.free(gpu);
                gpu.free(o);
            }
        }
        out.report(failures, seed);
        states.report(failures, seed);
    }

    private static void checkScanStates(CudaBackend gpu, Batch in, String tag, List<String> failures, long seed) {
        GdnDims d = in.dims();
        int n = in.rows() * in.tokens();
        int[] ss = stateShape(d, in.layout());
        Io cpu = new Io(Gpu.CPU, in);
        Tensor cpuOut = Gpu.CPU.zeros(n, d.valueDim());
        Tensor[][] cpuScratch = new Tensor[in.rows()][in.tokens()];
        for (Tensor[] row : cpuScratch) {
            Arrays.setAll(row, i -> Gpu.CPU.zeros(ss));
        }
        Gpu.CPU.gatedDeltaScanStatesBatch(cpu.states, in.layout(), cpu.qkv, cpu.a, cpu.b, cpu.aLog, cpu.dtBias, d,
                cpuScratch, in.tokens(), cpuOut);
        float[] wantOut = Gpu.CPU.download(cpuOut);
        Worst out = new Worst(String.format(tag, "scanStates out"));
        Worst scratch = new Worst(String.format(tag, "scanStates scratch"));
        for (int t : TILINGS) {
            gpu.gdnKernels().batchMapping(t);
            Io g = new Io(gpu, in);
            Tensor o = Gpu.poisoned(n, d.valueDim());
            Tensor[][] s = new Tensor[in.rows()][in.tokens()];
            for (Tensor[] row : s) {
                Arrays.setAll(row, i -> Gpu.poisoned(ss));
            }
            try {
                gpu.gatedDeltaScanStatesBatch(g.states, in.layout(), g.qkv, g.a, g.b, g.aLog, g.dtBias, d, s,
                        in.tokens(), o);
                out.add(mapping(t), wantOut, gpu.download(o));
                for (int i = 0; i < in.rows(); i++) {
                    assertArrayEquals(in.states()[i], gpu.download(g.states[i]), "scanStates must only read the state");
                    for (int k = 0; k < in.tokens(); k++) {
                        scratch.add(mapping(t) + ", row " + i + " token " + k, Gpu.CPU.download(cpuScratch[i][k]),
                                gpu.download(s[i][k]));
                    }
                }
            } finally {
                g.free(gpu);
                gpu.free(o);
                for (Tensor[] row : s) {
                    Gpu.free(gpu, row);
                }
            }
        }
        out.report(failures, seed);
        scratch.report(failures, seed);
    }

    /**
     * Replay verify: outputs, S(L) written back (bit for bit untouched where the count is 0), history
     * rows 0…T−1 written and row T not, previous histories never read past the count (NaN there).
     */
    private static void checkReplayVerify(CudaBackend gpu, Batch in, String tag, List<String> failures, long seed) {
        GdnDims d = in.dims();
        int n = in.rows() * in.tokens();
        int w = historyWidth(d);
        int tk = in.tokens();
        Io cpu = new Io(Gpu.CPU, in);
        Tensor cpuOut = Gpu.CPU.zeros(n, d.valueDim());
        Tensor[] cpuPrev = new Tensor[in.rows()];
        Tensor[] cpuNext = new Tensor[in.rows()];
        for (int i = 0; i < in.rows(); i++) {
            cpuPrev[i] = Gpu.CPU.upload(in.previous()[i], tk + 1, w);
            cpuNext[i] = Gpu.CPU.zeros(tk + 1, w);
        }
        Gpu.CPU.gatedDeltaReplayVerifyBatch(cpu.states, in.layout(), cpuPrev, in.counts(), cpu.qkv, cpu.a, cpu.b,
                cpu.aLog, cpu.dtBias, d, cpuNext, tk, cpuOut);
        float[] wantOut = Gpu.CPU.download(cpuOut);
        float[][] wantStates = download(Gpu.CPU, cpu.states);
        float[][] wantNext = download(Gpu.CPU, cpuNext);
        Worst out = new Worst(String.format(tag, "replayVerify out"));
        Worst states = new Worst(String.format(tag, "replayVerify S(L)"));
        Worst hist = new Worst(String.format(tag, "replayVerify history"));
        for (int t : TILINGS) {
            gpu.gdnKernels().batchMapping(t);
            Io g = new Io(gpu, in);
            Tensor o = Gpu.poisoned(n, d.valueDim());
            Tensor[] prev = new Tensor[in.rows()];
            Tensor[] next = new Tensor[in.rows()];
            for (int i = 0; i < in.rows(); i++) {
                prev[i] = gpu.upload(in.previous()[i], tk + 1, w);
                next[i] = Gpu.poisoned(tk + 1, w);
            }
            try {
                gpu.gatedDeltaReplayVerifyBatch(g.states, in.layout(), prev, in.counts(), g.qkv, g.a, g.b, g.aLog,
                        g.dtBias, d, next, tk, o);
                out.add(mapping(t), wantOut, gpu.download(o));
                for (int i = 0; i < in.rows(); i++) {
                    float[] s = gpu.download(g.states[i]);
                    states.add(mapping(t) + ", row " + i + " count " + in.counts()[i], wantStates[i], s);
                    if (in.counts()[i] == 0) {
                        assertArrayEquals(in.states()[i], s, "a row with count 0 must not write its state");
                    }
                    float[] h = gpu.download(next[i]);
                    hist.add(mapping(t) + ", row " + i, Arrays.copyOf(wantNext[i], tk * w), Arrays.copyOf(h, tk * w));
                    for (int x = tk * w; x < h.length; x++) {
                        assertTrue(Float.isNaN(h[x]), "replayVerify wrote history row " + tk + " of row " + i);
                    }
                }
            } finally {
                g.free(gpu);
                gpu.free(o);
                Gpu.free(gpu, prev);
                Gpu.free(gpu, next);
            }
        }
        out.report(failures, seed);
        states.report(failures, seed);
        hist.report(failures, seed);
    }

    // ---- a captured step replays with other rows' counts and histories ----

    /**
     * Four replay-verify steps of 3 rows recorded as graphs (the second captured, the last two
     * replayed), the histories swapping buffers and the counts changing every step; after each, the
     * outputs and states match the CPU running the same steps.
     */
    @Test
    void recordedStepsReplayWithNewCounts() {
        CudaBackend gpu = Gpu.backend();
        long[] seed = new long[1];
        Random r = Gpu.random(seed);
        GdnDims d = new GdnDims(2, 4, 32, 40);
        StateLayout layout = StateLayout.KV;
        int rows = 3;
        int tk = 4;
        int w = historyWidth(d);
        Batch in = Batch.random(r, d, layout, rows, tk);
        Io cpu = new Io(Gpu.CPU, in);
        Io g = new Io(gpu, in);
        Tensor[][] cpuHist = new Tensor[2][rows];
        Tensor[][] hist = new Tensor[2][rows];
        for (int i = 0; i < rows; i++) {
            cpuHist[0][i] = Gpu.CPU.zeros(tk, w);
            cpuHist[1][i] = Gpu.CPU.zeros(tk, w);
            hist[0][i] = gpu.zeros(tk, w);
            hist[1][i] = gpu.zeros(tk, w);
        }
        Tensor cpuOut = Gpu.CPU.zeros(rows * tk, d.valueDim());
        Tensor out = gpu.zeros(rows * tk, d.valueDim());
        long[] before = gpu.graphCounts();
        try {
            for (int step = 0; step < 4; step++) {
                float[] qkv = Gpu.normal(r, rows * tk * d.convDim(), 1);
                float[] a = Gpu.normal(r, rows * tk * d.numValueHeads(), 1);
                float[] b = Gpu.normal(r, rows * tk * d.numValueHeads(), 1.5);
                for (dev.hyspec.backend.Backend be : new dev.hyspec.backend.Backend[] {Gpu.CPU, gpu}) {
                    Io io = be == gpu ? g : cpu;
                    overwrite(be, io.qkv, qkv, rows * tk, d.convDim());
                    overwrite(be, io.a, a, rows * tk, d.numValueHeads());
                    overwrite(be, io.b, b, rows * tk, d.numValueHeads());
                }
                int[] counts = new int[rows];
                for (int i = 0; i < rows; i++) {
                    counts[i] = step == 0 ? 0 : (step + i) % (tk + 1);
                }
                Tensor[][] h = step % 2 == 0 ? hist : new Tensor[][] {hist[1], hist[0]};
                Tensor[][] ch = step % 2 == 0 ? cpuHist : new Tensor[][] {cpuHist[1], cpuHist[0]};
                Gpu.CPU.gatedDeltaReplayVerifyBatch(cpu.states, layout, ch[0], counts, cpu.qkv, cpu.a, cpu.b,
                        cpu.aLog, cpu.dtBias, d, ch[1], tk, cpuOut);
                gpu.beginGraph();
                gpu.gatedDeltaReplayVerifyBatch(g.states, layout, h[0], counts, g.qkv, g.a, g.b, g.aLog, g.dtBias, d,
                        h[1], tk, out);
                gpu.endGraph();
                Gpu.check("gdn replayVerify batch graph step " + step + " out", cpuOut, out, Gpu.F32_TOL, seed[0]);
                for (int i = 0; i < rows; i++) {
                    Gpu.check("gdn replayVerify batch graph step " + step + " S(L) row " + i, cpu.states[i],
                            g.states[i], Gpu.F32_TOL, seed[0]);
                }
            }
            long[] after = gpu.graphCounts();
            assertEquals(1, after[0] - before[0], "graphs captured");
            assertEquals(2, after[1] - before[1], "steps replayed from a graph");
        } finally {
            g.free(gpu);
            Gpu.free(gpu, hist[0]);
            Gpu.free(gpu, hist[1]);
            gpu.free(out);
        }
    }

    /** New contents for a tensor at the same address (what a graph replay reads). */
    private static void overwrite(dev.hyspec.backend.Backend be, Tensor dst, float[] data, int rows, int cols) {
        Tensor src = be.upload(data, rows, cols);
        be.copy(src, dst);
        be.free(src);
    }

    // ---- argument checks ----

    @Test
    void rejectsWrongShapes() {
        CudaBackend gpu = Gpu.backend();
        GdnDims d = new GdnDims(2, 4, 16, 16);
        int tk = 2;
        Tensor[] s = {gpu.zeros(4, 16, 16), gpu.zeros(4, 16, 16)};
        Tensor qkv = gpu.zeros(2 * tk, d.convDim());
        Tensor ab = gpu.zeros(2 * tk, 4);
        Tensor p = gpu.zeros(4);
        Tensor out = gpu.zeros(2 * tk, d.valueDim());
        Tensor[] h = {gpu.zeros(tk, historyWidth(d)), gpu.zeros(tk, historyWidth(d))};
        try {
            assertThrows(IllegalArgumentException.class, () -> gpu.gatedDeltaScanBatch(s, StateLayout.KV, qkv, ab, ab,
                    p, p, d, 3, out));
            assertThrows(IllegalArgumentException.class, () -> gpu.gatedDeltaScanStatesBatch(s, StateLayout.KV, qkv,
                    ab, ab, p, p, d, new Tensor[][] {{s[0], s[1]}, {s[0]}}, tk, out));
            assertThrows(IllegalArgumentException.class, () -> gpu.gatedDeltaReplayVerifyBatch(s, StateLayout.VK, h,
                    new int[] {0, tk + 1}, qkv, ab, ab, p, p, d, new Tensor[] {h[1], h[0]}, tk, out));
            assertThrows(IllegalArgumentException.class, () -> gpu.gatedDeltaReplayVerifyBatch(s, StateLayout.VK, h,
                    new int[] {1, 1}, qkv, ab, ab, p, p, d, h, tk, out));
        } finally {
            Gpu.free(gpu, s);
            Gpu.free(gpu, h);
            Gpu.free(gpu, qkv, ab, p, out);
        }
    }

    // ---- speed (informative) ----

    /** Device bandwidth the floors are computed at (DESIGN §9: device-to-device copy, read + write). */
    private static final double BANDWIDTH = 3.0e12;

    /**
     * Replay verify at the Qwen3.5 shape (|S| = 2 MiB per row), every row replaying T rows: per
     * mapping at R = 64, T = 4; against intermediate-copy (scan-states, then the commit's copy of one
     * state per row); and per mapping over R ∈ 1…256, T ∈ {1, 4, 6}. GPU time per call between events
     * with the calls queued behind a long memset (launch overhead hidden), and host wall-clock per
     * call around a sync (informative). The floor is one read and one write of |S| per row at 3.0 TB/s.
     */
    @Test
    void speedAtQwen35Shape() {
        CudaBackend gpu = Gpu.backend();
        GdnDims d = QWEN35;
        long stateBytes = 4L * stateSize(d);
        System.out.printf(Locale.ROOT, "[gdn-batch-speed] device %s; |S| = %.2f MiB (Hk=16 Hv=32 Dk=Dv=128); floor"
                + " 2·|S|·R at %.1f TB/s; informative%n", gpu.deviceName(), stateBytes / 1048576.0, BANDWIDTH / 1e12);
        try {
            for (StateLayout layout : StateLayout.values()) {
                try (Rows x = new Rows(gpu, d, layout, 64, 4, true)) {
                    for (int t : new int[] {2, 8}) {
                        gpu.gdnKernels().batchMapping(t);
                        report(gpu, "replayVerify " + layout + " R=64 T=4, " + mapping(t), 2 * stateBytes * 64,
                                x::verify);
                    }
                    gpu.gdnKernels().batchMapping(0);
                    double verify = report(gpu, "replayVerify " + layout + " R=64 T=4, auto", 2 * stateBytes * 64,
                            x::verify);
                    double states = report(gpu, "scanStates   " + layout + " R=64 T=4, auto", 5 * stateBytes * 64,
                            x::scanStates);
                    double commit = report(gpu, "commit copy  " + layout + " R=64 (copyBatch, one |S| per row)",
                            2 * stateBytes * 64, x::commit);
                    report(gpu, "scan         " + layout + " R=64 T=4, auto", 2 * stateBytes * 64, x::scan);
                    System.out.printf(Locale.ROOT, "[gdn-batch-speed] %s R=64 T=4: intermediate-copy (scanStates +"
                            + " commit) %.1f us vs replay verify %.1f us: %.2fx%n", layout, states + commit, verify,
                            (states + commit) / verify);
                }
                for (int tokens : TOKENS) {
                    for (int rows : new int[] {1, 8, 32, 64, 128, 256}) {
                        try (Rows x = new Rows(gpu, d, layout, rows, tokens, false)) {
                            for (int t : new int[] {2, 8}) {
                                gpu.gdnKernels().batchMapping(t);
                                report(gpu, String.format(Locale.ROOT, "replayVerify %s R=%d T=%d, %s", layout,
                                        rows, tokens, mapping(t)), 2 * stateBytes * rows, x::verify);
                            }
                        }
                    }
                }
            }
        } finally {
            gpu.gdnKernels().batchMapping(0);
        }
    }

    /** R rows of random inputs at one shape, on the GPU, every count = T. */
    private static final class Rows implements AutoCloseable {
        final CudaBackend gpu;
        final GdnDims d;
        final StateLayout layout;
        final int tokens;
        final int[] counts;
        final Tensor[] states;
        final Tensor[][] hist;
        final Tensor[][] scratch;
        final Tensor qkv;
        final Tensor a;
        final Tensor b;
        final Tensor aLog;
        final Tensor dtBias;
        final Tensor out;

        Rows(CudaBackend gpu, GdnDims d, StateLayout layout, int rows, int tokens, boolean withScratch) {
            this.gpu = gpu;
            this.d = d;
            this.layout = layout;
            this.tokens = tokens;
            Random r = new Random(rows * 31L + tokens);
            int n = rows * tokens;
            int hv = d.numValueHeads();
            counts = new int[rows];
            Arrays.fill(counts, tokens);
            states = new Tensor[rows];
            hist = new Tensor[2][rows];
            scratch = new Tensor[withScratch ? rows : 0][];
            float[] s = Gpu.normal(r, stateSize(d), 0.5);
            for (int i = 0; i < rows; i++) {
                states[i] = gpu.upload(s, stateShape(d, layout));
                hist[0][i] = gpu.zeros(tokens, historyWidth(d));
                hist[1][i] = gpu.zeros(tokens, historyWidth(d));
                if (withScratch) {
                    scratch[i] = new Tensor[tokens];
                    Arrays.setAll(scratch[i], t -> gpu.zeros(stateShape(d, layout)));
                }
            }
            qkv = gpu.upload(Gpu.normal(r, n * d.convDim(), 1), n, d.convDim());
            a = gpu.upload(Gpu.normal(r, n * hv, 1), n, hv);
            b = gpu.upload(Gpu.normal(r, n * hv, 1.5), n, hv);
            aLog = gpu.upload(Gpu.uniform(r, hv, -1, 1), hv);
            dtBias = gpu.upload(Gpu.uniform(r, hv, -1, 1), hv);
            out = gpu.zeros(n, d.valueDim());
            // real history rows to replay: one verify fills hist[0]
            gpu.gatedDeltaReplayVerifyBatch(states, layout, hist[1], new int[rows], qkv, a, b, aLog, dtBias, d,
                    hist[0], tokens, out);
        }

        void verify() {
            gpu.gatedDeltaReplayVerifyBatch(states, layout, hist[0], counts, qkv, a, b, aLog, dtBias, d, hist[1],
                    tokens, out);
        }

        void scanStates() {
            gpu.gatedDeltaScanStatesBatch(states, layout, qkv, a, b, aLog, dtBias, d, scratch, tokens, out);
        }

        void commit() {
            Tensor[] accepted = new Tensor[states.length];
            for (int i = 0; i < states.length; i++) {
                accepted[i] = scratch[i][tokens / 2];
            }
            gpu.copyBatch(accepted, states);
        }

        void scan() {
            gpu.gatedDeltaScanBatch(states, layout, qkv, a, b, aLog, dtBias, d, tokens, out);
        }

        @Override
        public void close() {
            Gpu.free(gpu, states);
            Gpu.free(gpu, hist[0]);
            Gpu.free(gpu, hist[1]);
            for (Tensor[] row : scratch) {
                Gpu.free(gpu, row);
            }
            Gpu.free(gpu, qkv, a, b, aLog, dtBias, out);
        }
    }

    /** Times {@code op}, prints it against its floor ({@code bytes} at 3.0 TB/s); returns GPU µs per call. */
    private static double report(CudaBackend gpu, String what, long bytes, Runnable op) {
        double[] us = Gpu.deviceAndWallMicros(gpu, op, 30, 20);
        double gpuUs = us[0];
        double wallUs = us[1];
        double floorUs = bytes / BANDWIDTH * 1e6;
        System.out.printf(Locale.ROOT, "[gdn-batch-speed] %s: GPU %.1f us, %.2f TB/s, %.2fx floor (%.1f us); wall-clock"
                + " %.1f us/call (informative)%n", what, gpuUs, bytes / (gpuUs * 1e-6) / 1e12, gpuUs / floorUs, floorUs,
                wallUs);
        return gpuUs;
    }
}
