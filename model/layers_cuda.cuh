// CUDA kernels of the token-local layers (encoder, LayerNorm, RMSNorm, GELU, SwiGLU, residual), the
// twins of the CPU layers in model/layers.h. Each launcher takes device pointers and a stream,
// launches one or a few kernels, checks the launch (cudaGetLastError) and returns: no allocation,
// no host synchronisation. Activations, parameters and parameter gradients are floatX (bf16 by
// default, fp32 with -DGPT_CUDA_FP32); LayerNorm and RMSNorm statistics are fp32. All arithmetic is
// fp32; a floatX result is rounded once when it is stored. As on the CPU, every backward
// ACCUMULATES (+=) into its input gradients (but SwiGLU's, which overwrites, as on the CPU) and
// writes or adds its parameter gradients (accumulate: GradMode of model/layers.h), and every
// reduction over rows runs in a fixed order, so results are bitwise reproducible from run to run
// (no float atomics).
//
// Vectorisation: rows are read and written as 16-byte x128 vectors when C (or n, or SwiGLU's F) is
// a multiple of X128_ELEMS and the pointers are 16-byte aligned; otherwise a scalar path with the
// same arithmetic runs. Shapes, bytes and timings: model/cuda_perf_layers.md.
#pragma once
#include "attention/partial_attention.h"  // TokenPositions
#include "model/cuda_precision.cuh"
#include "model/layer_scratch.h"
#include "model/rope_angles.h"

#include <stddef.h>

// --- Encoder (model/encoder.cu) -------------------------------------------------------------------

// out (B*T, C) = wte[tokens[n]] + wpe[token_layout_position(pos, t)] for row n = b*T + t, or
// wpe[row_pos[n]] where row_pos (B*T, device memory) is not NULL; wpe NULL (rotary positions):
// out = wte[tokens[n]].
void encoder_forward_cuda(floatX* out, const int* tokens, const floatX* wte, const floatX* wpe,
                          int B, int T, int C, TokenLayout pos, const int* row_pos,
                          cudaStream_t stream);

// Bytes of device scratch encoder_backward_cuda needs for B*T rows of C channels:
// encoder_backward_scratch_bytes(B, T, C) of model/layer_scratch.h.

// dwte[tokens[n]] += dout[n]; dwpe[pos(t)] gets the sum over b of dout[b*T + t], added when
// accumulate_wpe is non-zero, else written, with every other row of the wpe_rows rows of dwpe
// written 0. order (B*T, device): the rows sorted by (token, row), token_order of
// model/token_order.h on the host tokens, uploaded. Deterministic: each token's rows are summed in
// that order, in fp32 (a run longer than 32 rows in segments whose sums are added in order), and
// added once. The positions pos(t) must be distinct (pos.stride != 0 unless T == 1). row_pos
// (B*T, device, or NULL): each row's own position instead of pos(t) (positions that restart per
// document); dwpe is then summed as dwte is, by row_pos_order (the rows sorted by (row_pos, row),
// token_order of the host positions), in a second launch, after zeroing dwpe when it is written.
// scratch: encoder_backward_scratch_bytes bytes of device memory, 16-byte aligned (cudaMalloc),
// ZEROED ONCE when allocated (it holds tickets that every call leaves at zero); calls sharing it
// must be ordered (one stream). dwpe NULL (rotary positions): dwte only.
void encoder_backward_cuda(floatX* dwte, floatX* dwpe, const floatX* dout, const int* tokens, const int* order,
                           int B, int T, int C, TokenLayout pos, const int* row_pos, const int* row_pos_order,
                           int wpe_rows, int accumulate_wpe, void* scratch, cudaStream_t stream);

// --- Rotary position embeddings (model/rope.cu) ------------------------------------------------------

// rope_forward / rope_backward of model/layers.h on device memory: qkv (B*T, (NH + 2 NKV) HS) in
// place, the query and key heads rotated by +angle (direction 1) or -angle (-1, the backward's
// transpose), the cosines and sines of model/rope_angles.h. row_pos: device memory or NULL.
void rope_cuda(floatX* qkv, int B, int T, int NH, int NKV, int HS, TokenLayout pos,
               const int* row_pos, RopeSpec rope, int direction, cudaStream_t stream);

// --- LayerNorm (model/layernorm.cu) ---------------------------------------------------------------

