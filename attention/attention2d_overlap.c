// ATTENTION2D (arXiv 2503.15758), the paper's OVERLAPPED variant, on a pq x pkv mesh: the token
// layout, work split and results of attention2d.c (attention2d.md), but each collective is a ring
// of point-to-point passes inside a row or a column (comm_start / comm_wait), and every block is
// computed with as soon as it is in hand, while the next ones travel.
//
// Rank (r, c), SP index i = r + pq*c, holds the tokens t = i + P*j (cyclic). S = B*Tl*C elements
// (one shard), L = B*NH*Tl (one LSE shard). K and V have KVC = NKV*HS channels each (C, or fewer
// under grouped-query attention), so a K|V block is 2Skv = 2 B*Tl*KVC elements; the byte and
// memory formulas below are those of multi-head attention (Skv = S). Blocks are named by RELATIVE index, the order in
// which they arrive: Q block a is the one of row member g = (c - a) mod pkv (queries at
// positions i_g + P*j, i_g = r + pq*g), K|V block b the permuted shard held by column member
// h = (r - b) mod pq (the shard of SP rank c + pkv*h, keys at c + pkv*h + P*j). Block 0 is the
// rank's own; block s+1 arrives in round s. The pkv*pq = P pairs (a, b), Tl x Tl problems each,
// tile the rank's (pkv*Tl) x (pq*Tl) block of the scores Q K^T exactly as attention2d's single
// call (query m = g + pkv*j of row r is Q block g's query j; key n = h + pq*j likewise).
//
// Forward:
//   1. K|V permutation (MESH_SP, one send/recv; a copy on the ranks it fixes), as attention2d.
//   2. Rounds s = 0 .. max(pq, pkv)-1: post the passes of the two gather rings (s < pkv-1: Q
//      block s to row member c+1, Q block s+1 from c-1; s < pq-1: K|V block s to column member
//      r+1, block s+1 from r-1), compute the pairs with max(a, b) = s into the per-Q-block
//      partial (O | LSE), merging each pair in with the LSE merge, then wait for the passes.
//   3. The output ring reduce-scatter along the row (pkv-1 steps) runs inside the rounds: step
//      k sends the partial of Q block k+1 (for k > 0 already merged with what arrived at step
//      k-1) to c+1, receives that of block k+2 from c-1 and merges it into this rank's partial
//      of that block. A step starts as soon as the block it sends is complete and is waited for
//      once the block it merges into is, so the early steps overlap the compute of later
//      blocks. After the last step block 0, the rank's own queries, is merged over the row.
// Backward (the mirror): D = rowsum(dO * O) locally; rounds as above with (Q | dO) (real) and
// (LSE | D) (real_acc) passed along the row and the permuted K|V along the column; each pair
// accumulates dQ into its Q block and dK|dV into its K|V block; ring reduce-scatters (sum) of dQ
// along the row (-> Q block 0) and of dK|dV along the column (-> K|V block 0, the permuted
// shard), each inside the rounds; then the inverse permutation, as attention2d.
//
// Compute order: pairs sorted by (round, a, b) with block 0 ranked last in both, so Q blocks
// complete in the order the row reduce needs them (1, 2, ..., pkv-1, 0) and K|V blocks in the
// order the column reduce needs (1, ..., pq-1, 0), as far as the rounds allow. Every rank runs
// the same sequence of comm operations (it depends on pq, pkv only), which keeps transports that
// serialise operations or block in them deadlock-free.
//
// Bytes received per rank and layer equal attention2d's without kept K/V (dist_cost.c), each
// ring step one send/recv call of one message (0 messages on groups of one):
//   forward  permutation 2S act; Q (pkv-1) x S act; K|V (pq-1) x 2S act;
//            O|LSE (pkv-1) x (S+L) acc
//   backward Q|dO (pkv-1) x 2S act; LSE|D (pkv-1) x 2L acc; permutation 2S act;
//            K|V (pq-1) x 2S act; dQ (pkv-1) x S acc; dK|dV (pq-1) x 2S acc;
//            inverse permutation 2S acc
// (act, acc: bytes of real and real_acc; the permutations move nothing on the ranks they fix.)
// A reduce starts when its first block is complete, i.e. after the other group's gather ring has
// ended, so at most 3 batches are in flight at once (backward: the two row passes with the column
// pass or with a dQ reduce step). Memory, every block kept: Q|dO pkv x 2S and K|V pq x 2S (real),
// partial O|LSE or dQ pkv x (S+L), LSE|D pkv x 2L, dK|dV pq x 2S (real_acc), plus O(S) scratch:
// O(T/sqrt(P)) on a square mesh, like attention2d's gathered blocks.
#include <stdlib.h>
#include <string.h>

