package dev.hyspec.backend.cuda;

import dev.hyspec.checkpoint.DType;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import jcuda.driver.CUdeviceptr;

/**
 * Embedding, matmul, norms, elementwise ops, the MoE row moves and the batched copies of generate
 * rows ({@code dense.cu}, {@code matmul.cu}).
 */
final class DenseKernels {
    private static final int BLOCK = 256;
    /** Most tokens a matmul runs as decode (weights streamed once, all tokens per row in registers). */
    static final int DECODE_MAX_TOKENS = 8;
    /** As {@code COPY_UNROLL} in dense.cu: vectors per thread of copy_batch. */
    private static final int COPY_UNROLL = 4;
    private static final CUdeviceptr NULL = new CUdeviceptr();
    private final CudaRuntime rt;
    private final CudaBackend.Precision precision;

    DenseKernels(CudaRuntime rt, CudaBackend.Precision precision) {
        this.rt = rt;
        this.precision = precision;
    }

    /** The kernel-name suffix for a weight's dtype. */
    static String suffix(DType dtype) {
        return switch (dtype) {
            case F32 -> "f32";
            case BF16 -> "bf16";
            case F16 -> "f16";
        };
    }

    // Kernel names per weight dtype (and token count), built once instead of concatenated per launch.
    private static final String[] RMS_NORM = names("dense_rms_norm_");
    private static final String[] ADD_RMS_NORM = names("dense_add_rms_norm_");
    private static final String[] GATED_RMS_NORM = names("dense_gated_rms_norm_");
    private static final String[][] DECODE = decodeNames("matmul_decode_t");
    private static final String[][] DECODE3 = decodeNames("matmul_decode3_t");

    private static String[] names(String prefix) {
        return java.util.Arrays.stream(DType.values()).map(d -> prefix + suffix(d)).toArray(String[]::new);
    }

    private static String[][] decodeNames(String prefix) {
        String[][] out = new String[DECODE_MAX_TOKENS + 1][];
        for (int t = 1; t <= DECODE_MAX_TOKENS; t++) {
            out[t] = names(prefix + t + "_");
        }
        return out;
    }

    static int blocks(long n, int block) {
        return Math.toIntExact((n + block - 1) / block);
    }

    void embedding(int[] ids, CudaTensor table, CudaTensor out) {
        int vocab = table.rows();
        int d = table.cols();
        for (int id : ids) {
            if (id < 0 || id >= vocab) {
                throw new IllegalArgumentException("token id " + id + " is outside the vocabulary [0, " + vocab + ")");
            }
        }
        if (out.numel() != (long) ids.length * d) {
            throw new IllegalArgumentException("embedding: " + ids.length + " ids of " + d + " columns into " + out);
        }
        if (ids.length == 0) {
            return;
        }
        rt.launch("dense_embedding_" + suffix(table.dtype()), blocks(d, BLOCK), gridY(ids.length), 1, BLOCK, 0,
                rt.stage(ids), table, out, ids.length, d);
    }

    /**
     * {@code out = x · wᵀ (+ bias)}. Up to {@value #DECODE_MAX_TOKENS} tokens a bandwidth-bound kernel
     * reads every weight once; more tokens run as a tiled GEMM: on tensor cores in
     * {@link CudaBackend.Precision#BF16} with bf16 weights and {@code in % 8 == 0}, else in float32.
     * Under that condition both paths round x to bf16 ({@link #roundsToBf16}).
     */
    void matmul(CudaTensor x, CudaTensor w, CudaTensor bias, CudaTensor out) {
        matmul(x, w, bias, out, false);
    }

    /** {@code out = relu(x · wᵀ + bias)²}: fused into the decode kernel's output, else a second launch. */
    void matmulRelu2(CudaTensor x, CudaTensor w, CudaTensor bias, CudaTensor out) {
        if (x.rows() <= DECODE_MAX_TOKENS) {
            matmul(x, w, bias, out, true);
        } else {
            matmul(x, w, bias, out, false);
            relu2(out, out);
        }
    }

