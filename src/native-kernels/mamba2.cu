// Mamba2 state operations: the prefill scan, the scan that writes every token's state (the
// intermediate-copy verify), both also for R rows in one launch (pointer tables), the rank-count
// replay update, the outputs of T tokens straight from a state (replay verify; the fused batched
// replay verify is mamba2_verify.cu) and the in-place KV <-> VK transpose. The math is Backend's;
// the CPU backend is the reference; scalar helpers in mamba2.cuh.
//
// State per head h: VK is [P, N] (N contiguous), KV is [N, P] (P contiguous).
//
// Thread mapping of the scans and replay outputs ("p-tile" blocks): a block owns the full N range
// of a tile of p values of one head; each thread owns one p and K values of n,
//   VK: lanes = L (a power of two <= 32) threads per p row, n = lane + L*k (coalesced along n),
//       the reduction over n for y is a shuffle within the L lanes;
//   KV: lanes = PT threads per n row, one p each (coalesced along p), n = sub + NSUB*k, the
//       reduction over n goes through shared memory.
#include "mamba2.cuh"

#define M2_MAXK 16   // state elements per thread in the p-tile kernels (variants _k4, _k8, _k16)
#define M2_TC 8      // tokens staged in shared memory at a time
#define M2_MAXS 8    // destination states per scan-states launch

extern __shared__ float m2_smem[];

struct M2Map {
    int pl;      // p within the tile
    int p;       // p of the head
    int nBase;   // first n
    int nStride; // n step
    bool live;   // p < P
};

template <bool VK>
__device__ __forceinline__ M2Map m2_map(int ptile, int lanes, int nsub, int P) {
    M2Map m;
    int tid = threadIdx.x;
    if (VK) {
        m.pl = tid / lanes;
        m.nBase = tid % lanes;
        m.nStride = lanes;
    } else {
        m.pl = tid % lanes;
        m.nBase = tid / lanes;
        m.nStride = nsub;
    }
    m.p = blockIdx.y * ptile + m.pl;
    m.live = m.pl < ptile && m.p < P && (VK || m.nBase < nsub);
    return m;
}

// Address of state element (h, p, n) within a state of H heads.
template <bool VK>
__device__ __forceinline__ long m2_at(int h, int p, int n, int P, int N) {
    return VK ? ((long)h * P + p) * N + n : ((long)h * N + n) * P + p;
}

