// Shared helpers of hyspec's kernels. Activations and state are float32; weights come as float32,
// bfloat16 or half and are widened on load (ld<T>). Every reduction accumulates in float32.
#pragma once
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <stdint.h>

__device__ __forceinline__ float ld(const float* p, long i) { return p[i]; }
__device__ __forceinline__ float ld(const __nv_bfloat16* p, long i) { return __bfloat162float(p[i]); }
__device__ __forceinline__ float ld(const __half* p, long i) { return __half2float(p[i]); }

__device__ __forceinline__ float warp_sum(float v) {
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
}

__device__ __forceinline__ float warp_max(float v) {
    for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
    return v;
}

// Sum over a block of blockDim.x threads (a multiple of 32, at most 1024); every thread gets the total.
// `scratch` holds 32 floats of shared memory.
__device__ __forceinline__ float block_sum(float v, float* scratch) {
    int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, warps = blockDim.x >> 5;
    v = warp_sum(v);
    __syncthreads();
    if (lane == 0) scratch[warp] = v;
    __syncthreads();
    float t = lane < warps ? scratch[lane] : 0.f;
    return warp_sum(t);
}

__device__ __forceinline__ float silu(float x) { return x / (1.f + expf(-x)); }
__device__ __forceinline__ float sigmoid(float x) { return 1.f / (1.f + expf(-x)); }
// softplus as torch.nn.functional.softplus (threshold 20)
__device__ __forceinline__ float softplus(float x) { return x > 20.f ? x : log1pf(expf(x)); }

// The bias of an output of any dtype, or none: biasType 0 none, 1 f32, 2 bf16, 3 f16.
__device__ __forceinline__ float bias_at(const void* bias, int biasType, int o) {
    switch (biasType) {
        case 1: return ld((const float*)bias, o);
        case 2: return ld((const __nv_bfloat16*)bias, o);
        case 3: return ld((const __half*)bias, o);
        default: return 0.f;
    }
}

// 16 bytes of weights (one uint4 load) widened to floats: 4 f32, or 8 bf16 / f16 values.
__device__ __forceinline__ void widen16(uint4 v, float* f, const float*) {
    f[0] = __uint_as_float(v.x); f[1] = __uint_as_float(v.y);
    f[2] = __uint_as_float(v.z); f[3] = __uint_as_float(v.w);
}
__device__ __forceinline__ void widen16(uint4 v, float* f, const __nv_bfloat16*) {
    uint32_t u[4] = {v.x, v.y, v.z, v.w};
#pragma unroll
    for (int j = 0; j < 4; j++) {
        f[2 * j] = __uint_as_float(u[j] << 16);
        f[2 * j + 1] = __uint_as_float(u[j] & 0xffff0000u);
    }
}
__device__ __forceinline__ void widen16(uint4 v, float* f, const __half*) {
    uint32_t u[4] = {v.x, v.y, v.z, v.w};
#pragma unroll
    for (int j = 0; j < 4; j++) {
        float2 p = __half22float2(*reinterpret_cast<__half2*>(&u[j]));
        f[2 * j] = p.x;
        f[2 * j + 1] = p.y;
    }
}

// Instantiates `NAME_f32`, `NAME_bf16`, `NAME_f16` from a template kernel body taking the weight type W.
#define HYSPEC_FOR_WEIGHT_TYPES(MACRO) \
    MACRO(f32, float)                  \
    MACRO(bf16, __nv_bfloat16)         \
    MACRO(f16, __half)
