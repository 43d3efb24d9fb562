// The kernel benchmark's cases (tools/bench_kernels.h): every CUDA launcher of the training step at
// one shape, with the buffers it reads and writes, its FLOPs and bytes (tools/kernel_costs.c) and
// the call that is timed.
#include "attention/partial_attention_cuda.cuh"
#include "model/config.h"
#include "model/layers_cuda.cuh"
#include "model/optim_cuda.cuh"
#include "model/token_order.h"
#include "tools/bench_kernels.h"

#include <stdlib.h>
#include <string.h>

size_t elem_bytes(Elem e) {
    switch (e) {
    case ELEM_X: return sizeof(floatX);
    case ELEM_F32: case ELEM_I32: return 4;
    case ELEM_F64: return 8;
    default: return 1;
    }
}

static Case new_case(const char* name, KernelCost cost, CaseFn run) {
    Case c;
    memset(&c, 0, sizeof c);
    snprintf(c.name, sizeof c.name, "%s", name);
    c.cost = cost;
    c.run = run;
    return c;
}

static void add_buf(Case* c, Elem e, size_t count, Fill fill) {
    CHECK(c->nbuf < MAX_BUFS, "raise MAX_BUFS", "case %s: more than %d buffers", c->name, MAX_BUFS);
    c->count[c->nbuf] = count, c->elem[c->nbuf] = e, c->fill[c->nbuf] = fill;
    c->nbuf++;
}

static size_t NC(const Shape* s) { return (size_t)s->N * s->C; }
static size_t rows_lse(const Shape* s) { return (size_t)s->B * s->NH * s->T; }
static TokenPositions positions(void) {
    TokenPositions p;
    p.off = 0, p.stride = 1;
    return p;
}
// Single-device causal attention: queries and keys at positions 0, 1, 2, ... (attention_local_cuda.cu).
static AttentionProblem causal_problem(const Shape* s) {
    AttentionProblem p;
    memset(&p, 0, sizeof p);
    p.B = s->B, p.NH = s->NH, p.NKV = s->NH, p.HS = s->HS, p.Tq = s->T, p.Tk = s->T;
    p.qpos = positions(), p.kpos = positions();
    return p;
}

#define X(i) ((floatX*)p[i])
#define F(i) ((float*)p[i])

// Token-local layers. Buffers: outputs first, then inputs (shape comments give the layout).

static void run_encoder_forward(const Bench* b, const Shape* s, const Case* c, void* const* p) {
    encoder_forward_cuda(X(0), (const int*)p[1], X(2), X(3), s->B, s->T, s->C, token_layout(positions()), NULL, b->stream);
}
static Case case_encoder_forward(const Shape* s) {
    Case c = new_case("encoder_forward_cuda", kernel_cost_encoder_forward(s->N, s->T, s->C), run_encoder_forward);
    add_buf(&c, ELEM_X, NC(s), FILL_NONE);                        // out (N, C)
    add_buf(&c, ELEM_I32, s->N, FILL_TOKENS);                     // tokens (N)
    add_buf(&c, ELEM_X, (size_t)s->Vp * s->C, FILL_RANDOM);       // wte (Vp, C)
    add_buf(&c, ELEM_X, (size_t)s->T * s->C, FILL_RANDOM);        // wpe (T, C)
    return c;
}