// ---------------------------------------------------------------- scan / scan-states
//
// grid (H, p-tiles[, rows]), block as the mapping. Tokens 0..T-1 of this launch (pointers already
// offset to the launch's first token). Reads the state from `src` once; !STATES writes it to `dst`
// once at the end; STATES writes the state after token t to dsts[t] (a table in shared or global
// memory, t < T; T <= M2_MAXS for the single-row kernels).
template <bool VK, bool STATES, int KM, typename W>
__device__ void m2_scan_impl(const float* src, float* dst, float* const* dsts,
                             const float* __restrict__ xBC, const float* __restrict__ dtRaw,
                             const W* __restrict__ dtBias, const W* __restrict__ aLog, const W* __restrict__ dd,
                             float* __restrict__ y, int T, int H, int P, int N, int G, float dtMin, float dtMax,
                             int ptile, int lanes, int nsub, int K) {
    float* sm = m2_smem;
    const int h = blockIdx.x;
    const int g = h / (H / G);
    const int conv = H * P + 2 * G * N;
    const int bOff = H * P + g * N;
    const int cOff = H * P + G * N + g * N;
    float* sx = sm;                          // [TC][ptile]
    float* sb = sx + M2_TC * ptile;          // [TC][N]
    float* sc = sb + M2_TC * N;              // [TC][N]
    float* sdt = sc + M2_TC * N;             // [TC]
    float* sdec = sdt + M2_TC;               // [TC]
    float* red = sdec + M2_TC;               // KV: [2][nsub][ptile]
    const M2Map m = m2_map<VK>(ptile, lanes, nsub, P);
    const float A = m2_a(ld(aLog, h));
    const float bias = ld(dtBias, h);
    const float Dh = ld(dd, h);

    float s[KM];
#pragma unroll
    for (int k = 0; k < KM; k++) {
        int n = m.nBase + m.nStride * k;
        s[k] = (k < K && m.live && n < N) ? src[m2_at<VK>(h, m.p, n, P, N)] : 0.f;
    }
    int buf = 0;
    for (int t0 = 0; t0 < T; t0 += M2_TC) {
        const int tc = min(M2_TC, T - t0);
        __syncthreads();   // the previous chunk's staging is no longer read
        for (int i = threadIdx.x; i < tc * N; i += blockDim.x) {
            int tt = i / N, n = i % N;
            const float* row = xBC + (long)(t0 + tt) * conv;
            sb[tt * N + n] = row[bOff + n];
            sc[tt * N + n] = row[cOff + n];
        }
        for (int i = threadIdx.x; i < tc * ptile; i += blockDim.x) {
            int tt = i / ptile, pp = blockIdx.y * ptile + i % ptile;
            sx[i] = pp < P ? xBC[(long)(t0 + tt) * conv + h * P + pp] : 0.f;
        }
        if (threadIdx.x < tc) {
            float dt = m2_dt(dtRaw[(long)(t0 + threadIdx.x) * H + h], bias, dtMin, dtMax);
            sdt[threadIdx.x] = dt;
            sdec[threadIdx.x] = m2_exp(__fmul_rn(dt, A));
        }
        __syncthreads();
        for (int tt = 0; tt < tc; tt++) {
            const float dt = sdt[tt], dec = sdec[tt];
            const float xv = sx[tt * ptile + (m.pl < ptile ? m.pl : 0)];
            const float dx = dt * xv;
            const float* B = sb + tt * N;
            const float* C = sc + tt * N;
            float part = 0.f;
#pragma unroll
            for (int k = 0; k < KM; k++) {
                int n = m.nBase + m.nStride * k;
                if (k < K && n < N) {
                    float v = VK ? s[k] * dec + dx * B[n] : s[k] * dec + (dt * B[n]) * xv;
                    s[k] = v;
                    part += v * C[n];
                }
            }
            const int t = t0 + tt;
            if (STATES && m.live) {
                float* out = dsts[t];
#pragma unroll
                for (int k = 0; k < KM; k++) {
                    int n = m.nBase + m.nStride * k;
                    if (k < K && n < N) out[m2_at<VK>(h, m.p, n, P, N)] = s[k];
                }
            }
            float* yrow = y + (long)t * H * P + (long)h * P;
            if (VK) {
                part = m2_group_sum(part, lanes);
                if (m.live && m.nBase == 0) yrow[m.p] = part + Dh * xv;
            } else {
                float* r = red + buf * nsub * ptile;
                if (m.pl < ptile && m.nBase < nsub) r[m.nBase * ptile + m.pl] = part;
                __syncthreads();
                if (m.live && m.nBase == 0) {
                    float sum = 0.f;
                    for (int q = 0; q < nsub; q++) sum += r[q * ptile + m.pl];
                    yrow[m.p] = sum + Dh * xv;
                }
                buf ^= 1;
            }
        }
    }
    if (!STATES && m.live) {
#pragma unroll
        for (int k = 0; k < KM; k++) {
            int n = m.nBase + m.nStride * k;
            if (k < K && n < N) dst[m2_at<VK>(h, m.p, n, P, N)] = s[k];
        }
    }
}

// One row: the destinations come as kernel arguments d0..d7 and are gathered into a shared table
// (read after the scan's first barrier).
template <bool VK, bool STATES, int KM, typename W>
__device__ void m2_scan_row(const float* src, float* dst, float* d0, float* d1, float* d2, float* d3, float* d4,
                            float* d5, float* d6, float* d7, const float* xBC, const float* dtRaw, const W* dtBias,
                            const W* aLog, const W* dd, float* y, int T, int H, int P, int N, int G, float dtMin,
                            float dtMax, int ptile, int lanes, int nsub, int K) {
    __shared__ float* dsts[M2_MAXS];
    if (STATES && threadIdx.x == 0) {
        dsts[0] = d0; dsts[1] = d1; dsts[2] = d2; dsts[3] = d3;
        dsts[4] = d4; dsts[5] = d5; dsts[6] = d6; dsts[7] = d7;
    }
    m2_scan_impl<VK, STATES, KM, W>(src, dst, dsts, xBC, dtRaw, dtBias, aLog, dd, y, T, H, P, N, G, dtMin, dtMax,
                                    ptile, lanes, nsub, K);
}

