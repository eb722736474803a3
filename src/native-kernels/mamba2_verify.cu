// The replay verify of R rows in one launch (DESIGN §4 I4, steps 1-3; Backend.mamba2ReplayVerifyBatch).
// Per row r, head h and tile of p values a block
//   1. reads its part of S_old = states[r] once, in 16-byte vectors, into registers;
//   2. replays the row's counts[r] previous tokens (history previous[r]) in one rank-count update,
//        S(L) = e^{c_{count-1}} S_old + sum_{j<count} (e^{c_{count-1}-c_j} dt_j x_j) (x) B_j,
//      and writes S(L) back once (not at all when count = 0: S(L) = S_old);
//   3. computes the T outputs from the registers,
//        y_t = e^{c_t} (C_t . S(L)) + sum_{j<=t} (C_t . B_j) e^{c_t-c_j} dt_j x_j + D x_t,
//      and writes the tokens' history rows [x | B | dt | c] to next[r].
// State traffic per row: one read and at most one write of |S|. The per-token vectors (x, B, C, dt
// and the previous tokens' rows) are staged in shared memory once per block. The math and its
// rounding order are CpuBackend.mamba2Replay / mamba2ReplayOutputs'.
//
// Tile and thread mapping: a tile is the full N range of `ptile` p values of one head, viewed as
// state rows (VK: p, N contiguous; KV: n, P contiguous) of VEC-float vectors along the contiguous
// dimension. `lanes` threads (a power of two <= 32) share a state row, each one vector; the block's
// 256 / lanes row threads hold KM rows each, row rt + rts*k. VK reduces C . S over its row's lanes
// by shuffles; KV reduces over the rows (n) by shuffles within a warp, then across warps in shared
// memory. grid (p tiles, H, R). Per-row addresses and counts come from staged device tables.
#include "mamba2.cuh"

#define M2V_TC 8   // tokens per row, and previous tokens staged per chunk

extern __shared__ float m2v_smem[];

template <int VEC>
__device__ __forceinline__ void m2v_load(float (&d)[VEC], const float* p) {
    if constexpr (VEC == 4) {
        float4 q = __ldcs(reinterpret_cast<const float4*>(p));   // streamed: read once per call
        d[0] = q.x; d[1] = q.y; d[2] = q.z; d[3] = q.w;
    } else {
        d[0] = __ldcs(p);
    }
}

template <int VEC>
__device__ __forceinline__ void m2v_store(float* p, const float (&d)[VEC]) {
    if constexpr (VEC == 4) {
        __stcs(reinterpret_cast<float4*>(p), make_float4(d[0], d[1], d[2], d[3]));
    } else {
        __stcs(p, d[0]);
    }
}

// c_t = sum_{i<=t} A dt_i, summed as the CPU does (no fused multiply-add).
__device__ __forceinline__ float m2v_csum(const float* sdt, int t, float A) {
    float c = 0.f;
    for (int i = 0; i <= t; i++) c = __fadd_rn(c, __fmul_rn(A, sdt[i]));
    return c;
}

