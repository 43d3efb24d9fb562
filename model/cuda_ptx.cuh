// The warp-level PTX instructions of the FlashAttention-2-class kernels, as small inline functions
// with PTX's own operand layouts:
//
//   mma_m16n8k16_bf16   mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32: D = A B + C
//   ldmatrix_x{1,2,4}   ldmatrix.sync.aligned.m8n8.x{1,2,4}.shared.b16 (and .trans)
//   cp_async_16         cp.async.cg.shared.global [dst], [src], 16, src_bytes (zero-fill)
//   cp_async_commit     cp.async.commit_group
//   cp_async_wait<N>    cp.async.wait_group N
//   ex2_approx_ftz      ex2.approx.ftz.f32: 2^x, max relative error 2^-22 (PTX ISA), subnormal
//                       inputs and results flushed to zero
//   red_add_f32         red.global.add.f32: a fire-and-forget atomic add (no value returned)
//   red_add_v2_f32      red.global.add.v2.f32, sm_90 only: defined where CUDA_PTX_HAS_RED_V2 is 1
//                       (the host runtime and sm_90+ device code); 8-byte aligned; each element is
//                       its own atomic add
//   ld_acquire_gpu_u32  ld.acquire.gpu.global.u32 (a semaphore's wait)
//   red_release_gpu_add_u32  red.release.gpu.global.add.u32 (its signal)
//   nanosleep_ns        __nanosleep: the back-off of a spin-wait (sm_70+)
//
// Under nvcc (sm_80 and later) each is one PTX instruction. Under the host runtime (-DCUDA_HOST)
// each calls its portable twin (tests/cuda_host/host_ptx.h), a warp collective that follows the
// same fragment layouts, so a kernel written against this header runs and is checked on the CPU.
//
// Fragment layouts (PTX ISA, "Matrix fragments for mma.m16n8k16", bf16). lane = 0..31,
// g = lane / 4 (the group), t = lane % 4 (the thread in the group); a .b32 register holds two
// bf16, the lower column (or k) index in the low 16 bits.
//   A (16 x 16, row-major M x K): a[0] = (g, 2t..2t+1), a[1] = (g+8, 2t..), a[2] = (g, 2t+8..),
//                                 a[3] = (g+8, 2t+8..)
//   B (16 x 8,  K x N, "col"):    b[0] = (k = 2t..2t+1, n = g), b[1] = (k = 2t+8.., n = g)
//   C, D (16 x 8 fp32):           c[0], c[1] = (g, 2t), (g, 2t+1); c[2], c[3] = (g+8, 2t), (g+8, 2t+1)
// ldmatrix: an 8 x 8 matrix of 16-bit elements is 8 rows of 16 contiguous bytes; lane 8i + r
// gives the address of row r of matrix i (.x1 reads lanes 0-7, .x2 lanes 0-15). Lane l receives,
// in register i, elements (l / 4, 2(l % 4)) and (l / 4, 2(l % 4) + 1) of matrix i; with .trans,
// elements (2(l % 4), l / 4) and (2(l % 4) + 1, l / 4). Addresses are 16-byte aligned shared memory.
// cp.async: each thread's copies become visible to that thread after its cp_async_wait<N> leaves at
// most N of its committed groups pending; other threads see them after that and a __syncthreads.
// A semaphore-ordered reduction (FlashAttention-3's deterministic dQ): one thread spins
// `while (ld_acquire_gpu_u32(sem) != turn) nanosleep_ns(..)`, __syncthreads, the block adds, then
// __syncthreads, __threadfence and red_release_gpu_add_u32(sem, 1) by one thread. A block may wait
// only for blocks with smaller indices or earlier tickets (a GPU starts those first). The host
// runtime runs such waits under every schedule and ends a wait that never ends with a diagnostic.
#pragma once
#include <stdint.h>

#include "model/cuda_common.cuh"

#if defined(__CUDACC__)

__device__ __forceinline__ void mma_m16n8k16_bf16(float d[4], const uint32_t a[4], const uint32_t b[2],
                                                  const float c[4]) {
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, "
        "{%8, %9}, {%10, %11, %12, %13};\n"
        : "=f"(d[0]), "=f"(d[1]), "=f"(d[2]), "=f"(d[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]), "f"(c[0]), "f"(c[1]),
          "f"(c[2]), "f"(c[3]));
}

__device__ __forceinline__ uint32_t smem_u32(const void* p) {
    return (uint32_t)__cvta_generic_to_shared(p);
}

__device__ __forceinline__ void ldmatrix_x4(uint32_t r[4], const void* row) {
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3]) : "r"(smem_u32(row)));
}
__device__ __forceinline__ void ldmatrix_x4_trans(uint32_t r[4], const void* row) {
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3]) : "r"(smem_u32(row)));
}
__device__ __forceinline__ void ldmatrix_x2(uint32_t r[2], const void* row) {
    asm volatile("ldmatrix.sync.aligned.m8n8.x2.shared.b16 {%0, %1}, [%2];\n"
                 : "=r"(r[0]), "=r"(r[1]) : "r"(smem_u32(row)));
}
__device__ __forceinline__ void ldmatrix_x2_trans(uint32_t r[2], const void* row) {
    asm volatile("ldmatrix.sync.aligned.m8n8.x2.trans.shared.b16 {%0, %1}, [%2];\n"
                 : "=r"(r[0]), "=r"(r[1]) : "r"(smem_u32(row)));
}
__device__ __forceinline__ void ldmatrix_x1(uint32_t r[1], const void* row) {
    asm volatile("ldmatrix.sync.aligned.m8n8.x1.shared.b16 {%0}, [%1];\n" : "=r"(r[0]) : "r"(smem_u32(row)));
}
__device__ __forceinline__ void ldmatrix_x1_trans(uint32_t r[1], const void* row) {
    asm volatile("ldmatrix.sync.aligned.m8n8.x1.trans.shared.b16 {%0}, [%1];\n" : "=r"(r[0]) : "r"(smem_u32(row)));
}

