// Sparse MoE without host round trips (decode and verify steps, captured as graphs): routing, the
// routed experts' products over the T·K (token, expert) pairs, and the weighted combine.
// References: MoeRouting.route (routing), Backend.moeExpertMatmul / moeCombine defaults.
// Expert ids travel as float values in float32 tensors (exact below 2^24). Grids depend only on the
// shapes (T, K, E, N, D), never on where tokens were routed.
#include <limits.h>
#include "common.cuh"

// ---- routing: one warp per token ----

// The largest value in a warp (ties: lowest index), over the lanes' candidates (v, i); i == INT_MAX
// marks a lane without one. Every lane ends with the same pair.
__device__ __forceinline__ void warp_argmax(float& v, int& i) {
    for (int o = 16; o > 0; o >>= 1) {
        float ov = __shfl_xor_sync(0xffffffffu, v, o);
        int oi = __shfl_xor_sync(0xffffffffu, i, o);
        if (oi != INT_MAX && (i == INT_MAX || ov > v || (ov == v && oi < i))) {
            v = ov;
            i = oi;
        }
    }
}

// logits [T, E] → ids, weights [T, K], each token's experts best first. sigmoidRule 0: softmax
// (Qwen3-Next), 1: sigmoid with score bias and group-limited choice (Nemotron-H); see MoeRouting.
// Grid (T), block 32, dynamic shared memory (3·E + 2·nGroup)·4 bytes.
extern "C" __global__ void __launch_bounds__(32) moe_route(const float* __restrict__ logits, const float* bias,
                                                           int hasBias, float* __restrict__ ids,
                                                           float* __restrict__ weights, int E, int K, int sigmoidRule,
                                                           int norm, int nGroup, int topkGroup, float scaling) {
    extern __shared__ float sm[];
    float* score = sm;                          // [E] p (softmax) or s (sigmoid): the weights
    float* choice = sm + E;                     // [E] what the top-k ranks
    int* taken = (int*)(sm + 2 * E);            // [E]
    float* groupScore = sm + 3 * E;             // [nGroup]
    int* kept = (int*)(sm + 3 * E + nGroup);    // [nGroup]
    const int t = blockIdx.x, lane = threadIdx.x;
    const float* l = logits + (long)t * E;

    if (!sigmoidRule) {
        float m = -INFINITY;
        for (int e = lane; e < E; e += 32) m = fmaxf(m, l[e]);
        m = warp_max(m);
        float sum = 0.f;
        for (int e = lane; e < E; e += 32) {
            float p = expf(l[e] - m);
            score[e] = p;
            sum += p;
        }
        sum = warp_sum(sum);
        for (int e = lane; e < E; e += 32) {
            score[e] = score[e] / sum;
            choice[e] = score[e];
        }
    } else {
        for (int e = lane; e < E; e += 32) {
            float s = 1.f / (1.f + expf(-l[e]));
            score[e] = s;
            choice[e] = s + (hasBias ? bias[e] : 0.f);
        }
    }
    for (int e = lane; e < E; e += 32) taken[e] = 0;
    __syncwarp();

    if (sigmoidRule && nGroup > 1) {
        // a group scores the sum of its two best choices; keep the best topkGroup groups
        const int per = E / nGroup;
        for (int g = lane; g < nGroup; g += 32) {
            const float* c = choice + g * per;
            int b1 = 0;
            for (int j = 1; j < per; j++) if (c[j] > c[b1]) b1 = j;
            float s = 0.f + c[b1];
            if (per > 1) {
                int b2 = -1;
                for (int j = 0; j < per; j++) if (j != b1 && (b2 < 0 || c[j] > c[b2])) b2 = j;
                s += c[b2];
            }
            groupScore[g] = s;
            kept[g] = 0;
        }
        __syncwarp();
        if (lane == 0) {
            for (int i = 0; i < topkGroup; i++) {
                int best = -1;
                for (int g = 0; g < nGroup; g++)
                    if (!kept[g] && (best < 0 || groupScore[g] > groupScore[best])) best = g;
                kept[best] = 1;
            }
        }
        __syncwarp();
        for (int e = lane; e < E; e += 32)
            if (!kept[e / per]) choice[e] = -INFINITY;
        __syncwarp();
    }

    float* id = ids + (long)t * K;
    float* w = weights + (long)t * K;
    for (int k = 0; k < K; k++) {
        float bv = -INFINITY;
        int bi = INT_MAX;
        for (int e = lane; e < E; e += 32)
            if (!taken[e] && (bi == INT_MAX || choice[e] > bv)) {
                bv = choice[e];
                bi = e;
            }
        warp_argmax(bv, bi);
        if (lane == 0) {
            taken[bi] = 1;
            id[k] = (float)bi;
            w[k] = score[bi];
        }
        __syncwarp();
    }
    if (lane == 0) {
        float total = 0.f;
        for (int k = 0; k < K; k++) total += w[k];
        for (int k = 0; k < K; k++) {
            float v = w[k];
            if (!sigmoidRule) {
                if (norm) v /= total;
            } else {
                if (norm) v /= total + 1e-20f;
                v *= scaling;
            }
            w[k] = v;
        }
    }
}

