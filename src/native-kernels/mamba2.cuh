// Scalar helpers of the Mamba2 state kernels (mamba2.cu, mamba2_verify.cu). Scalars that feed an
// exponential (dt, A, the running sums c, the decays) are computed as the CPU reference does (double
// exp/log1p rounded once to float, no fused multiply-add), so the backends see the same decays.
#pragma once
#include "common.cuh"

// dt = clamp(softplus(raw + bias), dtMin, dtMax), softplus in double as the CPU reference.
__device__ __forceinline__ float m2_dt(float raw, float bias, float lo, float hi) {
    float x = __fadd_rn(raw, bias);
    float sp = x > 20.f ? x : (float)log1p(exp((double)x));
    return fminf(fmaxf(sp, lo), hi);
}

__device__ __forceinline__ float m2_a(float aLog) { return -(float)exp((double)aLog); }

__device__ __forceinline__ float m2_exp(float v) { return (float)exp((double)v); }

// Reduction of a partial sum over the `lanes` lanes (a power of two <= 32) that share a p row.
__device__ __forceinline__ float m2_group_sum(float v, int lanes) {
    for (int o = lanes >> 1; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
}
