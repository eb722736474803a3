package dev.hyspec.backend.cuda;

import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.hyspec.backend.Tensor;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Collections;
import java.util.List;
import java.util.Random;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;

/**
 * The batched KV writes and paged attention (R rows × T tokens in one launch) against the CPU backend's
 * batched defaults, on fresh random inputs: mixed past lengths in one batch, rows of length 0 and rows
 * shorter than T. Cache rows nothing wrote and the query rows of padding tokens hold NaN, so a kernel
 * that reads one poisons its output.
 */
@Tag("gpu")
class AttentionBatchKernelsTest {
    private static final int PAGE = 16;
    private static final int HEADS = 8;
    private static final int KV_HEADS = 2;
    /** Tokens past this position are checked against a float64 recompute (see {@link #attend}). */
    private static final int LONG_CONTEXT = 1024;

    /** Row r: tokens {@code t < lengths[r]} at positions {@code starts[r] + t} of {@code tables[r]}. */
    private record Batch(int tokensPerRow, int[] starts, int[] lengths, int[][] tables, int poolPages) {
        int rows() {
            return starts.length;
        }

        String describe() {
            return "R=" + rows() + " T=" + tokensPerRow + " starts=" + Arrays.toString(starts) + " lengths="
                    + Arrays.toString(lengths);
        }
    }

    @Test
    void pagedAttentionBatch() {
        CudaBackend gpu = Gpu.backend();
        long[] seed = new long[1];
        Random r = Gpu.random(seed);
        for (int headDim : new int[] {64, 128}) {
            for (int rows : new int[] {1, 3, 8}) {
                for (int tokensPerRow : new int[] {1, 4}) {
                    attend(gpu, r, seed[0], batch(r, rows, tokensPerRow, 1500), headDim);
                }
            }
            // short rows only: one block table bucket of 8 pages, no flash-decoding split
            attend(gpu, r, seed[0], batch(r, 8, 4, 100), headDim);
        }
    }

    /**
     * A batch of {@code rows} rows with past lengths up to {@code maxPast}: row kinds cycle through a long
     * row (past {@value #LONG_CONTEXT}), a fresh row, a short one and a random one; every third row has
     * length 0 (half of those with an empty block table), others are shorter than T. Tables cover
     * {@code start + T} positions, so padding tokens have cache rows they must not touch.
     */
    private static Batch batch(Random r, int rows, int tokensPerRow, int maxPast) {
        int[] starts = new int[rows];
        int[] lengths = new int[rows];
        int[] pages = new int[rows];
        for (int i = 0; i < rows; i++) {
            starts[i] = switch (i % 4) {
                case 0 -> maxPast > LONG_CONTEXT ? LONG_CONTEXT + 1 + r.nextInt(maxPast - LONG_CONTEXT)
                        : r.nextInt(maxPast + 1);
                case 1 -> 0;
                case 2 -> r.nextInt(40);
                default -> r.nextInt(maxPast + 1);
            };
            lengths[i] = i % 3 == 2 ? 0 : i % 3 == 1 && tokensPerRow > 1 ? 1 + r.nextInt(tokensPerRow - 1) : tokensPerRow;
            boolean emptyTable = lengths[i] == 0 && i % 2 == 0;
            pages[i] = emptyTable ? 0 : (starts[i] + tokensPerRow + PAGE - 1) / PAGE;
        }
        int total = Arrays.stream(pages).sum();
        List<Integer> pool = new ArrayList<>();
        for (int p = 0; p < total + 2; p++) {
            pool.add(p);
        }
        Collections.shuffle(pool, r);
        int[][] tables = new int[rows][];
        int next = 0;
        for (int i = 0; i < rows; i++) {
            tables[i] = pool.subList(next, next + pages[i]).stream().mapToInt(Integer::intValue).toArray();
            next += pages[i];
        }
        return new Batch(tokensPerRow, starts, lengths, tables, total + 2);
    }

