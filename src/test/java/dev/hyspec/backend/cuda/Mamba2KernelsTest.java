package dev.hyspec.backend.cuda;

import static org.junit.jupiter.api.Assertions.assertEquals;

import dev.hyspec.backend.Mamba2Dims;
import dev.hyspec.backend.StateLayout;
import dev.hyspec.backend.Tensor;
import dev.hyspec.checkpoint.DType;
import dev.hyspec.checkpoint.TensorEntry;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.util.ArrayList;
import java.util.List;
import java.util.Locale;
import java.util.Random;
import jcuda.driver.CUevent;
import jcuda.driver.JCudaDriver;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;

/**
 * The conv and Mamba2 state kernels against the CPU reference on fresh random inputs: tiny shapes
 * (including sizes that are not powers of two) and the Nemotron-H-8B layer shape, T ∈ {1, 2, 4, 6,
 * 70}, both state layouts, every replay count, per-head parameters in float32, bf16 and mixed
 * dtypes. Outputs are poisoned (NaN) before every launch. The last test prints the time and
 * bandwidth of the hot-path kernels at the 8B shape (informative, not asserted).
 */
@Tag("gpu")
class Mamba2KernelsTest {
    private static final double TOL = Gpu.F32_TOL;
    private static final int[] TOKENS = {1, 2, 4, 6, 70};

    record Shape(int h, int p, int n, int g) {
        Mamba2Dims dims() {
            return new Mamba2Dims(h, p, n, g, 0.05f, 2.0f);
        }

        int stateSize() {
            return h * p * n;
        }

        int conv() {
            return dims().convDim();
        }

        int historyWidth() {
            return h * p + g * n + 2 * h;
        }

        int[] stateShape(StateLayout layout) {
            return layout == StateLayout.VK ? new int[] {h, p, n} : new int[] {h, n, p};
        }

        boolean big() {
            return h * p * n > 100_000;
        }

        @Override
        public String toString() {
            return "H=" + h + ",P=" + p + ",N=" + n + ",G=" + g;
        }
    }

    private static final Shape[] SHAPES = {
        new Shape(4, 8, 16, 1), new Shape(8, 16, 32, 2), new Shape(6, 12, 20, 2), new Shape(16, 32, 64, 2),
        new Shape(128, 64, 128, 8)
    };

    // ------------------------------------------------------------------ inputs

    /**
     * A weight in {@code dtype} on the GPU and the same values as a float32 tensor on the CPU (whose
     * recurrent ops take float32; {@code values} must be exact in {@code dtype}, see {@link #representable}).
     */
    static Tensor[] weight(DType dtype, float[] values, int... shape) {
        ByteBuffer b = ByteBuffer.allocateDirect(values.length * dtype.bytes()).order(ByteOrder.LITTLE_ENDIAN);
        for (float v : values) {
            switch (dtype) {
                case F32 -> b.putFloat(v);
                case BF16 -> b.putShort((short) (Float.floatToRawIntBits(v) >>> 16));
                case F16 -> b.putShort(f16(v));
            }
        }
        b.flip();
        TensorEntry e = new TensorEntry("w", dtype, shape, b);
        return new Tensor[] {Gpu.CPU.upload(values, shape), Gpu.backend().weight(e)};
    }

    /**
     * Rounds to a multiple of 1/256 in [−4, 4] with bf16's 8 significant bits: exact in bf16 and in
     * f16 (11 significant bits, normal down to 2^−14).
     */
    static float[] representable(float[] v) {
        float[] out = new float[v.length];
        for (int i = 0; i < v.length; i++) {
            float q = Math.max(-1024, Math.min(1024, Math.round(v[i] * 256))) / 256f;
            out[i] = Float.intBitsToFloat(Float.floatToRawIntBits(q) & 0xffff0000);
        }
        return out;
    }

    /** f16 bits of a value that f16 holds exactly (a multiple of 1/256 within ±4, or zero). */
    static short f16(float v) {
        if (v == 0f) {
            return 0;
        }
        int bits = Float.floatToRawIntBits(v);
        int sign = (bits >>> 31) << 15;
        int exp = ((bits >>> 23) & 0xff) - 127 + 15;
        int mant = (bits & 0x7fffff) >>> 13;
        return (short) (sign | exp << 10 | mant);
    }

