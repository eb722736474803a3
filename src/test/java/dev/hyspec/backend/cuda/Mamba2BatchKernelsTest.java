package dev.hyspec.backend.cuda;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;

import dev.hyspec.backend.Mamba2Dims;
import dev.hyspec.backend.StateLayout;
import dev.hyspec.backend.Tensor;
import dev.hyspec.backend.cuda.Mamba2KernelsTest.Params;
import dev.hyspec.backend.cuda.Mamba2KernelsTest.Shape;
import dev.hyspec.backend.cuda.Mamba2KernelsTest.Tokens;
import dev.hyspec.checkpoint.DType;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.Random;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;

/**
 * The batched generate-row operations of the CUDA backend (one launch for R rows) against the CPU
 * backend's batched defaults, which run the per-row operations row after row: fresh random inputs,
 * R ∈ {1, 3, 8}, T ∈ {1, 4, 6}, both state layouts, shapes with 16-byte vectors, with scalar ones
 * (sizes not a multiple of 4) and the Nemotron-H-8B layer shape, replay counts 0 … T. Every row has
 * its own state; at R = 3 rows 0 and 1 share their inputs (state, tokens, history, count) and must
 * give identical results. Outputs, states the kernels write, and histories are NaN-poisoned before
 * each launch; the worst relative error per operation goes into the kernels report. The last test
 * prints the replay verify's time at the 8B shape next to its memory floor (informative).
 */
@Tag("gpu")
class Mamba2BatchKernelsTest {
    private static final double TOL = Gpu.F32_TOL;
    private static final int[] ROWS = {1, 3, 8};
    /** Conv shapes {channels, width} of the conv tests: two small, one of the 8B model (conv 10240, width 4). */
    private static final int[][] CONV_SHAPES = {{48, 4}, {40, 2}, {10240, 4}};
    private static final int[] TOKENS = {1, 2, 4, 6, 8};
    private static final Shape BIG = new Shape(128, 64, 128, 8);
    /** 16-byte vectors; scalar ones (N, P not multiples of 4; an odd H makes history rows unaligned); 8B. */
    private static final Shape[] SHAPES = {
        new Shape(4, 8, 16, 1), new Shape(6, 12, 20, 2), new Shape(3, 6, 10, 1), new Shape(5, 8, 16, 1), BIG
    };

    /** Worst relative error and elements checked per operation, reported after each test. */
    private final Map<String, double[]> worst = new LinkedHashMap<>();
    private long seed;

    @AfterEach
    void reportWorst() {
        worst.forEach((op, w) -> Gpu.report(op + " worst", w[0], TOL, (int) Math.min(Integer.MAX_VALUE, w[1])));
    }

    private void check(String op, String what, float[] cpu, float[] gpu, double tol) {
        double err = Gpu.check(op + " " + what, cpu, gpu, tol, seed);
        double[] w = worst.computeIfAbsent(op, k -> new double[2]);
        w[0] = Math.max(w[0], err);
        w[1] += cpu.length;
    }

    private void check(String op, String what, Tensor cpu, Tensor gpu, double tol) {
        check(op, what, Gpu.CPU.download(cpu), Gpu.backend().download(gpu), tol);
    }

    private Random random() {
        long[] s = new long[1];
        Random r = Gpu.random(s);
        seed = s[0];
        return r;
    }

    // ------------------------------------------------------------------ inputs

    /** Stacked tokens of R rows, xBC [R·T, conv] and dtRaw [R·T, H]; row 1 repeats row 0 when twin. */
    private static Tokens rowTokens(Random r, Shape s, int rows, int t, boolean twin) {
        float[] xBC = Gpu.normal(r, rows * t * s.conv(), 1);
        float[] dt = Gpu.uniform(r, rows * t * s.h(), -4, 3);
        if (twin) {
            System.arraycopy(xBC, 0, xBC, t * s.conv(), t * s.conv());
            System.arraycopy(dt, 0, dt, t * s.h(), t * s.h());
        }
        return new Tokens(Gpu.both(xBC, rows * t, s.conv()), Gpu.both(dt, rows * t, s.h()));
    }