    /**
     * {@code out[i] = x · w[i]ᵀ} for products of one input: decode-shaped products without bias of one
     * weight dtype run three to a launch; any other product runs on its own.
     */
    void matmuls(CudaTensor x, CudaTensor[] w, CudaTensor[] bias, CudaTensor[] out) {
        int tokens = x.rows();
        int in = x.cols();
        List<Integer> fused = new ArrayList<>();
        for (int i = 0; i < w.length; i++) {
            boolean alone = tokens == 0 || tokens > DECODE_MAX_TOKENS || (bias != null && bias[i] != null)
                    || w[i].dtype() != w[0].dtype() || w[i].cols() != in || out[i].rows() != tokens
                    || out[i].cols() != w[i].rows() || w[i].rows() == 0;
            if (alone) {
                matmul(x, w[i], bias == null ? null : bias[i], out[i]);
            } else {
                fused.add(i);
            }
        }
        int rows = decodeRows(tokens);
        for (int f = 0; f < fused.size(); f += 3) {
            CudaTensor[] ws = new CudaTensor[3];
            CudaTensor[] os = new CudaTensor[3];
            int[] dims = new int[3];
            int blocks = 0;
            long bytes = 0;
            for (int j = 0; j < 3; j++) {
                int i = f + j < fused.size() ? fused.get(f + j) : fused.get(f);
                ws[j] = w[i];
                os[j] = out[i];
                dims[j] = f + j < fused.size() ? w[i].rows() : 0;
                blocks += blocks(dims[j], rows);
                bytes += dims[j] == 0 ? 0 : w[i].numel() * w[i].dtype().bytes();
            }
            if (rt.profiling()) {
                rt.labelNext("[" + dims[0] + " + " + dims[1] + " + " + dims[2] + " x " + in + "]", bytes);
            }
            rt.launch(DECODE3[tokens][w[0].dtype().ordinal()], blocks, 1, 1, 128, 0, x, ws[0], os[0],
                    dims[0], ws[1], os[1], dims[1], ws[2], os[2], dims[2], in, roundsToBf16(w[0], in) ? 2 : 0);
        }
    }

    /**
     * Whether products with {@code w} take x rounded to bf16: the tensor-core GEMM's condition. The
     * decode kernels round x under the same condition, so a product's numerics do not depend on how
     * many rows the step has (a verify step of 4 tokens per row gives the tokens a plain decode would).
     */
    private boolean roundsToBf16(CudaTensor w, int in) {
        return precision == CudaBackend.Precision.BF16 && w.dtype() == DType.BF16 && in % 8 == 0;
    }

    /** Output rows per block of the decode kernels (as {@code DecodeRows} in matmul.cu). */
    private static int decodeRows(int tokens) {
        return tokens <= 2 ? 2 : 4;
    }

    private void matmul(CudaTensor x, CudaTensor w, CudaTensor bias, CudaTensor out, boolean relu2) {
        int tokens = x.rows();
        int in = x.cols();
        int outDim = w.rows();
        if (w.cols() != in || out.rows() != tokens || out.cols() != outDim
                || (bias != null && bias.numel() != outDim)) {
            throw new IllegalArgumentException("matmul shapes: x " + x + ", w " + w + ", bias " + bias + ", out " + out);
        }
        if (tokens == 0 || outDim == 0) {
            return;
        }
        Object b = bias == null ? NULL : bias;
        int biasType = bias == null ? 0 : switch (bias.dtype()) {
            case F32 -> 1;
            case BF16 -> 2;
            case F16 -> 3;
        };
        String sfx = suffix(w.dtype());
        if (rt.profiling()) {
            rt.labelNext("[" + outDim + " x " + in + "]", w.numel() * w.dtype().bytes());
        }
        if (tokens <= DECODE_MAX_TOKENS) {
            rt.launch(DECODE[tokens][w.dtype().ordinal()], blocks(outDim, decodeRows(tokens)), 1, 1, 128, 0, x, w,
                    b, biasType, out, in, outDim, (relu2 ? 1 : 0) | (roundsToBf16(w, in) ? 2 : 0));
        } else if (roundsToBf16(w, in)) {
            tensorCoreGemm(x, w, b, biasType, out, tokens, in, outDim);
        } else {
            rt.launch("matmul_simt_" + sfx, blocks(outDim, 64), blocks(tokens, 64), 1, 256, 0, x, w, b, biasType, out,
                    tokens, in, outDim);
        }
    }

