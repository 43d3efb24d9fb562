// The Hopper (sm_90a) PTX instructions of the warp-specialised attention kernels, as small inline
// functions (model/cuda_ptx.cuh has the sm_80 ones):
//
//   mbarrier_init               mbarrier.init.shared::cta.b64 [bar], count
//   mbarrier_arrive             mbarrier.arrive.shared::cta.b64 (returns the state token)
//   mbarrier_arrive_expect_tx   mbarrier.arrive.expect_tx.shared::cta.b64 [bar], tx bytes
//   mbarrier_expect_tx          mbarrier.expect_tx.relaxed.cta.shared::cta.b64
//   mbarrier_complete_tx        mbarrier.complete_tx.relaxed.cta.shared::cta.b64
//   mbarrier_try_wait_parity    mbarrier.try_wait.parity.shared::cta.b64: 1 once the phase of that
//                               parity has completed (wait: `while (!mbarrier_try_wait_parity(b, p));`)
//   named_barrier_sync/arrive   bar.sync / bar.arrive id, nthreads (ids 1-15; 0 is __syncthreads')
//   setmaxnreg_inc<N>/dec<N>    setmaxnreg.{inc,dec}.sync.aligned.u32 N (N % 8 == 0, 24..256; the
//                               whole warpgroup)
//   fence_proxy_async           fence.proxy.async.shared::cta (generic-proxy writes to shared
//                               memory made visible to TMA / wgmma)
//   fence_mbarrier_init         fence.mbarrier_init.release.cluster
//   tma_load_2d                 cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes
//                               [dst], [map, {c0, c1}], [bar] (c0: the innermost coordinate)
//   tma_load_3d                 the same, .3d: [map, {c0, c1, c2}] (a rank-3 map: heads as a dimension)
//   tma_store_2d                cp.async.bulk.tensor.2d.global.shared::cta.bulk_group [map, {c0, c1}], [src]
//   tma_reduce_add_2d           cp.reduce.async.bulk.tensor.2d.global.shared::cta.add.tile.bulk_group
//   tma_reduce_add_3d           the same, .3d
//   bulk_commit / bulk_wait<N>  cp.async.bulk.commit_group / cp.async.bulk.wait_group N (the stores and
//                               reductions are done, their shared source free, after the wait)
//   smem_desc                   a wgmma shared-memory matrix descriptor (PTX ISA "Matrix Descriptor Format")
//   wgmma_fence/commit/wait<N>  wgmma.fence / commit_group / wait_group N (.sync.aligned)
//   wgmma_m64k16_bf16<N,TA,TB>  wgmma.mma_async.sync.aligned.m64nNk16.f32.bf16.bf16 (N = 8..128)
//   wgmma_m64n64k16_bf16_rs<TB> the same with A from registers (m64n64k16)
//   wgmma_m64n80k16_bf16_rs<TB> and m64n80k16 (the forward's P V at HS 80)
//
// Under nvcc the wrappers are one PTX instruction each in sm_90a code (__CUDA_ARCH_FEAT_SM90_ALL)
// and trap in any other device code (the kernels that use them are sm_90a only; CUDA_PTX_HAS_SM90A
// says which). Under the host runtime (-DCUDA_HOST) each calls its twin (tests/cuda_host/
// host_ptx_sm90.h): mbarriers with phases, arrival counts and transaction bytes; TMA copies that
// land (with zero fill and swizzle) only at a wait on their mbarrier; checked setmaxnreg.
//
// The tensor map: host code gets cuTensorMapEncodeTiled from tma_encode_tiled_fn() (the driver's,
// through cudaGetDriverEntryPointByVersion; under the host runtime its twin) and passes the
// CUtensorMap to the kernel as a `const __grid_constant__ CUtensorMap` parameter.
// TMA swizzle (PTX ISA "Tensor-map swizzling modes", CUTLASS Swizzle<B,4,3>): the box is written
// row-major (c0 fastest), then the byte address's 16-byte chunk index, bits [4, 4 + B), is XORed
// with bits [7, 7 + B), B = 1, 2, 3 for 32, 64, 128 B. Align swizzled tiles to 1024 bytes.
#pragma once
#include <stdint.h>

