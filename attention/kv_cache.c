// The KV cache and its prefill layer (attention/kv_cache.h).
#include "attention/kv_cache.h"

#include <stdlib.h>
#include <string.h>

#include "comm/fail.h"

void kv_cache_create(KVCache* c, int L, int B, int max_T, int NH, int HS, int P, int rank) {
    CHECK(L >= 1 && B >= 1 && max_T >= 1 && NH >= 1 && HS >= 1 && P >= 1 && rank >= 0 &&
              rank < P,
          "caller bug", "kv cache: L=%d B=%d max_T=%d NH=%d HS=%d P=%d rank=%d", L, B, max_T, NH,
          HS, P, rank);
    memset(c, 0, sizeof *c);
    c->L = L, c->B = B, c->NH = NH, c->HS = HS, c->P = P, c->rank = rank;
    c->cap = (max_T + P - 1) / P;
    c->kv = (real*)dist_alloc(sizeof(real) * L * B * c->cap * 2 * NH * HS, "KV cache");
    c->len = (int*)xcalloc((size_t)B, sizeof(int), "KV cache lengths");
}

void kv_cache_free(KVCache* c) {
    dist_free(c->kv);
    free(c->len);
    memset(c, 0, sizeof *c);
}

typedef struct {
    AttentionLayer base;
    AttentionLayer* inner;
    KVCache* cache;
    int* len;   // (B) tokens of each sequence that are real
} PrefillLayer;

static void prefill_forward(AttentionLayer* self, int layer, int B, int Tl, int NH, int HS,
                            const real* qkv, real* out, real_stat* lse) {
    PrefillLayer* a = (PrefillLayer*)self;
    KVCache* c = a->cache;
    CHECK(B <= c->B && layer < c->L && NH == c->NH && HS == c->HS, "caller bug",
          "prefill of B=%d layer %d NH=%d HS=%d into a cache of B=%d L=%d NH=%d HS=%d", B, layer,
          NH, HS, c->B, c->L, c->NH, c->HS);
    a->inner->forward(a->inner, layer, B, Tl, NH, HS, qkv, out, lse);
    const int C = NH * HS;
    // Local token j of sequence b is at position rank + P*j: the real ones are a prefix.
    for (int b = 0; b < B; b++) {
        const long n = kv_cache_local_count(a->len[b], c->P, c->rank);
        CHECK(n <= Tl && n <= c->cap, "caller bug", "prefill of %d tokens in %d local rows",
              a->len[b], Tl);
        if (n > 0)
            dist_copy_rows(kv_cache_rows(c, layer, b), 2 * C, qkv + (size_t)b * Tl * 3 * C + C,
                           3 * C, n, 2 * C, sizeof(real));
    }
    if (layer == c->L - 1) memcpy(c->len, a->len, sizeof(int) * B);
}

static void prefill_backward(AttentionLayer* self, int layer, int B, int Tl, int NH, int HS,
                             const real* qkv, const real* out, const real_stat* lse,
                             const real* dout, real* dqkv) {
    fail_msg("the prefill attention layer has no backward (generation only)");
}

static void prefill_destroy(AttentionLayer* self) {
    PrefillLayer* a = (PrefillLayer*)self;
    free(a->len);
    free(a);
}

AttentionLayer* kv_prefill_create(KVCache* cache, AttentionLayer* inner, const int* len) {
    const TokenLayout l = inner->positions;
    CHECK(l.chunks == 1 && l.off[0] == cache->rank && l.stride == cache->P,
          "prefill with a cyclic schedule (2d, 2d-overlap, striped)",
          "prefill schedule %s: expected the cyclic layout (%d, %d), found offset %ld stride %ld",
          inner->name, cache->rank, cache->P, l.off[0], l.stride);
    PrefillLayer* a = (PrefillLayer*)xcalloc(1, sizeof *a, "prefill layer");
    a->inner = inner;
    a->cache = cache;
    a->len = (int*)xmalloc(sizeof(int) * cache->B, "prefill lengths");
    memcpy(a->len, len, sizeof(int) * cache->B);
    a->base.forward = prefill_forward;
    a->base.backward = prefill_backward;
    a->base.destroy = prefill_destroy;
    a->base.positions = l;
    a->base.name = "kv-prefill";
    return &a->base;
}
