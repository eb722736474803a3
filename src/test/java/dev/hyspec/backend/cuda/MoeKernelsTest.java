package dev.hyspec.backend.cuda;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;

import dev.hyspec.backend.ExpertWeights;
import dev.hyspec.backend.MoeRouting;
import dev.hyspec.backend.Tensor;
import dev.hyspec.checkpoint.DType;
import java.util.Random;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;

/**
 * The MoE kernels ({@code moe.cu}) against the CPU reference (the Backend defaults, routing by
 * MoeRouting.route), on fresh random inputs with NaN-poisoned outputs: routing ids exact and
 * weights within float32 tolerance for both rules, the routed products for every weight dtype, and
 * the combine.
 */
@Tag("gpu")
class MoeKernelsTest {

    @Test
    void softmaxRouting() {
        long[] seed = new long[1];
        Random r = Gpu.random(seed);
        for (int[] ekt : new int[][] {{4, 2, 1}, {4, 2, 37}, {64, 8, 5}, {512, 10, 33}}) {
            checkRouting("softmax", MoeRouting.softmax(ekt[1], true), ekt[0], ekt[2], r, seed[0], null);
            checkRouting("softmax unnormalised", MoeRouting.softmax(ekt[1], false), ekt[0], ekt[2], r, seed[0], null);
        }
    }

    @Test
    void groupedSigmoidRouting() {
        long[] seed = new long[1];
        Random r = Gpu.random(seed);
        // {E, K, nGroup, topkGroup, T}
        for (int[] c : new int[][] {{64, 6, 8, 4, 1}, {128, 6, 8, 4, 41}, {16, 3, 1, 1, 9}, {8, 3, 4, 2, 20}}) {
            float[] bias = Gpu.normal(r, c[0], 0.1);
            checkRouting("sigmoid G=" + c[2], null, c[0], c[4], r, seed[0], bias, c);
        }
    }

    private static void checkRouting(String what, MoeRouting rule, int experts, int tokens, Random r, long seed,
                                     float[] bias, int... sigmoidCase) {
        CudaBackend gpu = Gpu.backend();
        Tensor[] b = bias == null ? null : Gpu.both(bias, experts);
        MoeRouting cpuRule = rule;
        MoeRouting gpuRule = rule;
        int k = rule == null ? sigmoidCase[1] : rule.topK();
        if (rule == null) {
            cpuRule = new MoeRouting(true, k, true, sigmoidCase[2], sigmoidCase[3], 2.5f, b[0]);
            gpuRule = new MoeRouting(true, k, true, sigmoidCase[2], sigmoidCase[3], 2.5f, b[1]);
        }
        Tensor[] logits = Gpu.both(Gpu.normal(r, tokens * experts, 2), tokens, experts);
        Tensor cpuIds = Gpu.CPU.zeros(tokens, k);
        Tensor cpuW = Gpu.CPU.zeros(tokens, k);
        Gpu.CPU.moeRoute(logits[0], cpuRule, cpuIds, cpuW);
        Tensor ids = Gpu.poisoned(tokens, k);
        Tensor w = Gpu.poisoned(tokens, k);
        gpu.moeRoute(logits[1], gpuRule, ids, w);
        String name = "moe_route " + what + " E=" + experts + " K=" + k + " T=" + tokens;
        float[] want = Gpu.CPU.download(cpuIds);
        float[] got = gpu.download(ids);
        Gpu.report(name + " ids", java.util.Arrays.equals(want, got) ? 0 : Double.NaN, 0, want.length);
        assertArrayEquals(want, got, name + ": expert ids (seed " + seed + ")");
        Gpu.check(name + " weights", cpuW, w, Gpu.F32_TOL, seed);
        Gpu.free(gpu, logits[1], ids, w);
        if (b != null) {
            gpu.free(b[1]);
        }
    }

