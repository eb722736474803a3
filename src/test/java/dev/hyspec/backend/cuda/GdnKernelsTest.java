package dev.hyspec.backend.cuda;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assertions.fail;

import dev.hyspec.backend.GdnDims;
import dev.hyspec.backend.StateLayout;
import dev.hyspec.backend.Tensor;
import dev.hyspec.checkpoint.DType;
import dev.hyspec.checkpoint.TensorEntry;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
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
 * The Gated DeltaNet kernels (scan, scan-states, replay, replay outputs) against the CPU reference on
 * fresh random inputs, in both state layouts, over shapes from the CPU fixture's (Dk = 5, Dv = 3) to
 * Qwen3.5's (Hk = 16, Hv = 32, Dk = Dv = 128), and T from 1 to a prefill-sized 70; every output is
 * poisoned before the launch. Plus the time and bandwidth of the verify-path kernels at the Qwen3.5
 * shape (printed, not asserted).
 */
@Tag("gpu")
class GdnKernelsTest {
    private static final int[] TOKENS = {1, 2, 4, 6, 70};
    private static final GdnDims QWEN35 = new GdnDims(16, 32, 128, 128);

    static Stream<Arguments> cases() {
        GdnDims[] shapes = {
            new GdnDims(2, 4, 5, 3),      // the CPU fixture's: ragged rows and columns
            new GdnDims(2, 4, 16, 16),    // GQA 2, half-used lanes
            new GdnDims(2, 2, 32, 16),    // GQA 1, Dk ≠ Dv
            new GdnDims(2, 4, 32, 40),    // a partial column tile in both layouts
            new GdnDims(2, 4, 64, 32),    // 2 rows per lane
            new GdnDims(1, 2, 100, 24),   // 4 rows per lane, the last one partial
            new GdnDims(1, 2, 256, 48),   // 8 rows per lane
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

    /** Random inputs of one call. */
    record Inputs(GdnDims dims, int tokens, float[] state, float[] qkv, float[] a, float[] b, float[] aLog,
                  float[] dtBias) {
        static Inputs random(Random r, GdnDims d, int tokens) {
            int hv = d.numValueHeads();
            return new Inputs(d, tokens, Gpu.normal(r, hv * d.keyHeadDim() * d.valueHeadDim(), 0.5),
                    Gpu.normal(r, tokens * d.convDim(), 1), Gpu.normal(r, tokens * hv, 1),
                    Gpu.normal(r, tokens * hv, 1.5), Gpu.uniform(r, hv, -1, 1), Gpu.uniform(r, hv, -1, 1));
        }
    }

    private static int[] stateShape(GdnDims d, StateLayout layout) {
        return layout == StateLayout.KV
                ? new int[] {d.numValueHeads(), d.keyHeadDim(), d.valueHeadDim()}
                : new int[] {d.numValueHeads(), d.valueHeadDim(), d.keyHeadDim()};
    }

    private static int historyWidth(GdnDims d) {
        return d.keyDim() + d.valueDim() + 2 * d.numValueHeads();
    }

    /** Runs every check of a case, collecting failures so one run reports them all. */
    private static final class Checks {
        final List<String> failures = new ArrayList<>();

        void run(String what, Runnable check) {
            try {
                check.run();
            } catch (AssertionError | RuntimeException e) {
                failures.add(what + ": " + e.getMessage());
                System.out.println("[gdn] FAILED " + what + ": " + e.getMessage());
            }
        }

        void done() {
            if (!failures.isEmpty()) {
                fail(failures.size() + " checks failed:\n" + String.join("\n", failures));
            }
        }
    }

    @ParameterizedTest(name = "{0} {1}")
    @MethodSource("cases")
    void allOperationsMatchCpu(GdnDims d, StateLayout layout) {
        CudaBackend gpu = Gpu.backend();
        long[] seed = new long[1];
        Random r = Gpu.random(seed);
        Checks checks = new Checks();
        long live = gpu.liveBytes();
        for (int tokens : TOKENS) {
            Inputs in = Inputs.random(r, d, tokens);
            String tag = String.format(Locale.ROOT, "%s %s Hk=%d Hv=%d Dk=%d Dv=%d T=%d", "%s", layout,
                    d.numKeyHeads(), d.numValueHeads(), d.keyHeadDim(), d.valueHeadDim(), tokens);
            checks.run(String.format(tag, "scan"), () -> checkScan(gpu, in, layout, tag, seed[0]));
            checks.run(String.format(tag, "scanStates"), () -> checkScanStates(gpu, in, layout, tag, seed[0]));
            checks.run(String.format(tag, "replayOutputs+replay"),
                    () -> checkReplay(gpu, in, layout, tag, seed[0]));
        }
        checks.run("device memory", () -> assertEquals(live, gpu.liveBytes(), "tensors left allocated"));
        checks.done();
    }

    private static Tensor[] params(CudaBackend gpu, Inputs in) {
        int hv = in.dims().numValueHeads();
        return new Tensor[] {Gpu.CPU.upload(in.aLog(), hv), Gpu.CPU.upload(in.dtBias(), hv), gpu.upload(in.aLog(), hv),
            gpu.upload(in.dtBias(), hv)};
    }

    private static void checkScan(CudaBackend gpu, Inputs in, StateLayout layout, String tag, long seed) {
        GdnDims d = in.dims();
        int t = in.tokens();
        int[] ss = stateShape(d, layout);
        Tensor[] s = Gpu.both(in.state(), ss);
        Tensor[] qkv = Gpu.both(in.qkv(), t, d.convDim());
        Tensor[] a = Gpu.both(in.a(), t, d.numValueHeads());
        Tensor[] b = Gpu.both(in.b(), t, d.numValueHeads());
        Tensor[] p = params(gpu, in);
        Tensor cpuOut = Gpu.CPU.zeros(t, d.valueDim());
        Tensor out = Gpu.poisoned(t, d.valueDim());
        Gpu.CPU.gatedDeltaScan(s[0], layout, qkv[0], a[0], b[0], p[0], p[1], d, cpuOut);
        gpu.gatedDeltaScan(s[1], layout, qkv[1], a[1], b[1], p[2], p[3], d, out);
        try {
            Gpu.check(String.format(tag, "gdn scan out"), cpuOut, out, Gpu.F32_TOL, seed);
            Gpu.check(String.format(tag, "gdn scan state"), s[0], s[1], Gpu.F32_TOL, seed);
        } finally {
            Gpu.free(gpu, s[1], qkv[1], a[1], b[1], p[2], p[3], out);
        }
    }

    private static void checkScanStates(CudaBackend gpu, Inputs in, StateLayout layout, String tag, long seed) {
        GdnDims d = in.dims();
        int t = in.tokens();
        int[] ss = stateShape(d, layout);
        Tensor[] s = Gpu.both(in.state(), ss);
        Tensor[] qkv = Gpu.both(in.qkv(), t, d.convDim());
        Tensor[] a = Gpu.both(in.a(), t, d.numValueHeads());
        Tensor[] b = Gpu.both(in.b(), t, d.numValueHeads());
        Tensor[] p = params(gpu, in);
        Tensor cpuOut = Gpu.CPU.zeros(t, d.valueDim());
        Tensor out = Gpu.poisoned(t, d.valueDim());
        Tensor[] cpuStates = new Tensor[t];
        Tensor[] states = new Tensor[t];
        for (int i = 0; i < t; i++) {
            cpuStates[i] = Gpu.CPU.zeros(ss);
            states[i] = Gpu.poisoned(ss);
        }
        Gpu.CPU.gatedDeltaScanStates(s[0], layout, qkv[0], a[0], b[0], p[0], p[1], d, cpuStates, cpuOut);
        gpu.gatedDeltaScanStates(s[1], layout, qkv[1], a[1], b[1], p[2], p[3], d, states, out);
        try {
            assertArrayEquals(in.state(), gpu.download(s[1]), "scanStates must only read the state");
            Gpu.check(String.format(tag, "gdn scanStates out"), cpuOut, out, Gpu.F32_TOL, seed);
            double worst = 0;
            for (int i = 0; i < t; i++) {
                worst = Math.max(worst, Gpu.check(String.format(tag, "gdn scanStates states[" + i + "]"),
                        cpuStates[i], states[i], Gpu.F32_TOL, seed));
            }
            System.out.printf(Locale.ROOT, "[gdn] %s: worst relative error over states %.3e%n",
                    String.format(tag, "scanStates"), worst);
        } finally {
            Gpu.free(gpu, s[1], qkv[1], a[1], b[1], p[2], p[3], out);
            Gpu.free(gpu, states);
        }
    }

    /**
     * replayOutputs (outputs, history rows 0…T−1, row T untouched, state only read) and replay of
     * the CPU's history for counts 0…T (a selection for large T).
     */
    private static void checkReplay(CudaBackend gpu, Inputs in, StateLayout layout, String tag, long seed) {
        GdnDims d = in.dims();
        int t = in.tokens();
        int w = historyWidth(d);
        int[] ss = stateShape(d, layout);
        Tensor[] s = Gpu.both(in.state(), ss);
        Tensor[] qkv = Gpu.both(in.qkv(), t, d.convDim());
        Tensor[] a = Gpu.both(in.a(), t, d.numValueHeads());
        Tensor[] b = Gpu.both(in.b(), t, d.numValueHeads());
        Tensor[] p = params(gpu, in);
        Tensor cpuOut = Gpu.CPU.zeros(t, d.valueDim());
        Tensor out = Gpu.poisoned(t, d.valueDim());
        Tensor cpuHist = Gpu.CPU.zeros(t + 1, w);
        Tensor hist = Gpu.poisoned(t + 1, w);
        Gpu.CPU.gatedDeltaReplayOutputs(s[0], layout, qkv[0], a[0], b[0], p[0], p[1], d, cpuHist, cpuOut);
        gpu.gatedDeltaReplayOutputs(s[1], layout, qkv[1], a[1], b[1], p[2], p[3], d, hist, out);
        Tensor gpuCpuHist = null;
        try {
            assertArrayEquals(in.state(), gpu.download(s[1]), "replayOutputs must only read the state");
            Gpu.check(String.format(tag, "gdn replayOutputs out"), cpuOut, out, Gpu.F32_TOL, seed);
            float[] hc = Gpu.CPU.download(cpuHist);
            float[] hg = gpu.download(hist);
            Gpu.check(String.format(tag, "gdn replayOutputs history"), Arrays.copyOf(hc, t * w),
                    Arrays.copyOf(hg, t * w), Gpu.F32_TOL, seed);
            for (int i = t * w; i < (t + 1) * w; i++) {
                assertTrue(Float.isNaN(hg[i]), "replayOutputs wrote history row " + t + " (element " + (i - t * w) + ")");
            }
            // replay of the CPU's history (so replay is tested on its own), from the same S_old
            gpuCpuHist = gpu.upload(hc, t + 1, w);
            double worst = 0;
            for (int count : counts(t)) {
                Tensor cs = Gpu.CPU.upload(in.state(), ss);
                Tensor gs = gpu.upload(in.state(), ss);
                Gpu.CPU.gatedDeltaReplay(cs, layout, cpuHist, count, d);
                gpu.gatedDeltaReplay(gs, layout, gpuCpuHist, count, d);
                try {
                    worst = Math.max(worst, Gpu.check(String.format(tag, "gdn replay count=" + count), cs, gs,
                            Gpu.F32_TOL, seed));
                    if (count == 0) {
                        assertArrayEquals(in.state(), gpu.download(gs), "replay of 0 rows changed the state");
                    }
                } finally {
                    gpu.free(gs);
                }
            }
            System.out.printf(Locale.ROOT, "[gdn] %s: worst relative error over counts %.3e%n",
                    String.format(tag, "replay"), worst);
        } finally {
            Gpu.free(gpu, s[1], qkv[1], a[1], b[1], p[2], p[3], out, hist);
            if (gpuCpuHist != null) {
                gpu.free(gpuCpuHist);
            }
        }
    }

    private static int[] counts(int tokens) {
        if (tokens <= 8) {
            int[] c = new int[tokens + 1];
            for (int i = 0; i <= tokens; i++) {
                c[i] = i;
            }
            return c;
        }
        return new int[] {0, 1, 2, 7, 8, 9, tokens / 2, tokens - 1, tokens};
    }

    // ---- weights in bf16 / f16 ----

    /** aLog and dtBias as checkpoint weights of other dtypes; the CPU gets the same values widened. */
    @Test
    void halfPrecisionWeights() {
        CudaBackend gpu = Gpu.backend();
        long[] seed = new long[1];
        Random r = Gpu.random(seed);
        Checks checks = new Checks();
        GdnDims d = new GdnDims(2, 4, 32, 16);
        DType[][] combos = {{DType.BF16, DType.F16}, {DType.F16, DType.BF16}, {DType.F32, DType.BF16}};
        for (DType[] combo : combos) {
            for (StateLayout layout : StateLayout.values()) {
                int tokens = 5;
                Inputs base = Inputs.random(r, d, tokens);
                TensorEntry aLog = entry("A_log", combo[0], r, d.numValueHeads());
                TensorEntry dtBias = entry("dt_bias", combo[1], r, d.numValueHeads());
                Inputs in = new Inputs(d, tokens, base.state(), base.qkv(), base.a(), base.b(), aLog.toFloatArray(),
                        dtBias.toFloatArray());
                String tag = "%s " + layout + " aLog " + combo[0] + " dtBias " + combo[1];
                checks.run(String.format(tag, "weights"), () -> {
                    int[] ss = stateShape(d, layout);
                    int w = historyWidth(d);
                    Tensor[] s = Gpu.both(in.state(), ss);
                    Tensor[] qkv = Gpu.both(in.qkv(), tokens, d.convDim());
                    Tensor[] a = Gpu.both(in.a(), tokens, d.numValueHeads());
                    Tensor[] b = Gpu.both(in.b(), tokens, d.numValueHeads());
                    Tensor cAlog = Gpu.CPU.upload(in.aLog(), d.numValueHeads());
                    Tensor cDtb = Gpu.CPU.upload(in.dtBias(), d.numValueHeads());
                    Tensor gAlog = gpu.weight(aLog);
                    Tensor gDtb = gpu.weight(dtBias);
                    Tensor cpuOut = Gpu.CPU.zeros(tokens, d.valueDim());
                    Tensor out = Gpu.poisoned(tokens, d.valueDim());
                    Tensor cpuHist = Gpu.CPU.zeros(tokens, w);
                    Tensor hist = Gpu.poisoned(tokens, w);
                    try {
                        Gpu.CPU.gatedDeltaReplayOutputs(s[0], layout, qkv[0], a[0], b[0], cAlog, cDtb, d, cpuHist,
                                cpuOut);
                        gpu.gatedDeltaReplayOutputs(s[1], layout, qkv[1], a[1], b[1], gAlog, gDtb, d, hist, out);
                        Gpu.check(String.format(tag, "gdn replayOutputs out"), cpuOut, out, Gpu.F32_TOL, seed[0]);
                        Gpu.check(String.format(tag, "gdn replayOutputs history"), cpuHist, hist, Gpu.F32_TOL,
                                seed[0]);
                        Gpu.CPU.gatedDeltaScan(s[0], layout, qkv[0], a[0], b[0], cAlog, cDtb, d, cpuOut);
                        Tensor out2 = Gpu.poisoned(tokens, d.valueDim());
                        try {
                            gpu.gatedDeltaScan(s[1], layout, qkv[1], a[1], b[1], gAlog, gDtb, d, out2);
                            Gpu.check(String.format(tag, "gdn scan out"), cpuOut, out2, Gpu.F32_TOL, seed[0]);
                            Gpu.check(String.format(tag, "gdn scan state"), s[0], s[1], Gpu.F32_TOL, seed[0]);
                        } finally {
                            gpu.free(out2);
                        }
                    } finally {
                        Gpu.free(gpu, s[1], qkv[1], a[1], b[1], gAlog, gDtb, out, hist);
                    }
                });
            }
        }
        checks.done();
    }

    /** Random values in about ±4 (both signs) stored as {@code dtype}. */
    private static TensorEntry entry(String name, DType dtype, Random r, int n) {
        ByteBuffer buf = ByteBuffer.allocate(n * dtype.bytes()).order(ByteOrder.LITTLE_ENDIAN);
        for (int i = 0; i < n; i++) {
            int sign = r.nextBoolean() ? 1 : 0;
            switch (dtype) {
                case F32 -> buf.putFloat((float) (r.nextDouble() * 8 - 4));
                case BF16 -> buf.putShort((short) (sign << 15 | (124 + r.nextInt(5)) << 7 | r.nextInt(128)));
                case F16 -> buf.putShort((short) (sign << 15 | (12 + r.nextInt(5)) << 10 | r.nextInt(1024)));
            }
        }
        buf.flip();
        return new TensorEntry(name, dtype, new int[] {n}, buf);
    }

    // ---- argument checks ----

    @Test
    void rejectsWrongShapes() {
        CudaBackend gpu = Gpu.backend();
        GdnDims d = new GdnDims(2, 4, 16, 16);
        Tensor s = gpu.zeros(4, 16, 16);
        Tensor qkv = gpu.zeros(3, d.convDim());
        Tensor ab = gpu.zeros(3, 4);
        Tensor p = gpu.zeros(4);
        Tensor out = gpu.zeros(3, d.valueDim());
        Tensor shortHist = gpu.zeros(2, historyWidth(d));
        Tensor bigDk = gpu.zeros(4, 512, 16);
        GdnDims wide = new GdnDims(2, 4, 512, 16);
        Tensor wideHist = gpu.zeros(1, historyWidth(wide));
        try {
            assertThrows(IllegalArgumentException.class,
                    () -> gpu.gatedDeltaReplayOutputs(s, StateLayout.KV, qkv, ab, ab, p, p, d, shortHist, out));
            assertThrows(IllegalArgumentException.class,
                    () -> gpu.gatedDeltaReplay(s, StateLayout.KV, shortHist, 3, d));
            assertThrows(IllegalArgumentException.class,
                    () -> gpu.gatedDeltaScan(s, StateLayout.VK, qkv, ab, ab, p, p, new GdnDims(2, 4, 16, 8), out));
            assertThrows(IllegalArgumentException.class,
                    () -> gpu.gatedDeltaScanStates(s, StateLayout.VK, qkv, ab, ab, p, p, d, new Tensor[] {s}, out));
            assertThrows(IllegalArgumentException.class,
                    () -> gpu.gatedDeltaReplay(bigDk, StateLayout.KV, wideHist, 1, wide));
        } finally {
            Gpu.free(gpu, s, qkv, ab, p, out, shortHist, bigDk, wideHist);
        }
    }

    // ---- speed (informative) ----

    /**
     * Time and achieved bandwidth of replay, replayOutputs and scanStates (and scan) at the Qwen3.5
     * shape for T = 4, one sequence: GPU time per call between events with the launches queued
     * behind a long memset (so launch overhead is hidden), and host wall time per call as issued.
     */
    @Test
    void speedAtQwen35Shape() throws Exception {
        CudaBackend gpu = Gpu.backend();
        GdnDims d = QWEN35;
        int tokens = 4;
        long stateBytes = 4L * d.numValueHeads() * d.keyHeadDim() * d.valueHeadDim();
        Random r = new Random(1);
        Inputs in = Inputs.random(r, d, tokens);
        System.out.printf(Locale.ROOT, "[gdn-speed] device %s; |S| = %.2f MiB (Hk=16 Hv=32 Dk=Dv=128), T=%d;"
                + " floor at 3.0 TB/s%n", gpu.deviceName(), stateBytes / 1048576.0, tokens);
        {
            // the practical floor at this size: a device-to-device copy of |S| (read + write 2·|S|)
            Tensor x = gpu.zeros(d.numValueHeads(), d.keyHeadDim(), d.valueHeadDim());
            Tensor y = gpu.zeros(d.numValueHeads(), d.keyHeadDim(), d.valueHeadDim());
            try {
                time(gpu, "copy of |S|      ", 2 * stateBytes, () -> gpu.copy(x, y));
            } finally {
                Gpu.free(gpu, x, y);
            }
        }
        for (StateLayout layout : StateLayout.values()) {
            int[] ss = stateShape(d, layout);
            Tensor s = gpu.upload(in.state(), ss);
            Tensor qkv = gpu.upload(in.qkv(), tokens, d.convDim());
            Tensor a = gpu.upload(in.a(), tokens, d.numValueHeads());
            Tensor b = gpu.upload(in.b(), tokens, d.numValueHeads());
            Tensor aLog = gpu.upload(in.aLog(), d.numValueHeads());
            Tensor dtBias = gpu.upload(in.dtBias(), d.numValueHeads());
            Tensor out = gpu.zeros(tokens, d.valueDim());
            Tensor hist = gpu.zeros(tokens, historyWidth(d));
            Tensor[] states = new Tensor[tokens];
            for (int i = 0; i < tokens; i++) {
                states[i] = gpu.zeros(ss);
            }
            long small = 4L * tokens * (d.convDim() + 2L * d.numValueHeads() + d.valueDim() + historyWidth(d));
            try {
                gpu.gatedDeltaReplayOutputs(s, layout, qkv, a, b, aLog, dtBias, d, hist, out);
                for (int count : new int[] {1, 2, tokens}) {
                    time(gpu, "replay(" + count + ")     " + layout, 2 * stateBytes,
                            () -> gpu.gatedDeltaReplay(s, layout, hist, count, d));
                }
                time(gpu, "replayOutputs " + layout, stateBytes + small,
                        () -> gpu.gatedDeltaReplayOutputs(s, layout, qkv, a, b, aLog, dtBias, d, hist, out));
                time(gpu, "scanStates    " + layout, (1 + tokens) * stateBytes + small,
                        () -> gpu.gatedDeltaScanStates(s, layout, qkv, a, b, aLog, dtBias, d, states, out));
                time(gpu, "scan          " + layout, 2 * stateBytes + small,
                        () -> gpu.gatedDeltaScan(s, layout, qkv, a, b, aLog, dtBias, d, out));
            } finally {
                Gpu.free(gpu, s, qkv, a, b, aLog, dtBias, out, hist);
                Gpu.free(gpu, states);
            }
        }
    }

    private static void time(CudaBackend gpu, String what, long bytes, Runnable op) {
        // 300 warm-up calls: past the JIT's warm-up, so the host side is compiled code
        double[] us = Gpu.deviceAndWallMicros(gpu, op, 300, 40);
        double gpuUs = us[0];
        double wallUs = us[1];
        double floorUs = bytes / 3.0e12 * 1e6;
        System.out.printf(Locale.ROOT,
                "[gdn-speed] %s: GPU %.2f us/call, %.0f GB/s (%.2f MB moved; floor %.2f us, %.2fx floor); host wall %.2f us/call%n",
                what, gpuUs, bytes / (gpuUs * 1e-6) / 1e9, bytes / 1e6, floorUs, gpuUs / floorUs, wallUs);
    }
}