    /** Per-row values of {@code n} elements; row 1 repeats row 0 when twin. */
    private static float[][] rowValues(Random r, int rows, int n, boolean twin) {
        float[][] v = new float[rows][];
        for (int i = 0; i < rows; i++) {
            v[i] = twin && i == 1 ? v[0].clone() : Gpu.normal(r, n, 1);
        }
        return v;
    }

    /** Per-row tensors on both backends: [0] CPU, [1] GPU. */
    private static Tensor[][] rowTensors(float[][] values, int... shape) {
        Tensor[][] out = new Tensor[2][values.length];
        for (int i = 0; i < values.length; i++) {
            Tensor[] b = Gpu.both(values[i], shape);
            out[0][i] = b[0];
            out[1][i] = b[1];
        }
        return out;
    }

    /** Per-row outputs: CPU zeros and GPU NaN. */
    private static Tensor[][] rowOutputs(int rows, int... shape) {
        Tensor[][] out = new Tensor[2][rows];
        for (int i = 0; i < rows; i++) {
            out[0][i] = Gpu.CPU.zeros(shape);
            out[1][i] = Gpu.poisoned(shape);
        }
        return out;
    }

    /**
     * Replay history rows of {@code t} tokens per row, as the CPU's replay outputs write them (from a
     * zero state, which they do not depend on); row 1 repeats row 0 when twin.
     */
    private static float[][] histories(Random r, Shape s, StateLayout layout, Params prm, int rows, int t,
                                       boolean twin) {
        float[][] out = new float[rows][];
        for (int i = 0; i < rows; i++) {
            if (twin && i == 1) {
                out[i] = out[0].clone();
                continue;
            }
            Tensor x = Gpu.CPU.upload(Gpu.normal(r, t * s.conv(), 1), t, s.conv());
            Tensor dt = Gpu.CPU.upload(Gpu.uniform(r, t * s.h(), -4, 3), t, s.h());
            Tensor hist = Gpu.CPU.zeros(t, s.historyWidth());
            Gpu.CPU.mamba2ReplayOutputs(Gpu.CPU.zeros(s.stateShape(layout)), layout, x, dt, prm.dtBias()[0],
                    prm.aLog()[0], prm.d()[0], s.dims(), hist, Gpu.CPU.zeros(t, s.h() * s.p()));
            out[i] = Gpu.CPU.download(hist);
        }
        return out;
    }

    /** Twin rows 0 and 1 gave identical GPU results: per-row tensors, and blocks of T rows of a stacked one. */
    private static void checkTwins(String what, Tensor[] perRow, Tensor stacked, int t) {
        CudaBackend gpu = Gpu.backend();
        if (perRow != null) {
            assertArrayEquals(gpu.download(perRow[0]), gpu.download(perRow[1]), what + ": twin rows differ");
        }
        float[] all = gpu.download(stacked);
        int block = all.length / stacked.rows() * t;
        assertArrayEquals(Arrays.copyOfRange(all, 0, block), Arrays.copyOfRange(all, block, 2 * block),
                what + ": twin rows' outputs differ");
    }

    private static void free(Tensor[]... perRow) {
        for (Tensor[] ts : perRow) {
            Gpu.free(Gpu.backend(), ts);
        }
    }

    // ------------------------------------------------------------------ copies