// prepare: the rows by token, sorted on the host as the trainer does (model/gpt.c; not timed).
static void prepare_encoder_backward(const Bench* b, const Shape* s, const Case* c, void* const* p) {
    (void)c;
    int* host = (int*)xmalloc(3 * (size_t)s->N * sizeof(int), "encoder backward tokens");
    CUDA_CHECK(cudaStreamSynchronize(b->stream));   // the tokens' fill
    CUDA_CHECK(cudaMemcpy(host, p[3], (size_t)s->N * sizeof(int), cudaMemcpyDeviceToHost));
    token_order(host + s->N, host + 2 * s->N, host, (size_t)s->N);
    CUDA_CHECK(cudaMemcpy(p[5], host + s->N, (size_t)s->N * sizeof(int), cudaMemcpyHostToDevice));
    free(host);
}
static void run_encoder_backward(const Bench* b, const Shape* s, const Case* c, void* const* p) {
    encoder_backward_cuda(X(0), X(1), X(2), (const int*)p[3], (const int*)p[5], s->B, s->T, s->C,
                          token_layout(positions()), NULL, NULL, s->T, 1, p[4], b->stream);
}
static Case case_encoder_backward(const Shape* s) {
    Case c = new_case("encoder_backward_cuda", kernel_cost_encoder_backward(s->N, s->T, s->C), run_encoder_backward);
    c.prepare = prepare_encoder_backward;
    add_buf(&c, ELEM_X, (size_t)s->Vp * s->C, FILL_RANDOM);       // dwte (Vp, C), +=
    add_buf(&c, ELEM_X, (size_t)s->T * s->C, FILL_RANDOM);        // dwpe (T, C), +=
    add_buf(&c, ELEM_X, NC(s), FILL_RANDOM);                      // dout (N, C)
    add_buf(&c, ELEM_I32, s->N, FILL_TOKENS);                     // tokens (N)
    add_buf(&c, ELEM_BYTE, encoder_backward_scratch_bytes(s->B, s->T, s->C), FILL_NONE);
    add_buf(&c, ELEM_I32, s->N, FILL_NONE);                       // rows by token (N), from prepare
    return c;
}

static void run_layernorm_forward(const Bench* b, const Shape* s, const Case* c, void* const* p) {
    layernorm_forward_cuda(X(0), F(1), F(2), X(3), X(4), X(5), s->N, s->C, 1e-5f, b->stream);
}
static Case case_layernorm_forward(const Shape* s) {
    Case c = new_case("layernorm_forward_cuda", kernel_cost_layernorm_forward(s->N, s->C), run_layernorm_forward);
    add_buf(&c, ELEM_X, NC(s), FILL_NONE);                        // out (N, C)
    add_buf(&c, ELEM_F32, s->N, FILL_NONE);                       // mean (N)
    add_buf(&c, ELEM_F32, s->N, FILL_NONE);                       // rstd (N)
    add_buf(&c, ELEM_X, NC(s), FILL_RANDOM);                      // inp (N, C)
    add_buf(&c, ELEM_X, s->C, FILL_RANDOM);                       // weight (C)
    add_buf(&c, ELEM_X, s->C, FILL_RANDOM);                       // bias (C)
    return c;
}

static void run_fused_residual_layernorm(const Bench* b, const Shape* s, const Case* c, void* const* p) {
    fused_residual_layernorm_forward_cuda(X(0), X(1), F(2), F(3), X(4), X(5), X(6), X(7), s->N, s->C, 1e-5f,
                                          b->stream);
}
static Case case_fused_residual_layernorm(const Shape* s) {
    Case c = new_case("fused_residual_layernorm_forward_cuda",
                      kernel_cost_fused_residual_layernorm_forward(s->N, s->C), run_fused_residual_layernorm);
    add_buf(&c, ELEM_X, NC(s), FILL_NONE);                        // residual_out (N, C)
    add_buf(&c, ELEM_X, NC(s), FILL_NONE);                        // out (N, C)
    add_buf(&c, ELEM_F32, s->N, FILL_NONE);                       // mean (N)
    add_buf(&c, ELEM_F32, s->N, FILL_NONE);                       // rstd (N)
    add_buf(&c, ELEM_X, NC(s), FILL_RANDOM);                      // a (N, C)
    add_buf(&c, ELEM_X, NC(s), FILL_RANDOM);                      // b (N, C)
    add_buf(&c, ELEM_X, s->C, FILL_RANDOM);                       // weight (C)
    add_buf(&c, ELEM_X, s->C, FILL_RANDOM);                       // bias (C)
    return c;
}

