// out[t, o] = Σ_i x[t, i] · w[o, i] (+ bias[o]): nn.Linear, reference CpuBackend.matmul.
// x [T, in] float32, w [out, in] in its checkpoint dtype, out [T, out] float32.
//
// Three kernels, chosen by DenseKernels.matmul:
//   matmul_gemv_*  decode / verify shapes (few tokens): one warp per two output rows streams them
//                  once per 8 tokens, 16-byte loads where `in` allows; memory bound.
//   matmul_tiled_* float32 prefill: 64×64 output tiles through shared memory, float32 FMAs.
//   matmul_wmma_*  bf16 prefill: x and w rounded to bfloat16, tensor-core MMAs accumulating in float32.
// With `round` set (Precision.BF16) the gemv rounds x and w to bfloat16 as well, so the serving
// precision computes the same products whichever kernel runs.
#include <mma.h>
#include "common.cuh"

// bias element i of a bias stored as float32 (0), bfloat16 (1) or half (2); 0 without bias
__device__ __forceinline__ float bias_at(const void* bias, int type, long i) {
    if (bias == nullptr) return 0.f;
    switch (type) {
        case 1: return ld((const __nv_bfloat16*)bias, i);
        case 2: return ld((const __half*)bias, i);
        default: return ld((const float*)bias, i);
    }
}

// out[t, o] = bias[o] (or 0): a matmul with in = 0
extern "C" __global__ void dense_fill_bias(const void* bias, int biasType, float* out, int outDim, long n) {
    long i = (long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] = bias_at(bias, biasType, i % outDim);
}

__device__ __forceinline__ float bf16_round(float v) { return __bfloat162float(__float2bfloat16(v)); }

// Eight consecutive weights from element i (i a multiple of 8, the row 16-byte aligned for 2-byte types).
__device__ __forceinline__ void ld8(const float* p, long i, float* o) {
    float4 a = *reinterpret_cast<const float4*>(p + i);
    float4 b = *reinterpret_cast<const float4*>(p + i + 4);
    o[0] = a.x; o[1] = a.y; o[2] = a.z; o[3] = a.w; o[4] = b.x; o[5] = b.y; o[6] = b.z; o[7] = b.w;
}
__device__ __forceinline__ void ld8(const __nv_bfloat16* p, long i, float* o) {
    uint4 u = *reinterpret_cast<const uint4*>(p + i);
    const __nv_bfloat162* h = reinterpret_cast<const __nv_bfloat162*>(&u);
#pragma unroll
    for (int j = 0; j < 4; j++) {
        float2 f = __bfloat1622float2(h[j]);
        o[2 * j] = f.x;
        o[2 * j + 1] = f.y;
    }
}
__device__ __forceinline__ void ld8(const __half* p, long i, float* o) {
    uint4 u = *reinterpret_cast<const uint4*>(p + i);
    const __half2* h = reinterpret_cast<const __half2*>(&u);
#pragma unroll
    for (int j = 0; j < 4; j++) {
        float2 f = __half22float2(h[j]);
        o[2 * j] = f.x;
        o[2 * j + 1] = f.y;
    }
}

constexpr int GEMV_WARPS = 8;   // warps per block of 256 threads
constexpr int GEMV_ROWS = 2;    // output rows per warp: each x load feeds both
constexpr int GEMV_TOKENS = 8;  // tokens sharing one pass over a weight row

