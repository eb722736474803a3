package dev.hyspec.backend.cuda;

import static org.junit.jupiter.api.Assertions.assertThrows;

import dev.hyspec.backend.Tensor;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Collections;
import java.util.List;
import java.util.Random;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;

/** RoPE, paged KV writes and paged attention against the CPU reference, on fresh random inputs. */
@Tag("gpu")
class AttentionKernelsTest {
    /** What untouched cache rows hold (finite, so the comparison sees a kernel that wrote one). */
    private static final float SENTINEL = -7777f;

    @Test
    void rope() {
        CudaBackend gpu = Gpu.backend();
        long[] seed = new long[1];
        Random r = Gpu.random(seed);
        // heads, headDim, rotaryDim, theta, tokens
        int[][] shapes = {{4, 64, 64, 0, 5}, {3, 128, 64, 1, 17}, {2, 256, 256, 2, 9}, {5, 16, 16, 0, 1},
            {16, 128, 128, 1, 130}, {1, 80, 40, 0, 3}};
        float[] thetas = {10_000f, 1_000_000f, 10_000_000f};
        for (int[] s : shapes) {
            int heads = s[0], headDim = s[1], rotaryDim = s[2], tokens = s[4];
            float theta = thetas[s[3]];
            int[] positions = new int[tokens];
            int base = r.nextInt(3) == 0 ? r.nextInt(200_000) : r.nextInt(50);
            for (int t = 0; t < tokens; t++) {
                positions[t] = r.nextInt(4) == 0 ? r.nextInt(262_144) : base + t;   // mostly consecutive
            }
            float[] x = Gpu.normal(r, tokens * heads * headDim, 1);
            Tensor cpu = Gpu.CPU.upload(x, tokens, heads * headDim);
            Tensor dev = gpu.upload(x, tokens, heads * headDim);
            Gpu.CPU.rope(cpu, heads, headDim, rotaryDim, theta, positions);
            gpu.rope(dev, heads, headDim, rotaryDim, theta, positions);
            Gpu.check("rope H=" + heads + " D=" + headDim + " rot=" + rotaryDim + " theta=" + theta + " T=" + tokens,
                    cpu, dev, Gpu.F32_TOL, seed[0]);
            Gpu.free(gpu, dev);
        }
    }

    @Test
    void writeKvFillsOnlyTheTablesRows() {
        CudaBackend gpu = Gpu.backend();
        long[] seed = new long[1];
        Random r = Gpu.random(seed);
        // width, pageSize, past, tokens
        int[][] cases = {{16, 16, 0, 1}, {64, 16, 5, 37}, {256, 64, 300, 8}, {48, 7, 13, 130}, {128, 16, 31, 1}};
        for (int[] c : cases) {
            int width = c[0], pageSize = c[1], past = c[2], tokens = c[3];
            int[] table = blockTable(r, past + tokens, pageSize, 3);
            int poolRows = (table.length + 3) * pageSize;
            float[] sentinel = new float[poolRows * width];
            Arrays.fill(sentinel, SENTINEL);
            Tensor[] kp = Gpu.both(sentinel, poolRows, width);
            Tensor[] vp = Gpu.both(sentinel, poolRows, width);
            float[] k = Gpu.normal(r, tokens * width, 1);
            float[] v = Gpu.normal(r, tokens * width, 1);
            Tensor[] tk = Gpu.both(k, tokens, width);
            Tensor[] tv = Gpu.both(v, tokens, width);
            Gpu.CPU.writeKv(tk[0], tv[0], kp[0], vp[0], table, pageSize, past);
            gpu.writeKv(tk[1], tv[1], kp[1], vp[1], table, pageSize, past);
            String what = "writeKv width=" + width + " page=" + pageSize + " start=" + past + " T=" + tokens;
            Gpu.check(what + " k", kp[0], kp[1], 0, seed[0]);
            Gpu.check(what + " v", vp[0], vp[1], 0, seed[0]);
            Gpu.free(gpu, kp[1], vp[1], tk[1], tv[1]);
        }
    }

    @Test
    void pagedAttention() {
        CudaBackend gpu = Gpu.backend();
        long[] seed = new long[1];
        Random r = Gpu.random(seed);
        int[] pageSizes = {16, 64, 7};
        int[] ratios = {1, 2, 4};
        int n = 0;
        for (int headDim : new int[] {16, 64, 128, 256, 80}) {
            for (int tokens : new int[] {1, 3, 8, 37, 130}) {
                for (int past : new int[] {0, 5, 300}) {
                    int kvHeads = 1 + (n % 2);
                    int heads = kvHeads * ratios[n % 3];
                    attend(gpu, r, seed[0], tokens, past, pageSizes[(n / 3) % 3], heads, kvHeads, headDim);
                    n++;
                }
            }
        }
        // long decode and verify rows: many splits per (token, head)
        attend(gpu, r, seed[0], 1, 2000, 16, 8, 2, 128);
        attend(gpu, r, seed[0], 1, 4097, 64, 4, 4, 256);
        attend(gpu, r, seed[0], 5, 1500, 16, 16, 4, 64);
        attend(gpu, r, seed[0], 1, 777, 16, 32, 8, 128);
    }