// src_bytes in [0, 16]: the bytes read from src; the rest of the 16 are zeros (0: src not read).
__device__ __forceinline__ void cp_async_16(void* dst, const void* src, int src_bytes) {
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(smem_u32(dst)), "l"(src),
                 "r"(src_bytes));
}
__device__ __forceinline__ void cp_async_commit(void) { asm volatile("cp.async.commit_group;\n" ::); }
template <int N> __device__ __forceinline__ void cp_async_wait(void) {
    asm volatile("cp.async.wait_group %0;\n" ::"n"(N));
}

__device__ __forceinline__ float ex2_approx_ftz(float x) {
    float y;
    asm("ex2.approx.ftz.f32 %0, %1;\n" : "=f"(y) : "f"(x));
    return y;
}
__device__ __forceinline__ void red_add_f32(float* p, float v) {
    asm volatile("red.global.add.f32 [%0], %1;\n" ::"l"(p), "f"(v) : "memory");
}
// The vector form needs sm_90: sm_80 code uses two red_add_f32 under #if !CUDA_PTX_HAS_RED_V2.
#if !defined(__CUDA_ARCH__) || __CUDA_ARCH__ >= 900
#define CUDA_PTX_HAS_RED_V2 1
__device__ __forceinline__ void red_add_v2_f32(float* p, float a, float b) {
    asm volatile("red.global.add.v2.f32 [%0], {%1, %2};\n" ::"l"(p), "f"(a), "f"(b) : "memory");
}
#else
#define CUDA_PTX_HAS_RED_V2 0
#endif
__device__ __forceinline__ unsigned ld_acquire_gpu_u32(const unsigned* p) {
    unsigned v;
    asm volatile("ld.acquire.gpu.global.u32 %0, [%1];\n" : "=r"(v) : "l"(p) : "memory");
    return v;
}
__device__ __forceinline__ void red_release_gpu_add_u32(unsigned* p, unsigned v) {
    asm volatile("red.release.gpu.global.add.u32 [%0], %1;\n" ::"l"(p), "r"(v) : "memory");
}
__device__ __forceinline__ void nanosleep_ns(unsigned ns) { __nanosleep(ns); }

#else  // CUDA_HOST: the twins (tests/cuda_host/host_ptx.h, included by the runtime)

static inline void mma_m16n8k16_bf16(float d[4], const uint32_t a[4], const uint32_t b[2], const float c[4]) {
    cuda_host_mma_m16n8k16_bf16(d, a, b, c);
}
static inline void ldmatrix_x4(uint32_t r[4], const void* row) { cuda_host_ldmatrix(r, 4, 0, row); }
static inline void ldmatrix_x4_trans(uint32_t r[4], const void* row) { cuda_host_ldmatrix(r, 4, 1, row); }
static inline void ldmatrix_x2(uint32_t r[2], const void* row) { cuda_host_ldmatrix(r, 2, 0, row); }
static inline void ldmatrix_x2_trans(uint32_t r[2], const void* row) { cuda_host_ldmatrix(r, 2, 1, row); }
static inline void ldmatrix_x1(uint32_t r[1], const void* row) { cuda_host_ldmatrix(r, 1, 0, row); }
static inline void ldmatrix_x1_trans(uint32_t r[1], const void* row) { cuda_host_ldmatrix(r, 1, 1, row); }
static inline void cp_async_16(void* dst, const void* src, int src_bytes) {
    cuda_host_cp_async_16(dst, src, src_bytes);
}
static inline void cp_async_commit(void) { cuda_host_cp_async_commit(); }
template <int N> static inline void cp_async_wait(void) { cuda_host_cp_async_wait(N); }
static inline float ex2_approx_ftz(float x) { return cuda_host_ex2_approx_ftz(x); }
static inline void red_add_f32(float* p, float v) { cuda_host_red_add_f32(p, v); }
#define CUDA_PTX_HAS_RED_V2 1
static inline void red_add_v2_f32(float* p, float a, float b) { cuda_host_red_add_v2_f32(p, a, b); }
static inline unsigned ld_acquire_gpu_u32(const unsigned* p) { return cuda_host_ld_acquire_u32(p); }
static inline void red_release_gpu_add_u32(unsigned* p, unsigned v) { cuda_host_red_release_add_u32(p, v); }
static inline void nanosleep_ns(unsigned ns) { cuda_host_nanosleep(ns); }

#endif

// Two floats as one .b32 register of two bf16 (round to nearest even), lo in the low half: the
// conversion of an fp32 accumulator pair into an A fragment register (P, dS).
__device__ __forceinline__ uint32_t pack_bf16x2(float lo, float hi) {
    __nv_bfloat162 v = __floats2bfloat162_rn(lo, hi);
    uint32_t u;
    memcpy(&u, &v, sizeof u);
    return u;
}
