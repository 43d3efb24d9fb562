// Single-device attention: every token is local, so one partial-attention call is the whole
// layer (query and key positions both 0, 1, 2, ...).
#include <stdlib.h>
#include <string.h>

#include "attention/attention_layer.h"
#include "comm/fail.h"

typedef struct {
    AttentionLayer base;
    int max_B, max_T, max_NH, max_NKV;
    real* delta;   // (B, NH, T) rowsum(dout * out), scratch of backward
} LocalAttention;

static AttentionProblem local_problem(const AttentionLayer* self, int B, int T, int NH, int NKV,
                                      int HS, long window) {
    AttentionProblem p = attention_problem(B, NH, HS, T, T, token_positions(0, 1), token_positions(0, 1));
    p.NKV = NKV;
    p.window = window;
    p.docs = self->docs;
    return p;
}

static void local_forward(AttentionLayer* self, int layer, long window, int B, int T, int NH,
                          int NKV, int HS, const real* qkv, real* out, real_stat* lse) {
    const int C = NH * HS, KVC = NKV * HS, W = attention_qkv_width(NH, NKV, HS);
    AttentionProblem p = local_problem(self, B, T, NH, NKV, HS, window);
    attention_partial_forward(&p, qkv, W, qkv + C, W, qkv + C + KVC, W, out, C, lse);
}

static void local_backward(AttentionLayer* self, int layer, long window, int B, int T, int NH,
                           int NKV, int HS, const real* qkv, const real* out, const real_stat* lse,
                           const real* dout, real* dqkv) {
    LocalAttention* a = (LocalAttention*)self;
    CHECK(B <= a->max_B && T <= a->max_T && NH <= a->max_NH && NKV <= a->max_NKV, "caller bug",
          "attention called with B=%d T=%d NH=%d NKV=%d beyond its bounds %d %d %d %d",
          B, T, NH, NKV, a->max_B, a->max_T, a->max_NH, a->max_NKV);
    const int C = NH * HS, KVC = NKV * HS, W = attention_qkv_width(NH, NKV, HS);
    AttentionProblem p = local_problem(self, B, T, NH, NKV, HS, window);
    memset(dqkv, 0, sizeof(real) * B * T * W);
    attention_row_dot(&p, out, C, dout, C, a->delta);
    attention_partial_backward(&p, qkv, W, qkv + C, W, qkv + C + KVC, W, dout, C, lse, a->delta,
                               dqkv, W, dqkv + C, W, dqkv + C + KVC, W);
}

static void local_destroy(AttentionLayer* self) {
    LocalAttention* a = (LocalAttention*)self;
    free(a->delta);
    free(a);
}

AttentionLayer* attention_local_create(int B, int T, int NH, int NKV, int HS) {
    LocalAttention* a = xcalloc(1, sizeof *a, "local attention layer");
    a->base.forward = local_forward;
    a->base.backward = local_backward;
    a->base.destroy = local_destroy;
    a->base.positions = token_layout(token_positions(0, 1));
    a->base.name = "local";
    a->max_B = B;
    a->max_T = T;
    a->max_NH = NH;
    a->max_NKV = NKV;
    a->delta = xmalloc(sizeof(real) * B * NH * T, "attention backward delta");
    return &a->base;
}

void attention_layer_free(AttentionLayer* layer) {
    if (layer) layer->destroy(layer);
}