#include "model/cuda_common.cuh"

#if defined(__CUDACC__)
#include <cuda.h>

#if defined(__CUDA_ARCH_FEAT_SM90_ALL) || !defined(__CUDA_ARCH__)
#define CUDA_PTX_HAS_SM90A 1
#else
#define CUDA_PTX_HAS_SM90A 0
#endif
// In sm_90a device code: the instruction; in other device code: a trap (never reached by a kernel
// that checks CUDA_PTX_HAS_SM90A); in the host pass: nothing (device functions are not called).
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
#define SM90A_ASM(...) asm volatile(__VA_ARGS__)
#elif defined(__CUDA_ARCH__)
#define SM90A_ASM(...) __trap()
#else
#define SM90A_ASM(...) ((void)0)
#endif

__device__ __forceinline__ uint32_t smem_addr_u32(const void* p) { return (uint32_t)__cvta_generic_to_shared(p); }

__device__ __forceinline__ void mbarrier_init(uint64_t* bar, unsigned count) {
    SM90A_ASM("mbarrier.init.shared::cta.b64 [%0], %1;\n" ::"r"(smem_addr_u32(bar)), "r"(count) : "memory");
}
__device__ __forceinline__ uint64_t mbarrier_arrive(uint64_t* bar) {
    uint64_t state = 0;
    SM90A_ASM("mbarrier.arrive.shared::cta.b64 %0, [%1];\n" : "=l"(state) : "r"(smem_addr_u32(bar)) : "memory");
    return state;
}
__device__ __forceinline__ uint64_t mbarrier_arrive_expect_tx(uint64_t* bar, unsigned tx) {
    uint64_t state = 0;
    SM90A_ASM("mbarrier.arrive.expect_tx.shared::cta.b64 %0, [%1], %2;\n"
              : "=l"(state) : "r"(smem_addr_u32(bar)), "r"(tx) : "memory");
    return state;
}
__device__ __forceinline__ void mbarrier_expect_tx(uint64_t* bar, unsigned tx) {
    SM90A_ASM("mbarrier.expect_tx.relaxed.cta.shared::cta.b64 [%0], %1;\n" ::"r"(smem_addr_u32(bar)), "r"(tx) : "memory");
}
__device__ __forceinline__ void mbarrier_complete_tx(uint64_t* bar, unsigned tx) {
    SM90A_ASM("mbarrier.complete_tx.relaxed.cta.shared::cta.b64 [%0], %1;\n" ::"r"(smem_addr_u32(bar)), "r"(tx) : "memory");
}
__device__ __forceinline__ int mbarrier_try_wait_parity(uint64_t* bar, unsigned parity) {
    uint32_t done = 0;
    SM90A_ASM("{\n .reg .pred p;\n mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\n selp.u32 %0, 1, 0, p;\n}\n"
              : "=r"(done) : "r"(smem_addr_u32(bar)), "r"(parity) : "memory");
    return (int)done;
}
__device__ __forceinline__ void named_barrier_sync(unsigned id, unsigned nthreads) {
    SM90A_ASM("bar.sync %0, %1;\n" ::"r"(id), "r"(nthreads) : "memory");
}
__device__ __forceinline__ void named_barrier_arrive(unsigned id, unsigned nthreads) {
    SM90A_ASM("bar.arrive %0, %1;\n" ::"r"(id), "r"(nthreads) : "memory");
}
template <int N> __device__ __forceinline__ void setmaxnreg_inc(void) {
    static_assert(N % 8 == 0 && N >= 24 && N <= 256, "setmaxnreg: a multiple of 8 in [24, 256]");
    SM90A_ASM("setmaxnreg.inc.sync.aligned.u32 %0;\n" ::"n"(N));
}
template <int N> __device__ __forceinline__ void setmaxnreg_dec(void) {
    static_assert(N % 8 == 0 && N >= 24 && N <= 256, "setmaxnreg: a multiple of 8 in [24, 256]");
    SM90A_ASM("setmaxnreg.dec.sync.aligned.u32 %0;\n" ::"n"(N));
}
__device__ __forceinline__ void fence_proxy_async(void) { SM90A_ASM("fence.proxy.async.shared::cta;\n" ::: "memory"); }
__device__ __forceinline__ void fence_mbarrier_init(void) {
    SM90A_ASM("fence.mbarrier_init.release.cluster;\n" ::: "memory");
}
__device__ __forceinline__ void tma_load_2d(void* dst, const CUtensorMap* map, int c0, int c1, uint64_t* bar) {
    SM90A_ASM("cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1, {%2, %3}], [%4];\n"
              ::"r"(smem_addr_u32(dst)), "l"(map), "r"(c0), "r"(c1), "r"(smem_addr_u32(bar)) : "memory");
}

