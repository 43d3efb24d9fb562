// Portable twins of the Hopper (sm_90a) PTX instructions that model/cuda_ptx_sm90.cuh wraps
// (ptx_sm90.cpp), so that kernels written against that header run and are checked on the CPU.
//
// - mbarrier: the barrier's state (phase, pending arrivals, transaction bytes) is kept by the
//   runtime per running block, keyed by the barrier's shared-memory address; the 8 bytes there
//   are not used. try_wait.parity yields to the block's other threads when the phase has not
//   completed; a wait that sees no mbarrier progress in its block for 2^16 yields ends the job.
// - Named barriers (bar.sync / bar.arrive id, nthreads) are block_exec.cpp's rounds.
// - TMA (cp.async.bulk.tensor.2d): the copy is deferred to the first try_wait on its mbarrier,
//   which writes the box into shared memory and completes its transaction bytes; until then the
//   destination holds 0xFF bytes (NaN as fp32 and bf16), so a kernel that reads the tile without
//   waiting on the mbarrier always reads poison.
// - TMA stores / reduce-adds: queued per thread in bulk groups, done at cp.async.bulk.wait_group.
// - wgmma: descriptors decoded in CUTLASS's canonical layouts; the MMA is queued per thread and its
//   accumulators (NaN meanwhile) land at the wgmma.wait_group that retires its group.
// - setmaxnreg: a checked no-op (a multiple of 8 in [24, 256], the same value for the 128
//   threads of a warpgroup); fence.proxy.async and fence.mbarrier_init: no-ops.
#pragma once
#include <stdint.h>

// The driver API's tensor-map types (cuda.h, CUDA 12+), same names and values.
typedef uint32_t cuuint32_t;
typedef uint64_t cuuint64_t;
typedef enum { CUDA_SUCCESS = 0, CUDA_ERROR_INVALID_VALUE = 1 } CUresult;
typedef struct CUtensorMap_st {
    alignas(64) cuuint64_t opaque[16];
} CUtensorMap;
typedef enum {
    CU_TENSOR_MAP_DATA_TYPE_UINT8 = 0, CU_TENSOR_MAP_DATA_TYPE_UINT16, CU_TENSOR_MAP_DATA_TYPE_UINT32,
    CU_TENSOR_MAP_DATA_TYPE_INT32, CU_TENSOR_MAP_DATA_TYPE_UINT64, CU_TENSOR_MAP_DATA_TYPE_INT64,
    CU_TENSOR_MAP_DATA_TYPE_FLOAT16, CU_TENSOR_MAP_DATA_TYPE_FLOAT32, CU_TENSOR_MAP_DATA_TYPE_FLOAT64,
    CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, CU_TENSOR_MAP_DATA_TYPE_FLOAT32_FTZ, CU_TENSOR_MAP_DATA_TYPE_TFLOAT32,
    CU_TENSOR_MAP_DATA_TYPE_TFLOAT32_FTZ
} CUtensorMapDataType;
typedef enum { CU_TENSOR_MAP_INTERLEAVE_NONE = 0, CU_TENSOR_MAP_INTERLEAVE_16B, CU_TENSOR_MAP_INTERLEAVE_32B } CUtensorMapInterleave;
typedef enum {
    CU_TENSOR_MAP_SWIZZLE_NONE = 0, CU_TENSOR_MAP_SWIZZLE_32B, CU_TENSOR_MAP_SWIZZLE_64B, CU_TENSOR_MAP_SWIZZLE_128B
} CUtensorMapSwizzle;
typedef enum {
    CU_TENSOR_MAP_L2_PROMOTION_NONE = 0, CU_TENSOR_MAP_L2_PROMOTION_L2_64B, CU_TENSOR_MAP_L2_PROMOTION_L2_128B,
    CU_TENSOR_MAP_L2_PROMOTION_L2_256B
} CUtensorMapL2promotion;
typedef enum { CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE = 0, CU_TENSOR_MAP_FLOAT_OOB_FILL_NAN_REQUEST_ZERO_FMA } CUtensorMapFloatOOBfill;

// cuTensorMapEncodeTiled with the driver's signature and checks (interleave NONE, element strides
// 1 and OOB fill NONE only: others are refused). Errors return CUDA_ERROR_INVALID_VALUE and print
// the reason to stderr.
CUresult cuTensorMapEncodeTiled(CUtensorMap* tensorMap, CUtensorMapDataType tensorDataType,
                                cuuint32_t tensorRank, void* globalAddress, const cuuint64_t* globalDim,
                                const cuuint64_t* globalStrides, const cuuint32_t* boxDim,
                                const cuuint32_t* elementStrides, CUtensorMapInterleave interleave,
                                CUtensorMapSwizzle swizzle, CUtensorMapL2promotion l2Promotion,
                                CUtensorMapFloatOOBfill oobFill);