// out (N, C) = (inp - mean) * rstd * weight + bias over each row, rstd = 1 / sqrt(var + eps) (the
// model's gpt_norm_eps, 1e-5 by default); mean, rstd: (N) fp32,
// saved for the backward. One warp per row; the row is staged in shared memory and read from
// global memory once.
void layernorm_forward_cuda(floatX* out, float* mean, float* rstd, const floatX* inp,
                            const floatX* weight, const floatX* bias, int N, int C, float eps,
                            cudaStream_t stream);

// residual_out = a + b (rounded to floatX), then out = layernorm(residual_out) as above: the sum
// is normalised from shared memory instead of being written and read back by a second kernel.
// residual_out may alias a (in-place residual stream); it must not alias out.
void fused_residual_layernorm_forward_cuda(floatX* residual_out, floatX* out, float* mean,
                                           float* rstd, const floatX* a, const floatX* b,
                                           const floatX* weight, const floatX* bias, int N, int C,
                                           float eps, cudaStream_t stream);

// Bytes of device scratch layernorm_backward_cuda needs for an (N, C) problem:
// layernorm_backward_scratch_bytes(N, C) of model/layer_scratch.h.

// dinp += dL/dinp; dweight = sum over rows of dout * xhat, dbias = sum over rows of dout, added
// to them when accumulate is non-zero, written otherwise. One launch: one block per group of
// consecutive rows, each thread owning fixed channels across all the rows; the row sums are block
// reductions, the per-channel sums stay in registers and go to per-block partials in scratch,
// which the last blocks to finish add up in a fixed order (model/layernorm.cu). scratch:
// layernorm_backward_scratch_bytes bytes of device memory, ZEROED ONCE when allocated (it ends
// with tickets that every call leaves at zero); the rest of it on entry does not matter. Calls
// sharing a scratch must be ordered (one stream).
void layernorm_backward_cuda(floatX* dinp, floatX* dweight, floatX* dbias, void* scratch,
                             const floatX* dout, const floatX* inp, const floatX* weight,
                             const float* mean, const float* rstd, int N, int C, int accumulate,
                             cudaStream_t stream);

// --- RMSNorm (model/layernorm.cu: the LayerNorm kernels with their RMS flag) ----------------------

// out (N, C) = inp * rstd * weight over each row, rstd = 1 / sqrt(mean(inp^2) + eps): (N) fp32,
// saved for the backward. No mean, no bias. As layernorm_forward_cuda otherwise (one warp per row,
// the row staged in shared memory).
void rmsnorm_forward_cuda(floatX* out, float* rstd, const floatX* inp, const floatX* weight, int N, int C,
                          float eps, cudaStream_t stream);

// residual_out = a + b (rounded to floatX), then out = rmsnorm(residual_out) as above.
// residual_out may alias a (in-place residual stream); it must not alias out.
void fused_residual_rmsnorm_forward_cuda(floatX* residual_out, floatX* out, float* rstd, const floatX* a,
                                         const floatX* b, const floatX* weight, int N, int C,
                                         float eps, cudaStream_t stream);

// dinp += (dout * w - xhat * mean(dout * w * xhat)) * rstd with xhat = inp * rstd; dweight = sum
// over rows of dout * xhat, added to it when accumulate is non-zero, written otherwise. The
// LayerNorm backward's launch, scheme and determinism (its partials C wide instead of 2C). scratch:
// layernorm_backward_scratch_bytes(N, C) bytes (the LayerNorm's suffices; one buffer may serve
// both norms), ZEROED ONCE when allocated, as for layernorm_backward_cuda; calls sharing it must
// be ordered (one stream).
void rmsnorm_backward_cuda(floatX* dinp, floatX* dweight, void* scratch, const floatX* dout,
                           const floatX* inp, const floatX* weight, const float* rstd, int N, int C,
                           int accumulate, cudaStream_t stream);

// --- QK-norm (model/qk_norm.cu) ----------------------------------------------------------------------

// qk_norm_forward / qk_norm_backward of model/layers.h on device memory: every query and key head
// of qkv (N rows of (NH + 2 NKV) HS) normalised in place, LayerNorm, or RMSNorm where mean is NULL
// (qb, kb unused); raw (N, NH + NKV, HS) and mean, rstd (N, NH + NKV) saved. HS <= 256. One warp
// per head.
void qk_norm_forward_cuda(floatX* qkv, floatX* raw, float* mean, float* rstd, const floatX* qw,
                          const floatX* qb, const floatX* kw, const floatX* kb, int N, int NH,
                          int NKV, int HS, float eps, cudaStream_t stream);