// The statistics a real backward gets: a forward over its inp (output into dinp, which then
// accumulates from there; bias = dbias's random values).
static void prepare_layernorm_backward(const Bench* b, const Shape* s, const Case* c, void* const* p) {
    layernorm_forward_cuda(X(0), F(7), F(8), X(5), X(6), X(2), s->N, s->C, 1e-5f, b->stream);
}
static void run_layernorm_backward(const Bench* b, const Shape* s, const Case* c, void* const* p) {
    layernorm_backward_cuda(X(0), X(1), X(2), p[3], X(4), X(5), X(6), F(7), F(8), s->N, s->C, 1, b->stream);
}
static Case case_layernorm_backward(const Shape* s) {
    Case c = new_case("layernorm_backward_cuda", kernel_cost_layernorm_backward(s->N, s->C), run_layernorm_backward);
    c.prepare = prepare_layernorm_backward;
    add_buf(&c, ELEM_X, NC(s), FILL_RANDOM);                      // dinp (N, C), +=
    add_buf(&c, ELEM_X, s->C, FILL_RANDOM);                       // dweight (C), +=
    add_buf(&c, ELEM_X, s->C, FILL_RANDOM);                       // dbias (C), +=
    add_buf(&c, ELEM_BYTE, layernorm_backward_scratch_bytes(s->N, s->C), FILL_NONE);
    add_buf(&c, ELEM_X, NC(s), FILL_RANDOM);                      // dout (N, C)
    add_buf(&c, ELEM_X, NC(s), FILL_RANDOM);                      // inp (N, C)
    add_buf(&c, ELEM_X, s->C, FILL_RANDOM);                       // weight (C)
    add_buf(&c, ELEM_F32, s->N, FILL_NONE);                       // mean (N), from prepare
    add_buf(&c, ELEM_F32, s->N, FILL_NONE);                       // rstd (N), from prepare
    return c;
}

static void run_gelu_forward(const Bench* b, const Shape* s, const Case* c, void* const* p) {
    gelu_forward_cuda(X(0), X(1), (long)(4 * NC(s)), b->stream);
}
static Case case_gelu_forward(const Shape* s) {
    Case c = new_case("gelu_forward_cuda", kernel_cost_gelu_forward(4.0 * NC(s)), run_gelu_forward);
    add_buf(&c, ELEM_X, 4 * NC(s), FILL_NONE);                    // out (N, 4C)
    add_buf(&c, ELEM_X, 4 * NC(s), FILL_RANDOM);                  // inp (N, 4C)
    return c;
}

static void run_gelu_backward(const Bench* b, const Shape* s, const Case* c, void* const* p) {
    gelu_backward_cuda(X(0), X(1), X(2), (long)(4 * NC(s)), b->stream);
}
static Case case_gelu_backward(const Shape* s) {
    Case c = new_case("gelu_backward_cuda", kernel_cost_gelu_backward(4.0 * NC(s)), run_gelu_backward);
    add_buf(&c, ELEM_X, 4 * NC(s), FILL_RANDOM);                  // dinp (N, 4C), +=
    add_buf(&c, ELEM_X, 4 * NC(s), FILL_RANDOM);                  // inp (N, 4C)
    add_buf(&c, ELEM_X, 4 * NC(s), FILL_RANDOM);                  // dout (N, 4C)
    return c;
}

// SwiGLU (Llama's MLP, --mlp swiglu) at the trainer's default hidden width for C.
static size_t swiglu_hidden(const Shape* s) { return (size_t)gpt_swiglu_default_hidden(s->C); }
static void run_swiglu_forward(const Bench* b, const Shape* s, const Case* c, void* const* p) {
    swiglu_forward_cuda(X(0), X(1), s->N, (int)swiglu_hidden(s), b->stream);
}
static Case case_swiglu_forward(const Shape* s) {
    const size_t F = swiglu_hidden(s);
    Case c = new_case("swiglu_forward_cuda", kernel_cost_swiglu_forward(s->N, (double)F),
                      run_swiglu_forward);
    add_buf(&c, ELEM_X, s->N * F, FILL_NONE);                     // out (N, F)
    add_buf(&c, ELEM_X, 2 * s->N * F, FILL_RANDOM);               // inp (N, 2F): gate, up
    return c;
}