template <bool VK, int VEC, int KM, typename W>
__device__ void m2_replay_verify_impl(float* const* __restrict__ states, const float* const* __restrict__ prevs,
                                      const int* __restrict__ counts, const float* __restrict__ xBCAll,
                                      const float* __restrict__ dtRawAll, const W* __restrict__ dtBias,
                                      const W* __restrict__ aLog, const W* __restrict__ dd,
                                      float* const* __restrict__ nexts, float* __restrict__ yAll, int T, int H, int P,
                                      int N, int G, float dtMin, float dtMax, int ptile, int lanes) {
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
    const int col = lane * VEC;                 // this thread's first column
    const bool colLive = col < colsT;
    float* S = states[r] + (long)h * P * N;

    // 1. The state tile, every load issued before anything waits.
    float s[KM][VEC];
#pragma unroll
    for (int k = 0; k < KM; k++) {
        const int row = rt + rts * k;
        if (colLive && row < rowsT) {
            m2v_load<VEC>(s[k], S + (VK ? (long)(p0 + row) * N + col : (long)row * P + p0 + col));
        } else {
#pragma unroll
            for (int v = 0; v < VEC; v++) s[k][v] = 0.f;
        }
    }

    const float* xBC = xBCAll + (long)r * T * conv;
    const float* prev = prevs[r];
    float* next = nexts[r];
    const int count = counts[r];
    float* sB = m2v_smem;                       // [T][N]      B_t
    float* sC = sB + T * N;                     // [T][N]      C_t
    float* sx = sC + T * N;                     // [T][ptile]  x_t of the tile
    float* pRow = sx + T * ptile;               // [TC][rowsMax] previous tokens' row vectors (VK x_j, KV B_j)
    float* pCol = pRow + M2V_TC * rowsMax;      // [TC][colsMax] and column vectors (VK B_j, KV x_j)
    float* sw = pCol + M2V_TC * colsMax;        // [TC]  e^{c_{count-1} - c_j} dt_j
    float* sdt = sw + M2V_TC;                   // [TC]  dt_t
    float* scar = sdt + M2V_TC;                 // [TC]  e^{c_t}
    float* wc = scar + M2V_TC;                  // [TC][TC] (C_t . B_j) e^{c_t - c_j} dt_j
    float* red = wc + M2V_TC * M2V_TC;          // VK: [T][ptile]; KV: [T][warps][ptile]

    // The tokens' inputs, staged and written to the history rows (x: this tile's p; B: the group's
    // first head, first tile; dt and c below).
    const bool writeB = blockIdx.x == 0 && h % hpg == 0;
    for (int i = tid; i < T * N; i += blockDim.x) {
        const int t = i / N, n = i % N;
        const float* row = xBC + (long)t * conv;
        const float b = row[bOff + n];
        sB[i] = b;
        sC[i] = row[cOff + n];
        if (writeB) next[(long)t * width + bOff + n] = b;
    }
    for (int i = tid; i < T * ptile; i += blockDim.x) {
        const int t = i / ptile, pl = i % ptile;
        const float x = pl < pw ? xBC[(long)t * conv + h * P + p0 + pl] : 0.f;
        sx[i] = x;
        if (pl < pw) next[(long)t * width + h * P + p0 + pl] = x;
    }
    if (tid < T) sdt[tid] = m2_dt(dtRawAll[((long)r * T + tid) * H + h], ld(dtBias, h), dtMin, dtMax);

    // 2. Replay, previous tokens staged M2V_TC at a time (one chunk at the verify widths).
    const float cL = count > 0 ? prev[(long)(count - 1) * width + hDt + H + h] : 0.f;
    for (int j0 = 0; j0 == 0 || j0 < count; j0 += M2V_TC) {
        const int jc = min(M2V_TC, count - j0);
        if (j0 > 0) __syncthreads();   // the previous chunk is no longer read
        for (int i = tid; i < jc * rowsT; i += blockDim.x) {
            const int jj = i / rowsT, rl = i % rowsT;
            const float* row = prev + (long)(j0 + jj) * width;
            pRow[jj * rowsMax + rl] = VK ? row[h * P + p0 + rl] : row[bOff + rl];
        }
        for (int i = tid; i < jc * colsT; i += blockDim.x) {
            const int jj = i / colsT, c = i % colsT;
            const float* row = prev + (long)(j0 + jj) * width;
            pCol[jj * colsMax + c] = VK ? row[bOff + c] : row[h * P + p0 + c];
        }
        if (tid < jc) {
            const float* row = prev + (long)(j0 + tid) * width;
            sw[tid] = m2_exp(__fsub_rn(cL, row[hDt + H + h])) * row[hDt + h];
        }
        __syncthreads();
        if (j0 == 0 && count > 0) {
            const float eL = m2_exp(cL);
#pragma unroll
            for (int k = 0; k < KM; k++)
#pragma unroll
                for (int v = 0; v < VEC; v++) s[k][v] *= eL;
        }
        if (colLive) {
#pragma unroll
            for (int k = 0; k < KM; k++) {
                const int row = rt + rts * k;
                if (row < rowsT) {
                    for (int jj = 0; jj < jc; jj++) {
                        const float coef = sw[jj] * pRow[jj * rowsMax + row];
                        const float* cv = pCol + jj * colsMax + col;
#pragma unroll
                        for (int v = 0; v < VEC; v++) s[k][v] += coef * cv[v];
                    }
                }
            }
        }
    }
    if (count > 0 && colLive) {
#pragma unroll
        for (int k = 0; k < KM; k++) {
            const int row = rt + rts * k;
            if (row < rowsT) m2v_store<VEC>(S + (VK ? (long)(p0 + row) * N + col : (long)row * P + p0 + col), s[k]);
        }
    }

    // 3. Outputs. e^{c_t}, the history's dt and c, and wc[t][j] (one warp per pair).
    const float A = m2_a(ld(aLog, h));
    if (tid < T) {
        const float c = m2v_csum(sdt, tid, A);
        scar[tid] = m2_exp(c);
        if (blockIdx.x == 0) {
            next[(long)tid * width + hDt + h] = sdt[tid];
            next[(long)tid * width + hDt + H + h] = c;
        }
    }
    const int warp = tid >> 5, wl = tid & 31, warps = blockDim.x >> 5;
    for (int q = warp; q < T * (T + 1) / 2; q += warps) {
        int t = 0;
        while ((t + 1) * (t + 2) / 2 <= q) t++;
        const int j = q - t * (t + 1) / 2;
        float v = 0.f;
        for (int n = wl; n < N; n += 32) v += sC[t * N + n] * sB[j * N + n];
        v = warp_sum(v);
        if (wl == 0) {
            wc[t * M2V_TC + j] = v * m2_exp(__fsub_rn(m2v_csum(sdt, t, A), m2v_csum(sdt, j, A))) * sdt[j];
        }
    }
    // C_t . S(L) for the tile's p values, into red.
    for (int t = 0; t < T; t++) {
        const float* C = sC + t * N;
        if (VK) {
#pragma unroll
            for (int k = 0; k < KM; k++) {
                const int row = rt + rts * k;
                float part = 0.f;
                if (colLive) {
#pragma unroll
                    for (int v = 0; v < VEC; v++) part += s[k][v] * C[col + v];
                }
                part = m2_group_sum(part, lanes);
                if (lane == 0 && row < rowsT) red[t * ptile + row] = part;
            }
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
            if (wl < lanes && colLive) {
#pragma unroll
                for (int v = 0; v < VEC; v++) red[(t * warps + warp) * ptile + col + v] = part[v];
            }
        }
    }
    __syncthreads();
    float* y = yAll + (long)r * T * H * P + (long)h * P + p0;
    const float Dh = ld(dd, h);
    for (int i = tid; i < T * pw; i += blockDim.x) {
        const int t = i / pw, pl = i % pw;
        float ystate;
        if (VK) {
            ystate = red[t * ptile + pl];
        } else {
            ystate = 0.f;
            for (int w = 0; w < warps; w++) ystate += red[(t * warps + w) * ptile + pl];
        }
        float v = scar[t] * ystate;
        for (int j = 0; j <= t; j++) v += wc[t * M2V_TC + j] * sx[j * ptile + pl];
        v += Dh * sx[t * ptile + pl];
        y[(long)t * H * P + pl] = v;
    }
}