#include "attention/attention2d_grid.h"
#include "attention/dist_attention.h"
#include "attention/dist_bounds.h"
#include "attention/dist_ops.h"
#include "attention/dist_scratch.h"
#include "comm/fail.h"

// One (Q block, K|V block) pair of the compute order, and what finishing it completes.
typedef struct {
    int a, b;       // relative Q and K|V block
    int round;      // max(a, b): the first round both blocks are in hand
    int q_first;    // first pair of Q block a (forward: writes the partial instead of merging)
    int q_last;     // last pair of Q block a: its partial output or dQ is complete
    int kv_last;    // last pair of K|V block b: its dK|dV is complete
} Pair;

typedef enum { REDUCE_MERGE, REDUCE_SUM } ReduceOp;

// Shapes of one call.
typedef struct {
    int B, Tl, NH, NKV, HS, C;
    int KVC, W;       // channels of K (and of V), of a qkv row
    size_t S, Skv, L; // elements of a Q shard, of a K (or V) shard, of an LSE shard
    long rows;   // B * Tl
    long window; // the layer's sliding window (0: causal)
} Shape;

// A ring reduce-scatter over a row or column of n ranks, advanced as blocks complete. Block a
// (relative index) is `count` accumulators at blocks + a*count; MERGE blocks are O (S) | LSE (L).
typedef struct {
    MeshGroup group;
    int n;
    ReduceOp op;
    real_acc* blocks;
    size_t count;
    real_acc* arrived;   // what the step in flight receives
    int posted, waited;  // steps started and finished (n-1 in all)
    CommRequest* req;
    Shape shape;
} RingReduce;

typedef struct {
    AttentionLayer base;
    Comm* comm;
    Attention2DGrid g;   // place in the grid, K/V permutation peers
    DistBounds max;    // shapes the scratch is sized for
    CommType rt, at;   // comm types of real and real_acc
    int rounds;        // max(pq, pkv)
    Pair* order;       // the P pairs in compute order (host memory)
    int* q_done;       // pkv flags: Q block complete in this call
    int* kv_done;      // pq flags: K|V block complete
    // scratch, sized at the bounds, in the backend's memory; blocks at the call's stride
    real* kv_own;       // (B, Tl, 2KVC) this rank's K|V rows (permutation send)
    real* rows;         // pkv x Q (S) in forward, pkv x (Q | dO) (2S) in backward
    real_acc* stats;    // pkv x (LSE | D) (2L)
    real* kv;           // pq x (B, Tl, 2KVC) K|V blocks of column c
    real_acc* part;     // pkv x partial (O | LSE) (S+L) in forward, pkv x dQ (S) in backward
    real_acc* dkv;      // pq x (B, Tl, 2KVC) dK|dV
    real_acc* step;     // (O | LSE) of one pair before it is merged (NULL: merged in the forward)
    real_acc* row_in;   // (S+L) what a row reduce step receives
    real_acc* col_in;   // (2Skv) what a column reduce step receives
    real_acc* dkv_own;  // (B, Tl, 2KVC) dK|dV of the local keys (inverse permutation receive)
} Attention2DOverlap;

