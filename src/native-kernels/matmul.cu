// out[t, o] = Σ_i x[t, i] · w[o, i] (+ bias[o]): nn.Linear with x [T, in] float32, w [out, in] in its
// checkpoint dtype, out [T, out] float32. Reference: CpuBackend.matmul. Three kernels:
//   matmul_decode_t{T}_*  T ≤ 8 (decode / verify rows): bandwidth-bound, every weight byte read once
//                         with 16-byte loads, all T tokens accumulated per row in registers;
//   matmul_simt_*         any shape, float32 tiled SIMT GEMM (exact float32 products);
//   matmul_tc_bf16        bf16 weights in Precision.BF16: tensor cores (mma.sync m16n8k16 bf16→f32),
//                         x rounded to bf16 as it is loaded; needs in % 8 == 0.
// Every product accumulates in float32. Tensors start on DeviceMemory's 256-byte boundaries, so row
// starts are 16-byte aligned whenever the row length in bytes is a multiple of 16.
#include "tensor_core.cuh"

// ---- decode-shaped: T ≤ 8 ----

constexpr int MV_THREADS = 128;   // threads of a block; they split `in` between them
constexpr int MV_UNROLL = 4;      // 16-byte weight loads in flight per row and thread

// Output rows per block of matmul_decode (DenseKernels.decodeRows).
// Two rows up to T = 2: four rows at T = 1 measured 0.6% slower over a Nemotron-H-8B decode step
// (4096 × 8192 out_proj 2256 against 2335 GB/s).
template <int T> struct DecodeRows { static constexpr int value = T <= 2 ? 2 : 4; };

// One block owns R consecutive output rows from row0; its threads split `in` into 16-byte chunks
// (V weights) and each accumulates acc[R][T]; then a block reduction. act bit 0 squares the ReLU of
// each output (relu², the MLP's activation, fused); act bit 1 rounds x to bf16 as it is loaded, as the
// tensor-core GEMM does (DenseKernels sets it under Precision.BF16), so a product gives the same
// result whichever path its row count picks, up to the order of the float32 sums. Grid: ⌈out / R⌉ blocks.
template <int T, typename W>
__device__ void matmul_decode(const float* __restrict__ x, const W* __restrict__ w, const void* bias, int biasType,
                              float* __restrict__ out, int in, int outDim, int act, int row0) {
    constexpr int R = DecodeRows<T>::value;
    constexpr int V = 16 / sizeof(W);
    constexpr int WARPS = MV_THREADS / 32;
    __shared__ float red[WARPS][R * T];
    float acc[R][T];
#pragma unroll
    for (int r = 0; r < R; r++)
#pragma unroll
        for (int t = 0; t < T; t++) acc[r][t] = 0.f;

    const bool roundX = act & 2;
    bool vec = in % V == 0 && ((uintptr_t)x & 15) == 0 && ((uintptr_t)w & 15) == 0;
    if (vec) {
        const int chunks = in / V;
        const uint4* wv = reinterpret_cast<const uint4*>(w);
        for (int c0 = threadIdx.x; c0 < chunks; c0 += MV_THREADS * MV_UNROLL) {
            uint4 wr[MV_UNROLL][R];
#pragma unroll
            for (int u = 0; u < MV_UNROLL; u++) {
                int c = c0 + u * MV_THREADS;
#pragma unroll
                for (int r = 0; r < R; r++) {
                    int row = min(row0 + r, outDim - 1);   // rows past the end repeat the last; discarded
                    wr[u][r] = c < chunks ? __ldg(wv + (long)row * chunks + c) : make_uint4(0, 0, 0, 0);
                }
            }
#pragma unroll
            for (int u = 0; u < MV_UNROLL; u++) {
                int c = c0 + u * MV_THREADS;
                if (c >= chunks) break;
                float wf[R][V];
#pragma unroll
                for (int r = 0; r < R; r++) widen16(wr[u][r], wf[r], w);
#pragma unroll
                for (int t = 0; t < T; t++) {
                    const float4* xp = reinterpret_cast<const float4*>(x + (long)t * in + (long)c * V);
                    float xv[V];
#pragma unroll
                    for (int q = 0; q < V / 4; q++) {
                        float4 f = __ldg(xp + q);
                        xv[4 * q] = f.x; xv[4 * q + 1] = f.y; xv[4 * q + 2] = f.z; xv[4 * q + 3] = f.w;
                    }
                    if (roundX) {
#pragma unroll
                        for (int j = 0; j < V; j++) xv[j] = __bfloat162float(__float2bfloat16_rn(xv[j]));
                    }
#pragma unroll
                    for (int r = 0; r < R; r++)
#pragma unroll
                        for (int j = 0; j < V; j++) acc[r][t] = fmaf(xv[j], wf[r][j], acc[r][t]);
                }
            }
        }
    } else {
        for (int k = threadIdx.x; k < in; k += MV_THREADS) {
            float wf[R];
#pragma unroll
            for (int r = 0; r < R; r++) wf[r] = ld(w, (long)min(row0 + r, outDim - 1) * in + k);
#pragma unroll
            for (int t = 0; t < T; t++) {
                float xv = x[(long)t * in + k];
                if (roundX) xv = __bfloat162float(__float2bfloat16_rn(xv));
#pragma unroll
                for (int r = 0; r < R; r++) acc[r][t] = fmaf(xv, wf[r], acc[r][t]);
            }
        }
    }

    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
#pragma unroll
    for (int r = 0; r < R; r++)
#pragma unroll
        for (int t = 0; t < T; t++) {
            float s = warp_sum(acc[r][t]);
            if (lane == 0) red[warp][r * T + t] = s;
        }
    __syncthreads();
    if (threadIdx.x < R * T) {
        int r = threadIdx.x / T, t = threadIdx.x % T, row = row0 + r;
        if (row < outDim) {
            float s = 0.f;
#pragma unroll
            for (int q = 0; q < WARPS; q++) s += red[q][threadIdx.x];
            s += bias_at(bias, biasType, row);
            if (act & 1) {
                s = fmaxf(s, 0.f);
                s *= s;
            }
            out[(long)t * outDim + row] = s;
        }
    }
}

