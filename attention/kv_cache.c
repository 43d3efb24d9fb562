// The KV cache and its prefill layer (attention/kv_cache.h).
#include "attention/kv_cache.h"

#include <stdlib.h>
#include <string.h>

#include "comm/fail.h"

void kv_cache_create(KVCache* c, int L, int B, int max_T, int NH, int NKV, int HS, int P,
                     int rank, RingLayout layout, int usp_pq) {
    CHECK(L >= 1 && B >= 1 && max_T >= 1 && NH >= 1 && NKV >= 1 && NH % NKV == 0 && HS >= 1 &&
              P >= 1 && rank >= 0 && rank < P && usp_pq >= 0 && (usp_pq == 0 || P % usp_pq == 0),
          "caller bug", "kv cache: L=%d B=%d max_T=%d NH=%d NKV=%d HS=%d P=%d rank=%d usp_pq=%d",
          L, B, max_T, NH, NKV, HS, P, rank, usp_pq);
    memset(c, 0, sizeof *c);
    c->L = L, c->B = B, c->NH = NH, c->NKV = NKV, c->HS = HS, c->P = P, c->rank = rank;
    c->layout = layout;
    c->usp_pq = usp_pq;
    // Cyclic: every shard holds ceil(T / P) of T tokens. Otherwise a rank may hold a whole
    // prefill chunk (at most ceil(max_T / P) + 1 tokens, zigzag rounding to 2P) and then its
    // cyclic share of the decoded ones.
    const int share = (max_T + P - 1) / P;
    c->cap = layout == RING_CYCLIC ? share : 2 * share + 1;
    c->kv = (real*)dist_alloc(sizeof(real) * L * B * c->cap * 2 * NKV * HS, "KV cache");
    c->len = (int*)xcalloc((size_t)B, sizeof(int), "KV cache lengths");
    c->prefill_len = (int*)xcalloc((size_t)B, sizeof(int), "KV cache prefill lengths");
}

void kv_cache_free(KVCache* c) {
    dist_free(c->kv);
    free(c->len);
    free(c->prefill_len);
    memset(c, 0, sizeof *c);
}

// Tokens of run g of layout l (per_run local tokens) at positions below m.
static long run_count(TokenLayout l, int g, long per_run, long m) {
    const long off = l.off[g];
    if (m <= off) return 0;
    const long k = (m - off + l.stride - 1) / l.stride;
    return k < per_run ? k : per_run;
}

long kv_cache_rank_rows(const KVCache* c, int b, long n, int r) {
    const long n0 = c->prefill_len[b], m = n < n0 ? n : n0;
    long rows = 0;
    if (c->prefill_Tl > 0) {
        const TokenLayout l = ring_rank_layout(c->layout, c->P, r, c->prefill_Tl);
        for (int g = 0; g < l.chunks; g++) rows += run_count(l, g, c->prefill_Tl / l.chunks, m);
    }
    if (n > n0) rows += kv_cache_local_count(n, c->P, r) - kv_cache_local_count(n0, c->P, r);
    return rows;
}

typedef struct {
    AttentionLayer base;
    AttentionLayer* inner;
    KVCache* cache;
    int Tl;
    int* len;       // (B) tokens of each sequence that are real
    int* row_pos;   // (B, Tl) backend memory: the rows' positions, padding clamped
} PrefillLayer;

