package dev.hyspec.backend.cuda;

import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.hyspec.backend.Backend;
import dev.hyspec.backend.Tensor;
import dev.hyspec.checkpoint.DType;
import dev.hyspec.checkpoint.TensorEntry;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.util.Arrays;
import java.util.Locale;
import java.util.Random;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;

/** The dense kernels against the CPU reference, on fresh random inputs. */
@Tag("gpu")
class DenseKernelsTest {

    /**
     * A random weight of {@code dtype} on both backends as {@code backend.weight} loads it, and its
     * values widened to float32 on the CPU (for CPU operations that take float32 tensors only).
     */
    record Weight(Tensor cpu, Tensor gpu, Tensor cpuF32, float[] values) {}

    static Weight weight(CudaBackend gpu, Random r, DType dtype, double scale, int... shape) {
        int n = 1;
        for (int d : shape) {
            n *= d;
        }
        ByteBuffer bytes = ByteBuffer.allocateDirect(n * dtype.bytes()).order(ByteOrder.LITTLE_ENDIAN);
        float[] values = new float[n];
        for (int i = 0; i < n; i++) {
            float v = (float) (r.nextGaussian() * scale);
            switch (dtype) {
                case F32 -> {
                    bytes.putFloat(i * 4, v);
                    values[i] = v;
                }
                case BF16 -> {
                    short bits = (short) (Float.floatToRawIntBits(v) >>> 16);
                    bytes.putShort(i * 2, bits);
                    values[i] = DType.bf16ToFloat(bits);
                }
                case F16 -> {
                    // multiples of 2^-8 below 8 in magnitude are exact halves (11 significant bits)
                    float q = Math.max(-7.99f, Math.min(7.99f, Math.round(v * 256f) / 256f));
                    short bits = f16(q);
                    bytes.putShort(i * 2, bits);
                    values[i] = DType.f16ToFloat(bits);
                    if (values[i] != q) {
                        throw new AssertionError("f16 encoding of " + q + " gave " + values[i]);
                    }
                }
            }
        }
        TensorEntry entry = new TensorEntry("w", dtype, shape, bytes);
        return new Weight(Gpu.CPU.weight(entry), gpu.weight(entry), Gpu.CPU.upload(values, shape), values);
    }

    /** IEEE half bits of a float that is zero or an exactly representable normal half. */
    private static short f16(float v) {
        if (v == 0f) {
            return 0;
        }
        int b = Float.floatToRawIntBits(v);
        int sign = (b >>> 16) & 0x8000;
        int exp = ((b >>> 23) & 0xff) - 127 + 15;
        return (short) (sign | exp << 10 | (b >>> 13) & 0x3ff);
    }

    @Test
    void add() {
        CudaBackend gpu = Gpu.backend();
        long[] seed = new long[1];
        Random r = Gpu.random(seed);
        for (int n : new int[] {1, 255, 4097, 100_003}) {
            float[] a = Gpu.normal(r, n, 1);
            float[] b = Gpu.normal(r, n, 1);
            Tensor[] ta = Gpu.both(a, n);
            Tensor[] tb = Gpu.both(b, n);
            Tensor cpuOut = Gpu.CPU.zeros(n);
            Gpu.CPU.add(ta[0], tb[0], cpuOut);
            Tensor out = Gpu.poisoned(n);
            gpu.add(ta[1], tb[1], out);
            Gpu.check("add n=" + n, cpuOut, out, Gpu.F32_TOL, seed[0]);
            Gpu.free(gpu, ta[1], tb[1], out);
        }
    }

