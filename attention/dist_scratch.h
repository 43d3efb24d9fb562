// The device scratch of the distributed attention schedules, buffer by buffer: the one formula
// their create functions allocate by (attention/attention2d.c, attention/attention2d_overlap.c,
// attention/ring.c, attention/ulysses.c) and the memory budget counts by (model/memory_budget.c). Pure C and free of
// the backend: the element sizes are inputs, since the schedules are compiled with `real` as
// float (CPU), double (f64) and floatX (CUDA), and the budget sizes a run it does not build.
//
// Dimensions: S = B Tl C values of one shard (B sequences of Tl local tokens, C channels);
// Skv = B Tl KVC values of its keys (or values), KVC = NKV HS: S under multi-head attention,
// S NKV / NH under grouped-query attention; L = B NH Tl rows of statistics; real: bytes of a stored value (`real`: Q, K, V, dO);
// real_acc: bytes of an accumulated one (`real_acc`: partial O, LSE, D, gradient sums). Every
// field is the bytes of the schedule's buffer of that name, 0 where the schedule allocates none.
#pragma once
#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

// attention2d on a pq x pkv grid; keep_kv_layers: layers whose gathered K/V are kept for
// backward (0: none, one column buffer kv_full instead).
typedef struct {
    size_t send, recv;   // the largest block set a row collective sends / receives
    size_t stats_send, stats_recv, kv_recv, dkv_send, dkv_recv, kv_own, kv_perm, kv_full, kept;
    size_t q_full, do_full, o_full, o_own, lse_full, d_full, d_own, dq_part, dkv_part, dkv_own;
} Attention2DScratch;
void attention2d_scratch(Attention2DScratch* out, size_t S, size_t Skv, size_t L, size_t real,
                         size_t real_acc, size_t pq, size_t pkv, size_t keep_kv_layers);
size_t attention2d_scratch_total(const Attention2DScratch* s);

// attention2d-overlap on a pq x pkv grid. merges_in_forward: the backend's forward merges each
// pair into the partial itself (dist_attention_merges_in_forward), so there is no step scratch.
typedef struct {
    size_t kv_own, rows, stats, kv, part, dkv, step, row_in, col_in, dkv_own;
} Attention2DOverlapScratch;
void attention2d_overlap_scratch(Attention2DOverlapScratch* out, size_t S, size_t Skv, size_t L,
                                 size_t real, size_t real_acc, size_t pq, size_t pkv,
                                 int merges_in_forward);
size_t attention2d_overlap_scratch_total(const Attention2DOverlapScratch* s);

// The ring family (ring, striped; zigzag: runs = 2): RING_KV_BLOCKS buffers of kv bytes and
// RING_DKV_BLOCKS of dkv bytes, one of each other field; no step scratch (o_step, lse_step)
// where the backend merges in the forward (merges_in_forward).
enum { RING_KV_BLOCKS = 2, RING_DKV_BLOCKS = 3 };
typedef struct {
    size_t kv, dkv, o, o_step, lse_step, lse_runs, d_own, dq;
} RingScratch;
void ring_scratch(RingScratch* out, size_t S, size_t Skv, size_t L, size_t real, size_t real_acc,
                  int runs, int merges_in_forward);
size_t ring_scratch_total(const RingScratch* s);

// Ulysses (attention/ulysses.c): the all-to-all staging pair (send, recv) and this rank's heads
// over the whole sequence (heads), each wide enough for the backward's Q|K|V|O|dO (3 S + 2 Skv
// values); the fp32 partial O, then the dQ|dK|dV sums (acc, S + 2 Skv); the heads' LSE and D (L each) and the
// LSE's all-to-all pair. ring_inside (USP): no acc and no D, the Striped ring over the mesh row
// computes instead; its scratch is ring_scratch's for the same S and L (the column's pq Tl
// tokens of NH / pq heads), counted apart.
typedef struct {
    size_t send, recv, heads, acc, lse_heads, lse_send, lse_recv, d;
} UlyssesScratch;
void ulysses_scratch(UlyssesScratch* out, size_t S, size_t Skv, size_t L, size_t real,
                     size_t real_acc, int ring_inside);
size_t ulysses_scratch_total(const UlyssesScratch* s);

#ifdef __cplusplus
}
#endif
