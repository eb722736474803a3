// The replay verify of R rows in one launch (DESIGN §4 I4, steps 1-3; Backend.mamba2ReplayVerifyBatch).
// Per row r, head h and tile of p values a block
//   1. reads its part of S_old = states[r] once, in VEC-float vectors (16 bytes), into registers;
//   2. replays the row's counts[r] previous tokens (history previous[r]) in one rank-count update,
//        S(L) = e^{c_{count-1}} S_old + sum_{j<count} (e^{c_{count-1}-c_j} dt_j x_j) (x) B_j,
//      and writes S(L) back once (not at all when count = 0: S(L) = S_old);
//   3. computes the T outputs from the registers,
//        y_t = e^{c_t} (C_t . S(L)) + sum_{j<=t} (C_t . B_j) e^{c_t-c_j} dt_j x_j + D x_t,
//      and writes the tokens' history rows [x | B | dt | c] to next[r].
// State traffic per row: one read and at most one write of |S|. The math and its rounding order are
// CpuBackend.mamba2Replay / mamba2ReplayOutputs'.
//
// Latency: the block's global reads form two rounds. First the row's table entries (and the
// tokens' vectors, which need none); then the state vectors and the previous tokens' vectors,
// every one issued before any is used (m2v_stage: M2V_U vectors per thread per round, stores to
// shared memory after all loads). The history rows are written after the first barrier; the
// double-precision exponentials are spread over threads, one each.
//
// Tile: the full N range of `ptile` p values of one head, as state rows (VK: p, N contiguous; KV: n,
// P contiguous) of VEC-float vectors; `lanes` threads (a power of two <= 32) share a row.
//   VK: a thread holds KM vectors of one row p, at columns (lane + lanes*c)*VEC: C . S reduces
//       in registers, then over the row's lanes by shuffles.
//   KV: a thread holds one column vector p .. p+VEC-1 of KM rows n = rt + rts*k: C . S reduces
//       over its rows, then over the warp's rows by shuffles, then across warps in shared memory.
// grid (p tiles, H, R), 256 threads. Per-row addresses and counts come from staged device tables.
#include "mamba2.cuh"

#define M2V_TC 8   // tokens per row; previous tokens staged per chunk
#define M2V_U 4    // staged vectors per thread per load round

extern __shared__ __align__(16) float m2v_smem[];

template <int VEC> struct M2VVec { typedef float T; };
template <> struct M2VVec<4> { typedef float4 T; };

// State vectors: streamed (read once, written once per call), so kept out of the way of the
// tokens' vectors in L2.
template <int VEC>
__device__ __forceinline__ void m2v_load_state(float (&d)[VEC], const float* p) {
    if constexpr (VEC == 4) {
        float4 q = __ldcs(reinterpret_cast<const float4*>(p));
        d[0] = q.x; d[1] = q.y; d[2] = q.z; d[3] = q.w;
    } else {
        d[0] = __ldcs(p);
    }
}

template <int VEC>
__device__ __forceinline__ void m2v_store_state(float* p, const float (&d)[VEC]) {
    if constexpr (VEC == 4) {
        __stcs(reinterpret_cast<float4*>(p), make_float4(d[0], d[1], d[2], d[3]));
    } else {
        __stcs(p, d[0]);
    }
}

// VEC floats of shared memory.
template <int VEC>
__device__ __forceinline__ void m2v_lds(float (&d)[VEC], const float* p) {
    if constexpr (VEC == 4) {
        float4 q = *reinterpret_cast<const float4*>(p);
        d[0] = q.x; d[1] = q.y; d[2] = q.z; d[3] = q.w;
    } else {
        d[0] = *p;
    }
}

// c_t = sum_{i<=t} A dt_i, summed as the CPU does (no fused multiply-add).
__device__ __forceinline__ float m2v_csum(const float* sdt, int t, float A) {
    float c = 0.f;
    for (int i = 0; i <= t; i++) c = __fadd_rn(c, __fmul_rn(A, sdt[i]));
    return c;
}

// Where a staged vector comes from and goes to.
struct M2VStage {
    const float* xBC;   // this row's tokens, [T, conv]
    const float* prev;  // this row's previous history, [>= count, width]
    int T, conv, width;
    int bOff, cOff, xOff;       // B, C columns of the head's group; the tile's first x column
    int rowOff, colOff;         // previous rows' row / column vectors (VK: x / B; KV: B / x)
    int nv, pv, rv, cv;         // vectors per row: B and C, tile x, previous row / column vectors
    int N, ptile, rowsMax, colsMax;
    int sx, pRow, pCol;         // shared offsets (B at 0, C at T*N)
};

