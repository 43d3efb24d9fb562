// What the distributed attention schedules (attention2d.c, ring.c) do to memory besides
// communicating and calling the partial-attention kernels: allocating scratch, packing token rows
// into the contiguous blocks collectives move and back, zeroing, adding, converting accumulators to
// the storage type, and the partial-attention calls themselves. One implementation per backend:
// dist_ops_cpu.c (host memory, plain loops) and dist_ops_cuda.cu (device memory, kernels on the
// backend's stream, model/backend_kernels_cuda.cuh). The schedules are written once against this
// header and compiled once per backend, like model/gpt.c.
//
// Two element types:
//   real      storage of activations and their gradients (model/real.h): Q, K, V, O, dO, dQKV;
//             float on the CPU (double in the finite-difference build), floatX on CUDA.
//   real_acc  what is summed or merged across calls and ranks: partial outputs O and their LSE,
//             D = rowsum(dO * O), the dQ, dK, dV accumulators. real on the CPU (the same type),
//             fp32 on CUDA (the kernels of attention/partial_attention_cuda.cuh write fp32).
// Row copies take the element size in bytes (sizeof(real) or sizeof(real_acc)), so one function
// packs either type; strides and widths are in elements.
//
// Every function is asynchronous on CUDA (ordered on the backend stream, like the kernels and the
// device transports' collectives); on the CPU it is done when it returns.
#pragma once
#include <stddef.h>

#include "attention/partial_attention.h"
#include "comm/comm.h"
#include "model/real.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef real_stat real_acc;

// The comm element types of the two, for collectives on schedule buffers.
CommType dist_real_comm_type(void);
CommType dist_acc_comm_type(void);
// 1 when buffers are host memory (CPU), 0 for device memory (CUDA).
int dist_host_memory(void);

// Scratch of `bytes` in the backend's memory (fails with `what` in the message); free accepts NULL.
void* dist_alloc(size_t bytes, const char* what);
void dist_free(void* p);

// Copies between host memory and the backend's (tests and tools); complete when they return.
void dist_to_backend(void* dst, const void* host, size_t bytes);
void dist_to_host(void* host, const void* src, size_t bytes);

// dst (rows, w) with row stride ldd  <-  src (rows, w) with row stride lds; esize bytes per element.
void dist_copy_rows(void* dst, long ldd, const void* src, long lds, long rows, int w, size_t esize);
// n such copies, copy i from src + i sstep to dst + i dstep (elements): one launch on a device,
// where n calls of dist_copy_rows would be n (Ulysses' all-to-all blocks, one per peer).
void dist_copy_rows_batch(void* dst, long ldd, long dstep, const void* src, long lds, long sstep,
                          int n, long rows, int w, size_t esize);
// blocks: G blocks of (B, Tl, w) at stride bstride (elements)  ->  rows: (B, G*Tl, w), row stride
// ld; block g row (b, j) lands on row (b, g + G*j).
void dist_blocks_to_rows(void* rows, long ld, const void* blocks, long bstride, int G, int B,
                         int Tl, int w, size_t esize);
// The inverse: row (b, g + G*j) of rows goes to block g row (b, j).
void dist_rows_to_blocks(void* blocks, long bstride, const void* rows, long ld, int G, int B,
                         int Tl, int w, size_t esize);
// dst (rows, w) real, row stride ldd  <-  src (rows, w) real_acc, row stride lds, rounded to
// nearest (a copy on the CPU).
void dist_acc_to_real(real* dst, long ldd, const real_acc* src, long lds, long rows, int w);
// n elements of real_acc set to 0.
void dist_zero_acc(real_acc* x, size_t n);
// y[i] += x[i] for n elements of real_acc.
void dist_add_acc(real_acc* y, const real_acc* x, size_t n);

// The partial-attention kernels of partial_attention.h on this backend's memory, with the output
// and gradients in real_acc.
void dist_attention_forward(const AttentionProblem* p, const real* q, int ldq, const real* k,
                            int ldk, const real* v, int ldv, real_acc* o, int ldo, real_acc* lse);
// The partial of (q, k, v) merged into the partial (o, lse) already there: what
// dist_attention_forward into a scratch partial followed by dist_attention_merge does, with the same
// bits. step_o (rows of stride ldo) and step_lse are that scratch, used where the backend has no
// fused merge (the CPU, CUDA's fp32 build); the bf16 CUDA kernels merge in the forward's epilogue
// (one pass less over O) and leave it untouched.
void dist_attention_forward_merge(const AttentionProblem* p, const real* q, int ldq, const real* k,
                                  int ldk, const real* v, int ldv, real_acc* o, int ldo,
                                  real_acc* lse, real_acc* step_o, real_acc* step_lse);
// 1 where dist_attention_forward_merge merges in the forward and never touches its step scratch
// (the bf16 CUDA kernels): the schedules then allocate none and pass NULL.
int dist_attention_merges_in_forward(void);
void dist_attention_row_dot(const AttentionProblem* p, const real* o, int ldo, const real* dout,
                            int lddo, real_acc* d);
void dist_attention_backward(const AttentionProblem* p, const real* q, int ldq, const real* k,
                             int ldk, const real* v, int ldv, const real* dout, int lddo,
                             const real_acc* lse, const real_acc* d, real_acc* dq, int lddq,
                             real_acc* dk, int lddk, real_acc* dv, int lddv);
void dist_attention_merge(int B, int NH, int HS, int T, real_acc* o_a, int lda, real_acc* lse_a,
                          const real_acc* o_b, int ldb, const real_acc* lse_b);

#ifdef __cplusplus
}
#endif
