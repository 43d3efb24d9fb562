// CUDA partial (local) causal attention: the device twin of attention/partial_attention.h, with
// the same AttentionProblem (absolute token positions (offset, stride) for queries and keys; key j
// is visible to query i iff kpos(j) <= qpos(i), and under a sliding window (p->window = W > 0) iff
// also kpos(j) > qpos(i) - W, and under a document mask (p->docs, its bounds in device memory)
// iff also kpos(j) >= docs.start[b, qpos(i)]) and the same semantics, on device pointers and a
// stream. One kernel serves single-device attention, every ATTENTION2D mesh shape, Ring and
// Striped. Decoding steps (p->decode) take no document mask.
//
// Precisions (model/cuda_precision.cuh): Q, K, V, dO and the row-dot's O are floatX (bf16 by
// default, fp32 with -DGPT_CUDA_FP32); everything that is summed across calls or merged stays
// fp32: the partial output o, lse, d, and the gradients dq, dk, dv (accumulated, +=).
//
// Layout as in partial_attention.h: rows are tokens, heads are contiguous slices of a row. For
// sequence b and local query i, head h starts at q + (b*Tq + i)*ldq + h*HS (the same for k, v, o,
// dout, dq, dk, dv with their own row strides, in elements), so Q, K, V can be read straight out
// of a fused (B, T, 3C) QKV activation. lse and d are (B, NH, Tq). Under grouped-query attention
// (p->NKV < p->NH) k, v, dk, dv hold NKV heads: the kernels then run on K and V widened to NH heads
// in a per-stream workspace, and the backward sums dK and dV over each group (partial_attention.cu).
//
// HS must be a multiple of 16 in [16, 128] (16, 32, 48, 64, 80, 96, 128): the bf16 path runs on
// mma.sync m16n8k16 tensor-core tiles (k-steps of 16), so HS = 80 (gpt3-2.7b) is five k-steps of 16. Other HS fail
// loudly. Row strides and pointers need no alignment; 16-byte aligned ones (every ld and pointer
// a multiple of 8 bf16 / 4 fp32) take the vectorised load path.
//
// Every launcher checks the problem (fail_at on a bad one), enqueues its kernels on `stream` and
// checks the launch (CUDA_CHECK(cudaGetLastError())); nothing is allocated and nothing synchronises.
#pragma once
#include "attention/partial_attention.h"   // AttentionProblem, TokenPositions
#include "model/cuda_precision.cuh"

// Forward. o: (B, Tq, NH*HS) fp32 rows of stride ldo, softmax over the visible local keys applied
// to V; lse: (B, NH, Tq) fp32 log-sum-exp of the scaled scores of the visible keys. A query that
// sees no local key gets o = 0 and lse = -INFINITY (the empty partial, which merges). Split-KV
// (bf16 build): for a decoding step (p->decode) whose grid is under two waves, the key tiles of
// each query tile are cut over attention_cuda_forward_splits(p) blocks, whose partials (in the
// workspace the backward keeps per stream, grown in stream order) one more kernel merges in a
// fixed order; ATTENTION_FWD_SPLITS=N forces N splits on every forward (tests, timing).
void attention_partial_forward_cuda(const AttentionProblem* p,
                                    const floatX* q, int ldq, const floatX* k, int ldk,
                                    const floatX* v, int ldv, float* o, int ldo, float* lse,
                                    cudaStream_t stream);

#ifndef GPT_CUDA_FP32
// The forward of a partial merged into the partial (o, lse) already there, in place: the result of
// attention_partial_forward_cuda into a scratch partial followed by attention_merge_cuda, bit for
// bit, in one kernel whose epilogue reads the old rows and writes the merged ones (no scratch, one
// pass less over O). Never split (decoding merges its own way). bf16 build only: the fp32 build
// (the precision reference) keeps the two calls.
void attention_partial_forward_merge_cuda(const AttentionProblem* p, const floatX* q, int ldq, const floatX* k,
                                          int ldk, const floatX* v, int ldv, float* o, int ldo, float* lse,
                                          cudaStream_t stream);
#endif
// The same attention as the whole of its queries' attention (no merge follows): o written in
// floatX (rows of stride ldo), lse as above. Single-device attention uses it: no fp32 output and
// no conversion pass.
void attention_forward_cuda(const AttentionProblem* p, const floatX* q, int ldq, const floatX* k, int ldk,
                            const floatX* v, int ldv, floatX* o, int ldo, float* lse, cudaStream_t stream);

// d: (B, NH, Tq) = rowsum(dout * o) per head (the backward's preprocessing), o and dout floatX.
void attention_row_dot_cuda(const AttentionProblem* p, const floatX* o, int ldo,
                            const floatX* dout, int lddo, float* d, cudaStream_t stream);