    @Test
    void copyBatchAndScatterRowBlocksMatchCpu() {
        CudaBackend gpu = Gpu.backend();
        Random r = random();
        for (int rows : ROWS) {
            // equal sizes (16-byte vectors or not), then sizes that differ per pair (copied one by one)
            for (int n : new int[] {4096, 1001, 3 * 4096 + 8, -1}) {
                int[] sizes = new int[rows];
                for (int i = 0; i < rows; i++) {
                    sizes[i] = n > 0 ? n : 100 + 37 * i;
                }
                float[][] values = new float[rows][];
                Tensor[] cpuSrc = new Tensor[rows];
                Tensor[] src = new Tensor[rows];
                Tensor[] cpuDst = new Tensor[rows];
                Tensor[] dst = new Tensor[rows];
                for (int i = 0; i < rows; i++) {
                    values[i] = Gpu.normal(r, sizes[i], 1);
                    cpuSrc[i] = Gpu.CPU.upload(values[i], sizes[i]);
                    src[i] = gpu.upload(values[i], sizes[i]);
                    cpuDst[i] = Gpu.CPU.zeros(sizes[i]);
                    dst[i] = Gpu.poisoned(sizes[i]);
                }
                Gpu.CPU.copyBatch(cpuSrc, cpuDst);
                gpu.copyBatch(src, dst);
                for (int i = 0; i < rows; i++) {
                    check("copyBatch", "R=" + rows + " n=" + sizes[i] + " pair " + i, cpuDst[i], dst[i], 0);
                }
                free(src, dst);
            }
            for (int t : TOKENS) {
                for (int cols : new int[] {7, 64}) {
                    Tensor[] src = Gpu.both(Gpu.normal(r, rows * t * cols, 1), rows * t, cols);
                    Tensor[][] dst = rowOutputs(rows, t, cols);
                    Gpu.CPU.scatterRowBlocks(src[0], t, dst[0]);
                    gpu.scatterRowBlocks(src[1], t, dst[1]);
                    for (int i = 0; i < rows; i++) {
                        check("scatterRowBlocks", "R=" + rows + " T=" + t + " cols=" + cols + " row " + i, dst[0][i],
                                dst[1][i], 0);
                    }
                    Gpu.free(gpu, src[1]);
                    free(dst[1]);
                }
            }
        }
    }

    // ------------------------------------------------------------------ conv

    /**
     * Conv weights {@code [C, W]} and an optional bias on both backends; the variant number picks the
     * dtypes (f32 or bf16 weights, a bias in f32, bf16 or none) so a loop covers every combination.
     */
    private record ConvWeights(Tensor[] w, Tensor[] bias, DType wType, DType bType) {
        String describe() {
            return " w " + wType + (bType != null ? " bias " + bType : " no bias");
        }

        void free() {
            Gpu.free(Gpu.backend(), w[1]);
            if (bias[1] != null) {
                Gpu.free(Gpu.backend(), bias[1]);
            }
        }
    }

    private static ConvWeights convWeights(Random r, int channels, int width, int variant) {
        DType wType = variant % 2 == 0 ? DType.F32 : DType.BF16;
        boolean withBias = variant % 3 != 2;
        DType bType = variant % 3 == 0 ? DType.F32 : DType.BF16;
        Tensor[] w = Mamba2KernelsTest.weight(wType,
                Mamba2KernelsTest.representable(Gpu.normal(r, channels * width, 0.5)), channels, width);
        Tensor[] bias = withBias ? Mamba2KernelsTest.weight(bType,
                Mamba2KernelsTest.representable(Gpu.normal(r, channels, 0.5)), channels) : new Tensor[2];
        return new ConvWeights(w, bias, wType, withBias ? bType : null);
    }

    /** Replay counts 0 … T over the rows: the first row none, the second all T, the rest at random. */
    private static int[] counts(Random r, int rows, int t) {
        int[] counts = new int[rows];
        for (int i = 0; i < rows; i++) {
            counts[i] = rows == 1 ? t : i == 0 ? 0 : i == 1 ? t : r.nextInt(t + 1);
        }
        return counts;
    }

