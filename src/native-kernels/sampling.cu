// Greedy and top-k / top-p / temperature sampling on the device (CpuBackend.argmax / sample, which are
// dev.hyspec.sampling.Sampler). One block of SAMPLE_THREADS per logits row [V]; the row's probabilities
// live in a float32 scratch row. Everything Sampler computes in double is computed in double here, with
// the same roundings to float; only the order of summation differs (block reductions and scans).
#include "common.cuh"
#include <math_constants.h>

#define SAMPLE_THREADS 1024
#define SAMPLE_WARPS (SAMPLE_THREADS / 32)
#define INVALID_ROW (-1)
#define NO_INDEX 0x7fffffff

struct SampleShared {
    unsigned hist[256];
    double mass[256];
    double d[SAMPLE_WARPS];
    int i[SAMPLE_WARPS];
    float f[SAMPLE_WARPS];
    // values thread 0 (or a reduction) hands to the block
    unsigned key;
    int count;
    double above;
    int hit;
    int last;
};

// Float ↔ an unsigned key in the same order (−inf lowest); NaN never reaches here.
__device__ __forceinline__ unsigned order_key(float f) {
    unsigned b = __float_as_uint(f);
    return (b & 0x80000000u) ? ~b : (b | 0x80000000u);
}
__device__ __forceinline__ float key_float(unsigned k) {
    return __uint_as_float((k & 0x80000000u) ? (k & 0x7fffffffu) : ~k);
}

__device__ __forceinline__ double block_sum_d(double v, SampleShared& sh) {
    int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    __syncthreads();
    if (lane == 0) sh.d[warp] = v;
    __syncthreads();
    double t = sh.d[lane];
    for (int o = 16; o > 0; o >>= 1) t += __shfl_xor_sync(0xffffffffu, t, o);
    return t;
}

// Inclusive scan over the block in thread order; `scratch` is SAMPLE_WARPS values of shared memory.
template <typename T>
__device__ __forceinline__ T block_scan(T v, T* scratch) {
    int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    for (int o = 1; o < 32; o <<= 1) {
        T n = __shfl_up_sync(0xffffffffu, v, o);
        if (lane >= o) v += n;
    }
    __syncthreads();
    if (lane == 31) scratch[warp] = v;
    __syncthreads();
    if (warp == 0) {
        T t = scratch[lane];
        for (int o = 1; o < 32; o <<= 1) {
            T n = __shfl_up_sync(0xffffffffu, t, o);
            if (lane >= o) t += n;
        }
        scratch[lane] = t;
    }
    __syncthreads();
    return warp > 0 ? v + scratch[warp - 1] : v;
}

// Sampler.argmax (first index of the maximum) with Sampler's row check: returns INVALID_ROW when the row
// holds NaN or +inf or only −inf. *max gets the maximum.
__device__ int row_argmax(const float* row, int V, SampleShared& sh, float* max) {
    float bv = -CUDART_INF_F;
    int bi = NO_INDEX;
    int bad = 0;
    for (int i = threadIdx.x; i < V; i += SAMPLE_THREADS) {
        float v = row[i];
        if (isnan(v) || v == CUDART_INF_F) bad = 1;
        if (v > bv) {   // indices rise within a thread: the first of equal values stays
            bv = v;
            bi = i;
        }
    }
    bad = __syncthreads_or(bad);
    int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    for (int o = 16; o > 0; o >>= 1) {
        float ov = __shfl_xor_sync(0xffffffffu, bv, o);
        int oi = __shfl_xor_sync(0xffffffffu, bi, o);
        if (ov > bv || (ov == bv && oi < bi)) {
            bv = ov;
            bi = oi;
        }
    }
    if (lane == 0) {
        sh.f[warp] = bv;
        sh.i[warp] = bi;
    }
    __syncthreads();
    bv = sh.f[lane];
    bi = sh.i[lane];
    for (int o = 16; o > 0; o >>= 1) {
        float ov = __shfl_xor_sync(0xffffffffu, bv, o);
        int oi = __shfl_xor_sync(0xffffffffu, bi, o);
        if (ov > bv || (ov == bv && oi < bi)) {
            bv = ov;
            bi = oi;
        }
    }
    __syncthreads();   // sh.f / sh.i are free again
    *max = bv;
    return (bad || bv == -CUDART_INF_F) ? INVALID_ROW : bi;
}

