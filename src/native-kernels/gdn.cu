// Gated DeltaNet: the sequential scan (state in place), the scan that writes the state after every
// token (intermediate-copy verify), replay of history rows (replay rollback) and the outputs of T
// tokens from a read-only state plus their history rows (replay verify). CpuBackend.gdnRun /
// gatedDeltaReplay are the reference.
//
// The delta rule separates per value column: for value index j, column S[:, j] (Dk entries) evolves
// on its own (δ_j = β(v_j − Σ_i S[i,j]·k_i), S[i,j] += k_i·δ_j, o_j = Σ_i S[i,j]·q_i). A block owns a
// tile of columns of one value head; inside it 32 "row groups" split the Dk rows (row i belongs to
// row group i mod 32, R = ceil(Dk/32) rows per thread). The column stays in registers across all
// tokens of the call, so the state is read once and (scan, replay) written once.
//
//   KV ([Hv, Dk, Dv], value contiguous): 512 threads = 16 columns × 32 row groups, the column index
//      fastest, so a warp reads two 64-byte runs of rows; Σ over rows = shuffle + shared memory.
//   VK ([Hv, Dv, Dk], key contiguous): 128 threads = 4 columns, one warp per column with the rows
//      along the lanes (128-byte runs); Σ over rows = warp shuffle.
//
// Scalars follow the CPU reference's rounding: exp / log1p / sqrt in double, rounded to float.
#include "common.cuh"