static void run_swiglu_backward(const Bench* b, const Shape* s, const Case* c, void* const* p) {
    swiglu_backward_cuda(X(0), X(1), X(2), s->N, (int)swiglu_hidden(s), b->stream);
}
static Case case_swiglu_backward(const Shape* s) {
    const size_t F = swiglu_hidden(s);
    Case c = new_case("swiglu_backward_cuda", kernel_cost_swiglu_backward(s->N, (double)F),
                      run_swiglu_backward);
    add_buf(&c, ELEM_X, 2 * s->N * F, FILL_NONE);                 // dinp (N, 2F), overwritten
    add_buf(&c, ELEM_X, 2 * s->N * F, FILL_RANDOM);               // inp (N, 2F)
    add_buf(&c, ELEM_X, s->N * F, FILL_RANDOM);                   // dout (N, F)
    return c;
}

static void run_residual_forward(const Bench* b, const Shape* s, const Case* c, void* const* p) {
    residual_forward_cuda(X(0), X(1), X(2), (long)NC(s), b->stream);
}
static Case case_residual_forward(const Shape* s) {
    Case c = new_case("residual_forward_cuda", kernel_cost_residual_forward((double)NC(s)), run_residual_forward);
    add_buf(&c, ELEM_X, NC(s), FILL_NONE);                        // out (N, C)
    add_buf(&c, ELEM_X, NC(s), FILL_RANDOM);                      // a (N, C)
    add_buf(&c, ELEM_X, NC(s), FILL_RANDOM);                      // b (N, C)
    return c;
}

// Rotary positions on the qkv projection's query and key heads, in place (a model with
// --position-embedding rope; timed beside the others so the kit shows its share).
static void run_rope(const Bench* b, const Shape* s, const Case* c, void* const* p) {
    rope_cuda(X(0), s->B, s->T, s->NH, s->NH, s->HS, token_layout(positions()), NULL,
              RopeSpec{10000, ROPE_SCALING_NONE, 0, 0}, 1, b->stream);
}
static Case case_rope(const Shape* s) {
    Case c = new_case("rope_cuda", kernel_cost_rope((double)s->N, s->NH, s->NH, s->HS), run_rope);
    add_buf(&c, ELEM_X, 3 * NC(s), FILL_RANDOM);                  // qkv (N, 3C), in place
    return c;
}

// GEMMs: one layer of the model, inp (N, IC) -> out (N, OC).

static void run_matmul_forward(const Bench* b, const Shape* s, const Case* c, void* const* p) {
    matmul_forward_cuda(b->mm, X(0), X(4), X(1), X(2), X(3), s->N, c->IC, c->OC, b->stream);
}
static Case case_matmul_forward(const Shape* s, const char* layer, int IC, int OC, int bias, int gelu) {
    char name[64];
    snprintf(name, sizeof name, "matmul_forward_cuda %s", layer);
    Case c = new_case(name, kernel_cost_matmul_forward(s->N, IC, OC, bias, gelu), run_matmul_forward);
    c.IC = IC, c.OC = OC, c.bias = bias, c.gelu = gelu;
    add_buf(&c, ELEM_X, (size_t)s->N * OC, FILL_NONE);                   // out (N, OC)
    add_buf(&c, ELEM_X, (size_t)s->N * IC, FILL_RANDOM);                 // inp (N, IC)
    add_buf(&c, ELEM_X, (size_t)OC * IC, FILL_RANDOM);                   // weight (OC, IC)
    add_buf(&c, ELEM_X, bias ? (size_t)OC : 0, FILL_RANDOM);             // bias (OC) or NULL
    add_buf(&c, ELEM_X, gelu ? (size_t)s->N * OC : 0, FILL_NONE);        // pre_gelu (N, OC) or NULL
    return c;
}