    /** dtBias, aLog, D on both backends: variant 0 float32, 1 bf16, 2 mixed (bf16, f32, f16). */
    record Params(Tensor[] dtBias, Tensor[] aLog, Tensor[] d, String name) {
        void free() {
            Gpu.free(Gpu.backend(), dtBias[1], aLog[1], d[1]);
        }
    }

    static Params params(Random r, int heads, int variant) {
        float[] dtBias = representable(Gpu.uniform(r, heads, -1, 1));
        float[] aLog = representable(Gpu.uniform(r, heads, -1, 1));
        float[] d = representable(Gpu.normal(r, heads, 1));
        DType[] types = switch (variant % 3) {
            case 0 -> new DType[] {DType.F32, DType.F32, DType.F32};
            case 1 -> new DType[] {DType.BF16, DType.BF16, DType.BF16};
            default -> new DType[] {DType.BF16, DType.F32, DType.F16};
        };
        return new Params(weight(types[0], dtBias, heads), weight(types[1], aLog, heads), weight(types[2], d, heads),
                types[0] + "/" + types[1] + "/" + types[2]);
    }

    /** Per-call token inputs on both backends: xBC [T, conv] and dtRaw [T, H] spanning both clamp bounds. */
    record Tokens(Tensor[] xBC, Tensor[] dtRaw) {
        void free() {
            Gpu.free(Gpu.backend(), xBC[1], dtRaw[1]);
        }
    }

    static Tokens tokens(Random r, Shape s, int t) {
        return new Tokens(Gpu.both(Gpu.normal(r, t * s.conv(), 1), t, s.conv()),
                Gpu.both(Gpu.uniform(r, t * s.h(), -4, 3), t, s.h()));
    }

    // ------------------------------------------------------------------ scans

    @Test
    void scanMatchesCpu() {
        CudaBackend gpu = Gpu.backend();
        long[] seed = new long[1];
        Random r = Gpu.random(seed);
        int variant = 0;
        for (Shape s : SHAPES) {
            for (StateLayout layout : StateLayout.values()) {
                for (int t : TOKENS) {
                    Params prm = params(r, s.h(), variant++);
                    Tokens tok = tokens(r, s, t);
                    Tensor[] state = Gpu.both(Gpu.normal(r, s.stateSize(), 1), s.stateShape(layout));
                    Tensor cpuY = Gpu.CPU.zeros(t, s.h() * s.p());
                    Tensor y = Gpu.poisoned(t, s.h() * s.p());
                    Gpu.CPU.mamba2Scan(state[0], layout, tok.xBC()[0], tok.dtRaw()[0], prm.dtBias()[0], prm.aLog()[0],
                            prm.d()[0], s.dims(), cpuY);
                    gpu.mamba2Scan(state[1], layout, tok.xBC()[1], tok.dtRaw()[1], prm.dtBias()[1], prm.aLog()[1],
                            prm.d()[1], s.dims(), y);
                    String what = "mamba2Scan " + s + " " + layout + " T=" + t + " " + prm.name();
                    Gpu.check(what + " y", cpuY, y, TOL, seed[0]);
                    Gpu.check(what + " state", state[0], state[1], TOL, seed[0]);
                    Gpu.free(gpu, y, state[1]);
                    tok.free();
                    prm.free();
                }
            }
        }
    }