static Shape call_shape(int B, int Tl, int NH, int NKV, int HS, long window) {
    Shape s;
    s.window = window;
    s.B = B, s.Tl = Tl, s.NH = NH, s.NKV = NKV, s.HS = HS, s.C = NH * HS;
    s.KVC = NKV * HS, s.W = attention_qkv_width(NH, NKV, HS);
    s.S = (size_t)B * Tl * s.C;
    s.Skv = (size_t)B * Tl * s.KVC;
    s.L = (size_t)B * NH * Tl;
    s.rows = (long)B * Tl;
    return s;
}

static int mod(int x, int n) { return ((x % n) + n) % n; }

// Q block a against K|V block b, with the absolute positions of both.
static AttentionProblem pair_problem(const Attention2DOverlap* a, const Shape* sh, int qa, int kb) {
    const int g = mod(a->g.c - qa, a->g.pkv), h = mod(a->g.r - kb, a->g.pq);
    AttentionProblem p = attention_problem(sh->B, sh->NH, sh->HS, sh->Tl, sh->Tl,
                                           token_positions(a->g.r + a->g.pq * g, a->g.P),
                                           token_positions(a->g.c + a->g.pkv * h, a->g.P));
    p.NKV = sh->NKV;
    p.window = sh->window;
    p.docs = a->base.docs;
    return p;
}

// Sends (rows, w) elements of type t from `from` to SP rank peer_send and receives as many from
// peer_recv into `to`; on a rank the permutation fixes (peer_send == i) it is a local copy.
static void permute(Attention2DOverlap* a, const void* from, void* to, int peer_send,
                    int peer_recv, long rows, int w, CommType t) {
    if (peer_send == a->g.i) {
        dist_copy_rows(to, w, from, w, rows, w, comm_type_size(t));
        return;
    }
    const size_t n = (size_t)rows * w;
    CommTransfer send, recv;
    send.peer = peer_send, send.buf = (void*)from, send.count = n;
    recv.peer = peer_recv, recv.buf = to, recv.count = n;
    comm_wait(a->comm, comm_start(a->comm, MESH_SP, t, &send, 1, &recv, 1));
}

// One ring step along g: `count` elements of `send` to the next member, as many from the
// previous one into `recv`.
static CommRequest* pass_on(Comm* comm, MeshGroup g, CommType t, const void* send, void* recv,
                            size_t count) {
    const int n = comm_size(comm, g), me = comm_rank(comm, g);
    CommTransfer out, in;
    out.peer = (me + 1) % n, out.buf = (void*)send, out.count = count;
    in.peer = (me + n - 1) % n, in.buf = recv, in.count = count;
    return comm_start(comm, g, t, &out, 1, &in, 1);
}

static RingReduce ring_reduce(Comm* comm, MeshGroup g, ReduceOp op, real_acc* blocks,
                              size_t count, real_acc* arrived, const Shape* sh) {
    RingReduce rr;
    rr.group = g;
    rr.n = comm_size(comm, g);
    rr.op = op;
    rr.blocks = blocks;
    rr.count = count;
    rr.arrived = arrived;
    rr.posted = rr.waited = 0;
    rr.req = NULL;
    rr.shape = *sh;
    return rr;
}

// Folds what arrived into this rank's block `into`: the LSE merge of two partials, or a sum.
static void reduce_combine(RingReduce* rr, int into) {
    real_acc* own = rr->blocks + (size_t)into * rr->count;
    if (rr->op == REDUCE_SUM) {
        dist_add_acc(own, rr->arrived, rr->count);
        return;
    }
    const Shape* s = &rr->shape;
    dist_attention_merge(s->B, s->NH, s->HS, s->Tl, own, s->C, own + s->S, rr->arrived, s->C,
                         rr->arrived + s->S);
}