// Stages the tokens' B, C (T*nv vectors each) and tile x (T*pv) when `tokens`, and previous rows
// j0 .. j0+jc-1 (row vectors jc*rv, column vectors jc*cv): M2V_U vectors per thread per round, all
// loads of a round before its stores.
template <int VEC>
__device__ void m2v_stage(float* sm, const M2VStage& g, bool tokens, int j0, int jc) {
    typedef typename M2VVec<VEC>::T V;
    const int nBC = tokens ? 2 * g.T * g.nv : 0;
    const int nX = tokens ? g.T * g.pv : 0;
    const int nR = jc * g.rv;
    const int total = nBC + nX + nR + jc * g.cv;
    for (int base = threadIdx.x; base < total; base += M2V_U * blockDim.x) {
        V v[M2V_U];
        int off[M2V_U];
#pragma unroll
        for (int u = 0; u < M2V_U; u++) {
            int e = base + u * blockDim.x;
            off[u] = -1;
            if (e < total) {
                const float* src;
                if (e < nBC) {   // q < T: B of token q, else C of token q - T
                    int q = e / g.nv, c = e - q * g.nv;
                    int t = q < g.T ? q : q - g.T;
                    src = g.xBC + (long)t * g.conv + (q < g.T ? g.bOff : g.cOff) + c * VEC;
                    off[u] = q * g.N + c * VEC;
                } else if ((e -= nBC) < nX) {
                    int q = e / g.pv, c = e - q * g.pv;
                    src = g.xBC + (long)q * g.conv + g.xOff + c * VEC;
                    off[u] = g.sx + q * g.ptile + c * VEC;
                } else if ((e -= nX) < nR) {
                    int q = e / g.rv, c = e - q * g.rv;
                    src = g.prev + (long)(j0 + q) * g.width + g.rowOff + c * VEC;
                    off[u] = g.pRow + q * g.rowsMax + c * VEC;
                } else {
                    e -= nR;
                    int q = e / g.cv, c = e - q * g.cv;
                    src = g.prev + (long)(j0 + q) * g.width + g.colOff + c * VEC;
                    off[u] = g.pCol + q * g.colsMax + c * VEC;
                }
                v[u] = *reinterpret_cast<const V*>(src);
            }
        }
#pragma unroll
        for (int u = 0; u < M2V_U; u++) {
            if (off[u] >= 0) *reinterpret_cast<V*>(sm + off[u]) = v[u];
        }
    }
}