static void run_matmul_backward(const Bench* b, const Shape* s, const Case* c, void* const* p) {
    matmul_backward_cuda(b->mm, X(0), X(1), X(2), X(3), X(4), X(5), NULL, s->N, c->IC, c->OC, 1, 1, b->stream);
}
static Case case_matmul_backward(const Shape* s, const char* layer, int IC, int OC, int bias) {
    char name[64];
    snprintf(name, sizeof name, "matmul_backward_cuda %s", layer);
    Case c = new_case(name, kernel_cost_matmul_backward(s->N, IC, OC, bias), run_matmul_backward);
    c.IC = IC, c.OC = OC, c.bias = bias;
    add_buf(&c, ELEM_X, (size_t)s->N * IC, FILL_RANDOM);                 // dinp (N, IC), +=
    add_buf(&c, ELEM_X, (size_t)OC * IC, FILL_RANDOM);                   // dweight (OC, IC), +=
    add_buf(&c, ELEM_X, bias ? (size_t)OC : 0, FILL_RANDOM);             // dbias (OC), += or NULL
    add_buf(&c, ELEM_X, (size_t)s->N * OC, FILL_RANDOM);                 // dout (N, OC)
    add_buf(&c, ELEM_X, (size_t)s->N * IC, FILL_RANDOM);                 // inp (N, IC)
    add_buf(&c, ELEM_X, (size_t)OC * IC, FILL_RANDOM);                   // weight (OC, IC)
    return c;
}

// Attention, as attention_local_cuda.cu calls it: Q, K, V read from the fused (B*T, 3C) QKV
// activation (row stride 3C), o and dout rows of stride C, dq, dk, dv into an fp32 (B*T, 3C).

static void run_attention_forward(const Bench* b, const Shape* s, const Case* c, void* const* p) {
    const AttentionProblem pr = causal_problem(s);
    const int C = s->C;
    attention_partial_forward_cuda(&pr, X(0), 3 * C, X(0) + C, 3 * C, X(0) + 2 * C, 3 * C, F(1), C, F(2), b->stream);
}
Case case_attention_forward(const Shape* s) {
    Case c = new_case("attention_partial_forward_cuda",
                      kernel_cost_attention_forward(s->B, s->NH, s->HS, s->T), run_attention_forward);
    add_buf(&c, ELEM_X, 3 * NC(s), FILL_RANDOM);                  // qkv (B*T, 3C)
    add_buf(&c, ELEM_F32, NC(s), FILL_NONE);                      // o (B*T, C) fp32
    add_buf(&c, ELEM_F32, rows_lse(s), FILL_NONE);                // lse (B, NH, T)
    return c;
}

static void run_attention_row_dot(const Bench* b, const Shape* s, const Case* c, void* const* p) {
    const AttentionProblem pr = causal_problem(s);
    attention_row_dot_cuda(&pr, X(0), s->C, X(1), s->C, F(2), b->stream);
}
static Case case_attention_row_dot(const Shape* s) {
    Case c = new_case("attention_row_dot_cuda",
                      kernel_cost_attention_row_dot(s->B, s->NH, s->HS, s->T), run_attention_row_dot);
    add_buf(&c, ELEM_X, NC(s), FILL_RANDOM);                      // out (B*T, C)
    add_buf(&c, ELEM_X, NC(s), FILL_RANDOM);                      // dout (B*T, C)
    add_buf(&c, ELEM_F32, rows_lse(s), FILL_NONE);                // d (B, NH, T)
    return c;
}

