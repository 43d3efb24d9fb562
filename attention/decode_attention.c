// The decode layer of attention/kv_cache.h: one new token per call, its query replicated on every
// SP rank. Tree: each rank attends over its own shard (partial output and LSE), and the partials
// merge by recursive doubling over MESH_SP, log2(P) exchanges of (C + NH) accumulators; the LSE
// merge is symmetric, so every rank ends with the same bits. A group whose size is not a power of
// two first folds the ranks past the largest power of two into their partners and sends them the
// result at the end. Ring (the baseline): the shards rotate P-1 times around the group and every
// rank merges each one into its own output, moving the whole cache every token.
#include <math.h>
#include <stdlib.h>

#include "attention/kv_cache.h"
#include "comm/fail.h"

// Posts one send and one receive (either may be absent: peer < 0 or count 0) and waits.
static void exchange(DecodeLayer* d, CommType t, int send_to, void* sbuf, size_t scount,
                     int recv_from, void* rbuf, size_t rcount) {
    CommTransfer s = {send_to, sbuf, scount}, r = {recv_from, rbuf, rcount};
    const int ns = send_to >= 0 && scount > 0, nr = recv_from >= 0 && rcount > 0;
    if (ns || nr) comm_wait(d->comm, comm_start(d->comm, MESH_SP, t, &s, ns, &r, nr));
}

// out (C + NH): the partial attention of the new token (qkv row) over n cached K|V rows.
static void partial(DecodeLayer* d, const real* qkv, const real* rows, long n, real_acc* out) {
    const KVCache* c = d->cache;
    const int C = c->NH * c->HS;
    if (n == 0) {   // an empty partial: merges as nothing
        dist_zero_acc(out, C);
        dist_to_backend(out + C, d->neg_inf, sizeof(real_acc) * c->NH);
        return;
    }
    // Every cached key precedes the new token: the positions only need to keep them visible.
    const AttentionProblem p = attention_problem(1, c->NH, c->HS, 1, (int)n,
                                                 token_positions(d->pos, 1), token_positions(0, 1));
    dist_attention_forward(&p, qkv, 3 * C, rows, 2 * C, rows + C, 2 * C, out, C, out + C);
}

static void merge(DecodeLayer* d, real_acc* into, const real_acc* from) {
    const int C = d->cache->NH * d->cache->HS;
    dist_attention_merge(1, d->cache->NH, d->cache->HS, 1, into, C, into + C, from, C, from + C);
}

static void tree_merge(DecodeLayer* d) {
    const int P = d->cache->P, i = d->cache->rank;
    const size_t n = (size_t)d->cache->NH * d->cache->HS + d->cache->NH;
    int P2 = 1;
    while (P2 * 2 <= P) P2 *= 2;
    if (i >= P2) {   // folded in: hand the partial over, get the result back
        exchange(d, d->at, i - P2, d->part, n, -1, NULL, 0);
        exchange(d, d->at, -1, NULL, 0, i - P2, d->part, n);
        return;
    }
    const int folded = i + P2 < P;
    if (folded) {
        exchange(d, d->at, -1, NULL, 0, i + P2, d->other, n);
        merge(d, d->part, d->other);
    }
    for (int mask = 1; mask < P2; mask <<= 1) {
        exchange(d, d->at, i ^ mask, d->part, n, i ^ mask, d->other, n);
        merge(d, d->part, d->other);
    }
    if (folded) exchange(d, d->at, i + P2, d->part, n, -1, NULL, 0);
}

static void ring_pass(DecodeLayer* d, const real* qkv, const real* own) {
    const KVCache* c = d->cache;
    const int P = c->P, i = c->rank, C = c->NH * c->HS;
    const long n = d->pos + 1;   // tokens cached, the new one included
    const real* held = own;      // the shard sent next, from SP rank (i - s + 1) mod P
    for (int s = 1; s < P; s++) {
        const int from = (i - s + P) % P, sent = (i - s + 1 + P) % P;
        const long nrecv = kv_cache_local_count(n, P, from), nsend = kv_cache_local_count(n, P, sent);
        real* into = d->shard[s & 1];
        exchange(d, d->rt, (i + 1) % P, (void*)held, (size_t)nsend * 2 * C, (i - 1 + P) % P, into,
                 (size_t)nrecv * 2 * C);
        partial(d, qkv, into, nrecv, d->other);
        merge(d, d->part, d->other);
        held = into;
    }
}