template <bool VK, int VEC, int KM, typename W>
__device__ void m2_replay_verify_impl(float* const* __restrict__ states, const float* const* __restrict__ prevs,
                                      const int* __restrict__ counts, const float* __restrict__ xBCAll,
                                      const float* __restrict__ dtRawAll, const W* __restrict__ dtBias,
                                      const W* __restrict__ aLog, const W* __restrict__ dd,
                                      float* const* __restrict__ nexts, float* __restrict__ yAll, int T, int H, int P,
                                      int N, int G, float dtMin, float dtMax, int ptile, int lanes) {
    float* sm = m2v_smem;
    const int r = blockIdx.z, h = blockIdx.y, p0 = blockIdx.x * ptile;
    const int pw = min(ptile, P - p0);
    const int hpg = H / G, g = h / hpg;
    const int conv = H * P + 2 * G * N;
    const int width = H * P + G * N + 2 * H;
    const int bOff = H * P + g * N, cOff = H * P + G * N + g * N, hDt = H * P + G * N;
    const int tid = threadIdx.x;
    const int lane = tid % lanes, rt = tid / lanes, rts = blockDim.x / lanes;
    const int rowsT = VK ? pw : N;              // state rows in the tile
    const int colsT = VK ? N : pw;              // contiguous columns in the tile
    const int rowsMax = VK ? ptile : N, colsMax = VK ? N : ptile;

    // Shared memory: the vector-staged arrays first (16-byte aligned), then the scalars.
    M2VStage st;
    st.xBC = xBCAll + (long)r * T * conv;
    st.T = T; st.conv = conv; st.width = width;
    st.bOff = bOff; st.cOff = cOff; st.xOff = h * P + p0;
    st.rowOff = VK ? h * P + p0 : bOff;
    st.colOff = VK ? bOff : h * P + p0;
    st.nv = N / VEC; st.pv = pw / VEC; st.rv = rowsT / VEC; st.cv = colsT / VEC;
    st.N = N; st.ptile = ptile; st.rowsMax = rowsMax; st.colsMax = colsMax;
    st.sx = 2 * T * N;                          // [T][ptile]   x_t of the tile
    st.pRow = st.sx + T * ptile;                // [TC][rowsMax] previous row vectors (VK x_j, KV B_j)
    st.pCol = st.pRow + M2V_TC * rowsMax;       // [TC][colsMax] previous column vectors (VK B_j, KV x_j)
    const float* sB = sm;                       // [T][N]       B_t
    const float* sC = sm + T * N;               // [T][N]       C_t
    const float* sx = sm + st.sx;
    const float* pRow = sm + st.pRow;
    const float* pCol = sm + st.pCol;
    float* sw = sm + st.pCol + M2V_TC * colsMax;   // [TC] e^{c_{count-1} - c_j} dt_j
    float* sdt = sw + M2V_TC;                   // [TC] dt_t
    float* scar = sdt + M2V_TC;                 // [TC] e^{c_t}
    float* seL = scar + M2V_TC;                 // [1]  e^{c_{count-1}}
    float* ew = seL + 1;                        // [TC][TC] e^{c_t - c_j}
    float* cbd = ew + M2V_TC * M2V_TC;          // [TC][TC] C_t . B_j
    float* red = cbd + M2V_TC * M2V_TC;         // VK: [T][ptile]; KV: [T][warps][ptile]

    // Round 1: the row's table entries; round 2: everything that needs them.
    float* S = states[r] + (long)h * P * N;
    const float* prev = prevs[r];
    const int count = counts[r];
    float s[KM][VEC];
#pragma unroll
    for (int k = 0; k < KM; k++) {
        const int row = VK ? rt : rt + rts * k;
        const int col = VK ? (lane + lanes * k) * VEC : lane * VEC;
        if (row < rowsT && col < colsT) {
            m2v_load_state<VEC>(s[k], S + (long)row * (VK ? N : P) + (VK ? (long)p0 * N : p0) + col);
        } else {
#pragma unroll
            for (int v = 0; v < VEC; v++) s[k][v] = 0.f;
        }
    }
    const int jc0 = min(M2V_TC, count);
    const int jt = tid - 32;                    // threads 32.. weigh the previous tokens, 64 takes e^{cL}
    float dtr = 0.f, cj = 0.f, dtj = 0.f, cL = 0.f;
    if (tid < T) dtr = dtRawAll[((long)r * T + tid) * H + h];
    if ((jt >= 0 && jt < jc0) || tid == 64) {
        if (count > 0) cL = prev[(long)(count - 1) * width + hDt + H + h];
        if (jt < jc0) {
            cj = prev[(long)jt * width + hDt + H + h];
            dtj = prev[(long)jt * width + hDt + h];
        }
    }
    st.prev = prev;
    m2v_stage<VEC>(sm, st, true, 0, jc0);
    if (tid < T) sdt[tid] = m2_dt(dtr, ld(dtBias, h), dtMin, dtMax);
    if (jt >= 0 && jt < jc0) sw[jt] = m2_exp(__fsub_rn(cL, cj)) * dtj;
    if (tid == 64) seL[0] = count > 0 ? m2_exp(cL) : 1.f;
    __syncthreads();

    // Replay, previous tokens M2V_TC at a time (one chunk at the verify widths).
    for (int j0 = 0; j0 == 0 || j0 < count; j0 += M2V_TC) {
        const int jc = min(M2V_TC, count - j0);
        if (j0 > 0) {
            __syncthreads();   // the previous chunk is no longer read
            m2v_stage<VEC>(sm, st, false, j0, jc);
            if (jt >= 0 && jt < jc) {
                const float* row = prev + (long)(j0 + jt) * width;
                sw[jt] = m2_exp(__fsub_rn(cL, row[hDt + H + h])) * row[hDt + h];
            }
            __syncthreads();
        } else if (count > 0) {
            const float eL = seL[0];
#pragma unroll
            for (int k = 0; k < KM; k++)
#pragma unroll
                for (int v = 0; v < VEC; v++) s[k][v] *= eL;
        }
        for (int jj = 0; jj < jc; jj++) {
            const float w = sw[jj];
            if (VK) {
                if (rt < rowsT) {
                    const float coef = w * pRow[jj * rowsMax + rt];
#pragma unroll
                    for (int k = 0; k < KM; k++) {
                        const int col = (lane + lanes * k) * VEC;
                        if (col < colsT) {
                            float b[VEC];
                            m2v_lds<VEC>(b, pCol + jj * colsMax + col);
#pragma unroll
                            for (int v = 0; v < VEC; v++) s[k][v] += coef * b[v];
                        }
                    }
                }
            } else if (lane * VEC < colsT) {
                float x[VEC];
                m2v_lds<VEC>(x, pCol + jj * colsMax + lane * VEC);
#pragma unroll
                for (int k = 0; k < KM; k++) {
                    const int row = rt + rts * k;
                    if (row < rowsT) {
                        const float coef = w * pRow[jj * rowsMax + row];
#pragma unroll
                        for (int v = 0; v < VEC; v++) s[k][v] += coef * x[v];
                    }
                }
            }
        }
    }
    if (count > 0) {
#pragma unroll
        for (int k = 0; k < KM; k++) {
            const int row = VK ? rt : rt + rts * k;
            const int col = VK ? (lane + lanes * k) * VEC : lane * VEC;
            if (row < rowsT && col < colsT) {
                m2v_store_state<VEC>(S + (long)row * (VK ? N : P) + (VK ? (long)p0 * N : p0) + col, s[k]);
            }
        }
    }

    // History rows of this step: x (this tile), B (the group's first head, first tile), dt and c (first tile).
    float* next = nexts[r];
    for (int i = tid; i < T * pw; i += blockDim.x) {
        const int t = i / pw, pl = i - t * pw;
        next[(long)t * width + h * P + p0 + pl] = sx[t * ptile + pl];
    }
    if (blockIdx.x == 0 && h % hpg == 0) {
        for (int i = tid; i < T * N; i += blockDim.x) {
            const int t = i / N, n = i - t * N;
            next[(long)t * width + bOff + n] = sB[i];
        }
    }
    // e^{c_t} (threads < T) and e^{c_t - c_j} (threads 32 ..), one exponential each; C_t . B_j by warps.
    const float A = m2_a(ld(aLog, h));
    const int pairs = T * (T + 1) / 2;
    if (tid < T) {
        const float c = m2v_csum(sdt, tid, A);
        scar[tid] = m2_exp(c);
        if (blockIdx.x == 0) {
            next[(long)tid * width + hDt + h] = sdt[tid];
            next[(long)tid * width + hDt + H + h] = c;
        }
    }
    if (jt >= 0 && jt < pairs) {
        int t = 0;
        while ((t + 1) * (t + 2) / 2 <= jt) t++;
        const int j = jt - t * (t + 1) / 2;
        ew[t * M2V_TC + j] = m2_exp(__fsub_rn(m2v_csum(sdt, t, A), m2v_csum(sdt, j, A)));
    }
    const int warp = tid >> 5, wl = tid & 31, warps = blockDim.x >> 5;
    for (int q = warp; q < pairs; q += warps) {
        int t = 0;
        while ((t + 1) * (t + 2) / 2 <= q) t++;
        const int j = q - t * (t + 1) / 2;
        float v = 0.f;
        for (int n = wl; n < N; n += 32) v += sC[t * N + n] * sB[j * N + n];
        v = warp_sum(v);
        if (wl == 0) cbd[t * M2V_TC + j] = v;
    }
    // C_t . S(L) for the tile's p values, into red.
    for (int t = 0; t < T; t++) {
        const float* C = sC + t * N;
        if (VK) {
            float part = 0.f;
#pragma unroll
            for (int k = 0; k < KM; k++) {
                const int col = (lane + lanes * k) * VEC;
                if (col < colsT) {
                    float c[VEC];
                    m2v_lds<VEC>(c, C + col);
#pragma unroll
                    for (int v = 0; v < VEC; v++) part += s[k][v] * c[v];
                }
            }
            part = m2_group_sum(part, lanes);
            if (lane == 0 && rt < rowsT) red[t * ptile + rt] = part;
        } else {
            float part[VEC];
#pragma unroll
            for (int v = 0; v < VEC; v++) part[v] = 0.f;
#pragma unroll
            for (int k = 0; k < KM; k++) {
                const int row = rt + rts * k;
                const float cn = row < rowsT ? C[row] : 0.f;
#pragma unroll
                for (int v = 0; v < VEC; v++) part[v] += s[k][v] * cn;
            }
#pragma unroll
            for (int v = 0; v < VEC; v++) {
                for (int o = lanes; o < 32; o <<= 1) part[v] += __shfl_xor_sync(0xffffffffu, part[v], o);
            }
            if (wl < lanes && lane * VEC < colsT) {
#pragma unroll
                for (int v = 0; v < VEC; v++) red[(t * warps + warp) * ptile + lane * VEC + v] = part[v];
            }
        }
    }
    __syncthreads();
    float* y = yAll + (long)r * T * H * P + (long)h * P + p0;
    const float Dh = ld(dd, h);
    for (int i = tid; i < T * pw; i += blockDim.x) {
        const int t = i / pw, pl = i - t * pw;
        float ystate;
        if (VK) {
            ystate = red[t * ptile + pl];
        } else {
            ystate = 0.f;
            for (int w = 0; w < warps; w++) ystate += red[(t * warps + w) * ptile + pl];
        }
        float v = scar[t] * ystate;
        for (int j = 0; j <= t; j++) {
            const float w = cbd[t * M2V_TC + j] * ew[t * M2V_TC + j] * sdt[j];
            v += w * sx[j * ptile + pl];
        }
        v += Dh * sx[t * ptile + pl];
        y[(long)t * H * P + pl] = v;
    }
}