    @Test
    void causalConv1dBatchAndShiftWindowBatchMatchCpu() {
        CudaBackend gpu = Gpu.backend();
        Random r = random();
        int variant = 0;
        for (int[] c : CONV_SHAPES) {
            int channels = c[0];
            int width = c[1];
            int keep = width - 1;
            for (int rows : ROWS) {
                for (int t : TOKENS) {
                    for (boolean advance : new boolean[] {false, true}) {
                        int v = variant++;
                        ConvWeights cwt = convWeights(r, channels, width, v);
                        Tensor[] w = cwt.w();
                        Tensor[] bias = cwt.bias();
                        Tensor[][] windows = rowTensors(rowValues(r, rows, channels * keep, rows == 3), channels, keep);
                        Tensor[] x = Gpu.both(Gpu.normal(r, rows * t * channels, 1), rows * t, channels);
                        Tensor cpuOut = Gpu.CPU.zeros(rows * t, channels);
                        Tensor out = Gpu.poisoned(rows * t, channels);
                        Gpu.CPU.causalConv1dBatch(x[0], windows[0], w[0], bias[0], t, cpuOut, advance);
                        gpu.causalConv1dBatch(x[1], windows[1], w[1], bias[1], t, out, advance);
                        String what = "C=" + channels + " W=" + width + " R=" + rows + " T=" + t + cwt.describe()
                                + (advance ? " advance" : "");
                        check("causalConv1dBatch", what + " out", cpuOut, out, TOL);
                        for (int i = 0; i < rows; i++) {
                            check("causalConv1dBatch window", what + " row " + i, windows[0][i], windows[1][i], 0);
                        }
                        Gpu.free(gpu, x[1], out);
                        cwt.free();
                        free(windows[1]);
                    }
                    // shiftWindowBatch, counts 0 … T over the rows
                    int[] counts = counts(r, rows, t);
                    Tensor[][] windows = rowTensors(rowValues(r, rows, channels * keep, false), channels, keep);
                    Tensor[][] xs = rowTensors(rowValues(r, rows, t * channels, false), t, channels);
                    Gpu.CPU.shiftWindowBatch(windows[0], xs[0], counts);
                    gpu.shiftWindowBatch(windows[1], xs[1], counts);
                    for (int i = 0; i < rows; i++) {
                        check("shiftWindowBatch", "C=" + channels + " K=" + keep + " R=" + rows + " T=" + t + " row "
                                + i + " count=" + counts[i], windows[0][i], windows[1][i], 0);
                    }
                    free(windows[1], xs[1]);
                }
            }
        }
    }

    /**
     * The fused conv step of a replay verify (one launch) against the CPU backend's three operations:
     * window shift over the previous inputs (counts 0 … T), the raw rows kept, the conv outputs.
     */
    @Test
    void convStepBatchMatchesCpu() {
        CudaBackend gpu = Gpu.backend();
        Random r = random();
        int variant = 0;
        for (int[] c : CONV_SHAPES) {
            int channels = c[0];
            int width = c[1];
            int keep = width - 1;
            for (int rows : ROWS) {
                for (int t : TOKENS) {
                    ConvWeights cwt = convWeights(r, channels, width, variant++);
                    Tensor[] w = cwt.w();
                    Tensor[] bias = cwt.bias();
                    int[] counts = counts(r, rows, t);
                    // previous inputs hold up to 8 rows (a longer verify than this one), as the workspaces do
                    int held = 8;
                    Tensor[][] windows = rowTensors(rowValues(r, rows, channels * keep, false), channels, keep);
                    Tensor[][] previous = rowTensors(rowValues(r, rows, held * channels, false), held, channels);
                    Tensor[][] next = rowTensors(rowValues(r, rows, held * channels, false), held, channels);
                    Tensor[] x = Gpu.both(Gpu.normal(r, rows * t * channels, 1), rows * t, channels);
                    Tensor cpuOut = Gpu.CPU.zeros(rows * t, channels);
                    Tensor out = Gpu.poisoned(rows * t, channels);
                    Gpu.CPU.convStepBatch(x[0], windows[0], previous[0], counts, next[0], w[0], bias[0], t, cpuOut);
                    gpu.convStepBatch(x[1], windows[1], previous[1], counts, next[1], w[1], bias[1], t, out);
                    String what = "C=" + channels + " W=" + width + " R=" + rows + " T=" + t + cwt.describe() + " counts "
                            + Arrays.toString(counts);
                    check("convStepBatch", what + " out", cpuOut, out, TOL);
                    for (int i = 0; i < rows; i++) {
                        check("convStepBatch window", what + " row " + i, windows[0][i], windows[1][i], 0);
                        check("convStepBatch next", what + " row " + i, next[0][i], next[1][i], 0);
                    }
                    Gpu.free(gpu, x[1], out);
                    cwt.free();
                    free(windows[1], previous[1], next[1]);
                }
            }
        }
    }

