// The key/value cache of generation, sharded by sequence position over the SP group: token t of a
// sequence lives on SP rank t mod P (the cyclic layout of ATTENTION2D and Striped), so prefill
// leaves every rank the K/V of its own tokens and decoding appends each new token on rank t mod P,
// keeping the shards balanced. Two attention layers (attention/attention_layer.h) use it:
//   - the prefill layer wraps a schedule (ATTENTION2D, its overlapped variant, Striped, or the
//     single-device layer) and also stores this rank's K/V rows of every layer into the cache;
//   - the decode layer attends one new token per call (B = 1, Tl = 1, the query replicated on
//     every SP rank) over the cache: Tree Attention (partial attention with LSE over the local
//     shard, merged by a log-depth exchange over MESH_SP), or a Ring baseline that rotates the
//     shards. Both are written once against attention/dist_ops.h and comm/comm.h.
#pragma once
#include "attention/attention_layer.h"
#include "attention/dist_ops.h"
#include "comm/comm.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct {
    int L, B, NH, HS;   // layers, sequences, heads, channels per head
    int P, rank;        // SP ranks and this rank's index among them
    int cap;            // local rows per (layer, sequence): ceil(max_T / P)
    real* kv;           // (L, B, cap, 2C) K|V rows of this rank's tokens, backend memory
    int* len;           // (B) tokens of each sequence whose K/V are cached (over all ranks)
} KVCache;

// Tokens among the first n of a sequence that SP rank r of P holds (t < n, t mod P == r).
static inline long kv_cache_local_count(long n, int P, int r) {
    return n > r ? (n - r + P - 1) / P : 0;
}
// K|V rows of (layer, sequence b): cap rows of 2C.
static inline real* kv_cache_rows(const KVCache* c, int layer, int b) {
    return c->kv + ((size_t)layer * c->B + b) * c->cap * 2 * c->NH * c->HS;
}

void kv_cache_create(KVCache* c, int L, int B, int max_T, int NH, int HS, int P, int rank);
void kv_cache_free(KVCache* c);

// Prefill over the first len[b] tokens of each sequence (the model runs B sequences of Tl local
// tokens, P * Tl >= every len[b]; the positions past len[b] are padding): forward is
// inner->forward, then this rank's rows of real tokens go into the cache, and cache->len = len.
// inner must use the cyclic layout (positions (rank, P)). The layer does not own inner.
AttentionLayer* kv_prefill_create(KVCache* cache, AttentionLayer* inner, const int* len);

typedef enum { DECODE_TREE, DECODE_RING } DecodeAlgorithm;
typedef struct {
    AttentionLayer base;   // positions: the new token's, set by kv_decode_at
    KVCache* cache;
    Comm* comm;            // NULL: a single process (P = 1)
    DecodeAlgorithm algo;
    int seq, pos;          // the sequence and position the next forward decodes
    CommType rt, at;
    real_acc* part;        // (C + NH) this rank's output | LSE, merged in place
    real_acc* other;       // (C + NH) a partner's partial
    real* shard[2];        // ring: (cap, 2C) K|V shards in flight
    real_acc* neg_inf;     // (NH) host memory: the LSE of an empty partial
} DecodeLayer;

// Decode layer over cache; comm may be NULL only when cache->P == 1.
DecodeLayer* kv_decode_create(KVCache* cache, Comm* comm, DecodeAlgorithm algo);
// The next forward decodes sequence seq's token at position pos (= cache->len[seq]); its K/V are
// appended on rank pos mod P during the forward (every layer); the caller advances cache->len.
void kv_decode_at(DecodeLayer* d, int seq, int pos);

#ifdef __cplusplus
}
#endif
