// Portable twins of the warp-level PTX instructions that model/cuda_ptx.cuh wraps (ptx.cpp), with
// PTX's own fragment layouts, so that kernels written against that header run on the CPU.
//
// - mma and ldmatrix are warp collectives: all 32 lanes of a full warp must call the same one
//   (PTX's .aligned). Each lane deposits its operands (mma: 4 A and 2 B registers; ldmatrix: its
//   row address), a warp round lets every lane see them, and each lane computes its own registers.
// - cp.async is per thread and deferred: a copy is queued in the thread's open group, commit
//   closes the group, and the copy happens (the source is read) at the cp_async_wait that retires
//   its group. Reading the destination before that shows the old bytes, as it may on a GPU.
#pragma once
#include <stdint.h>

// D = A B + C (m16n8k16, bf16 A and B, fp32 C and D), in the lane's fragment registers; fp32
// accumulation in k order. d may alias c.
void cuda_host_mma_m16n8k16_bf16(float d[4], const uint32_t a[4], const uint32_t b[2], const float c[4]);
// ldmatrix.m8n8.x{nmat}[.trans].b16 into r[0..nmat-1]; row_address is this lane's row (used for
// lanes 0 .. 8 nmat - 1): 16-byte aligned, in the block's shared memory.
void cuda_host_ldmatrix(uint32_t* r, int nmat, int trans, const void* row_address);
// cp.async.cg.shared.global, 16 bytes: src_bytes (0..16) from src_global, zeros for the rest.
void cuda_host_cp_async_16(void* dst_shared, const void* src_global, int src_bytes);
// cp.async.commit_group: closes the calling thread's open group (an empty group is fine).
void cuda_host_cp_async_commit(void);
// cp.async.wait_group n: does the copies of all but the n most recent committed groups.
void cuda_host_cp_async_wait(int n);
