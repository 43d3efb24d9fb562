// The decode layer of attention/kv_cache.h: one new token of each of n sequences per call, the
// queries replicated on every SP rank. Tree: each rank attends over its own shard of each
// sequence (partial outputs and LSEs), and the n partials merge together by recursive doubling
// over MESH_SP, log2(P) exchanges of n (C + NH) accumulators; the LSE merge is symmetric, so
// every rank ends with the same bits. A group whose size is not a power of two first folds the
// ranks past the largest power of two into their partners and sends them the result at the end.
// Ring (the baseline): each sequence's shards rotate P-1 times around the group and every rank
// merges each one into its own output, moving the whole cache every token.
#include <math.h>
#include <stdlib.h>

#include "attention/kv_cache.h"
#include "comm/fail.h"

// Posts one send and one receive (either may be absent: peer < 0 or count 0) and waits. Peers
// are cache rank indices (kv_cache_sp_rank gives their SP ranks).
static void exchange(DecodeLayer* d, CommType t, int send_to, void* sbuf, size_t scount,
                     int recv_from, void* rbuf, size_t rcount) {
    const KVCache* c = d->cache;
    CommTransfer s = {send_to >= 0 ? kv_cache_sp_rank(c, send_to) : -1, sbuf, scount},
                 r = {recv_from >= 0 ? kv_cache_sp_rank(c, recv_from) : -1, rbuf, rcount};
    const int ns = send_to >= 0 && scount > 0, nr = recv_from >= 0 && rcount > 0;
    if (ns || nr) comm_wait(d->comm, comm_start(d->comm, MESH_SP, t, &s, ns, &r, nr));
}

// out (C), lse (NH): the partial attention of a new token at position pos (qkv row) over n
// cached K|V rows (2KVC each).
static void partial(DecodeLayer* d, const real* qkv, long pos, const real* rows, long n,
                    int origin, long window, real_acc* out, real_acc* lse) {
    const KVCache* c = d->cache;
    const int C = c->NH * c->HS, KVC = c->NKV * c->HS, W = attention_qkv_width(c->NH, c->NKV, c->HS);
    if (n == 0) {   // an empty partial: merges as nothing
        dist_zero_acc(out, C);
        dist_to_backend(lse, d->neg_inf, sizeof(real_acc) * c->NH);
        return;
    }
    // Every cached key precedes the new token: without a window the positions only need to keep
    // them visible; under one they are the true positions, those of the cyclic layout's shards
    // (rows of SP rank `origin` at origin, origin + P, ...: decode_forward checks the layout).
    AttentionProblem p = attention_problem(1, c->NH, c->HS, 1, (int)n, token_positions(pos, 1),
                                           window ? token_positions(origin, c->P) : token_positions(0, 1));
    p.NKV = c->NKV;
    p.window = window;
    p.decode = 1;   // NH blocks over a long cache: the CUDA forward splits the keys
    dist_attention_forward(&p, qkv, W, rows, 2 * KVC, rows + KVC, 2 * KVC, out, C, lse);
}

// into (rows, C) | (rows, NH) += from, the same layout: the LSE merge of rows partials.
static void merge(const DecodeLayer* d, int rows, real_acc* into, const real_acc* from) {
    const int NH = d->cache->NH, HS = d->cache->HS, C = NH * HS;
    dist_attention_merge(rows, NH, HS, 1, into, C, into + (size_t)rows * C, from, C,
                         from + (size_t)rows * C);
}

static void tree_merge(DecodeLayer* d) {
    const int P = d->cache->P, i = d->cache->rank;
    const size_t n = (size_t)d->n * (d->cache->NH * d->cache->HS + d->cache->NH);
    int P2 = 1;
    while (P2 * 2 <= P) P2 *= 2;
    if (i >= P2) {   // folded in: hand the partials over, get the result back
        exchange(d, d->at, i - P2, d->part, n, -1, NULL, 0);
        exchange(d, d->at, -1, NULL, 0, i - P2, d->part, n);
        return;
    }
    const int folded = i + P2 < P;
    if (folded) {
        exchange(d, d->at, -1, NULL, 0, i + P2, d->other, n);
        merge(d, d->n, d->part, d->other);
    }
    for (int mask = 1; mask < P2; mask <<= 1) {
        exchange(d, d->at, i ^ mask, d->part, n, i ^ mask, d->other, n);
        merge(d, d->n, d->part, d->other);
    }
    if (folded) exchange(d, d->at, i + P2, d->part, n, -1, NULL, 0);
}

