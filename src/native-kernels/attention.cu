// RoPE, paged KV cache writes and paged attention (CpuBackend.rope / writeKv / pagedAttention, and the
// batched writeKvBatch / pagedAttentionBatch of Backend).
// A paged cache holds position p of a sequence in row blockTable[p / pageSize]·pageSize + p % pageSize
// of kPages, vPages [numPages·pageSize, Hkv·D].
#include "common.cuh"
#include <math_constants.h>

__device__ __forceinline__ long page_row(const int* blockTable, int pageSize, int p) {
    return (long)blockTable[p / pageSize] * pageSize + p % pageSize;
}

// x [T, heads·headDim] in place; one thread per (t, h, i < half). invFreq [half] comes from the host,
// computed as the CPU does; the angle is a float product and cos/sin are taken in double and rounded,
// as Java's (float) Math.cos(angle). The products are kept unfused to match the CPU's rounding.
extern "C" __global__ void attention_rope(float* x, const float* invFreq, const int* positions, int T, int heads,
                                          int headDim, int half) {
    long idx = (long)blockIdx.x * blockDim.x + threadIdx.x;
    if (idx >= (long)T * heads * half) return;
    int i = (int)(idx % half);
    long th = idx / half;
    int t = (int)(th / heads);
    float angle = __fmul_rn((float)positions[t], invFreq[i]);
    float c = (float)cos((double)angle);
    float s = (float)sin((double)angle);
    float* base = x + th * headDim;
    float x1 = base[i];
    float x2 = base[i + half];
    base[i] = __fsub_rn(__fmul_rn(x1, c), __fmul_rn(x2, s));
    base[i + half] = __fadd_rn(__fmul_rn(x2, c), __fmul_rn(x1, s));
}

// k, v [T, width] → the rows of positions start … start+T−1; one thread per element.
// meta = [start | block table]: staged per call, so a captured graph replays with this step's values.
extern "C" __global__ void attention_write_kv(const float* k, const float* v, float* kPages, float* vPages,
                                              const int* meta, int pageSize, int T, int width) {
    const int start = meta[0];
    const int* blockTable = meta + 1;
    long idx = (long)blockIdx.x * blockDim.x + threadIdx.x;
    if (idx >= (long)T * width) return;
    int t = (int)(idx / width);
    int c = (int)(idx % width);
    long dst = page_row(blockTable, pageSize, start + t) * width + c;
    kPages[dst] = k[idx];
    vPages[dst] = v[idx];
}

// k, v [R·T, width] → row r's tokens t < lengths[r] go to positions starts[r] + t of its block table;
// padding tokens (t ≥ lengths[r]) write nothing. One thread per element. meta as for
// attention_paged_batch_*.
extern "C" __global__ void attention_write_kv_batch(const float* k, const float* v, float* kPages, float* vPages,
                                                    const int* meta, int pageSize, int rows, int tokensPerRow,
                                                    int tableWidth, int width) {
    long idx = (long)blockIdx.x * blockDim.x + threadIdx.x;
    if (idx >= (long)rows * tokensPerRow * width) return;
    long token = idx / width;
    int r = (int)(token / tokensPerRow);
    int t = (int)(token % tokensPerRow);
    if (t >= meta[rows + r]) return;
    const int* blockTable = meta + 2 * rows + (long)r * tableWidth;
    long dst = page_row(blockTable, pageSize, meta[r] + t) * width + idx % width;
    kPages[dst] = k[idx];
    vPages[dst] = v[idx];
}

#define ATTN_WARPS 4
#define ATTN_MAX_D 256

