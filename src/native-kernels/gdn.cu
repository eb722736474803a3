// Gated DeltaNet: the sequential scan (state in place), the scan that writes the state after every
// token (intermediate-copy verify), replay of history rows (replay rollback), the outputs of T
// tokens from a read-only state plus their history rows (replay verify), and the batched forms of
// the generate-row operations: one launch for R rows of T tokens, per-row addresses and counts read
// from staged device tables (Backend's "batched generate rows"). CpuBackend.gdnRun /
// gatedDeltaReplay are the reference.
//
// The delta rule separates per value column: for value index j, column S[:, j] (Dk entries) evolves
// on its own (δ_j = β(v_j − Σ_i S[i,j]·k_i), S[i,j] += k_i·δ_j, o_j = Σ_i S[i,j]·q_i). A block owns a
// tile of columns of one value head; inside it 32 "row groups" split the Dk rows (row i belongs to
// row group i mod 32, R = ceil(Dk/32) rows per thread), and each thread holds CPT columns (the
// batched kernels take 2 where the batch is large: two independent chains per reduction). The
// columns stay in registers across all tokens of a row, so the state is read once and (scan,
// replay) written once.
//
//   KV ([Hv, Dk, Dv], value contiguous): 512 threads = 16 columns × 32 row groups, the column index
//      fastest, so a warp reads two 64-byte runs of rows; Σ over rows = shuffle + shared memory.
//   VK ([Hv, Dv, Dk], key contiguous): 128 threads = 4 columns, one warp per column with the rows
//      along the lanes (128-byte runs); Σ over rows = warp shuffle.
//
// A row's work is a list of "steps": first `count` history rows replayed (replay, replay verify),
// then the T tokens of qkv (everything but replay). Replay verify writes S(L) back when it reaches
// the first token, and keeps going on chip without writing it again.
//
// Rows: grid (column tiles, Hv, Z); block z runs rows z, z + Z, … in turn. Each thread copies its
// own state elements into shared memory with cp.async (no barrier needed: it reads back only what it
// copied), the next row's while it computes the current one, so with Z < R the state loads overlap
// the arithmetic. Z depends only on R and the shapes (GdnKernels), so a captured step replays.
//
// Scalars follow the CPU reference's rounding: exp / log1p / sqrt in double, rounded to float.
#include "common.cuh"

namespace {

constexpr int MODE_SCAN = 0;        // tokens; state updated and written back; outputs
constexpr int MODE_STATES = 1;      // tokens; state read only; the state after every token written; outputs
constexpr int MODE_REPLAY_OUT = 2;  // tokens; state read only; outputs and history rows written
constexpr int MODE_REPLAY = 3;      // history rows replayed; state written back; no outputs
constexpr int MODE_VERIFY = 4;      // history rows replayed, S(L) written back, then as MODE_REPLAY_OUT

constexpr int TOKENS_STAGED = 16;   // steps whose inputs sit in shared memory at once
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

__device__ __forceinline__ void cp_async4(float* dst, const float* src) {
    unsigned d = (unsigned)__cvta_generic_to_shared(dst);
    asm volatile("cp.async.ca.shared.global [%0], [%1], 4;\n" ::"r"(d), "l"(src) : "memory");
}

__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::: "memory"); }

template <int N>
__device__ __forceinline__ void cp_async_wait() {
    asm volatile("cp.async.wait_group %0;\n" ::"n"(N) : "memory");
}