#define M2V_PARAMS(W)                                                                                        \
    float *const *states, const float *const *prevs, const int *counts, const float *xBC, const float *dtRaw, \
        const W *dtBias, const W *aLog, const W *dd, float *const *nexts, float *y, int T, int H, int P, int N,  \
        int G, float dtMin, float dtMax, int ptile, int lanes
#define M2V_ARGS states, prevs, counts, xBC, dtRaw, dtBias, aLog, dd, nexts, y, T, H, P, N, G, dtMin, dtMax, ptile, lanes
// MINB: blocks per SM the register budget is cut for (4: 64 registers for 4 vectors a thread).
#define M2V_K(SUF, W, L, VKB, VEC, KM, MINB)                                                                 \
    extern "C" __global__ void __launch_bounds__(256, MINB)                                                 \
        m2_replay_verify_##L##_v##VEC##_k##KM##_##SUF(M2V_PARAMS(W)) {                                      \
        m2_replay_verify_impl<VKB, VEC, KM, W>(M2V_ARGS);                                                   \
    }
#define M2V_L(SUF, W, L, VKB) M2V_K(SUF, W, L, VKB, 4, 4, 4) M2V_K(SUF, W, L, VKB, 1, 16, 2)
#define M2V(SUF, W) M2V_L(SUF, W, vk, true) M2V_L(SUF, W, kv, false)
HYSPEC_FOR_WEIGHT_TYPES(M2V)

// ---------------------------------------------------------------------------------------------------
// VK states with N = 128 and 16-byte vectors, T (1 .. M2V_TC) fixed at compile time: the Nemotron-H /
// Mamba2 shape. The generic kernel above gives a thread 16 columns of one row p, so every B_j and C_t
// element it reads from shared memory feeds one multiply-add: the shared-memory pipe, not the state
// traffic, bounds it from T = 2 on. Here a thread holds a 4 x 4 block (rows p .. p+3 of its warp,
// columns n = 4*lane .. 4*lane+3): one 16-byte B_j (and one broadcast x_j) vector feeds 16 updates in
// the replay, one C_t vector 16 products in the outputs. A warp covers 4 rows and all 128 columns,
// a block NW warps = 4*NW rows (grid (ceil(P/(4*NW)), H, R), 32*NW threads, static shared memory).
// NW = 8 keeps the index arithmetic written for 256 threads (the `if constexpr (NW == 8)` branches):
// its code generation was measured as is, and the general form ran T = 6 about 15 % slower.
// The 4 row sums of each token reduce over the warp's 32 lanes two tokens at a time by a butterfly
// that halves the values each step (9 shuffles for 8 sums instead of 40); C_t . B_j likewise, one warp
// per token t. The step's scalars are one warp's (the last): dt_t before the first barrier, then c_t
// once, and every e^{c_t - c_j} and e^{c_t} in one pass of its lanes, so their double-precision chains
// are one deep and run beside the replay (measured on the H100 at the 8B shape, batch 32 .. 256, against
// every warp t taking its own row of exponentials after its outputs and every thread computing A:
// T = 6 4-7 % and T = 1 6-8 % faster, the results bit for bit the same).
#define M2R_N 128