// Up to three products of one input x in one launch (a layer's input projections): blocks
// [0, b0) compute out0 = x·w0ᵀ, the next ⌈d1 / R⌉ blocks out1, the rest out2; no bias. act as above.
template <int T, typename W>
__device__ void matmul_decode3(const float* x, const W* w0, float* out0, int d0, const W* w1, float* out1, int d1,
                               const W* w2, float* out2, int d2, int in, int act) {
    constexpr int R = DecodeRows<T>::value;
    const int b0 = (d0 + R - 1) / R, b1 = (d1 + R - 1) / R;
    int b = blockIdx.x;
    if (b < b0) {
        matmul_decode<T, W>(x, w0, nullptr, 0, out0, in, d0, act, b * R);
    } else if ((b -= b0) < b1) {
        matmul_decode<T, W>(x, w1, nullptr, 0, out1, in, d1, act, b * R);
    } else {
        matmul_decode<T, W>(x, w2, nullptr, 0, out2, in, d2, act, (b - b1) * R);
    }
}

#define MATMUL_DECODE_T(SFX, W, T)                                                                              \
    extern "C" __global__ void __launch_bounds__(MV_THREADS) matmul_decode_t##T##_##SFX(                       \
        const float* x, const W* w, const void* bias, int biasType, float* out, int in, int outDim, int act) {  \
        matmul_decode<T, W>(x, w, bias, biasType, out, in, outDim, act, blockIdx.x * DecodeRows<T>::value);         \
    }                                                                                                           \
    extern "C" __global__ void __launch_bounds__(MV_THREADS) matmul_decode3_t##T##_##SFX(                      \
        const float* x, const W* w0, float* out0, int d0, const W* w1, float* out1, int d1, const W* w2,        \
        float* out2, int d2, int in, int act) {                                                                 \
        matmul_decode3<T, W>(x, w0, out0, d0, w1, out1, d1, w2, out2, d2, in, act);                             \
    }
#define MATMUL_DECODE(SFX, W)   \
    MATMUL_DECODE_T(SFX, W, 1) \
    MATMUL_DECODE_T(SFX, W, 2) \
    MATMUL_DECODE_T(SFX, W, 3) \
    MATMUL_DECODE_T(SFX, W, 4) \
    MATMUL_DECODE_T(SFX, W, 5) \
    MATMUL_DECODE_T(SFX, W, 6) \
    MATMUL_DECODE_T(SFX, W, 7) \
    MATMUL_DECODE_T(SFX, W, 8)
HYSPEC_FOR_WEIGHT_TYPES(MATMUL_DECODE)

// ---- prefill-shaped, float32 SIMT ----
// Block tile 64 tokens × 64 outputs, k-steps of 16; 256 threads, each 4 tokens × 4 outputs.
// Grid (⌈out / 64⌉, ⌈T / 64⌉).

constexpr int SG_BM = 64, SG_BN = 64, SG_BK = 16, SG_PAD = 4;

