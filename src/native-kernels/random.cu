// Deterministic random weights, made in place on the device. Reference: Backend.randomWeight's
// default and dev.hyspec.backend.HashUniform, which this file mirrors bit for bit:
//   u(seed, i) = (splitmix64(seed + (i + 1)·φ) >> 40) / 2^24        in [0, 1)
//   value      = fma(scale, 2u − 1, center)                         (2u − 1 is exact: one rounding)
//   stored     = bfloat16(value), rounded to nearest even
#include <stdint.h>

__device__ __forceinline__ uint64_t splitmix64(uint64_t z) {
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

// out[i] for i < n, grid-stride; bf16 as raw bits so the rounding is the one written here.
extern "C" __global__ void random_uniform_bf16(uint16_t* out, long n, long seed, float center, float scale) {
    const uint64_t golden = 0x9E3779B97F4A7C15ull;
    long stride = (long)gridDim.x * blockDim.x;
    for (long i = (long)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) {
        uint64_t h = splitmix64((uint64_t)seed + (uint64_t)(i + 1) * golden);
        float u = (float)(h >> 40) * 0x1p-24f;
        float v = fmaf(scale, 2.f * u - 1.f, center);
        uint32_t bits = __float_as_uint(v);
        out[i] = (uint16_t)((bits + 0x7fffu + ((bits >> 16) & 1u)) >> 16);
    }
}
