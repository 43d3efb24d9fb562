// CUDA's qualifiers, vector types and built-in index variables for the host runtime.
// Qualifiers are no-ops: every function is a host function and kernels are called by the
// launcher (host_runtime.h). Index variables are per OS thread (__thread); the block scheduler
// (block_exec.cpp) rewrites threadIdx whenever it switches to another fiber, so each CUDA thread
// sees its own value.
#pragma once
#include <stddef.h>
#include <stdint.h>

#define __global__
#define __device__
#define __host__
#define __constant__
#define __managed__
#define __grid_constant__
#define __forceinline__ inline  // not always_inline: g++ refuses that where nvcc would not inline
#define __align__(n) __attribute__((aligned(n)))
#define __launch_bounds__(...)
// Static shared memory: one instance per OS thread, and one OS thread runs one block at a time,
// so all fibers (CUDA threads) of a block share it. A block-scope thread_local is static.
// `extern __shared__` cannot work this way (it links to an undefined symbol): use
// DYNAMIC_SHARED(T, name) from model/cuda_common.cuh for dynamic shared memory.
#define __shared__ thread_local
// Not defined on purpose: __noinline__ (libstdc++ uses __attribute__((__noinline__))) and
// __restrict__ (already a g++ keyword).

#define CUDA_HOST_VEC2(T, N, A) \
    struct __attribute__((aligned(A))) N { T x, y; }; \
    static inline N make_##N(T x, T y) { N v = {x, y}; return v; }
#define CUDA_HOST_VEC3(T, N) \
    struct N { T x, y, z; }; \
    static inline N make_##N(T x, T y, T z) { N v = {x, y, z}; return v; }
#define CUDA_HOST_VEC4(T, N, A) \
    struct __attribute__((aligned(A))) N { T x, y, z, w; }; \
    static inline N make_##N(T x, T y, T z, T w) { N v = {x, y, z, w}; return v; }

// Alignments as in CUDA's vector_types.h: what makes float4 loads single 16-byte accesses.
CUDA_HOST_VEC2(float, float2, 8)
CUDA_HOST_VEC3(float, float3)
CUDA_HOST_VEC4(float, float4, 16)
CUDA_HOST_VEC2(double, double2, 16)
CUDA_HOST_VEC2(int, int2, 8)
CUDA_HOST_VEC3(int, int3)
CUDA_HOST_VEC4(int, int4, 16)
CUDA_HOST_VEC2(unsigned int, uint2, 8)
CUDA_HOST_VEC3(unsigned int, uint3)
CUDA_HOST_VEC4(unsigned int, uint4, 16)
CUDA_HOST_VEC2(long long, longlong2, 16)
CUDA_HOST_VEC2(unsigned short, ushort2, 4)
CUDA_HOST_VEC4(unsigned char, uchar4, 4)
CUDA_HOST_VEC4(char, char4, 4)

#undef CUDA_HOST_VEC2
#undef CUDA_HOST_VEC3
#undef CUDA_HOST_VEC4

// constexpr constructors keep dim3 constant-initialized, so `__thread dim3` is allowed and
// accessed directly (no TLS wrapper call per access).
struct dim3 {
    unsigned int x, y, z;
    constexpr dim3(unsigned int vx = 1, unsigned int vy = 1, unsigned int vz = 1)
        : x(vx), y(vy), z(vz) {}
    constexpr dim3(uint3 v) : x(v.x), y(v.y), z(v.z) {}
    constexpr operator uint3() const { return uint3{x, y, z}; }
};

extern __thread uint3 threadIdx;
extern __thread uint3 blockIdx;
extern __thread dim3 blockDim;
extern __thread dim3 gridDim;
static constexpr int warpSize = 32;
