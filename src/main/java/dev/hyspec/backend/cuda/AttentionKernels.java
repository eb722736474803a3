package dev.hyspec.backend.cuda;

import jcuda.driver.CUdeviceptr;

/** RoPE, the paged KV cache writes and paged attention for prefill, decode and verify rows ({@code attention.cu}). */
final class AttentionKernels {
    private static final int BLOCK = 256;
    /** Threads of one paged-attention block ({@code ATTN_WARPS · 32} in attention.cu). */
    private static final int ATTENTION_THREADS = 128;
    private static final int MAX_HEAD_DIM = 256;
    /** Fewest positions per split worth a block of their own. */
    private static final int MIN_SPLIT_POSITIONS = 128;
    private static final int MAX_SPLITS = 64;
    /** Query rows one attention launch can take (its grid's y extent). */
    private static final int MAX_GRID_Y = 65_535;

    private final CudaRuntime rt;

    AttentionKernels(CudaRuntime rt) {
        this.rt = rt;
    }

    void rope(CudaTensor x, int heads, int headDim, int rotaryDim, float theta, int[] positions) {
        int tokens = positions.length;
        if (rotaryDim % 2 != 0 || rotaryDim > headDim || x.numel() < (long) tokens * heads * headDim) {
            throw new IllegalArgumentException("rope: x " + x + " is smaller than [" + tokens + ", " + heads + "·" + headDim
                    + "] or rotaryDim " + rotaryDim + " is odd or exceeds headDim");
        }
        int half = rotaryDim / 2;
        if (tokens == 0 || half == 0) {
            return;
        }
        // The inverse frequencies exactly as CpuBackend computes them (double pow, rounded to float).
        float[] invFreq = new float[half];
        for (int i = 0; i < half; i++) {
            invFreq[i] = (float) (1.0 / Math.pow(theta, (2.0 * i) / rotaryDim));
        }
        CUdeviceptr freq = rt.stage(invFreq);
        CUdeviceptr pos = rt.stage(positions);
        long n = (long) tokens * heads * half;
        rt.launch("attention_rope", DenseKernels.blocks(n, BLOCK), 1, 1, BLOCK, 0, x, freq, pos, tokens, heads,
                headDim, half);
    }

    void writeKv(CudaTensor k, CudaTensor v, CudaTensor kPages, CudaTensor vPages, int[] blockTable, int pageSize,
                 int start) {
        int width = k.cols();
        int tokens = k.rows();
        if (v.cols() != width || kPages.cols() != width || vPages.cols() != width || v.rows() != tokens
                || vPages.rows() != kPages.rows()) {
            throw new IllegalArgumentException("writeKv shapes: k " + k + ", v " + v + ", kPages " + kPages
                    + ", vPages " + vPages);
        }
        if (tokens == 0) {
            return;
        }
        checkBlockTable(blockTable, pageSize, start + tokens, kPages.rows());
        CUdeviceptr meta = rt.stage(meta(start, blockTable));
        long n = (long) tokens * width;
        rt.launch("attention_write_kv", DenseKernels.blocks(n, BLOCK), 1, 1, BLOCK, 0, k, v, kPages, vPages, meta,
                pageSize, tokens, width);
    }

    void pagedAttention(CudaTensor q, CudaTensor kPages, CudaTensor vPages, int[] blockTable, int pageSize,
                        int numHeads, int numKvHeads, int headDim, int pastLen, CudaTensor out) {
        int tokens = q.rows();
        int kvStride = numKvHeads * headDim;
        if (numKvHeads <= 0 || numHeads % numKvHeads != 0 || q.cols() != numHeads * headDim
                || out.numel() != q.numel() || kPages.cols() != kvStride || vPages.cols() != kvStride
                || vPages.rows() != kPages.rows()) {
            throw new IllegalArgumentException("pagedAttention shapes: q " + q + ", out " + out + ", pages " + kPages
                    + " / " + vPages + " for H=" + numHeads + ", Hkv=" + numKvHeads + ", D=" + headDim);
        }
        if (headDim <= 0 || headDim > MAX_HEAD_DIM) {
            throw new IllegalArgumentException("pagedAttention: head dim " + headDim + " is outside 1…" + MAX_HEAD_DIM);
        }
        if (tokens == 0) {
            return;
        }
        checkBlockTable(blockTable, pageSize, pastLen + tokens, kPages.rows());
        CUdeviceptr meta = rt.stage(meta(pastLen, blockTable));
        String kernel = "attention_paged_d" + headDimBucket(headDim);
        float scale = (float) (1.0 / Math.sqrt(headDim));
        int splits = splits(numHeads * tokens, pastLen + tokens);
        if (splits == 1) {
            rt.launch(kernel, numHeads, tokens, 1, ATTENTION_THREADS, 0, q, kPages, vPages, meta, pageSize, numHeads,
                    numKvHeads, headDim, scale, out, new CUdeviceptr());
            return;
        }
        long partialBytes = (long) tokens * numHeads * splits * (2 + headDim) * Float.BYTES;
        CUdeviceptr partial = rt.memory().alloc(partialBytes);
        try {
            rt.launch(kernel, numHeads, tokens, splits, ATTENTION_THREADS, 0, q, kPages, vPages, meta, pageSize,
                    numHeads, numKvHeads, headDim, scale, out, partial);
            rt.launch("attention_combine", numHeads, tokens, 1, Math.min(MAX_HEAD_DIM, roundUp32(headDim)), 0, partial,
                    numHeads, headDim, splits, out);
        } finally {
            rt.memory().release(partial);   // stream order: reused only by later work
        }
    }