    @Test
    void scanStatesMatchesCpuAndLeavesTheStateAlone() {
        CudaBackend gpu = Gpu.backend();
        long[] seed = new long[1];
        Random r = Gpu.random(seed);
        int variant = 0;
        for (Shape s : SHAPES) {
            for (StateLayout layout : StateLayout.values()) {
                for (int t : s.big() ? new int[] {1, 2, 4, 6, 12} : new int[] {1, 2, 4, 6, 8, 9, 70}) {
                    Params prm = params(r, s.h(), variant++);
                    Tokens tok = tokens(r, s, t);
                    float[] initial = Gpu.normal(r, s.stateSize(), 1);
                    Tensor[] state = Gpu.both(initial, s.stateShape(layout));
                    Tensor[] cpuStates = new Tensor[t];
                    Tensor[] states = new Tensor[t];
                    for (int i = 0; i < t; i++) {
                        cpuStates[i] = Gpu.CPU.zeros(s.stateShape(layout));
                        states[i] = Gpu.poisoned(s.stateShape(layout));
                    }
                    Tensor cpuY = Gpu.CPU.zeros(t, s.h() * s.p());
                    Tensor y = Gpu.poisoned(t, s.h() * s.p());
                    Gpu.CPU.mamba2ScanStates(state[0], layout, tok.xBC()[0], tok.dtRaw()[0], prm.dtBias()[0],
                            prm.aLog()[0], prm.d()[0], s.dims(), cpuStates, cpuY);
                    gpu.mamba2ScanStates(state[1], layout, tok.xBC()[1], tok.dtRaw()[1], prm.dtBias()[1],
                            prm.aLog()[1], prm.d()[1], s.dims(), states, y);
                    String what = "mamba2ScanStates " + s + " " + layout + " T=" + t + " " + prm.name();
                    Gpu.check(what + " y", cpuY, y, TOL, seed[0]);
                    double worst = 0;
                    for (int i = 0; i < t; i++) {
                        worst = Math.max(worst, Gpu.check(what + " states[" + i + "]", Gpu.CPU.download(cpuStates[i]),
                                gpu.download(states[i]), TOL, seed[0]));
                    }
                    Gpu.check(what + " state unchanged", initial, gpu.download(state[1]), 0, seed[0]);
                    System.out.printf(Locale.ROOT, "[gpu] %s worst over states: %.3e%n", what, worst);
                    Gpu.free(gpu, y, state[1]);
                    Gpu.free(gpu, states);
                    tok.free();
                    prm.free();
                }
            }
        }
    }

    // ------------------------------------------------------------------ replay

    @Test
    void replayOutputsAndReplayMatchCpuForEveryCount() {
        CudaBackend gpu = Gpu.backend();
        long[] seed = new long[1];
        Random r = Gpu.random(seed);
        int variant = 0;
        for (Shape s : SHAPES) {
            for (StateLayout layout : StateLayout.values()) {
                // T <= 8 runs the verify-width kernel, longer calls the general one.
                for (int t : s.big() ? TOKENS : new int[] {1, 2, 4, 6, 8, 9, 70}) {
                    Params prm = params(r, s.h(), variant++);
                    Tokens tok = tokens(r, s, t);
                    float[] initial = Gpu.normal(r, s.stateSize(), 1);
                    Tensor[] state = Gpu.both(initial, s.stateShape(layout));
                    Tensor cpuY = Gpu.CPU.zeros(t, s.h() * s.p());
                    Tensor y = Gpu.poisoned(t, s.h() * s.p());
                    Tensor cpuHist = Gpu.CPU.zeros(t, s.historyWidth());
                    Tensor hist = Gpu.poisoned(t, s.historyWidth());
                    Gpu.CPU.mamba2ReplayOutputs(state[0], layout, tok.xBC()[0], tok.dtRaw()[0], prm.dtBias()[0],
                            prm.aLog()[0], prm.d()[0], s.dims(), cpuHist, cpuY);
                    gpu.mamba2ReplayOutputs(state[1], layout, tok.xBC()[1], tok.dtRaw()[1], prm.dtBias()[1],
                            prm.aLog()[1], prm.d()[1], s.dims(), hist, y);
                    String what = s + " " + layout + " T=" + t;
                    Gpu.check("mamba2ReplayOutputs " + what + " " + prm.name() + " y", cpuY, y, TOL, seed[0]);
                    Gpu.check("mamba2ReplayOutputs " + what + " history", cpuHist, hist, TOL, seed[0]);
                    Gpu.check("mamba2ReplayOutputs " + what + " state unchanged", initial, gpu.download(state[1]), 0,
                            seed[0]);
                    // Replay from the CPU's history rows (uploaded), for every count (a spread at T=70 for the 8B shape).
                    float[] hostHist = Gpu.CPU.download(cpuHist);
                    Tensor gHist = gpu.upload(hostHist, t, s.historyWidth());
                    double worst = 0;
                    for (int count = 0; count <= t; count++) {
                        if (s.big() && t > 6 && count > 2 && count != t / 2 && count < t - 1) {
                            continue;
                        }
                        Tensor cpuS = Gpu.CPU.upload(initial, s.stateShape(layout));
                        Tensor gS = gpu.upload(initial, s.stateShape(layout));
                        Gpu.CPU.mamba2Replay(cpuS, layout, cpuHist, count, s.dims());
                        gpu.mamba2Replay(gS, layout, gHist, count, s.dims());
                        worst = Math.max(worst, Gpu.check("mamba2Replay " + what + " count=" + count,
                                cpuS, gS, count == 0 ? 0 : TOL, seed[0]));
                        Gpu.free(gpu, gS);
                    }
                    System.out.printf(Locale.ROOT, "[gpu] mamba2Replay %s worst over counts: %.3e%n", what, worst);
                    Gpu.free(gpu, y, hist, gHist, state[1]);
                    tok.free();
                    prm.free();
                }
            }
        }
    }

