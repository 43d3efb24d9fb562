// Device-side functions of the host runtime: block barrier, warp collectives, atomics and math
// intrinsics. Barriers and warp collectives switch fibers (block_exec.cpp); atomics are real
// atomics because blocks may run on several OS threads at once.
#pragma once
#include <stdio.h>
#include <math.h>
#include <string.h>
#include <type_traits>
#include "tests/cuda_host/host_bf16.h"

// --- Block barrier and warp collectives (block_exec.cpp) ---------------------------------------

// Waits until every thread of the block that has not exited reaches a __syncthreads (threads
// that returned count as arrived, as on sm_70+ hardware).
void __syncthreads(void);

typedef struct {
    unsigned long long value;  // the value deposited by the requested source lane
    unsigned ballot;           // lanes of the round that deposited a non-zero value
    unsigned members;          // lanes that took part: the lanes of the mask that exist
} CudaHostWarpResult;

// One warp collective round: the lanes of `mask` each deposit a value and name a source lane,
// then wait for each other; each gets the value of its source lane (0xFF.. bytes if that lane
// does not take part). Fails loudly if the caller is not in mask, a lane of mask has returned,
// or lanes already waiting use a different mask. `what` names the intrinsic in those messages.
CudaHostWarpResult cuda_host_warp_round(unsigned mask, unsigned long long value, int src_lane,
                                        const char* what);
// Fails loudly (naming `what`) unless width is a power of two in [1, 32].
void cuda_host_check_width(int width, const char* what);

static inline int cuda_host_lane(void) {
    return (int)((threadIdx.x + blockDim.x * (threadIdx.y + blockDim.y * threadIdx.z)) & 31u);
}

template <typename T> static inline unsigned long long cuda_host_pack(T v) {
    static_assert(sizeof(T) <= 8 && std::is_trivially_copyable<T>::value,
                  "warp shuffles take values of at most 8 bytes");
    unsigned long long u = 0;
    memcpy(&u, &v, sizeof v);
    return u;
}
template <typename T> static inline T cuda_host_unpack(unsigned long long u) {
    T v;
    memcpy(&v, &u, sizeof v);
    return v;
}

enum { CUDA_HOST_SHFL_IDX, CUDA_HOST_SHFL_UP, CUDA_HOST_SHFL_DOWN, CUDA_HOST_SHFL_BFLY };

// Source lane of a shuffle, following PTX shfl.sync: width splits the warp into segments, a
// source outside the caller's segment (or clamp range) yields the caller's own value.
static inline int cuda_host_shfl_source(int mode, int lane, int b, int width) {
    int seg = 32 - width;                    // c[12:8]: the lane bits that select the segment
    int clamp = mode == CUDA_HOST_SHFL_UP ? 0 : 31;
    int min_lane = lane & seg;
    int max_lane = min_lane | (clamp & ~seg);
    int j, ok;
    b &= 31;
    switch (mode) {
    case CUDA_HOST_SHFL_UP: j = lane - b; ok = j >= max_lane; break;
    case CUDA_HOST_SHFL_DOWN: j = lane + b; ok = j <= max_lane; break;
    case CUDA_HOST_SHFL_BFLY: j = lane ^ b; ok = j <= max_lane; break;
    default: j = min_lane | (b & ~seg); ok = j <= max_lane; break;
    }
    return ok ? j : lane;
}

template <typename T>
static inline T cuda_host_shfl(int mode, unsigned mask, T var, int b, int width, const char* what) {
    cuda_host_check_width(width, what);
    int src = cuda_host_shfl_source(mode, cuda_host_lane(), b, width);
    return cuda_host_unpack<T>(cuda_host_warp_round(mask, cuda_host_pack(var), src, what).value);
}

template <typename T>
static inline T __shfl_sync(unsigned mask, T var, int src_lane, int width = warpSize) {
    return cuda_host_shfl(CUDA_HOST_SHFL_IDX, mask, var, src_lane, width, "__shfl_sync");
}
template <typename T>
static inline T __shfl_up_sync(unsigned mask, T var, unsigned int delta, int width = warpSize) {
    return cuda_host_shfl(CUDA_HOST_SHFL_UP, mask, var, (int)delta, width, "__shfl_up_sync");
}
template <typename T>
static inline T __shfl_down_sync(unsigned mask, T var, unsigned int delta, int width = warpSize) {
    return cuda_host_shfl(CUDA_HOST_SHFL_DOWN, mask, var, (int)delta, width, "__shfl_down_sync");
}
template <typename T>
static inline T __shfl_xor_sync(unsigned mask, T var, int lane_mask, int width = warpSize) {
    return cuda_host_shfl(CUDA_HOST_SHFL_BFLY, mask, var, lane_mask, width, "__shfl_xor_sync");
}