// R rows in one launch, row = blockIdx.z, each row T tokens of the stacked xBC, dtRaw and y. The
// scan reads srcs[r] and writes dsts[r] (in place: the same table); the scan-states reads srcs[r]
// and writes the state after token t to dsts[r * T + t], for any T.
template <bool VK, bool STATES, int KM, typename W>
__device__ void m2_scan_batch(const float* const* srcs, float* const* dsts, const float* xBC, const float* dtRaw,
                              const W* dtBias, const W* aLog, const W* dd, float* y, int T, int H, int P, int N, int G,
                              float dtMin, float dtMax, int ptile, int lanes, int nsub, int K) {
    const int r = blockIdx.z;
    const long tok = (long)r * T;
    m2_scan_impl<VK, STATES, KM, W>(srcs[r], STATES ? nullptr : dsts[r], STATES ? dsts + tok : nullptr,
                                    xBC + tok * (H * P + 2 * G * N), dtRaw + tok * H, dtBias, aLog, dd,
                                    y + tok * H * P, T, H, P, N, G, dtMin, dtMax, ptile, lanes, nsub, K);
}

#define M2_SCAN_PARAMS(W)                                                                                   \
    const float *src, float *dst, float *d0, float *d1, float *d2, float *d3, float *d4, float *d5, float *d6, \
        float *d7, const float *xBC, const float *dtRaw, const W *dtBias, const W *aLog, const W *dd, float *y,  \
        int T, int H, int P, int N, int G, float dtMin, float dtMax, int ptile, int lanes, int nsub, int K
#define M2_SCAN_ARGS \
    src, dst, d0, d1, d2, d3, d4, d5, d6, d7, xBC, dtRaw, dtBias, aLog, dd, y, T, H, P, N, G, dtMin, dtMax, ptile, lanes, nsub, K
#define M2_SCAN_BATCH_PARAMS(W)                                                                           \
    const float *const *srcs, float *const *dsts, const float *xBC, const float *dtRaw, const W *dtBias,       \
        const W *aLog, const W *dd, float *y, int T, int H, int P, int N, int G, float dtMin, float dtMax,       \
        int ptile, int lanes, int nsub, int K
#define M2_SCAN_BATCH_ARGS \
    srcs, dsts, xBC, dtRaw, dtBias, aLog, dd, y, T, H, P, N, G, dtMin, dtMax, ptile, lanes, nsub, K

#define M2_SCAN_KL(S, W, KM, L, VK)                                                                         \
    extern "C" __global__ void m2_scan_##L##_k##KM##_##S(M2_SCAN_PARAMS(W)) {                              \
        m2_scan_row<VK, false, KM, W>(M2_SCAN_ARGS);                                                        \
    }                                                                                                       \
    extern "C" __global__ void m2_scan_states_##L##_k##KM##_##S(M2_SCAN_PARAMS(W)) {                       \
        m2_scan_row<VK, true, KM, W>(M2_SCAN_ARGS);                                                         \
    }                                                                                                       \
    extern "C" __global__ void m2_scan_batch_##L##_k##KM##_##S(M2_SCAN_BATCH_PARAMS(W)) {                  \
        m2_scan_batch<VK, false, KM, W>(M2_SCAN_BATCH_ARGS);                                                \
    }                                                                                                       \
    extern "C" __global__ void m2_scan_states_batch_##L##_k##KM##_##S(M2_SCAN_BATCH_PARAMS(W)) {           \
        m2_scan_batch<VK, true, KM, W>(M2_SCAN_BATCH_ARGS);                                                 \
    }