// Row r (sequence b at position pos): the other ranks' shards of b rotate through this one and
// merge into row r of the partials (other holds one (C | NH) partial at a time).
static void ring_pass(DecodeLayer* d, const real* qkv, int r, int b, long pos, const real* own,
                      long window) {
    const KVCache* c = d->cache;
    const int P = c->P, i = c->rank, NH = c->NH, HS = c->HS, C = NH * HS, KVC = c->NKV * HS;
    const long n = pos + 1;   // tokens cached, the new one included
    const real* held = own;   // the shard sent next, from SP rank (i - s + 1) mod P
    real_acc* out = d->part + (size_t)r * C;
    real_acc* lse = d->part + (size_t)d->n * C + (size_t)r * NH;
    for (int s = 1; s < P; s++) {
        const int from = (i - s + P) % P, sent = (i - s + 1 + P) % P;
        const long nrecv = kv_cache_rank_rows(c, b, n, from), nsend = kv_cache_rank_rows(c, b, n, sent);
        real* into = d->shard[s & 1];
        exchange(d, d->rt, (i + 1) % P, (void*)held, (size_t)nsend * 2 * KVC, (i - 1 + P) % P,
                 into, (size_t)nrecv * 2 * KVC);
        partial(d, qkv, pos, into, nrecv, from, window, d->other, d->other + C);
        dist_attention_merge(1, NH, HS, 1, out, C, lse, d->other, C, d->other + C);
        held = into;
    }
}

static void decode_forward(AttentionLayer* self, int layer, long window, int B, int Tl, int NH,
                           int NKV, int HS, const real* qkv, real* out, real_stat* lse) {
    DecodeLayer* d = (DecodeLayer*)self;
    KVCache* c = d->cache;
    CHECK(B == d->n && Tl == 1 && NH == c->NH && NKV == c->NKV && HS == c->HS && layer >= 0 &&
              layer < c->L,
          "decode one token of each of the kv_decode_at sequences per forward",
          "decode layer called with B=%d Tl=%d NH=%d NKV=%d HS=%d layer %d (set for %d rows; "
          "cache NH=%d NKV=%d HS=%d L=%d)", B, Tl, NH, NKV, HS, layer, d->n, c->NH, c->NKV,
          c->HS, c->L);
    CHECK(!self->docs.start, "caller bug",
          "decoding under a document mask (a decoded sequence is one document: leave docs unset)");
    CHECK(!window || c->P == 1 || c->layout == RING_CYCLIC,
          "prefill a sliding-window model with ATTENTION2D or Striped attention (or on one rank)",
          "decoding a sliding-window layer needs the cyclic prefill layout (token t on rank t mod "
          "P), found another over %d ranks", c->P);
    const int C = NH * HS, KVC = NKV * HS, W = attention_qkv_width(NH, NKV, HS);
    CommScope saved = {0, COMM_OTHER};
    if (d->comm) saved = comm_enter_scope(d->comm, layer, COMM_FORWARD);
    for (int r = 0; r < B; r++) {
        const int b = d->seq[r];
        const long pos = d->pos[r];
        const real* q = qkv + (size_t)r * W;
        real* rows = kv_cache_rows(c, layer, b);
        if (pos % c->P == c->rank) {   // this rank owns the new token: append its K|V
            const long at = kv_cache_rank_rows(c, b, pos, c->rank);
            dist_copy_rows(rows + (size_t)at * 2 * KVC, 2 * KVC, q + C, W, 1, 2 * KVC,
                           sizeof(real));
        }
        partial(d, q, pos, rows, kv_cache_rank_rows(c, b, pos + 1, c->rank), c->rank, window,
                d->part + (size_t)r * C, d->part + (size_t)B * C + (size_t)r * NH);
    }
    if (c->P > 1) {
        if (d->algo == DECODE_TREE) tree_merge(d);
        else
            for (int r = 0; r < B; r++)
                ring_pass(d, qkv + (size_t)r * W, r, d->seq[r], d->pos[r],
                          kv_cache_rows(c, layer, d->seq[r]), window);
    }
    dist_acc_to_real(out, C, d->part, C, B, C);
    dist_copy_rows(lse, NH, d->part + (size_t)B * C, NH, B, NH, sizeof(real_acc));
    if (d->comm) comm_leave_scope(d->comm, saved);
}