// ---- routed expert products ----
//
// out[p, n] = Σ_i x[row(p), i] · W_e[n, i] for every pair p = t·K + k with e = ids[p]; row(p) = p
// (perPair: the down projection) or p / K (the up/gate projections). Grid (⌈N / MM_ROWS⌉, E): a
// block owns MM_ROWS output rows of one expert, collects the pairs routed to it from the ids
// (blocks of unused experts stop there) and streams those weight rows once for all its pairs
// (MM_PAIRS at a time in registers; more pairs re-read the rows from cache). A warp owns
// MM_WARP_ROWS rows, its lanes split `in` into 16-byte chunks. table: the E experts' weight
// addresses (a persistent device table). Dynamic shared memory: 4·T·K bytes (the pair list).

constexpr int MM_THREADS = 256;
constexpr int MM_WARP_ROWS = 2;
constexpr int MM_ROWS = MM_WARP_ROWS * MM_THREADS / 32;
constexpr int MM_PAIRS = 8;
constexpr int MM_UNROLL = 2;

template <typename W>
__device__ void moe_matmul(const float* __restrict__ x, const float* __restrict__ ids, const W* const* table,
                           float* __restrict__ out, int pairs, int K, int perPair, int in, int N) {
    extern __shared__ int routed[];
    __shared__ int count;
    const int e = blockIdx.y;
    if (threadIdx.x == 0) count = 0;
    __syncthreads();
    for (int i = threadIdx.x; i < pairs; i += MM_THREADS)
        if ((int)ids[i] == e) routed[atomicAdd(&count, 1)] = i;
    __syncthreads();
    const int m = count;
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    const int r0 = blockIdx.x * MM_ROWS + warp * MM_WARP_ROWS;
    if (m == 0 || r0 >= N) return;
    const W* w = table[e];
    constexpr int V = 16 / sizeof(W);
    const bool vec = in % V == 0 && ((uintptr_t)x & 15) == 0 && ((uintptr_t)w & 15) == 0;

    for (int p0 = 0; p0 < m; p0 += MM_PAIRS) {
        const int np = min(MM_PAIRS, m - p0);
        const float* xr[MM_PAIRS];
#pragma unroll
        for (int j = 0; j < MM_PAIRS; j++) {
            int pair = routed[p0 + min(j, np - 1)];
            xr[j] = x + (long)(perPair ? pair : pair / K) * in;
        }
        float acc[MM_WARP_ROWS][MM_PAIRS];
#pragma unroll
        for (int r = 0; r < MM_WARP_ROWS; r++)
#pragma unroll
            for (int j = 0; j < MM_PAIRS; j++) acc[r][j] = 0.f;

        if (vec) {
            const int chunks = in / V;
            const uint4* wv = reinterpret_cast<const uint4*>(w);
            for (int c0 = lane; c0 < chunks; c0 += 32 * MM_UNROLL) {
                uint4 wr[MM_UNROLL][MM_WARP_ROWS];
#pragma unroll
                for (int u = 0; u < MM_UNROLL; u++) {
                    int c = c0 + u * 32;
#pragma unroll
                    for (int r = 0; r < MM_WARP_ROWS; r++) {
                        int row = min(r0 + r, N - 1);   // rows past the end repeat the last; discarded
                        wr[u][r] = c < chunks ? __ldg(wv + (long)row * chunks + c) : make_uint4(0, 0, 0, 0);
                    }
                }
#pragma unroll
                for (int u = 0; u < MM_UNROLL; u++) {
                    int c = c0 + u * 32;
                    if (c >= chunks) break;
                    float wf[MM_WARP_ROWS][V];
#pragma unroll
                    for (int r = 0; r < MM_WARP_ROWS; r++) widen16(wr[u][r], wf[r], w);
#pragma unroll
                    for (int j = 0; j < MM_PAIRS; j++) {
                        if (j >= np) break;
                        const float4* xp = reinterpret_cast<const float4*>(xr[j] + (long)c * V);
                        float xv[V];
#pragma unroll
                        for (int q = 0; q < V / 4; q++) {
                            float4 f = __ldg(xp + q);
                            xv[4 * q] = f.x; xv[4 * q + 1] = f.y; xv[4 * q + 2] = f.z; xv[4 * q + 3] = f.w;
                        }
#pragma unroll
                        for (int r = 0; r < MM_WARP_ROWS; r++)
#pragma unroll
                            for (int q = 0; q < V; q++) acc[r][j] = fmaf(xv[q], wf[r][q], acc[r][j]);
                    }
                }
            }
        } else {
            for (int i = lane; i < in; i += 32) {
                float wf[MM_WARP_ROWS];
#pragma unroll
                for (int r = 0; r < MM_WARP_ROWS; r++) wf[r] = ld(w, (long)min(r0 + r, N - 1) * in + i);
#pragma unroll
                for (int j = 0; j < MM_PAIRS; j++) {
                    if (j >= np) break;
                    float xv = xr[j][i];
#pragma unroll
                    for (int r = 0; r < MM_WARP_ROWS; r++) acc[r][j] = fmaf(xv, wf[r], acc[r][j]);
                }
            }
        }

#pragma unroll
        for (int r = 0; r < MM_WARP_ROWS; r++)
#pragma unroll
            for (int j = 0; j < MM_PAIRS; j++) {
                float s = warp_sum(acc[r][j]);
                if (lane == 0 && j < np && r0 + r < N) out[(long)routed[p0 + j] * N + r0 + r] = s;
            }
    }
}