// grid.x = ceil(out / (GEMV_WARPS·GEMV_ROWS)), block 256. vec: in % 8 == 0; each lane then takes two
// 16-byte chunks of each of its rows per step, so four weight loads are in flight at once.
template <typename W>
__device__ void gemv(const float* __restrict__ x, const W* __restrict__ w, const void* bias, int biasType,
                     float* out, int T, int in, int outDim, int vec, int round) {
    int lane = threadIdx.x & 31;
    int o0 = (blockIdx.x * GEMV_WARPS + (threadIdx.x >> 5)) * GEMV_ROWS;
    if (o0 >= outDim) return;
    int nr = min(GEMV_ROWS, outDim - o0);
    for (int t0 = 0; t0 < T; t0 += GEMV_TOKENS) {
        int nt = min(GEMV_TOKENS, T - t0);
        float acc[GEMV_ROWS][GEMV_TOKENS];
#pragma unroll
        for (int r = 0; r < GEMV_ROWS; r++)
#pragma unroll
            for (int t = 0; t < GEMV_TOKENS; t++) acc[r][t] = 0.f;
        if (vec) {
            for (int i = lane * 8; i < in; i += 2 * 32 * 8) {
                bool second = i + 32 * 8 < in;
                float wv[GEMV_ROWS][2][8];
#pragma unroll
                for (int r = 0; r < GEMV_ROWS; r++) {
                    const W* wr = w + (long)(o0 + (r < nr ? r : 0)) * in;
                    ld8(wr, i, wv[r][0]);
                    if (second) ld8(wr, i + 32 * 8, wv[r][1]);
                }
                if (round) {
#pragma unroll
                    for (int r = 0; r < GEMV_ROWS; r++)
#pragma unroll
                        for (int j = 0; j < 8; j++) {
                            wv[r][0][j] = bf16_round(wv[r][0][j]);
                            wv[r][1][j] = bf16_round(wv[r][1][j]);
                        }
                }
#pragma unroll
                for (int t = 0; t < GEMV_TOKENS; t++) {
                    if (t < nt) {
                        const float* xt = x + (long)(t0 + t) * in;
#pragma unroll
                        for (int u = 0; u < 2; u++) {
                            if (u == 0 || second) {
                                float xv[8];
                                ld8(xt, i + u * 32 * 8, xv);
#pragma unroll
                                for (int j = 0; j < 8; j++) {
                                    float xj = round ? bf16_round(xv[j]) : xv[j];
#pragma unroll
                                    for (int r = 0; r < GEMV_ROWS; r++) acc[r][t] += xj * wv[r][u][j];
                                }
                            }
                        }
                    }
                }
            }
        } else {
            for (int i = lane; i < in; i += 32) {
                float wv[GEMV_ROWS];
#pragma unroll
                for (int r = 0; r < GEMV_ROWS; r++) {
                    wv[r] = ld(w, (long)(o0 + (r < nr ? r : 0)) * in + i);
                    if (round) wv[r] = bf16_round(wv[r]);
                }
#pragma unroll
                for (int t = 0; t < GEMV_TOKENS; t++) {
                    if (t < nt) {
                        float xv = x[(long)(t0 + t) * in + i];
                        if (round) xv = bf16_round(xv);
#pragma unroll
                        for (int r = 0; r < GEMV_ROWS; r++) acc[r][t] += xv * wv[r];
                    }
                }
            }
        }
#pragma unroll
        for (int r = 0; r < GEMV_ROWS; r++)
#pragma unroll
            for (int t = 0; t < GEMV_TOKENS; t++) {
                float s = warp_sum(acc[r][t]);
                if (lane == 0 && r < nr && t < nt)
                    out[(long)(t0 + t) * outDim + o0 + r] = s + bias_at(bias, biasType, o0 + r);
            }
    }
}

constexpr int TILE = 64;   // output tile: TILE tokens × TILE output rows
constexpr int TK = 16;     // depth of one shared-memory step (float32 kernel)

// grid (ceil(out / 64), ceil(T / 64)), block 256; each thread owns a 4×4 strided micro-tile.
template <typename W>
__device__ void tiled(const float* x, const W* w, const void* bias, int biasType, float* out, int T, int in,
                      int outDim) {
    __shared__ float xs[TK][TILE + 4];   // [k, token]
    __shared__ float ws[TK][TILE + 4];   // [k, output row]
    int tid = threadIdx.x;
    int tx = tid & 15, ty = tid >> 4;
    int m0 = blockIdx.y * TILE, n0 = blockIdx.x * TILE;
    int lr = tid >> 2, lk = (tid & 3) * 4;   // loader: row lr, k lk … lk+3
    float acc[4][4] = {};
    for (int k0 = 0; k0 < in; k0 += TK) {
#pragma unroll
        for (int j = 0; j < 4; j++) {
            int k = k0 + lk + j;
            int m = m0 + lr, n = n0 + lr;
            xs[lk + j][lr] = (m < T && k < in) ? x[(long)m * in + k] : 0.f;
            ws[lk + j][lr] = (n < outDim && k < in) ? ld(w, (long)n * in + k) : 0.f;
        }
        __syncthreads();
#pragma unroll
        for (int k = 0; k < TK; k++) {
            float a[4], b[4];
#pragma unroll
            for (int i = 0; i < 4; i++) {
                a[i] = xs[k][ty + 16 * i];
                b[i] = ws[k][tx + 16 * i];
            }
#pragma unroll
            for (int i = 0; i < 4; i++)
#pragma unroll
                for (int j = 0; j < 4; j++) acc[i][j] += a[i] * b[j];
        }
        __syncthreads();
    }
#pragma unroll
    for (int i = 0; i < 4; i++) {
        int m = m0 + ty + 16 * i;
        if (m >= T) continue;
#pragma unroll
        for (int j = 0; j < 4; j++) {
            int n = n0 + tx + 16 * j;
            if (n < outDim) out[(long)m * outDim + n] = acc[i][j] + bias_at(bias, biasType, n);
        }
    }
}

