// The layer kernels of the GPT model, forward and hand-written backward: the interface the layer
// sequence (model/gpt.c) is written against. The CPU backend implements it in layers.c; the CUDA
// backend with device kernels. Every backward ACCUMULATES (+=) into its gradient outputs, so
// that residual branches and gradient accumulation over micro-batches need no extra passes.
// N = number of token rows (B * T). Pointers are the backend's memory (device memory for CUDA).
#pragma once
#include "attention/partial_attention.h"
#include "model/real.h"

#ifdef __cplusplus
extern "C" {
#endif

// out[n] = wte[token[n]] + wpe[position of local token t]; rows n = b*T + t, position
// pos.off + pos.stride * t.   out: (B, T, C)
void encoder_forward(real* out, const int* tokens, const real* wte, const real* wpe,
                     int B, int T, int C, TokenPositions pos);
void encoder_backward(real* dwte, real* dwpe, const real* dout, const int* tokens,
                      int B, int T, int C, TokenPositions pos);

// LayerNorm over the last dimension (eps 1e-5). mean, rstd: (N) saved for backward.
void layernorm_forward(real* out, real_stat* mean, real_stat* rstd, const real* inp,
                       const real* weight, const real* bias, int N, int C);
void layernorm_backward(real* dinp, real* dweight, real* dbias, const real* dout,
                        const real* inp, const real* weight, const real_stat* mean,
                        const real_stat* rstd, int N, int C);

// out (N, OC) = inp (N, IC) @ weight^T + bias; weight is (OC, IC) as nn.Linear. bias may be NULL.
void matmul_forward(real* out, const real* inp, const real* weight, const real* bias,
                    int N, int IC, int OC);
void matmul_backward(real* dinp, real* dweight, real* dbias, const real* dout,
                     const real* inp, const real* weight, int N, int IC, int OC);

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

// Cross-entropy over the first V of Vp logits per row. losses: (N) per-token loss;
// lse: (N) log-sum-exp of each row, saved for backward. Returns the sum of the losses.
double crossentropy_forward(real_stat* losses, real_stat* lse, const real* logits, const int* targets,
                            int N, int V, int Vp);
// Overwrites logits with dlogits = dloss * (softmax - onehot(target)), 0 on the padded columns.
void crossentropy_backward_inplace(real* logits, const real_stat* lse, const int* targets,
                                   real_stat dloss, int N, int V, int Vp);

#ifdef __cplusplus
}
#endif
