package dev.hyspec.backend.cuda;

import dev.hyspec.backend.Tensor;
import dev.hyspec.backend.cuda.DenseKernelsTest.Weight;
import dev.hyspec.checkpoint.DType;
import java.util.Locale;
import java.util.Random;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;

/**
 * The fused decode-step ops (residual add with RMSNorm, matmul with relu², several products of one
 * input in one launch) against the CPU backend's defaults, which run the plain ops in turn.
 */
@Tag("gpu")
class FusedDecodeKernelsTest {

    @Test
    void addRmsNorm() {
        CudaBackend gpu = Gpu.backend();
        long[] seed = new long[1];
        Random r = Gpu.random(seed);
        // {rows, cols, groupSize, weight length}
        int[][] cases = {{1, 4096, 4096, 4096}, {3, 4096, 4096, 4096}, {2, 5120, 5120, 5120}, {4, 300, 100, 300},
            {1, 6, 2, 2}, {8, 1000, 1000, 1000}};
        int i = 0;
        for (int[] c : cases) {
            for (DType dtype : DType.values()) {
                boolean plusOne = (i++ & 1) == 0;
                float[] xs = Gpu.normal(r, c[0] * c[1], 2);
                float[] ys = Gpu.normal(r, c[0] * c[1], 1);
                Tensor[] x = Gpu.both(xs, c[0], c[1]);
                Tensor[] y = Gpu.both(ys, c[0], c[1]);
                Weight w = DenseKernelsTest.weight(gpu, r, dtype, plusOne ? 0.1 : 1, c[3]);
                Tensor cpuOut = Gpu.CPU.zeros(c[0], c[1]);
                Gpu.CPU.addRmsNorm(x[0], y[0], w.cpuF32(), c[2], 1e-5f, plusOne, cpuOut);
                Tensor out = Gpu.poisoned(c[0], c[1]);
                gpu.addRmsNorm(x[1], y[1], w.gpu(), c[2], 1e-5f, plusOne, out);
                String what = String.format(Locale.ROOT, "addRmsNorm %s %dx%d group=%d w=%d plusOne=%b", dtype, c[0],
                        c[1], c[2], c[3], plusOne);
                Gpu.check(what, cpuOut, out, Gpu.F32_TOL, seed[0]);
                Gpu.check(what + " (sum)", x[0], x[1], Gpu.F32_TOL, seed[0]);
                Gpu.free(gpu, x[1], y[1], out, w.gpu());
            }
        }
    }

    @Test
    void matmulRelu2() {
        CudaBackend gpu = Gpu.backend();
        long[] seed = new long[1];
        Random r = Gpu.random(seed);
        for (int tokens : new int[] {1, 2, 5, 8, 9}) {
            for (int[] shape : new int[][] {{512, 1024}, {33, 257}, {4096, 64}}) {
                for (DType dtype : DType.values()) {
                    int outDim = shape[0];
                    int in = shape[1];
                    float[] xs = Gpu.normal(r, tokens * in, 1);
                    Tensor[] x = Gpu.both(xs, tokens, in);
                    Weight w = DenseKernelsTest.weight(gpu, r, dtype, 1, outDim, in);
                    Weight bias = DenseKernelsTest.weight(gpu, r, dtype, 1, outDim);
                    Tensor cpuOut = Gpu.CPU.zeros(tokens, outDim);
                    Gpu.CPU.matmulRelu2(x[0], w.cpu(), bias.cpuF32(), cpuOut);
                    Tensor out = Gpu.poisoned(tokens, outDim);
                    gpu.matmulRelu2(x[1], w.gpu(), bias.gpu(), out);
                    Gpu.check(String.format(Locale.ROOT, "matmulRelu2 %s T=%d in=%d out=%d", dtype, tokens, in,
                            outDim), cpuOut, out, Gpu.F32_TOL, seed[0]);
                    Gpu.free(gpu, x[1], out, w.gpu(), bias.gpu());
                }
            }
        }
    }

    @Test
    void matmuls() {
        CudaBackend gpu = Gpu.backend();
        long[] seed = new long[1];
        Random r = Gpu.random(seed);
        // output widths of the products sharing one input; the last set has more than one launch holds
        int[][] widths = {{8192, 10240, 128}, {4096, 1024, 1024}, {1}, {33, 7}, {300, 5, 64, 17, 2}};
        for (int tokens : new int[] {1, 3, 8, 12}) {
            for (int in : new int[] {256, 100}) {
                for (int[] ws : widths) {
                    for (DType dtype : new DType[] {DType.BF16, DType.F32}) {
                        float[] xs = Gpu.normal(r, tokens * in, 1);
                        Tensor[] x = Gpu.both(xs, tokens, in);
                        Tensor[] cw = new Tensor[ws.length];
                        Tensor[] gw = new Tensor[ws.length];
                        Tensor[] cb = new Tensor[ws.length];
                        Tensor[] gb = new Tensor[ws.length];
                        float[][] wv = new float[ws.length][];
                        Tensor[] cpuOut = new Tensor[ws.length];
                        Tensor[] out = new Tensor[ws.length];
                        for (int i = 0; i < ws.length; i++) {
                            Weight w = DenseKernelsTest.weight(gpu, r, dtype, 1, ws[i], in);
                            cw[i] = w.cpu();
                            gw[i] = w.gpu();
                            wv[i] = w.values();
                            if (i == 1 && ws.length > 3) {   // a biased product runs on its own
                                Weight b = DenseKernelsTest.weight(gpu, r, dtype, 1, ws[i]);
                                cb[i] = b.cpuF32();
                                gb[i] = b.gpu();
                            }
                            cpuOut[i] = Gpu.CPU.zeros(tokens, ws[i]);
                            out[i] = Gpu.poisoned(tokens, ws[i]);
                        }
                        Gpu.CPU.matmuls(x[0], cw, cb, cpuOut);
                        gpu.matmuls(x[1], gw, gb, out);
                        for (int i = 0; i < ws.length; i++) {
                            // a product with one output can cancel to a small value: measured against ||x||·||w||
                            Gpu.checkProduct(String.format(Locale.ROOT, "matmuls %s T=%d in=%d product %d of %d (out=%d)",
                                    dtype, tokens, in, i, ws.length, ws[i]), cpuOut[i], out[i], xs, wv[i], in,
                                    Gpu.F32_TOL, seed[0]);
                            Gpu.free(gpu, out[i], gw[i]);
                            if (gb[i] != null) {
                                Gpu.free(gpu, gb[i]);
                            }
                        }
                        Gpu.free(gpu, x[1]);
                    }
                }
            }
        }
    }
}