__device__ __forceinline__ void tma_load_3d(void* dst, const CUtensorMap* map, int c0, int c1, int c2, uint64_t* bar) {
    SM90A_ASM("cp.async.bulk.tensor.3d.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1, {%2, %3, %4}], [%5];\n"
              ::"r"(smem_addr_u32(dst)), "l"(map), "r"(c0), "r"(c1), "r"(c2), "r"(smem_addr_u32(bar)) : "memory");
}
__device__ __forceinline__ void tma_store_2d(const CUtensorMap* map, const void* src, int c0, int c1) {
    SM90A_ASM("cp.async.bulk.tensor.2d.global.shared::cta.bulk_group [%0, {%1, %2}], [%3];\n"
              ::"l"(map), "r"(c0), "r"(c1), "r"(smem_addr_u32(src)) : "memory");
}
__device__ __forceinline__ void tma_reduce_add_2d(const CUtensorMap* map, const void* src, int c0, int c1) {
    SM90A_ASM("cp.reduce.async.bulk.tensor.2d.global.shared::cta.add.tile.bulk_group [%0, {%1, %2}], [%3];\n"
              ::"l"(map), "r"(c0), "r"(c1), "r"(smem_addr_u32(src)) : "memory");
}
__device__ __forceinline__ void tma_reduce_add_3d(const CUtensorMap* map, const void* src, int c0, int c1, int c2) {
    SM90A_ASM("cp.reduce.async.bulk.tensor.3d.global.shared::cta.add.tile.bulk_group [%0, {%1, %2, %3}], [%4];\n"
              ::"l"(map), "r"(c0), "r"(c1), "r"(c2), "r"(smem_addr_u32(src)) : "memory");
}
__device__ __forceinline__ void bulk_commit(void) { SM90A_ASM("cp.async.bulk.commit_group;\n" ::: "memory"); }
template <int N> __device__ __forceinline__ void bulk_wait(void) {
    SM90A_ASM("cp.async.bulk.wait_group %0;\n" ::"n"(N) : "memory");
}
__device__ __forceinline__ uint32_t smem_desc_address(const void* p) { return smem_addr_u32(p); }
__device__ __forceinline__ void wgmma_fence(void) { SM90A_ASM("wgmma.fence.sync.aligned;\n" ::: "memory"); }
__device__ __forceinline__ void wgmma_commit(void) { SM90A_ASM("wgmma.commit_group.sync.aligned;\n" ::: "memory"); }
template <int N> __device__ __forceinline__ void wgmma_wait(void) {
    SM90A_ASM("wgmma.wait_group.sync.aligned %0;\n" ::"n"(N) : "memory");
}
__device__ __forceinline__ void wgmma_fence_operand(float& r) { asm volatile("" : "+f"(r)::"memory"); }
template <int N, int TA, int TB> struct Wgmma;
template <int TA, int TB> struct Wgmma<8, TA, TB> {
    __device__ static __forceinline__ void run(float* d, uint64_t da, uint64_t db, int scale_d) {
        SM90A_ASM("{\n .reg .pred p;\n setp.ne.b32 p, %6, 0;\n"
                  " wgmma.mma_async.sync.aligned.m64n8k16.f32.bf16.bf16 {%0, %1, %2, %3}, %4, %5, p, 1, 1, %7, %8;\n}\n"
                  : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
                  : "l"(da), "l"(db), "r"(scale_d), "n"(TA), "n"(TB));
    }
};
template <int TA, int TB> struct Wgmma<16, TA, TB> {
    __device__ static __forceinline__ void run(float* d, uint64_t da, uint64_t db, int scale_d) {
        SM90A_ASM("{\n .reg .pred p;\n setp.ne.b32 p, %10, 0;\n"
                  " wgmma.mma_async.sync.aligned.m64n16k16.f32.bf16.bf16 {%0, %1, %2, %3, %4, %5, %6, %7}, %8, %9, p, 1, 1, %11, %12;\n}\n"
                  : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7])
                  : "l"(da), "l"(db), "r"(scale_d), "n"(TA), "n"(TB));
    }
};
template <int TA, int TB> struct Wgmma<32, TA, TB> {
    __device__ static __forceinline__ void run(float* d, uint64_t da, uint64_t db, int scale_d) {
        SM90A_ASM("{\n .reg .pred p;\n setp.ne.b32 p, %18, 0;\n"
                  " wgmma.mma_async.sync.aligned.m64n32k16.f32.bf16.bf16 {%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15}, %16, %17, p, 1, 1, %19, %20;\n}\n"
                  : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15])
                  : "l"(da), "l"(db), "r"(scale_d), "n"(TA), "n"(TB));
    }
};
template <int TA, int TB> struct Wgmma<64, TA, TB> {
    __device__ static __forceinline__ void run(float* d, uint64_t da, uint64_t db, int scale_d) {
        SM90A_ASM("{\n .reg .pred p;\n setp.ne.b32 p, %34, 0;\n"
                  " wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16 {%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31}, %32, %33, p, 1, 1, %35, %36;\n}\n"
                  : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31])
                  : "l"(da), "l"(db), "r"(scale_d), "n"(TA), "n"(TB));
    }
};
template <int TA, int TB> struct Wgmma<128, TA, TB> {
    __device__ static __forceinline__ void run(float* d, uint64_t da, uint64_t db, int scale_d) {
        SM90A_ASM("{\n .reg .pred p;\n setp.ne.b32 p, %66, 0;\n"
                  " wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16 {%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63}, %64, %65, p, 1, 1, %67, %68;\n}\n"
                  : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]), "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]), "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]), "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]), "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63])
                  : "l"(da), "l"(db), "r"(scale_d), "n"(TA), "n"(TB));
    }
};
// D (N/2 floats) = A B^T + (scale_d ? D : 0); N = 8, 16, 32, 64 or 128.
template <int N, int TA, int TB>
__device__ __forceinline__ void wgmma_m64k16_bf16(float* d, uint64_t desc_a, uint64_t desc_b, int scale_d) {
    Wgmma<N, TA, TB>::run(d, desc_a, desc_b, scale_d);
}

