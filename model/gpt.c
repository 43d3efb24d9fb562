// The layer sequence of the GPT model, written once; the attention schedule is pluggable.
#include "model/gpt.h"

#include <stdlib.h>
#include <string.h>

#include "comm/fail.h"
#include "model/backend.h"
#include "model/layers.h"
#include "model/documents.h"
#include "model/token_order.h"

void gpt_point_params(const GPTConfig* cfg, real* flat, ParameterTensors* t) {
    size_t s[NUM_PARAM_TENSORS];
    gpt_param_sizes(cfg, s);
    real** ptrs[NUM_PARAM_TENSORS] = {
        &t->wte, &t->wpe, &t->ln1w, &t->ln1b, &t->qkvw, &t->qkvb, &t->attprojw, &t->attprojb,
        &t->ln2w, &t->ln2b, &t->fcw, &t->fcb, &t->fcprojw, &t->fcprojb, &t->lnfw, &t->lnfb,
        &t->classifier, &t->qnormw, &t->qnormb, &t->knormw, &t->knormb};
    for (int i = 0; i < NUM_PARAM_TENSORS; i++) {
        *ptrs[i] = flat;
        flat += s[i];
    }
}

int gpt_param_group_ranges(const GPTConfig* cfg, int group, size_t offset[], size_t count[]) {
    size_t s[NUM_PARAM_TENSORS], start[NUM_PARAM_TENSORS], at = 0;
    gpt_param_sizes(cfg, s);
    for (int i = 0; i < NUM_PARAM_TENSORS; i++) {
        start[i] = at;
        at += s[i];
    }
    if (group == GPT_GRADS_EMBEDDINGS) {   // wte, wpe
        offset[0] = start[0];
        count[0] = s[0] + s[1];   // adjacent in the flat order
        return 1;
    }
    if (group == GPT_GRADS_LNF) {   // lnfw, lnfb, classifier: the last three
        offset[0] = start[14];
        count[0] = s[14] + s[15] + s[16];
        return 1;
    }
    CHECK(group >= 0 && group < cfg->L, "caller bug", "parameter group %d of a %d-layer model",
          group, cfg->L);
    // Tensors 2..13 and QK-norm's 17..20 hold all L layers each; layer `group` is one slice of
    // every one of them.
    int n = 0;
    for (int i = 2; i < NUM_PARAM_TENSORS; i++) {
        if (i >= 14 && i < 17) continue;   // lnfw, lnfb, classifier: GPT_GRADS_LNF
        count[n] = s[i] / cfg->L;
        offset[n] = start[i] + (size_t)group * count[n];
        n++;
    }
    return n;
}

// The classifier's (Vp, C) matrix in t (parameters or gradients): wte, or the untied one.
static real* classifier_of(const GPTConfig* c, const ParameterTensors* t) {
    return c->untied_classifier ? t->classifier : t->wte;
}

// Compute spans of the timeline (nothing when m->timeline is NULL).
static int mark(const GPT* m) { return timeline_mark(m->timeline, m->timeline_track); }

static void compute_span(const GPT* m, int begin, const char* name, int layer, const char* phase) {
    if (!m->timeline) return;
    TimelineLabel label = {name, NULL, NULL, 0, layer, phase};
    timeline_span(m->timeline, TL_COMPUTE, m->timeline_track, begin, mark(m), &label);
}

// Kernel launches so far, where the backend counts them (0 elsewhere): the layer loops' share
// goes to m->layer_launches.
static long long launches_now(void) {
    BackendCounters c;
    return gpt_backend_counters(&c) ? c.launches : 0;
}

static void grads_ready(GPT* m, int group) {
    if (m->grads_ready) m->grads_ready(m->grads_ready_ctx, group);
}

