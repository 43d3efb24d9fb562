// FLOPs and DRAM bytes of one call of each CUDA launcher of the training step, written once from
// the formulas of the three cost notes (model/cuda_perf_layers.md,
// model/cuda_perf_matmul_loss_adamw.md, attention/cuda_perf_attention.md), for the kernel
// benchmark (tools/bench_kernels_cuda.cu) and its unit test (tests/test_kernel_costs.c). Plain C.
//
// Storage is the bf16 build's: floatX = 2 bytes; fp32 statistics, partials, master weights,
// moments and attention outputs 4 bytes. Bytes are the compulsory DRAM traffic the notes count
// (each tensor read or written once, `+=` outputs read and written); FLOPs are the notes' counts:
// model FLOPs for GEMMs and attention (tensor = 1), fp32 operations on the CUDA cores otherwise.
#pragma once

#ifdef __cplusplus
extern "C" {
#endif

typedef struct {
    double flops;   // floating-point operations of one call
    double bytes;   // DRAM bytes of one call
    int tensor;     // 1: the FLOPs run on tensor cores (bf16 peak); 0: CUDA cores (fp32 peak)
} KernelCost;

// Bytes of one floatX element in the bf16 build the notes describe.
#define KERNEL_COST_X 2.0

// --- Token-local layers (model/cuda_perf_layers.md); N = B*T rows of C channels ----------------

// T: sequence length (rows of wpe read once, reused by the B sequences through L2).
KernelCost kernel_cost_encoder_forward(double N, double T, double C);
// Upper bound: every one of the N tokens distinct (U = N touched rows of dwte).
KernelCost kernel_cost_encoder_backward(double N, double T, double C);
KernelCost kernel_cost_layernorm_forward(double N, double C);
KernelCost kernel_cost_fused_residual_layernorm_forward(double N, double C);
// Includes the fp32 per-block partials (written and read) of the block count layernorm.cu uses.
KernelCost kernel_cost_layernorm_backward(double N, double C);
// n elements (the MLP's hidden activation: n = 4*N*C).
KernelCost kernel_cost_gelu_forward(double n);
KernelCost kernel_cost_gelu_backward(double n);
// SwiGLU (model/swiglu.cu) on N rows of F hidden columns (2F in, F out).
KernelCost kernel_cost_swiglu_forward(double N, double F);
KernelCost kernel_cost_swiglu_backward(double N, double F);
KernelCost kernel_cost_residual_forward(double n);
// Blocks of layernorm_backward_cuda for N rows (mirrors ln_bwd_rows_per_block in layernorm.cu).
long kernel_layernorm_backward_blocks(long N);

// --- GEMMs, classifier, optimizer (model/cuda_perf_matmul_loss_adamw.md) -------------------------

// out (N, OC) = inp (N, IC) @ weight^T (+ bias); gelu: the fused GELU also stores pre_gelu.
KernelCost kernel_cost_matmul_forward(double N, double IC, double OC, int bias, int gelu);
// The two GEMMs of matmul_backward_cuda: dinp += dout @ weight; dweight += dout^T @ inp (and
// dbias from the BGRADB epilogue when the layer has a bias).
KernelCost kernel_cost_matmul_backward_dinp(double N, double IC, double OC);
KernelCost kernel_cost_matmul_backward_dweight(double N, double IC, double OC, int bias);
// The whole call: both GEMMs.
KernelCost kernel_cost_matmul_backward(double N, double IC, double OC, int bias);
// Fused softmax + cross-entropy + gradient over (N, Vp) logits of which V are real.
KernelCost kernel_cost_classifier(double N, double V, double Vp);
// n parameters (bf16 params and grads, fp32 master, m, v).
KernelCost kernel_cost_adamw(double n);
// n bf16 gradients (the first pass's partials, at most 8 KiB, left out as in the note's tables).
KernelCost kernel_cost_global_norm(double n);

// --- Attention, single-device causal (attention/cuda_perf_attention.md) -------------------------

// Visible (query, key) pairs of B*NH causal heads of T tokens: B*NH*T*(T+1)/2.
double kernel_causal_pairs(double B, double NH, double T);
KernelCost kernel_cost_attention_forward(double B, double NH, double HS, double T);
KernelCost kernel_cost_attention_row_dot(double B, double NH, double HS, double T);
KernelCost kernel_cost_attention_backward(double B, double NH, double HS, double T);
// One LSE merge of two fp32 partials of T rows per sequence.
KernelCost kernel_cost_attention_merge(double B, double NH, double HS, double T);
// Grouped-query attention's passes around a call of NH query heads on NKV < NH key/value heads
// (attention/partial_attention.cu, gqa_*), over `rows` = B*Tk key rows: one K or V tensor widened
// to NH heads (read NKV, written NH), and one widened fp32 dK or dV summed over each group of
// NH / NKV heads, added to an fp32 accumulator (accumulate) or written in the storage type.
// Rotary positions (model/rope.cu) on rows of NH query and NKV key heads, in place.
KernelCost kernel_cost_rope(double rows, double NH, double NKV, double HS);
KernelCost kernel_cost_gqa_widen(double rows, double NH, double NKV, double HS);
KernelCost kernel_cost_gqa_group_sum(double rows, double NH, double NKV, double HS, int accumulate);

// --- Model size and floors ----------------------------------------------------------------------

// Parameters of the GPT (model/gpt.c's 16 tensors): wte Vp*C, wpe max_T*C, L blocks of
// C W + W + 9 C^2 + 10 C (W: the qkv projection's width, C + 2 NKV HS: 3C without grouped-query
// attention), the final LayerNorm 2 C.
double kernel_gpt_num_params_qkv(double L, double C, double W, double Vp, double max_T);
// Any block: an MLP of hidden width F whose first layer is FC wide (F, or 2F under SwiGLU), norms
// with NB bias elements (C, or 0 under RMSNorm), linear layers with biases (LB 1) or without (0),
// the qkv projection's own bias apart (QB: LB, or 1 with the others gone, Qwen2's).
double kernel_gpt_num_params_block(double L, double C, double W, double F, double FC, double NB,
                                   double QB, double LB, double Vp, double max_T);
// The same with W = 3C (one key/value head per query head: 12 C^2 + 13 C per block).
double kernel_gpt_num_params(double L, double C, double Vp, double max_T);

// Floor of a call in seconds: max(flops / peak, bytes / bandwidth), peak = tensor_flops_per_s
// for tensor-core work, cuda_core_flops_per_s otherwise (a rate <= 0 drops that compute term).
// *compute_bound (may be NULL) gets 1 when the compute term is the larger.
double kernel_floor_seconds(KernelCost c, double tensor_flops_per_s, double cuda_core_flops_per_s,
                            double bytes_per_s, int* compute_bound);

#ifdef __cplusplus
}
#endif
