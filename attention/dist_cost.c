// The formulas of attention2d.md (forward) and the derived backward, in bytes received per rank.
// S = B*Tl*C elements (one shard of Q, O or their gradients), Skv = B*Tl*NKV*HS (one shard of K
// or V or their gradients: S but under grouped-query attention), L = B*NH*Tl (one LSE or D
// shard); a group of n ranks adds (n-1) blocks per gather, reduce-scatter or all-to-all.
#include "attention/dist_cost.h"

#include "comm/fail.h"

#include <stdio.h>
#include <stdlib.h>

static void push(DistCommOps* l, CommKind kind, DistAlong along, DistStage stage,
                 long long bytes, long long messages, long long calls) {
    CHECK(l->n < DIST_MAX_OPS, "caller bug", "more than %d operations in one phase", DIST_MAX_OPS);
    DistCommOp* op = &l->op[l->n++];
    op->kind = kind, op->along = along, op->stage = stage;
    op->bytes = bytes, op->messages = messages, op->calls = calls;
}

// Moving (n-1) blocks of `block` bytes over a group of n ranks: the same bytes and messages
// either way, as one collective of its kind, or (ring != 0, the overlapped schedule) as n-1
// send/recv calls of one message each.
static void exchange(DistCommOps* l, int ring, CommKind kind, DistAlong along, DistStage stage,
                     int n, long long block) {
    if (n <= 1) return;
    if (ring) push(l, COMM_SEND_RECV, along, stage, (n - 1) * block, n - 1, n - 1);
    else push(l, kind, along, stage, (n - 1) * block, n - 1, 1);
}

DistCommOps attention2d_ops(const Mesh* m, CommPhase phase, int B, int Tl, int NH, int NKV,
                            int HS, int keep_kv, size_t act_size, size_t acc_size, int ring) {
    DistCommOps l = {0};
    const long long S = (long long)B * Tl * NH * HS, L = (long long)B * NH * Tl;
    const long long Skv = (long long)B * Tl * NKV * HS;
    const long long Sa = S * act_size, Sc = S * acc_size, Lc = L * acc_size;
    const long long Ka = Skv * act_size, Kc = Skv * acc_size;
    const DistAlong ROW = DIST_ALONG_ROW, COL = DIST_ALONG_COLUMN, T = DIST_ALONG_TRANSPOSE;
    // The permutation fixes rank i iff its row-major position is itself: i = c' + pkv*r' with
    // (r', c') = (i mod pq, i div pq), i.e. the diagonal of a square mesh.
    const int i = m->sp_index, moves = i != i / m->pq + m->pkv * (i % m->pq);
    if (phase == COMM_FORWARD) {
        if (moves) push(&l, COMM_SEND_RECV, T, DIST_STAGE_PERMUTE, 2 * Ka, 1, 1);   // K, V
        exchange(&l, ring, COMM_ALL_GATHER, ROW, DIST_STAGE_GATHER, m->pkv, Sa);        // Q
        exchange(&l, ring, COMM_ALL_GATHER, COL, DIST_STAGE_GATHER, m->pq, 2 * Ka);     // K|V
        exchange(&l, ring, COMM_ALL_TO_ALL, ROW, DIST_STAGE_REDUCE, m->pkv, Sc + Lc);   // O|LSE
    } else if (phase == COMM_BACKWARD) {
        exchange(&l, ring, COMM_ALL_GATHER, ROW, DIST_STAGE_GATHER, m->pkv, 2 * Sa);    // Q|dO
        exchange(&l, ring, COMM_ALL_GATHER, ROW, DIST_STAGE_GATHER, m->pkv, 2 * Lc);    // LSE|D
        if (!keep_kv) {
            if (moves) push(&l, COMM_SEND_RECV, T, DIST_STAGE_PERMUTE, 2 * Ka, 1, 1);
            exchange(&l, ring, COMM_ALL_GATHER, COL, DIST_STAGE_GATHER, m->pq, 2 * Ka);
        }
        exchange(&l, ring, COMM_REDUCE_SCATTER, ROW, DIST_STAGE_REDUCE, m->pkv, Sc);     // dQ
        exchange(&l, ring, COMM_REDUCE_SCATTER, COL, DIST_STAGE_REDUCE, m->pq, 2 * Kc);  // dK|dV
        if (moves) push(&l, COMM_SEND_RECV, T, DIST_STAGE_RETURN, 2 * Kc, 1, 1);   // to the owner
    }
    return l;
}

