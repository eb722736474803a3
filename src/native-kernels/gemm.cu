// The bf16 tensor-core GEMM of decode-batch, verify and prefill products (more than 8 rows):
// out[m, n] = Σ_k x[m, k] · w[n, k] (+ bias[n]), x float32 [M, K], w bf16 [N, K] row-major, out
// float32 [M, N]. Reference: CpuBackend.matmul (x rounded to bf16 here, products accumulated in
// float32). Dispatched by DenseKernels.tensorCoreGemm:
//   gemm_x_to_bf16       x rounded to bf16 once per product (not once per output tile);
//   gemm_bf16_{BM}x{BN}  block tile BM rows × BN outputs, k-steps of 64 through a STAGES-deep cp.async
//                        pipeline (16-byte copies straight into shared memory, no staging registers),
//                        fragments by ldmatrix, mma.sync m16n8k16 bf16 → f32;
//   gemm_splitk_reduce   out = bias + Σ_z partial[z], in slice order, when K is split over blocks.
// Grid (⌈M / BM⌉, ⌈N / BN⌉, splits): the row tiles that share a weight tile are neighbours in launch
// order, so the second read of a weight tile usually hits L2. Needs K % 8 == 0 (whole 16-byte chunks);
// tensors start on 256-byte boundaries, so every chunk is 16-byte aligned.
#include "tensor_core.cuh"

namespace {

constexpr int GK = 64;          // k per pipeline stage: 128 bytes of every weight row, whole L2 lines
constexpr int GLD = GK + 8;     // shared row length in bf16: 144 bytes, so the 8 row addresses of an
                                // ldmatrix fall in distinct banks and every 16-byte chunk stays aligned
constexpr int GCH = GK / 8;     // 16-byte chunks per row and stage

// 16 bytes global → shared, bypassing L1; zero-filled when !valid (src then only needs to be mapped).
__device__ __forceinline__ void cp_async16(void* dst, const void* src, bool valid) {
    uint32_t s = (uint32_t)__cvta_generic_to_shared(dst);
    int bytes = valid ? 16 : 0;
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(s), "l"(src), "r"(bytes));
}
__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::); }
template <int N>
__device__ __forceinline__ void cp_async_wait() {
    asm volatile("cp.async.wait_group %0;\n" ::"n"(N));
}

// One block: BM rows × BN outputs over k ∈ [z·kChunk, min(K, (z+1)·kChunk)). WARPS_M × WARPS_N warps,
// each (BM / WARPS_M) × (BN / WARPS_N). With gridDim.z > 1 the block writes its slice to
// partial[z] (no bias) for gemm_splitk_reduce.
template <int BM, int BN, int WARPS_M, int WARPS_N, int STAGES>
__device__ __forceinline__ void gemm_bf16(const __nv_bfloat16* __restrict__ a, const __nv_bfloat16* __restrict__ w,
                                          const void* bias, int biasType, float* __restrict__ out, int M, int K,
                                          int N, float* __restrict__ partial, int kChunk) {
    constexpr int THREADS = 32 * WARPS_M * WARPS_N;
    constexpr int TM = BM / WARPS_M, TN = BN / WARPS_N, MI = TM / 16, NI = TN / 8;
    static_assert(TM % 16 == 0 && TN % 16 == 0, "warp tile of whole m16 × n16 pieces");
    static_assert((BM * GCH) % THREADS == 0 && (BN * GCH) % THREADS == 0, "whole chunks per thread");
    extern __shared__ __align__(16) unsigned char gemm_smem[];
    __nv_bfloat16* As = reinterpret_cast<__nv_bfloat16*>(gemm_smem);   // [STAGES][BM][GLD]
    __nv_bfloat16* Bs = As + STAGES * BM * GLD;                           // [STAGES][BN][GLD]
    const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
    const int wm = warp / WARPS_N, wn = warp % WARPS_N;
    const int m0 = blockIdx.x * BM, n0 = blockIdx.y * BN;
    const int kBegin = blockIdx.z * kChunk, kEnd = min(K, kBegin + kChunk);
    const int kTiles = kEnd > kBegin ? (kEnd - kBegin + GK - 1) / GK : 0;

    auto load = [&](int slot, int kt) {
        const int k0 = kBegin + kt * GK;
        __nv_bfloat16* as = As + slot * BM * GLD;
        __nv_bfloat16* bs = Bs + slot * BN * GLD;
#pragma unroll
        for (int j = 0; j < BM * GCH / THREADS; j++) {
            int idx = tid + j * THREADS, r = idx / GCH, c = (idx % GCH) * 8, m = m0 + r, k = k0 + c;
            bool ok = m < M && k < kEnd;
            cp_async16(as + r * GLD + c, ok ? a + (long)m * K + k : a, ok);
        }
#pragma unroll
        for (int j = 0; j < BN * GCH / THREADS; j++) {
            int idx = tid + j * THREADS, r = idx / GCH, c = (idx % GCH) * 8, n = n0 + r, k = k0 + c;
            bool ok = n < N && k < kEnd;
            cp_async16(bs + r * GLD + c, ok ? w + (long)n * K + k : w, ok);
        }
    };

    float acc[MI][NI][4];
#pragma unroll
    for (int i = 0; i < MI; i++)
#pragma unroll
        for (int j = 0; j < NI; j++)
#pragma unroll
            for (int e = 0; e < 4; e++) acc[i][j][e] = 0.f;

#pragma unroll
    for (int s = 0; s < STAGES - 1; s++) {
        if (s < kTiles) load(s, s);
        cp_async_commit();
    }
    for (int kt = 0; kt < kTiles; kt++) {
        cp_async_wait<STAGES - 2>();   // stage kt has landed (for this thread's copies) ...
        __syncthreads();               // ... for every thread's, and stage kt − 1 is no longer read
        {
            int next = kt + STAGES - 1;
            if (next < kTiles) load(next % STAGES, next);
            cp_async_commit();
        }
        const __nv_bfloat16* as = As + (kt % STAGES) * BM * GLD;
        const __nv_bfloat16* bs = Bs + (kt % STAGES) * BN * GLD;
#pragma unroll
        for (int ks = 0; ks < GK; ks += 16) {
            uint32_t af[MI][4], bf[NI][2];
#pragma unroll
            for (int mi = 0; mi < MI; mi++) {
                int r = wm * TM + mi * 16 + (lane & 15), k = ks + (lane >> 4) * 8;
                ldmatrix_x4(af[mi], as + r * GLD + k);
            }
#pragma unroll
            for (int nj = 0; nj < NI / 2; nj++) {
                int mat = lane >> 3;
                int n = wn * TN + nj * 16 + (mat >> 1) * 8 + (lane & 7), k = ks + (mat & 1) * 8;
                uint32_t q[4];
                ldmatrix_x4(q, bs + n * GLD + k);
                bf[2 * nj][0] = q[0];
                bf[2 * nj][1] = q[1];
                bf[2 * nj + 1][0] = q[2];
                bf[2 * nj + 1][1] = q[3];
            }
#pragma unroll
            for (int mi = 0; mi < MI; mi++)
#pragma unroll
                for (int ni = 0; ni < NI; ni++) mma_bf16(acc[mi][ni], af[mi], bf[ni]);
        }
    }
    cp_async_wait<0>();

    const bool split = gridDim.z > 1;
    const bool pairs = (N & 1) == 0;   // float2 stores: n is even, so 8-byte aligned when N is even
#pragma unroll
    for (int mi = 0; mi < MI; mi++)
#pragma unroll
        for (int ni = 0; ni < NI; ni++) {
            int m = m0 + wm * TM + mi * 16 + (lane >> 2);
            int n = n0 + wn * TN + ni * 8 + (lane & 3) * 2;
            if (n >= N) continue;
#pragma unroll
            for (int h = 0; h < 2; h++) {
                int mm = m + 8 * h;
                if (mm >= M) continue;
                float v0 = acc[mi][ni][2 * h], v1 = acc[mi][ni][2 * h + 1];
                float* dst;
                if (split) {
                    dst = partial + ((long)blockIdx.z * M + mm) * N;
                } else {
                    dst = out + (long)mm * N;
                    v0 += bias_at(bias, biasType, n);
                    if (n + 1 < N) v1 += bias_at(bias, biasType, n + 1);
                }
                if (pairs) {
                    *reinterpret_cast<float2*>(dst + n) = make_float2(v0, v1);
                } else {
                    dst[n] = v0;
                    if (n + 1 < N) dst[n + 1] = v1;
                }
            }
        }
}

}  // namespace