// D (32 floats) = A B^T + (scale_d ? D : 0) with A (64 x 16) from registers: a[0..3] of each thread
// hold mma.m16n8k16's A fragment of its warp's 16 rows (a lane (g, t): rows g and g + 8, columns
// 2t, 2t + 1 and 8 + 2t, 8 + 2t + 1, two bf16 per register, the lower column in the low half).
template <int TB> __device__ __forceinline__ void wgmma_m64n64k16_bf16_rs(float* d, const uint32_t* a, uint64_t desc_b,
                                                                         int scale_d) {
    SM90A_ASM("{\n .reg .pred p;\n setp.ne.b32 p, %37, 0;\n"
              " wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16 {%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31}, {%32, %33, %34, %35}, %36, p, 1, 1, %38;\n}\n"
              : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31])
              : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc_b), "r"(scale_d), "n"(TB));
}

// The same with N = 80 (40 floats per thread): the forward's P V over a head of 80 columns, B
// MN-major across two 128-byte swizzle atoms (the second 64 columns at the descriptor's LBO).
template <int TB> __device__ __forceinline__ void wgmma_m64n80k16_bf16_rs(float* d, const uint32_t* a, uint64_t desc_b,
                                                                         int scale_d) {
    SM90A_ASM("{\n .reg .pred p;\n setp.ne.b32 p, %45, 0;\n"
              " wgmma.mma_async.sync.aligned.m64n80k16.f32.bf16.bf16 {%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, %38, %39}, {%40, %41, %42, %43}, %44, p, 1, 1, %46;\n}\n"
              : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]), "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39])
              : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc_b), "r"(scale_d), "n"(TB));
}
// wgmma (sm_90a): descriptors of bf16 operands in shared memory, and D (64 x N fp32, N/2 registers
// per thread: warp w of the warpgroup holds rows 16 w .. 16 w + 15 in mma.m16n8's C layout, n8
// block j in d[4 j .. 4 j + 3]) += A (64 x 16) B^T (B: N x 16), asynchronous: fence before, commit,
// and read d only after the wait that retires its group (wgmma_fence_operand keeps the compiler
// from moving the reads). TA / TB: 1 for MN-major operands (transposed), 0 for K-major.
// lbo, sbo: bytes (multiples of 16); swizzle_bytes 0, 32, 64 or 128; tiles 1024-byte aligned.
__device__ __forceinline__ uint64_t smem_desc(const void* p, unsigned lbo, unsigned sbo, int swizzle_bytes) {
    uint64_t mode = swizzle_bytes == 128 ? 1 : swizzle_bytes == 64 ? 2 : swizzle_bytes == 32 ? 3 : 0;
    return (uint64_t)((smem_desc_address(p) & 0x3ffffu) >> 4) | (uint64_t)((lbo >> 4) & 0x3fffu) << 16 |
           (uint64_t)((sbo >> 4) & 0x3fffu) << 32 | mode << 62;
}