static void decode_forward(AttentionLayer* self, int layer, int B, int Tl, int NH, int HS,
                           const real* qkv, real* out, real_stat* lse) {
    DecodeLayer* d = (DecodeLayer*)self;
    KVCache* c = d->cache;
    CHECK(B == 1 && Tl == 1 && NH == c->NH && HS == c->HS && layer >= 0 && layer < c->L,
          "decode one token of one sequence per forward",
          "decode layer called with B=%d Tl=%d NH=%d HS=%d layer %d (cache NH=%d HS=%d L=%d)", B,
          Tl, NH, HS, layer, c->NH, c->HS, c->L);
    const int C = NH * HS;
    CommScope saved = {0, COMM_OTHER};
    if (d->comm) saved = comm_enter_scope(d->comm, layer, COMM_FORWARD);
    real* rows = kv_cache_rows(c, layer, d->seq);
    if (d->pos % c->P == c->rank) {   // this rank owns the new token: append its K|V
        const long at = kv_cache_local_count(d->pos, c->P, c->rank);
        dist_copy_rows(rows + (size_t)at * 2 * C, 2 * C, qkv + C, 3 * C, 1, 2 * C, sizeof(real));
    }
    partial(d, qkv, rows, kv_cache_local_count(d->pos + 1, c->P, c->rank), d->part);
    if (c->P > 1) {
        if (d->algo == DECODE_TREE) tree_merge(d);
        else ring_pass(d, qkv, rows);
    }
    dist_acc_to_real(out, C, d->part, C, 1, C);
    dist_copy_rows(lse, NH, d->part + C, NH, 1, NH, sizeof(real_acc));
    if (d->comm) comm_leave_scope(d->comm, saved);
}

static void decode_backward(AttentionLayer* self, int layer, int B, int Tl, int NH, int HS,
                            const real* qkv, const real* out, const real_stat* lse,
                            const real* dout, real* dqkv) {
    fail_msg("the decode attention layer has no backward (generation only)");
}

static void decode_destroy(AttentionLayer* self) {
    DecodeLayer* d = (DecodeLayer*)self;
    dist_free(d->part);
    dist_free(d->other);
    dist_free(d->shard[0]);
    dist_free(d->shard[1]);
    free(d->neg_inf);
    free(d);
}

DecodeLayer* kv_decode_create(KVCache* cache, Comm* comm, DecodeAlgorithm algo) {
    CHECK(comm || cache->P == 1, "caller bug", "decode over %d ranks without a comm", cache->P);
    CHECK(!comm || comm_size(comm, MESH_SP) == cache->P, "caller bug",
          "decode cache of %d shards on an SP group of %d", cache->P,
          comm ? comm_size(comm, MESH_SP) : 1);
    DecodeLayer* d = (DecodeLayer*)xcalloc(1, sizeof *d, "decode layer");
    const int C = cache->NH * cache->HS;
    d->cache = cache;
    d->comm = comm;
    d->algo = algo;
    d->rt = dist_real_comm_type();
    d->at = dist_acc_comm_type();
    d->part = (real_acc*)dist_alloc(sizeof(real_acc) * (C + cache->NH), "decode partial");
    d->other = (real_acc*)dist_alloc(sizeof(real_acc) * (C + cache->NH), "decode partner partial");
    if (algo == DECODE_RING && cache->P > 1) {
        for (int k = 0; k < 2; k++)
            d->shard[k] = (real*)dist_alloc(sizeof(real) * cache->cap * 2 * C, "decode ring shard");
    }
    d->neg_inf = (real_acc*)xmalloc(sizeof(real_acc) * cache->NH, "empty LSE");
    for (int h = 0; h < cache->NH; h++) d->neg_inf[h] = (real_acc)-INFINITY;
    d->base.forward = decode_forward;
    d->base.backward = decode_backward;
    d->base.destroy = decode_destroy;
    d->base.name = algo == DECODE_TREE ? "decode-tree" : "decode-ring";
    kv_decode_at(d, 0, 0);
    return d;
}

void kv_decode_at(DecodeLayer* d, int seq, int pos) {
    CHECK(seq >= 0 && seq < d->cache->B && pos >= 0 &&
              kv_cache_local_count(pos + 1, d->cache->P, d->cache->rank) <= d->cache->cap,
          "caller bug", "decode of sequence %d position %d beyond the cache (B=%d, %d rows)", seq,
          pos, d->cache->B, d->cache->cap);
    d->seq = seq;
    d->pos = pos;
    d->base.positions = token_layout(token_positions(pos, 1));
}