/** xb = bf16(x), n4 groups of 4 values (M·K with K % 8 == 0). */
extern "C" __global__ void gemm_x_to_bf16(const float4* __restrict__ x, uint2* __restrict__ xb, long n4) {
    for (long i = (long)blockIdx.x * blockDim.x + threadIdx.x; i < n4; i += (long)gridDim.x * blockDim.x) {
        float4 v = __ldg(x + i);
        xb[i] = make_uint2(pack_bf16(v.x, v.y), pack_bf16(v.z, v.w));
    }
}

#define GEMM_BF16(BM, BN, WARPS_M, WARPS_N, STAGES, MIN_BLOCKS)                                                   \
    extern "C" __global__ void __launch_bounds__(32 * WARPS_M * WARPS_N, MIN_BLOCKS) gemm_bf16_##BM##x##BN(         \
        const __nv_bfloat16* a, const __nv_bfloat16* w, const void* bias, int biasType, float* out, int M, int K, \
        int N, float* partial, int kChunk) {                                                                      \
        gemm_bf16<BM, BN, WARPS_M, WARPS_N, STAGES>(a, w, bias, biasType, out, M, K, N, partial, kChunk);         \
    }
// Shared memory STAGES · (BM + BN) · 144 bytes; DenseKernels.GemmTile mirrors these parameters.
GEMM_BF16(64, 128, 2, 2, 4, 2)    // 128 threads, warp 32 × 64; 108 KiB, 2 blocks per SM
GEMM_BF16(128, 128, 2, 4, 3, 2)   // 256 threads, warp 64 × 32; 108 KiB, 2 blocks per SM
GEMM_BF16(128, 256, 2, 4, 3, 1)   // 256 threads, warp 64 × 64; 162 KiB, 1 block per SM

/** out = bias + Σ_z partial[z] (z = 0, 1, … in order: deterministic), float4 groups; N % 4 == 0. */
extern "C" __global__ void gemm_splitk_reduce(const float4* __restrict__ partial, int splits, const void* bias,
                                              int biasType, float4* __restrict__ out, long n4, int N) {
    long i = (long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n4) return;
    float4 s = __ldg(partial + i);
    for (int z = 1; z < splits; z++) {
        float4 p = __ldg(partial + (long)z * n4 + i);
        s.x += p.x;
        s.y += p.y;
        s.z += p.z;
        s.w += p.w;
    }
    if (biasType != 0) {
        int n = (int)((i * 4) % N);
        s.x += bias_at(bias, biasType, n);
        s.y += bias_at(bias, biasType, n + 1);
        s.z += bias_at(bias, biasType, n + 2);
        s.w += bias_at(bias, biasType, n + 3);
    }
    out[i] = s;
}