static void create_buffers(GPT* m, const GPTConfig* cfg, int B, int T,
                           AttentionLayer* attention, GptRecompute r, int layers) {
    char err[ERR_LEN];
    if (gpt_config_validate(cfg, err, sizeof err) != 0) fail_msg("%s", err);
    m->cfg = *cfg;
    m->B = B;
    m->T = T;
    m->max_T = T;
    m->attention = attention;
    gpt_param_sizes(cfg, m->param_sizes);
    m->num_params = gpt_num_params(cfg);
    m->recompute = r;
    m->recompute_layers = layers;
    size_t nreal, nstat;
    gpt_activation_layout(cfg, B, T, r, layers, NULL, NULL, &m->acts, &nreal, &nstat);
    m->acts_memory = tensor_alloc(nreal, "activations");
    m->stats_memory = stat_alloc(nstat, "activation statistics");
    gpt_activation_layout(cfg, B, T, r, layers, m->acts_memory, m->stats_memory, &m->acts, &nreal,
                          &nstat);
    m->inputs = tokens_alloc((size_t)B * T, "input tokens");
    m->targets = tokens_alloc((size_t)B * T, "target tokens");
    m->scalars = scalars_alloc(GPT_NUM_SCALARS, "step scalars (loss, gradient norm)");
}

void gpt_create(GPT* m, const GPTConfig* cfg, int B, int T, AttentionLayer* attention,
                int pad_multiple) {
    gpt_create_recompute(m, cfg, B, T, attention, pad_multiple, GPT_RECOMPUTE_NONE, 0);
}

void gpt_create_recompute(GPT* m, const GPTConfig* cfg, int B, int T, AttentionLayer* attention,
                          int pad_multiple, GptRecompute r, int layers) {
    memset(m, 0, sizeof *m);
    create_buffers(m, cfg, B, T, attention, r, layers);
    const size_t pad = pad_multiple > 1 ? (size_t)pad_multiple : 1;
    m->padded_params = (m->num_params + pad - 1) / pad * pad;
    m->owns_params = 1;
    m->params_memory = tensor_alloc(m->padded_params, "parameters");
    m->grads_memory = tensor_alloc(m->padded_params, "gradients");
    gpt_point_params(cfg, m->params_memory, &m->params);
    gpt_point_params(cfg, m->grads_memory, &m->grads);
    const size_t BTC = (size_t)B * T * cfg->C;
    m->dresidual = tensor_alloc(BTC, "residual gradient");
    m->dbuf_c = tensor_alloc(BTC, "backward scratch");
    const size_t wide = (size_t)B * T * gpt_widest_row(cfg);
    m->dbuf_wide_a = tensor_alloc(wide, "backward scratch");
    m->dbuf_wide_b = tensor_alloc(wide, "backward scratch");
    m->input_order = tokens_alloc((size_t)B * T, "input rows by token");
    m->host_tokens = (int*)xmalloc(3 * (size_t)B * T * sizeof(int), "host copy of the input tokens");
    layers_reserve(cfg, B, T);   // the first step then allocates nothing
}

void gpt_create_shared(GPT* m, const GPT* owner, int B, int T, AttentionLayer* attention) {
    memset(m, 0, sizeof *m);
    create_buffers(m, &owner->cfg, B, T, attention, GPT_FORWARD_ONLY, 0);   // never backward
    m->padded_params = owner->padded_params;
    m->params_memory = owner->params_memory;
    m->params = owner->params;
}

void gpt_free(GPT* m) {
    if (m->owns_params) {
        tensor_free(m->params_memory);
        tensor_free(m->grads_memory);
        tensor_free(m->master_params);   // NULL unless the backend keeps master weights
        tensor_free(m->param_staging);   // likewise
    }
    tensor_free(m->acts_memory);
    tensor_free(m->stats_memory);
    tensor_free(m->inputs);
    tensor_free(m->targets);
    tensor_free(m->input_order);
    free(m->host_tokens);
    tensor_free(m->doc_bounds);
    free(m->doc_host);
    tensor_free(m->doc_positions);
    free(m->doc_positions_host);
    tensor_free(m->scalars);
    tensor_free(m->dresidual);
    tensor_free(m->dbuf_c);
    tensor_free(m->dbuf_wide_a);
    tensor_free(m->dbuf_wide_b);
    memset(m, 0, sizeof *m);
}

void gpt_zero_grad(GPT* m) { tensor_zero(m->grads_memory, m->padded_params); }

// Per-layer views of the parameters, gradients and activations.
typedef struct {
    real *ln1w, *ln1b, *qkvw, *qkvb, *attprojw, *attprojb, *ln2w, *ln2b, *fcw, *fcb, *fcprojw,
        *fcprojb, *qnormw, *qnormb, *knormw, *knormb;
} LayerParams;

