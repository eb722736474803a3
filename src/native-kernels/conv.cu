// Causal depthwise conv1d with SiLU over [window | x] (prefill and the spec window), and the window
// shift, each also for R generate rows in one launch. Weights (w [C, W], bias [C]) in any weight dtype; activations and the window float32.
#include "common.cuh"

// silu as the CPU reference (exp in double, rounded once).
__device__ __forceinline__ float conv_silu(float v) { return v / (1.f + (float)exp(-(double)v)); }

// One thread per (t, c): out[t, c] = silu(bias[c] + sum_j w[c, j] u[c, t + j]) with
// u = [window[c, 0..K) | x[0..T, c]], K = W - 1. Coalesced along c.
template <typename WT, typename BT>
__device__ void conv1d_impl(const float* __restrict__ x, const float* __restrict__ window, const WT* __restrict__ w,
                            const BT* __restrict__ bias, int hasBias, float* __restrict__ out, int T, int C, int W) {
    long i = (long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= (long)T * C) return;
    int t = (int)(i / C), c = (int)(i % C);
    int K = W - 1;
    float acc = hasBias ? ld(bias, c) : 0.f;
    for (int j = 0; j < W; j++) {
        int u = t + j;   // index into [window | x]
        float v = u < K ? window[(long)c * K + u] : x[(long)(u - K) * C + c];
        acc += ld(w, (long)c * W + j) * v;
    }
    out[i] = conv_silu(acc);
}

#define CONV_B(WS, WT, BS, BT)                                                                               \
    extern "C" __global__ void conv1d_##WS##_##BS(const float* x, const float* window, const WT* w,          \
                                                   const BT* bias, int hasBias, float* out, int T, int C, int W) { \
        conv1d_impl<WT, BT>(x, window, w, bias, hasBias, out, T, C, W);                                      \
    }
#define CONV_W(WS, WT) CONV_B(WS, WT, f32, float) CONV_B(WS, WT, bf16, __nv_bfloat16) CONV_B(WS, WT, f16, __half)
HYSPEC_FOR_WEIGHT_TYPES(CONV_W)

// window [C, K] becomes the last K columns of [window | x[0..count)^T] for channel c (ascending
// copies, so the in-place shift is safe).
__device__ __forceinline__ void conv_shift_channel(float* __restrict__ window, const float* __restrict__ x, int count,
                                                   int c, int C, int K) {
    float* win = window + (long)c * K;
    int fromWindow = K - count > 0 ? K - count : 0;
    for (int i = 0; i < fromWindow; i++) win[i] = win[i + K - fromWindow];
    for (int i = fromWindow; i < K; i++) win[i] = x[(long)(count - K + i) * C + c];
}

// One thread per channel.
extern "C" __global__ void conv_shift(float* __restrict__ window, const float* __restrict__ x, int count, int C,
                                      int K) {
    int c = blockIdx.x * blockDim.x + threadIdx.x;
    if (c < C) conv_shift_channel(window, x, count, c, C, K);
}

// ---------------------------------------------------------------- R rows in one launch
//
// Row r owns tokens r*T .. r*T+T-1 of the stacked x and out, its window is windows[r] (a table of
// device addresses); grid (ceil(C / block), R), one thread per (row, channel): the row's T outputs
// of the channel as conv1d_impl computes them, then (advance) the channel's window moves past the
// row's tokens. A thread reads and writes only its own channel's window, so the update is in place.
// Channel c's T outputs of one row, as conv1d_impl computes them: u = [win[0..K) | x[0..T, c]].
template <typename WT, typename BT>
__device__ __forceinline__ void conv_row_outputs(const float* __restrict__ x, const float* __restrict__ win,
                                                 const WT* __restrict__ w, const BT* __restrict__ bias, int hasBias,
                                                 float* __restrict__ out, int T, int C, int W, int c) {
    const int K = W - 1;
    for (int t = 0; t < T; t++) {
        float acc = hasBias ? ld(bias, c) : 0.f;
        for (int j = 0; j < W; j++) {
            int u = t + j;   // index into [window | x]
            float v = u < K ? win[u] : x[(long)(u - K) * C + c];
            acc += ld(w, (long)c * W + j) * v;
        }
        out[(long)t * C + c] = conv_silu(acc);
    }
}