    // ------------------------------------------------------------------ scans

    @Test
    void scanBatchMatchesCpu() {
        CudaBackend gpu = Gpu.backend();
        Random r = random();
        int variant = 0;
        for (Shape s : SHAPES) {
            for (StateLayout layout : StateLayout.values()) {
                for (int rows : ROWS) {
                    for (int t : TOKENS) {
                        boolean twin = rows == 3;
                        Params prm = Mamba2KernelsTest.params(r, s.h(), variant++);
                        Tokens tok = rowTokens(r, s, rows, t, twin);
                        Tensor[][] states = rowTensors(rowValues(r, rows, s.stateSize(), twin), s.stateShape(layout));
                        Tensor cpuY = Gpu.CPU.zeros(rows * t, s.h() * s.p());
                        Tensor y = Gpu.poisoned(rows * t, s.h() * s.p());
                        Gpu.CPU.mamba2ScanBatch(states[0], layout, tok.xBC()[0], tok.dtRaw()[0], prm.dtBias()[0],
                                prm.aLog()[0], prm.d()[0], s.dims(), t, cpuY);
                        gpu.mamba2ScanBatch(states[1], layout, tok.xBC()[1], tok.dtRaw()[1], prm.dtBias()[1],
                                prm.aLog()[1], prm.d()[1], s.dims(), t, y);
                        String what = s + " " + layout + " R=" + rows + " T=" + t + " " + prm.name();
                        check("mamba2ScanBatch", what + " y", cpuY, y, TOL);
                        for (int i = 0; i < rows; i++) {
                            check("mamba2ScanBatch", what + " state " + i, states[0][i], states[1][i], TOL);
                        }
                        if (twin) {
                            checkTwins("mamba2ScanBatch " + what, states[1], y, t);
                        }
                        Gpu.free(gpu, y);
                        free(states[1]);
                        tok.free();
                        prm.free();
                    }
                }
            }
        }
    }

    @Test
    void scanStatesBatchMatchesCpuAndLeavesTheStatesAlone() {
        CudaBackend gpu = Gpu.backend();
        Random r = random();
        int variant = 0;
        for (Shape s : SHAPES) {
            for (StateLayout layout : StateLayout.values()) {
                for (int rows : ROWS) {
                    for (int t : TOKENS) {
                        boolean twin = rows == 3;
                        Params prm = Mamba2KernelsTest.params(r, s.h(), variant++);
                        Tokens tok = rowTokens(r, s, rows, t, twin);
                        float[][] initial = rowValues(r, rows, s.stateSize(), twin);
                        Tensor[][] states = rowTensors(initial, s.stateShape(layout));
                        Tensor[][] cpuScratch = new Tensor[rows][];
                        Tensor[][] scratch = new Tensor[rows][];
                        for (int i = 0; i < rows; i++) {
                            Tensor[][] sc = rowOutputs(t, s.stateShape(layout));
                            cpuScratch[i] = sc[0];
                            scratch[i] = sc[1];
                        }
                        Tensor cpuY = Gpu.CPU.zeros(rows * t, s.h() * s.p());
                        Tensor y = Gpu.poisoned(rows * t, s.h() * s.p());
                        Gpu.CPU.mamba2ScanStatesBatch(states[0], layout, tok.xBC()[0], tok.dtRaw()[0],
                                prm.dtBias()[0], prm.aLog()[0], prm.d()[0], s.dims(), cpuScratch, t, cpuY);
                        gpu.mamba2ScanStatesBatch(states[1], layout, tok.xBC()[1], tok.dtRaw()[1], prm.dtBias()[1],
                                prm.aLog()[1], prm.d()[1], s.dims(), scratch, t, y);
                        String what = s + " " + layout + " R=" + rows + " T=" + t + " " + prm.name();
                        check("mamba2ScanStatesBatch", what + " y", cpuY, y, TOL);
                        for (int i = 0; i < rows; i++) {
                            for (int k = 0; k < t; k++) {
                                check("mamba2ScanStatesBatch", what + " scratch[" + i + "][" + k + "]",
                                        cpuScratch[i][k], scratch[i][k], TOL);
                            }
                            check("mamba2ScanStatesBatch state unchanged", what + " row " + i, initial[i],
                                    gpu.download(states[1][i]), 0);
                        }
                        if (twin) {
                            checkTwins("mamba2ScanStatesBatch " + what,
                                    new Tensor[] {scratch[0][t - 1], scratch[1][t - 1]}, y, t);
                        }
                        Gpu.free(gpu, y);
                        free(states[1]);
                        free(scratch);
                        tok.free();
                        prm.free();
                    }
                }
            }
        }
    }