#define M2_SCAN_K(S, W, KM) M2_SCAN_KL(S, W, KM, vk, true) M2_SCAN_KL(S, W, KM, kv, false)
#define M2_SCAN(S, W) M2_SCAN_K(S, W, 4) M2_SCAN_K(S, W, 8) M2_SCAN_K(S, W, 16)
HYSPEC_FOR_WEIGHT_TYPES(M2_SCAN)

// ---------------------------------------------------------------- replay
//
// S <- e^{cL} S + sum_{j<count} (e^{cL-c_j} dt_j row_j) (x) col_j over each head's [R, Cc] matrix
// (VK: rows p with row vector x, columns n with column vector B; KV: rows n with B, columns p with
// x). grid (H, row tiles of `tileRows`), 256 threads of M2_REPT elements each: every element is
// read once and written once, the loads issued before anything waits. The history vectors go
// through shared memory in chunks of M2_RJ rows, staged in one pass (each row coefficient computes
// its own weight) so a chunk costs one memory latency.
#define M2_RJ 16
#define M2_REPT 8

extern "C" __global__ void m2_replay(float* __restrict__ state, const float* __restrict__ hist, int count, int H,
                                     int P, int N, int G, int vk, int tileRows) {
    float* sm = m2_smem;
    const int h = blockIdx.x;
    const int g = h / (H / G);
    const int R = vk ? P : N, Cc = vk ? N : P;
    const int width = H * P + G * N + 2 * H;
    const int xOff = h * P, bOff = H * P + g * N;
    const int rowOff = vk ? xOff : bOff, colOff = vk ? bOff : xOff;
    const int dtOff = H * P + G * N + h, cOff = dtOff + H;
    const int r0 = blockIdx.y * tileRows;
    const int rows = min(tileRows, R - r0);
    const int elems = rows * Cc;
    float* srow = sm;                       // [RJ][tileRows]
    float* scol = srow + M2_RJ * tileRows;  // [RJ][Cc]
    float* base = state + ((long)h * R + r0) * Cc;

    float acc[M2_REPT];
#pragma unroll
    for (int i = 0; i < M2_REPT; i++) {
        int e = threadIdx.x + i * blockDim.x;
        acc[i] = e < elems ? base[e] : 0.f;
    }
    const float cL = hist[(long)(count - 1) * width + cOff];
    for (int j0 = 0; j0 < count; j0 += M2_RJ) {
        const int jc = min(M2_RJ, count - j0);
        if (j0 > 0) __syncthreads();   // the previous chunk is no longer read
        for (int i = threadIdx.x; i < jc * rows; i += blockDim.x) {
            int jj = i / rows, r = i % rows;
            const float* row = hist + (long)(j0 + jj) * width;
            float w = m2_exp(__fsub_rn(cL, row[cOff])) * row[dtOff];
            srow[jj * tileRows + r] = w * row[rowOff + r0 + r];
        }
        for (int i = threadIdx.x; i < jc * Cc; i += blockDim.x) {
            int jj = i / Cc, c = i % Cc;
            scol[jj * Cc + c] = hist[(long)(j0 + jj) * width + colOff + c];
        }
        __syncthreads();
        if (j0 == 0) {
            const float eL = m2_exp(cL);
#pragma unroll
            for (int i = 0; i < M2_REPT; i++) acc[i] *= eL;
        }
#pragma unroll
        for (int i = 0; i < M2_REPT; i++) {
            int e = threadIdx.x + i * blockDim.x;
            if (e < elems) {
                int r = e / Cc, c = e % Cc;
                float a = acc[i];
                for (int jj = 0; jj < jc; jj++) a += srow[jj * tileRows + r] * scol[jj * Cc + c];
                acc[i] = a;
            }
        }
    }
#pragma unroll
    for (int i = 0; i < M2_REPT; i++) {
        int e = threadIdx.x + i * blockDim.x;
        if (e < elems) base[e] = acc[i];
    }
}