    private static void attend(CudaBackend gpu, Random r, long seed, int tokens, int past, int pageSize, int heads,
                               int kvHeads, int headDim) {
        int width = kvHeads * headDim;
        int total = past + tokens;
        int[] table = blockTable(r, total, pageSize, 2);
        int poolRows = (table.length + 2) * pageSize;
        // rows outside the table hold NaN: a kernel that reads one poisons its output
        float[] nan = new float[poolRows * width];
        Arrays.fill(nan, Float.NaN);
        Tensor[] kp = Gpu.both(nan, poolRows, width);
        Tensor[] vp = Gpu.both(nan, poolRows, width);
        float[] kh = Gpu.normal(r, total * width, 1);
        float[] vh = Gpu.normal(r, total * width, 1);
        Tensor[] k = Gpu.both(kh, total, width);
        Tensor[] v = Gpu.both(vh, total, width);
        Gpu.CPU.writeKv(k[0], v[0], kp[0], vp[0], table, pageSize, 0);
        gpu.writeKv(k[1], v[1], kp[1], vp[1], table, pageSize, 0);
        // scaled queries give peaked softmaxes, where the running max matters
        float[] qh = Gpu.normal(r, tokens * heads * headDim, r.nextBoolean() ? 1 : 4);
        Tensor[] q = Gpu.both(qh, tokens, heads * headDim);
        Tensor cpuOut = Gpu.CPU.zeros(tokens, heads * headDim);
        Gpu.CPU.pagedAttention(q[0], kp[0], vp[0], table, pageSize, heads, kvHeads, headDim, past, cpuOut);
        Tensor out = Gpu.poisoned(tokens, heads * headDim);
        gpu.pagedAttention(q[1], kp[1], vp[1], table, pageSize, heads, kvHeads, headDim, past, out);
        String what = "pagedAttention T=" + tokens + " past=" + past + " page=" + pageSize + " H=" + heads + " Hkv="
                + kvHeads + " D=" + headDim;
        if (total <= LONG_CONTEXT) {
            Gpu.check(what, cpuOut, out, Gpu.F32_TOL, seed);
        } else {
            // Over thousands of positions the CPU's own float32 sums drift by about 1e-5: hold both
            // backends to a float64 recompute instead, the GPU within the float32 tolerance.
            float[] exact = attentionInDouble(qh, kh, vh, tokens, past, heads, kvHeads, headDim);
            Gpu.check(what + " vs float64", exact, gpu.download(out), Gpu.F32_TOL, seed);
            Gpu.report(what + " cpu vs float64", Gpu.relativeError(exact, Gpu.CPU.download(cpuOut)), Gpu.F32_TOL,
                    exact.length);
        }
        Gpu.free(gpu, kp[1], vp[1], k[1], v[1], q[1], out);
    }

    /** Contexts longer than this are checked against a float64 recompute (see {@link #attend}). */
    private static final int LONG_CONTEXT = 1024;

    /** Causal GQA attention in double: query t (position past+t) over positions 0 … past+t of k, v [total, Hkv·D]. */
    private static float[] attentionInDouble(float[] q, float[] k, float[] v, int tokens, int past, int heads,
                                             int kvHeads, int headDim) {
        float[] out = new float[tokens * heads * headDim];
        int width = kvHeads * headDim;
        double scale = 1.0 / Math.sqrt(headDim);
        for (int t = 0; t < tokens; t++) {
            for (int h = 0; h < heads; h++) {
                int kvOff = (h / (heads / kvHeads)) * headDim;
                int qOff = (t * heads + h) * headDim;
                int visible = past + t + 1;
                double[] score = new double[visible];
                double max = Double.NEGATIVE_INFINITY;
                for (int p = 0; p < visible; p++) {
                    double dot = 0;
                    for (int d = 0; d < headDim; d++) {
                        dot += (double) q[qOff + d] * k[p * width + kvOff + d];
                    }
                    score[p] = dot * scale;
                    max = Math.max(max, score[p]);
                }
                double den = 0;
                double[] acc = new double[headDim];
                for (int p = 0; p < visible; p++) {
                    double e = Math.exp(score[p] - max);
                    den += e;
                    for (int d = 0; d < headDim; d++) {
                        acc[d] += e * v[p * width + kvOff + d];
                    }
                }
                for (int d = 0; d < headDim; d++) {
                    out[qOff + d] = (float) (acc[d] / den);
                }
            }
        }
        return out;
    }

    @Test
    void rejectsATableThatDoesNotCoverThePositions() {
        CudaBackend gpu = Gpu.backend();
        Tensor pages = gpu.zeros(4 * 16, 32);
        Tensor q = gpu.zeros(2, 64);
        Tensor out = gpu.zeros(2, 64);
        Tensor kv = gpu.zeros(2, 32);
        try {
            assertThrows(IndexOutOfBoundsException.class,
                    () -> gpu.pagedAttention(q, pages, pages, new int[] {0, 1}, 16, 2, 1, 32, 31, out));
            assertThrows(IndexOutOfBoundsException.class,
                    () -> gpu.pagedAttention(q, pages, pages, new int[] {0, 4}, 16, 2, 1, 32, 20, out));
            assertThrows(IndexOutOfBoundsException.class,
                    () -> gpu.writeKv(kv, kv, pages, pages, new int[] {3}, 16, 15));
        } finally {
            Gpu.free(gpu, pages, q, out, kv);
        }
    }

    /** A block table for {@code positions} positions: distinct pages of a pool with {@code spare} extra, shuffled. */
    private static int[] blockTable(Random r, int positions, int pageSize, int spare) {
        int pages = (positions + pageSize - 1) / pageSize;
        List<Integer> pool = new ArrayList<>();
        for (int i = 0; i < pages + spare; i++) {
            pool.add(i);
        }
        Collections.shuffle(pool, r);
        return pool.subList(0, pages).stream().mapToInt(Integer::intValue).toArray();
    }
}