    /**
     * A block tile of {@code gemm.cu}: kernel, rows × outputs, threads, pipeline stages and blocks that
     * fit on one SM (mirrors the {@code GEMM_BF16} instantiations there).
     */
    record GemmTile(String kernel, int rows, int cols, int threads, int stages, int perSm) {
        int sharedBytes() {
            return stages * (rows + cols) * GEMM_LD * 2;
        }
    }

    /** As {@code GK} and {@code GLD} in gemm.cu: k per pipeline stage, shared row length in bf16. */
    private static final int GEMM_K = 64;
    private static final int GEMM_LD = GEMM_K + 8;
    static final GemmTile TILE_64x128 = new GemmTile("gemm_bf16_64x128", 64, 128, 128, 4, 2);
    static final GemmTile TILE_128x128 = new GemmTile("gemm_bf16_128x128", 128, 128, 256, 3, 2);
    static final GemmTile TILE_128x256 = new GemmTile("gemm_bf16_128x256", 128, 256, 256, 3, 1);
    static final List<GemmTile> GEMM_TILES = List.of(TILE_64x128, TILE_128x128, TILE_128x256);
    /**
     * Benchmarks and tests only: forces the GEMM plan, {@code legacy} (matmul_tc_bf16) or
     * {@code ROWSxCOLS[/sSPLITS]} (a tile of {@link #GEMM_TILES}, optionally a split count).
     */
    static final String PLAN_PROPERTY = "hyspec.gemm.plan";

    /** A launch plan of the GEMM: tile, K slices, k-steps per slice. */
    record GemmPlan(GemmTile tile, int splits, int chunkSteps) {}

    // The cost model's device: weight bandwidth and mma.sync throughput an H100 reaches (bytes/s,
    // FLOP/s) and the cost of a split (the reduce launch); relative mma throughput of each tile.
    private static final double MODEL_BYTES_PER_S = 2.6e12;
    private static final double MODEL_FLOPS = 4.0e14;
    private static final double MODEL_SPLIT_S = 3e-6;

    private static double tileEfficiency(GemmTile t) {
        return t == TILE_64x128 ? 0.8 : t == TILE_128x256 ? 0.9 : 1.0;
    }

    /**
     * The tile for the row count (or the forced one) and the split count with the least modelled
     * time: blocks run in waves of {@code perSm · SMs} (a partly filled last wave costs its share,
     * at least 80 %), a block's time is the larger of its share
     * of the weight stream (weights read once per output column tile: the row tiles that share them
     * run side by side) and its mma work; a split adds writing and reading its partial sums. Only
     * the shapes decide, never the data, so a step's plans (and graphs) recur.
     */
    static GemmPlan gemmPlan(int tokens, int in, int outDim, int smCount, GemmTile forced, int forcedSplits) {
        int kSteps = (in + GEMM_K - 1) / GEMM_K;
        GemmPlan best = null;
        double bestTime = Double.MAX_VALUE;
        // Measured on an H100 (MatmulBench): 64×128 is fastest up to 64 rows, 128×128 above (128×256
        // at best ties it at 512 rows); the model then picks the split count for the tile.
        GemmTile tileFor = tokens <= 64 ? TILE_64x128 : TILE_128x128;
        for (GemmTile tile : List.of(forced != null ? forced : tileFor)) {
            int mTiles = blocks(tokens, tile.rows());
            int tiles = mTiles * blocks(outDim, tile.cols());
            int slots = tile.perSm() * smCount;
            double tileS = Math.max(2.0 * tile.cols() * in / mTiles / (MODEL_BYTES_PER_S / slots),
                    2.0 * tile.rows() * tile.cols() * in / (MODEL_FLOPS * tileEfficiency(tile) / slots));
            int maxSplits = forcedSplits > 0 ? Math.min(forcedSplits, kSteps) : Math.max(1, Math.min(16, kSteps / 4));
            for (int s = forcedSplits > 0 ? maxSplits : 1; s <= maxSplits; s++) {
                int chunk = (kSteps + s - 1) / s;
                int splits = (kSteps + chunk - 1) / chunk;
                long blocks = (long) tiles * splits;
                long full = blocks / slots;
                long rest = blocks % slots;
                double waves = full + (rest > 0 ? Math.max(0.8, (double) rest / slots) : 0);
                double t = waves * tileS * chunk / kSteps;
                if (splits > 1) {
                    t += (2.0 * splits + 1) * 4.0 * tokens * outDim / MODEL_BYTES_PER_S + MODEL_SPLIT_S;
                }
                if (t < bestTime * 0.98) {   // more slices only for a clear gain
                    bestTime = t;
                    best = new GemmPlan(tile, splits, chunk);
                }
            }
        }
        return best;
    }