int ring_steps(RingLayout layout, int P, int Tl, long window, int doc_span) {
    if (layout == RING_CYCLIC) return P;
    long look = (long)P * Tl - 1;   // causal: the first query of the last rank sees T - 1 before
    if (window > 0 && window - 1 < look) look = window - 1;
    if (doc_span > 0 && doc_span - 1 < look) look = doc_span - 1;
    const long chunk = layout == RING_ZIGZAG ? Tl / 2 : Tl;
    const long reach = (look + chunk - 1) / chunk;   // the chunks before a query's own it reaches
    const long steps = layout == RING_ZIGZAG ? 1 + 2 * reach : 1 + reach;
    return steps < P ? (int)steps : P;
}

int ring_step_offset(RingLayout layout, int P, int steps, int s) {
    if (layout != RING_ZIGZAG || steps >= P) return -s;
    const int reach = (steps - 1) / 2;
    return s <= reach ? -s : s - reach;
}

void ring_tour_text(RingLayout layout, int P, int steps, char* buf, size_t n) {
    if (steps <= 1) {
        snprintf(buf, n, "its own block only");
        return;
    }
    const int two_way = layout == RING_ZIGZAG && steps < P, reach = two_way ? (steps - 1) / 2
                                                                            : steps - 1;
    char behind[40] = "rank i-1", ahead[40] = "rank i+1";
    if (reach > 1) {
        snprintf(behind, sizeof behind, "ranks i-1 .. i-%d", reach);
        snprintf(ahead, sizeof ahead, "ranks i+1 .. i+%d", reach);
    }
    if (two_way) snprintf(buf, n, "its own block, then those of %s, then of %s", behind, ahead);
    else snprintf(buf, n, "its own block, then those of %s", behind);
}

int ring_step_origin(RingLayout layout, int P, int steps, int rank, int s) {
    return ((rank + ring_step_offset(layout, P, steps, s)) % P + P) % P;
}

// The ring family's passes of `steps` steps along `along`: K|V, steps-1 hops (in steps-1
// batches backward too); dK|dV, backward: steps hops (the last brings each accumulator home), in
// their own batches (another element type). `runs` rings (USP's chunks of heads) share the
// bytes, each making its own hops.
static void ring_passes(DistCommOps* l, DistAlong along, CommPhase phase, int B, int Tl, int NKV,
                        int HS, int steps, int runs, size_t act_size, size_t acc_size) {
    const long long n = steps, r = runs, S = (long long)B * Tl * NKV * HS;   // a K (or V) shard
    if (n <= 1) return;
    push(l, COMM_SEND_RECV, along, DIST_STAGE_PASS, (n - 1) * 2 * S * act_size, r * (n - 1),
         r * (n - 1));
    if (phase == COMM_BACKWARD)
        push(l, COMM_SEND_RECV, along, DIST_STAGE_PASS, n * 2 * S * acc_size, r * n, r * n);
}

DistCommOps ring_ops(const Mesh* m, CommPhase phase, int B, int Tl, int NH, int NKV, int HS,
                     int steps, size_t act_size, size_t acc_size) {
    DistCommOps l = {0};
    ring_passes(&l, DIST_ALONG_RING, phase, B, Tl, NKV, HS, steps, 1, act_size, acc_size);
    return l;
}

// One exchange of Ulysses: (P-1) blocks of `block` bytes per rank, in `chunks` all-to-alls.
static void all_to_alls(DistCommOps* l, DistAlong along, DistStage stage, int P, int chunks,
                        long long block) {
    if (P > 1)
        push(l, COMM_ALL_TO_ALL, along, stage, (P - 1) * block, (long long)(P - 1) * chunks, chunks);
}