typedef CUresult (*TmaEncodeTiledFn)(CUtensorMap*, CUtensorMapDataType, cuuint32_t, void*, const cuuint64_t*,
                                     const cuuint64_t*, const cuuint32_t*, const cuuint32_t*, CUtensorMapInterleave,
                                     CUtensorMapSwizzle, CUtensorMapL2promotion, CUtensorMapFloatOOBfill);
// The driver's cuTensorMapEncodeTiled (CUDA 12.0 ABI); NULL if the driver has none.
static inline TmaEncodeTiledFn tma_encode_tiled_fn(void) {
    void* fn = NULL;
    cudaDriverEntryPointQueryResult q;
    if (cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &fn, 12000, cudaEnableDefault, &q) != cudaSuccess ||
        q != cudaDriverEntryPointSuccess)
        return NULL;
    return (TmaEncodeTiledFn)fn;
}

#else  // CUDA_HOST: the twins (tests/cuda_host/host_ptx_sm90.h, included by the runtime)

#define CUDA_PTX_HAS_SM90A 1
static inline void mbarrier_init(uint64_t* bar, unsigned count) { cuda_host_mbarrier_init(bar, count); }
static inline uint64_t mbarrier_arrive(uint64_t* bar) { return cuda_host_mbarrier_arrive(bar, 0); }
static inline uint64_t mbarrier_arrive_expect_tx(uint64_t* bar, unsigned tx) { return cuda_host_mbarrier_arrive(bar, tx); }
static inline void mbarrier_expect_tx(uint64_t* bar, unsigned tx) { cuda_host_mbarrier_expect_tx(bar, tx); }
static inline void mbarrier_complete_tx(uint64_t* bar, unsigned tx) { cuda_host_mbarrier_complete_tx(bar, tx); }
static inline int mbarrier_try_wait_parity(uint64_t* bar, unsigned parity) {
    return cuda_host_mbarrier_try_wait_parity(bar, parity);
}
static inline void named_barrier_sync(unsigned id, unsigned nthreads) { cuda_host_named_barrier_sync(id, nthreads); }
static inline void named_barrier_arrive(unsigned id, unsigned nthreads) { cuda_host_named_barrier_arrive(id, nthreads); }
template <int N> static inline void setmaxnreg_inc(void) { cuda_host_setmaxnreg(1, N); }
template <int N> static inline void setmaxnreg_dec(void) { cuda_host_setmaxnreg(0, N); }
static inline void fence_proxy_async(void) { cuda_host_fence_proxy_async(); }
static inline void fence_mbarrier_init(void) { cuda_host_fence_proxy_async(); }
static inline void tma_load_2d(void* dst, const CUtensorMap* map, int c0, int c1, uint64_t* bar) {
    cuda_host_tma_load_2d(dst, map, c0, c1, bar);
}
static inline void tma_load_3d(void* dst, const CUtensorMap* map, int c0, int c1, int c2, uint64_t* bar) {
    cuda_host_tma_load_3d(dst, map, c0, c1, c2, bar);
}
typedef CUresult (*TmaEncodeTiledFn)(CUtensorMap*, CUtensorMapDataType, cuuint32_t, void*, const cuuint64_t*,
                                     const cuuint64_t*, const cuuint32_t*, const cuuint32_t*, CUtensorMapInterleave,
                                     CUtensorMapSwizzle, CUtensorMapL2promotion, CUtensorMapFloatOOBfill);