    // ------------------------------------------------------------------ replay verify

    @Test
    void replayVerifyBatchMatchesCpuForEveryCount() {
        Random r = random();
        int variant = 0;
        for (Shape s : SHAPES) {
            for (StateLayout layout : StateLayout.values()) {
                for (int rows : ROWS) {
                    for (int t : TOKENS) {
                        replayVerifyCase(r, s, layout, rows, t, variant++);
                    }
                }
            }
        }
        // Longer rows than the fused kernel takes run the per-row operations.
        replayVerifyCase(r, SHAPES[1], StateLayout.VK, 3, Mamba2BatchKernels.VERIFY_MAX_TOKENS + 1, variant);
    }

    /** The VK N = 128 kernels the default dispatch does not take: the previous T = 1 (generic) one, tiled at T = 1 at 4 warps. */
    @Test
    void replayVerifyBatchMatchesCpuForEveryKernel() {
        Random r = random();
        int variant = 0;
        for (String kernel : new String[] {"previous", "tile4x4"}) {
            System.setProperty(Mamba2BatchKernels.VERIFY_KERNEL_PROPERTY, kernel);
            try {
                for (Shape s : SHAPES) {
                    for (int rows : ROWS) {
                        for (int t : TOKENS) {
                            replayVerifyCase(r, s, StateLayout.VK, rows, t, variant++);
                        }
                    }
                }
            } finally {
                System.clearProperty(Mamba2BatchKernels.VERIFY_KERNEL_PROPERTY);
            }
        }
    }

    private void replayVerifyCase(Random r, Shape s, StateLayout layout, int rows, int t, int variant) {
        CudaBackend gpu = Gpu.backend();
        boolean twin = rows == 3;
        Params prm = Mamba2KernelsTest.params(r, s.h(), variant);
        Tokens tok = rowTokens(r, s, rows, t, twin);
        Tensor[][] states = rowTensors(rowValues(r, rows, s.stateSize(), twin), s.stateShape(layout));
        Tensor[][] previous = rowTensors(histories(r, s, layout, prm, rows, t, twin), t, s.historyWidth());
        Tensor[][] next = rowOutputs(rows, t, s.historyWidth());
        int[] counts = new int[rows];
        for (int i = 0; i < rows; i++) {
            counts[i] = rows == 1 ? (variant % 2 == 0 ? t : 0) : i == 0 ? t : i == 1 ? (twin ? t : 0) : r.nextInt(t + 1);
        }
        Tensor cpuY = Gpu.CPU.zeros(rows * t, s.h() * s.p());
        Tensor y = Gpu.poisoned(rows * t, s.h() * s.p());
        Gpu.CPU.mamba2ReplayVerifyBatch(states[0], layout, previous[0], counts, tok.xBC()[0], tok.dtRaw()[0],
                prm.dtBias()[0], prm.aLog()[0], prm.d()[0], s.dims(), next[0], t, cpuY);
        gpu.mamba2ReplayVerifyBatch(states[1], layout, previous[1], counts, tok.xBC()[1], tok.dtRaw()[1],
                prm.dtBias()[1], prm.aLog()[1], prm.d()[1], s.dims(), next[1], t, y);
        String what = s + " " + layout + " R=" + rows + " T=" + t + " counts=" + Arrays.toString(counts) + " "
                + prm.name();
        check("mamba2ReplayVerifyBatch y", what, cpuY, y, TOL);
        for (int i = 0; i < rows; i++) {
            check("mamba2ReplayVerifyBatch S(L)", what + " row " + i, states[0][i], states[1][i], TOL);
            check("mamba2ReplayVerifyBatch history", what + " row " + i, next[0][i], next[1][i], TOL);
        }
        if (twin) {
            checkTwins("mamba2ReplayVerifyBatch " + what, states[1], y, t);
        }
        Gpu.free(gpu, y);
        free(states[1], previous[1], next[1]);
        tok.free();
        prm.free();
    }

