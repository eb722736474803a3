package dev.hyspec.backend.cuda;

import dev.hyspec.backend.Tensor;
import dev.hyspec.checkpoint.DType;
import dev.hyspec.checkpoint.TensorEntry;
import java.util.Arrays;
import java.util.Random;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;

/**
 * matmul (matmul.cu) against the CPU reference: every kernel (gemv for up to
 * {@link DenseKernels#GEMV_MAX_TOKENS} tokens, the tiled float32 kernel and the bf16 tensor-core one
 * above), every weight dtype, with and without bias, on sizes that are not multiples of any tile.
 */
@Tag("gpu")
class MatmulKernelTest {
    /** {T, in, out}: decode, verify rows, two gemv passes, the smallest tiled T, prefill with ragged tiles. */
    private static final int[][] SHAPES = {
        {1, 64, 96}, {1, 37, 50}, {1, 4096, 1000}, {4, 256, 129}, {6, 1000, 333}, {16, 512, 300}, {17, 100, 70},
        {64, 128, 128}, {130, 333, 257}, {300, 1024, 1100}
    };

    private enum Bias {
        NONE,
        F32,
        BF16
    }

    @Test
    void float32() {
        CudaBackend gpu = Gpu.backend();
        long[] seed = new long[1];
        Random r = Gpu.random(seed);
        for (int[] s : SHAPES) {
            for (DType dtype : DType.values()) {
                Bias bias = Bias.values()[r.nextInt(Bias.values().length)];
                Case c = new Case(gpu, r, s, dtype, bias, false);
                Tensor out = Gpu.poisoned(s[0], s[2]);
                Gpu.CPU.matmul(c.cpuX, c.cpuW, c.cpuBias, c.ref);
                gpu.matmul(c.gpuX, c.gpuW, c.gpuBias, out);
                Gpu.check("matmul " + c.name(), c.ref, out, Gpu.F32_TOL, seed[0]);
                c.free(gpu);
                Gpu.free(gpu, out);
            }
        }
    }

    /**
     * {@link CudaBackend.Precision#BF16}: against a reference fed the bf16-rounded x and w (only the
     * order of float32 sums may differ), and against the unrounded float32 product at the bf16 tolerance.
     */
    @Test
    void bf16Precision() {
        Gpu.backend();
        long[] seed = new long[1];
        Random r = Gpu.random(seed);
        try (CudaBackend bf16 = new CudaBackend(CudaBackend.Precision.BF16)) {
            for (int[] s : SHAPES) {
                for (DType dtype : DType.values()) {
                    Bias bias = Bias.values()[r.nextInt(Bias.values().length)];
                    Case rounded = new Case(bf16, r, s, dtype, bias, true);
                    Tensor out = poisoned(bf16, s[0], s[2]);
                    bf16.matmul(rounded.gpuX, rounded.gpuW, rounded.gpuBias, out);
                    float[] got = bf16.download(out);
                    Gpu.CPU.matmul(rounded.cpuX, rounded.cpuW, rounded.cpuBias, rounded.ref);
                    Gpu.check("matmul bf16 precision vs rounded inputs " + rounded.name(), Gpu.CPU.download(rounded.ref),
                            got, 1e-4, seed[0]);
                    Tensor exact = Gpu.CPU.zeros(s[0], s[2]);
                    Gpu.CPU.matmul(rounded.cpuXUnrounded, rounded.cpuWUnrounded, rounded.cpuBias, exact);
                    Gpu.check("matmul bf16 precision vs float32 " + rounded.name(), Gpu.CPU.download(exact), got,
                            Gpu.BF16_TOL, seed[0]);
                    rounded.free(bf16);
                    bf16.free(out);
                }
            }
            if (bf16.liveBlocks() != 1) {   // the staging area
                throw new AssertionError("bf16 backend leaks " + (bf16.liveBlocks() - 1) + " device blocks");
            }
        }
    }

    private static Tensor poisoned(CudaBackend b, int rows, int cols) {
        float[] nan = new float[rows * cols];
        Arrays.fill(nan, Float.NaN);
        return b.upload(nan, rows, cols);
    }

    /** One product's inputs on both backends. With {@code roundBf16} the CPU side gets bf16-rounded x and w. */
    private static final class Case {
        final int[] shape;
        final DType dtype;
        final Bias bias;
        final Tensor cpuX;
        final Tensor cpuW;
        final Tensor cpuBias;
        final Tensor cpuXUnrounded;
        final Tensor cpuWUnrounded;
        final Tensor gpuX;
        final Tensor gpuW;
        final Tensor gpuBias;
        final Tensor ref;

        Case(CudaBackend gpu, Random r, int[] s, DType dtype, Bias bias, boolean roundBf16) {
            this.shape = s;
            this.dtype = dtype;
            this.bias = bias;
            int t = s[0];
            int in = s[1];
            int out = s[2];
            float[] x = Gpu.normal(r, t * in, 1);
            float[] w = WeightEntries.representable(Gpu.normal(r, out * in, 1 / Math.sqrt(in)), dtype);
            TensorEntry we = WeightEntries.entry("w", dtype, w, out, in);
            gpuX = gpu.upload(x, t, in);
            gpuW = gpu.weight(we);
            cpuXUnrounded = Gpu.CPU.upload(x, t, in);
            cpuWUnrounded = Gpu.CPU.weight(we);
            if (roundBf16) {
                cpuX = Gpu.CPU.upload(WeightEntries.representable(x, DType.BF16), t, in);
                cpuW = Gpu.CPU.weight(WeightEntries.entry("w", DType.BF16, WeightEntries.representable(w, DType.BF16),
                        out, in));
            } else {
                cpuX = cpuXUnrounded;
                cpuW = cpuWUnrounded;
            }
            if (bias == Bias.NONE) {
                cpuBias = null;
                gpuBias = null;
            } else {
                DType bt = bias == Bias.F32 ? DType.F32 : DType.BF16;
                float[] b = WeightEntries.representable(Gpu.normal(r, out, 1), bt);
                cpuBias = Gpu.CPU.upload(b, out);
                gpuBias = gpu.weight(WeightEntries.entry("b", bt, b, out));
            }
            ref = Gpu.CPU.zeros(t, out);
        }

        String name() {
            return "T=" + shape[0] + " in=" + shape[1] + " out=" + shape[2] + " w " + dtype + " bias " + bias;
        }

        void free(CudaBackend gpu) {
            gpu.free(gpuX);
            gpu.free(gpuW);
            if (gpuBias != null) {
                gpu.free(gpuBias);
            }
        }
    }
}