// ---------------------------------------------------------------- replay outputs
//
// y_t = e^{c_t} (C_t . S) + sum_{j<=t} (C_t . B_j) e^{c_t-c_j} dt_j x_j + D x_t for the block's p
// tile, S read once (p-tile mapping as the scans); history rows [x | B | dt | c] written.
// Shared memory: dt[T], c[T], wc[T][T], ys[T][ptile], C staging [TC][N], KV reduction [TC][nsub][ptile].
template <bool VK, int KM, typename W>
__device__ void m2_replay_outputs_impl(const float* __restrict__ S, const float* __restrict__ xBC,
                                       const float* __restrict__ dtRaw, const W* __restrict__ dtBias,
                                       const W* __restrict__ aLog, const W* __restrict__ dd,
                                       float* __restrict__ hist, float* __restrict__ y, int T, int H, int P, int N,
                                       int G, float dtMin, float dtMax, int ptile, int lanes, int nsub, int K) {
    float* sm = m2_smem;
    const int h = blockIdx.x;
    const int hpg = H / G;
    const int g = h / hpg;
    const int conv = H * P + 2 * G * N;
    const int width = H * P + G * N + 2 * H;
    const int bOff = H * P + g * N;
    const int cOff = H * P + G * N + g * N;
    const int hDt = H * P + G * N;
    float* sdt = sm;                    // [T]
    float* scs = sdt + T;               // [T]
    float* wc = scs + T;                // [T][T]
    float* ys = wc + T * T;             // [T][ptile]
    float* sC = ys + T * ptile;         // [TC][N]
    float* red = sC + M2_TC * N;        // KV: [TC][nsub][ptile]
    const M2Map m = m2_map<VK>(ptile, lanes, nsub, P);
    const int p0 = blockIdx.y * ptile;
    const float A = m2_a(ld(aLog, h));
    const float bias = ld(dtBias, h);
    const float Dh = ld(dd, h);

    // The state tile, read once.
    float s[KM];
#pragma unroll
    for (int k = 0; k < KM; k++) {
        int n = m.nBase + m.nStride * k;
        s[k] = (k < K && m.live && n < N) ? S[m2_at<VK>(h, m.p, n, P, N)] : 0.f;
    }
    // dt and the running sums c of A dt.
    for (int t = threadIdx.x; t < T; t += blockDim.x) sdt[t] = m2_dt(dtRaw[(long)t * H + h], bias, dtMin, dtMax);
    __syncthreads();
    if (threadIdx.x == 0) {
        float c = 0.f;
        for (int t = 0; t < T; t++) {
            c = __fadd_rn(c, __fmul_rn(A, sdt[t]));
            scs[t] = c;
        }
    }
    // History rows: x (this tile), B (first tile of the group's first head), dt and c (first tile).
    for (int i = threadIdx.x; i < T * ptile; i += blockDim.x) {
        int t = i / ptile, pp = p0 + i % ptile;
        if (pp < P) hist[(long)t * width + h * P + pp] = xBC[(long)t * conv + h * P + pp];
    }
    if (blockIdx.y == 0 && h % hpg == 0) {
        for (int i = threadIdx.x; i < T * N; i += blockDim.x) {
            int t = i / N, n = i % N;
            hist[(long)t * width + bOff + n] = xBC[(long)t * conv + bOff + n];
        }
    }
    __syncthreads();
    if (blockIdx.y == 0) {
        for (int t = threadIdx.x; t < T; t += blockDim.x) {
            hist[(long)t * width + hDt + h] = sdt[t];
            hist[(long)t * width + hDt + H + h] = scs[t];
        }
    }
    // wc[t][j] = (C_t . B_j) e^{c_t - c_j} dt_j for j <= t: one warp per pair.
    {
        const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, warps = blockDim.x >> 5;
        const int pairs = T * (T + 1) / 2;
        for (int q = warp; q < pairs; q += warps) {
            int t = (int)((sqrtf(8.f * q + 1.f) - 1.f) * 0.5f);
            while (t * (t + 1) / 2 > q) t--;
            while ((t + 1) * (t + 2) / 2 <= q) t++;
            int j = q - t * (t + 1) / 2;
            const float* C = xBC + (long)t * conv + cOff;
            const float* B = xBC + (long)j * conv + bOff;
            float v = 0.f;
            for (int n = lane; n < N; n += 32) v += C[n] * B[n];
            v = warp_sum(v);
            if (lane == 0) wc[t * T + j] = v * m2_exp(__fsub_rn(scs[t], scs[j])) * sdt[j];
        }
    }
    // ys[t][pl] = C_t . S[p, :].
    for (int t0 = 0; t0 < T; t0 += M2_TC) {
        const int tc = min(M2_TC, T - t0);
        __syncthreads();
        for (int i = threadIdx.x; i < tc * N; i += blockDim.x) {
            int tt = i / N, n = i % N;
            sC[i] = xBC[(long)(t0 + tt) * conv + cOff + n];
        }
        __syncthreads();
        for (int tt = 0; tt < tc; tt++) {
            const float* C = sC + tt * N;
            float part = 0.f;
#pragma unroll
            for (int k = 0; k < KM; k++) {
                int n = m.nBase + m.nStride * k;
                if (k < K && n < N) part += s[k] * C[n];
            }
            if (VK) {
                part = m2_group_sum(part, lanes);
                if (m.live && m.nBase == 0) ys[(t0 + tt) * ptile + m.pl] = part;
            } else if (m.pl < ptile && m.nBase < nsub) {
                red[(tt * nsub + m.nBase) * ptile + m.pl] = part;
            }
        }
        if (!VK) {
            __syncthreads();
            for (int i = threadIdx.x; i < tc * ptile; i += blockDim.x) {
                int tt = i / ptile, pl = i % ptile;
                float sum = 0.f;
                for (int q = 0; q < nsub; q++) sum += red[(tt * nsub + q) * ptile + pl];
                ys[(t0 + tt) * ptile + pl] = sum;
            }
        }
    }
    __syncthreads();
    for (int i = threadIdx.x; i < T * ptile; i += blockDim.x) {
        int t = i / ptile, pl = i % ptile, pp = p0 + pl;
        if (pp >= P) continue;
        float v = m2_exp(scs[t]) * ys[t * ptile + pl];
        for (int j = 0; j <= t; j++) v += wc[t * T + j] * xBC[(long)j * conv + h * P + pp];
        v += Dh * xBC[(long)t * conv + h * P + pp];
        y[(long)t * H * P + (long)h * P + pp] = v;
    }
}