// Ulysses' all-to-alls over a group of P ranks (`along`), a phase's inputs (`in`: before the
// heads' computation) or its outputs (the rest). Per peer: one shard's rows (B Tl) in the columns
// of its NH / P query heads (S) and NKV / P key/value heads (K).
static void ulysses_exchanges(DistCommOps* l, DistAlong along, int P, CommPhase phase, int in,
                              int B, int Tl, int NH, int NKV, int HS, int chunks, size_t act_size,
                              size_t acc_size) {
    const long long S = (long long)B * Tl * NH * HS / P, L = (long long)B * NH * Tl / P;
    const long long K = (long long)B * Tl * NKV * HS / P;
    const DistStage GATHER = DIST_STAGE_GATHER, REDUCE = DIST_STAGE_REDUCE;
    if (phase == COMM_FORWARD && in) {
        all_to_alls(l, along, GATHER, P, chunks, (S + 2 * K) * act_size);       // Q|K|V
    } else if (phase == COMM_FORWARD) {
        all_to_alls(l, along, REDUCE, P, chunks, S * act_size);                 // O
        all_to_alls(l, along, REDUCE, P, chunks, L * acc_size);                 // LSE
    } else if (phase == COMM_BACKWARD && in) {
        all_to_alls(l, along, GATHER, P, chunks, (3 * S + 2 * K) * act_size);   // Q|K|V|O|dO
        all_to_alls(l, along, GATHER, P, chunks, L * acc_size);                 // LSE
    } else if (phase == COMM_BACKWARD) {
        all_to_alls(l, along, REDUCE, P, chunks, (S + 2 * K) * act_size);       // dQ|dK|dV
    }
}

DistCommOps ulysses_ops(const Mesh* m, CommPhase phase, int B, int Tl, int NH, int NKV, int HS,
                        int chunks, size_t act_size, size_t acc_size) {
    DistCommOps l = {0};
    for (int in = 1; in >= 0; in--)
        ulysses_exchanges(&l, DIST_ALONG_SP, m->P, phase, in, B, Tl, NH, NKV, HS, chunks,
                          act_size, acc_size);
    return l;
}

DistCommOps usp_ops(const Mesh* m, CommPhase phase, int B, int Tl, int NH, int NKV, int HS,
                    int chunks, size_t act_size, size_t acc_size) {
    DistCommOps l = {0};
    const DistAlong COL = DIST_ALONG_COLUMN;
    ulysses_exchanges(&l, COL, m->pq, phase, 1, B, Tl, NH, NKV, HS, chunks, act_size, acc_size);
    ring_passes(&l, DIST_ALONG_ROW, phase, B, m->pq * Tl, NKV / m->pq, HS, m->pkv, chunks,
                act_size, acc_size);
    ulysses_exchanges(&l, COL, m->pq, phase, 0, B, Tl, NH, NKV, HS, chunks, act_size, acc_size);
    return l;
}

CommVolume dist_comm_volume(const DistCommOps* l) {
    CommVolume v = {0};
    for (int k = 0; k < l->n; k++) {
        CommCount* c = &v.kind[l->op[k].kind];
        c->bytes += l->op[k].bytes;
        c->messages += l->op[k].messages;
        c->calls += l->op[k].calls;
    }
    return v;
}

CommVolume attention2d_volume(const Mesh* m, CommPhase phase, int B, int Tl, int NH, int NKV,
                              int HS, int keep_kv, size_t act_size, size_t acc_size) {
    const DistCommOps l =
        attention2d_ops(m, phase, B, Tl, NH, NKV, HS, keep_kv, act_size, acc_size, 0);
    return dist_comm_volume(&l);
}

CommVolume attention2d_overlap_volume(const Mesh* m, CommPhase phase, int B, int Tl, int NH,
                                      int NKV, int HS, size_t act_size, size_t acc_size) {
    const DistCommOps l = attention2d_ops(m, phase, B, Tl, NH, NKV, HS, 0, act_size, acc_size, 1);
    return dist_comm_volume(&l);
}

