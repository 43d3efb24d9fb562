#include "inference/generator.h"

#include <stdlib.h>
#include <string.h>

#include "attention/dist_attention.h"
#include "attention/dist_cost.h"
#include "comm/fail.h"
#include "model/backend.h"

// The layout of the prefill's positions over the SP ranks (one rank: all of them, in order).
static RingLayout prefill_layout(const Generator* g) {
    if (g->P == 1) return RING_CYCLIC;
    return g->prefill == PREFILL_RING ? RING_CONTIGUOUS
         : g->prefill == PREFILL_ZIGZAG ? RING_ZIGZAG : RING_CYCLIC;
}

void generator_create(Generator* g, const GPTConfig* cfg, const float* params, int B, Comm* comm,
                      PrefillSchedule prefill, int a2a_chunks, DecodeAlgorithm decode) {
    memset(g, 0, sizeof *g);
    g->cfg = *cfg;
    g->comm = comm;
    g->a2a_chunks = a2a_chunks;
    g->P = comm ? comm_size(comm, MESH_SP) : 1;
    g->rank = comm ? comm_rank(comm, MESH_SP) : 0;
    g->prefill = prefill;
    const int usp = g->P > 1 && prefill == PREFILL_USP;
    if (usp) g->rank = attention_usp_place(&comm->mesh);
    kv_cache_create(&g->cache, cfg->L, B, cfg->max_T, cfg->NH, gpt_kv_heads(cfg), cfg->C / cfg->NH,
                    g->P, g->rank, prefill_layout(g), usp ? comm->mesh.pq : 0);
    g->decode = kv_decode_create(&g->cache, comm, decode);
    gpt_create(&g->model, cfg, B, 1, &g->decode->base, 1);
    gpt_params_from_host(&g->model, params);
    g->logits = (float*)xmalloc(sizeof(float) * B * cfg->V, "logits");
}

void generator_free(Generator* g) {
    if (g->full_attention) {
        gpt_free(&g->full);
        attention_layer_free(g->full_attention);
    }
    gpt_free(&g->model);
    attention_layer_free(&g->decode->base);
    kv_cache_free(&g->cache);
    free(g->logits);
    memset(g, 0, sizeof *g);
}

static AttentionLayer* prefill_schedule(const Generator* g, int B, int Tl) {
    const int NH = g->cfg.NH, NKV = gpt_kv_heads(&g->cfg), HS = g->cfg.C / g->cfg.NH;
    if (g->P == 1) return attention_local_create(B, Tl, NH, NKV, HS);
    switch (g->prefill) {
    case PREFILL_2D: return attention2d_create(g->comm, B, Tl, NH, NKV, HS, 0);
    case PREFILL_2D_OVERLAP: return attention2d_overlap_create(g->comm, B, Tl, NH, NKV, HS);
    case PREFILL_STRIPED: return attention_ring_create(g->comm, RING_CYCLIC, B, Tl, NH, NKV, HS);
    case PREFILL_RING: return attention_ring_create(g->comm, RING_CONTIGUOUS, B, Tl, NH, NKV, HS);
    case PREFILL_ZIGZAG: return attention_ring_create(g->comm, RING_ZIGZAG, B, Tl, NH, NKV, HS);
    case PREFILL_ULYSSES:
        return attention_ulysses_create(g->comm, B, Tl, NH, NKV, HS, g->a2a_chunks);
    case PREFILL_USP: return attention_usp_create(g->comm, B, Tl, NH, NKV, HS, g->a2a_chunks);
    }
    fail_msg("unknown prefill schedule %d", (int)g->prefill);
}