#define M2_RO_PARAMS(W)                                                                                   \
    const float *S, const float *xBC, const float *dtRaw, const W *dtBias, const W *aLog, const W *dd,     \
        float *hist, float *y, int T, int H, int P, int N, int G, float dtMin, float dtMax, int ptile, int lanes, \
        int nsub, int K
#define M2_RO_ARGS S, xBC, dtRaw, dtBias, aLog, dd, hist, y, T, H, P, N, G, dtMin, dtMax, ptile, lanes, nsub, K
#define M2_RO_K(SUF, W, KM)                                                                              \
    extern "C" __global__ void m2_replay_outputs_vk_k##KM##_##SUF(M2_RO_PARAMS(W)) {                       \
        m2_replay_outputs_impl<true, KM, W>(M2_RO_ARGS);                                                  \
    }                                                                                                     \
    extern "C" __global__ void m2_replay_outputs_kv_k##KM##_##SUF(M2_RO_PARAMS(W)) {                       \
        m2_replay_outputs_impl<false, KM, W>(M2_RO_ARGS);                                                 \
    }
#define M2_RO(SUF, W) M2_RO_K(SUF, W, 4) M2_RO_K(SUF, W, 8) M2_RO_K(SUF, W, 16)
HYSPEC_FOR_WEIGHT_TYPES(M2_RO)

