// The activation layout under each recompute mode (model/activations.h).
#include "model/activations.h"

#include <string.h>

static const char* const recompute_names[] = {"none", "selective", "full", "forward-only"};

const char* gpt_recompute_name(GptRecompute r) {
    return r >= GPT_RECOMPUTE_NONE && r <= GPT_FORWARD_ONLY ? recompute_names[r] : "?";
}

int gpt_recompute_parse(const char* name, GptRecompute* out) {
    for (int i = 0; i <= GPT_RECOMPUTE_FULL; i++)
        if (strcmp(name, recompute_names[i]) == 0) {
            *out = (GptRecompute)i;
            return 0;
        }
    return -1;
}

int gpt_recompute_count(GptRecompute r, int layers, int L) {
    if (r != GPT_RECOMPUTE_SELECTIVE && r != GPT_RECOMPUTE_FULL) return 0;
    return layers > 0 && layers < L ? layers : L;
}

// The per-layer tensors, and under which modes every layer keeps its own copy (else the layers
// the mode covers share one layer's scratch, which backward refills, and the others keep their
// own). GPT_FORWARD_ONLY keeps none: every layer in the scratch.
enum { KEPT_NONE = 1, KEPT_SELECTIVE = 2, KEPT_FULL = 4 };
static int kept(int modes, GptRecompute r) { return (modes >> r) & 1; }

// Token widths (C; the qkv projection's, gpt_qkv_width; the MLP's first layer's, gpt_fc_width;
// its hidden width, gpt_ffn_hidden: 4C and 4C in GPT; QK-norm's query and key heads, (NH + NKV)
// HS, 0 without it) and the modes that keep each per-layer tensor of real type.
#define KEEP_ALL (KEPT_NONE | KEPT_SELECTIVE | KEPT_FULL)
enum { WIDTH_C, WIDTH_QKV, WIDTH_FC, WIDTH_FFN, WIDTH_QK };
typedef struct { size_t offset_of; int width; int modes; } LayerField;
static const LayerField real_fields[] = {
    {offsetof(LayerActs, ln1), WIDTH_C, KEPT_NONE},
    {offsetof(LayerActs, qkv), WIDTH_QKV, KEPT_NONE},
    {offsetof(LayerActs, atty), WIDTH_C, KEEP_ALL},
    {offsetof(LayerActs, residual2), WIDTH_C, KEPT_NONE | KEPT_SELECTIVE},
    {offsetof(LayerActs, ln2), WIDTH_C, KEPT_NONE},
    {offsetof(LayerActs, fch), WIDTH_FC, KEPT_NONE},
    {offsetof(LayerActs, fch_gelu), WIDTH_FFN, KEPT_NONE},
    {offsetof(LayerActs, residual3), WIDTH_C, KEEP_ALL},
    {offsetof(LayerActs, qk_raw), WIDTH_QK, KEPT_NONE},
};
// Statistics: per token, per token and head (NH), or per token and query or key head (QK-norm's:
// NH + NKV, 0 without it).
enum { STAT_TOKEN, STAT_HEAD, STAT_QK_HEAD };
static const LayerField stat_fields[] = {
    {offsetof(LayerActs, ln1_mean), STAT_TOKEN, KEPT_NONE},
    {offsetof(LayerActs, ln1_rstd), STAT_TOKEN, KEPT_NONE},
    {offsetof(LayerActs, att_lse), STAT_HEAD, KEEP_ALL},
    {offsetof(LayerActs, ln2_mean), STAT_TOKEN, KEPT_NONE},
    {offsetof(LayerActs, ln2_rstd), STAT_TOKEN, KEPT_NONE},
    {offsetof(LayerActs, qk_mean), STAT_QK_HEAD, KEPT_NONE},
    {offsetof(LayerActs, qk_rstd), STAT_QK_HEAD, KEPT_NONE},
};
enum { NREAL_FIELDS = sizeof real_fields / sizeof real_fields[0],
       NSTAT_FIELDS = sizeof stat_fields / sizeof stat_fields[0] };