static inline unsigned __ballot_sync(unsigned mask, int predicate) {
    return cuda_host_warp_round(mask, predicate != 0, 0, "__ballot_sync").ballot;
}
static inline int __any_sync(unsigned mask, int predicate) {
    return cuda_host_warp_round(mask, predicate != 0, 0, "__any_sync").ballot != 0;
}
static inline int __all_sync(unsigned mask, int predicate) {
    CudaHostWarpResult r = cuda_host_warp_round(mask, predicate != 0, 0, "__all_sync");
    return r.ballot == r.members;
}
static inline void __syncwarp(unsigned mask = 0xffffffffu) { cuda_host_warp_round(mask, 0, 0, "__syncwarp"); }
// Lanes of the caller's warp that exist and have not exited.
unsigned __activemask(void);

// --- Atomics (relaxed, like CUDA's) -----------------------------------------------------------

template <typename T, typename F> static inline T cuda_host_atomic_update(T* p, F f) {
    T old, next;
    __atomic_load(p, &old, __ATOMIC_RELAXED);
    do {
        next = f(old);
    } while (!__atomic_compare_exchange(p, &old, &next, true, __ATOMIC_RELAXED, __ATOMIC_RELAXED));
    return old;
}

#define CUDA_HOST_ATOMIC_INT(T) \
    static inline T atomicAdd(T* p, T v) { return __atomic_fetch_add(p, v, __ATOMIC_RELAXED); } \
    static inline T atomicSub(T* p, T v) { return __atomic_fetch_sub(p, v, __ATOMIC_RELAXED); } \
    static inline T atomicAnd(T* p, T v) { return __atomic_fetch_and(p, v, __ATOMIC_RELAXED); } \
    static inline T atomicOr(T* p, T v) { return __atomic_fetch_or(p, v, __ATOMIC_RELAXED); } \
    static inline T atomicXor(T* p, T v) { return __atomic_fetch_xor(p, v, __ATOMIC_RELAXED); } \
    static inline T atomicExch(T* p, T v) { return __atomic_exchange_n(p, v, __ATOMIC_RELAXED); } \
    static inline T atomicMax(T* p, T v) { return cuda_host_atomic_update(p, [v](T o) { return o > v ? o : v; }); } \
    static inline T atomicMin(T* p, T v) { return cuda_host_atomic_update(p, [v](T o) { return o < v ? o : v; }); } \
    static inline T atomicCAS(T* p, T compare, T v) { \
        __atomic_compare_exchange_n(p, &compare, v, false, __ATOMIC_RELAXED, __ATOMIC_RELAXED); \
        return compare; \
    }
CUDA_HOST_ATOMIC_INT(int)
CUDA_HOST_ATOMIC_INT(unsigned int)
CUDA_HOST_ATOMIC_INT(unsigned long long)
#undef CUDA_HOST_ATOMIC_INT
static inline long long atomicMax(long long* p, long long v) {
    return cuda_host_atomic_update(p, [v](long long o) { return o > v ? o : v; });
}
static inline long long atomicMin(long long* p, long long v) {
    return cuda_host_atomic_update(p, [v](long long o) { return o < v ? o : v; });
}
static inline float atomicAdd(float* p, float v) {
    return cuda_host_atomic_update(p, [v](float o) { return o + v; });
}
static inline double atomicAdd(double* p, double v) {
    return cuda_host_atomic_update(p, [v](double o) { return o + v; });
}
static inline float atomicExch(float* p, float v) {
    float old;
    __atomic_exchange(p, &v, &old, __ATOMIC_RELAXED);
    return old;
}
static inline __nv_bfloat16 atomicAdd(__nv_bfloat16* p, __nv_bfloat16 v) {
    return cuda_host_atomic_update(p, [v](__nv_bfloat16 o) { return o + v; });
}
static inline __nv_bfloat162 atomicAdd(__nv_bfloat162* p, __nv_bfloat162 v) {
    return cuda_host_atomic_update(p, [v](__nv_bfloat162 o) { return __hadd2(o, v); });
}

static inline void __threadfence(void) { __atomic_thread_fence(__ATOMIC_SEQ_CST); }
static inline void __threadfence_block(void) { __atomic_thread_fence(__ATOMIC_SEQ_CST); }
static inline void __threadfence_system(void) { __atomic_thread_fence(__ATOMIC_SEQ_CST); }

// --- Loads and stores with cache hints: plain accesses here ------------------------------------