// Butterfly reduce-scatter of 8 values over a warp: afterwards lanes whose (lane>>2)&7 is k hold the
// sum over all 32 lanes of v[k] (k = 4*bit4(lane) + 2*bit3(lane) + bit2(lane)) in v[0].
__device__ __forceinline__ void m2r_reduce8(float (&v)[8], int lane) {
    const bool b16 = lane & 16, b8 = lane & 8, b4 = lane & 4;
#pragma unroll
    for (int k = 0; k < 4; k++) {
        float keep = b16 ? v[k + 4] : v[k], send = b16 ? v[k] : v[k + 4];
        v[k] = keep + __shfl_xor_sync(0xffffffffu, send, 16);
    }
#pragma unroll
    for (int k = 0; k < 2; k++) {
        float keep = b8 ? v[k + 2] : v[k], send = b8 ? v[k] : v[k + 2];
        v[k] = keep + __shfl_xor_sync(0xffffffffu, send, 8);
    }
    {
        float keep = b4 ? v[1] : v[0], send = b4 ? v[0] : v[1];
        v[0] = keep + __shfl_xor_sync(0xffffffffu, send, 4);
    }
    v[0] += __shfl_xor_sync(0xffffffffu, v[0], 2);
    v[0] += __shfl_xor_sync(0xffffffffu, v[0], 1);
}

__device__ __forceinline__ int m2r_slot8(int lane) { return (lane >> 2) & 7; }

__device__ __forceinline__ float4 m2r_lds4(const float* p) { return *reinterpret_cast<const float4*>(p); }