namespace {

constexpr int MODE_SCAN = 0;        // state read, updated, written back; outputs
constexpr int MODE_STATES = 1;      // state read only; states[t] written after every token; outputs
constexpr int MODE_REPLAY_OUT = 2;  // state read only; outputs and history rows written
constexpr int MODE_REPLAY = 3;      // inputs from history rows; state written back; no outputs

constexpr int TOKENS_STAGED = 32;   // tokens whose per-token scalars sit in shared memory at once
constexpr int RG = 32;              // row groups per column

template <bool KV>
struct Geo;

template <>
struct Geo<true> {
    static constexpr int CJ = 16, NT = 512, MIN_BLOCKS = 2;   // ≤ 64 registers: the grid fits in one wave
    __device__ static int col(int t) { return t & 15; }
    __device__ static int rg(int t) { return t >> 4; }
};

template <>
struct Geo<false> {
    static constexpr int CJ = 4, NT = 128, MIN_BLOCKS = 8;
    __device__ static int col(int t) { return t >> 5; }
    __device__ static int rg(int t) { return t & 31; }
};

// A weight element of runtime dtype (0 = f32, 1 = bf16, 2 = f16), widened to float.
__device__ __forceinline__ float ldw(const void* p, int dtype, int i) {
    switch (dtype) {
        case 1: return ld((const __nv_bfloat16*)p, i);
        case 2: return ld((const __half*)p, i);
        default: return ld((const float*)p, i);
    }
}

__device__ __forceinline__ float ref_sigmoid(float x) { return 1.f / (1.f + (float)exp(-(double)x)); }
__device__ __forceinline__ float ref_softplus(float x) { return x > 20.f ? x : (float)log1p(exp((double)x)); }
// (float)(1 / sqrt(Σx² + 1e−6)) · scale, as CpuBackend.l2normalize
__device__ __forceinline__ float ref_inv_norm(float ss, float scale) {
    return (float)(1.0 / sqrt((double)ss + 1e-6)) * scale;
}

// Σ of v over the 32 row groups of the calling thread's column; every thread gets its column's sum.
// KV: `buf` is one of two shared buffers of 16 warps × 16 columns, alternated by the caller, so a
// buffer is rewritten only after the other one's barrier.
template <bool KV>
__device__ __forceinline__ float column_sum(float v, float* buf) {
    if constexpr (!KV) {
        return warp_sum(v);
    } else {
        v += __shfl_xor_sync(0xffffffffu, v, 16);
        int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
        if (lane < 16) buf[warp * 16 + lane] = v;
        __syncthreads();
        int c = threadIdx.x & 15;
        float s = 0.f;
#pragma unroll
        for (int w = 0; w < 16; ++w) s += buf[w * 16 + c];
        return s;
    }
}

__device__ __forceinline__ float* pick(int t, float* p0, float* p1, float* p2, float* p3, float* p4, float* p5,
                                       float* p6, float* p7) {
    switch (t) {
        case 0: return p0;
        case 1: return p1;
        case 2: return p2;
        case 3: return p3;
        case 4: return p4;
        case 5: return p5;
        case 6: return p6;
        default: return p7;
    }
}

// grid (ceil(Dv / CJ), Hv), block NT. T tokens (for MODE_REPLAY: `count` history rows).
template <bool KV, int R, int MODE>
__device__ __forceinline__ void gdn_body(float* state, const float* __restrict__ qkv, const float* __restrict__ a,
                                         const float* __restrict__ b, const void* aLog, int aLogType,
                                         const void* dtBias, int dtBiasType, float* __restrict__ out,
                                         float* hist, float* s0, float* s1, float* s2, float* s3, float* s4,
                                         float* s5, float* s6, float* s7, int T, int Hk, int Hv, int Dk, int Dv,
                                         float qScale) {
    using G = Geo<KV>;
    constexpr int NW = G::NT / 32;
    __shared__ float red[2][KV ? 256 : 1];
    __shared__ float sInvQ[TOKENS_STAGED], sInvK[TOKENS_STAGED], sDecay[TOKENS_STAGED], sBeta[TOKENS_STAGED],
        sG[TOKENS_STAGED];

    const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
    const int c = G::col(tid), rg = G::rg(tid);
    const int h = blockIdx.y;
    const int j = blockIdx.x * G::CJ + c;
    const bool jv = j < Dv;
    const int per = Hv / Hk, kh = h / per;
    const int keyDim = Hk * Dk, valueDim = Hv * Dv;
    const long conv = 2L * keyDim + valueDim, hw = (long)keyDim + valueDim + 2L * Hv;
    // element (i, j) of this head's matrix sits at colBase + i·rowStride (colBase is within range
    // for every thread, also where j ≥ Dv, which never loads or stores)
    const long colBase = (long)h * Dk * Dv + (KV ? min(j, Dv - 1) : min(j, Dv - 1) * Dk);
    const int rowStride = KV ? Dv : 1;

    float S[R];
    {
        const float* col = state + colBase;
#pragma unroll
        for (int r = 0; r < R; ++r) {
            int i = rg + RG * r;
            S[r] = (jv && i < Dk) ? col[i * rowStride] : 0.f;
        }
    }

    // Raw per-token inputs of token t: k and q rows of this thread (q unused in replay), v_j, and for
    // replay g and β. Loaded one token ahead of their use, so their latency hides behind the work.
    auto fetch = [&](int t, float (&k)[R], float (&q)[R], float& v, float& g, float& beta) {
        if constexpr (MODE == MODE_REPLAY) {
            const float* hr = hist + (long)t * hw;
#pragma unroll
            for (int r = 0; r < R; ++r) {
                int i = rg + RG * r;
                k[r] = i < Dk ? hr[kh * Dk + i] : 0.f;
                q[r] = 0.f;
            }
            v = jv ? hr[keyDim + h * Dv + j] : 0.f;
            g = hr[keyDim + valueDim + h];
            beta = hr[keyDim + valueDim + Hv + h];
        } else {
            const float* row = qkv + (long)t * conv + (long)kh * Dk;   // q of this key head; k at + keyDim
#pragma unroll
            for (int r = 0; r < R; ++r) {
                int i = rg + RG * r;
                k[r] = i < Dk ? row[keyDim + i] : 0.f;
                q[r] = i < Dk ? row[i] : 0.f;
            }
            v = jv ? row[2 * keyDim - kh * Dk + h * Dv + j] : 0.f;
            g = 0.f;
            beta = 0.f;
        }
    };

    int nred = 0;
    for (int t0 = 0; t0 < T; t0 += TOKENS_STAGED) {
        const int tn = min(TOKENS_STAGED, T - t0);
        float kn[R], qn[R], vn, gn, bn;   // the next token's raw inputs
        fetch(t0, kn, qn, vn, gn, bn);
        if constexpr (MODE != MODE_REPLAY) {
            // Per-token scalars of this head: inverse L2 norms of q and k, decay, β (and g).
            for (int tt = warp; tt < tn; tt += NW) {
                const float* row = qkv + (long)(t0 + tt) * conv + (long)kh * Dk;
                float sq = 0.f, sk = 0.f;
                for (int i = lane; i < Dk; i += 32) {
                    float x = row[i], y = row[keyDim + i];
                    sq += x * x;
                    sk += y * y;
                }
                sq = warp_sum(sq);
                sk = warp_sum(sk);
                if (lane == 0) {
                    long th = (long)(t0 + tt) * Hv + h;
                    sInvQ[tt] = ref_inv_norm(sq, qScale);
                    sInvK[tt] = ref_inv_norm(sk, 1.f);
                    float g = -(float)exp((double)ldw(aLog, aLogType, h)) *
                              ref_softplus(a[th] + ldw(dtBias, dtBiasType, h));
                    sG[tt] = g;
                    sDecay[tt] = (float)exp((double)g);
                    sBeta[tt] = ref_sigmoid(b[th]);
                }
            }
            __syncthreads();
        }
        for (int tt = 0; tt < tn; ++tt) {
            const int t = t0 + tt;
            float kr[R], qr[R], v, decay, beta;
#pragma unroll
            for (int r = 0; r < R; ++r) {
                kr[r] = kn[r];
                qr[r] = qn[r];
            }
            v = vn;
            if constexpr (MODE == MODE_REPLAY) {
                decay = (float)exp((double)gn);
                beta = bn;
            } else {
                const float ik = sInvK[tt], iq = sInvQ[tt];
#pragma unroll
                for (int r = 0; r < R; ++r) {
                    kr[r] *= ik;
                    qr[r] *= iq;
                }
                decay = sDecay[tt];
                beta = sBeta[tt];
            }
            if (tt + 1 < tn) fetch(t + 1, kn, qn, vn, gn, bn);
            float p = 0.f;
#pragma unroll
            for (int r = 0; r < R; ++r) {
                S[r] *= decay;
                p += S[r] * kr[r];
            }
            const float sk = column_sum<KV>(p, red[nred++ & 1]);
            const float delta = (v - sk) * beta;
#pragma unroll
            for (int r = 0; r < R; ++r) S[r] += kr[r] * delta;
            if constexpr (MODE != MODE_REPLAY) {
                p = 0.f;
#pragma unroll
                for (int r = 0; r < R; ++r) p += S[r] * qr[r];
                const float o = column_sum<KV>(p, red[nred++ & 1]);
                if (rg == 0 && jv) out[(long)t * valueDim + h * Dv + j] = o;
            }
            if constexpr (MODE == MODE_STATES) {
                float* dst = pick(t, s0, s1, s2, s3, s4, s5, s6, s7) + colBase;
                if (jv) {
#pragma unroll
                    for (int r = 0; r < R; ++r) {
                        int i = rg + RG * r;
                        if (i < Dk) dst[i * rowStride] = S[r];
                    }
                }
            }
            if constexpr (MODE == MODE_REPLAY_OUT) {
                float* hr = hist + (long)t * hw;
                if (blockIdx.x == 0 && h % per == 0 && c == 0) {   // k, normalised, unscaled: one block per key head
#pragma unroll
                    for (int r = 0; r < R; ++r) {
                        int i = rg + RG * r;
                        if (i < Dk) hr[kh * Dk + i] = kr[r];
                    }
                }
                if (rg == 0 && jv) hr[keyDim + h * Dv + j] = v;
                if (blockIdx.x == 0 && tid == 0) {
                    hr[keyDim + valueDim + h] = sG[tt];
                    hr[keyDim + valueDim + Hv + h] = beta;
                }
            }
        }
        if constexpr (MODE != MODE_REPLAY) __syncthreads();   // before the next chunk's scalars overwrite these
    }

    if constexpr (MODE == MODE_SCAN || MODE == MODE_REPLAY) {
        float* col = state + colBase;
        if (jv) {
#pragma unroll
            for (int r = 0; r < R; ++r) {
                int i = rg + RG * r;
                if (i < Dk) col[i * rowStride] = S[r];
            }
        }
    }
}

}  // namespace