// Σ of v[k] over the 32 row groups of the calling thread's columns; every thread gets its columns'
// sums. KV: `buf` is one of two shared buffers of 16 warps × CPT × 16 columns, alternated by the
// caller, so a buffer is rewritten only after the other one's barrier.
template <bool KV, int CPT>
__device__ __forceinline__ void column_sums(float (&v)[CPT], float* buf) {
    if constexpr (!KV) {
#pragma unroll
        for (int o = 16; o > 0; o >>= 1) {
#pragma unroll
            for (int k = 0; k < CPT; ++k) v[k] += __shfl_xor_sync(0xffffffffu, v[k], o);
        }
    } else {
        int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
#pragma unroll
        for (int k = 0; k < CPT; ++k) {
            v[k] += __shfl_xor_sync(0xffffffffu, v[k], 16);
            if (lane < 16) buf[(warp * CPT + k) * 16 + lane] = v[k];
        }
        __syncthreads();
        int c = threadIdx.x & 15;
#pragma unroll
        for (int k = 0; k < CPT; ++k) {
            float s = 0.f;
#pragma unroll
            for (int w = 0; w < 16; ++w) s += buf[(w * CPT + k) * 16 + c];
            v[k] = s;
        }
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

// What one row reads and writes.
struct RowIo {
    float* state;          // [Hv, Dk, Dv] (KV) or [Hv, Dv, Dk] (VK)
    const float* qkv;      // [T, 2·Hk·Dk + Hv·Dv]
    const float* a;        // [T, Hv]
    const float* b;        // [T, Hv]
    float* out;            // [T, Hv·Dv]
    const float* histIn;   // [≥count, Hk·Dk + Hv·Dv + 2·Hv]: the rows replayed
    float* histOut;        // [≥T, same width]: this call's tokens' history rows
    int count;             // history rows replayed before the tokens
};

// The per-row kernels' one row, from their arguments; scan-states writes up to 8 states s0 … s7.
struct OneRow {
    RowIo io;
    float *s0, *s1, *s2, *s3, *s4, *s5, *s6, *s7;
    __device__ const float* stateOf(int) const { return io.state; }
    __device__ RowIo at(int) const { return io; }
    __device__ float* after(int, int t) const { return pick(t, s0, s1, s2, s3, s4, s5, s6, s7); }
};

// The batched kernels' rows: token inputs stacked [R·T, ·], per-row tensors through staged tables.
struct RowTable {
    float* const* states;          // [R]
    float* const* scratch;         // [R·T]: row r's state after token t at r·T + t (scan-states)
    const float* const* previous;  // [R] (replay verify)
    const int* counts;             // [R] (replay verify)
    float* const* next;            // [R] (replay verify)
    const float* qkv;
    const float* a;
    const float* b;
    float* out;
    int T, hv, conv, valueDim;

    __device__ const float* stateOf(int r) const { return states[r]; }
    __device__ RowIo at(int r) const {
        const long t0 = (long)r * T;
        RowIo io;
        io.state = states[r];
        io.qkv = qkv + t0 * conv;
        io.a = a + t0 * hv;
        io.b = b + t0 * hv;
        io.out = out + t0 * valueDim;
        io.histIn = previous != nullptr ? previous[r] : nullptr;
        io.histOut = next != nullptr ? next[r] : nullptr;
        io.count = counts != nullptr ? counts[r] : 0;
        return io;
    }
    __device__ float* after(int r, int t) const { return scratch[(long)r * T + t]; }
};

// grid (ceil(Dv / (CJ·CPT)), Hv, Z), block NT, dynamic shared memory buffers × CPT × R × NT floats
// (buffers = 2 when Z < nRows, else 1). T tokens of qkv per row (MODE_REPLAY: none).
// heads = Hk | Hv << 16, dims = Dk | Dv << 16, types = aLog dtype | dtBias dtype << 8.
//
// Per chunk of up to TOKENS_STAGED steps, a staging phase loads every input the chunk needs into
// shared memory at once (in flight together with the state's loads): k (and q) L2-normalised (q
// scaled) or a history row's k, v of the block's columns, decay e^g and β, the scalars computed in
// parallel across warps and lanes; history rows of tokens are written there too. The step loop then
// only reads shared memory and reduces over rows (one Σ per replayed row, two per token).
template <bool KV, int R, int CPT, int MODE, class Rows>
__device__ __forceinline__ void gdn_rows(const Rows& rows, int nRows, int T, const void* aLog, const void* dtBias,
                                         int heads, int dims, int types) {
    using G = Geo<KV>;
    constexpr int NW = G::NT / 32;
    constexpr int DKMAX = RG * R;
    constexpr int CW = G::CJ * CPT;   // columns per block
    constexpr bool REPLAYS = MODE == MODE_REPLAY || MODE == MODE_VERIFY;
    constexpr bool TOKENS = MODE != MODE_REPLAY;
    constexpr bool HIST_OUT = MODE == MODE_REPLAY_OUT || MODE == MODE_VERIFY;
    __shared__ float red[2][KV ? NW * CPT * 16 : 1];
    __shared__ float sK[TOKENS_STAGED][DKMAX];
    __shared__ float sQ[TOKENS ? TOKENS_STAGED : 1][TOKENS ? DKMAX : 1];
    __shared__ float sV[TOKENS_STAGED][CW];
    __shared__ float sDecay[TOKENS_STAGED], sBeta[TOKENS_STAGED];
    extern __shared__ float sState[];   // [buffers][CPT][R][NT]

    const int Hk = heads & 0xffff, Hv = heads >> 16, Dk = dims & 0xffff, Dv = dims >> 16;
    const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
    const int c = G::col(tid), rg = G::rg(tid);
    const int h = blockIdx.y;
    const int j0 = blockIdx.x * CW;
    const int per = Hv / Hk, kh = h / per;
    const int keyDim = Hk * Dk, valueDim = Hv * Dv;
    const long conv = 2L * keyDim + valueDim, hw = (long)keyDim + valueDim + 2L * Hv;
    const int rowStride = KV ? Dv : 1;
    // the block that writes the history's k rows of key head kh, and g and β of head h
    const bool histK = HIST_OUT && blockIdx.x == 0 && h % per == 0;
    const bool histScalars = HIST_OUT && blockIdx.x == 0;
    // element (i, j) of this head's matrix sits at colBase(k) + i·rowStride for the thread's column
    // j = j0 + c + CJ·k (colBase is within range for every thread, also where j ≥ Dv, which never
    // loads or stores)
    auto column = [&](int k) { return j0 + c + G::CJ * k; };
    auto colBase = [&](int k) {
        const int j = min(column(k), Dv - 1);
        return h * Dk * Dv + (KV ? j : j * Dk);
    };
    float* mine = sState + tid;   // element (buffer, k, r) of this thread at mine[((buffer·CPT + k)·R + r)·NT]
    auto prefetch = [&](const float* state, int buffer) {
#pragma unroll
        for (int k = 0; k < CPT; ++k) {
            if (column(k) < Dv) {
                const float* col = state + colBase(k);
#pragma unroll
                for (int r = 0; r < R; ++r) {
                    const int i = rg + RG * r;
                    if (i < Dk) cp_async4(mine + ((buffer * CPT + k) * R + r) * G::NT, col + i * rowStride);
                }
            }
        }
        cp_async_commit();
    };
    float S[CPT][R];
    auto store = [&](float* state) {
#pragma unroll
        for (int k = 0; k < CPT; ++k) {
            if (column(k) < Dv) {
                float* col = state + colBase(k);
#pragma unroll
                for (int r = 0; r < R; ++r) {
                    const int i = rg + RG * r;
                    if (i < Dk) col[i * rowStride] = S[k][r];
                }
            }
        }
    };

    const int step = gridDim.z;
    int row = blockIdx.z;
    if (row >= nRows) return;
    prefetch(rows.stateOf(row), 0);
    int nred = 0;
    for (int it = 0; row < nRows; row += step, ++it) {
        const bool more = row + step < nRows;
        const float* nextState = more ? rows.stateOf(row + step) : nullptr;
        const RowIo io = rows.at(row);
        const int count = REPLAYS ? io.count : 0;
        const int n = count + (TOKENS ? T : 0);
        const int buffer = it & 1;
        if (n == 0) {   // nothing to do for this row; its state copy must land before the buffer is reused
            cp_async_wait<0>();
            if (more) prefetch(nextState, buffer ^ 1);
            continue;
        }
        for (int e0 = 0; e0 < n; e0 += TOKENS_STAGED) {
            const int tn = min(TOKENS_STAGED, n - e0);
            // ---- staging ----
            for (int tt = warp; tt < tn; tt += NW) {
                const int e = e0 + tt;
                if (REPLAYS && e < count) {
                    const float* hr = io.histIn + (long)e * hw;
                    for (int i = lane; i < Dk; i += 32) sK[tt][i] = hr[kh * Dk + i];
                    if (lane == 0) sDecay[tt] = (float)exp((double)hr[keyDim + valueDim + h]);
                    if (lane == 1) sBeta[tt] = hr[keyDim + valueDim + Hv + h];
                } else if constexpr (TOKENS) {
                    const int t = e - count;
                    const float* x = io.qkv + (long)t * conv + (long)kh * Dk;   // q; k at + keyDim
                    float xq[R], xk[R];
                    float sq = 0.f, sk = 0.f;
#pragma unroll
                    for (int r = 0; r < R; ++r) {
                        int i = lane + RG * r;
                        xq[r] = i < Dk ? x[i] : 0.f;
                        xk[r] = i < Dk ? x[keyDim + i] : 0.f;
                        sq += xq[r] * xq[r];
                        sk += xk[r] * xk[r];
                    }
                    const long th = (long)t * Hv + h;
                    float sc = 0.f;   // lane 0: g (then e^g), lane 1: β
                    if (lane == 0) {
                        const float aLogH = ldw(aLog, types & 0xff, h), bias = ldw(dtBias, (types >> 8) & 0xff, h);
                        sc = -(float)exp((double)aLogH) * ref_softplus(io.a[th] + bias);
                    } else if (lane == 1) {
                        sc = ref_sigmoid(io.b[th]);
                    }
                    sq = warp_sum(sq);
                    sk = warp_sum(sk);
                    const float iq = ref_inv_norm(sq, (float)(1.0 / sqrt((double)Dk)));   // q scaled by Dk^−½
                    const float ik = ref_inv_norm(sk, 1.f);
                    float* hr = HIST_OUT ? io.histOut + (long)t * hw : nullptr;
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
            for (int x = tid; x < tn * CW; x += G::NT) {
                const int tt = x / CW, cc = x % CW, jj = j0 + cc, e = e0 + tt;
                float v = 0.f;
                if (jj < Dv) {
                    if (REPLAYS && e < count) {
                        v = io.histIn[(long)e * hw + keyDim + h * Dv + jj];
                    } else if constexpr (TOKENS) {
                        const int t = e - count;
                        v = io.qkv[(long)t * conv + 2 * keyDim + h * Dv + jj];
                        if (HIST_OUT) io.histOut[(long)t * hw + keyDim + h * Dv + jj] = v;
                    }
                }
                sV[tt][cc] = v;
            }
            __syncthreads();
            if (e0 == 0) {   // this row's state: issue the next row's copy, then wait for this one
                if (more) {
                    prefetch(nextState, buffer ^ 1);
                    cp_async_wait<1>();
                } else {
                    cp_async_wait<0>();
                }
#pragma unroll
                for (int k = 0; k < CPT; ++k) {
#pragma unroll
                    for (int r = 0; r < R; ++r) {
                        const bool in = column(k) < Dv && rg + RG * r < Dk;
                        S[k][r] = in ? mine[((buffer * CPT + k) * R + r) * G::NT] : 0.f;
                    }
                }
            }

            // ---- steps ----
            for (int tt = 0; tt < tn; ++tt) {
                const int e = e0 + tt;
                if constexpr (MODE == MODE_VERIFY) {
                    if (e == count && count > 0) store(io.state);   // S(L)
                }
                const float decay = sDecay[tt], beta = sBeta[tt];
                float kr[R];
                float p[CPT];
#pragma unroll
                for (int r = 0; r < R; ++r) {
                    int i = rg + RG * r;
                    kr[r] = i < Dk ? sK[tt][i] : 0.f;
                }
#pragma unroll
                for (int k = 0; k < CPT; ++k) {
                    p[k] = 0.f;
#pragma unroll
                    for (int r = 0; r < R; ++r) {
                        S[k][r] *= decay;
                        p[k] += S[k][r] * kr[r];
                    }
                }
                column_sums<KV, CPT>(p, red[nred++ & 1]);
#pragma unroll
                for (int k = 0; k < CPT; ++k) {
                    const float delta = (sV[tt][c + G::CJ * k] - p[k]) * beta;
#pragma unroll
                    for (int r = 0; r < R; ++r) S[k][r] += kr[r] * delta;
                }
                if constexpr (TOKENS) {
                    if (!REPLAYS || e >= count) {
                        const int t = e - count;
                        float qr[R];
#pragma unroll
                        for (int r = 0; r < R; ++r) {
                            int i = rg + RG * r;
                            qr[r] = i < Dk ? sQ[tt][i] : 0.f;
                        }
#pragma unroll
                        for (int k = 0; k < CPT; ++k) {
                            p[k] = 0.f;
#pragma unroll
                            for (int r = 0; r < R; ++r) p[k] += S[k][r] * qr[r];
                        }
                        column_sums<KV, CPT>(p, red[nred++ & 1]);
                        if (rg == 0) {
#pragma unroll
                            for (int k = 0; k < CPT; ++k) {
                                if (column(k) < Dv) io.out[(long)t * valueDim + h * Dv + column(k)] = p[k];
                            }
                        }
                        if constexpr (MODE == MODE_STATES) store(rows.after(row, t));
                    }
                }
            }
            __syncthreads();   // before the next chunk's staging overwrites shared memory
        }
        if constexpr (MODE == MODE_SCAN || MODE == MODE_REPLAY) store(io.state);
    }
}

}  // namespace

#define GDN_ENTRY(NAME, KV) extern "C" __global__ void __launch_bounds__(Geo<KV>::NT, Geo<KV>::MIN_BLOCKS) NAME

// ---- per-row kernels (one column per thread, one row) ----

// Scan (state in place) and replay outputs: 12 arguments.
#define GDN_QKV_KERNEL(OP, MODE, LNAME, KV, R)                                                                   \
    GDN_ENTRY(gdn_##OP##_##LNAME##_r##R, KV)(float* state, const float* qkv, const float* a, const float* b,     \
                                            const void* aLog, const void* dtBias, float* out, float* hist,      \
                                            int T, int heads, int dims, int types) {                             \
        OneRow one{{state, qkv, a, b, out, nullptr, hist, 0}};                                                    \
        gdn_rows<KV, R, 1, MODE>(one, 1, T, aLog, dtBias, heads, dims, types);                                    \
    }

// Scan writing the state after each of up to 8 tokens to s0 … s7.
#define GDN_STATES_KERNEL(LNAME, KV, R)                                                                           \
    GDN_ENTRY(gdn_states_##LNAME##_r##R, KV)(float* state, const float* qkv, const float* a, const float* b,      \
                                            const void* aLog, const void* dtBias, float* out, float* s0,        \
                                            float* s1, float* s2, float* s3, float* s4, float* s5, float* s6,    \
                                            float* s7, int T, int heads, int dims, int types) {                  \
        OneRow one{{state, qkv, a, b, out, nullptr, nullptr, 0}, s0, s1, s2, s3, s4, s5, s6, s7};                 \
        gdn_rows<KV, R, 1, MODE_STATES>(one, 1, T, aLog, dtBias, heads, dims, types);                             \
    }

// Replay of `count` history rows: 5 arguments.
#define GDN_REPLAY_KERNEL(LNAME, KV, R)                                                                           \
    GDN_ENTRY(gdn_replay_##LNAME##_r##R, KV)(float* state, float* hist, int count, int heads, int dims) {         \
        OneRow one{{state, nullptr, nullptr, nullptr, nullptr, hist, nullptr, count}};                            \
        gdn_rows<KV, R, 1, MODE_REPLAY>(one, 1, 0, nullptr, nullptr, heads, dims, 0);                             \
    }

// ---- batched kernels: R rows of T tokens, CPT columns per thread ----

// Plain decode of every row, states[r] in place.
#define GDN_SCAN_BATCH_KERNEL(LNAME, KV, R, CPT)                                                                  \
    GDN_ENTRY(gdn_scan_batch_##LNAME##_r##R##_c##CPT, KV)(float* const* states, const float* qkv, const float* a, \
                                                         const float* b, const void* aLog, const void* dtBias,   \
                                                         float* out, int T, int nRows, int heads, int dims,      \
                                                         int types) {                                            \
        const int Hv = heads >> 16, Dk = dims & 0xffff, Dv = dims >> 16, keyDim = (heads & 0xffff) * Dk;          \
        RowTable rows{states, nullptr, nullptr, nullptr, nullptr, qkv, a, b, out, T, Hv, 2 * keyDim + Hv * Dv,    \
                      Hv * Dv};                                                                                  \
        gdn_rows<KV, R, CPT, MODE_SCAN>(rows, nRows, T, aLog, dtBias, heads, dims, types);                        \
    }

// Intermediate-copy verify of every row: scratch[r·T + t] = row r's state after token t.
#define GDN_STATES_BATCH_KERNEL(LNAME, KV, R, CPT)                                                                \
    GDN_ENTRY(gdn_states_batch_##LNAME##_r##R##_c##CPT, KV)(float* const* states, float* const* scratch,          \
                                                           const float* qkv, const float* a, const float* b,     \
                                                           const void* aLog, const void* dtBias, float* out,     \
                                                           int T, int nRows, int heads, int dims, int types) {   \
        const int Hv = heads >> 16, Dk = dims & 0xffff, Dv = dims >> 16, keyDim = (heads & 0xffff) * Dk;          \
        RowTable rows{states, scratch, nullptr, nullptr, nullptr, qkv, a, b, out, T, Hv, 2 * keyDim + Hv * Dv,    \
                      Hv * Dv};                                                                                  \
        gdn_rows<KV, R, CPT, MODE_STATES>(rows, nRows, T, aLog, dtBias, heads, dims, types);                      \
    }

// Replay verify of every row: replay counts[r] rows of previous[r], write S(L), outputs of the T
// tokens and their history rows into next[r].
#define GDN_VERIFY_BATCH_KERNEL(LNAME, KV, R, CPT)                                                                \
    GDN_ENTRY(gdn_replay_verify_##LNAME##_r##R##_c##CPT, KV)(float* const* states, const float* const* previous,  \
                                                            const int* counts, float* const* next,               \
                                                            const float* qkv, const float* a, const float* b,    \
                                                            const void* aLog, const void* dtBias, float* out,    \
                                                            int T, int nRows, int heads, int dims, int types) {  \
        const int Hv = heads >> 16, Dk = dims & 0xffff, Dv = dims >> 16, keyDim = (heads & 0xffff) * Dk;          \
        RowTable rows{states, nullptr, previous, counts, next, qkv, a, b, out, T, Hv, 2 * keyDim + Hv * Dv,       \
                      Hv * Dv};                                                                                  \
        gdn_rows<KV, R, CPT, MODE_VERIFY>(rows, nRows, T, aLog, dtBias, heads, dims, types);                      \
    }

#define GDN_BATCH(LNAME, KV, R, CPT)          \
    GDN_SCAN_BATCH_KERNEL(LNAME, KV, R, CPT)  \
    GDN_STATES_BATCH_KERNEL(LNAME, KV, R, CPT) \
    GDN_VERIFY_BATCH_KERNEL(LNAME, KV, R, CPT)

#define GDN_ALL(LNAME, KV, R)                                 \
    GDN_QKV_KERNEL(scan, MODE_SCAN, LNAME, KV, R)              \
    GDN_QKV_KERNEL(replay_out, MODE_REPLAY_OUT, LNAME, KV, R)  \
    GDN_STATES_KERNEL(LNAME, KV, R)                           \
    GDN_REPLAY_KERNEL(LNAME, KV, R)                           \
    GDN_BATCH(LNAME, KV, R, 1)                                \
    GDN_BATCH(LNAME, KV, R, 2)

#define GDN_ROWS(LNAME, KV) \
    GDN_ALL(LNAME, KV, 1)   \
    GDN_ALL(LNAME, KV, 2)   \
    GDN_ALL(LNAME, KV, 4)   \
    GDN_ALL(LNAME, KV, 8)

GDN_ROWS(kv, true)
GDN_ROWS(vk, false)