static LayerParams layer_params(const ParameterTensors* p, const GPTConfig* c, int l) {
    const size_t lc = (size_t)l * c->C, W = gpt_qkv_width(c), FC = gpt_fc_width(c);
    const size_t F = gpt_ffn_hidden(c), NB = gpt_norm_bias(c);
    const size_t QW = gpt_qk_norm_weight(c), QB = gpt_qk_norm_bias(c);
    LayerParams w = {p->ln1w + lc, p->ln1b + l * NB, p->qkvw + lc * W, p->qkvb + l * W,
                     p->attprojw + lc * c->C, p->attprojb + lc, p->ln2w + lc, p->ln2b + l * NB,
                     p->fcw + lc * FC, p->fcb + l * FC, p->fcprojw + lc * F, p->fcprojb + lc,
                     p->qnormw + l * QW, p->qnormb + l * QB, p->knormw + l * QW,
                     p->knormb + l * QB};
    if (!QB) w.qnormb = w.knormb = NULL;   // RMSNorm (or no QK-norm): no bias
    if (!gpt_linear_bias(c))   // no bias tensors: the matmuls add none and write no gradient
        w.attprojb = w.fcb = w.fcprojb = NULL;
    if (!gpt_qkv_bias(c)) w.qkvb = NULL;
    return w;
}

// The block's normalisations, LayerNorm or RMSNorm (no mean, no bias: cfg->norm), over BT rows.
static void norm_forward(const GPT* m, real* out, real_stat* mean, real_stat* rstd,
                         const real* inp, const real* weight, const real* bias) {
    const int BT = m->B * m->T, C = m->cfg.C;
    const double eps = gpt_norm_eps(&m->cfg);
    if (m->cfg.norm == GPT_NORM_RMSNORM) rmsnorm_forward(out, rstd, inp, weight, BT, C, eps);
    else layernorm_forward(out, mean, rstd, inp, weight, bias, BT, C, eps);
}

static void fused_residual_norm_forward(const GPT* m, real* residual_out, real* out,
                                        real_stat* mean, real_stat* rstd, const real* a,
                                        const real* b, const real* weight, const real* bias) {
    const int BT = m->B * m->T, C = m->cfg.C;
    const double eps = gpt_norm_eps(&m->cfg);
    if (m->cfg.norm == GPT_NORM_RMSNORM)
        fused_residual_rmsnorm_forward(residual_out, out, rstd, a, b, weight, BT, C, eps);
    else
        fused_residual_layernorm_forward(residual_out, out, mean, rstd, a, b, weight, bias, BT, C,
                                         eps);
}

static void norm_backward(const GPT* m, real* dinp, real* dweight, real* dbias, const real* dout,
                          const real* inp, const real* weight, const real_stat* mean,
                          const real_stat* rstd, GradMode mode) {
    const int BT = m->B * m->T, C = m->cfg.C;
    if (m->cfg.norm == GPT_NORM_RMSNORM)
        rmsnorm_backward(dinp, dweight, dout, inp, weight, rstd, BT, C, mode);
    else
        layernorm_backward(dinp, dweight, dbias, dout, inp, weight, mean, rstd, BT, C, mode);
}

// The MLP's first layer and its activation: fch (BT, gpt_fc_width) = ln2 @ fcw^T + fcb, then
// fch_gelu (BT, F) = gelu(fch) (one GEMM with the GELU in its epilogue on CUDA) or
// silu(gate) * up under SwiGLU.
static void mlp_up_forward(const GPT* m, LayerParams w, LayerActs x) {
    const int BT = m->B * m->T, C = m->cfg.C, F = gpt_ffn_hidden(&m->cfg);
    if (m->cfg.mlp == GPT_MLP_SWIGLU) {
        matmul_forward(x.fch, x.ln2, w.fcw, w.fcb, BT, C, 2 * F);
        swiglu_forward(x.fch_gelu, x.fch, BT, F);
    } else {
        matmul_forward_gelu(x.fch_gelu, x.fch, x.ln2, w.fcw, w.fcb, BT, C, F);
    }
}