// Backward buffers: 0 qkv, 1 dout, 2 lse, 3 d, 4 dqkv (fp32, +=), 5 o (fp32), 6 out (floatX).
// prepare: the forward's lse and o, o rounded to floatX as the layer stores it, d = rowsum(out * dout).
static void prepare_attention_backward(const Bench* b, const Shape* s, const Case* c, void* const* p) {
    void* const forward[3] = {p[0], p[5], p[2]};     // qkv -> o, lse
    void* const row_dot[3] = {p[6], p[1], p[3]};     // out, dout -> d
    run_attention_forward(b, s, c, forward);
    float_to_floatx_cuda(X(6), (const float*)F(5), NC(s), b->stream);   // the layer's rounding of o
    run_attention_row_dot(b, s, c, row_dot);
}
static void run_attention_backward(const Bench* b, const Shape* s, const Case* c, void* const* p) {
    const AttentionProblem pr = causal_problem(s);
    const int C = s->C;
    float* g = F(4);
    attention_partial_backward_cuda(&pr, X(0), 3 * C, X(0) + C, 3 * C, X(0) + 2 * C, 3 * C, X(1), C, F(2), F(3),
                                    g, 3 * C, g + C, 3 * C, g + 2 * C, 3 * C, b->stream);
}
static void add_attention_backward_bufs(Case* c, const Shape* s) {
    c->prepare = prepare_attention_backward;
    add_buf(c, ELEM_X, 3 * NC(s), FILL_RANDOM);                   // qkv (B*T, 3C)
    add_buf(c, ELEM_X, NC(s), FILL_RANDOM);                       // dout (B*T, C)
    add_buf(c, ELEM_F32, rows_lse(s), FILL_NONE);                 // lse (B, NH, T), from prepare
    add_buf(c, ELEM_F32, rows_lse(s), FILL_NONE);                 // d (B, NH, T), from prepare
    add_buf(c, ELEM_F32, 3 * NC(s), FILL_RANDOM);                 // dqkv (B*T, 3C) fp32, +=
    add_buf(c, ELEM_F32, NC(s), FILL_NONE);                       // o (B*T, C) fp32, prepare only
    add_buf(c, ELEM_X, NC(s), FILL_NONE);                         // out (B*T, C), prepare only
}
static Case case_attention_backward(const Shape* s) {
    Case c = new_case("attention_partial_backward_cuda",
                      kernel_cost_attention_backward(s->B, s->NH, s->HS, s->T), run_attention_backward);
    add_attention_backward_bufs(&c, s);
    return c;
}

// The whole backward of the comparison with SDPA: row-dot, then the two backward kernels.
static void run_attention_backward_full(const Bench* b, const Shape* s, const Case* c, void* const* p) {
    void* const row_dot[3] = {p[6], p[1], p[3]};     // out, dout -> d
    run_attention_row_dot(b, s, c, row_dot);
    run_attention_backward(b, s, c, p);
}
Case case_attention_backward_full(const Shape* s) {
    Case c = new_case("attention_row_dot_cuda + attention_partial_backward_cuda",
                      kernel_cost_attention_backward(s->B, s->NH, s->HS, s->T), run_attention_backward_full);
    add_attention_backward_bufs(&c, s);
    return c;
}

static void run_attention_merge(const Bench* b, const Shape* s, const Case* c, void* const* p) {
    attention_merge_cuda(s->B, s->NH, s->HS, s->T, F(0), s->C, F(1), F(2), s->C, F(3), b->stream);
}
static Case case_attention_merge(const Shape* s) {
    Case c = new_case("attention_merge_cuda", kernel_cost_attention_merge(s->B, s->NH, s->HS, s->T),
                      run_attention_merge);
    add_buf(&c, ELEM_F32, NC(s), FILL_RANDOM);                    // o_a (B*T, C), merged in place
    add_buf(&c, ELEM_F32, rows_lse(s), FILL_RANDOM);              // lse_a (B, NH, T)
    add_buf(&c, ELEM_F32, NC(s), FILL_RANDOM);                    // o_b (B*T, C)
    add_buf(&c, ELEM_F32, rows_lse(s), FILL_RANDOM);              // lse_b (B, NH, T)
    return c;
}

// LM head loss and optimizer.

static void run_classifier(const Bench* b, const Shape* s, const Case* c, void* const* p) {
    classifier_forward_backward_cuda(X(0), F(1), (const int*)p[2], 1.0f / (float)s->N, s->N, s->V, s->Vp, 1,
                                     0.0f, NULL, b->stream);
}
static Case case_classifier(const Shape* s) {
    Case c = new_case("classifier_forward_backward_cuda", kernel_cost_classifier(s->N, s->V, s->Vp), run_classifier);
    add_buf(&c, ELEM_X, (size_t)s->N * s->Vp, FILL_RANDOM);       // logits (N, Vp), become dlogits
    add_buf(&c, ELEM_F32, s->N, FILL_NONE);                       // losses (N)
    add_buf(&c, ELEM_I32, s->N, FILL_TOKENS);                     // targets (N)
    return c;
}