template <typename W>
__device__ void matmul_simt(const float* __restrict__ x, const W* __restrict__ w, const void* bias, int biasType,
                            float* __restrict__ out, int T, int in, int outDim) {
    __shared__ __align__(16) float As[SG_BK][SG_BM + SG_PAD];   // [k][token]
    __shared__ __align__(16) float Bs[SG_BK][SG_BN + SG_PAD];   // [k][output]
    const int tid = threadIdx.x, tx = tid & 15, ty = tid >> 4;
    const int m0 = blockIdx.y * SG_BM, n0 = blockIdx.x * SG_BN;
    const int lk = tid & 15, lr = tid >> 4;   // loader: k column and first row
    float acc[4][4] = {};
    for (int k0 = 0; k0 < in; k0 += SG_BK) {
        int k = k0 + lk;
#pragma unroll
        for (int j = 0; j < 4; j++) {
            int r = lr + 16 * j;
            int m = m0 + r, n = n0 + r;
            As[lk][r] = m < T && k < in ? x[(long)m * in + k] : 0.f;
            Bs[lk][r] = n < outDim && k < in ? ld(w, (long)n * in + k) : 0.f;
        }
        __syncthreads();
#pragma unroll
        for (int kk = 0; kk < SG_BK; kk++) {
            float4 a = *reinterpret_cast<const float4*>(&As[kk][ty * 4]);
            float4 b = *reinterpret_cast<const float4*>(&Bs[kk][tx * 4]);
            float av[4] = {a.x, a.y, a.z, a.w}, bv[4] = {b.x, b.y, b.z, b.w};
#pragma unroll
            for (int i = 0; i < 4; i++)
#pragma unroll
                for (int j = 0; j < 4; j++) acc[i][j] = fmaf(av[i], bv[j], acc[i][j]);
        }
        __syncthreads();
    }
#pragma unroll
    for (int i = 0; i < 4; i++) {
        int m = m0 + ty * 4 + i;
        if (m >= T) break;
#pragma unroll
        for (int j = 0; j < 4; j++) {
            int n = n0 + tx * 4 + j;
            if (n < outDim) out[(long)m * outDim + n] = acc[i][j] + bias_at(bias, biasType, n);
        }
    }
}

#define MATMUL_SIMT(SFX, W)                                                                                    \
    extern "C" __global__ void __launch_bounds__(256) matmul_simt_##SFX(                                       \
        const float* x, const W* w, const void* bias, int biasType, float* out, int T, int in, int outDim) {   \
        matmul_simt<W>(x, w, bias, biasType, out, T, in, outDim);                                              \
    }
HYSPEC_FOR_WEIGHT_TYPES(MATMUL_SIMT)

// ---- prefill-shaped, bf16 tensor cores ----
// Block tile 128 tokens × 128 outputs, k-steps of 32, double-buffered in shared memory (global loads
// of the next step overlap the mma of this one). 8 warps as 2 (tokens) × 4 (outputs), each warp
// 64 × 32 = 4 × 4 mma tiles of m16n8. Shared rows are padded to 40 bf16 (80 bytes) so the eight row
// addresses of every ldmatrix fall in distinct banks. Requires in % 8 == 0 (whole 16-byte chunks).
// Grid (⌈out / 128⌉, ⌈T / 128⌉).

constexpr int TC_BM = 128, TC_BN = 128, TC_BK = 32, TC_LD = TC_BK + 8;