// One block per (query head h = blockIdx.x, query row, split s = blockIdx.z): attends query row `row`
// of q [·, H·D] over positions begin … end−1 of `blockTable`. Each warp runs an online softmax over
// every ATTN_WARPS-th position of the range (lane holds dims lane + 32c, c < NPL); the warps' states
// are merged at the end. With one split the block writes out [·, H·D] (zero for an empty range: a
// padding token); otherwise partial [·, H, splits, 2 + D] = (running max m, Σ e^{s−m}, Σ e^{s−m}·v),
// merged by attention_combine. An empty range reads nothing, not even q.
template <int NPL>
__device__ __forceinline__ void paged_attention(const float* q, const float* kPages, const float* vPages,
                                                const int* blockTable, int pageSize, int numHeads, int numKvHeads,
                                                int headDim, float scale, long row, int begin, int end, float* out,
                                                float* partial) {
    __shared__ float sM[ATTN_WARPS], sL[ATTN_WARPS];
    __shared__ float sAcc[ATTN_WARPS][ATTN_MAX_D];
    const int h = blockIdx.x, s = blockIdx.z, splits = gridDim.z;
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    const int kvStride = numKvHeads * headDim;
    const int kvOff = (h / (numHeads / numKvHeads)) * headDim;
    const long qOff = (row * numHeads + h) * headDim;

    float qr[NPL], acc[NPL];
#pragma unroll
    for (int c = 0; c < NPL; c++) {
        int d = lane + 32 * c;
        qr[c] = d < headDim && begin < end ? q[qOff + d] : 0.f;
        acc[c] = 0.f;
    }
    float m = -CUDART_INF_F, l = 0.f;
    for (int j = begin + warp; j < end; j += ATTN_WARPS) {
        long kvRow = page_row(blockTable, pageSize, j) * kvStride + kvOff;
        const float* kr = kPages + kvRow;
        const float* vr = vPages + kvRow;
        float part = 0.f;
#pragma unroll
        for (int c = 0; c < NPL; c++) {
            int d = lane + 32 * c;
            if (d < headDim) part += qr[c] * kr[d];
        }
        float score = warp_sum(part) * scale;
        float mNew = fmaxf(m, score);
        float corr = expf(m - mNew);   // 0 on the first position (m = −inf)
        float p = expf(score - mNew);
        l = l * corr + p;
#pragma unroll
        for (int c = 0; c < NPL; c++) {
            int d = lane + 32 * c;
            if (d < headDim) acc[c] = acc[c] * corr + p * vr[d];
        }
        m = mNew;
    }
    if (lane == 0) {
        sM[warp] = m;
        sL[warp] = l;
    }
#pragma unroll
    for (int c = 0; c < NPL; c++) {
        int d = lane + 32 * c;
        if (d < headDim) sAcc[warp][d] = acc[c];
    }
    __syncthreads();

    float M = -CUDART_INF_F;
    for (int w = 0; w < ATTN_WARPS; w++) M = fmaxf(M, sM[w]);
    float weight[ATTN_WARPS];
    float den = 0.f;
    for (int w = 0; w < ATTN_WARPS; w++) {
        weight[w] = sL[w] > 0.f ? expf(sM[w] - M) : 0.f;   // a warp that saw no position adds nothing
        den += weight[w] * sL[w];
    }
    long o = (row * numHeads + h) * headDim;
    long pOff = ((row * numHeads + h) * splits + s) * (2 + headDim);
    for (int d = threadIdx.x; d < headDim; d += blockDim.x) {
        float num = 0.f;
        for (int w = 0; w < ATTN_WARPS; w++) num += weight[w] * sAcc[w][d];
        if (splits == 1) {
            out[o + d] = den > 0.f ? num / den : 0.f;
        } else {
            partial[pOff + 2 + d] = num;
        }
    }
    if (splits > 1 && threadIdx.x == 0) {
        partial[pOff] = M;
        partial[pOff + 1] = den;
    }
}

// One sequence: query t = blockIdx.y of q [T, H·D] sees positions 0 … pastLen+t; split s of `splits`
// takes the s-th of equal contiguous ranges of them. meta = [pastLen | block table], staged per call,
// so a captured graph replays with this step's values.
#define PAGED_ATTENTION(NAME, NPL)                                                                                  \
    extern "C" __global__ void __launch_bounds__(ATTN_WARPS * 32) NAME(                                            \
        const float* q, const float* kPages, const float* vPages, const int* meta, int pageSize, int numHeads,      \
        int numKvHeads, int headDim, float scale, float* out, float* partial) {                                     \
        const int t = blockIdx.y, splits = gridDim.z;                                                               \
        const int visible = meta[0] + t + 1;                                                                        \
        const int chunk = (visible + splits - 1) / splits;                                                          \
        const int begin = blockIdx.z * chunk;                                                                       \
        paged_attention<NPL>(q, kPages, vPages, meta + 1, pageSize, numHeads, numKvHeads, headDim, scale, t, begin, \
                             min(visible, begin + chunk), out, partial);                                            \
    }