    /**
     * The bf16 tensor-core GEMM ({@code gemm.cu}): x rounded to bf16 once, then a pipelined tiled
     * GEMM whose tile suits the row count, with K split over {@code z} blocks when the product has
     * too few output tiles to fill the device (a decode-batch or verify product of a few dozen rows
     * would otherwise leave most SMs idle while the weights stream). The slices are summed in order
     * by a second kernel, so the result does not depend on scheduling. Grid dimensions depend on the
     * shapes only.
     */
    private void tensorCoreGemm(CudaTensor x, CudaTensor w, Object b, int biasType, CudaTensor out, int tokens,
                                int in, int outDim) {
        String plan = System.getProperty(PLAN_PROPERTY, "");
        if (plan.equals("legacy")) {
            legacyTensorCoreGemm(x, w, b, biasType, out, tokens, in, outDim);
            return;
        }
        GemmTile forced = null;
        int forcedSplits = 0;
        if (!plan.isEmpty()) {
            String[] parts = plan.split("/s");
            forced = GEMM_TILES.stream().filter(t -> (t.rows() + "x" + t.cols()).equals(parts[0])).findFirst()
                    .orElseThrow(() -> new IllegalArgumentException(PLAN_PROPERTY + "=" + plan + ": no such tile"));
            forcedSplits = parts.length > 1 ? Integer.parseInt(parts[1]) : 0;
        }
        GemmPlan p = gemmPlan(tokens, in, outDim, rt.smCount(), forced, forcedSplits);
        GemmTile tile = p.tile();
        int splits = p.splits();
        int mTiles = blocks(tokens, tile.rows());
        int nTiles = blocks(outDim, tile.cols());
        int kSteps = (in + GEMM_K - 1) / GEMM_K;
        long n4 = (long) tokens * in / 4;
        CUdeviceptr xb = rt.memory().alloc(2L * tokens * in);
        rt.launch("gemm_x_to_bf16", (int) Math.min(blocks(n4, BLOCK), 8L * rt.smCount()), 1, 1, BLOCK, 0, x, xb, n4);
        int smem = tile.sharedBytes();
        rt.allowSharedMemory(tile.kernel(), smem);
        if (splits == 1) {
            rt.launch(tile.kernel(), mTiles, nTiles, 1, tile.threads(), smem, xb, w, b, biasType, out, tokens, in,
                    outDim, out, kSteps * GEMM_K);
        } else {
            long n = (long) tokens * outDim;
            CUdeviceptr partial = rt.memory().alloc(4L * splits * n);
            rt.launch(tile.kernel(), mTiles, nTiles, splits, tile.threads(), smem, xb, w, b, biasType, out, tokens,
                    in, outDim, partial, p.chunkSteps() * GEMM_K);
            if (outDim % 4 == 0) {
                rt.launch("gemm_splitk_reduce", blocks(n / 4, BLOCK), 1, 1, BLOCK, 0, partial, splits, b, biasType,
                        out, n / 4, outDim);
            } else {
                rt.launch("matmul_splitk_reduce", blocks(n, BLOCK), 1, 1, BLOCK, 0, partial, splits, b, biasType, out,
                        n, outDim);
            }
            rt.memory().release(partial);   // reused in stream order by later work
        }
        rt.memory().release(xb);
    }