// The k-th largest value of the row, counting equal values (Sampler.kthLargest), 1 <= k < V: a radix
// select over the order keys, one byte per pass from the top.
__device__ float kth_largest(const float* row, int V, int k, SampleShared& sh) {
    unsigned prefix = 0, mask = 0;
    int remaining = k;
    for (int shift = 24; shift >= 0; shift -= 8) {
        for (int b = threadIdx.x; b < 256; b += SAMPLE_THREADS) sh.hist[b] = 0;
        __syncthreads();
        for (int i = threadIdx.x; i < V; i += SAMPLE_THREADS) {
            unsigned key = order_key(row[i]);
            if ((key & mask) == prefix) atomicAdd(&sh.hist[(key >> shift) & 255u], 1u);
        }
        __syncthreads();
        if (threadIdx.x == 0) {
            int b = 255;
            for (; b > 0; b--) {
                if ((int)sh.hist[b] >= remaining) break;
                remaining -= sh.hist[b];
            }
            sh.key = prefix | ((unsigned)b << shift);
            sh.count = remaining;
        }
        __syncthreads();
        prefix = sh.key;
        remaining = sh.count;
        mask |= 255u << shift;
    }
    return key_float(prefix);
}

// Sampler.applyTopP's cut: with the probabilities in descending order (ties by lower index), a token is
// kept iff the mass before it is < target. Finds the smallest kept probability p* by a radix select over
// the probability bits weighted by mass, the mass above it, and how many tokens equal to p* are kept.
// Sets *pStar, *cutoff (tokens equal to p* are kept up to this index) and returns the kept mass.
__device__ double top_p_cut(const float* probs, int V, double target, SampleShared& sh, float* pStar, int* cutoff) {
    unsigned prefix = 0, mask = 0;
    if (threadIdx.x == 0) sh.above = 0.0;
    for (int shift = 24; shift >= 0; shift -= 8) {
        for (int b = threadIdx.x; b < 256; b += SAMPLE_THREADS) {
            sh.hist[b] = 0;
            sh.mass[b] = 0.0;
        }
        __syncthreads();
        for (int i = threadIdx.x; i < V; i += SAMPLE_THREADS) {
            float p = probs[i];
            unsigned key = __float_as_uint(p);
            if (p > 0.f && (key & mask) == prefix) {
                unsigned b = (key >> shift) & 255u;
                atomicAdd(&sh.hist[b], 1u);
                atomicAdd(&sh.mass[b], (double)p);
            }
        }
        __syncthreads();
        if (threadIdx.x == 0) {
            double above = sh.above;
            int digit = -1, lowest = -1;
            double aboveLowest = above;
            for (int b = 255; b >= 0; b--) {
                if (sh.hist[b] == 0) continue;
                if (above + sh.mass[b] >= target) {
                    digit = b;
                    break;
                }
                lowest = b;
                aboveLowest = above;
                above += sh.mass[b];
            }
            if (digit < 0) {   // rounding left the target out of reach: the smallest probability is the cut
                digit = lowest;
                above = aboveLowest;
            }
            sh.key = prefix | ((unsigned)digit << shift);
            sh.above = above;
            sh.count = sh.hist[digit];
        }
        __syncthreads();
        prefix = sh.key;
        mask |= 255u << shift;
    }
    const float p = __uint_as_float(prefix);
    const double above = sh.above;
    const int tied = sh.count;
    // The m-th token equal to p* (m from 0, by index) has mass above + m·p* before it.
    int c;
    double need = ceil((target - above) / (double)p);
    if (!(need < (double)tied)) {
        c = tied;
    } else {
        c = max(1, (int)need);
        while (c > 1 && above + (double)(c - 1) * p >= target) c--;
        while (c < tied && above + (double)c * p < target) c++;
    }
    *pStar = p;
    if (c == tied) {
        *cutoff = V;
    } else {
        // the index of the c-th token equal to p*: count them in contiguous chunks, scan, walk
        const int chunk = (V + SAMPLE_THREADS - 1) / SAMPLE_THREADS;
        const int lo = min(V, (int)threadIdx.x * chunk), hi = min(V, lo + chunk);
        int n = 0;
        for (int i = lo; i < hi; i++) n += probs[i] == p;
        int incl = block_scan(n, sh.i);
        int excl = incl - n;
        if (excl < c && c <= incl) {
            int seen = excl;
            for (int i = lo; i < hi; i++) {
                if (probs[i] == p && ++seen == c) {
                    sh.count = i;
                    break;
                }
            }
        }
        __syncthreads();
        *cutoff = sh.count;
    }
    __syncthreads();
    return above + (double)c * p;
}