template <int TT, int NW, typename W>
__device__ void m2_replay_verify_vk128_impl(float* const* __restrict__ states, const float* const* __restrict__ prevs,
                                            const int* __restrict__ counts, const float* __restrict__ xBCAll,
                                            const float* __restrict__ dtRawAll, const W* __restrict__ dtBias,
                                            const W* __restrict__ aLog, const W* __restrict__ dd,
                                            float* const* __restrict__ nexts, float* __restrict__ yAll, int H, int P,
                                            int G, float dtMin, float dtMax) {
    constexpr int N = M2R_N, PT = 4 * NW, NT = 32 * NW, TC = M2V_TC, XV = PT / 4;
    __shared__ __align__(16) float sB[TT][N];      // B_t
    __shared__ __align__(16) float sC[TT][N];      // C_t
    __shared__ __align__(16) float sx[TT][PT];     // x_t of the tile
    __shared__ __align__(16) float pX[TC][PT];     // previous tokens' x (the tile)
    __shared__ __align__(16) float pB[TC][N];      // previous tokens' B
    __shared__ __align__(16) float red[TT][PT];    // C_t . S(L) per row
    __shared__ float cbd[TT][TT];                  // C_t . B_j
    __shared__ float ef[TT][TT];                   // e^{c_t - c_j}
    __shared__ float sw[TC], sdt[TT], scs[TT], scar[TT], seL, sA;

    const int r = blockIdx.z, h = blockIdx.y, p0 = blockIdx.x * PT;
    const int pw = min(PT, P - p0);                 // a multiple of 4
    const int hpg = H / G, g = h / hpg;
    const int conv = H * P + 2 * G * N;
    const int width = H * P + G * N + 2 * H;
    const int bOff = H * P + g * N, cOff = H * P + G * N + g * N, hDt = H * P + G * N;
    const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
    const int row0 = warp * 4;                      // the warp's rows p0 + row0 .. +3
    const bool rowsOk = row0 < pw;
    const int col = lane * 4;

    float* S = states[r] + ((long)h * P + p0) * N;
    const float* prev = prevs[r];
    const int count = counts[r];
    const float* xBC = xBCAll + (long)r * TT * conv;

    // Round 1: the state block, this step's dt, the previous tokens' weights' inputs.
    float s[4][4];
#pragma unroll
    for (int i = 0; i < 4; i++) {
        if (rowsOk) {
            float4 q = __ldcs(reinterpret_cast<const float4*>(S + (long)(row0 + i) * N + col));
            s[i][0] = q.x; s[i][1] = q.y; s[i][2] = q.z; s[i][3] = q.w;
        } else {
            s[i][0] = s[i][1] = s[i][2] = s[i][3] = 0.f;
        }
    }
    const int jc0 = min(TC, count);
    const int jt = tid - 32;
    constexpr int SW = NW - 1;                      // the scalar warp: dt_t, c_t and the e^{c_t - c_j}
    float dtr = 0.f, cj = 0.f, dtj = 0.f, cL = 0.f, al = 0.f;
    if (warp == SW && lane < TT) dtr = dtRawAll[((long)r * TT + lane) * H + h];
    if (tid == 0) al = ld(aLog, h);
    if ((jt >= 0 && jt < jc0) || tid == 64) {
        if (count > 0) cL = prev[(long)(count - 1) * width + hDt + H + h];
        if (jt >= 0 && jt < jc0) {
            cj = prev[(long)jt * width + hDt + H + h];
            dtj = prev[(long)jt * width + hDt + h];
        }
    }
    if constexpr (NW == 8) {
    // Round 2: the tokens' B, C (2*TT*32 vectors), x (TT*8), the previous tokens' x (jc*8) and B (jc*32);
    // at most 2 + 1 + 1 + 1 vectors a thread, all loads before the stores.
    {
        float4 v0, v1, v2, v3, v4;
        const int e0 = tid, e1 = tid + 256;
        const bool a0 = e0 < 2 * TT * 32, a1 = e1 < 2 * TT * 32;
        const bool a2 = tid < TT * 8 && (tid & 7) * 4 < pw;
        const bool a3 = tid < jc0 * 8 && (tid & 7) * 4 < pw;
        const bool a4 = tid < jc0 * 32;
        auto bc = [&](int e) {
            const int q = e >> 5, c = (e & 31) * 4;
            return reinterpret_cast<const float4*>(xBC + (long)(q < TT ? q : q - TT) * conv + (q < TT ? bOff : cOff) + c);
        };
        if (a0) v0 = *bc(e0);
        if (a1) v1 = *bc(e1);
        if (a2) v2 = *reinterpret_cast<const float4*>(xBC + (long)(tid >> 3) * conv + h * P + p0 + (tid & 7) * 4);
        if (a3) v3 = *reinterpret_cast<const float4*>(prev + (long)(tid >> 3) * width + h * P + p0 + (tid & 7) * 4);
        if (a4) v4 = *reinterpret_cast<const float4*>(prev + (long)(tid >> 5) * width + bOff + (tid & 31) * 4);
        float* sBC = &sB[0][0];   // sB and sC are contiguous: [2*TT][N]
        if (a0) *reinterpret_cast<float4*>(e0 < TT * 32 ? sBC + e0 * 4 : &sC[0][0] + (e0 - TT * 32) * 4) = v0;
        if (a1) *reinterpret_cast<float4*>(e1 < TT * 32 ? sBC + e1 * 4 : &sC[0][0] + (e1 - TT * 32) * 4) = v1;
        if (a2) *reinterpret_cast<float4*>(&sx[tid >> 3][(tid & 7) * 4]) = v2;
        if (a3) *reinterpret_cast<float4*>(&pX[tid >> 3][(tid & 7) * 4]) = v3;
        if (a4) *reinterpret_cast<float4*>(&pB[tid >> 5][(tid & 31) * 4]) = v4;
    }
    } else {
    // Round 2: the tokens' B, C (2*TT*32 vectors), x (TT*XV), the previous tokens' x (jc*XV) and B (jc*32),
    // all loads of a thread before its stores.
    {
        constexpr int UBC = (2 * TT * 32 + NT - 1) / NT, UX = (TT * XV + NT - 1) / NT;
        constexpr int UPX = (TC * XV + NT - 1) / NT, UP = (TC * 32 + NT - 1) / NT;
        float4 vbc[UBC], vx[UX], vpx[UPX], vpb[UP];
#pragma unroll
        for (int u = 0; u < UBC; u++) {
            const int e = tid + u * NT, q = e >> 5, c = (e & 31) * 4;
            if (e < 2 * TT * 32)
                vbc[u] = *reinterpret_cast<const float4*>(xBC + (long)(q < TT ? q : q - TT) * conv + (q < TT ? bOff : cOff) + c);
        }
#pragma unroll
        for (int u = 0; u < UX; u++) {
            const int e = tid + u * NT;
            if (e < TT * XV && (e % XV) * 4 < pw)
                vx[u] = *reinterpret_cast<const float4*>(xBC + (long)(e / XV) * conv + h * P + p0 + (e % XV) * 4);
        }
#pragma unroll
        for (int u = 0; u < UPX; u++) {
            const int e = tid + u * NT;
            if (e < jc0 * XV && (e % XV) * 4 < pw)
                vpx[u] = *reinterpret_cast<const float4*>(prev + (long)(e / XV) * width + h * P + p0 + (e % XV) * 4);
        }
#pragma unroll
        for (int u = 0; u < UP; u++) {
            const int e = tid + u * NT;
            if (e < jc0 * 32) vpb[u] = *reinterpret_cast<const float4*>(prev + (long)(e >> 5) * width + bOff + (e & 31) * 4);
        }
#pragma unroll
        for (int u = 0; u < UBC; u++) {
            const int e = tid + u * NT;
            if (e < 2 * TT * 32)
                *reinterpret_cast<float4*>(e < TT * 32 ? &sB[0][0] + e * 4 : &sC[0][0] + (e - TT * 32) * 4) = vbc[u];
        }
#pragma unroll
        for (int u = 0; u < UX; u++) {
            const int e = tid + u * NT;
            if (e < TT * XV && (e % XV) * 4 < pw) *reinterpret_cast<float4*>(&sx[e / XV][(e % XV) * 4]) = vx[u];
        }
#pragma unroll
        for (int u = 0; u < UPX; u++) {
            const int e = tid + u * NT;
            if (e < jc0 * XV && (e % XV) * 4 < pw) *reinterpret_cast<float4*>(&pX[e / XV][(e % XV) * 4]) = vpx[u];
        }
#pragma unroll
        for (int u = 0; u < UP; u++) {
            const int e = tid + u * NT;
            if (e < jc0 * 32) *reinterpret_cast<float4*>(&pB[e >> 5][(e & 31) * 4]) = vpb[u];
        }
    }
    }
    if (jt >= 0 && jt < jc0) sw[jt] = m2_exp(__fsub_rn(cL, cj)) * dtj;
    if (tid == 64) seL = count > 0 ? m2_exp(cL) : 1.f;
    if (tid == 0) sA = m2_a(al);
    if (warp == SW && lane < TT) sdt[lane] = m2_dt(dtr, ld(dtBias, h), dtMin, dtMax);
    __syncthreads();

    // The scalar warp: c_t = sum_{i<=t} A dt_i, then e^{c_t - c_j} (j <= t) and e^{c_t}, one lane each,
    // and the first tile's history dt and c; read only after the second barrier. At 8 warps these
    // double-precision exponentials run here, beside the other warps' replay; at 4 the warp runs them
    // after its outputs, where its state registers are free (before the replay they cost spills).
    constexpr int PAIRS = TT * (TT + 1) / 2;
    constexpr bool SCALARS_EARLY = NW == 8;
    auto scalars = [&]() {
        if (warp != SW) return;
        if (lane < TT) scs[lane] = m2v_csum(sdt, lane, sA);
        __syncwarp();
        for (int k = lane; k < PAIRS + TT; k += 32) {
            if (k < PAIRS) {
                int t = 0;
                while ((t + 1) * (t + 2) / 2 <= k) t++;
                const int j = k - t * (t + 1) / 2;
                ef[t][j] = m2_exp(__fsub_rn(scs[t], scs[j]));
            } else {
                scar[k - PAIRS] = m2_exp(scs[k - PAIRS]);
            }
        }
        if (blockIdx.x == 0 && lane < TT) {
            float* next = nexts[r];
            next[(long)lane * width + hDt + h] = sdt[lane];
            next[(long)lane * width + hDt + H + h] = scs[lane];
        }
    };
    if constexpr (SCALARS_EARLY) scalars();

    // Replay: S(L) = e^{c_{count-1}} S_old + sum_j (w_j x_j[p]) B_j[n], TC previous tokens at a time.
    for (int j0 = 0; j0 == 0 || j0 < count; j0 += TC) {
        const int jc = min(TC, count - j0);
        if (j0 > 0) {
            __syncthreads();   // the previous chunk is no longer read
            if constexpr (NW == 8) {
            if (tid < jc * 8 && (tid & 7) * 4 < pw) {
                *reinterpret_cast<float4*>(&pX[tid >> 3][(tid & 7) * 4]) = *reinterpret_cast<const float4*>(
                        prev + (long)(j0 + (tid >> 3)) * width + h * P + p0 + (tid & 7) * 4);
            }
            if (tid < jc * 32) {
                *reinterpret_cast<float4*>(&pB[tid >> 5][(tid & 31) * 4]) = *reinterpret_cast<const float4*>(
                        prev + (long)(j0 + (tid >> 5)) * width + bOff + (tid & 31) * 4);
            }
            } else {
            for (int e = tid; e < jc * XV; e += NT) {
                if ((e % XV) * 4 < pw) {
                    *reinterpret_cast<float4*>(&pX[e / XV][(e % XV) * 4]) = *reinterpret_cast<const float4*>(
                            prev + (long)(j0 + e / XV) * width + h * P + p0 + (e % XV) * 4);
                }
            }
            for (int e = tid; e < jc * 32; e += NT) {
                *reinterpret_cast<float4*>(&pB[e >> 5][(e & 31) * 4]) = *reinterpret_cast<const float4*>(
                        prev + (long)(j0 + (e >> 5)) * width + bOff + (e & 31) * 4);
            }
            }
            if (jt >= 0 && jt < jc) {
                const float* row = prev + (long)(j0 + jt) * width;
                sw[jt] = m2_exp(__fsub_rn(cL, row[hDt + H + h])) * row[hDt + h];
            }
            __syncthreads();
        } else if (count > 0) {
            const float eL = seL;
#pragma unroll
            for (int i = 0; i < 4; i++)
#pragma unroll
                for (int v = 0; v < 4; v++) s[i][v] *= eL;
        }
#pragma unroll 2
        for (int jj = 0; jj < jc; jj++) {
            const float w = sw[jj];
            const float4 xr = m2r_lds4(&pX[jj][row0 & (PT - 1)]);
            const float4 b = m2r_lds4(&pB[jj][col]);
            const float xs[4] = {xr.x, xr.y, xr.z, xr.w};
#pragma unroll
            for (int i = 0; i < 4; i++) {
                const float c = w * xs[i];
                s[i][0] += c * b.x; s[i][1] += c * b.y; s[i][2] += c * b.z; s[i][3] += c * b.w;
            }
        }
    }
    if (count > 0 && rowsOk) {
#pragma unroll
        for (int i = 0; i < 4; i++) {
            __stcs(reinterpret_cast<float4*>(S + (long)(row0 + i) * N + col), make_float4(s[i][0], s[i][1], s[i][2], s[i][3]));
        }
    }

    // History rows of this step: x (this tile), B (the group's first head, first tile); dt and c above.
    float* next = nexts[r];
    if constexpr (NW == 8) {
    if (tid < TT * 8 && (tid & 7) * 4 < pw) {
        *reinterpret_cast<float4*>(next + (long)(tid >> 3) * width + h * P + p0 + (tid & 7) * 4) =
                m2r_lds4(&sx[tid >> 3][(tid & 7) * 4]);
    }
    } else {
    for (int e = tid; e < TT * XV; e += NT) {
        if ((e % XV) * 4 < pw) {
            *reinterpret_cast<float4*>(next + (long)(e / XV) * width + h * P + p0 + (e % XV) * 4) =
                    m2r_lds4(&sx[e / XV][(e % XV) * 4]);
        }
    }
    }
    if (blockIdx.x == 0 && h % hpg == 0) {
        for (int i = tid; i < TT * 32; i += blockDim.x) {
            *reinterpret_cast<float4*>(next + (long)(i >> 5) * width + bOff + (i & 31) * 4) = m2r_lds4(&sB[i >> 5][(i & 31) * 4]);
        }
    }

    // C_t . S(L): tokens two at a time, 8 row sums reduced over the warp.
#pragma unroll
    for (int t0 = 0; t0 < TT; t0 += 2) {
        float v[8];
#pragma unroll
        for (int u = 0; u < 2; u++) {
            const int t = t0 + u;
            if (t < TT) {
                const float4 c = m2r_lds4(&sC[t][col]);
#pragma unroll
                for (int i = 0; i < 4; i++) {
                    v[u * 4 + i] = s[i][0] * c.x + s[i][1] * c.y + s[i][2] * c.z + s[i][3] * c.w;
                }
            } else {
#pragma unroll
                for (int i = 0; i < 4; i++) v[u * 4 + i] = 0.f;
            }
        }
        m2r_reduce8(v, lane);
        const int k = m2r_slot8(lane), t = t0 + (k >> 2);
        if ((lane & 3) == 0 && t < TT && rowsOk) red[t][row0 + (k & 3)] = v[0];
    }
    if constexpr (!SCALARS_EARLY) scalars();
    // Warp t < TT: C_t . B_j for j <= t.
    auto dots = [&](int t) {
        const float4 c = m2r_lds4(&sC[t][col]);
        float v[8];
#pragma unroll
        for (int j = 0; j < 8; j++) {
            if (j < TT && j <= t) {
                const float4 b = m2r_lds4(&sB[j][col]);
                v[j] = c.x * b.x + c.y * b.y + c.z * b.z + c.w * b.w;
            } else {
                v[j] = 0.f;
            }
        }
        m2r_reduce8(v, lane);
        const int j = m2r_slot8(lane);
        if ((lane & 3) == 0 && j <= t) cbd[t][j] = v[0];
    };
    if constexpr (NW == 8) {
        if (warp < TT) dots(warp);
    } else {
#pragma unroll
        for (int t = warp; t < TT; t += NW) dots(t);
    }
    __syncthreads();

    // y_t[p] = e^{c_t} (C_t . S(L))[p] + sum_{j<=t} (C_t . B_j) e^{c_t - c_j} dt_j x_j[p] + D x_t[p], one
    // element a thread.
    const float Dh = ld(dd, h);
    float* y = yAll + (long)r * TT * H * P + (long)h * P + p0;
    for (int i = tid; i < TT * PT; i += blockDim.x) {
        const int t = i / PT, pl = i % PT;
        if (pl < pw) {
            float v = scar[t] * red[t][pl];
#pragma unroll
            for (int j = 0; j < TT; j++) {
                if (j <= t) {
                    const float coef = cbd[t][j] * ef[t][j] * sdt[j];
                    v += coef * sx[j][pl];
                }
            }
            v += Dh * sx[t][pl];
            y[(long)t * H * P + pl] = v;
        }
    }
}