#define GDN_KERNEL(OP, MODE, LNAME, KV, R)                                                                         \
    extern "C" __global__ void __launch_bounds__(Geo<KV>::NT, Geo<KV>::MIN_BLOCKS) gdn_##OP##_##LNAME##_r##R(                            \
        float* state, const float* qkv, const float* a, const float* b, const void* aLog, int aLogType,           \
        const void* dtBias, int dtBiasType, float* out, float* hist, float* s0, float* s1, float* s2, float* s3,  \
        float* s4, float* s5, float* s6, float* s7, int T, int Hk, int Hv, int Dk, int Dv, float qScale) {        \
        gdn_body<KV, R, MODE>(state, qkv, a, b, aLog, aLogType, dtBias, dtBiasType, out, hist, s0, s1, s2, s3, s4, \
                              s5, s6, s7, T, Hk, Hv, Dk, Dv, qScale);                                              \
    }

#define GDN_ROWS(OP, MODE, LNAME, KV) \
    GDN_KERNEL(OP, MODE, LNAME, KV, 1) \
    GDN_KERNEL(OP, MODE, LNAME, KV, 2) \
    GDN_KERNEL(OP, MODE, LNAME, KV, 4) \
    GDN_KERNEL(OP, MODE, LNAME, KV, 8)

#define GDN_LAYOUTS(OP, MODE)         \
    GDN_ROWS(OP, MODE, kv, true)      \
    GDN_ROWS(OP, MODE, vk, false)

GDN_LAYOUTS(scan, MODE_SCAN)
GDN_LAYOUTS(states, MODE_STATES)
GDN_LAYOUTS(replay_out, MODE_REPLAY_OUT)
GDN_LAYOUTS(replay, MODE_REPLAY)