// The local rows' positions within their documents (the bounds just computed), and the rows
// sorted by them, uploaded for the encoder's forward and fixed-order backward.
static void set_document_positions(GPT* m, int T_full) {
    const int B = m->B, T = m->T;
    const size_t n = (size_t)B * T;
    if (!m->doc_positions) {   // once per run: B x max_T rows
        m->doc_positions = tokens_alloc(2 * (size_t)B * m->max_T, "positions within documents");
        m->doc_positions_host = (int*)xmalloc(3 * (size_t)B * m->max_T * sizeof(int),
                                              "positions within documents (host)");
    }
    int* pos = m->doc_positions_host;
    for (int b = 0; b < B; b++)
        for (int t = 0; t < T; t++) {
            const long p = token_layout_position(m->attention->positions, t);
            pos[(size_t)b * T + t] = (int)(p - m->doc_host[(size_t)b * T_full + p]);
        }
    token_order(pos + n, pos + 2 * n, pos, n);
    tokens_upload(m->doc_positions, pos, n);
    tokens_upload(m->doc_positions + n, pos + n, n);
    m->reset_positions = 1;
}

void gpt_set_documents(GPT* m, const int* full_tokens, int T_full, int boundary, int reset_positions) {
    m->reset_positions = 0;
    if (!full_tokens) {
        memset(&m->attention->docs, 0, sizeof m->attention->docs);
        return;
    }
    const size_t n = (size_t)m->B * T_full;
    if (m->doc_T != T_full) {   // once per run: the model's B sequences of T_full tokens
        tensor_free(m->doc_bounds);
        free(m->doc_host);
        m->doc_bounds = tokens_alloc(2 * n, "document bounds");
        m->doc_host = (int*)xmalloc(2 * n * sizeof(int), "document bounds (host)");
        m->doc_T = T_full;
    }
    document_bounds(full_tokens, m->B, T_full, boundary, m->doc_host, m->doc_host + n);
    tokens_upload(m->doc_bounds, m->doc_host, 2 * n);
    m->attention->docs.start = m->doc_bounds;
    m->attention->docs.end = m->doc_bounds + n;
    m->attention->docs.T = T_full;
    m->attention->docs.span = document_span(m->doc_host, m->B, T_full);
    if (reset_positions) set_document_positions(m, T_full);
}

// The encoder's per-row positions: a decoding layer's, or those within documents, or NULL (the
// token layout's).
static const int* encoder_row_positions(const GPT* m) {
    if (m->attention->row_positions) return m->attention->row_positions;
    return m->reset_positions ? m->doc_positions : NULL;
}

// Rotary embeddings on a layer's qkv (direction 1) or the transpose on its dqkv (-1), at the
// encoder's positions.
static void rope(const GPT* m, real* qkv, int direction) {
    const GPTConfig* c = &m->cfg;
    void (*apply)(real*, int, int, int, int, int, TokenLayout, const int*, RopeSpec) =
        direction > 0 ? rope_forward : rope_backward;
    apply(qkv, m->B, m->T, c->NH, gpt_kv_heads(c), c->C / c->NH, m->attention->positions,
          encoder_row_positions(m), gpt_rope(c));
}

// QK-norm on a layer's qkv (in place), the raw heads and their statistics into x; its backward on
// the layer's dqkv (in place), the parameter gradients into dw per mode.
static void qk_norm(const GPT* m, LayerParams w, LayerActs x) {
    const GPTConfig* c = &m->cfg;
    const int rms = c->norm == GPT_NORM_RMSNORM;
    qk_norm_forward(x.qkv, x.qk_raw, rms ? NULL : x.qk_mean, x.qk_rstd, w.qnormw, w.qnormb,
                    w.knormw, w.knormb, m->B * m->T, c->NH, gpt_kv_heads(c), c->C / c->NH,
                    gpt_norm_eps(c));
}

static void qk_norm_grad(const GPT* m, real* dqkv, LayerParams w, LayerParams dw, LayerActs x,
                         GradMode mode) {
    const GPTConfig* c = &m->cfg;
    const int rms = c->norm == GPT_NORM_RMSNORM;
    qk_norm_backward(dqkv, dw.qnormw, dw.qnormb, dw.knormw, dw.knormb, x.qk_raw, w.qnormw,
                     w.knormw, rms ? NULL : x.qk_mean, x.qk_rstd, m->B * m->T, c->NH,
                     gpt_kv_heads(c), c->C / c->NH, mode);
}

