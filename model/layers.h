// The layer kernels of the GPT model, forward and hand-written backward: the interface the layer
// sequence (model/gpt.c) is written against. The CPU backend implements it in layers.c; the CUDA
// backend with device kernels. Every backward ACCUMULATES (+=) into its input gradients, so that
// residual branches need no extra passes; the exceptions say so in their names and comments
// (matmul_backward_overwrite, matmul_backward_gelu: their input gradient is written, not added,
// so a caller needs no zeroing pass before them). PARAMETER gradients (dweight, dbias, dwte,
// dwpe) follow the GradMode argument: written on a step's first micro-batch (no zeroing pass over
// the gradients), added on the later ones.
// N = number of token rows (B * T). Pointers are the backend's memory (device memory for CUDA).
#pragma once
#include "attention/partial_attention.h"
#include "model/config.h"
#include "model/real.h"
#include "model/rope_angles.h"

#ifdef __cplusplus
extern "C" {
#endif

// How a backward stores its parameter gradients: GRAD_WRITE overwrites them (the values are those
// GRAD_ACCUMULATE gives on zeroed gradients: bitwise on the CPU, where 0 + x == x), without
// reading them; GRAD_ACCUMULATE adds to them.
typedef enum { GRAD_WRITE = 0, GRAD_ACCUMULATE = 1 } GradMode;

// out[n] = wte[token[n]] + wpe[position of local token t]; rows n = b*T + t, position
// token_layout_position(pos, t), or row_pos[n] where row_pos (B*T, backend memory) is not NULL
// (sequences decoded together, each at its own position). wpe NULL (a model with rotary
// positions): out[n] = wte[token[n]].   out: (B, T, C)
void encoder_forward(real* out, const int* tokens, const real* wte, const real* wpe,
                     int B, int T, int C, TokenLayout pos, const int* row_pos);
// Backward: dwte[token[n]] += the sum of the token's rows of dout (always added: the tied
// classifier's backward writes dwte first, model/gpt.c); dwpe[position] gets the sum of its rows,
// per wpe_mode: with GRAD_WRITE all rows [0, wpe_rows) of dwpe are written, 0 where no local
// token sits (wpe_rows: the model's max_T; unused with GRAD_ACCUMULATE). order (B*T, backend
// memory): the rows sorted by (token, row) (model/token_order.h), which the CUDA backend sums by;
// the CPU backend adds the rows in row order, the same order per token, and may be given NULL.
// row_pos (B*T, backend memory, or NULL): each row's position, as in encoder_forward (positions
// that restart per document, so rows of one sequence may share one); row_pos_order then lists
// the rows sorted by (row_pos, row), as order does by token (the CPU backend may be given NULL).
// dwpe NULL (no wpe: rotary positions): only dwte.
void encoder_backward(real* dwte, real* dwpe, const real* dout, const int* tokens, const int* order,
                      int B, int T, int C, TokenLayout pos, const int* row_pos,
                      const int* row_pos_order, int wpe_rows, GradMode wpe_mode);

// Rotary position embeddings on the query and key heads of qkv (N = B*T rows of W = (NH + 2 NKV)
// HS columns: NH query heads, NKV key heads, NKV value heads), in place: in every query and key
// head the channel pair (i, i + HS/2), i < HS/2, is rotated by the angle p f_i (f_i =
// theta^(-2i/HS), or its context-extension scaling: model/rope_angles.h), p the row's position as
// the encoder's (token_layout_position(pos, t), or row_pos[n] when row_pos is not NULL), and
// multiplied by the scaling's amplitude (1 but under YaRN). The value heads are untouched. Angles
// and their cosines and sines are computed in double and rounded to fp32 once, so the tables of
// both backends agree at any position.
// rope_backward applies the transpose (the rotation by -angle, same amplitude) to the query and key columns of
// dqkv: the gradient of the unrotated projection. Both overwrite their argument (not +=).
void rope_forward(real* qkv, int B, int T, int NH, int NKV, int HS, TokenLayout pos,
                  const int* row_pos, RopeSpec rope);
void rope_backward(real* dqkv, int B, int T, int NH, int NKV, int HS, TokenLayout pos,
                   const int* row_pos, RopeSpec rope);

// LayerNorm over the last dimension, rstd = 1 / sqrt(var + eps) (the model's gpt_norm_eps, 1e-5
// by default). mean, rstd: (N) saved for backward.
void layernorm_forward(real* out, real_stat* mean, real_stat* rstd, const real* inp,
                       const real* weight, const real* bias, int N, int C, double eps);
// dinp += dL/dinp; dweight, dbias per mode.
void layernorm_backward(real* dinp, real* dweight, real* dbias, const real* dout,
                        const real* inp, const real* weight, const real_stat* mean,
                        const real_stat* rstd, int N, int C, GradMode mode);

// residual_out = a + b, then ln_out = layernorm(residual_out) with mean, rstd as above: the
// residual add that ends a block fused with the LayerNorm that follows it (the sum is normalised
// as stored, so both stay what backward reads). residual_out may alias a or b; not ln_out.
void fused_residual_layernorm_forward(real* residual_out, real* ln_out, real_stat* mean,
                                      real_stat* rstd, const real* a, const real* b,
                                      const real* weight, const real* bias, int N, int C,
                                      double eps);

// RMSNorm (Zhang and Sennrich 2019, Llama's) over the last dimension: out = inp * rstd * weight,
// rstd = 1 / sqrt(mean(inp^2) + eps) (N) saved for backward. No mean, no bias.
void rmsnorm_forward(real* out, real_stat* rstd, const real* inp, const real* weight, int N, int C,
                     double eps);
// residual_out = a + b, then out = rmsnorm(residual_out): as fused_residual_layernorm_forward.
void fused_residual_rmsnorm_forward(real* residual_out, real* out, real_stat* rstd, const real* a,
                                    const real* b, const real* weight, int N, int C, double eps);
// dinp += dL/dinp; dweight per mode.
void rmsnorm_backward(real* dinp, real* dweight, const real* dout, const real* inp,
                      const real* weight, const real_stat* rstd, int N, int C, GradMode mode);

// QK-norm (GPTConfig.qk_norm, Megatron-LM's --qk-layernorm): every query and key head of qkv (N
// rows of W = (NH + 2 NKV) HS columns: NH query heads, NKV key heads, then the value heads)
// normalised over its HS channels IN PLACE, the query heads with qw (and qb), the key heads with
// kw (and kb): LayerNorm as layernorm_forward, or RMSNorm where mean is NULL (qb and kb NULL too).
// raw (N, NH + NKV, HS) gets the heads as they were, mean and rstd (N, NH + NKV) their statistics,
// for backward. The value heads are untouched.
void qk_norm_forward(real* qkv, real* raw, real_stat* mean, real_stat* rstd, const real* qw,
                     const real* qb, const real* kw, const real* kb, int N, int NH, int NKV,
                     int HS, double eps);
// Backward IN PLACE: the query and key columns of dqkv, the gradient of the normalised heads, are
// OVERWRITTEN with the gradient of the raw ones (the value columns untouched); dqw, dqb, dkw, dkb
// (the biases NULL under RMSNorm, with mean NULL) per mode, each summed over its heads' rows in
// row order.
void qk_norm_backward(real* dqkv, real* dqw, real* dqb, real* dkw, real* dkb, const real* raw,
                      const real* qw, const real* kw, const real_stat* mean, const real_stat* rstd,
                      int N, int NH, int NKV, int HS, GradMode mode);

// SwiGLU (Shazeer 2020): every row of inp (N, 2F) is F gate columns then F up columns; out (N, F)
// = silu(gate) * up, silu(x) = x / (1 + exp(-x)).
void swiglu_forward(real* out, const real* inp, int N, int F);
// Backward: dinp (N, 2F) OVERWRITTEN (not +=): dgate = dout * up * silu'(gate), dup = dout *
// silu(gate), silu'(x) = s (1 + x (1 - s)), s = 1 / (1 + exp(-x)).
void swiglu_backward(real* dinp, const real* inp, const real* dout, int N, int F);

// out (N, OC) = inp (N, IC) @ weight^T + bias; weight is (OC, IC) as nn.Linear. bias may be NULL.
void matmul_forward(real* out, const real* inp, const real* weight, const real* bias,
                    int N, int IC, int OC);
// dinp += dout @ weight; dweight = / += dout^T @ inp, dbias = / += column sums of dout per mode
// (CUDA: GRAD_WRITE is the dweight GEMM with beta = 0 and the bias gradient stored straight from
// its epilogue or the column-sum kernel). bias may be NULL.
void matmul_backward(real* dinp, real* dweight, real* dbias, const real* dout,
                     const real* inp, const real* weight, int N, int IC, int OC, GradMode mode);
// The same, but dinp is OVERWRITTEN: dinp = dout @ weight (CUDA: the GEMM writes with beta = 0 and
// never reads dinp). dweight and dbias per mode.
void matmul_backward_overwrite(real* dinp, real* dweight, real* dbias, const real* dout,
                               const real* inp, const real* weight, int N, int IC, int OC,
                               GradMode mode);

// The MLP's first layer with its GELU: pre_gelu (N, OC) = inp @ weight^T + bias and out_gelu =
// gelu(pre_gelu), both stored (backward reads pre_gelu for the GELU and out_gelu as the next
// layer's input). CUDA: one GEMM with the GELU in its epilogue.
void matmul_forward_gelu(real* out_gelu, real* pre_gelu, const real* inp, const real* weight,
                         const real* bias, int N, int IC, int OC);
// Backward of out = inp @ weight^T + bias where inp = gelu(pre_gelu) (the MLP's second layer and
// the GELU before it): dpre (N, IC) = (dout @ weight) * gelu'(pre_gelu), OVERWRITTEN (the gradient
// of pre_gelu); dweight, dbias per mode as above. CUDA: the GELU gradient in the epilogue of the
// dinp GEMM.
void matmul_backward_gelu(real* dpre, real* dweight, real* dbias, const real* dout,
                          const real* inp, const real* pre_gelu, const real* weight, int N, int IC,
                          int OC, GradMode mode);

// GELU, tanh approximation. n elements.
void gelu_forward(real* out, const real* inp, long n);
void gelu_backward(real* dinp, const real* inp, const real* dout, long n);

// out = a + b, n elements.
void residual_forward(real* out, const real* a, const real* b, long n);

// Backend memory: zero-filled allocation (ends the job when out of memory), release (NULL is
// allowed), zeroing, and copying token ids from host memory into a backend buffer.
real* tensor_alloc(size_t n, const char* what);
real_stat* stat_alloc(size_t n, const char* what);
int* tokens_alloc(size_t n, const char* what);
void tensor_free(void* p);
void tensor_zero(real* p, size_t n);
void tensor_copy(real* dst, const real* src, size_t n);
void tokens_upload(int* dst, const int* host_src, size_t n);
// Doubles in backend memory (the loss and gradient-norm scalars of a step, model/gpt.h),
// zero-filled; zeroing them in stream order; copying them to the host (the host waits: not for
// use inside a training step, whose one read is gpt_scalars_fetch in model/backend.h).
double* scalars_alloc(size_t n, const char* what);
void scalars_zero(double* p, size_t n);
void scalars_to_host(double* host, const double* p, size_t n);
// Grows the backend's scratch for passes of model cfg over B x T tokens now (CUDA: the backward's
// scratch buffers, QK-norm's included, and the bias-gradient scratch of the matmuls, for biases
// up to gpt_widest_row columns), so that the first training step allocates nothing and never
// waits for the device; nothing on the CPU.
void layers_reserve(const GPTConfig* cfg, int B, int T);

// Cross-entropy over the first V of Vp logits per row, N rows. losses: (N) per-token loss. Their
// sum, added in a fixed order (the same bits on every run and schedule), is ADDED to *loss_sum
// (one double in backend memory): the host does not wait for it.
// crossentropy_forward only reads the logits (evaluation: a loss without a backward).
void crossentropy_forward(real_stat* losses, const real* logits, const int* targets, int N, int V,
                          int Vp, double* loss_sum);
// PaLM's z-loss (Chowdhery et al. 2022: coef 1e-4): coef * lse^2 per token, lse the row's
// log-sum-exp, added to the training objective (not to the cross-entropy `losses`), which keeps
// the softmax's normalizer near 1. coef 0: none, and losses and sum are not touched (may be NULL).
typedef struct {
    real_stat coef;
    real_stat* losses;   // (N) coef * lse^2 per token
    double* sum;         // their sum ADDED to it, in row order (a fixed order, as loss_sum)
} ZLoss;
// The training step's classifier, once per micro-batch: the losses as above, and the logits
// overwritten with dlogits = dloss * (softmax (1 + 2 z.coef lse) - onehot(target)), the gradient
// of the cross-entropy plus the z-loss (bitwise the cross-entropy's alone at z.coef 0), 0 on the
// padded columns.
void crossentropy_forward_backward(real* logits, real_stat* losses, const int* targets,
                                   real_stat dloss, int N, int V, int Vp, double* loss_sum, ZLoss z);

#ifdef __cplusplus
}
#endif
