// CUDA backend, optimizer: AdamW with fp32 master weights and stochastic rounding, Muon's steps,
// and the global gradient norm. Host-side launchers on device pointers. CPU twins: adamw_update,
// grad_sum_squares, clip_factor in model/optimizer.h.
#pragma once
#include <stddef.h>

#include "model/cuda_precision.cuh"

// --- AdamW ---------------------------------------------------------------------------------------

// Which elements of the flat parameter vector are weight-decayed: tensor k covers
// [end[k-1], end[k]) (end[-1] = 0) and is decayed iff decays[k]. Elements past the last end
// (e.g. padding) are not decayed. Passed to the kernel by value.
enum { ADAMW_MAX_TENSORS = 32 };
typedef struct {
    int count;
    unsigned long long end[ADAMW_MAX_TENSORS];
    int decays[ADAMW_MAX_TENSORS];
} AdamWTensorTable;

// The table for `count` tensors laid out back to back with the given sizes, e.g. for the GPT:
// gpt_param_sizes(cfg, sizes); decays[k] = gpt_param_decays(k); adamw_tensor_table(sizes, decays, 16).
AdamWTensorTable adamw_tensor_table(const size_t* sizes, const int* decays, int count);

// One AdamW step (t = 1, 2, ...) on elements [begin, end) of the flat parameter vector, as
// adamw_update: g = grads[i] * grad_scale; m = b1 m + (1 - b1) g; v = b2 v + (1 - b2) g^2;
// p -= lr * wd * p (decayed tensors only) + lr * (m / (1 - b1^t)) / (sqrt(v / (1 - b2^t)) + eps).
//   grad_scale:    one double in DEVICE memory (the clip factor of clip_scale_cuda), read by the
//                  kernel and rounded to fp32 as the CPU twin's (float)grad_scale; NULL means 1.
//   params, grads: the full flat vectors (indexed by i).
//   master, m, v:  fp32 state of exactly [begin, end) (index i - begin), as the CPU twin's m, v.
//                  master may be NULL: the parameters themselves are then the master copy.
// The updated master value is written to master (fp32) and to params as floatX; for bf16 the
// rounding is STOCHASTIC: up with probability equal to the fraction of a bf16 ulp, from Philox
// (curand_init(seed, subsequence = i / 8, offset = 4 * t)): unbiased, the same for an element
// whatever the sharding, different at every step.
void adamw_update_cuda(floatX* params, float* master, const floatX* grads, float* m, float* v,
                       size_t begin, size_t end, const AdamWTensorTable* table, int t, double lr,
                       double beta1, double beta2, double eps, double weight_decay,
                       const double* grad_scale, unsigned long long seed, cudaStream_t stream);

// --- Muon (model/muon.h; the step is model/muon.c's) ----------------------------------------------

// Over n elements (grads and mom from the matrix's first element): g = grads[i] * *grad_scale;
// mom = beta mom + (1 - beta) g; u = nesterov ? (1 - beta) g + beta mom : mom. Nothing when *grad_scale < 0 (OPTIMIZER_SKIP); grad_scale NULL means 1.
void muon_momentum_cuda(float* mom, float* u, const floatX* grads, size_t n, double beta, int nesterov,
                        const double* grad_scale, cudaStream_t stream);
// x = u (rows x cols, row-major), transposed when rows > cols, over (sqrt(*sumsq) + 1e-7): *sumsq
// (device) from global_norm_squared_f32_cuda over u.
void muon_normalize_cuda(float* x, const float* u, int rows, int cols, const double* sumsq,
                         cudaStream_t stream);
// W (rows x cols at element offset of params, and of master where not NULL) -= decay W + step X
// (x transposed back when rows > cols), in fp32 on the master weights, then rounded into params
// as adamw_update_cuda rounds step t (the same random bits for an element). Nothing when
// *grad_scale < 0.
void muon_update_cuda(floatX* params, float* master, const float* x, size_t offset, int rows,
                      int cols, double step, double decay, const double* grad_scale,
                      unsigned long long seed, int t, cudaStream_t stream);
// Row-major C = alpha op(A) op(B) + beta C in fp32 (MuonOps.gemm) by cuBLAS, the products at
// precision prec (a MuonMatmulPrec): fp32, or TF32 or bf16 tensor cores.
void muon_gemm_cuda(cublasHandle_t handle, int prec, int trans_a, int trans_b, int M, int N, int K,
                    double alpha, const float* A, int lda, const float* B, int ldb, double beta,
                    float* C, int ldc);

// --- Global gradient norm ------------------------------------------------------------------------

// Partials of the first pass: the scratch buffer holds GLOBAL_NORM_MAX_BLOCKS doubles.
enum { GLOBAL_NORM_THREADS = 512, GLOBAL_NORM_MAX_BLOCKS = 1024 };

// *out_sumsq (device, double) = sum of grads[i]^2 over n elements (+= *out_sumsq when
// accumulate, to sum several buffers). Deterministic: squares are summed in fp32 per 16-byte
// group and in double per thread, the blocks' partials written to scratch and added in a fixed
// order by a second kernel; the block count depends on n only, so the result is bitwise the same
// on every run and every GPU. No atomics. The norm is sqrt of the (all-reduced) sum; the clip
// factor is clip_factor(norm, max_norm) as on the CPU.
void global_norm_squared_cuda(double* out_sumsq, const floatX* grads, size_t n, double* scratch,
                              int accumulate, cudaStream_t stream);
// The same over fp32 values (the master weights' norm, gpt_param_sum_squares): 4 squares per
// 16-byte group.
void global_norm_squared_f32_cuda(double* out_sumsq, const float* x, size_t n, double* scratch,
                                  int accumulate, cudaStream_t stream);
// *scale (device) = step_grad_scale(*loss_sum, *sumsq, max_norm, limits) as model/optimizer.c
// computes it, on the device: OPTIMIZER_SKIP (-1) when either is not finite or above its limit
// (loss_sum may be NULL: not checked), else 1 when max_norm <= 0, else
// min(max_norm / (norm + 1e-6), 1). One thread.
void clip_scale_cuda(double* scale, const double* loss_sum, const double* sumsq, double max_norm,
                     double loss_sum_limit, double sumsq_limit, cudaStream_t stream);