static void decode_backward(AttentionLayer* self, int layer, long window, int B, int Tl, int NH,
                            int NKV, int HS, const real* qkv, const real* out, const real_stat* lse,
                            const real* dout, real* dqkv) {
    fail_msg("the decode attention layer has no backward (generation only)");
}

static void decode_destroy(AttentionLayer* self) {
    DecodeLayer* d = (DecodeLayer*)self;
    dist_free(d->part);
    dist_free(d->other);
    dist_free(d->shard[0]);
    dist_free(d->shard[1]);
    dist_free(d->row_pos);
    free(d->seq);
    free(d->pos);
    free(d->neg_inf);
    free(d);
}

DecodeLayer* kv_decode_create(KVCache* cache, Comm* comm, DecodeAlgorithm algo) {
    CHECK(comm || cache->P == 1, "caller bug", "decode over %d ranks without a comm", cache->P);
    CHECK(!comm || comm_size(comm, MESH_SP) == cache->P, "caller bug",
          "decode cache of %d shards on an SP group of %d", cache->P,
          comm ? comm_size(comm, MESH_SP) : 1);
    DecodeLayer* d = (DecodeLayer*)xcalloc(1, sizeof *d, "decode layer");
    const int B = cache->B, C = cache->NH * cache->HS;
    d->cache = cache;
    d->comm = comm;
    d->algo = algo;
    d->rt = dist_real_comm_type();
    d->at = dist_acc_comm_type();
    d->seq = (int*)xcalloc((size_t)B, sizeof(int), "decode sequences");
    d->pos = (int*)xcalloc((size_t)B, sizeof(int), "decode positions");
    d->row_pos = (int*)dist_alloc(sizeof(int) * B, "decode positions");
    d->part = (real_acc*)dist_alloc(sizeof(real_acc) * B * (C + cache->NH), "decode partials");
    d->other = (real_acc*)dist_alloc(sizeof(real_acc) * B * (C + cache->NH),
                                     "decode partner partials");
    if (algo == DECODE_RING && cache->P > 1) {
        for (int k = 0; k < 2; k++)
            d->shard[k] = (real*)dist_alloc(sizeof(real) * cache->cap * 2 * cache->NKV * cache->HS,
                                            "decode ring shard");
    }
    d->neg_inf = (real_acc*)xmalloc(sizeof(real_acc) * cache->NH, "empty LSE");
    for (int h = 0; h < cache->NH; h++) d->neg_inf[h] = (real_acc)-INFINITY;
    d->base.forward = decode_forward;
    d->base.backward = decode_backward;
    d->base.destroy = decode_destroy;
    d->base.positions = token_layout(token_positions(0, 1));
    d->base.row_positions = d->row_pos;
    d->base.name = algo == DECODE_TREE ? "decode-tree" : "decode-ring";
    return d;
}

void kv_decode_at(DecodeLayer* d, int n, const int* seq) {
    const KVCache* c = d->cache;
    CHECK(n >= 1 && n <= c->B, "caller bug", "decode of %d sequences with a cache of %d", n, c->B);
    for (int r = 0; r < n; r++) {
        const int b = seq[r];
        CHECK(b >= 0 && b < c->B, "caller bug", "decode of sequence %d (cache of %d)", b, c->B);
        for (int q = 0; q < r; q++)
            CHECK(seq[q] != b, "caller bug", "sequence %d twice in one decode step", b);
        const int pos = c->len[b];
        CHECK(kv_cache_rank_rows(c, b, pos + 1, c->rank) <= c->cap, "caller bug",
              "decode of sequence %d position %d beyond the cache (%d rows)", b, pos, c->cap);
        d->seq[r] = b;
        d->pos[r] = pos;
    }
    d->n = n;
    dist_to_backend(d->row_pos, d->pos, sizeof(int) * n);
}