static void run_adamw(const Bench* b, const Shape* s, const Case* c, void* const* p) {
    const size_t n = s->opt_params;
    const int decays = 1;
    const AdamWTensorTable table = adamw_tensor_table(&n, &decays, 1);
    adamw_update_cuda(X(0), F(1), X(2), F(3), F(4), 0, n, &table, 1, 1e-4, 0.9, 0.95, 1e-8, 0.1, NULL, 1234,
                      b->stream);
}
static Case case_adamw(const Shape* s) {
    const size_t n = s->opt_params;
    Case c = new_case("adamw_update_cuda", kernel_cost_adamw((double)n), run_adamw);
    add_buf(&c, ELEM_X, n, FILL_RANDOM);                          // params (n)
    add_buf(&c, ELEM_F32, n, FILL_RANDOM);                        // master (n) fp32
    add_buf(&c, ELEM_X, n, FILL_RANDOM);                          // grads (n)
    add_buf(&c, ELEM_F32, n, FILL_RANDOM);                        // m (n)
    add_buf(&c, ELEM_F32, n, FILL_POSITIVE);                      // v (n), >= 0
    return c;
}

static void run_global_norm(const Bench* b, const Shape* s, const Case* c, void* const* p) {
    global_norm_squared_cuda((double*)p[0], X(1), s->opt_params, (double*)p[2], 0, b->stream);
}
static Case case_global_norm(const Shape* s) {
    Case c = new_case("global_norm_squared_cuda", kernel_cost_global_norm((double)s->opt_params), run_global_norm);
    add_buf(&c, ELEM_F64, 1, FILL_NONE);                          // out_sumsq
    add_buf(&c, ELEM_X, s->opt_params, FILL_RANDOM);              // grads (n)
    add_buf(&c, ELEM_F64, GLOBAL_NORM_MAX_BLOCKS, FILL_NONE);     // partials
    return c;
}

#undef X
#undef F

// Every launcher of the training step at one shape, in step order.
int shape_cases(const Shape* s, Case* cases) {
    const int C = s->C;
    int n = 0;
    cases[n++] = case_encoder_forward(s);
    cases[n++] = case_layernorm_forward(s);
    cases[n++] = case_matmul_forward(s, "qkv", C, 3 * C, 1, 0);
    cases[n++] = case_rope(s);
    cases[n++] = case_attention_forward(s);
    cases[n++] = case_attention_merge(s);
    cases[n++] = case_matmul_forward(s, "attproj", C, C, 1, 0);
    cases[n++] = case_residual_forward(s);
    cases[n++] = case_fused_residual_layernorm(s);
    cases[n++] = case_matmul_forward(s, "fc+gelu", C, 4 * C, 1, 1);
    cases[n++] = case_gelu_forward(s);
    cases[n++] = case_matmul_forward(s, "fcproj", 4 * C, C, 1, 0);
    cases[n++] = case_matmul_forward(s, "lm_head", C, s->Vp, 0, 0);
    cases[n++] = case_classifier(s);
    cases[n++] = case_matmul_backward(s, "lm_head", C, s->Vp, 0);
    cases[n++] = case_matmul_backward(s, "fcproj", 4 * C, C, 1);
    cases[n++] = case_gelu_backward(s);
    cases[n++] = case_matmul_backward(s, "fc", C, 4 * C, 1);
    cases[n++] = case_layernorm_backward(s);
    cases[n++] = case_matmul_backward(s, "attproj", C, C, 1);
    cases[n++] = case_attention_row_dot(s);
    cases[n++] = case_attention_backward(s);
    cases[n++] = case_matmul_backward(s, "qkv", C, 3 * C, 1);
    cases[n++] = case_encoder_backward(s);
    cases[n++] = case_global_norm(s);
    cases[n++] = case_adamw(s);
    // Not in GPT's step: the SwiGLU passes of Llama's block (--mlp swiglu).
    cases[n++] = case_swiglu_forward(s);
    cases[n++] = case_swiglu_backward(s);
    return n;
}