    // ------------------------------------------------------------------ speed (printed only)

    /**
     * The replay verify at the 8B shape against its floor (2·|S| per row at the device copy
     * bandwidth of DESIGN §9) for R ∈ {32, 64, 128, 256}, T ∈ {1, 4, 6}, and at R = 64, T = 4 against the intermediate-copy verify and commit (scan-states, then copy of state
     * T−1). Device times from CUDA events (Mamba2KernelsTest.time); informative, not asserted.
     */
    @Test
    void replayVerifyTimingsAtThe8BShape() {
        Gpu.backend();   // skips without a device
        Shape s = BIG;
        Mamba2Dims dims = s.dims();
        int maxRows = 256;
        int maxT = 6;
        int reps = 20;
        long stateBytes = 4L * s.stateSize();
        double bw = 3.0e12;   // DESIGN §9: device-to-device copy bandwidth of the H100 (read + write)
        CudaRuntime rt = new CudaRuntime(0);
        try (CudaBackend b = new CudaBackend(rt, CudaBackend.Precision.FLOAT32)) {
            Random r = new Random(11);
            Tensor xBC = b.upload(Gpu.normal(r, maxRows * maxT * s.conv(), 1), maxRows * maxT, s.conv());
            Tensor dtRaw = b.upload(Gpu.uniform(r, maxRows * maxT * s.h(), -4, 3), maxRows * maxT, s.h());
            Tensor dtBias = b.upload(Gpu.uniform(r, s.h(), -1, 1), s.h());
            Tensor aLog = b.upload(Gpu.uniform(r, s.h(), -1, 1), s.h());
            Tensor d = b.upload(Gpu.normal(r, s.h(), 1), s.h());
            Tensor y = b.zeros(maxRows * maxT, s.h() * s.p());
            Tensor filler = b.zeros(64 << 20);
            Tensor filler2 = b.zeros(64 << 20);
            float[] initial = Gpu.normal(r, s.stateSize(), 0.5);
            List<String> lines = new ArrayList<>();
            for (StateLayout layout : StateLayout.values()) {
                Tensor[] states = new Tensor[maxRows];
                Tensor[] previous = new Tensor[maxRows];
                Tensor[] next = new Tensor[maxRows];
                // One history of maxT tokens (from the replay outputs) as every row's previous step.
                Tensor hist = b.zeros(maxT, s.historyWidth());
                Tensor[] tmp = {b.upload(initial, s.stateShape(layout)), rows(b, xBC, 0, maxT), rows(b, dtRaw, 0, maxT),
                    b.zeros(maxT, s.h() * s.p())};
                b.mamba2ReplayOutputs(tmp[0], layout, tmp[1], tmp[2], dtBias, aLog, d, dims, hist, tmp[3]);
                Gpu.free(b, tmp);
                for (int i = 0; i < maxRows; i++) {
                    states[i] = b.upload(initial, s.stateShape(layout));
                    previous[i] = b.zeros(maxT, s.historyWidth());
                    b.copy(hist, previous[i]);
                    next[i] = b.zeros(maxT, s.historyWidth());
                }
                for (int rows : new int[] {32, 64, 128, 256}) {
                    for (int t : new int[] {1, 4, 6}) {   // the T of DESIGN §10 (maxT)
                        Tensor[] st = Arrays.copyOf(states, rows);
                        Tensor[] pr = Arrays.copyOf(previous, rows);
                        Tensor[] nx = Arrays.copyOf(next, rows);
                        int[] counts = new int[rows];
                        Arrays.fill(counts, t);
                        Tensor xs = rows(b, xBC, 0, rows * t);
                        Tensor dts = rows(b, dtRaw, 0, rows * t);
                        Tensor ys = rows(b, y, 0, rows * t);
                        double sec = Mamba2KernelsTest.time(rt, b, filler, filler2, () -> b.mamba2ReplayVerifyBatch(st,
                                layout, pr, counts, xs, dts, dtBias, aLog, d, dims, nx, t, ys), reps,
                                "replayVerifyBatch " + layout + " R=" + rows + " T=" + t);
                        lines.add(line("replayVerifyBatch", layout, rows, t, sec, 2 * stateBytes * rows, bw));
                        if (rows == 64 && t == 4) {
                            lines.addAll(compareAtR64(rt, b, layout, st, counts, xs, dts, dtBias, aLog, d, ys, filler,
                                    filler2, sec, stateBytes, bw));
                        }
                        Gpu.free(b, xs, dts, ys);
                    }
                }
                Gpu.free(b, states);
                Gpu.free(b, previous);
                Gpu.free(b, next);
                Gpu.free(b, hist);
            }
            lines.forEach(System.out::println);
            Gpu.free(b, xBC, dtRaw, dtBias, aLog, d, y, filler, filler2);
        }
    }

