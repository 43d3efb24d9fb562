// CUDA backend, GEMM layers and the LM head's loss: host-side launchers (device pointers, one
// stream per call). CPU twins: matmul_forward / matmul_backward / crossentropy_forward +
// crossentropy_backward_inplace in model/layers.h; same shapes, same accumulation rules.
//
// Storage is floatX (model/cuda_precision.cuh: bf16, or fp32 with -DGPT_CUDA_FP32); every GEMM
// accumulates in fp32 (CUBLAS_COMPUTE_32F, no TF32), the loss kernel works in fp32.
#pragma once
#include <stddef.h>

#include "model/cuda_precision.cuh"

// --- GEMMs through cuBLASLt -------------------------------------------------------------------

// Cached cuBLASLt plans (descriptor, layouts, algorithm, or the fact that cuBLASLt refused the
// problem) per distinct problem, so that the step loop makes no heuristic query, no allocation and
// no call that is known to fail once every shape has been seen.
enum { MATMUL_PLAN_CACHE = 48 };
// Row chunks of the deterministic column-sum kernel for bias gradients (partials: chunks x OC).
enum { MATMUL_DBIAS_MAX_CHUNKS = 128 };

// The cuBLASLt epilogues the launchers use besides DEFAULT, each with a fallback for when cuBLASLt
// refuses it (no algorithm from the heuristic, or CUBLAS_STATUS_NOT_SUPPORTED from cublasLtMatmul,
// e.g. for operands that are not 16-byte aligned): the same GEMM with the DEFAULT epilogue, then
//   BIAS           -> a bias-add kernel on out
//   GELU_AUX(_BIAS) -> GEMM into pre_gelu, one kernel: pre_gelu += bias (in floatX), out = gelu(pre_gelu)
//   BGRADB         -> the two-pass column-sum kernel on dout
//   DGELU          -> GEMM into dinp, one kernel: dinp *= gelu'(pre_gelu) (in floatX)
// A refusal is remembered per plan; the first of each kind in a process prints a note on stderr.
// The GELU epilogues also take the fallback, without asking cuBLASLt, when the pre-GELU matrix's
// rows are not a multiple of 8 elements (cuBLASLt's EPILOGUE_AUX_LD must be).
//
// DGELU_BGRAD is not used: cuBLASLt documents it as "apply independently GELU and Bias gradient to
// matmul output", which does not say whether the bias gradient sums the GELU gradient (the fc
// bias gradient we would want) or the matmul output before it (the gradient of a bias added after
// the GELU). The fc bias gradient comes from BGRADB in fc's own weight-gradient GEMM instead,
// which reads dout there anyway: no extra pass either way.
enum { MATMUL_EPI_BIAS, MATMUL_EPI_GELU_AUX, MATMUL_EPI_GELU_AUX_BIAS, MATMUL_EPI_BGRADB, MATMUL_EPI_DGELU,
       MATMUL_EPILOGUE_KINDS };
// "BIAS", "GELU_AUX", "GELU_AUX_BIAS", "BGRADB", "DGELU" (cuBLASLt's names without CUBLASLT_EPILOGUE_).
const char* matmul_epilogue_kind_name(int kind);

struct MatmulPlan;  // defined in model/matmul.cu

typedef struct {
    cublasLtHandle_t lt;
    void* workspace;          // cuBLASLt workspace, allocated once
    size_t workspace_bytes;
    int max_bias_oc;          // largest OC whose bias gradient the scratch buffers can hold
    floatX* dbias_scratch;    // (max_bias_oc) bias gradient written by the BGRADB epilogue
    float* dbias_partial;     // (MATMUL_DBIAS_MAX_CHUNKS, max_bias_oc) column-sum partials
    // 1 (set by matmul_context_init): bias gradients come from the weight-gradient GEMM's BGRADB
    // epilogue (no extra pass over dout) wherever cuBLASLt runs it, else from the column-sum
    // kernel; 0: always from the column-sum kernel.
    int use_bgradb;
    struct MatmulPlan* plans;  // MATMUL_PLAN_CACHE entries (host memory)
    int num_plans, next_evict;
    // Counts since init, for tests and diagnostics: calls per MatmulEpilogueKind that ran fused
    // in cuBLASLt's epilogue or took the fallback, and refusals seen from cuBLASLt (each remembered
    // in its plan, so a repeated problem adds none).
    long fused_calls[MATMUL_EPILOGUE_KINDS], fallback_calls[MATMUL_EPILOGUE_KINDS];
    long refusals;
} MatmulContext;

