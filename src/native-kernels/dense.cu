// Elementwise ops, norms, embedding and the MoE row moves. References: CpuBackend's methods of the
// same names; float32 throughout, weights widened on load.
#include "common.cuh"

extern "C" __global__ void dense_add(const float* a, const float* b, float* out, long n) {
    long i = (long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] = a[i] + b[i];
}

extern "C" __global__ void dense_relu2(const float* x, float* out, long n) {
    long i = (long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        float r = fmaxf(x[i], 0.f);
        out[i] = r * r;
    }
}

// SwiGLU: out = silu(gate) · up
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

// out[t, :] = x[t, :] · scale[t]
extern "C" __global__ void dense_scale_rows(const float* x, const float* scale, float* out, long n, int cols) {
    long i = (long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] = x[i] * scale[i / cols];
}

// out[t, :] = table[ids[t], :]; grid (⌈D/block⌉, min(T, 65535)). ids were checked on the host.
template <typename W>
__device__ void embedding(const int* ids, const W* table, float* out, int tokens, int d) {
    int c = blockIdx.x * blockDim.x + threadIdx.x;
    if (c >= d) return;
    for (int t = blockIdx.y; t < tokens; t += gridDim.y) out[(long)t * d + c] = ld(table, (long)ids[t] * d + c);
}

// RMSNorm, one block per group of groupSize elements (rows are whole groups):
// out = x · inv · w', inv = 1 / sqrt(Σx²/groupSize + eps), w' = 1 + w when plusOne.
// w has wLen elements, indexed by column modulo wLen. With a residual y (add_rms_norm) the block
// first adds it, x ← x + y, and normalises the sum. Each thread owns the same elements in both passes
// (16-byte vectors where groupSize, wLen and the column offset allow), so it reads back what it wrote.
template <typename W>
__device__ void add_rms_norm(float* x, const float* y, const W* w, int wLen, int groupSize, int cols, float eps,
                             int plusOne, float* out) {
    __shared__ float scratch[32];
    const long base = (long)blockIdx.x * groupSize;
    const int col0 = (int)(base % cols);
    const bool vec = groupSize % 4 == 0 && wLen % 4 == 0 && col0 % 4 == 0 && ((uintptr_t)x & 15) == 0
            && ((uintptr_t)out & 15) == 0 && (y == nullptr || ((uintptr_t)y & 15) == 0);
    float ss = 0.f;
    if (vec) {
        for (int i = threadIdx.x * 4; i < groupSize; i += blockDim.x * 4) {
            float4 v = *reinterpret_cast<const float4*>(x + base + i);
            if (y != nullptr) {
                float4 r = *reinterpret_cast<const float4*>(y + base + i);
                v.x += r.x; v.y += r.y; v.z += r.z; v.w += r.w;
                *reinterpret_cast<float4*>(x + base + i) = v;
            }
            ss += v.x * v.x + v.y * v.y + v.z * v.z + v.w * v.w;
        }
    } else {
        for (int i = threadIdx.x; i < groupSize; i += blockDim.x) {
            float v = x[base + i];
            if (y != nullptr) {
                v += y[base + i];
                x[base + i] = v;
            }
            ss += v * v;
        }
    }
    ss = block_sum(ss, scratch);
    const float inv = 1.f / sqrtf(ss / groupSize + eps);
    if (vec) {
        for (int i = threadIdx.x * 4; i < groupSize; i += blockDim.x * 4) {
            float4 v = *reinterpret_cast<const float4*>(x + base + i);
            const int c = (col0 + i) % wLen;
            float w0 = ld(w, c), w1 = ld(w, c + 1), w2 = ld(w, c + 2), w3 = ld(w, c + 3);
            if (plusOne) { w0 += 1.f; w1 += 1.f; w2 += 1.f; w3 += 1.f; }
            *reinterpret_cast<float4*>(out + base + i) = make_float4(v.x * inv * w0, v.y * inv * w1, v.z * inv * w2,
                                                                     v.w * inv * w3);
        }
    } else {
        for (int i = threadIdx.x; i < groupSize; i += blockDim.x) {
            float wi = ld(w, (col0 + i) % wLen);
            out[base + i] = x[base + i] * inv * (plusOne ? 1.f + wi : wi);
        }
    }
}