    /** The earlier tensor-core GEMM (matmul_tc_bf16 in matmul.cu), kept for comparison by benchmarks. */
    private void legacyTensorCoreGemm(CudaTensor x, CudaTensor w, Object b, int biasType, CudaTensor out,
                                      int tokens, int in, int outDim) {
        int nTiles = blocks(outDim, 128);
        int mTiles = blocks(tokens, 128);
        int kTiles = (in + 31) / 32;
        int tiles = nTiles * mTiles;
        int wanted = 2 * rt.smCount();
        int splits = tiles >= wanted ? 1 : Math.min(Math.min((wanted + tiles - 1) / tiles, kTiles / 4), 16);
        if (splits <= 1) {
            rt.launch("matmul_tc_bf16", nTiles, mTiles, 1, 256, 0, x, w, b, biasType, out, tokens, in, outDim, out,
                    kTiles * 32);
            return;
        }
        int chunkTiles = (kTiles + splits - 1) / splits;
        splits = (kTiles + chunkTiles - 1) / chunkTiles;
        long n = (long) tokens * outDim;
        CUdeviceptr partial = rt.memory().alloc(4L * splits * n);
        rt.launch("matmul_tc_bf16", nTiles, mTiles, splits, 256, 0, x, w, b, biasType, out, tokens, in, outDim,
                partial, chunkTiles * 32);
        rt.launch("matmul_splitk_reduce", blocks(n, 256), 1, 1, 256, 0, partial, splits, b, biasType, out, n, outDim);
        rt.memory().release(partial);   // reused in stream order by later work
    }

    /** Fills a bf16 tensor with {@code HashUniform.bf16(seed, i, center, scale)} ({@code random.cu}). */
    void randomUniform(CudaTensor out, long seed, float center, float scale) {
        if (out.dtype() != DType.BF16) {
            throw new IllegalArgumentException("randomUniform fills bf16 tensors, got " + out);
        }
        long n = out.numel();
        if (n == 0) {
            return;
        }
        int grid = (int) Math.min(blocks(n, BLOCK), 65_536L);
        rt.launch("random_uniform_bf16", grid, 1, 1, BLOCK, 0, out, n, seed, center, scale);
    }

    void rmsNorm(CudaTensor x, CudaTensor w, int groupSize, float eps, boolean plusOne, CudaTensor out) {
        long groups = groups(x, w, groupSize, out);
        rt.launch(RMS_NORM[w.dtype().ordinal()], Math.toIntExact(groups), 1, 1, normBlock(groupSize), 0, x, w,
                (int) w.numel(), groupSize, x.cols(), eps, plusOne ? 1 : 0, out);
    }

    /** {@code x ← x + y; out = rmsNorm(x)} in one launch. */
    void addRmsNorm(CudaTensor x, CudaTensor y, CudaTensor w, int groupSize, float eps, boolean plusOne,
                    CudaTensor out) {
        sameSize(x, y);
        long groups = groups(x, w, groupSize, out);
        rt.launch(ADD_RMS_NORM[w.dtype().ordinal()], Math.toIntExact(groups), 1, 1, normBlock(groupSize), 0, x,
                y, w, (int) w.numel(), groupSize, x.cols(), eps, plusOne ? 1 : 0, out);
    }

    void gatedRmsNorm(CudaTensor x, CudaTensor gate, CudaTensor w, int groupSize, float eps, boolean gateFirst,
                      CudaTensor out) {
        sameSize(x, gate, out);
        long groups = groups(x, w, groupSize, out);
        rt.launch(GATED_RMS_NORM[w.dtype().ordinal()], Math.toIntExact(groups), 1, 1, normBlock(groupSize), 0,
                x, gate, w, (int) w.numel(), groupSize, x.cols(), eps, gateFirst ? 1 : 0, out);
    }

    void add(CudaTensor a, CudaTensor b, CudaTensor out) {
        long n = sameSize(a, b, out);
        rt.launch("dense_add", blocks(n, BLOCK), 1, 1, BLOCK, 0, a, b, out, n);
    }

    void relu2(CudaTensor x, CudaTensor out) {
        long n = sameSize(x, out);
        rt.launch("dense_relu2", blocks(n, BLOCK), 1, 1, BLOCK, 0, x, out, n);
    }

    void siluMul(CudaTensor gate, CudaTensor up, CudaTensor out) {
        long n = sameSize(gate, up, out);
        rt.launch("dense_silu_mul", blocks(n, BLOCK), 1, 1, BLOCK, 0, gate, up, out, n);
    }