void gpt_load_batch(GPT* m, const int* inputs, const int* targets) {
    const size_t BT = (size_t)m->B * m->T;
    CHECK(m->T >= 1 && m->T <= m->max_T, "caller bug", "forward on %d tokens, buffers hold %d",
          m->T, m->max_T);
    tokens_upload(m->inputs, inputs, BT);
    if (targets) tokens_upload(m->targets, targets, BT);
    m->has_targets = targets != NULL;
    if (m->host_tokens && targets) {
        // For a backward: the rows by token, for the encoder's fixed-order sums
        // (model/token_order.h), sorted here on the host while the device still runs the work
        // issued before, and uploaded now so that the forward and backward are device work only.
        memcpy(m->host_tokens, inputs, BT * sizeof(int));
        int* order = m->host_tokens + BT;
        token_order(order, order + BT, m->host_tokens, BT);
        tokens_upload(m->input_order, order, BT);
    }
}

// Layer l's activations for the pass of m->B x m->T tokens, as the recompute mode lays them out.
static LayerActs layer_acts(const GPT* m, int l) {
    return gpt_layer_acts(&m->acts, &m->cfg, m->B, m->T, m->recompute, m->recompute_layers, l);
}

void gpt_forward(GPT* m, const int* inputs, const int* targets) {
    gpt_load_batch(m, inputs, targets);
    gpt_forward_loaded(m);
}

void gpt_forward_loaded(GPT* m) {
    const GPTConfig* c = &m->cfg;
    const int B = m->B, T = m->T, C = c->C, NH = c->NH, HS = C / NH, NKV = gpt_kv_heads(c);
    const int W = gpt_qkv_width(c), F = gpt_ffn_hidden(c);
    const int BT = B * T;
    ActivationTensors* a = &m->acts;
    const ParameterTensors* p = &m->params;

    int begin = mark(m);
    encoder_forward(a->encoded, m->inputs, p->wte, c->rope_theta ? NULL : p->wpe, B, T, C,
                    m->attention->positions, encoder_row_positions(m));
    compute_span(m, begin, "embedding forward", -1, "forward");
    const long long layers_from = launches_now();
    const real* residual = a->encoded;
    for (int l = 0; l < c->L; l++) {
        begin = mark(m);
        LayerParams w = layer_params(p, c, l);
        LayerActs x = layer_acts(m, l);
        // Only layer 0's ln1 stands alone: every other LayerNorm (ln2, the next layer's ln1, lnf)
        // is fused with the residual add before it, which still stores the residual stream.
        if (l == 0) norm_forward(m, x.ln1, x.ln1_mean, x.ln1_rstd, residual, w.ln1w, w.ln1b);
        matmul_forward(x.qkv, x.ln1, w.qkvw, w.qkvb, BT, C, W);
        if (c->qk_norm) qk_norm(m, w, x);
        if (c->rope_theta) rope(m, x.qkv, 1);
        m->attention->forward(m->attention, l, gpt_layer_window(c, l), B, T, NH, NKV, HS, x.qkv, x.atty,
                              x.att_lse);
        // The output projection lands in residual2, then the residual is added in place.
        matmul_forward(x.residual2, x.atty, w.attprojw, w.attprojb, BT, C, C);
        fused_residual_norm_forward(m, x.residual2, x.ln2, x.ln2_mean, x.ln2_rstd, x.residual2,
                                    residual, w.ln2w, w.ln2b);
        mlp_up_forward(m, w, x);
        matmul_forward(x.residual3, x.fch_gelu, w.fcprojw, w.fcprojb, BT, F, C);
        // residual3 += residual2, normalised by the next layer's ln1, or by lnf after the last.
        if (l + 1 < c->L) {
            LayerParams wn = layer_params(p, c, l + 1);
            LayerActs xn = layer_acts(m, l + 1);
            fused_residual_norm_forward(m, x.residual3, xn.ln1, xn.ln1_mean, xn.ln1_rstd,
                                        x.residual3, x.residual2, wn.ln1w, wn.ln1b);
        } else {
            fused_residual_norm_forward(m, x.residual3, a->lnf, a->lnf_mean, a->lnf_rstd,
                                        x.residual3, x.residual2, p->lnfw, p->lnfb);
        }
        residual = x.residual3;
        compute_span(m, begin, NULL, l, "forward");
    }
    m->layer_launches += launches_now() - layers_from;
    begin = mark(m);
    if (c->L == 0)  // else the last layer's fused residual add computed lnf
        norm_forward(m, a->lnf, a->lnf_mean, a->lnf_rstd, residual, p->lnfw, p->lnfb);
    matmul_forward(a->logits, a->lnf, classifier_of(c, p), NULL, BT, C, c->Vp);
    compute_span(m, begin, "head forward", -1, "forward");
}

