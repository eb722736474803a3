package dev.hyspec.backend.cpu;

import static dev.hyspec.backend.cpu.TestData.assertClose;
import static dev.hyspec.backend.cpu.TestData.normal;
import static dev.hyspec.backend.cpu.TestData.rows;
import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.hyspec.backend.Tensor;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Collections;
import java.util.List;
import java.util.Random;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.CsvSource;

/**
 * {@link CpuBackend#writeKv} and {@link CpuBackend#pagedAttention} over a shuffled block table,
 * against the contiguous-cache {@link CpuBackend#attention}.
 */
class PagedAttentionTest {
    private static final int HEADS = 4;
    private static final int KV_HEADS = 2;
    private static final int D = 8;
    private static final int WIDTH = KV_HEADS * D;
    private static final int PAGE = 4;
    private static final int POOL_PAGES = 8;

    private final CpuBackend be = new CpuBackend();

    @ParameterizedTest(name = "pastLen {0}, T {1}")
    @CsvSource({"0, 1", "0, 5", "7, 3", "9, 1", "4, 4", "13, 6"})
    void pagedMatchesContiguous(int pastLen, int tokens) {
        Random r = new Random(51L * pastLen + tokens);
        int total = pastLen + tokens;
        float[] k = normal(r, total * WIDTH, 1);
        float[] v = normal(r, total * WIDTH, 1);
        float[] q = normal(r, tokens * HEADS * D, 1);
        // A shuffled choice of physical pages for the sequence's logical pages.
        List<Integer> pool = new ArrayList<>();
        for (int i = 0; i < POOL_PAGES; i++) {
            pool.add(i);
        }
        Collections.shuffle(pool, r);
        int pages = (total + PAGE - 1) / PAGE;
        int[] blockTable = pool.subList(0, pages).stream().mapToInt(Integer::intValue).toArray();
        // Unused rows hold NaN: reading one would poison the output.
        float[] nan = new float[POOL_PAGES * PAGE * WIDTH];
        Arrays.fill(nan, Float.NaN);
        Tensor kPages = be.upload(nan, POOL_PAGES * PAGE, WIDTH);
        Tensor vPages = be.upload(nan, POOL_PAGES * PAGE, WIDTH);
        // The past, then this call's tokens, as the layers write them.
        if (pastLen > 0) {
            be.writeKv(be.upload(rows(k, WIDTH, 0, pastLen), pastLen, WIDTH),
                    be.upload(rows(v, WIDTH, 0, pastLen), pastLen, WIDTH), kPages, vPages, blockTable, PAGE, 0);
        }
        be.writeKv(be.upload(rows(k, WIDTH, pastLen, total), tokens, WIDTH),
                be.upload(rows(v, WIDTH, pastLen, total), tokens, WIDTH), kPages, vPages, blockTable, PAGE, pastLen);

        // writeKv: position p is row blockTable[p / PAGE]·PAGE + p % PAGE; nothing else is written.
        float[] kp = be.download(kPages);
        float[] vp = be.download(vPages);
        boolean[] used = new boolean[POOL_PAGES * PAGE];
        for (int p = 0; p < total; p++) {
            int row = blockTable[p / PAGE] * PAGE + p % PAGE;
            used[row] = true;
            assertArrayEquals(rows(k, WIDTH, p, p + 1), rows(kp, WIDTH, row, row + 1), "k of position " + p);
            assertArrayEquals(rows(v, WIDTH, p, p + 1), rows(vp, WIDTH, row, row + 1), "v of position " + p);
        }
        for (int row = 0; row < used.length; row++) {
            if (!used[row]) {
                assertTrue(Float.isNaN(kp[row * WIDTH]) && Float.isNaN(vp[row * WIDTH]), "row " + row + " untouched");
            }
        }

        Tensor paged = be.zeros(tokens, HEADS * D);
        be.pagedAttention(be.upload(q, tokens, HEADS * D), kPages, vPages, blockTable, PAGE, HEADS, KV_HEADS, D,
                pastLen, paged);
        // the same keys and values laid out contiguously: one page holding every position
        Tensor contiguous = be.zeros(tokens, HEADS * D);
        be.pagedAttention(be.upload(q, tokens, HEADS * D), be.upload(k, total, WIDTH), be.upload(v, total, WIDTH),
                new int[] {0}, total, HEADS, KV_HEADS, D, pastLen, contiguous);
        assertClose("out", be.download(contiguous), be.download(paged), 1e-6);
        assertClose("out vs reference", reference(q, k, v, pastLen, tokens), be.download(paged), 1e-5);
    }

    /** Causal GQA softmax attention in double precision over contiguous k, v [total, Hkv·D]. */
    private static double[] reference(float[] q, float[] k, float[] v, int pastLen, int tokens) {
        double[] out = new double[tokens * HEADS * D];
        for (int t = 0; t < tokens; t++) {
            for (int h = 0; h < HEADS; h++) {
                int kvh = h / (HEADS / KV_HEADS);
                int visible = pastLen + t + 1;
                double[] s = new double[visible];
                double max = Double.NEGATIVE_INFINITY;
                for (int j = 0; j < visible; j++) {
                    for (int i = 0; i < D; i++) {
                        s[j] += (double) q[(t * HEADS + h) * D + i] * k[j * WIDTH + kvh * D + i];
                    }
                    s[j] /= Math.sqrt(D);
                    max = Math.max(max, s[j]);
                }
                double sum = 0;
                for (int j = 0; j < visible; j++) {
                    s[j] = Math.exp(s[j] - max);
                    sum += s[j];
                }
                for (int j = 0; j < visible; j++) {
                    for (int i = 0; i < D; i++) {
                        out[(t * HEADS + h) * D + i] += s[j] / sum * v[j * WIDTH + kvh * D + i];
                    }
                }
            }
        }
        return out;
    }
}
