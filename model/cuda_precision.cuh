// Storage precision of the CUDA backend, chosen at build time: bf16 (default) or fp32
// (-DGPT_CUDA_FP32, for tight tests against the CPU backend). Master weights, optimizer
// moments, LayerNorm statistics, attention partial outputs and log-sum-exp stay fp32 always.
#pragma once
#include "model/cuda_common.cuh"

#ifdef GPT_CUDA_FP32
typedef float floatX;
#define FLOATX_NAME "fp32"
#define CUDA_R_X CUDA_R_32F
#else
typedef __nv_bfloat16 floatX;
#define FLOATX_NAME "bf16"
#define CUDA_R_X CUDA_R_16BF
#endif

__device__ __host__ __forceinline__ float to_float(float x) { return x; }
__device__ __host__ __forceinline__ float to_float(__nv_bfloat16 x) { return __bfloat162float(x); }
template <typename T> __device__ __host__ __forceinline__ T from_float(float x);
template <> __device__ __host__ __forceinline__ float from_float<float>(float x) { return x; }
template <> __device__ __host__ __forceinline__ __nv_bfloat16 from_float<__nv_bfloat16>(float x) {
    return __float2bfloat16_rn(x);
}

// 16-byte vector of floatX for coalesced loads and stores (8 bf16 or 4 fp32).
enum { X128_ELEMS = 16 / sizeof(floatX) };
struct __align__(16) x128 {
    floatX v[X128_ELEMS];
};
__device__ __forceinline__ x128 load128(const floatX* p) { return *reinterpret_cast<const x128*>(p); }
__device__ __forceinline__ void store128(floatX* p, x128 x) { *reinterpret_cast<x128*>(p) = x; }