    @Test
    void embedding() {
        CudaBackend gpu = Gpu.backend();
        long[] seed = new long[1];
        Random r = Gpu.random(seed);
        int[][] shapes = {{50, 64}, {1000, 257}, {7, 1}};
        for (int[] vd : shapes) {
            for (DType dtype : DType.values()) {
                Weight table = weight(gpu, r, dtype, 1, vd[0], vd[1]);
                for (int tokens : new int[] {1, 5, 300}) {
                    int[] ids = new int[tokens];
                    for (int t = 0; t < tokens; t++) {
                        ids[t] = t == 0 ? vd[0] - 1 : r.nextInt(vd[0]);
                    }
                    Tensor cpuOut = Gpu.CPU.zeros(tokens, vd[1]);
                    Gpu.CPU.embedding(ids, table.cpu(), cpuOut);
                    Tensor out = Gpu.poisoned(tokens, vd[1]);
                    gpu.embedding(ids, table.gpu(), out);
                    Gpu.check("embedding " + dtype + " V=" + vd[0] + " D=" + vd[1] + " T=" + tokens, cpuOut, out,
                            Gpu.F32_TOL, seed[0]);
                    Gpu.free(gpu, out);
                }
                // an f32 table uploaded as an activation takes the same kernel
                Tensor f32 = gpu.upload(table.values(), vd[0], vd[1]);
                Tensor cpuOut = Gpu.CPU.zeros(2, vd[1]);
                Gpu.CPU.embedding(new int[] {0, vd[0] - 1}, table.cpu(), cpuOut);
                Tensor out = Gpu.poisoned(2, vd[1]);
                gpu.embedding(new int[] {0, vd[0] - 1}, f32, out);
                Gpu.check("embedding uploaded f32 table from " + dtype, cpuOut, out, Gpu.F32_TOL, seed[0]);
                Tensor small = Gpu.poisoned(1, vd[1]);
                IllegalArgumentException e = assertThrows(IllegalArgumentException.class,
                        () -> gpu.embedding(new int[] {vd[0]}, table.gpu(), small));
                assertTrue(e.getMessage().contains("outside the vocabulary"), e.getMessage());
                assertThrows(IllegalArgumentException.class, () -> gpu.embedding(new int[] {-1}, table.gpu(), small));
                Gpu.free(gpu, f32, out, small, table.gpu());
            }
        }
    }

    /**
     * Every matmul path: decode (T ≤ 8), float32 SIMT GEMM, and in BF16 precision the tensor-core GEMM
     * for bf16 weights with in % 8 == 0 (bf16 tolerance, as the decode path's products of such weights,
     * which round x to bf16 the same way; every other case stays float32-exact).
     */
    @Test
    void matmul() {
        CudaBackend gpu = Gpu.backend();
        long[] seed = new long[1];
        Random r = Gpu.random(seed);
        try (CudaBackend bf16 = new CudaBackend(CudaBackend.Precision.BF16)) {
            int combo = 0;
            for (int tokens : new int[] {1, 3, 8, 9, 64, 200}) {
                for (int in : new int[] {64, 257, 1024}) {
                    for (int outDim : new int[] {1, 33, 512, 4096}) {
                        float[] xs = Gpu.normal(r, tokens * in, 1);
                        Tensor cx = Gpu.CPU.upload(xs, tokens, in);
                        for (DType dtype : DType.values()) {
                            boolean withBias = (combo++ & 1) == 0;
                            Weight w = weight(gpu, r, dtype, 1, outDim, in);
                            Weight bias = withBias ? weight(gpu, r, dtype, 1, outDim) : null;
                            Tensor cpuOut = Gpu.CPU.zeros(tokens, outDim);
                            Gpu.CPU.matmul(cx, w.cpu(), withBias ? bias.cpuF32() : null, cpuOut);
                            String what = String.format(Locale.ROOT, "matmul %s T=%d in=%d out=%d%s", dtype, tokens,
                                    in, outDim, withBias ? " +bias" : "");
                            for (CudaBackend b : new CudaBackend[] {gpu, bf16}) {
                                // bf16 weights in BF16 precision: x is rounded to bf16 on either path
                                boolean roundsX = b == bf16 && dtype == DType.BF16 && in % 8 == 0;
                                String path = tokens <= DenseKernels.DECODE_MAX_TOKENS ? "decode"
                                        : roundsX ? "tensor-core" : "simt";
                                // the weights live in the shared backend's memory; both backends share the context
                                Tensor x = b.upload(xs, tokens, in);
                                Tensor out = poisoned(b, tokens, outDim);
                                b.matmul(x, w.gpu(), withBias ? bias.gpu() : null, out);
                                Gpu.check(what + " [" + b.precision() + " " + path + "]", Gpu.CPU.download(cpuOut),
                                        b.download(out), roundsX ? Gpu.BF16_TOL : Gpu.F32_TOL, seed[0]);
                                Gpu.free(b, x, out);
                            }
                            Gpu.free(gpu, w.gpu());
                            if (withBias) {
                                Gpu.free(gpu, bias.gpu());
                            }
                        }
                    }
                }
            }
            // a bias of another dtype than the weight, and an f32 bias uploaded as an activation
            Weight w = weight(gpu, r, DType.BF16, 1, 100, 64);
            Weight bias = weight(gpu, r, DType.F16, 1, 100);
            for (int tokens : new int[] {2, 130}) {
                float[] xs = Gpu.normal(r, tokens * 64, 1);
                Tensor cx = Gpu.CPU.upload(xs, tokens, 64);
                Tensor cpuOut = Gpu.CPU.zeros(tokens, 100);
                Gpu.CPU.matmul(cx, w.cpu(), bias.cpuF32(), cpuOut);
                for (CudaBackend b : new CudaBackend[] {gpu, bf16}) {
                    Tensor x = b.upload(xs, tokens, 64);
                    Tensor f32Bias = b.upload(bias.values(), 100);
                    for (Tensor bt : new Tensor[] {bias.gpu(), f32Bias}) {
                        Tensor out = poisoned(b, tokens, 100);
                        b.matmul(x, w.gpu(), bt, out);
                        double tol = b == bf16 ? Gpu.BF16_TOL : Gpu.F32_TOL;
                        Gpu.check("matmul bf16 weight, " + ((CudaTensor) bt).dtype() + " bias, T=" + tokens + " ["
                                + b.precision() + "]", Gpu.CPU.download(cpuOut), b.download(out), tol, seed[0]);
                        Gpu.free(b, out);
                    }
                    Gpu.free(b, x, f32Bias);
                }
            }
            Tensor x = gpu.upload(new float[64], 1, 64);
            Tensor out = gpu.zeros(1, 99);
            assertThrows(IllegalArgumentException.class, () -> gpu.matmul(x, w.gpu(), null, out));
            Gpu.free(gpu, x, out, w.gpu(), bias.gpu());
        }
    }