// Query and key heads per token under QK-norm (NH + NKV), 0 without it.
static size_t qk_heads(const GPTConfig* c) {
    return c->qk_norm ? (size_t)(c->NH + gpt_kv_heads(c)) : 0;
}
static size_t real_width(const GPTConfig* c, int i) {
    switch (real_fields[i].width) {
    case WIDTH_QKV: return (size_t)gpt_qkv_width(c);
    case WIDTH_FC: return (size_t)gpt_fc_width(c);
    case WIDTH_FFN: return (size_t)gpt_ffn_hidden(c);
    case WIDTH_QK: return qk_heads(c) * (size_t)(c->C / c->NH);
    default: return (size_t)c->C;
    }
}
static size_t stat_width(const GPTConfig* c, int i) {
    switch (stat_fields[i].width) {
    case STAT_HEAD: return (size_t)c->NH;
    case STAT_QK_HEAD: return qk_heads(c);
    default: return 1;
    }
}
// Layers whose tensors a mode does not keep share slot 0 when they are among the first n it covers
// (n: all L under GPT_FORWARD_ONLY); the others follow, one slot each.
static size_t covered(GptRecompute r, int layers, int L) {
    return r == GPT_FORWARD_ONLY ? (size_t)L : (size_t)gpt_recompute_count(r, layers, L);
}
static size_t slots(int modes, GptRecompute r, int layers, int L) {
    return kept(modes, r) ? (size_t)L : 1 + (size_t)L - covered(r, layers, L);
}
static size_t slot_of(int modes, GptRecompute r, int layers, int L, int l) {
    const size_t n = covered(r, layers, L);
    if (kept(modes, r)) return (size_t)l;
    return (size_t)l < n ? 0 : 1 + (size_t)l - n;
}
static real** real_slot(LayerActs* x, int i) { return (real**)((char*)x + real_fields[i].offset_of); }
static real_stat** stat_slot(LayerActs* x, int i) {
    return (real_stat**)((char*)x + stat_fields[i].offset_of);
}

void gpt_activation_layout(const GPTConfig* c, int B, int T, GptRecompute r, int layers,
                           real* base, real_stat* sbase, ActivationTensors* a, size_t* nreal,
                           size_t* nstat) {
    const size_t C = c->C, BT = (size_t)B * T;
    size_t total = 0, stotal = 0;
    LayerActs* x = &a->layers;
    // In the order of the forward: the embeddings, the per-layer tensors (L layers or one), the
    // final LayerNorm and the logits; then the statistics the same way.
    if (base) a->encoded = base;
    total += BT * C;
    for (int i = 0; i < NREAL_FIELDS; i++) {
        if (base) *real_slot(x, i) = base + total;
        total += slots(real_fields[i].modes, r, layers, c->L) * BT * real_width(c, i);
    }
    if (base) a->lnf = base + total, a->logits = base + total + BT * C;
    total += BT * C + BT * (size_t)c->Vp;
    for (int i = 0; i < NSTAT_FIELDS; i++) {
        if (sbase) *stat_slot(x, i) = sbase + stotal;
        stotal += slots(stat_fields[i].modes, r, layers, c->L) * BT * stat_width(c, i);
    }
    if (sbase) a->lnf_mean = sbase + stotal, a->lnf_rstd = sbase + stotal + BT,
               a->losses = sbase + stotal + 2 * BT, a->z_losses = sbase + stotal + 3 * BT;
    stotal += 4 * BT;
    *nreal = total;
    *nstat = stotal;
}

LayerActs gpt_layer_acts(const ActivationTensors* a, const GPTConfig* c, int B, int T,
                         GptRecompute r, int layers, int l) {
    const size_t BT = (size_t)B * T;
    LayerActs x = a->layers;
    for (int i = 0; i < NREAL_FIELDS; i++)
        *real_slot(&x, i) += slot_of(real_fields[i].modes, r, layers, c->L, l) * BT * real_width(c, i);
    for (int i = 0; i < NSTAT_FIELDS; i++)
        *stat_slot(&x, i) += slot_of(stat_fields[i].modes, r, layers, c->L, l) * BT * stat_width(c, i);
    return x;
}
