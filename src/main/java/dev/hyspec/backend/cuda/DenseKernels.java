package dev.hyspec.backend.cuda;

import dev.hyspec.checkpoint.DType;

/** Embedding, matmul, norms, elementwise ops and the MoE row moves ({@code dense.cu}, {@code matmul.cu}). */
final class DenseKernels {
    private static final int BLOCK = 256;
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
        throw new UnsupportedOperationException("embedding");
    }

    void matmul(CudaTensor x, CudaTensor w, CudaTensor bias, CudaTensor out) {
        throw new UnsupportedOperationException("matmul");
    }

    void rmsNorm(CudaTensor x, CudaTensor w, int groupSize, float eps, boolean plusOne, CudaTensor out) {
        throw new UnsupportedOperationException("rmsNorm");
    }

    void gatedRmsNorm(CudaTensor x, CudaTensor gate, CudaTensor w, int groupSize, float eps, boolean gateFirst,
                      CudaTensor out) {
        throw new UnsupportedOperationException("gatedRmsNorm");
    }

    void add(CudaTensor a, CudaTensor b, CudaTensor out) {
        long n = sameSize(a, b, out);
        rt.launch("dense_add", blocks(n, BLOCK), 1, 1, BLOCK, 0, a, b, out, n);
    }

    void relu2(CudaTensor x, CudaTensor out) {
        throw new UnsupportedOperationException("relu2");
    }

    void siluMul(CudaTensor gate, CudaTensor up, CudaTensor out) {
        throw new UnsupportedOperationException("siluMul");
    }

    void sigmoidGate(CudaTensor x, CudaTensor gate, CudaTensor out) {
        throw new UnsupportedOperationException("sigmoidGate");
    }

    void scaleRows(CudaTensor x, float[] scale, CudaTensor out) {
        throw new UnsupportedOperationException("scaleRows");
    }

    void gatherRows(CudaTensor src, int[] rows, CudaTensor dst) {
        throw new UnsupportedOperationException("gatherRows");
    }

    void scatterAddRows(CudaTensor src, int[] rows, float[] scale, CudaTensor dst) {
        throw new UnsupportedOperationException("scatterAddRows");
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