extern "C" __global__ void __launch_bounds__(SAMPLE_THREADS) sampling_argmax(const float* logits, int V, int* out) {
    __shared__ SampleShared sh;
    float max;
    int pick = row_argmax(logits + (long)blockIdx.x * V, V, sh, &max);
    if (threadIdx.x == 0) out[blockIdx.x] = pick;
}

// params: 8 ints per row: temperature, topP, uniform as doubles (low word first), then topK.
extern "C" __global__ void __launch_bounds__(SAMPLE_THREADS) sampling_sample(const float* logits, int V,
                                                                           const int* params, float* scratch,
                                                                           int* out) {
    __shared__ SampleShared sh;
    const int r = blockIdx.x;
    const float* row = logits + (long)r * V;
    float* probs = scratch + (long)r * V;
    const int* pr = params + 8 * r;
    const double temperature = __hiloint2double(pr[1], pr[0]);
    const double topP = __hiloint2double(pr[3], pr[2]);
    const double u = __hiloint2double(pr[5], pr[4]);
    const int topK = pr[6];

    float max;
    int pick = row_argmax(row, V, sh, &max);
    if (pick == INVALID_ROW || temperature < 1e-5) {   // SamplingParams.SAMPLING_EPS: greedy
        if (threadIdx.x == 0) out[r] = pick;
        return;
    }

    // top-k on the raw logits, then temperature and softmax over what it kept (Sampler.probs)
    const float threshold = (topK > 0 && topK < V) ? kth_largest(row, V, topK, sh) : -CUDART_INF_F;
    const double invT = 1.0 / temperature;
    double sum = 0.0;
    for (int i = threadIdx.x; i < V; i += SAMPLE_THREADS) {
        float l = row[i];
        float v = 0.f;
        if (l >= threshold && l != -CUDART_INF_F) {
            v = __double2float_rn(exp(__dmul_rn(__dsub_rn((double)l, (double)max), invT)));
        }
        probs[i] = v;
        sum += v;
    }
    const double inv = 1.0 / block_sum_d(sum, sh);
    double total = 0.0;
    for (int i = threadIdx.x; i < V; i += SAMPLE_THREADS) {
        float p = __double2float_rn(__dmul_rn((double)probs[i], inv));
        probs[i] = p;
        total += p;
    }
    total = block_sum_d(total, sh);
    __syncthreads();   // every probability is written before the passes below read them in other threads

    // top-p: zero what falls outside the nucleus and renormalise, fused into the inverse CDF's first pass
    const bool topPActive = topP < 1.0;
    float pStar = 0.f;
    int cutoff = V;
    double keptInv = 1.0;
    if (topPActive) {
        double kept = top_p_cut(probs, V, __dmul_rn(topP, total), sh, &pStar, &cutoff);
        keptInv = 1.0 / kept;
    }

    // inverse CDF in index order over contiguous chunks (Sampler.sampleFrom)
    const int chunk = (V + SAMPLE_THREADS - 1) / SAMPLE_THREADS;
    const int lo = min(V, (int)threadIdx.x * chunk), hi = min(V, lo + chunk);
    double mine = 0.0;
    for (int i = lo; i < hi; i++) {
        float w = probs[i];
        if (topPActive) {
            bool keep = w > pStar || (w == pStar && w > 0.f && i <= cutoff);
            w = keep ? __double2float_rn(__dmul_rn((double)w, keptInv)) : 0.f;
            probs[i] = w;
        }
        mine += w;
    }
    const double incl = block_scan(mine, sh.d);
    if (threadIdx.x == SAMPLE_THREADS - 1) sh.above = incl;
    if (threadIdx.x == 0) {
        sh.hit = NO_INDEX;
        sh.last = -1;
    }
    __syncthreads();
    const double target = __dmul_rn(u, sh.above);
    double cum = incl - mine;
    int last = -1;
    for (int i = lo; i < hi; i++) {
        float w = probs[i];
        if (w > 0.f) {
            cum += w;
            last = i;
            if (target < cum) {
                atomicMin(&sh.hit, i);
                break;
            }
        }
    }
    if (last >= 0) atomicMax(&sh.last, last);
    __syncthreads();
    if (threadIdx.x == 0) out[r] = sh.hit != NO_INDEX ? sh.hit : sh.last;
}