// The backward in place on dqkv's query and key columns (overwritten); dqw, dqb, dkw, dkb written,
// or added to when accumulate is non-zero (the biases unused under RMSNorm, mean NULL). Two
// launches: per-block partials in a fixed order, then their sums in block order. scratch:
// qk_norm_backward_scratch_bytes(N, HS) bytes of device memory (model/layer_scratch.h).
void qk_norm_backward_cuda(floatX* dqkv, floatX* dqw, floatX* dqb, floatX* dkw, floatX* dkb,
                           void* scratch, const floatX* raw, const floatX* qw, const floatX* kw,
                           const float* mean, const float* rstd, int N, int NH, int NKV, int HS,
                           int accumulate, cudaStream_t stream);

// --- GELU and residual (model/gelu.cu) ------------------------------------------------------------

// out = 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))), n elements.
void gelu_forward_cuda(floatX* out, const floatX* inp, long n, cudaStream_t stream);
// dinp += gelu'(inp) * dout, n elements.
void gelu_backward_cuda(floatX* dinp, const floatX* inp, const floatX* dout, long n,
                        cudaStream_t stream);
// out = a + b, n elements (out may alias a or b).
void residual_forward_cuda(floatX* out, const floatX* a, const floatX* b, long n,
                           cudaStream_t stream);
// out = in rounded to floatX (nearest even), n elements: fp32 results (attention's output and
// gradients, master weights) stored as activations or parameters.
void float_to_floatx_cuda(floatX* out, const float* in, size_t n, cudaStream_t stream);

// --- SwiGLU (model/swiglu.cu) ---------------------------------------------------------------------

// out (N, F) = silu(gate) * up, silu(x) = x / (1 + exp(-x)), where each row of inp (N, 2F) is F gate
// columns then F up columns (the MLP's first layer, 2F wide).
void swiglu_forward_cuda(floatX* out, const floatX* inp, int N, int F, cudaStream_t stream);
// dinp (N, 2F) OVERWRITTEN (not +=): dgate = dout * up * s (1 + gate (1 - s)), dup = dout *
// silu(gate), s = sigmoid(gate). dinp may alias inp (each thread reads its elements before it
// writes them), not dout.
void swiglu_backward_cuda(floatX* dinp, const floatX* inp, const floatX* dout, int N, int F,
                          cudaStream_t stream);

// --- Helpers shared by the kernels above (device code of encoder.cu, layernorm.cu, gelu.cu, ...) --

// `#pragma unroll` for nvcc; g++ (host runtime) would warn about the unknown pragma.
#if defined(__CUDACC__)
#define UNROLL _Pragma("unroll")
#else
#define UNROLL
#endif

// VEC consecutive floatX values as one load or store: VEC = X128_ELEMS is the 16-byte x128
// vector, VEC = 1 the scalar path for rows whose length or alignment does not allow vectors.
template <int VEC> struct alignas(sizeof(floatX) * VEC) PackX {
    floatX v[VEC];
};
template <int VEC> __device__ __forceinline__ PackX<VEC> load_packx(const floatX* p) {
    return *reinterpret_cast<const PackX<VEC>*>(p);
}
template <int VEC> __device__ __forceinline__ void store_packx(floatX* p, const PackX<VEC>& x) {
    *reinterpret_cast<PackX<VEC>*>(p) = x;
}

// Sum over the 32 lanes of a full warp; every lane gets the result (butterfly, fixed order).
__device__ __forceinline__ float warp_sum(float v) {
    for (int off = 16; off > 0; off >>= 1) v += __shfl_xor_sync(0xffffffffu, v, off);
    return v;
}

static inline bool aligned16(const void* p) { return ((size_t)p & 15) == 0; }

// GELU, tanh approximation: the formula of the CPU twin (gelu_forward in model/layers.c). Also the
// forward GEMM's fallback epilogue (model/matmul.cu).
#define GELU_SCALE 0.7978845608028654f  // sqrt(2 / pi)
#define GELU_CUBE 0.044715f
__device__ __forceinline__ float gelu_value(float x) {
    const float u = GELU_SCALE * (x + GELU_CUBE * x * x * x);
    return 0.5f * x * (1.0f + tanhf(u));
}
// Its derivative (gelu_backward's twin in model/layers.c); also the DGELU fallback (model/matmul.cu).
__device__ __forceinline__ float gelu_grad_value(float x) {
    const float u = GELU_SCALE * (x + GELU_CUBE * x * x * x);
    const float th = tanhf(u);
    const float du = GELU_SCALE * (1.0f + 3.0f * GELU_CUBE * x * x);
    return 0.5f * (1.0f + th) + 0.5f * x * (1.0f - th * th) * du;
}
static inline long ceil_div_long(long a, long b) { return (a + b - 1) / b; }