// Creates the cuBLASLt handle and allocates the workspace (workspace_bytes; 0 picks 32 MiB, what
// cuBLASLt wants on Hopper) and the bias-gradient scratch buffers (max_bias_oc: the largest OC of
// a matmul_backward_cuda call with dbias, e.g. 4*C). Nothing is allocated after this: the
// fallbacks work in place (out, pre_gelu) or in the column-sum scratch.
void matmul_context_init(MatmulContext* ctx, size_t workspace_bytes, int max_bias_oc);
void matmul_context_destroy(MatmulContext* ctx);

// out (N, OC) = inp (N, IC) @ weight^T + bias, weight (OC, IC) as nn.Linear; bias (OC) may be NULL.
// With pre_gelu != NULL (the MLP's first layer): pre_gelu (N, OC) gets inp @ weight^T + bias and
// out gets gelu(pre_gelu) (tanh approximation), fused in the cuBLASLt epilogue (GELU_AUX_BIAS)
// when OC is a multiple of 8, else through the fallback. Plans are cached per shape, epilogue and
// operand alignment; 16-byte aligned operands and rows of a multiple of 16 bytes let cuBLASLt pick
// its fastest kernels and run the fused epilogues; otherwise the fallback above runs (bf16: the
// fallback rounds the GEMM result to floatX before adding the bias, one rounding more than the
// fused epilogue).
void matmul_forward_cuda(MatmulContext* ctx, floatX* out, floatX* pre_gelu, const floatX* inp,
                         const floatX* weight, const floatX* bias, int N, int IC, int OC,
                         cudaStream_t stream);

// As the CPU twins: dinp (N, IC) = dout @ weight, ADDED to dinp when accumulate_dinp is non-zero
// (matmul_backward), written over it otherwise (matmul_backward_overwrite: beta = 0, dinp never
// read, no zeroing pass needed); dweight (OC, IC) = dout^T @ inp and dbias (OC) = column sums of
// dout, ADDED to them when accumulate_grads is non-zero, written otherwise (beta = 0, the bias
// gradient stored by BGRADB or the column sums themselves: neither read, no dbias_add). With pre_gelu (N, IC) != NULL (matmul_backward_gelu; accumulate_dinp must be 0):
// dinp = (dout @ weight) * gelu'(pre_gelu), the GELU gradient in the dinp GEMM's DGELU epilogue
// (bf16: one rounding; the fallback rounds the GEMM result first, one more). dinp, dweight and
// dbias may each be NULL (skipped). With dbias, OC must not exceed the context's max_bias_oc. The
// bias gradient comes from BGRADB (with dweight and use_bgradb, where cuBLASLt runs it) or from
// the column-sum kernel.
void matmul_backward_cuda(MatmulContext* ctx, floatX* dinp, floatX* dweight, floatX* dbias,
                          const floatX* dout, const floatX* inp, const floatX* weight,
                          const floatX* pre_gelu, int N, int IC, int OC, int accumulate_dinp,
                          int accumulate_grads, cudaStream_t stream);

// --- LM head: fused softmax + cross-entropy + gradient ------------------------------------------

// One kernel, one block per row, the probabilities never stored. For each row n of logits
// (N, Vp) with targets[n] in [0, V):
//   losses[n] = logsumexp(logits[n, :V]) - logits[n, targets[n]]   (fp32; NaN if the target is
//               out of range)
// and, when write_dlogits is non-zero, logits[n, :] is overwritten with
//   dloss * (softmax(logits[n, :V]) (1 + 2 z_coef lse) - onehot(targets[n])), and 0 on the
//   padded columns [V, Vp): the gradient of the cross-entropy plus z_coef lse^2 (the z-loss).
// With z_coef > 0, z_losses[n] = z_coef lse^2 (fp32); with z_coef 0 z_losses is not touched
// (may be NULL) and the gradient is bitwise that of the cross-entropy alone.
// Padded columns are never read. Vp must be a multiple of 8 (the vocabulary is padded to 128).
void classifier_forward_backward_cuda(floatX* logits, float* losses, const int* targets,
                                      float dloss, int N, int V, int Vp, int write_dlogits,
                                      float z_coef, float* z_losses, cudaStream_t stream);
// *sum (device, one double) += losses[0] + ... + losses[N-1], summed in double in a fixed order
// (the same bits on every run): the step's loss stays on the device until its one read.
void loss_sum_cuda(double* sum, const float* losses, int N, cudaStream_t stream);
