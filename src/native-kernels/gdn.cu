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

constexpr int TOKENS_STAGED = 16;   // tokens whose inputs sit in shared memory at once
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
// heads = Hk | Hv << 16, dims = Dk | Dv << 16, types = aLog dtype | dtBias dtype << 8.
//
// Per chunk of up to TOKENS_STAGED tokens, a staging phase loads every input the chunk needs into
// shared memory at once (in flight together with the state's loads): k and q L2-normalised (q
// scaled), v of the block's columns, decay e^g and β, the scalars computed in parallel across warps
// and lanes; replay_out writes the history rows there too. The token loop then only reads shared
// memory and reduces over rows (one Σ per token for replay, two otherwise).
template <bool KV, int R, int MODE>
__device__ __forceinline__ void gdn_body(float* state, const float* __restrict__ qkv, const float* __restrict__ a,
                                         const float* __restrict__ b, const void* aLog, const void* dtBias,
                                         float* __restrict__ out, float* hist, float* s0, float* s1, float* s2,
                                         float* s3, float* s4, float* s5, float* s6, float* s7, int T, int heads,
                                         int dims, int types) {
    using G = Geo<KV>;
    constexpr int NW = G::NT / 32;
    constexpr int DKMAX = RG * R;
    constexpr bool Q = MODE != MODE_REPLAY;
    __shared__ float red[2][KV ? 256 : 1];
    __shared__ float sK[TOKENS_STAGED][DKMAX];
    __shared__ float sQ[Q ? TOKENS_STAGED : 1][Q ? DKMAX : 1];
    __shared__ float sV[TOKENS_STAGED][G::CJ];
    __shared__ float sDecay[TOKENS_STAGED], sBeta[TOKENS_STAGED];

    const int Hk = heads & 0xffff, Hv = heads >> 16, Dk = dims & 0xffff, Dv = dims >> 16;
    const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
    const int c = G::col(tid), rg = G::rg(tid);
    const int h = blockIdx.y;
    const int j0 = blockIdx.x * G::CJ;
    const int j = j0 + c;
    const bool jv = j < Dv;
    const int per = Hv / Hk, kh = h / per;
    const int keyDim = Hk * Dk, valueDim = Hv * Dv;
    const long conv = 2L * keyDim + valueDim, hw = (long)keyDim + valueDim + 2L * Hv;
    // element (i, j) of this head's matrix sits at colBase + i·rowStride (colBase is within range
    // for every thread, also where j ≥ Dv, which never loads or stores)
    const long colBase = (long)h * Dk * Dv + (KV ? min(j, Dv - 1) : min(j, Dv - 1) * Dk);
    const int rowStride = KV ? Dv : 1;
    // the block that writes the history's k rows of key head kh, and g and β of head h
    const bool histK = MODE == MODE_REPLAY_OUT && blockIdx.x == 0 && h % per == 0;
    const bool histScalars = MODE == MODE_REPLAY_OUT && blockIdx.x == 0;

    float S[R];
    {
        const float* col = state + colBase;
#pragma unroll
        for (int r = 0; r < R; ++r) {
            int i = rg + RG * r;
            S[r] = (jv && i < Dk) ? col[i * rowStride] : 0.f;
        }
    }

    int nred = 0;
    for (int t0 = 0; t0 < T; t0 += TOKENS_STAGED) {
        const int tn = min(TOKENS_STAGED, T - t0);
        // ---- staging ----
        for (int tt = warp; tt < tn; tt += NW) {
            const int t = t0 + tt;
            if constexpr (MODE == MODE_REPLAY) {
                const float* hr = hist + (long)t * hw;
                for (int i = lane; i < Dk; i += 32) sK[tt][i] = hr[kh * Dk + i];
                if (lane == 0) sDecay[tt] = (float)exp((double)hr[keyDim + valueDim + h]);
                if (lane == 1) sBeta[tt] = hr[keyDim + valueDim + Hv + h];
            } else {
                const float* row = qkv + (long)t * conv + (long)kh * Dk;   // q; k at + keyDim
                float xq[R], xk[R];
                float sq = 0.f, sk = 0.f;
#pragma unroll
                for (int r = 0; r < R; ++r) {
                    int i = lane + RG * r;
                    xq[r] = i < Dk ? row[i] : 0.f;
                    xk[r] = i < Dk ? row[keyDim + i] : 0.f;
                    sq += xq[r] * xq[r];
                    sk += xk[r] * xk[r];
                }
                const long th = (long)t * Hv + h;
                float sc = 0.f;   // lane 0: g (then e^g), lane 1: β
                if (lane == 0) {
                    const float aLogH = ldw(aLog, types & 0xff, h), bias = ldw(dtBias, (types >> 8) & 0xff, h);
                    sc = -(float)exp((double)aLogH) * ref_softplus(a[th] + bias);
                } else if (lane == 1) {
                    sc = ref_sigmoid(b[th]);
                }
                sq = warp_sum(sq);
                sk = warp_sum(sk);
                const float iq = ref_inv_norm(sq, (float)(1.0 / sqrt((double)Dk)));   // q scaled by Dk^−½
                const float ik = ref_inv_norm(sk, 1.f);
                float* hr = hist + (long)t * hw;
#pragma unroll
                for (int r = 0; r < R; ++r) {
                    int i = lane + RG * r;
                    if (i < Dk) {
                        sQ[tt][i] = xq[r] * iq;
                        sK[tt][i] = xk[r] * ik;
                        if (histK) hr[kh * Dk + i] = xk[r] * ik;
                    }
                }
                if (lane == 0) {
                    sDecay[tt] = (float)exp((double)sc);
                    if (histScalars) hr[keyDim + valueDim + h] = sc;
                } else if (lane == 1) {
                    sBeta[tt] = sc;
                    if (histScalars) hr[keyDim + valueDim + Hv + h] = sc;
                }
            }
        }
        // v of the block's columns
        for (int e = tid; e < tn * G::CJ; e += G::NT) {
            const int tt = e / G::CJ, cc = e % G::CJ, jj = j0 + cc, t = t0 + tt;
            float v = 0.f;
            if (jj < Dv) {
                if constexpr (MODE == MODE_REPLAY) {
                    v = hist[(long)t * hw + keyDim + h * Dv + jj];
                } else {
                    v = qkv[(long)t * conv + 2 * keyDim + h * Dv + jj];
                    if (MODE == MODE_REPLAY_OUT) hist[(long)t * hw + keyDim + h * Dv + jj] = v;
                }
            }
            sV[tt][cc] = v;
        }
        __syncthreads();

        // ---- tokens ----
        for (int tt = 0; tt < tn; ++tt) {
            const int t = t0 + tt;
            const float decay = sDecay[tt], beta = sBeta[tt], v = sV[tt][c];
            float kr[R];
            float p = 0.f;
#pragma unroll
            for (int r = 0; r < R; ++r) {
                int i = rg + RG * r;
                kr[r] = i < Dk ? sK[tt][i] : 0.f;
                S[r] *= decay;
                p += S[r] * kr[r];
            }
            const float sk = column_sum<KV>(p, red[nred++ & 1]);
            const float delta = (v - sk) * beta;
#pragma unroll
            for (int r = 0; r < R; ++r) S[r] += kr[r] * delta;
            if constexpr (Q) {
                p = 0.f;
#pragma unroll
                for (int r = 0; r < R; ++r) {
                    int i = rg + RG * r;
                    p += S[r] * (i < Dk ? sQ[tt][i] : 0.f);
                }
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
        }
        __syncthreads();   // before the next chunk's staging overwrites shared memory
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

#define GDN_ENTRY(NAME, KV, R) extern "C" __global__ void __launch_bounds__(Geo<KV>::NT, Geo<KV>::MIN_BLOCKS) NAME

// Scan (state in place) and replay outputs: 12 arguments.
#define GDN_QKV_KERNEL(OP, MODE, LNAME, KV, R)                                                                  \
    GDN_ENTRY(gdn_##OP##_##LNAME##_r##R, KV, R)(float* state, const float* qkv, const float* a, const float* b, \
                                               const void* aLog, const void* dtBias, float* out, float* hist,  \
                                               int T, int heads, int dims, int types) {                        \
        gdn_body<KV, R, MODE>(state, qkv, a, b, aLog, dtBias, out, hist, nullptr, nullptr, nullptr, nullptr,    \
                              nullptr, nullptr, nullptr, nullptr, T, heads, dims, types);                      \
    }

// Scan writing the state after each of up to 8 tokens to s0 … s7.
#define GDN_STATES_KERNEL(LNAME, KV, R)                                                                         \
    GDN_ENTRY(gdn_states_##LNAME##_r##R, KV, R)(float* state, const float* qkv, const float* a, const float* b,  \
                                               const void* aLog, const void* dtBias, float* out, float* s0,    \
                                               float* s1, float* s2, float* s3, float* s4, float* s5,          \
                                               float* s6, float* s7, int T, int heads, int dims, int types) {  \
        gdn_body<KV, R, MODE_STATES>(state, qkv, a, b, aLog, dtBias, out, nullptr, s0, s1, s2, s3, s4, s5, s6,  \
                                     s7, T, heads, dims, types);                                               \
    }

// Replay of `count` history rows: 5 arguments.
#define GDN_REPLAY_KERNEL(LNAME, KV, R)                                                                         \
    GDN_ENTRY(gdn_replay_##LNAME##_r##R, KV, R)(float* state, float* hist, int count, int heads, int dims) {    \
        gdn_body<KV, R, MODE_REPLAY>(state, nullptr, nullptr, nullptr, nullptr, nullptr, nullptr, hist, nullptr, \
                                     nullptr, nullptr, nullptr, nullptr, nullptr, nullptr, nullptr, count,     \
                                     heads, dims, 0);                                                          \
    }

#define GDN_ALL(LNAME, KV, R)                              \
    GDN_QKV_KERNEL(scan, MODE_SCAN, LNAME, KV, R)           \
    GDN_QKV_KERNEL(replay_out, MODE_REPLAY_OUT, LNAME, KV, R) \
    GDN_STATES_KERNEL(LNAME, KV, R)                        \
    GDN_REPLAY_KERNEL(LNAME, KV, R)

#define GDN_ROWS(LNAME, KV) \
    GDN_ALL(LNAME, KV, 1)   \
    GDN_ALL(LNAME, KV, 2)   \
    GDN_ALL(LNAME, KV, 4)   \
    GDN_ALL(LNAME, KV, 8)

GDN_ROWS(kv, true)
GDN_ROWS(vk, false)