void generator_prefill(Generator* g, const int* const* tokens, const int* len) {
    const int B = g->cache.B, P = g->P;
    int longest = 0;
    for (int b = 0; b < B; b++) {
        CHECK(len[b] >= 0 && len[b] < g->cfg.max_T, "caller bug",
              "prefill of %d tokens with a context of %d", len[b], g->cfg.max_T);
        longest = len[b] > longest ? len[b] : longest;
    }
    memset(g->cache.len, 0, sizeof(int) * B);
    memset(g->cache.prefill_len, 0, sizeof(int) * B);
    g->cache.prefill_Tl = 0;
    if (longest == 0) return;
    // This rank's tokens in the layout (Tl local tokens of a sequence padded with token 0 to P*Tl,
    // 2P | P*Tl for Zigzag's chunks): causal attention keeps padding out of the real tokens' results.
    const RingLayout layout = prefill_layout(g);
    const int Tl = layout == RING_ZIGZAG ? 2 * ((longest + 2 * P - 1) / (2 * P))
                                         : (longest + P - 1) / P;
    const TokenLayout mine = ring_rank_layout(layout, P, g->rank, Tl);
    int* local = (int*)xcalloc((size_t)B * Tl, sizeof(int), "prefill tokens");
    for (int b = 0; b < B; b++)
        for (int j = 0; j < Tl; j++) {
            const long t = token_layout_position(mine, j);
            if (t < len[b]) local[(size_t)b * Tl + j] = tokens[b][t];
        }
    AttentionLayer* schedule = prefill_schedule(g, B, Tl);
    AttentionLayer* layer = kv_prefill_create(&g->cache, schedule, Tl, len, g->cfg.max_T);
    GPT m;
    gpt_create_shared(&m, &g->model, B, Tl, layer);
    gpt_forward(&m, local, NULL);
    gpt_backend_sync();
    gpt_free(&m);
    attention_layer_free(layer);
    attention_layer_free(schedule);
    free(local);
}

const float* generator_decode_batch(Generator* g, int n, const int* seq, const int* tokens) {
    for (int i = 0; i < n; i++) {
        CHECK(tokens[i] >= 0 && tokens[i] < g->cfg.V, "caller bug",
              "token %d outside the vocabulary", tokens[i]);
        CHECK(seq[i] >= 0 && seq[i] < g->cache.B && g->cache.len[seq[i]] < g->cfg.max_T,
              "stop at the context length", "sequence %d: decode at position %d, context %d",
              seq[i], seq[i] >= 0 && seq[i] < g->cache.B ? g->cache.len[seq[i]] : -1,
              g->cfg.max_T);
    }
    kv_decode_at(g->decode, n, seq);
    g->model.B = n;   // row i: sequence seq[i]
    gpt_forward(&g->model, tokens, NULL);
    for (int i = 0; i < n; i++) {
        gpt_logits_row_to_host(&g->model, i, g->logits + (size_t)i * g->cfg.V);
        g->cache.len[seq[i]]++;
    }
    return g->logits;
}

const float* generator_decode(Generator* g, int b, int token) {
    return generator_decode_batch(g, 1, &b, &token);
}

const float* generator_full_logits(Generator* g, const int* tokens, int n) {
    CHECK(g->P == 1, "caller bug", "the no-cache reference runs on one process");
    CHECK(n >= 1 && n <= g->cfg.max_T, "caller bug", "%d tokens, context %d", n, g->cfg.max_T);
    if (!g->full_attention) {
        g->full_attention = attention_local_create(1, g->cfg.max_T, g->cfg.NH, gpt_kv_heads(&g->cfg),
                                                   g->cfg.C / g->cfg.NH);
        gpt_create_shared(&g->full, &g->model, 1, g->cfg.max_T, g->full_attention);
    }
    g->full.T = n;
    gpt_forward(&g->full, tokens, NULL);
    gpt_logits_row_to_host(&g->full, n - 1, g->logits);
    return g->logits;
}

long long generator_decode_bytes(const Generator* g, int b, int pos) {
    if (g->P == 1) return 0;
    const int NH = g->cfg.NH, HS = g->cfg.C / g->cfg.NH;
    // Ring: the shard this rank holds of the pos + 1 tokens, in the prefill's layout.
    const long long per_layer = g->decode->algo == DECODE_TREE
        ? tree_decode_bytes(g->P, g->rank, NH, HS, sizeof(real_acc))
        : ring_decode_bytes(pos + 1, kv_cache_rank_rows(&g->cache, b, pos + 1, g->rank),
                            gpt_kv_heads(&g->cfg), HS, sizeof(real));
    return g->cfg.L * per_layer;
}