    /** {@code [T, K]} distinct experts per token, as floats; {@code skew}: most tokens pick experts 0 and 1. */
    private static float[] ids(Random r, int tokens, int k, int experts, boolean skew) {
        float[] ids = new float[tokens * k];
        for (int t = 0; t < tokens; t++) {
            java.util.List<Integer> all = new java.util.ArrayList<>();
            for (int e = 0; e < experts; e++) {
                all.add(e);
            }
            java.util.Collections.shuffle(all, r);
            if (skew && t % 5 != 0) {
                all.remove(Integer.valueOf(0));
                all.remove(Integer.valueOf(1));
                all.add(0, 1);
                all.add(0, 0);
            }
            for (int j = 0; j < k; j++) {
                ids[t * k + j] = all.get(j);
            }
        }
        return ids;
    }

    @Test
    void routedExpertProducts() {
        CudaBackend gpu = Gpu.backend();
        long[] seed = new long[1];
        Random r = Gpu.random(seed);
        int experts = 8;
        // {N, D}: vector loads (D a multiple of 8), and the scalar path (D = 70)
        for (int[] nd : new int[][] {{96, 136}, {40, 70}, {200, 64}}) {
            for (DType dtype : new DType[] {DType.F32, DType.BF16, DType.F16}) {
                Tensor[] cpuW = new Tensor[experts];
                Tensor[] gpuW = new Tensor[experts];
                for (int e = 0; e < experts; e++) {
                    DenseKernelsTest.Weight w = DenseKernelsTest.weight(gpu, r, dtype, 0.2, nd[0], nd[1]);
                    cpuW[e] = w.cpu();
                    gpuW[e] = w.gpu();
                }
                ExpertWeights cpuExperts = Gpu.CPU.expertWeights(cpuW);
                ExpertWeights gpuExperts = gpu.expertWeights(gpuW);
                for (int[] tk : new int[][] {{1, 2}, {5, 3}, {40, 2}}) {
                    for (boolean skew : new boolean[] {false, true}) {
                        for (boolean perPair : new boolean[] {false, true}) {
                            int tokens = tk[0];
                            int k = tk[1];
                            int pairs = tokens * k;
                            int xRows = perPair ? pairs : tokens;
                            Tensor[] id = Gpu.both(ids(r, tokens, k, experts, skew), tokens, k);
                            Tensor[] x = Gpu.both(Gpu.normal(r, xRows * nd[1], 1), xRows, nd[1]);
                            Tensor want = Gpu.CPU.zeros(pairs, nd[0]);
                            Gpu.CPU.moeExpertMatmul(x[0], id[0], cpuExperts, want);
                            Tensor got = Gpu.poisoned(pairs, nd[0]);
                            gpu.moeExpertMatmul(x[1], id[1], gpuExperts, got);
                            Gpu.check("moe_matmul " + dtype + " N=" + nd[0] + " D=" + nd[1] + " T=" + tokens + " K=" + k
                                    + (skew ? " skewed" : "") + (perPair ? " per pair" : " per token"), want, got,
                                    Gpu.F32_TOL, seed[0]);
                            Gpu.free(gpu, id[1], x[1], got);
                        }
                    }
                }
            }
        }
    }

    @Test
    void combine() {
        CudaBackend gpu = Gpu.backend();
        long[] seed = new long[1];
        Random r = Gpu.random(seed);
        for (int[] tkd : new int[][] {{1, 2, 128}, {33, 4, 200}, {7, 10, 1000}}) {
            int tokens = tkd[0];
            int k = tkd[1];
            int d = tkd[2];
            Tensor[] id = Gpu.both(ids(r, tokens, k, 64, false), tokens, k);
            Tensor[] w = Gpu.both(Gpu.uniform(r, tokens * k, 0, 1), tokens, k);
            Tensor[] y = Gpu.both(Gpu.normal(r, tokens * k * d, 1), tokens * k, d);
            Tensor want = Gpu.CPU.zeros(tokens, d);
            Gpu.CPU.moeCombine(y[0], id[0], w[0], want);
            Tensor got = Gpu.poisoned(tokens, d);
            gpu.moeCombine(y[1], id[1], w[1], got);
            Gpu.check("moe_combine T=" + tokens + " K=" + k + " D=" + d, want, got, Gpu.F32_TOL, seed[0]);
            Gpu.free(gpu, id[1], w[1], y[1], got);
        }
    }
}