PAGED_ATTENTION(attention_paged_d32, 1)
PAGED_ATTENTION(attention_paged_d64, 2)
PAGED_ATTENTION(attention_paged_d128, 4)
PAGED_ATTENTION(attention_paged_d256, 8)

// R rows of T tokens, q [R·T, H·D]: query row blockIdx.y = r·T + t, if t < lengths[r], is at position
// starts[r] + t and sees positions 0 … starts[r]+t of row r's block table; a padding token
// (t ≥ lengths[r]) sees none and gets a zero output row. Split s takes positions s·chunk … s·chunk+chunk−1
// (chunk from the bucketed table width, the same for every row), so the grid and the scalars depend
// only on R, T, the head shapes and the bucket. meta = [starts (R) | lengths (R) | block tables
// (R × tableWidth, zero-padded)], staged per call, so a captured graph replays for any rows of that shape.
#define PAGED_ATTENTION_BATCH(NAME, NPL)                                                                            \
    extern "C" __global__ void __launch_bounds__(ATTN_WARPS * 32) NAME(                                            \
        const float* q, const float* kPages, const float* vPages, const int* meta, int pageSize, int rows,          \
        int tokensPerRow, int tableWidth, int chunk, int numHeads, int numKvHeads, int headDim, float scale,        \
        float* out, float* partial) {                                                                               \
        const int r = blockIdx.y / tokensPerRow, t = blockIdx.y % tokensPerRow;                                     \
        const int visible = t < meta[rows + r] ? meta[r] + t + 1 : 0;                                               \
        const int begin = blockIdx.z * chunk;                                                                       \
        paged_attention<NPL>(q, kPages, vPages, meta + 2 * rows + (long)r * tableWidth, pageSize, numHeads,          \
                             numKvHeads, headDim, scale, blockIdx.y, begin, min(visible, begin + chunk), out,       \
                             partial);                                                                              \
    }
PAGED_ATTENTION_BATCH(attention_paged_batch_d32, 1)
PAGED_ATTENTION_BATCH(attention_paged_batch_d64, 2)
PAGED_ATTENTION_BATCH(attention_paged_batch_d128, 4)
PAGED_ATTENTION_BATCH(attention_paged_batch_d256, 8)

// Merges the splits of attention_paged_*: one block per (h, query row); out = Σ_s e^{m_s−M}·acc_s /
// Σ_s e^{m_s−M}·l_s, or zero where no split saw a position (a padding token).
extern "C" __global__ void attention_combine(const float* partial, int numHeads, int headDim, int splits, float* out) {
    const int h = blockIdx.x, t = blockIdx.y;
    const long base = ((long)t * numHeads + h) * splits * (2 + headDim);
    float M = -CUDART_INF_F;
    for (int s = 0; s < splits; s++) M = fmaxf(M, partial[base + (long)s * (2 + headDim)]);
    float den = 0.f;
    for (int s = 0; s < splits; s++) {
        const float* p = partial + base + (long)s * (2 + headDim);
        if (p[1] > 0.f) den += expf(p[0] - M) * p[1];
    }
    long o = ((long)t * numHeads + h) * headDim;
    for (int d = threadIdx.x; d < headDim; d += blockDim.x) {
        float num = 0.f;
        for (int s = 0; s < splits; s++) {
            const float* p = partial + base + (long)s * (2 + headDim);
            if (p[1] > 0.f) num += expf(p[0] - M) * p[2 + d];
        }
        out[o + d] = den > 0.f ? num / den : 0.f;
    }
}