template <typename T> static inline T __ldg(const T* p) { return *p; }
template <typename T> static inline T __ldcg(const T* p) { return *p; }
template <typename T> static inline T __ldca(const T* p) { return *p; }
template <typename T> static inline T __ldcs(const T* p) { return *p; }
template <typename T> static inline T __ldlu(const T* p) { return *p; }
template <typename T> static inline T __ldcv(const T* p) { return *p; }
template <typename T> static inline void __stcg(T* p, T v) { *p = v; }
template <typename T> static inline void __stcs(T* p, T v) { *p = v; }
template <typename T> static inline void __stwb(T* p, T v) { *p = v; }
template <typename T> static inline void __stwt(T* p, T v) { *p = v; }

// --- Math intrinsics: the accurate libm functions stand in for the fast approximations ----------

// glibc declares (but does not export) its own __expf, __logf, ... in <math.h>, so these are
// macros rather than functions.
#define __expf(x) expf(x)
#define __exp10f(x) exp10f(x)
#define __logf(x) logf(x)
#define __log2f(x) log2f(x)
#define __log10f(x) log10f(x)
#define __powf(x, y) powf(x, y)
#define __sinf(x) sinf(x)
#define __cosf(x) cosf(x)
#define __tanf(x) tanf(x)
#define __sincosf(x, s, c) sincosf(x, s, c)
static inline float __fdividef(float a, float b) { return a / b; }
static inline float __frcp_rn(float x) { return 1.0f / x; }
static inline float __fsqrt_rn(float x) { return sqrtf(x); }
static inline float rsqrtf(float x) { return 1.0f / sqrtf(x); }
static inline float __frsqrt_rn(float x) { return 1.0f / sqrtf(x); }
static inline double rsqrt(double x) { return 1.0 / sqrt(x); }
static inline float __fmaf_rn(float a, float b, float c) { return fmaf(a, b, c); }
static inline float __saturatef(float x) { return x > 0.0f ? (x < 1.0f ? x : 1.0f) : 0.0f; }  // NaN -> 0
static inline float normcdff(float x) { return 0.5f * erfcf(-x * 0.70710678118654752f); }
static inline int __float2int_rn(float x) { return (int)lrintf(x); }
static inline int __float2int_rz(float x) { return (int)x; }
static inline int __float2int_rd(float x) { return (int)floorf(x); }
static inline int __float2int_ru(float x) { return (int)ceilf(x); }
static inline unsigned int __float2uint_rn(float x) { return (unsigned int)lrintf(x); }
static inline float __int2float_rn(int x) { return (float)x; }
static inline float __uint2float_rn(unsigned int x) { return (float)x; }
static inline int __float_as_int(float x) { int i; memcpy(&i, &x, 4); return i; }
static inline unsigned int __float_as_uint(float x) { unsigned int i; memcpy(&i, &x, 4); return i; }
static inline float __int_as_float(int i) { float x; memcpy(&x, &i, 4); return x; }
static inline float __uint_as_float(unsigned int i) { float x; memcpy(&x, &i, 4); return x; }
static inline int __popc(unsigned int x) { return __builtin_popcount(x); }
static inline int __popcll(unsigned long long x) { return __builtin_popcountll(x); }
static inline int __clz(int x) { return x ? __builtin_clz((unsigned int)x) : 32; }
static inline int __clzll(long long x) { return x ? __builtin_clzll((unsigned long long)x) : 64; }
static inline int __ffs(int x) { return __builtin_ffs(x); }
static inline int __ffsll(long long x) { return __builtin_ffsll(x); }
static inline unsigned int __brev(unsigned int x) {
    unsigned int r = 0;
    for (int i = 0; i < 32; i++) r |= ((x >> i) & 1u) << (31 - i);
    return r;
}
static inline unsigned int __umulhi(unsigned int a, unsigned int b) {
    return (unsigned int)(((unsigned long long)a * b) >> 32);
}
static inline int __mulhi(int a, int b) { return (int)(((long long)a * b) >> 32); }
// A kernel's printf before its trap shows, as the device's buffer does when the trap is reported.
static inline void __trap(void) {
    fflush(stdout);
    fflush(stderr);
    __builtin_trap();
}

// CUDA's min/max overloads, mixed integer types included (common type, as CUDA's); the
// floating-point ones ignore a NaN operand like fminf/fmaxf.
template <typename A, typename B,
          typename R = typename std::enable_if<std::is_arithmetic<A>::value && std::is_arithmetic<B>::value,
                                               typename std::common_type<A, B>::type>::type>
static inline R min(A a, B b) {
    R x = (R)a, y = (R)b;
    if (std::is_floating_point<R>::value && x != x) return y;
    return y < x ? y : x;
}
template <typename A, typename B,
          typename R = typename std::enable_if<std::is_arithmetic<A>::value && std::is_arithmetic<B>::value,
                                               typename std::common_type<A, B>::type>::type>
static inline R max(A a, B b) {
    R x = (R)a, y = (R)b;
    if (std::is_floating_point<R>::value && x != x) return y;
    return y > x ? y : x;
}