    private static void attend(CudaBackend gpu, Random r, long seed, Batch b, int headDim) {
        int rows = b.rows(), tokensPerRow = b.tokensPerRow(), tokens = rows * tokensPerRow;
        int width = KV_HEADS * headDim, qWidth = HEADS * headDim;
        String what = "pagedAttentionBatch D=" + headDim + " " + b.describe();
        int poolRows = b.poolPages() * PAGE;
        float[] nan = new float[poolRows * width];
        Arrays.fill(nan, Float.NaN);
        Tensor[] kp = Gpu.both(nan, poolRows, width);
        Tensor[] vp = Gpu.both(nan, poolRows, width);

        // each row's keys and values of positions 0 … start+length−1; the past goes in with per-row writes
        float[][] kh = new float[rows][];
        float[][] vh = new float[rows][];
        for (int i = 0; i < rows; i++) {
            int n = b.lengths()[i] == 0 ? 0 : b.starts()[i] + b.lengths()[i];
            kh[i] = Gpu.normal(r, n * width, 1);
            vh[i] = Gpu.normal(r, n * width, 1);
            if (n > 0 && b.starts()[i] > 0) {
                Tensor[] k = Gpu.both(Arrays.copyOf(kh[i], b.starts()[i] * width), b.starts()[i], width);
                Tensor[] v = Gpu.both(Arrays.copyOf(vh[i], b.starts()[i] * width), b.starts()[i], width);
                Gpu.CPU.writeKv(k[0], v[0], kp[0], vp[0], b.tables()[i], PAGE, 0);
                gpu.writeKv(k[1], v[1], kp[1], vp[1], b.tables()[i], PAGE, 0);
                Gpu.free(gpu, k[1], v[1]);
            }
        }
        // this step's tokens; padding tokens' keys, values and queries are NaN
        float[] ks = nanRows(tokens, width);
        float[] vs = nanRows(tokens, width);
        float[] qs = nanRows(tokens, qWidth);
        float qScale = r.nextBoolean() ? 1 : 4;   // peaked softmaxes, where the running max matters
        for (int i = 0; i < rows; i++) {
            for (int t = 0; t < b.lengths()[i]; t++) {
                int row = i * tokensPerRow + t;
                System.arraycopy(kh[i], (b.starts()[i] + t) * width, ks, row * width, width);
                System.arraycopy(vh[i], (b.starts()[i] + t) * width, vs, row * width, width);
                for (int c = 0; c < qWidth; c++) {
                    qs[row * qWidth + c] = (float) (r.nextGaussian() * qScale);
                }
            }
        }
        Tensor[] k = Gpu.both(ks, tokens, width);
        Tensor[] v = Gpu.both(vs, tokens, width);
        Gpu.CPU.writeKvBatch(k[0], v[0], kp[0], vp[0], b.tables(), PAGE, b.starts(), b.lengths(), tokensPerRow);
        gpu.writeKvBatch(k[1], v[1], kp[1], vp[1], b.tables(), PAGE, b.starts(), b.lengths(), tokensPerRow);
        samePages(what.replace("pagedAttentionBatch", "writeKvBatch") + " k", kp[0], kp[1]);
        samePages(what.replace("pagedAttentionBatch", "writeKvBatch") + " v", vp[0], vp[1]);

        Tensor[] q = Gpu.both(qs, tokens, qWidth);
        Tensor cpuOut = Gpu.CPU.zeros(tokens, qWidth);
        Gpu.CPU.pagedAttentionBatch(q[0], kp[0], vp[0], b.tables(), PAGE, HEADS, KV_HEADS, headDim, b.starts(),
                b.lengths(), tokensPerRow, cpuOut);
        Tensor out = Gpu.poisoned(tokens, qWidth);
        gpu.pagedAttentionBatch(q[1], kp[1], vp[1], b.tables(), PAGE, HEADS, KV_HEADS, headDim, b.starts(),
                b.lengths(), tokensPerRow, out);
        float[] cpu = Gpu.CPU.download(cpuOut);
        float[] dev = gpu.download(out);

        // Sort the output rows: short contexts against the CPU, long ones also against float64 (over
        // more than ~1000 positions the CPU's own float32 sums drift by about 1e-5), padding ones zero.
        Rows shortRows = new Rows(), longRows = new Rows(), padding = new Rows();
        for (int i = 0; i < rows; i++) {
            for (int t = 0; t < tokensPerRow; t++) {
                int row = i * tokensPerRow + t;
                int visible = b.starts()[i] + t + 1;
                if (t >= b.lengths()[i]) {
                    padding.add(cpu, dev, row * qWidth, qWidth, null);
                } else if (visible <= LONG_CONTEXT) {
                    shortRows.add(cpu, dev, row * qWidth, qWidth, null);
                } else {
                    float[] exact = attentionInDouble(qs, row * qWidth, kh[i], vh[i], visible, headDim);
                    longRows.add(cpu, dev, row * qWidth, qWidth, exact);
                }
            }
        }
        if (!shortRows.isEmpty()) {
            Gpu.check(what + " rows <=" + LONG_CONTEXT, shortRows.cpu(), shortRows.gpu(), Gpu.F32_TOL, seed);
        }
        if (!longRows.isEmpty()) {
            Gpu.check(what + " rows >" + LONG_CONTEXT + " vs float64", longRows.exact(), longRows.gpu(), Gpu.F32_TOL,
                    seed);
            Gpu.check(what + " rows >" + LONG_CONTEXT + " vs cpu", longRows.cpu(), longRows.gpu(), 1e-4, seed);
            Gpu.report(what + " rows >" + LONG_CONTEXT + " cpu vs float64",
                    Gpu.relativeError(longRows.exact(), longRows.cpu()), Gpu.F32_TOL, longRows.size());
        }
        if (!padding.isEmpty()) {
            Gpu.check(what + " padding rows are zero", new float[padding.size()], padding.gpu(), 0, seed);
        }
        Gpu.free(gpu, kp[1], vp[1], k[1], v[1], q[1], out);
    }