extern "C" __global__ void __launch_bounds__(256, 2) matmul_tc_bf16(const float* __restrict__ x,
                                                                 const __nv_bfloat16* __restrict__ w,
                                                                 const void* bias, int biasType,
                                                                 float* __restrict__ out, int T, int in,
                                                                 int outDim, float* __restrict__ partial,
                                                                 int kChunk) {
    // Split K (gridDim.z > 1, for products with too few output tiles to fill the device): block z sums
    // k ∈ [z·kChunk, (z+1)·kChunk) into partial[z] and matmul_splitk_reduce adds the slices in order.
    __shared__ __align__(16) __nv_bfloat16 As[2][TC_BM * TC_LD];   // [token][k], x rounded to bf16
    __shared__ __align__(16) __nv_bfloat16 Bs[2][TC_BN * TC_LD];   // [output][k]
    const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
    const int wm = warp >> 2, wn = warp & 3;
    const int m0 = blockIdx.y * TC_BM, n0 = blockIdx.x * TC_BN;
    const int kBegin = blockIdx.z * kChunk, kEnd = min(in, kBegin + kChunk);

    float acc[4][4][4];
#pragma unroll
    for (int i = 0; i < 4; i++)
#pragma unroll
        for (int j = 0; j < 4; j++)
#pragma unroll
            for (int e = 0; e < 4; e++) acc[i][j][e] = 0.f;

    // Staging registers: A 128 × 32 floats = 1024 float4 (4 per thread), B 128 × 32 bf16 = 512 uint4 (2 each).
    float4 ar[4];
    uint4 br[2];
    auto load = [&](int k0) {
#pragma unroll
        for (int j = 0; j < 4; j++) {
            int idx = tid + 256 * j, r = idx >> 3, k = k0 + (idx & 7) * 4, m = m0 + r;
            ar[j] = m < T && k < kEnd ? __ldg(reinterpret_cast<const float4*>(x + (long)m * in + k))
                                    : make_float4(0.f, 0.f, 0.f, 0.f);
        }
#pragma unroll
        for (int j = 0; j < 2; j++) {
            int idx = tid + 256 * j, r = idx >> 2, k = k0 + (idx & 3) * 8, n = n0 + r;
            br[j] = n < outDim && k < kEnd ? __ldg(reinterpret_cast<const uint4*>(w + (long)n * in + k))
                                         : make_uint4(0, 0, 0, 0);
        }
    };
    auto store = [&](int buf) {
#pragma unroll
        for (int j = 0; j < 4; j++) {
            int idx = tid + 256 * j, r = idx >> 3, k = (idx & 7) * 4;
            *reinterpret_cast<uint2*>(&As[buf][r * TC_LD + k]) =
                make_uint2(pack_bf16(ar[j].x, ar[j].y), pack_bf16(ar[j].z, ar[j].w));
        }
#pragma unroll
        for (int j = 0; j < 2; j++) {
            int idx = tid + 256 * j, r = idx >> 2, k = (idx & 3) * 8;
            *reinterpret_cast<uint4*>(&Bs[buf][r * TC_LD + k]) = br[j];
        }
    };

    const int kTiles = (kEnd - kBegin + TC_BK - 1) / TC_BK;
    load(kBegin);
    store(0);
    __syncthreads();
    for (int kt = 0; kt < kTiles; kt++) {
        const int buf = kt & 1;
        if (kt + 1 < kTiles) load(kBegin + (kt + 1) * TC_BK);
#pragma unroll
        for (int ks = 0; ks < TC_BK; ks += 16) {
            uint32_t af[4][4], bf[4][2];
#pragma unroll
            for (int mi = 0; mi < 4; mi++) {
                int r = wm * 64 + mi * 16 + (lane & 15), k = ks + (lane >> 4) * 8;
                ldmatrix_x4(af[mi], &As[buf][r * TC_LD + k]);
            }
#pragma unroll
            for (int nj = 0; nj < 2; nj++) {
                int mat = lane >> 3;
                int n = wn * 32 + nj * 16 + (mat >> 1) * 8 + (lane & 7), k = ks + (mat & 1) * 8;
                uint32_t q[4];
                ldmatrix_x4(q, &Bs[buf][n * TC_LD + k]);
                bf[2 * nj][0] = q[0];
                bf[2 * nj][1] = q[1];
                bf[2 * nj + 1][0] = q[2];
                bf[2 * nj + 1][1] = q[3];
            }
#pragma unroll
            for (int mi = 0; mi < 4; mi++)
#pragma unroll
                for (int ni = 0; ni < 4; ni++) mma_bf16(acc[mi][ni], af[mi], bf[ni]);
        }
        if (kt + 1 < kTiles) store(buf ^ 1);
        __syncthreads();
    }

#pragma unroll
    for (int mi = 0; mi < 4; mi++)
#pragma unroll
        for (int ni = 0; ni < 4; ni++) {
            int m = m0 + wm * 64 + mi * 16 + (lane >> 2);
            int n = n0 + wn * 32 + ni * 8 + (lane & 3) * 2;
#pragma unroll
            for (int h = 0; h < 2; h++) {
                int mm = m + 8 * h;
                if (mm >= T) continue;
#pragma unroll
                for (int e = 0; e < 2; e++) {
                    if (n + e < outDim) {
                        if (gridDim.z == 1) {
                            out[(long)mm * outDim + n + e] = acc[mi][ni][2 * h + e] + bias_at(bias, biasType, n + e);
                        } else {
                            partial[((long)blockIdx.z * T + mm) * outDim + n + e] = acc[mi][ni][2 * h + e];
                        }
                    }
                }
            }
        }
}

/** out = bias + Σ_z partial[z] over the split-K slices of matmul_tc_bf16, in slice order (deterministic). */
extern "C" __global__ void matmul_splitk_reduce(const float* __restrict__ partial, int splits, const void* bias,
                                                int biasType, float* __restrict__ out, long n, int outDim) {
    long i = (long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    float acc = 0.f;
    for (int z = 0; z < splits; z++) acc += partial[(long)z * n + i];
    out[i] = acc + bias_at(bias, biasType, (int)(i % outDim));
}