// Gated RMSNorm per group. gateFirst (Mamba2): u = x·silu(g), out = u·inv(u)·w.
// Otherwise (Gated DeltaNet): out = x·inv(x)·w·silu(g). 16-byte vectors where the shapes allow, as
// add_rms_norm; out may be x.
template <typename W>
__device__ void gated_rms_norm(const float* x, const float* gate, const W* w, int wLen, int groupSize, int cols,
                               float eps, int gateFirst, float* out) {
    __shared__ float scratch[32];
    const long base = (long)blockIdx.x * groupSize;
    const int col0 = (int)(base % cols);
    const bool vec = groupSize % 4 == 0 && wLen % 4 == 0 && col0 % 4 == 0 && ((uintptr_t)x & 15) == 0
            && ((uintptr_t)gate & 15) == 0 && ((uintptr_t)out & 15) == 0;
    float ss = 0.f;
    if (vec) {
        for (int i = threadIdx.x * 4; i < groupSize; i += blockDim.x * 4) {
            float4 v = *reinterpret_cast<const float4*>(x + base + i);
            if (gateFirst) {
                float4 g = *reinterpret_cast<const float4*>(gate + base + i);
                v.x *= silu(g.x); v.y *= silu(g.y); v.z *= silu(g.z); v.w *= silu(g.w);
            }
            ss += v.x * v.x + v.y * v.y + v.z * v.z + v.w * v.w;
        }
    } else {
        for (int i = threadIdx.x; i < groupSize; i += blockDim.x) {
            float u = gateFirst ? x[base + i] * silu(gate[base + i]) : x[base + i];
            ss += u * u;
        }
    }
    ss = block_sum(ss, scratch);
    const float inv = 1.f / sqrtf(ss / groupSize + eps);
    if (vec) {
        for (int i = threadIdx.x * 4; i < groupSize; i += blockDim.x * 4) {
            float4 v = *reinterpret_cast<const float4*>(x + base + i);
            float4 g = *reinterpret_cast<const float4*>(gate + base + i);
            const int c = (col0 + i) % wLen;
            float vv[4] = {v.x, v.y, v.z, v.w}, gg[4] = {g.x, g.y, g.z, g.w}, o[4];
#pragma unroll
            for (int j = 0; j < 4; j++) {
                float wi = ld(w, c + j);
                o[j] = gateFirst ? vv[j] * silu(gg[j]) * inv * wi : vv[j] * inv * wi * silu(gg[j]);
            }
            *reinterpret_cast<float4*>(out + base + i) = make_float4(o[0], o[1], o[2], o[3]);
        }
    } else {
        for (int i = threadIdx.x; i < groupSize; i += blockDim.x) {
            float wi = ld(w, (col0 + i) % wLen);
            if (gateFirst) {
                float u = x[base + i] * silu(gate[base + i]);
                out[base + i] = u * inv * wi;
            } else {
                out[base + i] = x[base + i] * inv * wi * silu(gate[base + i]);
            }
        }
    }
}

#define DENSE_WEIGHT_KERNELS(SFX, W)                                                                          \
    extern "C" __global__ void dense_embedding_##SFX(const int* ids, const W* table, float* out, int tokens, \
                                                     int d) {                                                 \
        embedding<W>(ids, table, out, tokens, d);                                                             \
    }                                                                                                         \
    extern "C" __global__ void dense_rms_norm_##SFX(const float* x, const W* w, int wLen, int groupSize,      \
                                                    int cols, float eps, int plusOne, float* out) {           \
        add_rms_norm<W>(const_cast<float*>(x), nullptr, w, wLen, groupSize, cols, eps, plusOne, out);         \
    }                                                                                                         \
    extern "C" __global__ void dense_add_rms_norm_##SFX(float* x, const float* y, const W* w, int wLen,       \
                                                        int groupSize, int cols, float eps, int plusOne,      \
                                                        float* out) {                                         \
        add_rms_norm<W>(x, y, w, wLen, groupSize, cols, eps, plusOne, out);                                   \
    }                                                                                                         \
    extern "C" __global__ void dense_gated_rms_norm_##SFX(const float* x, const float* gate, const W* w,      \
                                                          int wLen, int groupSize, int cols, float eps,       \
                                                          int gateFirst, float* out) {                        \
        gated_rms_norm<W>(x, gate, w, wLen, groupSize, cols, eps, gateFirst, out);                            \
    }