#define MOE_MATMUL(SFX, W)                                                                                     \
    extern "C" __global__ void __launch_bounds__(MM_THREADS) moe_matmul_##SFX(                                 \
        const float* x, const float* ids, const W* const* table, float* out, int pairs, int K, int perPair,    \
        int in, int N) {                                                                                       \
        moe_matmul<W>(x, ids, table, out, pairs, K, perPair, in, N);                                           \
    }
HYSPEC_FOR_WEIGHT_TYPES(MOE_MATMUL)

// ---- combine ----
//
// out[t, d] = Σ_k weights[t, k] · y[t·K + k, d], added in ascending expert id (as the per-expert
// path adds its experts), each term as one fused multiply-add (the CPU's axpy).
// Grid (⌈D / 256⌉, T), block 256.
extern "C" __global__ void moe_combine(const float* __restrict__ y, const float* __restrict__ ids,
                                       const float* __restrict__ weights, float* __restrict__ out, int K, int D) {
    const int t = blockIdx.y;
    const int d = blockIdx.x * blockDim.x + threadIdx.x;
    if (d >= D) return;
    const float* id = ids + (long)t * K;
    const float* w = weights + (long)t * K;
    float acc = 0.f;
    int prev = -1;
    for (int i = 0; i < K; i++) {
        int best = INT_MAX, bk = 0;
        for (int k = 0; k < K; k++) {
            int e = (int)id[k];
            if (e > prev && e < best) {
                best = e;
                bk = k;
            }
        }
        prev = best;
        acc = fmaf(w[bk], y[((long)t * K + bk) * D + d], acc);
    }
    out[(long)t * D + d] = acc;
}