// Moves the reduce as far as the completed blocks allow: step k sends block k+1 and may only
// be finished once block k+2 (mod n; block 0 last) is complete, because it merges into it.
static void reduce_advance(Comm* comm, RingReduce* rr, const int* done) {
    while (rr->waited < rr->n - 1) {
        if (rr->posted == rr->waited) {
            // Step 0 sends a block of this rank's own; later ones what the last step merged.
            if (rr->posted == 0 && !done[1]) return;
            rr->req = pass_on(comm, rr->group, dist_acc_comm_type(),
                              rr->blocks + (size_t)(rr->posted + 1) * rr->count, rr->arrived,
                              rr->count);
            rr->posted++;
        } else {
            const int into = (rr->waited + 2) % rr->n;
            if (!done[into]) return;
            comm_wait(comm, rr->req);
            rr->req = NULL;
            reduce_combine(rr, into);
            rr->waited++;
        }
    }
}

// Starts round s's passes of the gather rings into req; returns how many. Backward passes
// (Q | dO) and (LSE | D) along the row in two batches (two element types).
static int start_passes(Attention2DOverlap* a, const Shape* sh, CommPhase phase, int s,
                        CommRequest* req[3]) {
    int n = 0;
    if (s < a->g.pkv - 1) {
        const size_t q = phase == COMM_FORWARD ? sh->S : 2 * sh->S;
        req[n++] = pass_on(a->comm, MESH_ROW, a->rt, a->rows + s * q, a->rows + (s + 1) * q, q);
        if (phase == COMM_BACKWARD) {
            const size_t st = 2 * sh->L;
            req[n++] = pass_on(a->comm, MESH_ROW, a->at, a->stats + s * st,
                               a->stats + (s + 1) * st, st);
        }
    }
    if (s < a->g.pq - 1) {
        const size_t kv = 2 * sh->Skv;
        req[n++] = pass_on(a->comm, MESH_COL, a->rt, a->kv + s * kv, a->kv + (s + 1) * kv, kv);
    }
    return n;
}

// Forward of one pair into Q block a's partial (O | LSE). The first pair of a block writes it
// even when every key is masked (an empty partial, LSE = -inf, which merges); later pairs are
// merged in, and skipped when masked for every query.
static void forward_pair(Attention2DOverlap* a, const Shape* sh, const Pair* pr) {
    const AttentionProblem p = pair_problem(a, sh, pr->a, pr->b);
    const int C = sh->C, KVC = sh->KVC;
    const real* q = a->rows + pr->a * sh->S;
    const real* kv = a->kv + pr->b * 2 * sh->Skv;
    real_acc* o = a->part + pr->a * (sh->S + sh->L);
    if (pr->q_first) {
        dist_attention_forward(&p, q, C, kv, 2 * KVC, kv + KVC, 2 * KVC, o, C, o + sh->S);
    } else if (attention_any_visible(&p)) {
        dist_attention_forward_merge(&p, q, C, kv, 2 * KVC, kv + KVC, 2 * KVC, o, C, o + sh->S,
                                     a->step, a->step ? a->step + sh->S : NULL);
    }
}

// Backward of one pair: accumulates into Q block a's dQ and K|V block b's dK|dV.
static void backward_pair(Attention2DOverlap* a, const Shape* sh, const Pair* pr) {
    const AttentionProblem p = pair_problem(a, sh, pr->a, pr->b);
    if (!attention_any_visible(&p)) return;
    const int C = sh->C, KVC = sh->KVC;
    const real* qdo = a->rows + pr->a * 2 * sh->S;
    const real_acc* st = a->stats + pr->a * 2 * sh->L;
    const real* kv = a->kv + pr->b * 2 * sh->Skv;
    real_acc* dq = a->part + pr->a * sh->S;
    real_acc* dkv = a->dkv + pr->b * 2 * sh->Skv;
    dist_attention_backward(&p, qdo, C, kv, 2 * KVC, kv + KVC, 2 * KVC, qdo + sh->S, C, st,
                            st + sh->L, dq, C, dkv, 2 * KVC, dkv + KVC, 2 * KVC);
}