    void sigmoidGate(CudaTensor x, CudaTensor gate, CudaTensor out) {
        long n = sameSize(x, out);
        int cols = x.cols();
        boolean perRow = gate.cols() == 1 && cols != 1;
        if (perRow ? gate.rows() != x.rows() : gate.numel() != n) {
            throw new IllegalArgumentException("sigmoidGate: gate " + gate + " fits neither x " + x + " nor [T, 1]");
        }
        rt.launch("dense_sigmoid_gate", blocks(n, BLOCK), 1, 1, BLOCK, 0, x, gate, out, n, cols, perRow ? 1 : 0);
    }

    void scaleRows(CudaTensor x, float[] scale, CudaTensor out) {
        long n = sameSize(x, out);
        if (scale.length < x.rows()) {
            throw new IllegalArgumentException("scaleRows: " + scale.length + " scales for " + x);
        }
        if (n == 0) {
            return;
        }
        rt.launch("dense_scale_rows", blocks(n, BLOCK), 1, 1, BLOCK, 0, x, rt.stage(scale), out, n, x.cols());
    }

    void gatherRows(CudaTensor src, int[] rows, CudaTensor dst) {
        int cols = src.cols();
        checkRows("gatherRows", src, rows, dst);
        if (rows.length == 0 || cols == 0) {
            return;
        }
        rt.launch("dense_gather_rows", blocks(cols, BLOCK), gridY(rows.length), 1, BLOCK, 0, src, rt.stage(rows), dst,
                rows.length, cols);
    }

    /**
     * {@code dst[rows[i], :] += scale[i] · src[i, :]}. Indices are grouped by target row on the host
     * (ascending i within a target), so repeated rows add up in index order, deterministically.
     */
    void scatterAddRows(CudaTensor src, int[] rows, float[] scale, CudaTensor dst) {
        int cols = src.cols();
        checkRows("scatterAddRows", dst, rows, src);
        if (scale.length < rows.length) {
            throw new IllegalArgumentException("scatterAddRows: " + scale.length + " scales for " + rows.length + " rows");
        }
        if (rows.length == 0 || cols == 0) {
            return;
        }
        long[] keys = new long[rows.length];
        for (int i = 0; i < rows.length; i++) {
            keys[i] = (long) rows[i] << 32 | i;
        }
        Arrays.sort(keys);
        int[] order = new int[rows.length];
        int[] targets = new int[rows.length];
        int[] start = new int[rows.length + 1];
        int groups = 0;
        for (int j = 0; j < keys.length; j++) {
            int row = (int) (keys[j] >>> 32);
            order[j] = (int) keys[j];
            if (groups == 0 || targets[groups - 1] != row) {
                targets[groups] = row;
                start[groups++] = j;
            }
        }
        start[groups] = rows.length;
        rt.launch("dense_scatter_add_rows", blocks(cols, BLOCK), gridY(groups), 1, BLOCK, 0, src,
                rt.stage(Arrays.copyOf(targets, groups)), rt.stage(Arrays.copyOf(start, groups + 1)), rt.stage(order),
                rt.stage(scale), dst, groups, cols);
    }

    // ---- batched copies (copy_batch in dense.cu) ----

    /**
     * {@code dst[i] = src[i]} for every pair, in one launch when all pairs hold the same number of
     * elements (pairs of different sizes are copied one by one).
     */
    void copyBatch(CudaTensor[] src, CudaTensor[] dst) {
        if (src.length != dst.length) {
            throw new IllegalArgumentException("copyBatch: " + src.length + " sources for " + dst.length + " destinations");
        }
        if (src.length == 0) {
            return;
        }
        long n = src[0].numel();
        boolean uniform = true;
        for (int i = 0; i < src.length; i++) {
            if (src[i].numel() != dst[i].numel()) {
                throw new IllegalArgumentException("copyBatch: pair " + i + " copies " + src[i] + " to " + dst[i]);
            }
            uniform &= src[i].numel() == n;
        }
        if (!uniform) {
            for (int i = 0; i < src.length; i++) {
                rt.copy(dst[i].ptr(), src[i].ptr(), src[i].numel() * 4);
            }
            return;
        }
        long[] from = new long[src.length];
        long[] to = new long[dst.length];
        for (int i = 0; i < src.length; i++) {
            from[i] = StepGraphs.address(src[i].ptr());
            to[i] = StepGraphs.address(dst[i].ptr());
        }
        copyPairs(from, to, n);
    }