    /**
     * {@link dev.hyspec.backend.Backend#writeKvBatch}: one launch for every row. k, v {@code [R·T, Hkv·D]}; row
     * r's tokens {@code t < lengths[r]} go to positions {@code starts[r] + t}; padding tokens write nothing.
     */
    void writeKvBatch(CudaTensor k, CudaTensor v, CudaTensor kPages, CudaTensor vPages, int[][] blockTables,
                      int pageSize, int[] starts, int[] lengths, int tokensPerRow) {
        int width = k.cols();
        int rows = blockTables.length;
        int tokens = rows * tokensPerRow;
        if (v.cols() != width || kPages.cols() != width || vPages.cols() != width || k.rows() != tokens
                || v.rows() != tokens || vPages.rows() != kPages.rows()) {
            throw new IllegalArgumentException("writeKvBatch shapes: k " + k + ", v " + v + ", kPages " + kPages
                    + ", vPages " + vPages + " for " + rows + " rows of " + tokensPerRow + " tokens");
        }
        if (tokens == 0) {
            return;
        }
        RowsMeta m = rowsMeta(blockTables, pageSize, starts, lengths, tokensPerRow, kPages.rows());
        CUdeviceptr meta = rt.stage(m.meta());
        long n = (long) tokens * width;
        rt.launch("attention_write_kv_batch", DenseKernels.blocks(n, BLOCK), 1, 1, BLOCK, 0, k, v, kPages, vPages, meta,
                pageSize, rows, tokensPerRow, m.tableWidth(), width);
    }

    /**
     * {@link dev.hyspec.backend.Backend#pagedAttentionBatch}: one launch for every row (plus the combine of
     * the flash-decoding splits). q, out {@code [R·T, H·D]}; the output rows of padding tokens are zero. The
     * grid, the split count and the kernel's scalars follow from R, T, the head shapes and the bucketed
     * table width only, so a captured step replays for any rows of that shape.
     */
    void pagedAttentionBatch(CudaTensor q, CudaTensor kPages, CudaTensor vPages, int[][] blockTables, int pageSize,
                             int numHeads, int numKvHeads, int headDim, int[] starts, int[] lengths, int tokensPerRow,
                             CudaTensor out) {
        int rows = blockTables.length;
        int tokens = rows * tokensPerRow;
        int kvStride = numKvHeads * headDim;
        if (numKvHeads <= 0 || numHeads % numKvHeads != 0 || q.cols() != numHeads * headDim || q.rows() != tokens
                || out.numel() != q.numel() || kPages.cols() != kvStride || vPages.cols() != kvStride
                || vPages.rows() != kPages.rows()) {
            throw new IllegalArgumentException("pagedAttentionBatch shapes: q " + q + ", out " + out + ", pages "
                    + kPages + " / " + vPages + " for " + rows + " rows of " + tokensPerRow + " tokens, H=" + numHeads
                    + ", Hkv=" + numKvHeads + ", D=" + headDim);
        }
        if (headDim <= 0 || headDim > MAX_HEAD_DIM) {
            throw new IllegalArgumentException("pagedAttentionBatch: head dim " + headDim + " is outside 1…"
                    + MAX_HEAD_DIM);
        }
        if (tokens == 0) {
            return;
        }
        if (tokens > MAX_GRID_Y) {
            throw new IllegalArgumentException("pagedAttentionBatch: " + tokens + " query rows exceed one launch's "
                    + MAX_GRID_Y + "; split the batch");
        }
        RowsMeta m = rowsMeta(blockTables, pageSize, starts, lengths, tokensPerRow, kPages.rows());
        CUdeviceptr meta = rt.stage(m.meta());
        String kernel = "attention_paged_batch_d" + headDimBucket(headDim);
        float scale = (float) (1.0 / Math.sqrt(headDim));
        int span = m.tableWidth() * pageSize;   // no row sees more positions than its padded table holds
        int splits = splits(numHeads * tokens, span);
        int chunk = (span + splits - 1) / splits;
        if (splits == 1) {
            rt.launch(kernel, numHeads, tokens, 1, ATTENTION_THREADS, 0, q, kPages, vPages, meta, pageSize, rows,
                    tokensPerRow, m.tableWidth(), chunk, numHeads, numKvHeads, headDim, scale, out, new CUdeviceptr());
            return;
        }
        long partialBytes = (long) tokens * numHeads * splits * (2 + headDim) * Float.BYTES;
        CUdeviceptr partial = rt.memory().alloc(partialBytes);
        try {
            rt.launch(kernel, numHeads, tokens, splits, ATTENTION_THREADS, 0, q, kPages, vPages, meta, pageSize, rows,
                    tokensPerRow, m.tableWidth(), chunk, numHeads, numKvHeads, headDim, scale, out, partial);
            rt.launch("attention_combine", numHeads, tokens, 1, Math.min(MAX_HEAD_DIM, roundUp32(headDim)), 0, partial,
                    numHeads, headDim, splits, out);
        } finally {
            rt.memory().release(partial);   // stream order: reused only by later work
        }
    }

