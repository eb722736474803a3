package dev.hyspec.backend.cuda;

import dev.hyspec.checkpoint.DType;
import java.util.BitSet;
import jcuda.driver.CUdeviceptr;

/** Embedding, matmul, norms, elementwise ops and the MoE row moves ({@code dense.cu}, {@code matmul.cu}). */
final class DenseKernels {
    private static final int BLOCK = 256;
    /** Token counts up to this run matmul as a weight-streaming gemv (matmul.cu GEMV_TOKENS per pass). */
    static final int GEMV_MAX_TOKENS = 16;
    private static final int GEMV_ROWS_PER_BLOCK = 16;   // matmul.cu GEMV_WARPS · GEMV_ROWS
    private static final int GEMV_THREADS = 256;
    private static final int TILE = 64;        // matmul.cu TILE
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

    static int blocks(long n, int block) {
        return Math.toIntExact((n + block - 1) / block);
    }

    void embedding(int[] ids, CudaTensor table, CudaTensor out) {
        int d = table.cols();
        int vocab = table.rows();
        if (out.numel() != (long) ids.length * d) {
            throw new IllegalArgumentException("embedding: " + ids.length + " ids of width " + d + " into " + out);
        }
        for (int id : ids) {
            if (id < 0 || id >= vocab) {
                throw new IllegalArgumentException("token id " + id + " is outside the vocabulary [0, " + vocab + ")");
            }
        }
        if (ids.length == 0) {
            return;
        }
        rt.launch("dense_embedding_" + suffix(table.dtype()), blocks(d, BLOCK), gridRows(ids.length), 1, BLOCK, 0,
                rt.stage(ids), table, out, d, ids.length);
    }

    /**
     * Decode and verify shapes (at most {@value #GEMV_MAX_TOKENS} tokens) stream each weight row once
     * per 8 tokens; larger T runs a tiled kernel: float32 FMAs, or bf16 tensor cores in
     * {@link CudaBackend.Precision#BF16}, where x and w are rounded to bfloat16 on every path.
     */
    void matmul(CudaTensor x, CudaTensor w, CudaTensor bias, CudaTensor out) {
        int n = x.rows();
        int in = x.cols();
        int outDim = w.rows();
        if (w.cols() != in || out.rows() != n || out.cols() != outDim) {
            throw new IllegalArgumentException("matmul shapes: x " + x + ", w " + w + ", out " + out);
        }
        if (bias != null && bias.numel() != outDim) {
            throw new IllegalArgumentException("matmul bias " + bias + " for " + outDim + " outputs");
        }
        if (n == 0 || outDim == 0) {
            return;
        }
        if (in == 0) {
            rt.launch("dense_fill_bias", blocks((long) n * outDim, BLOCK), 1, 1, BLOCK, 0, biasPtr(bias),
                    biasType(bias), out, outDim, (long) n * outDim);
            return;
        }
        String sfx = suffix(w.dtype());
        boolean bf16 = precision == CudaBackend.Precision.BF16;
        if (n <= GEMV_MAX_TOKENS) {
            rt.launch("matmul_gemv_" + sfx, blocks(outDim, GEMV_ROWS_PER_BLOCK), 1, 1, GEMV_THREADS, 0, x, w,
                    biasPtr(bias), biasType(bias), out, n, in, outDim, in % 8 == 0 ? 1 : 0, bf16 ? 1 : 0);
        } else if (bf16) {
            rt.launch("matmul_wmma_" + sfx, blocks(outDim, TILE), blocks(n, TILE), 1, 128, 0, x, w, biasPtr(bias),
                    biasType(bias), out, n, in, outDim);
        } else {
            rt.launch("matmul_tiled_" + sfx, blocks(outDim, TILE), blocks(n, TILE), 1, 256, 0, x, w, biasPtr(bias),
                    biasType(bias), out, n, in, outDim);
        }
    }

    /** Grid rows for a kernel that strides over {@code rows} rows (CUDA caps grid y at 65535). */
    private static int gridRows(int rows) {
        return Math.min(rows, 65535);
    }

    private static Object biasPtr(CudaTensor bias) {
        return bias == null ? new CUdeviceptr() : bias;
    }

    /** The bias dtype as matmul.cu's bias_at reads it. */
    private static int biasType(CudaTensor bias) {
        if (bias == null) {
            return 0;
        }
        return switch (bias.dtype()) {
            case F32 -> 0;
            case BF16 -> 1;
            case F16 -> 2;
        };
    }

    void rmsNorm(CudaTensor x, CudaTensor w, int groupSize, float eps, boolean plusOne, CudaTensor out) {
        int groups = normGroups(x, w, groupSize, out);
        rt.launch("dense_rms_norm_" + suffix(w.dtype()), groups, 1, 1, normBlock(groupSize), 0, x, w, out, groupSize,
                x.cols(), Math.toIntExact(w.numel()), eps, plusOne ? 1 : 0);
    }