    /**
     * In BF16 precision a product's numerics do not depend on its row count: the first rows of a
     * tensor-core GEMM equal the same rows run alone through the decode kernels (single and fused
     * three-product launches), which round x to bf16 as the GEMM does, up to the order of float32
     * sums; and both equal the CPU's product of the bf16-rounded x to float32 tolerance. (So a verify
     * step proposes the tokens that plain decoding would, and spec decoding stays lossless in bf16.)
     */
    @Test
    void bf16ProductsDoNotDependOnRowCount() {
        long[] seed = new long[1];
        Random r = Gpu.random(seed);
        try (CudaBackend bf16 = new CudaBackend(CudaBackend.Precision.BF16)) {
            int in = 1024;
            int[] outs = {512, 1000, 96};
            int batchRows = 64;
            float[] xs = Gpu.normal(r, batchRows * in, 1);
            float[] rounded = xs.clone();
            for (int i = 0; i < rounded.length; i++) {
                rounded[i] = DType.bf16ToFloat(DType.floatToBf16(rounded[i]));
            }
            Tensor xBatch = bf16.upload(xs, batchRows, in);
            Weight[] w = new Weight[outs.length];
            Tensor[] batchOut = new Tensor[outs.length];
            for (int i = 0; i < outs.length; i++) {
                w[i] = weight(bf16, r, DType.BF16, 1, outs[i], in);
                batchOut[i] = poisoned(bf16, batchRows, outs[i]);
                bf16.matmul(xBatch, w[i].gpu(), null, batchOut[i]);
            }
            for (int tokens : new int[] {1, 4, 8}) {
                float[] xr = java.util.Arrays.copyOf(xs, tokens * in);
                Tensor x = bf16.upload(xr, tokens, in);
                Tensor cx = Gpu.CPU.upload(java.util.Arrays.copyOf(rounded, tokens * in), tokens, in);
                Tensor[] fused = new Tensor[outs.length];
                for (int i = 0; i < outs.length; i++) {
                    fused[i] = poisoned(bf16, tokens, outs[i]);
                }
                bf16.matmuls(x, new Tensor[] {w[0].gpu(), w[1].gpu(), w[2].gpu()}, null, fused);
                for (int i = 0; i < outs.length; i++) {
                    Tensor single = poisoned(bf16, tokens, outs[i]);
                    bf16.matmul(x, w[i].gpu(), null, single);
                    float[] gemmRows = java.util.Arrays.copyOf(bf16.download(batchOut[i]), tokens * outs[i]);
                    Tensor cpuOut = Gpu.CPU.zeros(tokens, outs[i]);
                    Gpu.CPU.matmul(cx, w[i].cpu(), null, cpuOut);
                    String what = String.format(Locale.ROOT, "bf16 T=%d out=%d", tokens, outs[i]);
                    Gpu.check(what + " decode vs tensor-core rows", gemmRows, bf16.download(single), Gpu.F32_TOL,
                            seed[0]);
                    Gpu.check(what + " fused decode vs tensor-core rows", gemmRows, bf16.download(fused[i]),
                            Gpu.F32_TOL, seed[0]);
                    Gpu.check(what + " decode vs CPU of rounded x", Gpu.CPU.download(cpuOut), bf16.download(single),
                            Gpu.F32_TOL, seed[0]);
                    Gpu.free(bf16, single);
                }
                Gpu.free(bf16, x);
                Gpu.free(bf16, fused);
            }
            Gpu.free(bf16, xBatch);
            Gpu.free(bf16, batchOut);
            for (Weight wi : w) {
                Gpu.free(bf16, wi.gpu());
            }
        }
    }