// The rounds of one phase: gather passes, the pairs that became available, and the reduces
// (col_reduce: backward only) advanced whenever a block completes.
static void run_rounds(Attention2DOverlap* a, const Shape* sh, CommPhase phase,
                       RingReduce* row_reduce, RingReduce* col_reduce) {
    memset(a->q_done, 0, sizeof(int) * a->g.pkv);
    memset(a->kv_done, 0, sizeof(int) * a->g.pq);
    int k = 0;
    for (int s = 0; s < a->rounds; s++) {
        CommRequest* req[3];
        const int nreq = start_passes(a, sh, phase, s, req);
        for (; k < a->g.P && a->order[k].round == s; k++) {
            const Pair* pr = &a->order[k];
            if (phase == COMM_FORWARD) forward_pair(a, sh, pr);
            else backward_pair(a, sh, pr);
            if (pr->q_last) {
                a->q_done[pr->a] = 1;
                reduce_advance(a->comm, row_reduce, a->q_done);
            }
            if (pr->kv_last && col_reduce) {
                a->kv_done[pr->b] = 1;
                reduce_advance(a->comm, col_reduce, a->kv_done);
            }
        }
        for (int j = 0; j < nreq; j++) comm_wait(a->comm, req[j]);
    }
    // Every block completes by the last round, and each completion advances its reduce.
    CHECK(row_reduce->waited == row_reduce->n - 1 &&
              (!col_reduce || col_reduce->waited == col_reduce->n - 1),
          "schedule bug", "attention2d-overlap: a ring reduce-scatter did not finish");
}

static void overlap_forward(AttentionLayer* self, int layer, long window, int B, int Tl, int NH,
                            int NKV, int HS, const real* qkv, real* out, real_stat* lse) {
    Attention2DOverlap* a = (Attention2DOverlap*)self;
    dist_bounds_check(&a->max, a->base.name, B, Tl, NH, NKV, HS);
    const CommScope saved = comm_enter_scope(a->comm, layer, COMM_FORWARD);
    const Shape sh = call_shape(B, Tl, NH, NKV, HS, window);
    const int C = sh.C, KVC = sh.KVC;

    // Own blocks: Q block 0, and K|V block 0 after the permutation.
    dist_copy_rows(a->rows, C, qkv, sh.W, sh.rows, C, sizeof(real));
    dist_copy_rows(a->kv_own, 2 * KVC, qkv + C, sh.W, sh.rows, 2 * KVC, sizeof(real));
    permute(a, a->kv_own, a->kv, a->g.perm_dst, a->g.perm_src, sh.rows, 2 * KVC, a->rt);

    RingReduce o_reduce =
        ring_reduce(a->comm, MESH_ROW, REDUCE_MERGE, a->part, sh.S + sh.L, a->row_in, &sh);
    run_rounds(a, &sh, COMM_FORWARD, &o_reduce, NULL);

    // Q block 0 is the local queries', merged over the row.
    dist_acc_to_real(out, C, a->part, C, sh.rows, C);
    dist_copy_rows(lse, (long)sh.L, a->part + sh.S, (long)sh.L, 1, (int)sh.L, sizeof(real_acc));
    comm_leave_scope(a->comm, saved);
}

