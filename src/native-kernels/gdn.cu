// Gated DeltaNet: the sequential scan (state in place), the scan that writes the state after every
// token (intermediate-copy verify), replay of history rows (replay rollback), the outputs of T
// tokens from a read-only state plus their history rows (replay verify), and the batched forms of
// the generate-row operations: one launch for R rows of T tokens (grid z = row), per-row addresses
// and counts read from one staged device table (Backend's "batched generate rows").
// CpuBackend.gdnRun / gatedDeltaReplay are the reference.
//
// The delta rule separates per value column: for value index j, column S[:, j] (Dk entries) evolves
// on its own (δ_j = β(v_j − Σ_i S[i,j]·k_i), S[i,j] += k_i·δ_j, o_j = Σ_i S[i,j]·q_i). A block owns a
// tile of columns of one value head and keeps them in registers over all steps of its row, so the
// state is read once and (scan, replay) written once. Two thread mappings:
//
// Narrow (per-row kernels: one column per thread; small batches: two): 32 "row groups" split the
// Dk rows (row i belongs to row group i mod 32, R = ceil(Dk/32) rows per thread), each thread holds
// CPT columns.
//   KV ([Hv, Dk, Dv], value contiguous): 512 threads = 16 columns × 32 row groups, the column index
//      fastest, so a warp reads two 64-byte runs of rows; Σ over rows = shuffle + shared memory.
//   VK ([Hv, Dv, Dk], key contiguous): 128 threads = 4 columns, one warp per column with the rows
//      along the lanes (128-byte runs); Σ over rows = warp shuffle.
// Wide (batches): a warp owns 8 consecutive columns with the rows along the lanes (row i on lane
//   i mod 32), 8 warps a block (64 columns). KV reads a lane's row as two float4; VK reads each
//   column as 128-byte runs. Σ over rows never leaves the warp: a reduce-scatter of the 8 columns'
//   partial sums over the lanes (9 shuffles) and, where every lane needs every sum (δ), 8 more.
//   Eight times the state per reduction chain of the narrow mapping, with no barrier per step.
//
// A row's work is a list of "steps": first `count` history rows replayed (replay, replay verify),
// then the T tokens of qkv (everything but replay). Replay verify writes S(L) back when it reaches
// the first token, and keeps going on chip without writing it again.
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
constexpr int RG = 32;              // row groups per column (narrow), lanes along the rows (wide)
constexpr unsigned FULL = 0xffffffffu;

__host__ __device__ constexpr bool replays(int mode) { return mode == MODE_REPLAY || mode == MODE_VERIFY; }
__host__ __device__ constexpr bool tokens(int mode) { return mode != MODE_REPLAY; }
__host__ __device__ constexpr bool writesHistory(int mode) { return mode == MODE_REPLAY_OUT || mode == MODE_VERIFY; }

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

constexpr int WIDE_COLUMNS = 8;   // per warp
constexpr int WIDE_WARPS = 8;
constexpr int WIDE_THREADS = 32 * WIDE_WARPS;
constexpr int WIDE_MIN_BLOCKS = 3;   // ≤ 85 registers: 32 hold the state

// A weight element of runtime dtype (0 = f32, 1 = bf16, 2 = f16), widened to float.
__device__ __forceinline__ float ldw(const void* p, int dtype, int i) {
    switch (dtype) {
        case 1: return ld((const __nv_bfloat16*)p, i);
        case 2: return ld((const __half*)p, i);
        default: return ld((const float*)p, i);
    }
}

// (float)(1 / sqrt(Σx² + 1e−6)), as CpuBackend.l2normalize before its scale
__device__ __forceinline__ float ref_inv_norm(float ss) { return (float)(1.0 / sqrt((double)ss + 1e-6)); }

// The shape, unpacked: heads = Hk | Hv << 16, dims = Dk | Dv << 16.
struct Dims {
    int Hk, Hv, Dk, Dv, keyDim, valueDim, per;
    long conv, hw;   // qkv row width, history row width
    __device__ Dims(int heads, int dims)
        : Hk(heads & 0xffff), Hv(heads >> 16), Dk(dims & 0xffff), Dv(dims >> 16), keyDim(Hk * Dk),
          valueDim(Hv * Dv), per(Hv / Hk), conv(2L * keyDim + valueDim), hw((long)keyDim + valueDim + 2L * Hv) {}
};

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

