// The formulas of attention2d.md (forward) and the derived backward, in bytes received per rank.
// S = B*Tl*C elements (one shard of Q, K, V, O or their gradients), L = B*NH*Tl (one LSE or D
// shard); a group of n ranks adds (n-1) blocks per gather, reduce-scatter or all-to-all.
#include "attention/dist_cost.h"

static void add(CommVolume* v, CommKind kind, long long bytes, long long messages,
                long long calls) {
    v->kind[kind].bytes += bytes;
    v->kind[kind].messages += messages;
    v->kind[kind].calls += calls;
}

// How ATTENTION2D moves the blocks of a row or column: one collective of its kind, or a ring of
// point-to-point passes (the overlapped schedule), one send/recv call per step.
typedef enum { AS_COLLECTIVE, AS_RING } Exchange;

// Moving (n-1) blocks of `block` bytes over a group of n ranks: the same bytes and messages
// either way, counted under the collective's kind in one call, or as n-1 send/recv calls.
static void collective(CommVolume* v, Exchange how, CommKind kind, int n, long long block) {
    if (n <= 1) return;
    if (how == AS_RING) add(v, COMM_SEND_RECV, (n - 1) * block, n - 1, n - 1);
    else add(v, kind, (n - 1) * block, n - 1, 1);
}

// One K|V (or dK|dV) shard to or from the transposed mesh position.
static void permutation(CommVolume* v, int moves, long long bytes) {
    if (moves) add(v, COMM_SEND_RECV, bytes, 1, 1);
}

// ATTENTION2D's volume, shared by both schedules (the overlapped one keeps no K/V).
static CommVolume volume_2d(const Mesh* m, CommPhase phase, int B, int Tl, int NH, int HS,
                            int keep_kv, size_t act_size, size_t acc_size, Exchange how) {
    CommVolume v = {0};
    const long long S = (long long)B * Tl * NH * HS, L = (long long)B * NH * Tl;
    const long long Sa = S * act_size, Sc = S * acc_size, Lc = L * acc_size;
    // The permutation fixes rank i iff its row-major position is itself: i = c' + pkv*r' with
    // (r', c') = (i mod pq, i div pq), i.e. the diagonal of a square mesh.
    const int i = m->sp_index, moves = i != i / m->pq + m->pkv * (i % m->pq);
    if (phase == COMM_FORWARD) {
        permutation(&v, moves, 2 * Sa);                              // K, V to the transposed rank
        collective(&v, how, COMM_ALL_GATHER, m->pkv, Sa);            // Q along the row
        collective(&v, how, COMM_ALL_GATHER, m->pq, 2 * Sa);         // K|V along the column
        collective(&v, how, COMM_ALL_TO_ALL, m->pkv, Sc + Lc);       // O | LSE along the row
    } else if (phase == COMM_BACKWARD) {
        collective(&v, how, COMM_ALL_GATHER, m->pkv, 2 * Sa);        // Q | dO along the row
        collective(&v, how, COMM_ALL_GATHER, m->pkv, 2 * Lc);        // LSE | D along the row
        if (!keep_kv) {
            permutation(&v, moves, 2 * Sa);
            collective(&v, how, COMM_ALL_GATHER, m->pq, 2 * Sa);
        }
        collective(&v, how, COMM_REDUCE_SCATTER, m->pkv, Sc);        // dQ along the row
        collective(&v, how, COMM_REDUCE_SCATTER, m->pq, 2 * Sc);     // dK|dV along the column
        permutation(&v, moves, 2 * Sc);                              // dK, dV back to their owner
    }
    return v;
}

CommVolume attention2d_volume(const Mesh* m, CommPhase phase, int B, int Tl, int NH, int HS,
                              int keep_kv, size_t act_size, size_t acc_size) {
    return volume_2d(m, phase, B, Tl, NH, HS, keep_kv, act_size, acc_size, AS_COLLECTIVE);
}

CommVolume attention2d_overlap_volume(const Mesh* m, CommPhase phase, int B, int Tl, int NH,
                                      int HS, size_t act_size, size_t acc_size) {
    return volume_2d(m, phase, B, Tl, NH, HS, 0, act_size, acc_size, AS_RING);
}

CommVolume ring_volume(const Mesh* m, CommPhase phase, int B, int Tl, int NH, int HS,
                       size_t act_size, size_t acc_size) {
    CommVolume v = {0};
    const long long P = m->P, S = (long long)B * Tl * NH * HS;
    if (P == 1) return v;
    if (phase == COMM_FORWARD) {
        add(&v, COMM_SEND_RECV, (P - 1) * 2 * S * act_size, P - 1, P - 1);   // K|V: P-1 hops
    } else if (phase == COMM_BACKWARD) {
        // K|V: P-1 hops in P-1 batches; dK|dV: P hops (the last brings each accumulator home),
        // in their own batches (another element type).
        add(&v, COMM_SEND_RECV, (P - 1) * 2 * S * act_size, P - 1, P - 1);
        add(&v, COMM_SEND_RECV, P * 2 * S * acc_size, P, P);
    }
    return v;
}

long long attention_visible_pairs(const AttentionProblem* p) {
    long long pairs = 0;
    for (int i = 0; i < p->Tq; i++) {
        const long rel = p->qpos.off + p->qpos.stride * i - p->kpos.off;
        if (rel < 0) continue;
        const long n = rel / p->kpos.stride + 1;
        pairs += n < p->Tk ? n : p->Tk;
    }
    return pairs;
}

long long attention2d_visible_pairs(int pq, int pkv, int r, int c, long T) {
    AttentionProblem p = {.B = 1, .NH = 1, .HS = 1, .Tq = (int)(T / pq), .Tk = (int)(T / pkv),
                          .qpos = {r, pq}, .kpos = {c, pkv}};
    return attention_visible_pairs(&p);
}

// Positions of SP rank `rank`'s local tokens in a ring layout, as `pieces` contiguous or strided
// runs of `len` tokens each (zigzag: two chunks of Tl/2).
static int ring_pieces(RingLayout layout, int P, int rank, long T, TokenPositions* piece, int* len) {
    const int Tl = (int)(T / P);
    if (layout == RING_ZIGZAG) {
        *len = Tl / 2;
        piece[0] = (TokenPositions){(long)rank * (Tl / 2), 1};
        piece[1] = (TokenPositions){(long)(2 * P - 1 - rank) * (Tl / 2), 1};
        return 2;
    }
    *len = Tl;
    piece[0] = layout == RING_CONTIGUOUS ? (TokenPositions){(long)rank * Tl, 1}
                                         : (TokenPositions){rank, P};
    return 1;
}

long long ring_visible_pairs(RingLayout layout, int P, int rank, long T) {
    long long pairs = 0;
    TokenPositions q[2], k[2];
    int qlen, klen;
    const int nq = ring_pieces(layout, P, rank, T, q, &qlen);
    for (int origin = 0; origin < P; origin++) {
        const int nk = ring_pieces(layout, P, origin, T, k, &klen);
        for (int a = 0; a < nq; a++)
            for (int b = 0; b < nk; b++) {
                AttentionProblem p = {.B = 1, .NH = 1, .HS = 1, .Tq = qlen, .Tk = klen,
                                      .qpos = q[a], .kpos = k[b]};
                pairs += attention_visible_pairs(&p);
            }
    }
    return pairs;
}
