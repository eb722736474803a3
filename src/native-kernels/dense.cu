// Elementwise ops, norms, embedding and the MoE row moves. References: CpuBackend's methods of
// the same names; every reduction accumulates in float32 as they do.
#include "common.cuh"

extern "C" __global__ void dense_add(const float* a, const float* b, float* out, long n) {
    long i = (long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] = a[i] + b[i];
}

// out = relu(x)²
extern "C" __global__ void dense_relu2(const float* x, float* out, long n) {
    long i = (long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        float r = fmaxf(x[i], 0.f);
        out[i] = r * r;
    }
}

// out = silu(gate) · up
extern "C" __global__ void dense_silu_mul(const float* gate, const float* up, float* out, long n) {
    long i = (long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] = silu(gate[i]) * up[i];
}

// out[i] = x[i] · σ(gate[perRow ? i / cols : i])
extern "C" __global__ void dense_sigmoid_gate(const float* x, const float* gate, float* out, long n, int cols,
                                              int perRow) {
    long i = (long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] = x[i] * sigmoid(gate[perRow ? i / cols : i]);
}

// Row-indexed kernels run on a grid (column blocks, min(rows, 65535)) and stride over the rows.

// out[t, :] = x[t, :] · scale[t]
extern "C" __global__ void dense_scale_rows(const float* x, const float* scale, float* out, int cols, int rows) {
    int c = blockIdx.x * blockDim.x + threadIdx.x;
    if (c >= cols) return;
    for (long t = blockIdx.y; t < rows; t += gridDim.y) out[t * cols + c] = x[t * cols + c] * scale[t];
}

// dst[i, :] = src[rows[i], :]
extern "C" __global__ void dense_gather_rows(const float* src, const int* rows, float* dst, int cols, int n) {
    int c = blockIdx.x * blockDim.x + threadIdx.x;
    if (c >= cols) return;
    for (long i = blockIdx.y; i < n; i += gridDim.y) dst[i * cols + c] = src[(long)rows[i] * cols + c];
}

// dst[rows[i], :] += scale[i] · src[i, :] where the rows are distinct
extern "C" __global__ void dense_scatter_add_rows(const float* src, const int* rows, const float* scale, float* dst,
                                                  int cols, int n) {
    int c = blockIdx.x * blockDim.x + threadIdx.x;
    if (c >= cols) return;
    for (long i = blockIdx.y; i < n; i += gridDim.y) {
        float* d = dst + (long)rows[i] * cols + c;
        *d = *d + scale[i] * src[i * cols + c];
    }
}

// As dense_scatter_add_rows when a row repeats: one thread per column walks i in order, as the CPU does.
extern "C" __global__ void dense_scatter_add_rows_serial(const float* src, const int* rows, const float* scale,
                                                         float* dst, int cols, int n) {
    int c = blockIdx.x * blockDim.x + threadIdx.x;
    if (c >= cols) return;
    for (int i = 0; i < n; i++) {
        float* d = dst + (long)rows[i] * cols + c;
        *d = *d + scale[i] * src[(long)i * cols + c];
    }
}

// out[t, :] = table[ids[t], :] widened to float32 (ids checked on the host)
template <typename W>
__device__ void embedding(const int* ids, const W* table, float* out, int d, int T) {
    int c = blockIdx.x * blockDim.x + threadIdx.x;
    if (c >= d) return;
    for (long t = blockIdx.y; t < T; t += gridDim.y) out[t * d + c] = ld(table, (long)ids[t] * d + c);
}

// 1 / sqrt(ss / n + eps) rounded as CpuBackend.invRms does (the float mean plus eps, then double).
__device__ __forceinline__ float inv_rms(float ss, int n, float eps) {
    return (float)(1.0 / sqrt((double)(ss / (float)n + eps)));
}

// RMSNorm of one group of `group` consecutive elements per block (grid.x = numel / group). `w` has
// `wn` elements and is indexed by column modulo wn; out may alias x (each thread rewrites only the
// elements it read).
template <typename W>
__device__ void rms_norm(const float* x, const W* w, float* out, int group, int cols, int wn, float eps,
                         int plusOne) {
    __shared__ float scratch[32];
    long base = (long)blockIdx.x * group;
    float ss = 0.f;
    for (int i = threadIdx.x; i < group; i += blockDim.x) {
        float v = x[base + i];
        ss += v * v;
    }
    float inv = inv_rms(block_sum(ss, scratch), group, eps);
    int col0 = (int)(base % cols);
    for (int i = threadIdx.x; i < group; i += blockDim.x) {
        float wi = ld(w, (col0 + i) % wn);
        out[base + i] = x[base + i] * inv * (plusOne ? 1.f + wi : wi);
    }
}

// Gated RMSNorm per group (one group per block). gateFirst (Mamba2): u = x·silu(g), out = norm(u)·w;
// else (Gated DeltaNet): out = norm(x)·w·silu(g). out may alias x.
template <typename W>
__device__ void gated_rms_norm(const float* x, const float* gate, const W* w, float* out, int group, int cols,
                               int wn, float eps, int gateFirst) {
    __shared__ float scratch[32];
    long base = (long)blockIdx.x * group;
    float ss = 0.f;
    for (int i = threadIdx.x; i < group; i += blockDim.x) {
        float u = gateFirst ? x[base + i] * silu(gate[base + i]) : x[base + i];
        ss += u * u;
    }
    float inv = inv_rms(block_sum(ss, scratch), group, eps);
    int col0 = (int)(base % cols);
    for (int i = threadIdx.x; i < group; i += blockDim.x) {
        float g = silu(gate[base + i]);
        float u = gateFirst ? x[base + i] * g : x[base + i];
        float v = u * inv * ld(w, (col0 + i) % wn);
        out[base + i] = gateFirst ? v : v * g;
    }
}

#define DENSE_WEIGHT_KERNELS(SUFFIX, W)                                                                          \
    extern "C" __global__ void dense_embedding_##SUFFIX(const int* ids, const W* table, float* out, int d,       \
                                                         int T) {                                                \
        embedding<W>(ids, table, out, d, T);                                                                      \
    }                                                                                                            \
    extern "C" __global__ void dense_rms_norm_##SUFFIX(const float* x, const W* w, float* out, int group,       \
                                                        int cols, int wn, float eps, int plusOne) {              \
        rms_norm<W>(x, w, out, group, cols, wn, eps, plusOne);                                                   \
    }                                                                                                            \
    extern "C" __global__ void dense_gated_rms_norm_##SUFFIX(const float* x, const float* gate, const W* w,     \
                                                              float* out, int group, int cols, int wn,           \
                                                              float eps, int gateFirst) {                        \
        gated_rms_norm<W>(x, gate, w, out, group, cols, wn, eps, gateFirst);                                     \
    }

HYSPEC_FOR_WEIGHT_TYPES(DENSE_WEIGHT_KERNELS)