// The per-row kernels' one row, from their arguments; scan-states writes up to 8 states s0 … s7.
struct OneRow {
    RowIo io;
    float *s0, *s1, *s2, *s3, *s4, *s5, *s6, *s7;
    template <int MODE>
    __device__ RowIo at(int) const { return io; }
    __device__ float* after(int, int t) const { return pick(t, s0, s1, s2, s3, s4, s5, s6, s7); }
};

// The batched kernels' rows: token inputs stacked [R·T, ·], per-row tensors through one staged table
// of R·… addresses: [states (R) | scratch (R·T)] for scan-states, [states | previous | next |
// counts] (R each) for replay verify, [states] for scan.
struct RowTable {
    const unsigned long long* table;
    int rows, T;
    const float* qkv;
    const float* a;
    const float* b;
    float* out;
    Dims d;

    template <int MODE>
    __device__ RowIo at(int r) const {
        const long t0 = (long)r * T;
        RowIo io;
        io.state = (float*)table[r];
        io.qkv = qkv + t0 * d.conv;
        io.a = a + t0 * d.Hv;
        io.b = b + t0 * d.Hv;
        io.out = out + t0 * d.valueDim;
        io.histIn = nullptr;
        io.histOut = nullptr;
        io.count = 0;
        if constexpr (MODE == MODE_VERIFY) {
            io.histIn = (const float*)table[rows + r];
            io.histOut = (float*)table[2 * rows + r];
            io.count = (int)table[3 * rows + r];
        }
        return io;
    }
    __device__ float* after(int r, int t) const { return (float*)table[rows + (long)r * T + t]; }
};

// Per-step inputs of up to TOKENS_STAGED steps: k (and q) of the block's key head, v of its CW columns.
template <int R, int CW, bool Q>
struct Staged {
    float k[TOKENS_STAGED][RG * R];
    float q[Q ? TOKENS_STAGED : 1][Q ? RG * R : 1];
    float v[TOKENS_STAGED][CW];
    float decay[TOKENS_STAGED], beta[TOKENS_STAGED];
};

