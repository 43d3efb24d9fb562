// The key/value cache of generation, sharded by sequence position over the SP group. Prefill
// leaves every rank the K/V of the tokens its schedule's layout gave it (cyclic for ATTENTION2D
// and Striped, a contiguous chunk for Ring, two chunks for Zigzag: RingLayout), and decoding
// appends each new token t on rank t mod P, keeping the shards balanced. The decode attention
// does not care which positions a rank holds (every cached key precedes the new token), so the
// rows of a shard are the rank's prefill tokens then its decoded ones, and the count each rank
// holds comes from the layout (kv_cache_rank_rows). Two attention layers
// (attention/attention_layer.h) use it:
//   - the prefill layer wraps a schedule (ATTENTION2D, its overlapped variant, Ring, Striped,
//     Zigzag, or the single-device layer) and also stores this rank's K/V rows of every layer;
//   - the decode layer attends one new token of each of n sequences per call (B = n rows,
//     Tl = 1, the queries replicated on every SP rank) over the cache: Tree Attention (partial
//     attention with LSE over the local shard, the n partials merged by one log-depth exchange
//     over MESH_SP), or a Ring baseline that rotates the shards. Both are written once against
//     attention/dist_ops.h and comm/comm.h.
#pragma once
#include "attention/attention_layer.h"
#include "attention/dist_attention.h"
#include "attention/dist_ops.h"
#include "comm/comm.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct {
    int L, B, NH, HS;   // layers, sequences, heads, channels per head
    int NKV;            // key/value heads (NH, or fewer under grouped-query attention)
    int P, rank;        // SP ranks and this rank's index among them (its place in the layout)
    int usp_pq;         // > 0: USP's prefill on pq x (P / pq); index q = c + pkv r is SP rank
                        // r + pq c (kv_cache_sp_rank); 0: the index is the SP rank
    RingLayout layout;  // the prefill's layout of positions over the ranks
    int cap;            // local rows per (layer, sequence)
    real* kv;           // (L, B, cap, 2KVC) K|V rows of this rank's tokens (KVC = NKV*HS),
                        // backend memory
    int* len;           // (B) tokens of each sequence whose K/V are cached (over all ranks)
    int* prefill_len;   // (B) tokens of each sequence the last prefill cached
    int prefill_Tl;     // local tokens per rank of the last prefill (its padded length / P)
} KVCache;

// The SP rank (comm/mesh.h) of the cache's rank index q: q itself, or under USP's layout the
// inverse of attention_usp_place: the rank r + pq c of q = c + pkv r.
static inline int kv_cache_sp_rank(const KVCache* c, int q) {
    if (c->usp_pq == 0) return q;
    const int pkv = c->P / c->usp_pq;
    return q / pkv + c->usp_pq * (q % pkv);
}

// Tokens among the first n of a sequence that SP rank r of P holds (t < n, t mod P == r).
static inline long kv_cache_local_count(long n, int P, int r) {
    return n > r ? (n - r + P - 1) / P : 0;
}
// K|V rows of (layer, sequence b): cap rows of 2KVC.
static inline real* kv_cache_rows(const KVCache* c, int layer, int b) {
    return c->kv + ((size_t)layer * c->B + b) * c->cap * 2 * c->NKV * c->HS;
}
// Rows SP rank r holds of the first n tokens of sequence b (n >= its prefill length): its
// prefill tokens in the cache's layout, then the decoded tokens t with t mod P == r.
long kv_cache_rank_rows(const KVCache* c, int b, long n, int r);

// layout: the prefill schedule's (RING_CYCLIC for ATTENTION2D, Striped, Ulysses, USP and P = 1);
// rank: this rank's index in it (USP: c + pkv r, with usp_pq = pq; otherwise the SP rank, 0).
void kv_cache_create(KVCache* c, int L, int B, int max_T, int NH, int NKV, int HS, int P,
                     int rank, RingLayout layout, int usp_pq);
void kv_cache_free(KVCache* c);

// Prefill over the first len[b] tokens of each sequence (the model runs B sequences of Tl local
// tokens in the cache's layout, P * Tl >= every len[b]; the positions past len[b] are padding):
// forward is inner->forward, then this rank's rows of real tokens go into the cache, and
// cache->len = len. The padding rows' positions for the embedding are clamped below max_T (the
// padded length may pass the context; causal attention keeps them out of the real tokens).
// inner must use ring_rank_layout(cache->layout, P, rank, Tl). The layer does not own inner.
AttentionLayer* kv_prefill_create(KVCache* cache, AttentionLayer* inner, int Tl, const int* len,
                                  int max_T);

typedef enum { DECODE_TREE, DECODE_RING } DecodeAlgorithm;
typedef struct {
    AttentionLayer base;   // row_positions: the rows' positions, set by kv_decode_at
    KVCache* cache;
    Comm* comm;            // NULL: a single process (P = 1)
    DecodeAlgorithm algo;
    int n;                 // rows (sequences) of the next forward
    int* seq;              // (B) host: the sequence of each row
    int* pos;              // (B) host: the position each row decodes
    int* row_pos;          // (B) backend copy of pos (base.row_positions)
    CommType rt, at;
    real_acc* part;        // (n, C) outputs then (n, NH) LSEs of this rank, merged in place
    real_acc* other;       // the same for a partner's partials
    real* shard[2];        // ring: (cap, 2KVC) K|V shards in flight
    real_acc* neg_inf;     // (NH) host memory: the LSE of an empty partial
} DecodeLayer;

// Decode layer over cache; comm may be NULL only when cache->P == 1.
DecodeLayer* kv_decode_create(KVCache* cache, Comm* comm, DecodeAlgorithm algo);
// The next forward decodes n rows (n <= cache->B): row i is sequence seq[i]'s token at position
// cache->len[seq[i]] (distinct sequences); its K/V are appended on rank position mod P during the
// forward (every layer); the caller advances cache->len.
void kv_decode_at(DecodeLayer* d, int n, const int* seq);

#ifdef __cplusplus
}
#endif