static void overlap_backward(AttentionLayer* self, int layer, long window, int B, int Tl, int NH,
                             int NKV, int HS, const real* qkv, const real* out,
                             const real_stat* lse, const real* dout, real* dqkv) {
    Attention2DOverlap* a = (Attention2DOverlap*)self;
    dist_bounds_check(&a->max, a->base.name, B, Tl, NH, NKV, HS);
    const CommScope saved = comm_enter_scope(a->comm, layer, COMM_BACKWARD);
    const Shape sh = call_shape(B, Tl, NH, NKV, HS, window);
    const int C = sh.C, KVC = sh.KVC;
    const size_t sr = sizeof(real), sa = sizeof(real_acc);
    const TokenPositions mine = token_positions(a->g.i, a->g.P);
    const AttentionProblem own = attention_problem(B, NH, HS, Tl, Tl, mine, mine);

    // Own blocks: (Q | dO) and (LSE | D) of the local queries, the permuted K|V.
    dist_copy_rows(a->rows, C, qkv, sh.W, sh.rows, C, sr);
    dist_copy_rows(a->rows + sh.S, C, dout, C, sh.rows, C, sr);
    dist_copy_rows(a->stats, (long)sh.L, lse, (long)sh.L, 1, (int)sh.L, sa);
    dist_attention_row_dot(&own, out, C, dout, C, a->stats + sh.L);
    dist_copy_rows(a->kv_own, 2 * KVC, qkv + C, sh.W, sh.rows, 2 * KVC, sr);
    permute(a, a->kv_own, a->kv, a->g.perm_dst, a->g.perm_src, sh.rows, 2 * KVC, a->rt);
    dist_zero_acc(a->part, a->g.pkv * sh.S);
    dist_zero_acc(a->dkv, a->g.pq * 2 * sh.Skv);

    RingReduce dq_reduce =
        ring_reduce(a->comm, MESH_ROW, REDUCE_SUM, a->part, sh.S, a->row_in, &sh);
    RingReduce dkv_reduce =
        ring_reduce(a->comm, MESH_COL, REDUCE_SUM, a->dkv, 2 * sh.Skv, a->col_in, &sh);
    run_rounds(a, &sh, COMM_BACKWARD, &dq_reduce, &dkv_reduce);

    // Block 0 of each: dQ of the local queries; dK|dV of the permuted shard, back to its owner.
    dist_acc_to_real(dqkv, sh.W, a->part, C, sh.rows, C);
    permute(a, a->dkv, a->dkv_own, a->g.perm_src, a->g.perm_dst, sh.rows, 2 * KVC, a->at);
    dist_acc_to_real(dqkv + C, sh.W, a->dkv_own, 2 * KVC, sh.rows, 2 * KVC);
    comm_leave_scope(a->comm, saved);
}

static void overlap_destroy(AttentionLayer* self) {
    Attention2DOverlap* a = (Attention2DOverlap*)self;
    void* buffers[] = {a->kv_own, a->rows, a->stats,  a->kv,     a->part,
                       a->dkv,    a->step, a->row_in, a->col_in, a->dkv_own};
    for (size_t k = 0; k < sizeof buffers / sizeof *buffers; k++) dist_free(buffers[k]);
    free(a->order);
    free(a->q_done);
    free(a->kv_done);
    free(a);
}

// Block 0 is needed last by a ring reduce (it ends there): rank it after the others.
static int reduce_rank(int x, int n) { return x == 0 ? n : x; }

// A pair and its sort key: (round, reduce rank of a, reduce rank of b).
typedef struct {
    int key[3];
    Pair pair;
} OrderEntry;

static int order_cmp(const void* x, const void* y) {
    const OrderEntry* p = (const OrderEntry*)x;
    const OrderEntry* q = (const OrderEntry*)y;
    for (int k = 0; k < 3; k++) {
        if (p->key[k] != q->key[k]) return p->key[k] < q->key[k] ? -1 : 1;
    }
    return 0;
}