static void prefill_forward(AttentionLayer* self, int layer, long window, int B, int Tl, int NH,
                            int NKV, int HS, const real* qkv, real* out, real_stat* lse) {
    PrefillLayer* a = (PrefillLayer*)self;
    KVCache* c = a->cache;
    CHECK(B <= c->B && layer < c->L && NH == c->NH && NKV == c->NKV && HS == c->HS && Tl == a->Tl,
          "caller bug", "prefill of B=%d Tl=%d layer %d NH=%d NKV=%d HS=%d into a cache of B=%d "
          "L=%d NH=%d NKV=%d HS=%d (Tl %d)", B, Tl, layer, NH, NKV, HS, c->B, c->L, c->NH, c->NKV,
          c->HS, a->Tl);
    a->inner->forward(a->inner, layer, window, B, Tl, NH, NKV, HS, qkv, out, lse);
    const int C = NH * HS, KVC = NKV * HS, W = attention_qkv_width(NH, NKV, HS);
    // Run g of the local tokens is rows g, g + chunks, ...: its real tokens are a prefix of it.
    const TokenLayout l = self->positions;
    for (int b = 0; b < B; b++) {
        long at = 0;   // rows of b stored so far
        for (int g = 0; g < l.chunks; g++) {
            const long n = run_count(l, g, Tl / l.chunks, a->len[b]);
            CHECK(at + n <= c->cap, "caller bug", "prefill of %d tokens in %d local rows",
                  a->len[b], c->cap);
            if (n > 0)
                dist_copy_rows(kv_cache_rows(c, layer, b) + (size_t)at * 2 * KVC, 2 * KVC,
                               qkv + ((size_t)b * Tl + g) * W + C, (long)l.chunks * W, n,
                               2 * KVC, sizeof(real));
            at += n;
        }
    }
    if (layer == c->L - 1) {
        memcpy(c->len, a->len, sizeof(int) * B);
        memcpy(c->prefill_len, a->len, sizeof(int) * B);
        c->prefill_Tl = Tl;
    }
}

static void prefill_backward(AttentionLayer* self, int layer, long window, int B, int Tl, int NH,
                             int NKV, int HS, const real* qkv, const real* out, const real_stat* lse,
                             const real* dout, real* dqkv) {
    fail_msg("the prefill attention layer has no backward (generation only)");
}

static void prefill_destroy(AttentionLayer* self) {
    PrefillLayer* a = (PrefillLayer*)self;
    dist_free(a->row_pos);
    free(a->len);
    free(a);
}

AttentionLayer* kv_prefill_create(KVCache* cache, AttentionLayer* inner, int Tl, const int* len,
                                  int max_T) {
    const TokenLayout l = inner->positions;
    const TokenLayout want = ring_rank_layout(cache->layout, cache->P, cache->rank, Tl);
    CHECK(l.chunks == want.chunks && l.stride == want.stride && l.off[0] == want.off[0] &&
              (l.chunks == 1 || l.off[1] == want.off[1]),
          "prefill with the schedule of the cache's layout",
          "prefill schedule %s: expected offsets %ld %ld stride %ld (%d runs), found %ld %ld "
          "stride %ld (%d runs)", inner->name, want.off[0], want.off[1], want.stride, want.chunks,
          l.off[0], l.off[1], l.stride, l.chunks);
    PrefillLayer* a = (PrefillLayer*)xcalloc(1, sizeof *a, "prefill layer");
    a->inner = inner;
    a->cache = cache;
    a->Tl = Tl;
    a->len = (int*)xmalloc(sizeof(int) * cache->B, "prefill lengths");
    memcpy(a->len, len, sizeof(int) * cache->B);
    int* pos = (int*)xmalloc(sizeof(int) * cache->B * Tl, "prefill positions");
    for (int b = 0; b < cache->B; b++)
        for (int j = 0; j < Tl; j++) {
            const long p = token_layout_position(l, j);
            pos[b * Tl + j] = (int)(p < max_T ? p : max_T - 1);
        }
    a->row_pos = (int*)dist_alloc(sizeof(int) * cache->B * Tl, "prefill positions");
    dist_to_backend(a->row_pos, pos, sizeof(int) * cache->B * Tl);
    free(pos);
    a->base.forward = prefill_forward;
    a->base.backward = prefill_backward;
    a->base.destroy = prefill_destroy;
    a->base.positions = l;
    a->base.row_positions = a->row_pos;
    a->base.name = "kv-prefill";
    return &a->base;
}