constexpr int MK = 32;          // depth of one shared-memory step (tensor-core kernel)
constexpr int MLD = MK + 8;     // padded leading dimension of the bf16 tiles (a multiple of 8)

// grid (ceil(out / 64), ceil(T / 64)), block 128: four warps, each a 32×32 quarter of the tile as
// 2×2 wmma 16×16×16 bf16 fragments.
template <typename W>
__device__ void wmma_tile(const float* x, const W* w, const void* bias, int biasType, float* out, int T, int in,
                          int outDim) {
    using namespace nvcuda;
    __shared__ __align__(32) __nv_bfloat16 xs[TILE * MLD];   // [token, k]
    __shared__ __align__(32) __nv_bfloat16 ws[TILE * MLD];   // [output row, k] = wᵀ column-major
    __shared__ __align__(32) float cs[TILE * (TILE + 4)];
    int tid = threadIdx.x, warp = tid >> 5;
    int wm = (warp >> 1) * 32, wn = (warp & 1) * 32;
    int m0 = blockIdx.y * TILE, n0 = blockIdx.x * TILE;
    wmma::fragment<wmma::accumulator, 16, 16, 16, float> acc[2][2];
#pragma unroll
    for (int i = 0; i < 2; i++)
#pragma unroll
        for (int j = 0; j < 2; j++) wmma::fill_fragment(acc[i][j], 0.f);
    for (int k0 = 0; k0 < in; k0 += MK) {
        for (int idx = tid; idx < TILE * MK; idx += blockDim.x) {
            int r = idx / MK, k = idx % MK, kk = k0 + k;
            int m = m0 + r, n = n0 + r;
            xs[r * MLD + k] = __float2bfloat16((m < T && kk < in) ? x[(long)m * in + kk] : 0.f);
            ws[r * MLD + k] = __float2bfloat16((n < outDim && kk < in) ? ld(w, (long)n * in + kk) : 0.f);
        }
        __syncthreads();
#pragma unroll
        for (int kk = 0; kk < MK; kk += 16) {
            wmma::fragment<wmma::matrix_a, 16, 16, 16, __nv_bfloat16, wmma::row_major> a[2];
            wmma::fragment<wmma::matrix_b, 16, 16, 16, __nv_bfloat16, wmma::col_major> b[2];
#pragma unroll
            for (int i = 0; i < 2; i++) wmma::load_matrix_sync(a[i], xs + (wm + 16 * i) * MLD + kk, MLD);
#pragma unroll
            for (int j = 0; j < 2; j++) wmma::load_matrix_sync(b[j], ws + (wn + 16 * j) * MLD + kk, MLD);
#pragma unroll
            for (int i = 0; i < 2; i++)
#pragma unroll
                for (int j = 0; j < 2; j++) wmma::mma_sync(acc[i][j], a[i], b[j], acc[i][j]);
        }
        __syncthreads();
    }
#pragma unroll
    for (int i = 0; i < 2; i++)
#pragma unroll
        for (int j = 0; j < 2; j++)
            wmma::store_matrix_sync(cs + (wm + 16 * i) * (TILE + 4) + wn + 16 * j, acc[i][j], TILE + 4,
                                    wmma::mem_row_major);
    __syncthreads();
    for (int idx = tid; idx < TILE * TILE; idx += blockDim.x) {
        int r = idx / TILE, c = idx % TILE;
        int m = m0 + r, n = n0 + c;
        if (m < T && n < outDim) out[(long)m * outDim + n] = cs[r * (TILE + 4) + c] + bias_at(bias, biasType, n);
    }
}

#define MATMUL_KERNELS(SUFFIX, W)                                                                                \
    extern "C" __global__ void matmul_gemv_##SUFFIX(const float* x, const W* w, const void* bias, int biasType,  \
                                                    float* out, int T, int in, int outDim, int vec, int round) { \
        gemv<W>(x, w, bias, biasType, out, T, in, outDim, vec, round);                                           \
    }                                                                                                            \
    extern "C" __global__ void __launch_bounds__(256)                                                            \
        matmul_tiled_##SUFFIX(const float* x, const W* w, const void* bias, int biasType, float* out, int T,     \
                              int in, int outDim) {                                                              \
        tiled<W>(x, w, bias, biasType, out, T, in, outDim);                                                      \
    }                                                                                                            \
    extern "C" __global__ void __launch_bounds__(128)                                                            \
        matmul_wmma_##SUFFIX(const float* x, const W* w, const void* bias, int biasType, float* out, int T,      \
                             int in, int outDim) {                                                               \
        wmma_tile<W>(x, w, bias, biasType, out, T, in, outDim);                                                  \
    }

HYSPEC_FOR_WEIGHT_TYPES(MATMUL_KERNELS)