    /**
     * Every tile and split-K path of the bf16 tensor-core GEMM ({@code gemm.cu}, forced through
     * {@link DenseKernels#PLAN_PROPERTY}) on ragged shapes (rows, k and outputs off the tile sizes, an
     * output count that is even but not a multiple of 4, an odd one), then the default plan on the
     * Nemotron-H-8B shapes at 64 and 256 rows (decode batch and verify batch).
     */
    @Test
    void matmulTensorCoreTiles() {
        long[] seed = new long[1];
        Random r = Gpu.random(seed);
        String[] plans = {"legacy", "64x128", "128x128", "128x256", "64x128/s3", "128x128/s2", "128x256/s5"};
        int[][] ragged = {{9, 264, 300}, {130, 512, 258}, {200, 1032, 1001}, {77, 4096, 128}};
        int[][] real = {{64, 4096, 4096}, {64, 8192, 1024}, {256, 4096, 1024}, {256, 4096, 4096}, {256, 21504, 256}};
        try (CudaBackend bf16 = new CudaBackend(CudaBackend.Precision.BF16)) {
            for (int[] shape : ragged) {
                for (String plan : plans) {
                    tensorCoreCase(bf16, r, seed[0], plan, shape[0], shape[1], shape[2], true);
                }
            }
            for (int[] shape : real) {
                tensorCoreCase(bf16, r, seed[0], "", shape[0], shape[1], shape[2], false);
            }
        }
    }

    private static void tensorCoreCase(CudaBackend b, Random r, long seed, String plan, int tokens, int in, int outDim,
                                       boolean withBias) {
        float[] xs = Gpu.normal(r, tokens * in, 1);
        Tensor cx = Gpu.CPU.upload(xs, tokens, in);
        Weight w = weight(b, r, DType.BF16, 1, outDim, in);
        Weight bias = withBias ? weight(b, r, DType.BF16, 1, outDim) : null;
        Tensor cpuOut = Gpu.CPU.zeros(tokens, outDim);
        Gpu.CPU.matmul(cx, w.cpu(), withBias ? bias.cpuF32() : null, cpuOut);
        Tensor x = b.upload(xs, tokens, in);
        Tensor out = poisoned(b, tokens, outDim);
        if (plan.isEmpty()) {
            System.clearProperty(DenseKernels.PLAN_PROPERTY);
        } else {
            System.setProperty(DenseKernels.PLAN_PROPERTY, plan);
        }
        try {
            b.matmul(x, w.gpu(), withBias ? bias.gpu() : null, out);
        } finally {
            System.clearProperty(DenseKernels.PLAN_PROPERTY);
        }
        Gpu.check(String.format(Locale.ROOT, "tensor-core matmul [%s] T=%d in=%d out=%d%s",
                        plan.isEmpty() ? "default" : plan, tokens, in, outDim, withBias ? " +bias" : ""),
                Gpu.CPU.download(cpuOut), b.download(out), Gpu.BF16_TOL, seed);
        Gpu.free(b, x, out, w.gpu());
        if (withBias) {
            Gpu.free(b, bias.gpu());
        }
    }