    /** The per-row values of a batched call as one staged array, and the bucketed table width it pads to. */
    record RowsMeta(int[] meta, int tableWidth) {}

    /**
     * {@code [starts (R) | lengths (R) | blockTables (R × W)]}, each table zero-padded to {@code W}, the
     * {@link #tableBucket} of the widest table. Rows of length 0 may have any table (an empty one
     * included): nothing of theirs is read.
     */
    static RowsMeta rowsMeta(int[][] blockTables, int pageSize, int[] starts, int[] lengths, int tokensPerRow,
                             int cacheRows) {
        int rows = blockTables.length;
        if (starts.length != rows || lengths.length != rows) {
            throw new IllegalArgumentException(rows + " block tables but " + starts.length + " starts and "
                    + lengths.length + " lengths");
        }
        int widest = 0;
        for (int r = 0; r < rows; r++) {
            if (lengths[r] < 0 || lengths[r] > tokensPerRow || starts[r] < 0) {
                throw new IllegalArgumentException("row " + r + ": start " + starts[r] + ", length " + lengths[r]
                        + " (lengths must lie in 0…" + tokensPerRow + ", starts be ≥ 0)");
            }
            if (lengths[r] > 0) {
                checkBlockTable(blockTables[r], pageSize, starts[r] + lengths[r], cacheRows);
            }
            widest = Math.max(widest, blockTables[r].length);
        }
        int width = tableBucket(widest);
        int[] meta = new int[rows * (2 + width)];
        System.arraycopy(starts, 0, meta, 0, rows);
        System.arraycopy(lengths, 0, meta, rows, rows);
        for (int r = 0; r < rows; r++) {
            System.arraycopy(blockTables[r], 0, meta, 2 * rows + r * width, blockTables[r].length);
        }
        return new RowsMeta(meta, width);
    }

    /**
     * The power of two (at least 8) a batch's block tables are padded to: it changes only when the widest
     * table doubles, so a decode step's captured graph stays valid as its sequences grow.
     */
    static int tableBucket(int widest) {
        return Math.max(8, Integer.highestOneBit(Math.max(1, widest - 1)) << 1);
    }

    private static int headDimBucket(int headDim) {
        return headDim <= 32 ? 32 : headDim <= 64 ? 64 : headDim <= 128 ? 128 : 256;
    }

    /**
     * How many blocks share one query's positions (flash-decoding): enough to give every SM two blocks
     * when there are few (query, head) pairs, with at least {@value #MIN_SPLIT_POSITIONS} positions each.
     */
    private int splits(int pairs, int maxVisible) {
        int wanted = 2 * rt.smCount();
        if (pairs >= wanted) {
            return 1;
        }
        int byWork = (wanted + pairs - 1) / pairs;
        int byLength = maxVisible / MIN_SPLIT_POSITIONS;
        return Math.max(1, Math.min(MAX_SPLITS, Math.min(byWork, byLength)));
    }

    /**
     * {@code [first | blockTable | 0…]}, padded to a power of two: the per-step values a kernel reads from
     * device memory rather than from its arguments, at a staging size that changes rarely, so a decode
     * step's captured graph stays valid as the sequence grows.
     */
    static int[] meta(int first, int[] blockTable) {
        int[] m = new int[Math.max(8, Integer.highestOneBit(blockTable.length) << 1)];
        m[0] = first;
        System.arraycopy(blockTable, 0, m, 1, blockTable.length);
        return m;
    }

    private static int roundUp32(int n) {
        return (n + 31) / 32 * 32;
    }

    /** Positions {@code 0 … positions−1} must have a page, and every page must lie inside the cache. */
    private static void checkBlockTable(int[] blockTable, int pageSize, int positions, int cacheRows) {
        if (pageSize <= 0) {
            throw new IllegalArgumentException("page size " + pageSize);
        }
        int pages = (positions + pageSize - 1) / pageSize;
        if (pages > blockTable.length) {
            throw new IndexOutOfBoundsException("position " + (positions - 1) + " is outside a block table of "
                    + blockTable.length + " pages of " + pageSize);
        }
        int cachePages = cacheRows / pageSize;
        for (int i = 0; i < pages; i++) {
            if (blockTable[i] < 0 || blockTable[i] >= cachePages) {
                throw new IndexOutOfBoundsException("block table entry " + i + " = " + blockTable[i]
                        + " is outside a cache of " + cachePages + " pages");
            }
        }
    }
}