static inline TmaEncodeTiledFn tma_encode_tiled_fn(void) { return cuTensorMapEncodeTiled; }
static inline void tma_store_2d(const CUtensorMap* map, const void* src, int c0, int c1) {
    cuda_host_tma_store_2d(map, src, c0, c1, 0);
}
static inline void tma_reduce_add_2d(const CUtensorMap* map, const void* src, int c0, int c1) {
    cuda_host_tma_store_2d(map, src, c0, c1, 1);
}
static inline void tma_reduce_add_3d(const CUtensorMap* map, const void* src, int c0, int c1, int c2) {
    cuda_host_tma_store_3d(map, src, c0, c1, c2, 1);
}
static inline void bulk_commit(void) { cuda_host_bulk_commit(); }
template <int N> static inline void bulk_wait(void) { cuda_host_bulk_wait(N); }
static inline uint32_t smem_desc_address(const void* p) { return cuda_host_smem_desc_addr(p); }
static inline void wgmma_fence(void) { cuda_host_wgmma_fence(); }
static inline void wgmma_commit(void) { cuda_host_wgmma_commit(); }
template <int N> static inline void wgmma_wait(void) { cuda_host_wgmma_wait(N); }
static inline void wgmma_fence_operand(float& r) { (void)r; }
template <int N, int TA, int TB> static inline void wgmma_m64k16_bf16(float* d, uint64_t desc_a, uint64_t desc_b, int scale_d) {
    static_assert(N == 8 || N == 16 || N == 32 || N == 64 || N == 128, "wgmma m64nNk16: N = 8, 16, 32, 64 or 128 here");
    cuda_host_wgmma_bf16(d, N, desc_a, desc_b, scale_d, TA, TB);
}
template <int TB> static inline void wgmma_m64n64k16_bf16_rs(float* d, const uint32_t* a, uint64_t desc_b, int scale_d) {
    cuda_host_wgmma_bf16_rs(d, 64, a, desc_b, scale_d, TB);
}
template <int TB> static inline void wgmma_m64n80k16_bf16_rs(float* d, const uint32_t* a, uint64_t desc_b, int scale_d) {
    cuda_host_wgmma_bf16_rs(d, 80, a, desc_b, scale_d, TB);
}

// wgmma (sm_90a): descriptors of bf16 operands in shared memory, and D (64 x N fp32, N/2 registers
// per thread: warp w of the warpgroup holds rows 16 w .. 16 w + 15 in mma.m16n8's C layout, n8
// block j in d[4 j .. 4 j + 3]) += A (64 x 16) B^T (B: N x 16), asynchronous: fence before, commit,
// and read d only after the wait that retires its group (wgmma_fence_operand keeps the compiler
// from moving the reads). TA / TB: 1 for MN-major operands (transposed), 0 for K-major.
// lbo, sbo: bytes (multiples of 16); swizzle_bytes 0, 32, 64 or 128; tiles 1024-byte aligned.
__device__ __forceinline__ uint64_t smem_desc(const void* p, unsigned lbo, unsigned sbo, int swizzle_bytes) {
    uint64_t mode = swizzle_bytes == 128 ? 1 : swizzle_bytes == 64 ? 2 : swizzle_bytes == 32 ? 3 : 0;
    return (uint64_t)((smem_desc_address(p) & 0x3ffffu) >> 4) | (uint64_t)((lbo >> 4) & 0x3fffu) << 16 |
           (uint64_t)((sbo >> 4) & 0x3fffu) << 32 | mode << 62;
}

#endif