void gpt_loss(GPT* m) {
    CHECK(m->has_targets, "caller bug", "gpt_loss after a forward without targets");
    const int begin = mark(m);
    crossentropy_forward(m->acts.losses, m->acts.logits, m->targets, m->B * m->T, m->cfg.V,
                         m->cfg.Vp, m->scalars + GPT_LOSS_SUM);
    compute_span(m, begin, "loss", -1, "forward");
}

void gpt_loss_zero(GPT* m) { scalars_zero(m->scalars + GPT_Z_LOSS_SUM, 2); }

double gpt_loss_read(const GPT* m) {
    double loss = 0;
    scalars_to_host(&loss, m->scalars + GPT_LOSS_SUM, 1);
    return loss;
}

// Refills the activations of one layer that the recompute mode did not keep (its scratch), from
// the layer's input `residual` and what was kept, with the forward's own kernels on the same
// inputs: the same values, bitwise on the CPU. The attention output and LSE are always kept, so
// no schedule communicates again.
static void recompute_layer(const GPT* m, LayerParams w, LayerActs x, const real* residual) {
    const int BT = m->B * m->T, C = m->cfg.C;
    norm_forward(m, x.ln1, x.ln1_mean, x.ln1_rstd, residual, w.ln1w, w.ln1b);
    matmul_forward(x.qkv, x.ln1, w.qkvw, w.qkvb, BT, C, gpt_qkv_width(&m->cfg));
    if (m->cfg.qk_norm) qk_norm(m, w, x);
    if (m->cfg.rope_theta) rope(m, x.qkv, 1);
    if (m->recompute == GPT_RECOMPUTE_FULL) {   // residual2 too: the output projection, the add
        matmul_forward(x.residual2, x.atty, w.attprojw, w.attprojb, BT, C, C);
        fused_residual_norm_forward(m, x.residual2, x.ln2, x.ln2_mean, x.ln2_rstd, x.residual2,
                                    residual, w.ln2w, w.ln2b);
    } else {
        norm_forward(m, x.ln2, x.ln2_mean, x.ln2_rstd, x.residual2, w.ln2w, w.ln2b);
    }
    mlp_up_forward(m, w, x);
}