    /** Replay after replay outputs reproduces the scan's state, on the GPU alone (the strategies agree, I5). */
    @Test
    void replayChainReproducesTheScanState() {
        CudaBackend gpu = Gpu.backend();
        long[] seed = new long[1];
        Random r = Gpu.random(seed);
        for (Shape s : new Shape[] {SHAPES[2], SHAPES[4]}) {
            for (StateLayout layout : StateLayout.values()) {
                int t = 6;
                Params prm = params(r, s.h(), 0);
                Tokens tok = tokens(r, s, t);
                float[] initial = Gpu.normal(r, s.stateSize(), 1);
                Tensor scanned = gpu.upload(initial, s.stateShape(layout));
                Tensor yScan = Gpu.poisoned(t, s.h() * s.p());
                gpu.mamba2Scan(scanned, layout, tok.xBC()[1], tok.dtRaw()[1], prm.dtBias()[1], prm.aLog()[1],
                        prm.d()[1], s.dims(), yScan);
                Tensor replayed = gpu.upload(initial, s.stateShape(layout));
                Tensor yRo = Gpu.poisoned(t, s.h() * s.p());
                Tensor hist = Gpu.poisoned(t, s.historyWidth());
                gpu.mamba2ReplayOutputs(replayed, layout, tok.xBC()[1], tok.dtRaw()[1], prm.dtBias()[1],
                        prm.aLog()[1], prm.d()[1], s.dims(), hist, yRo);
                gpu.mamba2Replay(replayed, layout, hist, t, s.dims());
                String what = s + " " + layout + " T=" + t;
                Gpu.check("gpu replayOutputs y vs gpu scan y " + what, gpu.download(yScan), gpu.download(yRo), TOL,
                        seed[0]);
                Gpu.check("gpu replay state vs gpu scan state " + what, gpu.download(scanned), gpu.download(replayed),
                        TOL, seed[0]);
                Gpu.free(gpu, scanned, yScan, replayed, yRo, hist);
                tok.free();
                prm.free();
            }
        }
    }

    // ------------------------------------------------------------------ conv

    @Test
    void causalConv1dAndShiftWindowMatchCpu() {
        CudaBackend gpu = Gpu.backend();
        long[] seed = new long[1];
        Random r = Gpu.random(seed);
        int variant = 0;
        int[][] cw = {{5, 4}, {48, 4}, {40, 2}, {24, 1}, {10240, 4}};
        for (int[] c : cw) {
            int channels = c[0];
            int width = c[1];
            int keep = width - 1;
            for (int t : TOKENS) {
                for (boolean advance : new boolean[] {false, true}) {
                    int v = variant++;
                    DType wType = DType.values()[v % 3];
                    DType bType = DType.values()[(v / 3) % 3];
                    boolean withBias = v % 4 != 3;
                    int[] wShape = v % 2 == 0 ? new int[] {channels, width} : new int[] {channels, 1, width};
                    Tensor[] w = weight(wType, representable(Gpu.normal(r, channels * width, 0.5)), wShape);
                    Tensor[] bias = withBias ? weight(bType, representable(Gpu.normal(r, channels, 0.5)), channels)
                            : new Tensor[] {null, null};
                    float[] win = Gpu.normal(r, channels * keep, 1);
                    Tensor[] window = Gpu.both(win, channels, keep);
                    Tensor[] x = Gpu.both(Gpu.normal(r, t * channels, 1), t, channels);
                    Tensor cpuOut = Gpu.CPU.zeros(t, channels);
                    Tensor out = Gpu.poisoned(t, channels);
                    Gpu.CPU.causalConv1d(x[0], window[0], w[0], bias[0], cpuOut, advance);
                    gpu.causalConv1d(x[1], window[1], w[1], bias[1], out, advance);
                    String what = "causalConv1d C=" + channels + " W=" + width + " T=" + t + " w " + wType
                            + (withBias ? " bias " + bType : " no bias") + (advance ? " advance" : "");
                    Gpu.check(what + " out", cpuOut, out, TOL, seed[0]);
                    Gpu.check(what + " window", Gpu.CPU.download(window[0]), gpu.download(window[1]), 0, seed[0]);
                    if (!advance) {
                        assertEquals(0, Gpu.relativeError(win, gpu.download(window[1])), what + ": window changed");
                    }
                    Gpu.free(gpu, w[1], window[1], x[1], out);
                    if (withBias) {
                        Gpu.free(gpu, bias[1]);
                    }
                }
                // shiftWindow for every count
                float[] win = Gpu.normal(r, channels * keep, 1);
                Tensor[] x = Gpu.both(Gpu.normal(r, t * channels, 1), t, channels);
                for (int count = 0; count <= t; count++) {
                    Tensor cpuWin = Gpu.CPU.upload(win, channels, keep);
                    Tensor gWin = gpu.upload(win, channels, keep);
                    Gpu.CPU.shiftWindow(cpuWin, x[0], count);
                    gpu.shiftWindow(gWin, x[1], count);
                    Gpu.check("shiftWindow C=" + channels + " K=" + keep + " T=" + t + " count=" + count,
                            Gpu.CPU.download(cpuWin), gpu.download(gWin), 0, seed[0]);
                    Gpu.free(gpu, gWin);
                }
                Gpu.free(gpu, x[1]);
            }
        }
    }