CommVolume ulysses_volume(const Mesh* m, CommPhase phase, int B, int Tl, int NH, int NKV, int HS,
                          int chunks, size_t act_size, size_t acc_size) {
    const DistCommOps l = ulysses_ops(m, phase, B, Tl, NH, NKV, HS, chunks, act_size, acc_size);
    return dist_comm_volume(&l);
}

CommVolume usp_volume(const Mesh* m, CommPhase phase, int B, int Tl, int NH, int NKV, int HS,
                      int chunks, size_t act_size, size_t acc_size) {
    const DistCommOps l = usp_ops(m, phase, B, Tl, NH, NKV, HS, chunks, act_size, acc_size);
    return dist_comm_volume(&l);
}

CommVolume ring_volume(const Mesh* m, CommPhase phase, int B, int Tl, int NH, int NKV, int HS,
                       int steps, size_t act_size, size_t acc_size) {
    const DistCommOps l = ring_ops(m, phase, B, Tl, NH, NKV, HS, steps, act_size, acc_size);
    return dist_comm_volume(&l);
}

long long attention_visible_pairs(const AttentionProblem* p) {
    long long pairs = 0;
    for (int i = 0; i < p->Tq; i++) {
        const long qp = p->qpos.off + p->qpos.stride * i;
        const int begin = attention_key_begin(p, 0, qp), end = attention_key_end(p, qp);
        if (end > begin) pairs += end - begin;
    }
    return pairs;
}

long long window_visible_pairs(long T, long window) {
    if (window <= 0 || window >= T) return T * (T + 1) / 2;
    return window * (window + 1) / 2 + (T - window) * window;
}

long long attention2d_visible_pairs(int pq, int pkv, int r, int c, long T, long window,
                                    const int* doc_start) {
    AttentionProblem p = {.B = 1, .NH = 1, .NKV = 1, .HS = 1, .Tq = (int)(T / pq), .Tk = (int)(T / pkv),
                          .qpos = {r, pq}, .kpos = {c, pkv}, .window = window,
                          .docs = {.start = doc_start, .T = (int)T}};
    return attention_visible_pairs(&p);
}

