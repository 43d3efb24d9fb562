// The distributed attention schedules' scratch sizes (attention/dist_scratch.h).
#include "attention/dist_scratch.h"

static size_t max_size(size_t x, size_t y) { return x > y ? x : y; }

void attention2d_scratch(Attention2DScratch* out, size_t S, size_t Skv, size_t L, size_t real,
                         size_t real_acc, size_t pq, size_t pkv, size_t keep_kv_layers) {
    const size_t r = real, a = real_acc;
    // The largest block set the row collectives move (Q, Q|dO, O|LSE, dQ).
    out->send = max_size(max_size(S * r, pkv * (S + L) * a), max_size(2 * S * r, pkv * S * a));
    out->recv =
        max_size(max_size(pkv * S * r, pkv * (S + L) * a), max_size(2 * pkv * S * r, S * a));
    out->stats_send = a * 2 * L;
    out->stats_recv = a * 2 * pkv * L;
    out->kv_recv = r * 2 * pq * Skv;
    out->dkv_send = a * 2 * pq * Skv;
    out->dkv_recv = a * 2 * Skv;
    out->kv_own = r * 2 * Skv;
    out->kv_perm = r * 2 * Skv;
    out->kv_full = keep_kv_layers == 0 ? r * 2 * pq * Skv : 0;
    out->kept = r * keep_kv_layers * 2 * pq * Skv;
    out->q_full = r * pkv * S;
    out->do_full = r * pkv * S;
    out->o_full = a * pkv * S;
    out->o_own = a * S;
    out->lse_full = a * pkv * L;
    out->d_full = a * pkv * L;
    out->d_own = a * L;
    out->dq_part = a * pkv * S;
    out->dkv_part = a * 2 * pq * Skv;
    out->dkv_own = a * 2 * Skv;
}

size_t attention2d_scratch_total(const Attention2DScratch* s) {
    return s->send + s->recv + s->stats_send + s->stats_recv + s->kv_recv + s->dkv_send +
           s->dkv_recv + s->kv_own + s->kv_perm + s->kv_full + s->kept + s->q_full + s->do_full +
           s->o_full + s->o_own + s->lse_full + s->d_full + s->d_own + s->dq_part + s->dkv_part +
           s->dkv_own;
}

void attention2d_overlap_scratch(Attention2DOverlapScratch* out, size_t S, size_t Skv, size_t L,
                                 size_t real, size_t real_acc, size_t pq, size_t pkv,
                                 int merges_in_forward) {
    const size_t r = real, a = real_acc;
    out->kv_own = r * 2 * Skv;
    out->rows = r * pkv * 2 * S;
    out->stats = a * pkv * 2 * L;
    out->kv = r * pq * 2 * Skv;
    out->part = a * pkv * (S + L);
    out->dkv = a * pq * 2 * Skv;
    out->step = merges_in_forward ? 0 : a * (S + L);
    out->row_in = a * (S + L);
    out->col_in = a * 2 * Skv;
    out->dkv_own = a * 2 * Skv;
}

size_t attention2d_overlap_scratch_total(const Attention2DOverlapScratch* s) {
    return s->kv_own + s->rows + s->stats + s->kv + s->part + s->dkv + s->step + s->row_in +
           s->col_in + s->dkv_own;
}

void ring_scratch(RingScratch* out, size_t S, size_t Skv, size_t L, size_t real, size_t real_acc,
                  int runs, int merges_in_forward) {
    out->kv = real * 2 * Skv;
    out->dkv = real_acc * 2 * Skv;
    out->o = real_acc * S;
    out->o_step = merges_in_forward ? 0 : real_acc * S;
    out->lse_step = merges_in_forward ? 0 : real_acc * L;
    out->lse_runs = runs > 1 ? real_acc * L : 0;
    out->d_own = real_acc * L;
    out->dq = real_acc * S;
}

size_t ring_scratch_total(const RingScratch* s) {
    return RING_KV_BLOCKS * s->kv + RING_DKV_BLOCKS * s->dkv + s->o + s->o_step + s->lse_step +
           s->lse_runs + s->d_own + s->dq;
}

void ulysses_scratch(UlyssesScratch* out, size_t S, size_t Skv, size_t L, size_t real,
                     size_t real_acc, int ring_inside) {
    out->send = out->recv = out->heads = real * (3 * S + 2 * Skv);
    out->acc = ring_inside ? 0 : real_acc * (S + 2 * Skv);
    out->lse_heads = out->lse_send = out->lse_recv = real_acc * L;
    out->d = ring_inside ? 0 : real_acc * L;
}

size_t ulysses_scratch_total(const UlyssesScratch* s) {
    return s->send + s->recv + s->heads + s->acc + s->lse_heads + s->lse_send + s->lse_recv + s->d;
}