    /** At R = 64, T = 4: the intermediate-copy verify and commit (scan-states, then copy of state T−1). */
    private static List<String> compareAtR64(CudaRuntime rt, CudaBackend b, StateLayout layout, Tensor[] states,
                                             int[] counts, Tensor xBC, Tensor dtRaw, Tensor dtBias, Tensor aLog,
                                             Tensor d, Tensor y, Tensor filler, Tensor filler2, double replaySec,
                                             long stateBytes, double bw) {
        Shape s = BIG;
        int rows = states.length;
        int t = counts[0];
        List<String> lines = new ArrayList<>();
        Tensor[][] scratch = new Tensor[rows][t];
        Tensor[] winners = new Tensor[rows];
        for (int i = 0; i < rows; i++) {
            for (int k = 0; k < t; k++) {
                scratch[i][k] = b.zeros(s.stateShape(layout));
            }
            winners[i] = scratch[i][t - 1];
        }
        double scanSec = Mamba2KernelsTest.time(rt, b, filler, filler2, () -> b.mamba2ScanStatesBatch(states, layout,
                xBC, dtRaw, dtBias, aLog, d, s.dims(), scratch, t, y), 20, "scanStatesBatch " + layout);
        double copySec = Mamba2KernelsTest.time(rt, b, filler, filler2, () -> b.copyBatch(winners, states), 20,
                "copyBatch " + layout);
        lines.add(line("scanStatesBatch", layout, rows, t, scanSec, (1L + t) * stateBytes * rows, bw));
        lines.add(line("copyBatch (commit)", layout, rows, t, copySec, 2 * stateBytes * rows, bw));
        lines.add(String.format(Locale.ROOT,
                "[gpu-speed] %s R=%d T=%d: replay verify %.1f us vs intermediate-copy verify + commit %.1f us: %.2fx",
                layout, rows, t, replaySec * 1e6, (scanSec + copySec) * 1e6, (scanSec + copySec) / replaySec));
        for (Tensor[] sc : scratch) {
            Gpu.free(b, sc);
        }
        return lines;
    }

    private static String line(String what, StateLayout layout, int rows, int t, double seconds, long bytes,
                               double bw) {
        double floor = bytes / bw;
        return String.format(Locale.ROOT,
                "[gpu-speed] 8B shape %-29s %s R=%3d T=%d: %8.1f us/call, %5.0f GB/s (floor %.1f us at %.1f TB/s,"
                        + " %.2fx floor)", what, layout, rows, t, seconds * 1e6, bytes / seconds / 1e9, floor * 1e6,
                bw / 1e12, seconds / floor);
    }

    /** Rows {@code from … from+n−1} of a 2-D tensor as a new tensor (a copy). */
    private static Tensor rows(CudaBackend b, Tensor src, int from, int n) {
        Tensor out = b.zeros(n, src.cols());
        b.copyRows(src, from, out, 0, n);
        return out;
    }
}