    /** {@code dst[r]} rows {@code 0 … T−1} = {@code src} rows {@code r·T … r·T+T−1}, one launch. */
    void scatterRowBlocks(CudaTensor src, int tokensPerRow, CudaTensor[] dst) {
        int cols = src.cols();
        if (tokensPerRow < 0 || src.rows() < (long) dst.length * tokensPerRow) {
            throw new IllegalArgumentException("scatterRowBlocks: " + src + " has no " + dst.length + " blocks of "
                    + tokensPerRow + " rows");
        }
        long[] from = new long[dst.length];
        long[] to = new long[dst.length];
        long n = (long) tokensPerRow * cols;
        for (int r = 0; r < dst.length; r++) {
            if (dst[r].cols() != cols || dst[r].rows() < tokensPerRow) {
                throw new IllegalArgumentException("scatterRowBlocks: block of " + tokensPerRow + " rows of " + src
                        + " into " + dst[r]);
            }
            from[r] = StepGraphs.address(src.at(r * n));
            to[r] = StepGraphs.address(dst[r].ptr());
        }
        copyPairs(from, to, n);
    }

    /** {@code n} floats from {@code from[i]} to {@code to[i]} for every pair, 16-byte vectors where aligned. */
    private void copyPairs(long[] from, long[] to, long n) {
        if (n == 0 || from.length == 0) {
            return;
        }
        boolean aligned = n % 4 == 0;
        for (int i = 0; i < from.length; i++) {
            aligned &= from[i] % 16 == 0 && to[i] % 16 == 0;
        }
        int vec = aligned ? 4 : 1;
        int perBlock = vec * COPY_UNROLL * BLOCK;
        for (int p0 = 0; p0 < from.length; p0 += 65535) {
            int pairs = Math.min(65535, from.length - p0);
            rt.launch("copy_batch_v" + vec, blocks(n, perBlock), pairs, 1, BLOCK, 0,
                    rt.stage(Arrays.copyOfRange(from, p0, p0 + pairs)), rt.stage(Arrays.copyOfRange(to, p0, p0 + pairs)),
                    n);
        }
    }

    /** A grid's y extent for {@code n} rows: kernels loop when there are more rows than the limit. */
    private static int gridY(int n) {
        return Math.min(n, 65535);
    }

    /** Checks that {@code rows} index {@code indexed} and that {@code other} has a row for each. */
    private static void checkRows(String op, CudaTensor indexed, int[] rows, CudaTensor other) {
        if (indexed.cols() != other.cols() || other.rows() < rows.length) {
            throw new IllegalArgumentException(op + ": " + rows.length + " rows between " + indexed + " and " + other);
        }
        for (int r : rows) {
            if (r < 0 || r >= indexed.rows()) {
                throw new IndexOutOfBoundsException(op + ": row " + r + " of " + indexed);
            }
        }
    }

    /** The number of norm groups; checks that x splits into whole groups and that out and w fit. */
    private static long groups(CudaTensor x, CudaTensor w, int groupSize, CudaTensor out) {
        long n = sameSize(x, out);
        if (groupSize <= 0 || n % groupSize != 0 || w.numel() == 0) {
            throw new IllegalArgumentException("norm groups of " + groupSize + " over " + x + " with weight " + w);
        }
        return n / groupSize;
    }

    /**
     * Threads per norm block, whole warps: one per 16-byte vector of the group up to 1024 where the
     * group splits into vectors (as the kernels' vector path), else one per element up to 256.
     */
    private static int normBlock(int groupSize) {
        if (groupSize % 4 == 0) {
            return Math.min(1024, (groupSize / 4 + 31) / 32 * 32);
        }
        return Math.min(256, (groupSize + 31) / 32 * 32);
    }

    private static long sameSize(CudaTensor... ts) {
        long n = ts[0].numel();
        for (CudaTensor t : ts) {
            if (t.numel() != n) {
                throw new IllegalArgumentException("element counts differ: " + ts[0] + " and " + t);
            }
        }
        return n;
    }
}
