package dev.hyspec.backend.cuda;

import static org.junit.jupiter.api.Assertions.assertThrows;

import dev.hyspec.backend.Tensor;
import dev.hyspec.checkpoint.DType;
import dev.hyspec.checkpoint.TensorEntry;
import java.util.Arrays;
import java.util.Random;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;

/** The dense kernels (dense.cu) against the CPU reference, on fresh random inputs. */
@Tag("gpu")
class DenseKernelsTest {
    /** [T, cols] shapes: one token, odd widths, widths past one block. */
    private static final int[][] SHAPES = {{1, 1}, {1, 255}, {3, 37}, {7, 4097}, {64, 1000}};

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
    void elementwise() {
        CudaBackend gpu = Gpu.backend();
        long[] seed = new long[1];
        Random r = Gpu.random(seed);
        for (int[] s : SHAPES) {
            int t = s[0];
            int c = s[1];
            String shape = " [" + t + ", " + c + "]";
            Tensor[] x = Gpu.both(Gpu.normal(r, t * c, 3), t, c);
            Tensor[] g = Gpu.both(Gpu.normal(r, t * c, 3), t, c);
            Tensor[] rowGate = Gpu.both(Gpu.normal(r, t, 3), t, 1);
            float[] scale = Gpu.normal(r, t, 2);

            Tensor ref = Gpu.CPU.zeros(t, c);
            Tensor out = Gpu.poisoned(t, c);
            Gpu.CPU.relu2(x[0], ref);
            gpu.relu2(x[1], out);
            Gpu.check("relu2" + shape, ref, out, Gpu.F32_TOL, seed[0]);

            Gpu.free(gpu, out);
            out = Gpu.poisoned(t, c);
            Gpu.CPU.siluMul(g[0], x[0], ref);
            gpu.siluMul(g[1], x[1], out);
            Gpu.check("siluMul" + shape, ref, out, Gpu.F32_TOL, seed[0]);

            Gpu.free(gpu, out);
            out = Gpu.poisoned(t, c);
            Gpu.CPU.sigmoidGate(x[0], g[0], ref);
            gpu.sigmoidGate(x[1], g[1], out);
            Gpu.check("sigmoidGate elementwise" + shape, ref, out, Gpu.F32_TOL, seed[0]);

            Gpu.free(gpu, out);
            out = Gpu.poisoned(t, c);
            Gpu.CPU.sigmoidGate(x[0], rowGate[0], ref);
            gpu.sigmoidGate(x[1], rowGate[1], out);
            Gpu.check("sigmoidGate per row" + shape, ref, out, Gpu.F32_TOL, seed[0]);

            Gpu.free(gpu, out);
            out = Gpu.poisoned(t, c);
            Gpu.CPU.scaleRows(x[0], scale, ref);
            gpu.scaleRows(x[1], scale, out);
            Gpu.check("scaleRows" + shape, ref, out, Gpu.F32_TOL, seed[0]);

            // in place: out aliases the first input
            Gpu.CPU.siluMul(g[0], x[0], g[0]);
            gpu.siluMul(g[1], x[1], g[1]);
            Gpu.check("siluMul in place" + shape, g[0], g[1], Gpu.F32_TOL, seed[0]);
            Gpu.free(gpu, out, x[1], g[1], rowGate[1]);
        }
    }

    @Test
    void embedding() {
        CudaBackend gpu = Gpu.backend();
        long[] seed = new long[1];
        Random r = Gpu.random(seed);
        int vocab = 301;
        for (DType dtype : DType.values()) {
            for (int d : new int[] {1, 37, 1024}) {
                float[] table = WeightEntries.representable(Gpu.normal(r, vocab * d, 1), dtype);
                TensorEntry e = WeightEntries.entry("embed", dtype, table, vocab, d);
                Tensor cpuTable = Gpu.CPU.weight(e);
                Tensor gpuTable = gpu.weight(e);
                for (int t : new int[] {1, 5, 130}) {
                    int[] ids = new int[t];
                    for (int i = 0; i < t; i++) {
                        ids[i] = i == 0 ? vocab - 1 : r.nextInt(vocab);
                    }
                    Tensor ref = Gpu.CPU.zeros(t, d);
                    Tensor out = Gpu.poisoned(t, d);
                    Gpu.CPU.embedding(ids, cpuTable, ref);
                    gpu.embedding(ids, gpuTable, out);
                    Gpu.check("embedding " + dtype + " T=" + t + " D=" + d, ref, out, 0, seed[0]);
                    Gpu.free(gpu, out);
                }
                Tensor out = Gpu.poisoned(1, d);
                assertThrows(IllegalArgumentException.class, () -> gpu.embedding(new int[] {vocab}, gpuTable, out));
                assertThrows(IllegalArgumentException.class, () -> gpu.embedding(new int[] {-1}, gpuTable, out));
                Gpu.free(gpu, out, gpuTable);
            }
        }
    }

    /** {T, cols, groupSize, weight length}: whole rows, heads, one element, groups wider than a block. */
    private static final int[][] NORMS = {
        {1, 64, 64, 64}, {3, 37, 37, 37}, {5, 96, 48, 48}, {4, 96, 48, 96}, {2, 7, 1, 7}, {6, 3000, 3000, 3000},
        {17, 4096, 4096, 4096}, {9, 1024, 128, 128}
    };