    private static Tensor poisoned(Backend b, int rows, int cols) {
        float[] nan = new float[rows * cols];
        Arrays.fill(nan, Float.NaN);
        return b.upload(nan, rows, cols);
    }

    /** Achieved bandwidth and throughput of the matmul paths: printed, not asserted. */
    @Test
    void matmulSpeed() {
        CudaBackend gpu = Gpu.backend();
        Random r = new Random(1);
        try (CudaBackend bf16 = new CudaBackend(CudaBackend.Precision.BF16)) {
            for (int[] shape : new int[][] {{4096, 4096}, {16384, 4096}}) {
                Weight w = weight(gpu, r, DType.BF16, 0.02, shape[0], shape[1]);
                double weightBytes = 2.0 * shape[0] * shape[1];
                for (int tokens : new int[] {1, 4, 8}) {
                    double s = time(gpu, w.gpu(), tokens, shape[1], shape[0], 50);
                    System.out.printf(Locale.ROOT, "[speed] matmul decode bf16 %dx%d T=%d: %.1f us, %.0f GB/s of weights%n",
                            shape[0], shape[1], tokens, s * 1e6, weightBytes / s / 1e9);
                }
                for (CudaBackend b : new CudaBackend[] {gpu, bf16}) {
                    int tokens = 1024;
                    double s = time(b, w.gpu(), tokens, shape[1], shape[0], 10);
                    System.out.printf(Locale.ROOT, "[speed] matmul prefill bf16 %dx%d T=%d [%s]: %.1f us, %.1f TFLOP/s%n",
                            shape[0], shape[1], tokens, b.precision(), s * 1e6,
                            2.0 * tokens * shape[0] * shape[1] / s / 1e12);
                }
                Gpu.free(gpu, w.gpu());
            }
        }
    }

    /** Seconds per matmul of {@code tokens} rows, over {@code reps} launches after a warm-up. */
    private static double time(CudaBackend b, Tensor w, int tokens, int in, int outDim, int reps) {
        Tensor x = b.upload(Gpu.normal(new Random(2), tokens * in, 1), tokens, in);
        Tensor out = b.zeros(tokens, outDim);
        for (int i = 0; i < 5; i++) {
            b.matmul(x, w, null, out);
        }
        b.synchronize();
        long t0 = System.nanoTime();
        for (int i = 0; i < reps; i++) {
            b.matmul(x, w, null, out);
        }
        b.synchronize();
        double s = (System.nanoTime() - t0) / 1e9 / reps;
        Gpu.free(b, x, out);
        return s;
    }

