// Elementwise ops, norms, embedding and the MoE row moves.
#include "common.cuh"

extern "C" __global__ void dense_add(const float* a, const float* b, float* out, long n) {
    long i = (long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] = a[i] + b[i];
}