    @Test
    void rmsNorm() {
        CudaBackend gpu = Gpu.backend();
        long[] seed = new long[1];
        Random r = Gpu.random(seed);
        for (int[] s : NORMS) {
            for (DType dtype : DType.values()) {
                for (boolean plusOne : new boolean[] {false, true}) {
                    int t = s[0];
                    int c = s[1];
                    String what = "rmsNorm " + dtype + (plusOne ? " plusOne" : "") + " [" + t + ", " + c + "] group "
                            + s[2] + " w " + s[3];
                    float[] w = WeightEntries.representable(Gpu.normal(r, s[3], plusOne ? 0.1 : 1), dtype);
                    Tensor cpuW = Gpu.CPU.upload(w, s[3]);
                    Tensor gpuW = gpu.weight(WeightEntries.entry("norm", dtype, w, s[3]));
                    Tensor[] x = Gpu.both(Gpu.normal(r, t * c, 2), t, c);
                    float eps = 1e-5f;
                    Tensor ref = Gpu.CPU.zeros(t, c);
                    Tensor out = Gpu.poisoned(t, c);
                    Gpu.CPU.rmsNorm(x[0], cpuW, s[2], eps, plusOne, ref);
                    gpu.rmsNorm(x[1], gpuW, s[2], eps, plusOne, out);
                    Gpu.check(what, ref, out, Gpu.F32_TOL, seed[0]);
                    // in place, as the attention q/k norms call it
                    gpu.rmsNorm(x[1], gpuW, s[2], eps, plusOne, x[1]);
                    Gpu.check(what + " in place", ref, x[1], Gpu.F32_TOL, seed[0]);
                    Gpu.free(gpu, gpuW, x[1], out);
                }
            }
        }
    }

    @Test
    void gatedRmsNorm() {
        CudaBackend gpu = Gpu.backend();
        long[] seed = new long[1];
        Random r = Gpu.random(seed);
        for (int[] s : NORMS) {
            for (DType dtype : DType.values()) {
                for (boolean gateFirst : new boolean[] {false, true}) {
                    int t = s[0];
                    int c = s[1];
                    String what = "gatedRmsNorm " + dtype + (gateFirst ? " gateFirst" : " gateLast") + " [" + t + ", "
                            + c + "] group " + s[2] + " w " + s[3];
                    float[] w = WeightEntries.representable(Gpu.normal(r, s[3], 1), dtype);
                    Tensor cpuW = Gpu.CPU.upload(w, s[3]);
                    Tensor gpuW = gpu.weight(WeightEntries.entry("norm", dtype, w, s[3]));
                    Tensor[] x = Gpu.both(Gpu.normal(r, t * c, 2), t, c);
                    Tensor[] g = Gpu.both(Gpu.normal(r, t * c, 2), t, c);
                    float eps = 1e-6f;
                    Tensor ref = Gpu.CPU.zeros(t, c);
                    Tensor out = Gpu.poisoned(t, c);
                    Gpu.CPU.gatedRmsNorm(x[0], g[0], cpuW, s[2], eps, gateFirst, ref);
                    gpu.gatedRmsNorm(x[1], g[1], gpuW, s[2], eps, gateFirst, out);
                    Gpu.check(what, ref, out, Gpu.F32_TOL, seed[0]);
                    // in place, as the Mamba2 and Gated DeltaNet mixers call it
                    gpu.gatedRmsNorm(x[1], g[1], gpuW, s[2], eps, gateFirst, x[1]);
                    Gpu.check(what + " in place", ref, x[1], Gpu.F32_TOL, seed[0]);
                    Gpu.free(gpu, gpuW, x[1], g[1], out);
                }
            }
        }
    }

    @Test
    void gatherAndScatterAddRows() {
        CudaBackend gpu = Gpu.backend();
        long[] seed = new long[1];
        Random r = Gpu.random(seed);
        for (int cols : new int[] {1, 37, 4097}) {
            int tokens = 23;
            Tensor[] src = Gpu.both(Gpu.normal(r, tokens * cols, 1), tokens, cols);
            int[][] rowSets = {
                {5}, {0, 22, 7, 3, 11}, distinctRows(r, tokens, 17), {4, 9, 4, 0, 9, 4}   // the last repeats rows
            };
            for (int[] rows : rowSets) {
                int n = rows.length;
                String what = " cols=" + cols + " rows=" + Arrays.toString(rows);
                Tensor ref = Gpu.CPU.zeros(n, cols);
                Tensor out = Gpu.poisoned(n, cols);
                Gpu.CPU.gatherRows(src[0], rows, ref);
                gpu.gatherRows(src[1], rows, out);
                Gpu.check("gatherRows" + what, ref, out, 0, seed[0]);

                float[] scale = Gpu.normal(r, n, 1);
                Tensor[] part = Gpu.both(Gpu.normal(r, n * cols, 1), n, cols);
                Tensor[] dst = Gpu.both(Gpu.normal(r, tokens * cols, 1), tokens, cols);
                Gpu.CPU.scatterAddRows(part[0], rows, scale, dst[0]);
                gpu.scatterAddRows(part[1], rows, scale, dst[1]);
                Gpu.check("scatterAddRows" + what, dst[0], dst[1], Gpu.F32_TOL, seed[0]);
                Gpu.free(gpu, out, part[1], dst[1]);
            }
            Gpu.free(gpu, src[1]);
        }
    }

    private static int[] distinctRows(Random r, int limit, int n) {
        int[] all = new int[limit];
        for (int i = 0; i < limit; i++) {
            all[i] = i;
        }
        for (int i = limit - 1; i > 0; i--) {
            int j = r.nextInt(i + 1);
            int tmp = all[i];
            all[i] = all[j];
            all[j] = tmp;
        }
        return Arrays.copyOf(all, n);
    }
}
