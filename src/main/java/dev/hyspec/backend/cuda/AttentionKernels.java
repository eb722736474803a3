package dev.hyspec.backend.cuda;

/** RoPE, the paged KV cache writes and paged attention for prefill, decode and verify rows ({@code attention.cu}). */
final class AttentionKernels {
    private final CudaRuntime rt;

    AttentionKernels(CudaRuntime rt) {
        this.rt = rt;
    }

    void rope(CudaTensor x, int heads, int headDim, int rotaryDim, float theta, int[] positions) {
        throw new UnsupportedOperationException("rope");
    }

    void writeKv(CudaTensor k, CudaTensor v, CudaTensor kPages, CudaTensor vPages, int[] blockTable, int pageSize,
                 int start) {
        throw new UnsupportedOperationException("writeKv");
    }

    void pagedAttention(CudaTensor q, CudaTensor kPages, CudaTensor vPages, int[] blockTable, int pageSize,
                        int numHeads, int numKvHeads, int headDim, int pastLen, CudaTensor out) {
        throw new UnsupportedOperationException("pagedAttention");
    }
}