// Loads steps e0 … e0+tn−1 of a row into `st`, one step per warp at a time (NW warps, NT threads,
// the block's columns j0 … j0+CW−1 of value head h): a replayed history row gives k, v, g, β as
// stored; a token gives q and k L2-normalised (q scaled by Dk^−½), v, β = σ(b),
// g = −exp(aLog)·softplus(a + dtBias), and (writesHistory) its history row. The scalar chains run
// across lanes at once: lane 0 e^{aLog}, lane 1 e^{−b}, lane 2 e^{a+dtBias} then log1p, lanes 0/1
// the two inverse norms.
template <int R, int NW, int NT, int CW, int MODE>
__device__ __forceinline__ void stage(Staged<R, CW, tokens(MODE)>& st, const RowIo& io, const Dims& d, int e0, int tn,
                                      int h, int j0, const void* aLog, const void* dtBias, int types, float qScale) {
    const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
    const int kh = h / d.per;
    // the block that writes the history's k rows of key head kh, and g and β of head h
    const bool histK = writesHistory(MODE) && blockIdx.x == 0 && h % d.per == 0;
    const bool histScalars = writesHistory(MODE) && blockIdx.x == 0;
    const int count = io.count;
    for (int tt = warp; tt < tn; tt += NW) {
        const int e = e0 + tt;
        if (replays(MODE) && e < count) {
            const float* hr = io.histIn + (long)e * d.hw;
            for (int i = lane; i < d.Dk; i += 32) st.k[tt][i] = hr[kh * d.Dk + i];
            if (lane == 0) st.decay[tt] = (float)exp((double)hr[d.keyDim + d.valueDim + h]);
            if (lane == 1) st.beta[tt] = hr[d.keyDim + d.valueDim + d.Hv + h];
        } else if constexpr (tokens(MODE)) {
            const int t = e - count;
            const float* x = io.qkv + (long)t * d.conv + (long)kh * d.Dk;   // q; k at + keyDim
            const long th = (long)t * d.Hv + h;
            float s = 0.f;
            if (lane == 0) {
                s = ldw(aLog, types & 0xff, h);
            } else if (lane == 1) {
                s = -io.b[th];
            } else if (lane == 2) {
                s = io.a[th] + ldw(dtBias, (types >> 8) & 0xff, h);
            }
            float xq[R], xk[R];
            float sq = 0.f, sk = 0.f;
#pragma unroll
            for (int r = 0; r < R; ++r) {
                int i = lane + RG * r;
                xq[r] = i < d.Dk ? x[i] : 0.f;
                xk[r] = i < d.Dk ? x[d.keyDim + i] : 0.f;
                sq += xq[r] * xq[r];
                sk += xk[r] * xk[r];
            }
            const double ex = exp((double)s);
            const float soft = s > 20.f ? s : (float)log1p(ex);   // lane 2: softplus(a + dtBias)
            sq = warp_sum(sq);
            sk = warp_sum(sk);
            const float inv = ref_inv_norm(lane & 1 ? sk : sq);
            const float g = -__shfl_sync(FULL, (float)ex, 0) * __shfl_sync(FULL, soft, 2);
            const float beta = 1.f / (1.f + __shfl_sync(FULL, (float)ex, 1));   // σ(b)
            const float iq = __shfl_sync(FULL, inv, 0) * qScale;
            const float ik = __shfl_sync(FULL, inv, 1);
            float* hr = writesHistory(MODE) ? io.histOut + (long)t * d.hw : nullptr;
#pragma unroll
            for (int r = 0; r < R; ++r) {
                int i = lane + RG * r;
                if (i < d.Dk) {
                    st.q[tt][i] = xq[r] * iq;
                    st.k[tt][i] = xk[r] * ik;
                    if (histK) hr[kh * d.Dk + i] = xk[r] * ik;
                }
            }
            if (lane == 0) {
                st.decay[tt] = (float)exp((double)g);
                st.beta[tt] = beta;
                if (histScalars) {
                    hr[d.keyDim + d.valueDim + h] = g;
                    hr[d.keyDim + d.valueDim + d.Hv + h] = beta;
                }
            }
        }
    }
    // v of the block's columns
    for (int x = tid; x < tn * CW; x += NT) {
        const int tt = x / CW, cc = x % CW, jj = j0 + cc, e = e0 + tt;
        float v = 0.f;
        if (jj < d.Dv) {
            if (replays(MODE) && e < count) {
                v = io.histIn[(long)e * d.hw + d.keyDim + h * d.Dv + jj];
            } else if constexpr (tokens(MODE)) {
                const int t = e - count;
                v = io.qkv[(long)t * d.conv + 2 * d.keyDim + h * d.Dv + jj];
                if (writesHistory(MODE)) io.histOut[(long)t * d.hw + d.keyDim + h * d.Dv + jj] = v;
            }
        }
        st.v[tt][cc] = v;
    }
}

// ---- narrow mapping ----