#define M2V_PARAMS(W)                                                                                        \
    float *const *states, const float *const *prevs, const int *counts, const float *xBC, const float *dtRaw, \
        const W *dtBias, const W *aLog, const W *dd, float *const *nexts, float *y, int T, int H, int P, int N,  \
        int G, float dtMin, float dtMax, int ptile, int lanes
#define M2V_ARGS states, prevs, counts, xBC, dtRaw, dtBias, aLog, dd, nexts, y, T, H, P, N, G, dtMin, dtMax, ptile, lanes
#define M2V_K(SUF, W, L, VKB, VEC, KM)                                                                       \
    extern "C" __global__ void __launch_bounds__(256) m2_replay_verify_##L##_v##VEC##_k##KM##_##SUF(M2V_PARAMS(W)) { \
        m2_replay_verify_impl<VKB, VEC, KM, W>(M2V_ARGS);                                                   \
    }
#define M2V_L(SUF, W, L, VKB)                                                                               \
    M2V_K(SUF, W, L, VKB, 4, 4) M2V_K(SUF, W, L, VKB, 4, 8) M2V_K(SUF, W, L, VKB, 1, 4)                     \
    M2V_K(SUF, W, L, VKB, 1, 8) M2V_K(SUF, W, L, VKB, 1, 16)
#define M2V(SUF, W) M2V_L(SUF, W, vk, true) M2V_L(SUF, W, kv, false)
HYSPEC_FOR_WEIGHT_TYPES(M2V)