// Backward given the final (merged) lse and d of each query: recomputes P = exp(scale QK^T - lse)
// on the visible keys and ACCUMULATES (+=) into the fp32 dq, dk, dv. Bit-for-bit deterministic.
// bf16 build: one kernel (S, dP recomputed once: 5 GEMMs), one block per key tile; the blocks add
// their dQ tiles into dq with atomic adds that take turns in a fixed order, kept by semaphores
// (B x NH x ceil(Tq / 64) of them in a workspace kept per stream: grown, in stream order, by the
// first call that needs more, then reused). fp32 build: two kernels (dK/dV per key tile, dQ per
// query tile), no atomics.
void attention_partial_backward_cuda(const AttentionProblem* p,
                                     const floatX* q, int ldq, const floatX* k, int ldk,
                                     const floatX* v, int ldv, const floatX* dout, int lddo,
                                     const float* lse, const float* d,
                                     float* dq, int lddq, float* dk, int lddk, float* dv, int lddv,
                                     cudaStream_t stream);

// The backward of a call that is the only contribution to its gradients (single device): dq, dk,
// dv WRITTEN (not accumulated) in floatX; dq is still summed over key tiles in fp32 on the way
// (bf16 build: an fp32 accumulator of B x Tq x NH x HS floats in the same workspace).
void attention_backward_cuda(const AttentionProblem* p, const floatX* q, int ldq, const floatX* k, int ldk,
                             const floatX* v, int ldv, const floatX* dout, int lddo, const float* lse,
                             const float* d, floatX* dq, int lddq, floatX* dk, int lddk, floatX* dv, int lddv,
                             cudaStream_t stream);

// Merges partial b into partial a in place, per query row and head (all fp32):
//   lse = logaddexp(lse_a, lse_b); o_a = exp(lse_a - lse) o_a + exp(lse_b - lse) o_b.
// o_*: (B, T, NH*HS) with row strides lda, ldb; lse_*: (B, NH, T). Empty partials (-inf) merge.
// Any HS > 0 is accepted here.
void attention_merge_cuda(int B, int NH, int HS, int T, float* o_a, int lda, float* lse_a,
                          const float* o_b, int ldb, const float* lse_b, cudaStream_t stream);

// The head sizes every kernel here serves: 1 for HS a multiple of 16 in [16, 128] (the
// tensor-core tiles are 16 wide), else 0; ATTENTION_CUDA_HEAD_SIZES says so in words.
#define ATTENTION_CUDA_HEAD_SIZES "a multiple of 16 in [16, 128]"
int attention_cuda_head_size_ok(int HS);

// The key splits the forwards use for p (1: none; always 1 in the fp32 build).
int attention_cuda_forward_splits(const AttentionProblem* p);

// The kernel a forward of p on these inputs runs: "sm90" (the Hopper kernel,
// attention/hopper_forward.cuh: ATTENTION_FWD_KERNEL=sm90, or auto (the default) on a compute
// capability 9.0 device, HS 64, 80 or 128, 16-byte aligned inputs, not a decoding step; under a
// sliding window or a document mask too), "sm80" (the bf16 build's other calls) or "fma" (the fp32
// build).
const char* attention_cuda_forward_kernel(const AttentionProblem* p, const floatX* q, int ldq, const floatX* k,
                                          int ldk, const floatX* v, int ldv);

// The kernel a backward of p on these inputs runs: "sm90" (the Hopper kernel,
// attention/hopper_backward.cuh: ATTENTION_BWD_KERNEL=sm90, or auto (the default) on a compute
// capability 9.0 device, HS 64, 80 or 128, 16-byte aligned inputs, lse and d 16-byte aligned, Tq
// a multiple of 64, dq NULL (a floatX dQ) or an fp32 dq with 16-byte aligned rows; under a sliding
// window or a document mask too); "sm90-q128" where it takes 128-query tiles
// (ATTENTION_BWD_HOPPER=q128, HS 64, Tq a multiple of 128, no window or document mask), "sm80" or
// "fma" (the fp32 build).
const char* attention_cuda_backward_kernel(const AttentionProblem* p, const floatX* q, int ldq, const floatX* k,
                                           int ldk, const floatX* v, int ldv, const floatX* dout, int lddo,
                                           const float* lse, const float* d, const float* dq, int lddq);

// Dynamic shared memory (bytes) of each kernel for a head size: for the notes and for callers
// that budget occupancy. 0 for an unsupported HS.
size_t attention_cuda_forward_smem(int HS);
size_t attention_cuda_backward_smem(int HS);