// mbarrier.init.shared::cta.b64 [bar], count (count in [1, 2^20 - 1]).
void cuda_host_mbarrier_init(uint64_t* bar, unsigned count);
// mbarrier.arrive(.expect_tx).shared::cta.b64: tx bytes expected first (0: plain arrive); returns
// the state token (the phase the arrival belongs to).
uint64_t cuda_host_mbarrier_arrive(uint64_t* bar, unsigned tx);
// mbarrier.expect_tx / mbarrier.complete_tx (no arrival).
void cuda_host_mbarrier_expect_tx(uint64_t* bar, unsigned tx);
void cuda_host_mbarrier_complete_tx(uint64_t* bar, unsigned tx);
// mbarrier.try_wait.parity.shared::cta.b64: 1 once the phase of that parity has completed; lands
// the TMA copies pending on the barrier first, and yields to the block's other threads while not.
int cuda_host_mbarrier_try_wait_parity(uint64_t* bar, unsigned parity);
// bar.sync / bar.arrive id, nthreads (id in [0, 16), nthreads a multiple of 32; 0: the whole block).
void cuda_host_named_barrier_sync(unsigned id, unsigned nthreads);
void cuda_host_named_barrier_arrive(unsigned id, unsigned nthreads);
// setmaxnreg.{inc,dec}.sync.aligned.u32 n: checked, otherwise a no-op.
void cuda_host_setmaxnreg(int inc, unsigned n);
// fence.proxy.async.shared::cta, fence.mbarrier_init.release.cluster: inside a kernel, no-ops.
void cuda_host_fence_proxy_async(void);
// cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes [dst], [map, {c0, c1}],
// [bar]: c0 indexes the innermost dimension.
void cuda_host_tma_load_2d(void* dst_shared, const CUtensorMap* map, int c0, int c1, uint64_t* bar);
// The same from a rank-3 map (cp.async.bulk.tensor.3d...): box element (x, y, z) at byte
// ((z b1 + y) b0 + x) * element size of the tile, swizzled as the rank-2 box.
void cuda_host_tma_load_3d(void* dst_shared, const CUtensorMap* map, int c0, int c1, int c2, uint64_t* bar);

// wgmma shared-memory matrix descriptors (PTX ISA "Matrix Descriptor Format"): bits 0-13 the start
// address >> 4, 16-29 the leading dimension byte offset >> 4, 32-45 the stride dimension byte
// offset >> 4, 49-51 the base offset, 62-63 the swizzle (0 none, 1 128B, 2 64B, 3 32B). Under the
// host runtime a shared address is the offset from the block's dynamic shared memory (1024-byte
// aligned, as a GPU's swizzle sees it); only dynamic shared memory can be described.
typedef struct {
    uint32_t addr, lbo, sbo;  // bytes
    unsigned base_offset;
    unsigned swizzle;         // bytes: 0 (none), 32, 64, 128
} CudaHostSmemDesc;
// The shared address of p (dynamic shared memory only; fails otherwise).
uint32_t cuda_host_smem_desc_addr(const void* p);
CudaHostSmemDesc cuda_host_smem_desc_decode(uint64_t desc);
// wgmma.fence / commit_group / wait_group n (per thread; a wgmma needs a fence since the thread's
// last wait). wgmma.mma_async m64nNk16 f32.bf16.bf16: d holds this thread's N/2 accumulators; the
// operation is queued, d is poisoned (NaN) and the result lands at the wait that retires its group.
void cuda_host_wgmma_fence(void);
void cuda_host_wgmma_commit(void);
void cuda_host_wgmma_wait(int n);
void cuda_host_wgmma_bf16(float* d, int n, uint64_t desc_a, uint64_t desc_b, int scale_d, int tnsp_a, int tnsp_b);
// The same with A from registers: a[0..3] is this thread's part of mma.m16n8k16's A fragment of its
// warp's 16 rows (values, taken at the issue); the wait that computes a thread's rows yields until
// the other threads of its warpgroup have issued the operation too (.sync.aligned).
void cuda_host_wgmma_bf16_rs(float* d, int n, const uint32_t* a, uint64_t desc_b, int scale_d, int tnsp_b);

// TMA stores and reductions (shared -> global), per thread, in bulk groups:
// cp.async.bulk.tensor.2d.global.shared::cta.bulk_group (reduce 0) and
// cp.reduce.async.bulk.tensor.2d.global.shared::cta.add.tile.bulk_group (reduce 1, fp32 maps):
// queued with the box's source address; the source is read and global memory written (out-of-bounds
// elements skipped; reductions as relaxed atomic adds) at the cp.async.bulk.wait_group that
// retires the group. A thread that returns with one pending fails.
void cuda_host_tma_store_2d(const CUtensorMap* map, const void* src_shared, int c0, int c1, int reduce);
void cuda_host_tma_store_3d(const CUtensorMap* map, const void* src_shared, int c0, int c1, int c2, int reduce);
void cuda_host_bulk_commit(void);
void cuda_host_bulk_wait(int n);