// Replay outputs for T <= M2_TC tokens (the verify widths), one memory latency deep: the state
// tile, B, C, x and dt are all loaded in one pass (history rows written from the same loads), then
// everything else runs from registers and shared memory. Same mapping and math as above.
// Shared memory: B[T][N], C[T][N], x[T][ptile], dt[TC], c[TC], cb[TC][TC], ys[TC][ptile],
// KV reduction [TC][nsub][ptile].
template <bool VK, int KM, typename W>
__device__ void m2_ro_small_impl(const float* __restrict__ S, const float* __restrict__ xBC,
                                 const float* __restrict__ dtRaw, const W* __restrict__ dtBias,
                                 const W* __restrict__ aLog, const W* __restrict__ dd, float* __restrict__ hist,
                                 float* __restrict__ y, int T, int H, int P, int N, int G, float dtMin, float dtMax,
                                 int ptile, int lanes, int nsub, int K) {
    float* sm = m2_smem;
    const int h = blockIdx.x;
    const int hpg = H / G;
    const int g = h / hpg;
    const int conv = H * P + 2 * G * N;
    const int width = H * P + G * N + 2 * H;
    const int bOff = H * P + g * N;
    const int cOff = H * P + G * N + g * N;
    const int hDt = H * P + G * N;
    const int p0 = blockIdx.y * ptile;
    float* sB = sm;                       // [T][N]
    float* sC = sB + T * N;               // [T][N]
    float* sx = sC + T * N;               // [T][ptile]
    float* sdt = sx + T * ptile;          // [TC]
    float* scs = sdt + M2_TC;             // [TC]
    float* cb = scs + M2_TC;              // [TC][TC]
    float* ys = cb + M2_TC * M2_TC;       // [TC][ptile]
    float* red = ys + M2_TC * ptile;      // KV: [TC][nsub][ptile]
    const M2Map m = m2_map<VK>(ptile, lanes, nsub, P);

    float s[KM];
#pragma unroll
    for (int k = 0; k < KM; k++) {
        int n = m.nBase + m.nStride * k;
        s[k] = (k < K && m.live && n < N) ? S[m2_at<VK>(h, m.p, n, P, N)] : 0.f;
    }
    const bool writeB = blockIdx.y == 0 && h % hpg == 0;
    for (int i = threadIdx.x; i < T * N; i += blockDim.x) {
        int t = i / N, n = i % N;
        const float* row = xBC + (long)t * conv;
        float b = row[bOff + n];
        sB[i] = b;
        sC[i] = row[cOff + n];
        if (writeB) hist[(long)t * width + bOff + n] = b;
    }
    for (int i = threadIdx.x; i < T * ptile; i += blockDim.x) {
        int t = i / ptile, pp = p0 + i % ptile;
        float x = pp < P ? xBC[(long)t * conv + h * P + pp] : 0.f;
        sx[i] = x;
        if (pp < P) hist[(long)t * width + h * P + pp] = x;
    }
    const float A = m2_a(ld(aLog, h));
    const float Dh = ld(dd, h);
    if (threadIdx.x < T) sdt[threadIdx.x] = m2_dt(dtRaw[(long)threadIdx.x * H + h], ld(dtBias, h), dtMin, dtMax);
    __syncthreads();
    if (threadIdx.x == 0) {
        float c = 0.f;
        for (int t = 0; t < T; t++) {
            c = __fadd_rn(c, __fmul_rn(A, sdt[t]));
            scs[t] = c;
            if (blockIdx.y == 0) {
                hist[(long)t * width + hDt + h] = sdt[t];
                hist[(long)t * width + hDt + H + h] = c;
            }
        }
    }
    {   // cb[t][j] = C_t . B_j for j <= t, one warp per pair
        const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, warps = blockDim.x >> 5;
        const int pairs = T * (T + 1) / 2;
        for (int q = warp; q < pairs; q += warps) {
            int t = 0;
            while ((t + 1) * (t + 2) / 2 <= q) t++;
            int j = q - t * (t + 1) / 2;
            float v = 0.f;
            for (int n = lane; n < N; n += 32) v += sC[t * N + n] * sB[j * N + n];
            v = warp_sum(v);
            if (lane == 0) cb[t * M2_TC + j] = v;
        }
    }
    for (int t = 0; t < T; t++) {   // C_t . S[p, :]
        const float* C = sC + t * N;
        float part = 0.f;
#pragma unroll
        for (int k = 0; k < KM; k++) {
            int n = m.nBase + m.nStride * k;
            if (k < K && n < N) part += s[k] * C[n];
        }
        if (VK) {
            part = m2_group_sum(part, lanes);
            if (m.live && m.nBase == 0) ys[t * ptile + m.pl] = part;
        } else if (m.pl < ptile && m.nBase < nsub) {
            red[(t * nsub + m.nBase) * ptile + m.pl] = part;
        }
    }
    __syncthreads();
    for (int i = threadIdx.x; i < T * ptile; i += blockDim.x) {
        int t = i / ptile, pl = i % ptile, pp = p0 + pl;
        if (pp >= P) continue;
        float ystate;
        if (VK) {
            ystate = ys[t * ptile + pl];
        } else {
            ystate = 0.f;
            for (int q = 0; q < nsub; q++) ystate += red[(t * nsub + q) * ptile + pl];
        }
        const float ct = scs[t];
        float v = m2_exp(ct) * ystate;
        for (int j = 0; j <= t; j++) {
            float w = cb[t * M2_TC + j] * m2_exp(__fsub_rn(ct, scs[j])) * sdt[j];
            v += w * sx[j * ptile + pl];
        }
        v += Dh * sx[t * ptile + pl];
        y[(long)t * H * P + (long)h * P + pp] = v;
    }
}