    // ------------------------------------------------------------------ layout

    @Test
    void transposeStateMatchesCpu() {
        CudaBackend gpu = Gpu.backend();
        long[] seed = new long[1];
        Random r = Gpu.random(seed);
        int[][] shapes = {{4, 8, 16}, {4, 16, 8}, {2, 3, 5}, {128, 64, 128}, {128, 128, 64}, {2, 300, 257}, {3, 1, 7}};
        for (int[] sh : shapes) {
            float[] data = Gpu.normal(r, sh[0] * sh[1] * sh[2], 1);
            Tensor[] s = Gpu.both(data, sh);
            Gpu.CPU.transposeState(s[0], sh[0], sh[1], sh[2]);
            gpu.transposeState(s[1], sh[0], sh[1], sh[2]);
            String what = "transposeState [" + sh[0] + "," + sh[1] + "," + sh[2] + "]";
            Gpu.check(what, Gpu.CPU.download(s[0]), gpu.download(s[1]), 0, seed[0]);
            gpu.transposeState(s[1], sh[0], sh[2], sh[1]);
            Gpu.check(what + " and back", data, gpu.download(s[1]), 0, seed[0]);
            Gpu.free(gpu, s[1]);
        }
    }

    // ------------------------------------------------------------------ speed (printed only)

    @Test
    void hotPathTimingsAtThe8BShape() {
        Gpu.backend();   // skips without a device
        Shape s = SHAPES[4];
        int t = 4;
        int reps = 100;
        long stateBytes = 4L * s.stateSize();
        double bw = 3.0e12;   // DESIGN §9: measured device-to-device bandwidth of the H100
        CudaRuntime rt = new CudaRuntime(0);
        try (CudaBackend b = new CudaBackend(rt, CudaBackend.Precision.FLOAT32)) {
            Random r = new Random(7);
            Tensor xBC = b.upload(Gpu.normal(r, t * s.conv(), 1), t, s.conv());
            Tensor dtRaw = b.upload(Gpu.uniform(r, t * s.h(), -4, 3), t, s.h());
            Tensor dtBias = b.upload(Gpu.uniform(r, s.h(), -1, 1), s.h());
            Tensor aLog = b.upload(Gpu.uniform(r, s.h(), -1, 1), s.h());
            Tensor d = b.upload(Gpu.normal(r, s.h(), 1), s.h());
            Tensor y = b.zeros(t, s.h() * s.p());
            Tensor hist = b.zeros(t, s.historyWidth());
            Tensor filler = b.zeros(64 << 20);
            Tensor filler2 = b.zeros(64 << 20);
            List<String> lines = new ArrayList<>();
            for (StateLayout layout : StateLayout.values()) {
                Tensor state = b.upload(Gpu.normal(r, s.stateSize(), 1), s.stateShape(layout));
                Tensor[] states = new Tensor[t];
                for (int i = 0; i < t; i++) {
                    states[i] = b.zeros(s.stateShape(layout));
                }
                b.mamba2ReplayOutputs(state, layout, xBC, dtRaw, dtBias, aLog, d, s.dims(), hist, y);
                Runnable replay = () -> b.mamba2Replay(state, layout, hist, t, s.dims());
                Runnable outputs = () -> b.mamba2ReplayOutputs(state, layout, xBC, dtRaw, dtBias, aLog, d, s.dims(),
                        hist, y);
                Runnable scanStates = () -> b.mamba2ScanStates(state, layout, xBC, dtRaw, dtBias, aLog, d, s.dims(),
                        states, y);
                Runnable commitCopy = () -> b.copy(states[t - 1], state);
                double tReplay = time(rt, b, filler, filler2, replay, reps, layout + " replay");
                double tOutputs = time(rt, b, filler, filler2, outputs, reps, layout + " outputs");
                double tScanStates = time(rt, b, filler, filler2, scanStates, reps, layout + " scanStates");
                double tCopy = time(rt, b, filler, filler2, commitCopy, reps, layout + " commitCopy");
                lines.add(line("replay count=4", layout, tReplay, 2 * stateBytes, bw));
                lines.add(line("replayOutputs T=4", layout, tOutputs, stateBytes, bw));
                lines.add(line("scanStates T=4", layout, tScanStates, (1 + t) * stateBytes, bw));
                lines.add(line("commit copy", layout, tCopy, 2 * stateBytes, bw));
                lines.add(String.format(Locale.ROOT,
                        "[gpu-speed] %s replay+outputs %.2f us vs scanStates+copy %.2f us: %.2fx", layout,
                        (tReplay + tOutputs) * 1e6, (tScanStates + tCopy) * 1e6,
                        (tScanStates + tCopy) / (tReplay + tOutputs)));
                b.free(state);
                for (Tensor st : states) {
                    b.free(st);
                }
            }
            lines.forEach(System.out::println);
            for (Tensor x : new Tensor[] {xBC, dtRaw, dtBias, aLog, d, y, hist, filler, filler2}) {
                b.free(x);
            }
        }
    }