#define M2R_K2(SUF, W, TT, NW, NAME, MINB)                                                                                     \
    extern "C" __global__ void __launch_bounds__(32 * NW, MINB) NAME(                \
        float *const *states, const float *const *prevs, const int *counts, const float *xBC,                 \
        const float *dtRaw, const W *dtBias, const W *aLog, const W *dd, float *const *nexts, float *y, int H, \
        int P, int G, float dtMin, float dtMax) {                                                             \
        m2_replay_verify_vk128_impl<TT, NW, W>(states, prevs, counts, xBC, dtRaw, dtBias, aLog, dd, nexts, y, H, \
                                           P, G, dtMin, dtMax);                                               \
    }
// T = 2 .. 4: 4 warps (16 rows, 8 blocks an SM); T = 5 .. 8 and T = 1: 8 warps (32 rows, 4 blocks an SM),
// each the fastest of the three at its T on the H100 at the 8B shape (StateUpdateBench, batch 32 .. 256).
// At T = 1 the 8-warp kernel measured 2-3 % faster than the generic one and the 4-warp one 7-9 % slower
// before the scalar warp; with it, 10 % faster than the generic one.
#define M2R(SUF, W)                                                                                   \
    M2R_K2(SUF, W, 1, 4, m2_replay_verify_vk128w4_t1_##SUF, 8) M2R_K2(SUF, W, 1, 8, m2_replay_verify_vk128_t1_##SUF, 4) \
    M2R_K2(SUF, W, 2, 4, m2_replay_verify_vk128w4_t2_##SUF, 8)                                        \
    M2R_K2(SUF, W, 3, 4, m2_replay_verify_vk128w4_t3_##SUF, 8)                                        \
    M2R_K2(SUF, W, 4, 4, m2_replay_verify_vk128w4_t4_##SUF, 8)                                        \
    M2R_K2(SUF, W, 5, 8, m2_replay_verify_vk128_t5_##SUF, 4) M2R_K2(SUF, W, 6, 8, m2_replay_verify_vk128_t6_##SUF, 4) \
    M2R_K2(SUF, W, 7, 8, m2_replay_verify_vk128_t7_##SUF, 4) M2R_K2(SUF, W, 8, 8, m2_replay_verify_vk128_t8_##SUF, 4)
HYSPEC_FOR_WEIGHT_TYPES(M2R)