void gpt_backward(GPT* m, double dloss) {
    const GPTConfig* c = &m->cfg;
    const int B = m->B, T = m->T, C = c->C, NH = c->NH, HS = C / NH, L = c->L;
    const int NKV = gpt_kv_heads(c), W = gpt_qkv_width(c), F = gpt_ffn_hidden(c);
    const int BT = B * T;
    const size_t btc = (size_t)BT * C;
    ActivationTensors* a = &m->acts;
    const ParameterTensors* p = &m->params;
    ParameterTensors* g = &m->grads;
    real* dres = m->dresidual;
    CHECK(!m->attention->row_positions, "caller bug",
          "backward through per-row positions (%s: a forward-only layer)", m->attention->name);
    CHECK(m->owns_params, "caller bug", "backward on a forward-only (shared) model");
    CHECK(m->has_targets, "caller bug", "gpt_backward after a forward without targets");

    // Every parameter gradient is written by the first backward below that reaches it (GRAD_WRITE:
    // no zeroing pass) or added to (GRAD_ACCUMULATE). A tied wte gets two: the classifier's (the
    // mode) and the encoder's, always added; an untied one only the encoder's, so it is zeroed
    // first under GRAD_WRITE. The encoder writes all of wpe.
    const GradMode mode = m->grads_write ? GRAD_WRITE : GRAD_ACCUMULATE;

    int begin = mark(m);
    // The classifier's only pass: losses (summed into the step's scalar) and dlogits; under the
    // z-loss its per-token values too, and the gradient includes it.
    const ZLoss z = {(real_stat)m->z_loss, a->z_losses, m->scalars + GPT_Z_LOSS_SUM};
    crossentropy_forward_backward(a->logits, a->losses, m->targets, (real_stat)dloss, BT, c->V,
                                  c->Vp, m->scalars + GPT_LOSS_SUM, z);
    matmul_backward_overwrite(m->dbuf_c, classifier_of(c, g), NULL, a->logits, a->lnf,
                              classifier_of(c, p), BT, C, c->Vp, mode);
    const real* last = L > 0 ? layer_acts(m, L - 1).residual3 : a->encoded;
    tensor_zero(dres, btc);
    norm_backward(m, dres, g->lnfw, g->lnfb, m->dbuf_c, last, p->lnfw, a->lnf_mean, a->lnf_rstd,
                  mode);
    compute_span(m, begin, "head backward", -1, "backward");
    grads_ready(m, GPT_GRADS_LNF);
    const long long layers_from = launches_now();

    for (int l = L - 1; l >= 0; l--) {
        begin = mark(m);
        LayerParams w = layer_params(p, c, l), dw = layer_params(g, c, l);
        LayerActs x = layer_acts(m, l);
        const real* residual =
            l > 0 ? layer_acts(m, l - 1).residual3 : a->encoded;
        if (l < gpt_recompute_count(m->recompute, m->recompute_layers, L))
            recompute_layer(m, w, x, residual);
        // MLP branch: dres is the gradient of residual3 and (through the skip) of residual2. The
        // input gradients are written, not accumulated (no zeroing passes); the GELU backward
        // rides on fcproj's dinp GEMM (dfch = (dres @ fcprojw) * gelu'(fch)); SwiGLU's follows
        // it (dfch, 2F wide, from the gradient of silu(gate) * up).
        real* dfch = m->dbuf_wide_b;
        if (c->mlp == GPT_MLP_SWIGLU) {
            real* dact = m->dbuf_wide_a;   // (B, T, F)
            matmul_backward_overwrite(dact, dw.fcprojw, dw.fcprojb, dres, x.fch_gelu, w.fcprojw,
                                      BT, F, C, mode);
            swiglu_backward(dfch, x.fch, dact, BT, F);
        } else {
            matmul_backward_gelu(dfch, dw.fcprojw, dw.fcprojb, dres, x.fch_gelu, x.fch, w.fcprojw,
                                 BT, F, C, mode);
        }
        matmul_backward_overwrite(m->dbuf_c, dw.fcw, dw.fcb, dfch, x.ln2, w.fcw, BT, C,
                                  gpt_fc_width(c), mode);
        norm_backward(m, dres, dw.ln2w, dw.ln2b, m->dbuf_c, x.residual2, w.ln2w, x.ln2_mean,
                      x.ln2_rstd, mode);
        // Attention branch: dres is now the gradient of residual2 and of the block input.
        real* datty = m->dbuf_c;
        matmul_backward_overwrite(datty, dw.attprojw, dw.attprojb, dres, x.atty, w.attprojw, BT, C, C,
                                  mode);
        real* dqkv = m->dbuf_wide_a;   // (B, T, W), overwritten by the attention layer
        m->attention->backward(m->attention, l, gpt_layer_window(c, l), B, T, NH, NKV, HS, x.qkv, x.atty,
                               x.att_lse, datty, dqkv);
        if (c->rope_theta) rope(m, dqkv, -1);
        if (c->qk_norm) qk_norm_grad(m, dqkv, w, dw, x, mode);
        real* dln1 = m->dbuf_c;
        matmul_backward_overwrite(dln1, dw.qkvw, dw.qkvb, dqkv, x.ln1, w.qkvw, BT, C, W, mode);
        norm_backward(m, dres, dw.ln1w, dw.ln1b, dln1, residual, w.ln1w, x.ln1_mean, x.ln1_rstd,
                      mode);
        compute_span(m, begin, NULL, l, "backward");
        grads_ready(m, l);
    }
    m->layer_launches += launches_now() - layers_from;
    begin = mark(m);
    const int* row_pos = encoder_row_positions(m);
    if (c->untied_classifier && mode == GRAD_WRITE) tensor_zero(g->wte, (size_t)c->Vp * C);
    encoder_backward(g->wte, c->rope_theta ? NULL : g->wpe, dres, m->inputs, m->input_order, B, T,
                     C, m->attention->positions, row_pos, row_pos ? m->doc_positions + BT : NULL,
                     c->max_T, mode);
    compute_span(m, begin, "embedding backward", -1, "backward");
    grads_ready(m, GPT_GRADS_EMBEDDINGS);
}