    @Test
    void rmsNorm() {
        CudaBackend gpu = Gpu.backend();
        long[] seed = new long[1];
        Random r = Gpu.random(seed);
        // {rows, cols, groupSize, weight length}
        int[][] cases = {{1, 64, 64, 64}, {3, 4096, 4096, 4096}, {5, 2048, 128, 128}, {7, 300, 100, 300},
            {2, 96, 32, 96}, {4, 6, 2, 2}, {9, 1000, 1000, 1000}, {1, 2000, 1000, 1000}};
        int i = 0;
        for (int[] c : cases) {
            for (DType dtype : DType.values()) {
                boolean plusOne = (i++ & 1) == 0;
                float eps = plusOne ? 1e-6f : 1e-5f;
                float[] xs = Gpu.normal(r, c[0] * c[1], 2);
                Tensor[] x = Gpu.both(xs, c[0], c[1]);
                Weight w = weight(gpu, r, dtype, plusOne ? 0.1 : 1, c[3]);
                Tensor cpuOut = Gpu.CPU.zeros(c[0], c[1]);
                Gpu.CPU.rmsNorm(x[0], w.cpuF32(), c[2], eps, plusOne, cpuOut);
                Tensor out = Gpu.poisoned(c[0], c[1]);
                gpu.rmsNorm(x[1], w.gpu(), c[2], eps, plusOne, out);
                Gpu.check(String.format(Locale.ROOT, "rmsNorm %s %dx%d group=%d w=%d plusOne=%b", dtype, c[0], c[1],
                        c[2], c[3], plusOne), cpuOut, out, Gpu.F32_TOL, seed[0]);
                // in place
                gpu.rmsNorm(x[1], w.gpu(), c[2], eps, plusOne, x[1]);
                Gpu.check("rmsNorm in place " + dtype, cpuOut, x[1], Gpu.F32_TOL, seed[0]);
                Gpu.free(gpu, x[1], out, w.gpu());
            }
        }
    }

    @Test
    void gatedRmsNorm() {
        CudaBackend gpu = Gpu.backend();
        long[] seed = new long[1];
        Random r = Gpu.random(seed);
        // {rows, cols, groupSize, weight length}
        int[][] cases = {{1, 64, 64, 64}, {3, 4096, 512, 4096}, {6, 2048, 128, 128}, {2, 300, 100, 100},
            {5, 7, 7, 7}, {1, 8192, 8192, 8192}};
        for (int[] c : cases) {
            for (DType dtype : DType.values()) {
                for (boolean gateFirst : new boolean[] {true, false}) {
                    float[] xs = Gpu.normal(r, c[0] * c[1], 1.5);
                    float[] gs = Gpu.normal(r, c[0] * c[1], 2);
                    Tensor[] x = Gpu.both(xs, c[0], c[1]);
                    Tensor[] g = Gpu.both(gs, c[0], c[1]);
                    Weight w = weight(gpu, r, dtype, 1, c[3]);
                    Tensor cpuOut = Gpu.CPU.zeros(c[0], c[1]);
                    Gpu.CPU.gatedRmsNorm(x[0], g[0], w.cpuF32(), c[2], 1e-5f, gateFirst, cpuOut);
                    Tensor out = Gpu.poisoned(c[0], c[1]);
                    gpu.gatedRmsNorm(x[1], g[1], w.gpu(), c[2], 1e-5f, gateFirst, out);
                    Gpu.check(String.format(Locale.ROOT, "gatedRmsNorm %s %dx%d group=%d w=%d gateFirst=%b", dtype,
                            c[0], c[1], c[2], c[3], gateFirst), cpuOut, out, Gpu.F32_TOL, seed[0]);
                    Gpu.free(gpu, x[1], g[1], out, w.gpu());
                }
            }
        }
    }