template <typename WT, typename BT>
__device__ void conv1d_batch_impl(const float* __restrict__ x, float* const* __restrict__ windows,
                                  const WT* __restrict__ w, const BT* __restrict__ bias, int hasBias,
                                  float* __restrict__ out, int T, int C, int W, int advance) {
    const int c = blockIdx.x * blockDim.x + threadIdx.x;
    if (c >= C) return;
    const int K = W - 1;
    const long first = (long)blockIdx.y * T * C;
    float* window = windows[blockIdx.y];
    conv_row_outputs(x + first, window + (long)c * K, w, bias, hasBias, out + first, T, C, W, c);
    if (advance) conv_shift_channel(window, x + first, T, c, C, K);
}

#define CONV_BATCH_B(WS, WT, BS, BT)                                                                        \
    extern "C" __global__ void conv1d_batch_##WS##_##BS(const float* x, float* const* windows, const WT* w, \
                                                         const BT* bias, int hasBias, float* out, int T, int C, \
                                                         int W, int advance) {                              \
        conv1d_batch_impl<WT, BT>(x, windows, w, bias, hasBias, out, T, C, W, advance);                      \
    }
#define CONV_BATCH_W(WS, WT) \
    CONV_BATCH_B(WS, WT, f32, float) CONV_BATCH_B(WS, WT, bf16, __nv_bfloat16) CONV_BATCH_B(WS, WT, f16, __half)
HYSPEC_FOR_WEIGHT_TYPES(CONV_BATCH_W)

// shiftWindow of every row: windows[r] moves past the first counts[r] rows of xs[r] (count 0: left
// as is, decided here so the launch does not depend on the counts); grid (ceil(C / block), R).
extern "C" __global__ void conv_shift_batch(float* const* __restrict__ windows, const float* const* __restrict__ xs,
                                            const int* __restrict__ counts, int C, int K) {
    const int c = blockIdx.x * blockDim.x + threadIdx.x;
    const int count = counts[blockIdx.y];
    if (c < C && count > 0) conv_shift_channel(windows[blockIdx.y], xs[blockIdx.y], count, c, C, K);
}

// The replay verify's conv step of every row (Backend.convStepBatch), one thread per (row, channel):
// conv_shift_batch (windows[r] moves past the first counts[r] rows of prevs[r]), then the row's T
// tokens of x go to nexts[r] (scatterRowBlocks), then conv1d_batch_impl's outputs without advancing.
// Each step reads and writes only the thread's own channel, in that order, so the three launches'
// results are reproduced exactly.
template <typename WT, typename BT>
__device__ void conv_step_batch_impl(const float* __restrict__ x, float* const* __restrict__ windows,
                                     const float* const* __restrict__ prevs, const int* __restrict__ counts,
                                     float* const* __restrict__ nexts, const WT* __restrict__ w,
                                     const BT* __restrict__ bias, int hasBias, float* __restrict__ out, int T, int C,
                                     int W) {
    const int c = blockIdx.x * blockDim.x + threadIdx.x;
    if (c >= C) return;
    const int r = blockIdx.y, K = W - 1;
    float* window = windows[r];
    const int count = counts[r];
    if (count > 0 && K > 0) conv_shift_channel(window, prevs[r], count, c, C, K);
    const long first = (long)r * T * C;
    float* next = nexts[r];
    for (int t = 0; t < T; t++) next[(long)t * C + c] = x[first + (long)t * C + c];
    conv_row_outputs(x + first, window + (long)c * K, w, bias, hasBias, out + first, T, C, W, c);
}

#define CONV_STEP_B(WS, WT, BS, BT)                                                                          \
    extern "C" __global__ void conv_step_batch_##WS##_##BS(const float* x, float* const* windows,             \
                                                            const float* const* prevs, const int* counts,     \
                                                            float* const* nexts, const WT* w, const BT* bias, \
                                                            int hasBias, float* out, int T, int C, int W) {  \
        conv_step_batch_impl<WT, BT>(x, windows, prevs, counts, nexts, w, bias, hasBias, out, T, C, W);       \
    }
#define CONV_STEP_W(WS, WT) \
    CONV_STEP_B(WS, WT, f32, float) CONV_STEP_B(WS, WT, bf16, __nv_bfloat16) CONV_STEP_B(WS, WT, f16, __half)
HYSPEC_FOR_WEIGHT_TYPES(CONV_STEP_W)