HYSPEC_FOR_WEIGHT_TYPES(DENSE_WEIGHT_KERNELS)

// dst[i, :] = src[rows[i], :]; grid (⌈cols/block⌉, min(n, 65535)). rows were checked on the host.
extern "C" __global__ void dense_gather_rows(const float* src, const int* rows, float* dst, int n, int cols) {
    int c = blockIdx.x * blockDim.x + threadIdx.x;
    if (c >= cols) return;
    for (int i = blockIdx.y; i < n; i += gridDim.y) dst[(long)i * cols + c] = src[(long)rows[i] * cols + c];
}

// dst[rows[i], :] += scale[i] · src[i, :], deterministically: the host grouped the indices i by
// destination row (CSR: targets[g] receives order[start[g] … start[g+1]−1], ascending i), so each
// thread owns one (target row, column) and adds its sources in index order, as the CPU does.
// grid (⌈cols/block⌉, min(groups, 65535)).
extern "C" __global__ void dense_scatter_add_rows(const float* src, const int* targets, const int* start,
                                                  const int* order, const float* scale, float* dst, int groups,
                                                  int cols) {
    int c = blockIdx.x * blockDim.x + threadIdx.x;
    if (c >= cols) return;
    for (int g = blockIdx.y; g < groups; g += gridDim.y) {
        long at = (long)targets[g] * cols + c;
        float acc = dst[at];
        for (int j = start[g]; j < start[g + 1]; j++) {
            int i = order[j];
            acc += scale[i] * src[(long)i * cols + c];
        }
        dst[at] = acc;
    }
}

// ---------------------------------------------------------------- batched copies
//
// dsts[r][0..n) = srcs[r][0..n) for every pair r of two tables of device addresses (copyBatch, and
// scatterRowBlocks with srcs pointing at the row blocks of one tensor); grid (ceil(n / (VEC ·
// COPY_UNROLL · block)), pairs). VEC = 4: 16-byte vectors (n % 4 == 0, addresses 16-byte aligned,
// checked on the host). Each thread issues its COPY_UNROLL loads before its stores.
#define COPY_UNROLL 4

template <int VEC> struct CopyVec { typedef float T; };
template <> struct CopyVec<4> { typedef float4 T; };

template <int VEC>
__device__ void copy_batch_impl(const float* const* __restrict__ srcs, float* const* __restrict__ dsts, long n) {
    typedef typename CopyVec<VEC>::T V;
    const V* src = reinterpret_cast<const V*>(srcs[blockIdx.y]);
    V* dst = reinterpret_cast<V*>(dsts[blockIdx.y]);
    const long nv = n / VEC;
    const long i0 = (long)blockIdx.x * COPY_UNROLL * blockDim.x + threadIdx.x;
    V v[COPY_UNROLL];
#pragma unroll
    for (int u = 0; u < COPY_UNROLL; u++) {
        long i = i0 + (long)u * blockDim.x;
        if (i < nv) v[u] = src[i];
    }
#pragma unroll
    for (int u = 0; u < COPY_UNROLL; u++) {
        long i = i0 + (long)u * blockDim.x;
        if (i < nv) dst[i] = v[u];
    }
}

extern "C" __global__ void copy_batch_v4(const float* const* srcs, float* const* dsts, long n) {
    copy_batch_impl<4>(srcs, dsts, n);
}

extern "C" __global__ void copy_batch_v1(const float* const* srcs, float* const* dsts, long n) {
    copy_batch_impl<1>(srcs, dsts, n);
}