#define M2_ROS_K(SUF, W, KM)                                                                             \
    extern "C" __global__ void m2_ro_small_vk_k##KM##_##SUF(M2_RO_PARAMS(W)) {                             \
        m2_ro_small_impl<true, KM, W>(M2_RO_ARGS);                                                        \
    }                                                                                                     \
    extern "C" __global__ void m2_ro_small_kv_k##KM##_##SUF(M2_RO_PARAMS(W)) {                             \
        m2_ro_small_impl<false, KM, W>(M2_RO_ARGS);                                                       \
    }
#define M2_ROS(SUF, W) M2_ROS_K(SUF, W, 4) M2_ROS_K(SUF, W, 8) M2_ROS_K(SUF, W, 16)
HYSPEC_FOR_WEIGHT_TYPES(M2_ROS)

// ---------------------------------------------------------------- per-head vectors to float32

#define M2_WIDEN(SUF, W)                                                                   \
    extern "C" __global__ void m2_widen_##SUF(const W* src, float* dst, int n) {            \
        int i = blockIdx.x * blockDim.x + threadIdx.x;                                      \
        if (i < n) dst[i] = ld(src, i);                                                     \
    }
HYSPEC_FOR_WEIGHT_TYPES(M2_WIDEN)

// ---------------------------------------------------------------- transpose
//
// In place [heads, rows, cols] -> [heads, cols, rows], one block per head through shared memory
// (rows x (cols+1) floats, padded against bank conflicts).
extern "C" __global__ void m2_transpose_inplace(float* state, int rows, int cols) {
    float* sm = m2_smem;
    float* s = state + (long)blockIdx.x * rows * cols;
    const int n = rows * cols;
    for (int i = threadIdx.x; i < n; i += blockDim.x) {
        int r = i / cols, c = i % cols;
        sm[r * (cols + 1) + c] = s[i];
    }
    __syncthreads();
    for (int o = threadIdx.x; o < n; o += blockDim.x) {
        int c = o / rows, r = o % rows;
        s[o] = sm[r * (cols + 1) + c];
    }
}

// Out of place, for heads too large for shared memory: grid (ceil(cols/32), ceil(rows/32), heads), 256 threads.
extern "C" __global__ void m2_transpose(const float* __restrict__ src, float* __restrict__ dst, int rows, int cols) {
    __shared__ float tile[32][33];
    const long head = (long)blockIdx.z * rows * cols;
    const int c0 = blockIdx.x * 32, r0 = blockIdx.y * 32;
    const int tx = threadIdx.x & 31, ty = threadIdx.x >> 5;
    for (int r = ty; r < 32; r += 8) {
        int rr = r0 + r, cc = c0 + tx;
        if (rr < rows && cc < cols) tile[r][tx] = src[head + (long)rr * cols + cc];
    }
    __syncthreads();
    for (int c = ty; c < 32; c += 8) {
        int cc = c0 + c, rr = r0 + tx;
        if (rr < rows && cc < cols) dst[head + (long)cc * rows + rr] = tile[tx][c];
    }
}

extern "C" __global__ void m2_copy(const float* __restrict__ src, float* __restrict__ dst, long n) {
    long i = (long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) dst[i] = src[i];
}