    void gatedRmsNorm(CudaTensor x, CudaTensor gate, CudaTensor w, int groupSize, float eps, boolean gateFirst,
                      CudaTensor out) {
        sameSize(x, gate);
        int groups = normGroups(x, w, groupSize, out);
        rt.launch("dense_gated_rms_norm_" + suffix(w.dtype()), groups, 1, 1, normBlock(groupSize), 0, x, gate, w,
                out, groupSize, x.cols(), Math.toIntExact(w.numel()), eps, gateFirst ? 1 : 0);
    }

    /** The number of norm groups; checks that groups tile the rows and w is non-empty. */
    private static int normGroups(CudaTensor x, CudaTensor w, int groupSize, CudaTensor out) {
        long n = sameSize(x, out);
        if (groupSize <= 0 || x.cols() % groupSize != 0) {
            throw new IllegalArgumentException("norm group size " + groupSize + " does not divide the " + x.cols()
                    + " columns of " + x);
        }
        if (w.numel() == 0) {
            throw new IllegalArgumentException("norm weight " + w + " is empty");
        }
        return Math.toIntExact(n / groupSize);
    }

    /** Threads for one norm group: a warp multiple, at most 1024, about one per element. */
    private static int normBlock(int groupSize) {
        return Math.min(1024, Math.max(32, (groupSize + 31) / 32 * 32));
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
            throw new IllegalArgumentException("sigmoidGate: gate " + gate + " for x " + x);
        }
        rt.launch("dense_sigmoid_gate", blocks(n, BLOCK), 1, 1, BLOCK, 0, x, gate, out, n, cols, perRow ? 1 : 0);
    }

    void scaleRows(CudaTensor x, float[] scale, CudaTensor out) {
        sameSize(x, out);
        if (scale.length != x.rows()) {
            throw new IllegalArgumentException("scaleRows: " + scale.length + " scales for " + x);
        }
        int cols = x.cols();
        if (scale.length == 0 || cols == 0) {
            return;
        }
        rt.launch("dense_scale_rows", blocks(cols, BLOCK), gridRows(scale.length), 1, BLOCK, 0, x, rt.stage(scale), out,
                cols, scale.length);
    }

    void gatherRows(CudaTensor src, int[] rows, CudaTensor dst) {
        int cols = src.cols();
        checkRows("gatherRows", src, rows, dst, cols, src.rows());
        if (rows.length == 0 || cols == 0) {
            return;
        }
        rt.launch("dense_gather_rows", blocks(cols, BLOCK), gridRows(rows.length), 1, BLOCK, 0, src, rt.stage(rows), dst,
                cols, rows.length);
    }

    /**
     * Distinct rows run one thread per element; a repeated row runs one thread per column over the
     * rows in order (as the CPU), so repeated adds never race.
     */
    void scatterAddRows(CudaTensor src, int[] rows, float[] scale, CudaTensor dst) {
        int cols = src.cols();
        checkRows("scatterAddRows", dst, rows, src, cols, dst.rows());
        if (scale.length != rows.length) {
            throw new IllegalArgumentException("scatterAddRows: " + scale.length + " scales for " + rows.length
                    + " rows");
        }
        if (rows.length == 0 || cols == 0) {
            return;
        }
        if (distinct(rows, dst.rows())) {
            rt.launch("dense_scatter_add_rows", blocks(cols, BLOCK), gridRows(rows.length), 1, BLOCK, 0, src,
                    rt.stage(rows), rt.stage(scale), dst, cols, rows.length);
        } else {
            rt.launch("dense_scatter_add_rows_serial", blocks(cols, BLOCK), 1, 1, BLOCK, 0, src, rt.stage(rows),
                    rt.stage(scale), dst, cols, rows.length);
        }
    }

    /**
     * Checks {@code rows} index {@code indexed} (of {@code limit} rows) and that {@code other} has
     * {@code rows.length} rows of the same width.
     */
    private static void checkRows(String op, CudaTensor indexed, int[] rows, CudaTensor other, int cols, int limit) {
        if (other.cols() != cols || (long) rows.length * cols > other.numel()) {
            throw new IllegalArgumentException(op + ": " + rows.length + " rows of " + indexed + " and " + other);
        }
        for (int r : rows) {
            if (r < 0 || r >= limit) {
                throw new IndexOutOfBoundsException(op + ": row " + r + " of " + indexed);
            }
        }
    }

    private static boolean distinct(int[] rows, int limit) {
        BitSet seen = new BitSet(limit);
        for (int r : rows) {
            if (seen.get(r)) {
                return false;
            }
            seen.set(r);
        }
        return true;
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