// The compute order of the P pairs, with the first and last pair of each block marked.
static Pair* overlap_order(int pq, int pkv) {
    const int P = pq * pkv;
    OrderEntry* e = (OrderEntry*)xcalloc(P, sizeof *e, "attention2d-overlap order");
    for (int a = 0; a < pkv; a++) {
        for (int b = 0; b < pq; b++) {
            OrderEntry* x = &e[a * pq + b];
            x->pair.a = a, x->pair.b = b, x->pair.round = a > b ? a : b;
            x->key[0] = x->pair.round;
            x->key[1] = reduce_rank(a, pkv);
            x->key[2] = reduce_rank(b, pq);
        }
    }
    qsort(e, P, sizeof *e, order_cmp);
    Pair* order = (Pair*)xcalloc(P, sizeof *order, "attention2d-overlap order");
    for (int k = 0; k < P; k++) order[k] = e[k].pair;
    free(e);
    for (int k = 0; k < P; k++) {
        Pair* p = &order[k];
        p->q_first = p->q_last = p->kv_last = 1;
        for (int j = 0; j < P; j++) {
            if (order[j].a == p->a && j < k) p->q_first = 0;
            if (order[j].a == p->a && j > k) p->q_last = 0;
            if (order[j].b == p->b && j > k) p->kv_last = 0;
        }
    }
    return order;
}

AttentionLayer* attention2d_overlap_create(Comm* comm, int B, int Tl, int NH, int NKV, int HS) {
    Attention2DOverlap* a =
        (Attention2DOverlap*)xcalloc(1, sizeof *a, "attention2d-overlap layer");
    const Mesh* m = &comm->mesh;
    a->comm = comm;
    a->g = attention2d_grid(m);
    a->max = dist_bounds("attention2d-overlap", B, Tl, NH, NKV, HS);
    a->rt = dist_real_comm_type();
    a->at = dist_acc_comm_type();
    a->rounds = a->g.pq > a->g.pkv ? a->g.pq : a->g.pkv;
    a->order = overlap_order(a->g.pq, a->g.pkv);
    a->q_done = (int*)xcalloc(a->g.pkv, sizeof(int), "attention2d-overlap Q blocks done");
    a->kv_done = (int*)xcalloc(a->g.pq, sizeof(int), "attention2d-overlap K/V blocks done");

    const size_t S = (size_t)B * Tl * NH * HS, Skv = (size_t)B * Tl * NKV * HS;
    const size_t L = (size_t)B * NH * Tl;
    Attention2DOverlapScratch z;   // bytes of each buffer (attention/dist_scratch.h)
    attention2d_overlap_scratch(&z, S, Skv, L, sizeof(real), sizeof(real_acc), a->g.pq, a->g.pkv,
                                dist_attention_merges_in_forward());
    a->kv_own = (real*)dist_alloc(z.kv_own, "attention2d-overlap own K/V");
    a->rows = (real*)dist_alloc(z.rows, "attention2d-overlap row Q|dO blocks");
    a->stats = (real_acc*)dist_alloc(z.stats, "attention2d-overlap row LSE|D blocks");
    a->kv = (real*)dist_alloc(z.kv, "attention2d-overlap column K/V blocks");
    a->part = (real_acc*)dist_alloc(z.part, "attention2d-overlap partial O|LSE, dQ");
    a->dkv = (real_acc*)dist_alloc(z.dkv, "attention2d-overlap partial dK/dV");
    if (z.step)   // none where the forward merges (attention/dist_ops.h)
        a->step = (real_acc*)dist_alloc(z.step, "attention2d-overlap pair O|LSE");
    a->row_in = (real_acc*)dist_alloc(z.row_in, "attention2d-overlap row reduce");
    a->col_in = (real_acc*)dist_alloc(z.col_in, "attention2d-overlap column reduce");
    a->dkv_own = (real_acc*)dist_alloc(z.dkv_own, "attention2d-overlap own dK/dV");

    a->base.forward = overlap_forward;
    a->base.backward = overlap_backward;
    a->base.destroy = overlap_destroy;
    a->base.positions = token_layout(token_positions(a->g.i, m->P));
    a->base.name = "attention2d-overlap";
    return &a->base;
}