void attention2d_row_visible_pairs(int pq, int pkv, int r, long T, long window,
                                   const int* doc_start, long long* per_column) {
    long long every = 0;   // keys each column gives every query so far
    // +1 / -1 where a run of columns that get one key more begins / ends
    long long* edge = xcalloc((size_t)pkv + 1, sizeof *edge, "column pair counts");
    for (long t = r; t < T; t += pq) {
        long lo = window > 0 && t - window + 1 > 0 ? t - window + 1 : 0;
        if (doc_start && doc_start[t] > lo) lo = doc_start[t];
        const long len = t - lo + 1, extra = len % pkv, first = lo % pkv;
        every += len / pkv;
        if (!extra) continue;
        edge[first]++;
        if (first + extra <= pkv) {
            edge[first + extra]--;
        } else {   // the run wraps past column pkv - 1 to column 0
            edge[pkv]--;
            edge[0]++;
            edge[first + extra - pkv]--;
        }
    }
    long long run = 0;
    for (int c = 0; c < pkv; c++) {
        run += edge[c];
        per_column[c] = every + run;
    }
    free(edge);
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

// Over the ring's P steps a rank's queries meet every origin's keys once, and the origins'
// pieces partition the sequence: its pairs are those of its query pieces against all T keys.
long long ring_visible_pairs(RingLayout layout, int P, int rank, long T, long window,
                             const int* doc_start) {
    long long pairs = 0;
    TokenPositions q[2];
    int qlen;
    const int nq = ring_pieces(layout, P, rank, T, q, &qlen);
    for (int a = 0; a < nq; a++) {
        AttentionProblem p = {.B = 1, .NH = 1, .NKV = 1, .HS = 1, .Tq = qlen, .Tk = (int)T, .qpos = q[a],
                              .kpos = {0, 1}, .window = window,
                              .docs = {.start = doc_start, .T = (int)T}};
        pairs += attention_visible_pairs(&p);
    }
    return pairs;
}

long long attention_tile_pairs(const AttentionProblem* p, AttentionTile tile) {
    long long pairs = 0;
    for (int i0 = 0; i0 < p->Tq; i0 += tile.rows) {
        const int nq = p->Tq - i0 < tile.rows ? p->Tq - i0 : tile.rows;
        int begin, end;
        attention_tile_keys(p, 0, i0, nq, &begin, &end);
        if (end <= begin) continue;
        begin -= begin % tile.keys;
        end += (tile.keys - end % tile.keys) % tile.keys;
        pairs += (long long)nq * ((end < p->Tk ? end : p->Tk) - begin);
    }
    return pairs;
}

// The partial-attention call of one sequence and head under the window and documents.
static AttentionProblem pair_call(int Tq, int Tk, TokenPositions q, TokenPositions k, long T,
                                  long window, const int* doc_start) {
    AttentionProblem p = attention_problem(1, 1, 1, Tq, Tk, q, k);
    p.window = window;
    p.docs.start = doc_start;
    p.docs.T = (int)T;
    return p;
}

long long attention2d_tile_pairs(int pq, int pkv, int r, int c, long T, long window,
                                 const int* doc_start, int overlap, AttentionTile tile) {
    if (!overlap) {
        const AttentionProblem p = pair_call((int)(T / pq), (int)(T / pkv), token_positions(r, pq),
                                             token_positions(c, pkv), T, window, doc_start);
        return attention_any_visible(&p) ? attention_tile_pairs(&p, tile) : 0;
    }
    // attention/attention2d_overlap.c: Q block g of row r (positions r + pq g, stride P) against
    // K|V block h of column c (c + pkv h, stride P), every g < pkv and h < pq
    const int P = pq * pkv, Tl = (int)(T / P);
    long long pairs = 0;
    for (int g = 0; g < pkv; g++)
        for (int h = 0; h < pq; h++) {
            const AttentionProblem p = pair_call(Tl, Tl, token_positions(r + (long)pq * g, P),
                                                 token_positions(c + (long)pkv * h, P), T, window,
                                                 doc_start);
            if (attention_any_visible(&p)) pairs += attention_tile_pairs(&p, tile);
        }
    return pairs;
}

long long attention_causal_tile_pairs(long n, AttentionTile tile) {
    return attention2d_tile_pairs(1, 1, 0, 0, n, 0, NULL, 0, tile);
}

long long ring_tile_pairs(RingLayout layout, int P, int rank, int steps, long T, long window,
                          const int* doc_start, AttentionTile tile) {
    TokenPositions q[2], k[2];
    int n;
    const int runs = ring_pieces(layout, P, rank, T, q, &n);
    long long pairs = 0;
    for (int s = 0; s < steps; s++) {
        ring_pieces(layout, P, ring_step_origin(layout, P, steps, rank, s), T, k, &n);
        for (int a = 0; a < runs; a++)
            for (int b = 0; b < runs; b++) {
                const AttentionProblem p = pair_call(n, n, q[a], k[b], T, window, doc_start);
                if (attention_any_visible(&p)) pairs += attention_tile_pairs(&p, tile);
            }
    }
    return pairs;
}

long long tree_decode_bytes(int P, int rank, int NH, int HS, size_t acc_size) {
    const long long part = ((long long)NH * HS + NH) * (long long)acc_size;
    int P2 = 1, steps = 0;
    while (P2 * 2 <= P) P2 *= 2, steps++;
    if (rank >= P2) return part;
    return steps * part + (rank + P2 < P ? part : 0);
}

long long ring_decode_bytes(long n, long n_rank, int NKV, int HS, size_t act_size) {
    return (n - n_rank) * 2LL * NKV * HS * (long long)act_size;
}
