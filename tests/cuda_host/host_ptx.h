// Portable twins of the warp-level PTX instructions that model/cuda_ptx.cuh wraps (ptx.cpp), with
// PTX's own fragment layouts, so that kernels written against that header run on the CPU.
//
// - mma and ldmatrix are warp collectives: all 32 lanes of a full warp must call the same one
//   (PTX's .aligned). Each lane deposits its operands (mma: 4 A and 2 B registers; ldmatrix: its
//   row address), a warp round lets every lane see them, and each lane computes its own registers.
// - ex2, red, ld.acquire, red.release and nanosleep are per thread (below).
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

// ex2.approx.ftz.f32: 2^x. The PTX ISA bounds ex2.approx.f32's error by 2^-22 relative; the twin
// is exp2f (correctly rounded or within an ulp, well inside that bound), with .ftz applied: a
// subnormal input counts as zero (result 1) and a subnormal result is flushed to +0. Exact at
// integers in [-126, 127]; -inf -> +0, +inf -> +inf, NaN -> NaN.
float cuda_host_ex2_approx_ftz(float x);
// red.global.add.f32 and red.global.add.v2.f32 (sm_90; each element is its own atomic add, as in
// PTX): relaxed atomic adds to global memory (4- or 8-byte aligned, not shared memory).
void cuda_host_red_add_f32(float* p, float v);
void cuda_host_red_add_v2_f32(float* p, float a, float b);
// ld.acquire.gpu.global.u32 and red.release.gpu.global.add.u32: C++ acquire and release atomics
// (blocks may run on different OS threads), recorded for the spin-wait bookkeeping.
unsigned cuda_host_ld_acquire_u32(const unsigned* p);
void cuda_host_red_release_add_u32(unsigned* p, unsigned v);
// __nanosleep(ns) in a spin-wait: yields to the block's other threads; a wait that keeps reading
// the same value starts the launch's other blocks on another OS thread (the one it waits for may
// not have started), sleeps, and after CUDA_HOST_SPIN_TIMEOUT_S seconds (default 30) without any
// block finishing or red.release anywhere, ends the job with "spin-wait that never ends".
void cuda_host_nanosleep(unsigned ns);