    /** Output rows gathered for one comparison: the CPU's, the GPU's and, where computed, float64's. */
    private static final class Rows {
        private final List<float[]> cpu = new ArrayList<>(), gpu = new ArrayList<>(), exact = new ArrayList<>();

        void add(float[] cpuOut, float[] gpuOut, int off, int n, float[] exactRow) {
            cpu.add(Arrays.copyOfRange(cpuOut, off, off + n));
            gpu.add(Arrays.copyOfRange(gpuOut, off, off + n));
            if (exactRow != null) {
                exact.add(exactRow);
            }
        }

        boolean isEmpty() {
            return cpu.isEmpty();
        }

        int size() {
            return cpu.stream().mapToInt(a -> a.length).sum();
        }

        float[] cpu() {
            return concat(cpu);
        }

        float[] gpu() {
            return concat(gpu);
        }

        float[] exact() {
            return concat(exact);
        }

        private static float[] concat(List<float[]> parts) {
            float[] out = new float[parts.stream().mapToInt(a -> a.length).sum()];
            int at = 0;
            for (float[] p : parts) {
                System.arraycopy(p, 0, out, at, p.length);
                at += p.length;
            }
            return out;
        }
    }

    /** One query row {@code q[off … off+H·D)} over positions {@code 0 … visible−1} of k, v [·, Hkv·D], in double. */
    private static float[] attentionInDouble(float[] q, int off, float[] k, float[] v, int visible, int headDim) {
        float[] out = new float[HEADS * headDim];
        int width = KV_HEADS * headDim;
        double scale = 1.0 / Math.sqrt(headDim);
        for (int h = 0; h < HEADS; h++) {
            int kvOff = (h / (HEADS / KV_HEADS)) * headDim;
            double[] score = new double[visible];
            double max = Double.NEGATIVE_INFINITY;
            for (int p = 0; p < visible; p++) {
                double dot = 0;
                for (int d = 0; d < headDim; d++) {
                    dot += (double) q[off + h * headDim + d] * k[p * width + kvOff + d];
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
                out[h * headDim + d] = (float) (acc[d] / den);
            }
        }
        return out;
    }

    @Test
    void paddingTokensAndEmptyRowsWriteNothing() {
        CudaBackend gpu = Gpu.backend();
        long[] seed = new long[1];
        Random r = Gpu.random(seed);
        for (int tokensPerRow : new int[] {1, 4}) {
            Batch b = batch(r, 8, tokensPerRow, 300);
            int width = KV_HEADS * 128, rows = b.rows(), tokens = rows * tokensPerRow;
            int poolRows = b.poolPages() * PAGE;
            float[] kBefore = Gpu.normal(r, poolRows * width, 1);
            float[] vBefore = Gpu.normal(r, poolRows * width, 1);
            Tensor kp = gpu.upload(kBefore, poolRows, width);
            Tensor vp = gpu.upload(vBefore, poolRows, width);
            float[] ks = Gpu.normal(r, tokens * width, 1);
            float[] vs = Gpu.normal(r, tokens * width, 1);
            Tensor k = gpu.upload(ks, tokens, width);
            Tensor v = gpu.upload(vs, tokens, width);
            gpu.writeKvBatch(k, v, kp, vp, b.tables(), PAGE, b.starts(), b.lengths(), tokensPerRow);

            // expected: the pages before, with exactly the rows of the tokens t < lengths[r] replaced
            float[] kWant = kBefore.clone();
            float[] vWant = vBefore.clone();
            int written = 0;
            for (int i = 0; i < rows; i++) {
                for (int t = 0; t < b.lengths()[i]; t++) {
                    int p = b.starts()[i] + t;
                    int dst = (b.tables()[i][p / PAGE] * PAGE + p % PAGE) * width;
                    System.arraycopy(ks, (i * tokensPerRow + t) * width, kWant, dst, width);
                    System.arraycopy(vs, (i * tokensPerRow + t) * width, vWant, dst, width);
                    written++;
                }
            }
            String what = "writeKvBatch padding writes nothing " + b.describe() + " (" + written + " of " + tokens
                    + " tokens real)";
            Gpu.check(what + " k", kWant, gpu.download(kp), 0, seed[0]);
            Gpu.check(what + " v", vWant, gpu.download(vp), 0, seed[0]);
            Gpu.free(gpu, kp, vp, k, v);
        }
    }

    @Test
    void aCapturedStepReplaysForOtherRowsOfTheSameBucket() {
        CudaBackend gpu = Gpu.backend();
        long[] seed = new long[1];
        Random r = Gpu.random(seed);
        int rows = 3, tokensPerRow = 4, headDim = 64, tokens = rows * tokensPerRow;
        int width = KV_HEADS * headDim, qWidth = HEADS * headDim;
        int poolPages = rows * 16 + 2, poolRows = poolPages * PAGE;
        Tensor kp = gpu.zeros(poolRows, width);
        Tensor vp = gpu.zeros(poolRows, width);
        Tensor k = gpu.zeros(tokens, width);
        Tensor v = gpu.zeros(tokens, width);
        Tensor q = gpu.zeros(tokens, qWidth);
        Tensor out = gpu.zeros(tokens, qWidth);
        long replayedBefore = gpu.graphCounts()[1];
        for (int step = 0; step < 4; step++) {
            // every step's widest table has 9…16 pages: the same bucket, so the same captured graph
            Batch b = batch(r, rows, tokensPerRow, 250);
            int[] starts = b.starts().clone();
            starts[0] = 8 * PAGE + 1 + r.nextInt(16 * PAGE - 8 * PAGE - tokensPerRow);
            b = withTables(r, new Batch(tokensPerRow, starts, b.lengths(), null, poolPages));
            float[] kph = Gpu.normal(r, poolRows * width, 1);
            float[] vph = Gpu.normal(r, poolRows * width, 1);
            float[] ks = Gpu.normal(r, tokens * width, 1);
            float[] vs = Gpu.normal(r, tokens * width, 1);
            float[] qs = Gpu.normal(r, tokens * qWidth, 1);
            fill(gpu, kp, kph);
            fill(gpu, vp, vph);
            fill(gpu, k, ks);
            fill(gpu, v, vs);
            fill(gpu, q, qs);
            fill(gpu, out, nanRows(tokens, qWidth));

            gpu.beginGraph();
            gpu.writeKvBatch(k, v, kp, vp, b.tables(), PAGE, b.starts(), b.lengths(), tokensPerRow);
            gpu.pagedAttentionBatch(q, kp, vp, b.tables(), PAGE, HEADS, KV_HEADS, headDim, b.starts(), b.lengths(),
                    tokensPerRow, out);
            gpu.endGraph();

            Tensor ckp = Gpu.CPU.upload(kph, poolRows, width);
            Tensor cvp = Gpu.CPU.upload(vph, poolRows, width);
            Tensor cOut = Gpu.CPU.zeros(tokens, qWidth);
            Gpu.CPU.writeKvBatch(Gpu.CPU.upload(ks, tokens, width), Gpu.CPU.upload(vs, tokens, width), ckp, cvp,
                    b.tables(), PAGE, b.starts(), b.lengths(), tokensPerRow);
            Gpu.CPU.pagedAttentionBatch(Gpu.CPU.upload(qs, tokens, qWidth), ckp, cvp, b.tables(), PAGE, HEADS, KV_HEADS,
                    headDim, b.starts(), b.lengths(), tokensPerRow, cOut);
            String what = "graph step " + step + " " + b.describe();
            Gpu.check("writeKvBatch " + what, ckp, kp, 0, seed[0]);
            Gpu.check("pagedAttentionBatch " + what, cOut, out, Gpu.F32_TOL, seed[0]);
        }
        long replayed = gpu.graphCounts()[1] - replayedBefore;
        System.out.println("[gpu] batched attention graph steps replayed: " + replayed + " of 4");
        assertTrue(replayed >= 2, "steps of one (R, T, bucket) should replay their captured graph; replayed "
                + replayed + " of 4 (seed " + seed[0] + ")");
        Gpu.free(gpu, kp, vp, k, v, q, out);
    }

    /** The batch with fresh tables over its pool, each covering {@code start + T} positions. */
    private static Batch withTables(Random r, Batch b) {
        List<Integer> pool = new ArrayList<>();
        for (int p = 0; p < b.poolPages(); p++) {
            pool.add(p);
        }
        Collections.shuffle(pool, r);
        int[][] tables = new int[b.rows()][];
        int next = 0;
        for (int i = 0; i < b.rows(); i++) {
            int pages = (b.starts()[i] + b.tokensPerRow() + PAGE - 1) / PAGE;
            tables[i] = pool.subList(next, next + pages).stream().mapToInt(Integer::intValue).toArray();
            next += pages;
        }
        return new Batch(b.tokensPerRow(), b.starts(), b.lengths(), tables, b.poolPages());
    }

    /** Overwrites a GPU tensor in place (its address, which a captured graph holds, stays). */
    private static void fill(CudaBackend gpu, Tensor dst, float[] data) {
        Tensor src = gpu.upload(data, dst.shape());
        gpu.copy(src, dst);
        gpu.free(src);
    }

    private static float[] nanRows(int rows, int cols) {
        float[] a = new float[rows * cols];
        Arrays.fill(a, Float.NaN);
        return a;
    }

    /** Cache pages compared bit for bit (NaN rows nothing wrote included). */
    private static void samePages(String what, Tensor cpu, Tensor gpu) {
        boolean same = Arrays.equals(Gpu.CPU.download(cpu), Gpu.backend().download(gpu));
        Gpu.report(what, same ? 0 : Double.NaN, 0, cpu.shape()[0] * cpu.shape()[1]);
        assertTrue(same, what + ": the GPU's pages differ from the CPU's");
    }
}