    private static String line(String what, StateLayout layout, double seconds, long bytes, double bw) {
        return String.format(Locale.ROOT,
                "[gpu-speed] 8B shape %-18s %s: %7.2f us/call, %6.0f GB/s (floor %.2f us at %.1f TB/s, %.2fx floor)",
                what, layout, seconds * 1e6, bytes / seconds / 1e9, bytes / bw * 1e6, bw / 1e12,
                seconds / (bytes / bw));
    }

    /**
     * Seconds per call of {@code op} on the device: the stream is first kept busy with large copies
     * so that the launches queue up behind them and run back to back, then timed with events. The
     * figure is marked invalid when the queue drained before every launch was issued (the host's
     * launch cost then dominates); the host's cost per call is printed beside it.
     */
    static double time(CudaRuntime rt, CudaBackend b, Tensor filler, Tensor filler2, Runnable op, int reps,
                       String what) {
        for (int i = 0; i < 5; i++) {
            op.run();
        }
        b.synchronize();
        CUevent start = new CUevent();
        CUevent end = new CUevent();
        JCudaDriver.cuEventCreate(start, 0);
        JCudaDriver.cuEventCreate(end, 0);
        try {
            for (int i = 0; i < 80; i++) {
                b.copy(i % 2 == 0 ? filler : filler2, i % 2 == 0 ? filler2 : filler);   // ~14 ms of queued work
            }
            JCudaDriver.cuEventRecord(start, rt.stream());
            long h0 = System.nanoTime();
            for (int i = 0; i < reps; i++) {
                op.run();
            }
            long h1 = System.nanoTime();
            boolean queued;
            try {
                queued = JCudaDriver.cuEventQuery(start) != jcuda.driver.CUresult.CUDA_SUCCESS;
            } catch (jcuda.CudaException e) {
                queued = true;   // CUDA_ERROR_NOT_READY: the fillers were still running
            }
            JCudaDriver.cuEventRecord(end, rt.stream());
            JCudaDriver.cuEventSynchronize(end);
            float[] ms = new float[1];
            JCudaDriver.cuEventElapsedTime(ms, start, end);
            System.out.printf(Locale.ROOT, "[gpu-speed] %s: host %.1f us per call; device timing %s%n", what,
                    (h1 - h0) / 1e3 / reps, queued ? "valid (launches queued behind the fillers)"
                            : "INVALID (the queue drained: host-bound)");
            return ms[0] / 1e3 / reps;
        } finally {
            JCudaDriver.cuEventDestroy(start);
            JCudaDriver.cuEventDestroy(end);
        }
    }
}