    @Test
    void elementwise() {
        CudaBackend gpu = Gpu.backend();
        long[] seed = new long[1];
        Random r = Gpu.random(seed);
        int[][] shapes = {{1, 1}, {1, 255}, {3, 1000}, {37, 4097}, {200, 768}};
        for (int[] s : shapes) {
            int n = s[0] * s[1];
            float[] xs = Gpu.normal(r, n, 3);
            float[] ys = Gpu.normal(r, n, 3);
            Tensor[] x = Gpu.both(xs, s[0], s[1]);
            Tensor[] y = Gpu.both(ys, s[0], s[1]);
            String dims = " " + s[0] + "x" + s[1];

            Tensor cpuOut = Gpu.CPU.zeros(s[0], s[1]);
            Gpu.CPU.relu2(x[0], cpuOut);
            Tensor out = Gpu.poisoned(s[0], s[1]);
            gpu.relu2(x[1], out);
            Gpu.check("relu2" + dims, cpuOut, out, Gpu.F32_TOL, seed[0]);

            Gpu.CPU.siluMul(x[0], y[0], cpuOut);
            Gpu.free(gpu, out);
            out = Gpu.poisoned(s[0], s[1]);
            gpu.siluMul(x[1], y[1], out);
            Gpu.check("siluMul" + dims, cpuOut, out, Gpu.F32_TOL, seed[0]);

            Gpu.CPU.sigmoidGate(x[0], y[0], cpuOut);
            Gpu.free(gpu, out);
            out = Gpu.poisoned(s[0], s[1]);
            gpu.sigmoidGate(x[1], y[1], out);
            Gpu.check("sigmoidGate full" + dims, cpuOut, out, Gpu.F32_TOL, seed[0]);

            float[] perRow = Gpu.normal(r, s[0], 3);
            Tensor[] g = Gpu.both(perRow, s[0], 1);
            Gpu.CPU.sigmoidGate(x[0], g[0], cpuOut);
            Gpu.free(gpu, out);
            out = Gpu.poisoned(s[0], s[1]);
            gpu.sigmoidGate(x[1], g[1], out);
            Gpu.check("sigmoidGate per row" + dims, cpuOut, out, Gpu.F32_TOL, seed[0]);

            float[] scale = Gpu.normal(r, s[0], 2);
            Gpu.CPU.scaleRows(x[0], scale, cpuOut);
            Gpu.free(gpu, out);
            out = Gpu.poisoned(s[0], s[1]);
            gpu.scaleRows(x[1], scale, out);
            Gpu.check("scaleRows" + dims, cpuOut, out, Gpu.F32_TOL, seed[0]);

            // in place (out aliases x)
            Gpu.CPU.siluMul(x[0], y[0], x[0]);
            gpu.siluMul(x[1], y[1], x[1]);
            Gpu.check("siluMul in place" + dims, x[0], x[1], Gpu.F32_TOL, seed[0]);
            Gpu.free(gpu, x[1], y[1], g[1], out);
        }
    }

    @Test
    void gatherAndScatterRows() {
        CudaBackend gpu = Gpu.backend();
        long[] seed = new long[1];
        Random r = Gpu.random(seed);
        // {source rows, columns, indices}
        int[][] cases = {{1, 1, 1}, {10, 64, 25}, {50, 257, 7}, {4, 4096, 40}, {300, 33, 1000}};
        for (int[] c : cases) {
            int[] rows = new int[c[2]];
            for (int i = 0; i < rows.length; i++) {
                rows[i] = r.nextInt(c[0]);   // repeats are likely
            }
            float[] scale = Gpu.normal(r, rows.length, 1);
            String dims = " rows=" + c[0] + " cols=" + c[1] + " n=" + c[2];

            Tensor[] src = Gpu.both(Gpu.normal(r, c[0] * c[1], 1), c[0], c[1]);
            Tensor cpuDst = Gpu.CPU.zeros(rows.length, c[1]);
            Gpu.CPU.gatherRows(src[0], rows, cpuDst);
            Tensor dst = Gpu.poisoned(rows.length, c[1]);
            gpu.gatherRows(src[1], rows, dst);
            Gpu.check("gatherRows" + dims, cpuDst, dst, Gpu.F32_TOL, seed[0]);

            Tensor[] moved = Gpu.both(Gpu.normal(r, rows.length * c[1], 1), rows.length, c[1]);
            Tensor[] acc = Gpu.both(Gpu.normal(r, c[0] * c[1], 1), c[0], c[1]);
            Gpu.CPU.scatterAddRows(moved[0], rows, scale, acc[0]);
            gpu.scatterAddRows(moved[1], rows, scale, acc[1]);
            Gpu.check("scatterAddRows" + dims, acc[0], acc[1], Gpu.F32_TOL, seed[0]);
            Gpu.free(gpu, src[1], dst, moved[1], acc[1]);
        }
        Tensor src = gpu.zeros(3, 4);
        Tensor dst = gpu.zeros(1, 4);
        assertThrows(IndexOutOfBoundsException.class, () -> gpu.gatherRows(src, new int[] {3}, dst));
        assertThrows(IndexOutOfBoundsException.class, () -> gpu.scatterAddRows(dst, new int[] {-1}, new float[] {1}, src));
        Gpu.free(gpu, src, dst);
    }
}
