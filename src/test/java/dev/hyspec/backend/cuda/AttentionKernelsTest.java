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
        Tensor[] k = Gpu.both(Gpu.normal(r, total * width, 1), total, width);
        Tensor[] v = Gpu.both(Gpu.normal(r, total * width, 1), total, width);
        Gpu.CPU.writeKv(k[0], v[0], kp[0], vp[0], table, pageSize, 0);
        gpu.writeKv(k[1], v[1], kp[1], vp[1], table, pageSize, 0);
        // scaled queries give peaked softmaxes, where the running max matters
        Tensor[] q = Gpu.both(Gpu.normal(r, tokens * heads * headDim, r.nextBoolean() ? 1 : 4), tokens,
                heads * headDim);
        Tensor cpuOut = Gpu.CPU.zeros(tokens, heads * headDim);
        Gpu.CPU.pagedAttention(q[0], kp[0], vp[0], table, pageSize, heads, kvHeads, headDim, past, cpuOut);
        Tensor out = Gpu.poisoned(tokens, heads * headDim);
        gpu.pagedAttention(q[1], kp[1], vp[1], table, pageSize, heads, kvHeads, headDim, past, out);
        Gpu.check("pagedAttention T=" + tokens + " past=" + past + " page=" + pageSize + " H=" + heads + " Hkv="
                + kvHeads + " D=" + headDim, cpuOut, out, Gpu.F32_TOL, seed);
        Gpu.free(gpu, kp[1], vp[1], k[1], v[1], q[1], out);
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