// Σ of v[k] over the 32 row groups of the calling thread's columns; every thread gets its columns'
// sums. KV: `buf` is one of two shared buffers of 16 warps × CPT × 16 columns, alternated by the
// caller, so a buffer is rewritten only after the other one's barrier.
template <bool KV, int CPT>
__device__ __forceinline__ void column_sums(float (&v)[CPT], float* buf) {
    if constexpr (!KV) {
#pragma unroll
        for (int o = 16; o > 0; o >>= 1) {
#pragma unroll
            for (int k = 0; k < CPT; ++k) v[k] += __shfl_xor_sync(FULL, v[k], o);
        }
    } else {
        int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
#pragma unroll
        for (int k = 0; k < CPT; ++k) {
            v[k] += __shfl_xor_sync(FULL, v[k], 16);
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

// grid (ceil(Dv / (CJ·CPT)), Hv, rows), block NT; T tokens of qkv per row (MODE_REPLAY: none).
template <bool KV, int R, int CPT, int MODE, class Rows>
__device__ __forceinline__ void narrow_row(const Rows& rows, int T, const void* aLog, const void* dtBias,
                                           const Dims& d, int types) {
    using G = Geo<KV>;
    constexpr int NW = G::NT / 32;
    constexpr int CW = G::CJ * CPT;   // columns per block
    __shared__ float red[2][KV ? NW * CPT * 16 : 1];
    __shared__ Staged<R, CW, tokens(MODE)> st;

    const int tid = threadIdx.x;
    const int c = G::col(tid), rg = G::rg(tid);
    const int h = blockIdx.y;
    const int j0 = blockIdx.x * CW;
    const int rowStride = KV ? d.Dv : 1;
    const float qScale = (float)(1.0 / sqrt((double)d.Dk));
    // element (i, j) of this head's matrix sits at colBase(k) + i·rowStride for the thread's column
    // j = j0 + c + CJ·k (colBase is within range for every thread, also where j ≥ Dv, which never
    // loads or stores)
    auto column = [&](int k) { return j0 + c + G::CJ * k; };
    auto colBase = [&](int k) {
        const int j = min(column(k), d.Dv - 1);
        return (long)h * d.Dk * d.Dv + (KV ? j : j * d.Dk);
    };
    float S[CPT][R];
    auto store = [&](float* state) {
#pragma unroll
        for (int k = 0; k < CPT; ++k) {
            if (column(k) < d.Dv) {
                float* col = state + colBase(k);
#pragma unroll
                for (int r = 0; r < R; ++r) {
                    const int i = rg + RG * r;
                    if (i < d.Dk) col[i * rowStride] = S[k][r];
                }
            }
        }
    };

    const int row = blockIdx.z;
    const RowIo io = rows.template at<MODE>(row);
#pragma unroll
    for (int k = 0; k < CPT; ++k) {
        const float* col = io.state + colBase(k);
#pragma unroll
        for (int r = 0; r < R; ++r) {
            const int i = rg + RG * r;
            S[k][r] = column(k) < d.Dv && i < d.Dk ? col[i * rowStride] : 0.f;
        }
    }
    const int count = io.count;
    const int n = count + (tokens(MODE) ? T : 0);
    int nred = 0;
    for (int e0 = 0; e0 < n; e0 += TOKENS_STAGED) {
        const int tn = min(TOKENS_STAGED, n - e0);
        stage<R, NW, G::NT, CW, MODE>(st, io, d, e0, tn, h, j0, aLog, dtBias, types, qScale);
        __syncthreads();
        for (int tt = 0; tt < tn; ++tt) {
            const int e = e0 + tt;
            if constexpr (MODE == MODE_VERIFY) {
                if (e == count && count > 0) store(io.state);   // S(L)
            }
            const float decay = st.decay[tt], beta = st.beta[tt];
            float kr[R];
            float p[CPT];
#pragma unroll
            for (int r = 0; r < R; ++r) {
                int i = rg + RG * r;
                kr[r] = i < d.Dk ? st.k[tt][i] : 0.f;
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
                const float delta = (st.v[tt][c + G::CJ * k] - p[k]) * beta;
#pragma unroll
                for (int r = 0; r < R; ++r) S[k][r] += kr[r] * delta;
            }
            if constexpr (tokens(MODE)) {
                if (!replays(MODE) || e >= count) {
                    const int t = e - count;
                    float qr[R];
#pragma unroll
                    for (int r = 0; r < R; ++r) {
                        int i = rg + RG * r;
                        qr[r] = i < d.Dk ? st.q[tt][i] : 0.f;
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
                            if (column(k) < d.Dv) io.out[(long)t * d.valueDim + h * d.Dv + column(k)] = p[k];
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

// ---- wide mapping ----

// The column (0 … C−1) whose sum a lane holds after reduce_scatter<C>.
template <int C>
__device__ __forceinline__ int owned_column(int lane) {
    int col = 0;
#pragma unroll
    for (int span = C, o = 16; span > 1; span >>= 1, o >>= 1) {
        if (lane & o) col += span / 2;
    }
    return col;
}

// The lowest lane that holds column m's sum after reduce_scatter<C>.
template <int C>
__device__ __forceinline__ int owner_lane(int m) {
    int lane = 0;
#pragma unroll
    for (int span = C, o = 16; span > 1; span >>= 1, o >>= 1) {
        if (m & (span / 2)) lane |= o;
    }
    return lane;
}

// Sums v[m] over the warp's lanes for each of C columns; returns column owned_column(lane)'s sum
// (every lane of a group of 32/C holds it). Halving: at offset o a lane keeps the upper half of its
// columns when (lane & o), adding the partner's copy of those, and sends the other half.
template <int C>
__device__ __forceinline__ float reduce_scatter(float (&v)[C], int lane) {
#pragma unroll
    for (int span = C, o = 16; span > 1; span >>= 1, o >>= 1) {
        const bool upper = lane & o;
#pragma unroll
        for (int m = 0; m < span / 2; ++m) {
            const float send = upper ? v[m] : v[m + span / 2];
            const float keep = upper ? v[m + span / 2] : v[m];
            v[m] = keep + __shfl_xor_sync(FULL, send, o);
        }
    }
    float s = v[0];
#pragma unroll
    for (int o = 16 / C; o > 0; o >>= 1) s += __shfl_xor_sync(FULL, s, o);
    return s;
}

// v[m] = Σ over the warp's lanes of v[m], for every lane.
template <int C>
__device__ __forceinline__ void all_sums(float (&v)[C], int lane) {
    const float s = reduce_scatter<C>(v, lane);
#pragma unroll
    for (int m = 0; m < C; ++m) v[m] = __shfl_sync(FULL, s, owner_lane<C>(m));
}

// grid (ceil(Dv / 64), Hv, rows), block 256; warp w owns columns j0 = blockIdx.x·64 + 8w … j0+7.
template <bool KV, int R, int MODE, class Rows>
__device__ __forceinline__ void wide_row(const Rows& rows, int T, const void* aLog, const void* dtBias,
                                         const Dims& d, int types) {
    constexpr int C = WIDE_COLUMNS, CW = C * WIDE_WARPS;
    __shared__ Staged<R, CW, tokens(MODE)> st;

    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    const int h = blockIdx.y;
    const int jb = blockIdx.x * CW;   // the block's first column
    const int j0 = jb + warp * C;     // the warp's
    const float qScale = (float)(1.0 / sqrt((double)d.Dk));
    // KV: a row's 8 columns as two float4 where the tile is whole and 16-byte aligned (types bit 16:
    // every state address of the launch is)
    const bool vec = KV && (types >> 16 & 1) && d.Dv % 4 == 0 && j0 + C <= d.Dv;
    const long headBase = (long)h * d.Dk * d.Dv;
    float S[C][R];
    auto load = [&](const float* state) {
        const float* m0 = state + headBase;
#pragma unroll
        for (int r = 0; r < R; ++r) {
            const int i = lane + RG * r;
            if (vec && i < d.Dk) {
                const float4 lo = *(const float4*)(m0 + (long)i * d.Dv + j0);
                const float4 hi = *(const float4*)(m0 + (long)i * d.Dv + j0 + 4);
                S[0][r] = lo.x, S[1][r] = lo.y, S[2][r] = lo.z, S[3][r] = lo.w;
                S[4][r] = hi.x, S[5][r] = hi.y, S[6][r] = hi.z, S[7][r] = hi.w;
            } else {
#pragma unroll
                for (int m = 0; m < C; ++m) {
                    const int j = j0 + m;
                    const bool in = i < d.Dk && j < d.Dv;
                    S[m][r] = in ? m0[KV ? (long)i * d.Dv + j : (long)j * d.Dk + i] : 0.f;
                }
            }
        }
    };
    auto store = [&](float* state) {
        float* m0 = state + headBase;
#pragma unroll
        for (int r = 0; r < R; ++r) {
            const int i = lane + RG * r;
            if (vec && i < d.Dk) {
                *(float4*)(m0 + (long)i * d.Dv + j0) = make_float4(S[0][r], S[1][r], S[2][r], S[3][r]);
                *(float4*)(m0 + (long)i * d.Dv + j0 + 4) = make_float4(S[4][r], S[5][r], S[6][r], S[7][r]);
            } else {
#pragma unroll
                for (int m = 0; m < C; ++m) {
                    const int j = j0 + m;
                    if (i < d.Dk && j < d.Dv) m0[KV ? (long)i * d.Dv + j : (long)j * d.Dk + i] = S[m][r];
                }
            }
        }
    };

    const int row = blockIdx.z;
    const RowIo io = rows.template at<MODE>(row);
    load(io.state);
    const int count = io.count;
    const int n = count + (tokens(MODE) ? T : 0);
    const int mine = owned_column<C>(lane);
    const bool writer = (lane & (32 / C - 1)) == 0 && j0 + mine < d.Dv;
    for (int e0 = 0; e0 < n; e0 += TOKENS_STAGED) {
        const int tn = min(TOKENS_STAGED, n - e0);
        stage<R, WIDE_WARPS, WIDE_THREADS, CW, MODE>(st, io, d, e0, tn, h, jb, aLog, dtBias, types, qScale);
        __syncthreads();
        for (int tt = 0; tt < tn; ++tt) {
            const int e = e0 + tt;
            if constexpr (MODE == MODE_VERIFY) {
                if (e == count && count > 0) store(io.state);   // S(L)
            }
            const float decay = st.decay[tt], beta = st.beta[tt];
            float kr[R];
            float p[C];
#pragma unroll
            for (int r = 0; r < R; ++r) {
                const int i = lane + RG * r;
                kr[r] = i < d.Dk ? st.k[tt][i] : 0.f;
            }
#pragma unroll
            for (int m = 0; m < C; ++m) {
                p[m] = 0.f;
#pragma unroll
                for (int r = 0; r < R; ++r) {
                    S[m][r] *= decay;
                    p[m] += S[m][r] * kr[r];
                }
            }
            all_sums<C>(p, lane);
#pragma unroll
            for (int m = 0; m < C; ++m) {
                const float delta = (st.v[tt][warp * C + m] - p[m]) * beta;
#pragma unroll
                for (int r = 0; r < R; ++r) S[m][r] += kr[r] * delta;
            }
            if constexpr (tokens(MODE)) {
                if (!replays(MODE) || e >= count) {
                    const int t = e - count;
                    float qr[R];
#pragma unroll
                    for (int r = 0; r < R; ++r) {
                        const int i = lane + RG * r;
                        qr[r] = i < d.Dk ? st.q[tt][i] : 0.f;
                    }
#pragma unroll
                    for (int m = 0; m < C; ++m) {
                        p[m] = 0.f;
#pragma unroll
                        for (int r = 0; r < R; ++r) p[m] += S[m][r] * qr[r];
                    }
                    const float o = reduce_scatter<C>(p, lane);
                    if (writer) io.out[(long)t * d.valueDim + h * d.Dv + j0 + mine] = o;
                    if constexpr (MODE == MODE_STATES) store(rows.after(row, t));
                }
            }
        }
        __syncthreads();   // before the next chunk's staging overwrites shared memory
    }
    if constexpr (MODE == MODE_SCAN || MODE == MODE_REPLAY) store(io.state);
}

}  // namespace

#define GDN_ENTRY(NAME, KV) extern "C" __global__ void __launch_bounds__(Geo<KV>::NT, Geo<KV>::MIN_BLOCKS) NAME
#define GDN_WIDE_ENTRY(NAME) extern "C" __global__ void __launch_bounds__(WIDE_THREADS, WIDE_MIN_BLOCKS) NAME

// ---- per-row kernels (narrow, one column per thread) ----

// Scan (state in place) and replay outputs: 12 arguments.
#define GDN_QKV_KERNEL(OP, MODE, LNAME, KV, R)                                                                   \
    GDN_ENTRY(gdn_##OP##_##LNAME##_r##R, KV)(float* state, const float* qkv, const float* a, const float* b,     \
                                            const void* aLog, const void* dtBias, float* out, float* hist,      \
                                            int T, int heads, int dims, int types) {                             \
        OneRow one{{state, qkv, a, b, out, nullptr, hist, 0}};                                                    \
        narrow_row<KV, R, 1, MODE>(one, T, aLog, dtBias, Dims(heads, dims), types);                               \
    }

// Scan writing the state after each of up to 8 tokens to s0 … s7.
#define GDN_STATES_KERNEL(LNAME, KV, R)                                                                           \
    GDN_ENTRY(gdn_states_##LNAME##_r##R, KV)(float* state, const float* qkv, const float* a, const float* b,      \
                                            const void* aLog, const void* dtBias, float* out, float* s0,        \
                                            float* s1, float* s2, float* s3, float* s4, float* s5, float* s6,    \
                                            float* s7, int T, int heads, int dims, int types) {                  \
        OneRow one{{state, qkv, a, b, out, nullptr, nullptr, 0}, s0, s1, s2, s3, s4, s5, s6, s7};                 \
        narrow_row<KV, R, 1, MODE_STATES>(one, T, aLog, dtBias, Dims(heads, dims), types);                        \
    }

// Replay of `count` history rows: 5 arguments.
#define GDN_REPLAY_KERNEL(LNAME, KV, R)                                                                           \
    GDN_ENTRY(gdn_replay_##LNAME##_r##R, KV)(float* state, float* hist, int count, int heads, int dims) {         \
        OneRow one{{state, nullptr, nullptr, nullptr, nullptr, hist, nullptr, count}};                            \
        narrow_row<KV, R, 1, MODE_REPLAY>(one, 0, nullptr, nullptr, Dims(heads, dims), 0);                        \
    }

// ---- batched kernels: R rows of T tokens, grid z = row ----
//
// Arguments: the row table (see RowTable), qkv, a, b, aLog, dtBias, out, T, rows, heads, dims, types
// (bit 16: the states' and scratch states' addresses are 16-byte aligned).
// OP scan_batch: plain decode, states[r] in place. states_batch: intermediate-copy verify,
// scratch[r·T + t] = row r's state after token t. replay_verify: replay counts[r] rows of
// previous[r], write S(L), then the T tokens' outputs and history rows (into next[r]).
#define GDN_BATCH_ARGS                                                                                      \
    (const unsigned long long* table, const float* qkv, const float* a, const float* b, const void* aLog,   \
     const void* dtBias, float* out, int T, int rows, int heads, int dims, int types)
#define GDN_BATCH_BODY(...)                                   \
    {                                                         \
        const Dims d(heads, dims);                            \
        RowTable rt{table, rows, T, qkv, a, b, out, d};       \
        __VA_ARGS__(rt, T, aLog, dtBias, d, types);           \
    }

#define GDN_NARROW_BATCH_KERNEL(OP, MODE, LNAME, KV, R, CPT) \
    GDN_ENTRY(gdn_##OP##_##LNAME##_r##R##_c##CPT, KV) GDN_BATCH_ARGS GDN_BATCH_BODY(narrow_row<KV, R, CPT, MODE>)

#define GDN_WIDE_BATCH_KERNEL(OP, MODE, LNAME, KV, R) \
    GDN_WIDE_ENTRY(gdn_##OP##_wide_##LNAME##_r##R) GDN_BATCH_ARGS GDN_BATCH_BODY(wide_row<KV, R, MODE>)

#define GDN_NARROW_BATCH(LNAME, KV, R, CPT)                               \
    GDN_NARROW_BATCH_KERNEL(scan_batch, MODE_SCAN, LNAME, KV, R, CPT)     \
    GDN_NARROW_BATCH_KERNEL(states_batch, MODE_STATES, LNAME, KV, R, CPT) \
    GDN_NARROW_BATCH_KERNEL(replay_verify, MODE_VERIFY, LNAME, KV, R, CPT)

#define GDN_WIDE_BATCH(LNAME, KV, R)                               \
    GDN_WIDE_BATCH_KERNEL(scan_batch, MODE_SCAN, LNAME, KV, R)     \
    GDN_WIDE_BATCH_KERNEL(states_batch, MODE_STATES, LNAME, KV, R) \
    GDN_WIDE_BATCH_KERNEL(replay_verify, MODE_VERIFY, LNAME, KV, R)

#define GDN_ALL(LNAME, KV, R)                                 \
    GDN_QKV_KERNEL(scan, MODE_SCAN, LNAME, KV, R)              \
    GDN_QKV_KERNEL(replay_out, MODE_REPLAY_OUT, LNAME, KV, R)  \
    GDN_STATES_KERNEL(LNAME, KV, R)                           \
    GDN_REPLAY_KERNEL(LNAME, KV, R)                           \
    GDN_NARROW_BATCH(LNAME, KV, R, 2)

#define GDN_ROWS(LNAME, KV)   \
    GDN_ALL(LNAME, KV, 1)     \
    GDN_ALL(LNAME, KV, 2)     \
    GDN_ALL(LNAME, KV, 4)     \
    GDN_ALL(LNAME, KV, 8)     \
    GDN_WIDE_BATCH(LNAME, KV, 1) \
    GDN_WIDE_BATCH(LNAME, KV, 2) \
    GDN_WIDE_BATCH(LNAME, KV, 4)

GDN_ROWS(kv, true)
GDN_ROWS(vk, false)
