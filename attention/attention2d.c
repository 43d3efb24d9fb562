// ATTENTION2D (arXiv 2503.15758) on a pq x pkv mesh, the non-overlapped schedule of
// attention2d.md generalised to rectangular meshes. Collectives on different groups that do not
// depend on each other run concurrently (the Q row all-gather with the K/V permutation and column
// all-gather; the dQ row reduce-scatter with the dK|dV column one): each has its own buffers. Rank (r, c), SP index i = r + pq*c, holds the
// tokens t = i + P*j (cyclic). Shapes below: S = B*Tl*C reals (one shard), KVC = NKV*HS the
// channels of K (and of V: C, or fewer under grouped-query attention), W = C + 2 KVC the qkv row,
// L = B*NH*Tl (one LSE shard), Tq = pkv*Tl queries of row r at positions r + pq*m, Tk = pq*Tl keys of column c at
// positions c + pkv*n.
#include <stdlib.h>

#include "attention/attention2d_grid.h"
#include "attention/dist_attention.h"
#include "attention/dist_bounds.h"
#include "attention/dist_ops.h"
#include "attention/dist_scratch.h"
#include "comm/fail.h"

// Activations (Q, K, V, dO) travel in the storage type `real` (bf16 on the CUDA bf16 build);
// partial outputs, LSE, D and the gradient partial sums in real_acc (fp32 on CUDA), because they
// are merged and summed across ranks (attention/dist_ops.h).
typedef struct {
    AttentionLayer base;
    Comm* comm;
    Attention2DGrid g;   // place in the grid, K/V permutation peers
    DistBounds max;    // shapes the scratch is sized for
    int keep_layers;   // layers whose gathered K/V are kept for backward (0: none)
    CommType rt, at;   // comm types of real and real_acc
    // scratch, sized at the bounds, in the backend's memory
    void* send;        // packed blocks a row collective sends (real or real_acc)
    void* recv;        // blocks a row collective receives
    real_acc* stats_send;   // (2L) LSE | D of the local queries (backward row all-gather)
    real_acc* stats_recv;   // pkv x (2L)
    real* kv_recv;          // pq x (B, Tl, 2KVC) the column all-gather of K|V
    real_acc* dkv_send;     // pq x (B, Tl, 2KVC) partial dK|dV blocks (column reduce-scatter)
    real_acc* dkv_recv;     // (B, Tl, 2KVC) their sum for the permuted shard
    real* kv_own;      // (B, Tl, 2KVC) this rank's K|V rows (permutation send)
    real* kv_perm;     // (B, Tl, 2KVC) the permuted K|V shard this rank holds
    real* kv_full;     // (B, Tk, 2KVC) K|V of column c (when not kept)
    real* kept;        // keep_layers x (B, Tk, 2KVC)
    real* q_full;      // (B, Tq, C) queries of row r
    real* do_full;     // (B, Tq, C) dout of row r
    real_acc* o_full;     // (B, Tq, C) partial output of row r
    real_acc* o_own;      // (B, Tl, C) merged output of the local queries
    real_acc* lse_full;   // (B, NH, Tq) forward: partial LSE; backward: final LSE of row r
    real_acc* d_full;     // (B, NH, Tq) rowsum(dout * out) of row r
    real_acc* d_own;      // (B, NH, Tl) the same for the local queries
    real_acc* dq_part;    // (B, Tq, C) partial dQ of row r
    real_acc* dkv_part;   // (B, Tk, 2KVC) partial dK|dV of column c
    real_acc* dkv_own;    // (B, Tl, 2KVC) dK|dV of the local keys (inverse permutation receive)
} Attention2D;

static AttentionProblem row_col_problem(const Attention2D* a, int B, int Tl, int NH, int NKV,
                                        int HS, long window) {
    AttentionProblem p = attention_problem(B, NH, HS, a->g.pkv * Tl, a->g.pq * Tl,
                                           token_positions(a->g.r, a->g.pq),
                                           token_positions(a->g.c, a->g.pkv));
    p.NKV = NKV;
    p.window = window;
    p.docs = a->base.docs;
    return p;
}

// Starts an all-gather of `count` elements of type t per rank along g into recv and returns where
// the gathered blocks will be (*req: wait before reading them). A group of one gathers nothing:
// the blocks are send itself.
static void* gather_start(Attention2D* a, MeshGroup g, void* send, void* recv, size_t count,
                          CommType t, CommRequest** req) {
    *req = NULL;
    if (comm_size(a->comm, g) == 1) return send;
    *req = comm_all_gather_start(a->comm, g, send, recv, count, t);
    return recv;
}

// Starts a reduce-scatter (sum) along g of blocks of `count` accumulators into recv; returns where
// this rank's summed block will be.
static real_acc* reduce_scatter_start(Attention2D* a, MeshGroup g, real_acc* send, real_acc* recv,
                                      size_t count, CommRequest** req) {
    *req = NULL;
    if (comm_size(a->comm, g) == 1) return send;
    *req = comm_reduce_scatter_sum_start(a->comm, g, send, recv, count, a->at);
    return recv;
}

// Sends (rows, w) elements of type t from `from` to SP rank peer_send and receives as many from
// peer_recv into `to`; on a rank the permutation fixes (peer_send == i) it is a local copy.
static void permute(Attention2D* a, void* from, void* to, int peer_send, int peer_recv, long rows,
                    int w, CommType t) {
    if (peer_send == a->g.i) {
        dist_copy_rows(to, w, from, w, rows, w, comm_type_size(t));
        return;
    }
    const size_t n = (size_t)rows * w;
    CommTransfer send = {peer_send, from, n}, recv = {peer_recv, to, n};
    comm_wait(a->comm, comm_start(a->comm, MESH_SP, t, &send, 1, &recv, 1));
}

// K/V of column c: pack own K|V (the columns after the C of Q in rows of W), permute, start the
// all-gather along the column; returns where the pq blocks of (B, Tl, 2KVC) will be (*req: wait
// before reading).
static const void* gather_kv_start(Attention2D* a, int B, int Tl, int C, int KVC, int W,
                                   const real* qkv, CommRequest** req) {
    const size_t S2 = (size_t)B * Tl * 2 * KVC;
    const long rows = (long)B * Tl;
    dist_copy_rows(a->kv_own, 2 * KVC, qkv + C, W, rows, 2 * KVC, sizeof(real));
    permute(a, a->kv_own, a->kv_perm, a->g.perm_dst, a->g.perm_src, rows, 2 * KVC, a->rt);
    return gather_start(a, MESH_COL, a->kv_perm, a->kv_recv, S2, a->rt, req);
}

// The gathered column blocks interleaved into kv_full, (B, Tk, 2KVC).
static void gather_kv_finish(Attention2D* a, int B, int Tl, int KVC, const void* blocks,
                             CommRequest* req, real* kv_full) {
    comm_wait(a->comm, req);
    dist_blocks_to_rows(kv_full, 2 * KVC, blocks, (size_t)B * Tl * 2 * KVC, a->g.pq, B, Tl,
                        2 * KVC, sizeof(real));
}

// Where the column K/V of a layer live: the shared buffer, or the layer's kept copy.
static real* kv_for_layer(Attention2D* a, int layer) {
    if (a->keep_layers == 0) return a->kv_full;
    CHECK(layer >= 0 && layer < a->keep_layers, "create attention2d with keep_kv_layers >= layers",
          "attention2d keeps K/V of %d layers, called for layer %d", a->keep_layers, layer);
    return a->kept + (size_t)layer * a->max.B * a->g.pq * a->max.Tl * 2 * a->max.NKV * a->max.HS;
}

static void attention2d_forward(AttentionLayer* self, int layer, long window, int B, int Tl, int NH,
                                int NKV, int HS, const real* qkv, real* out, real_stat* lse) {
    Attention2D* a = (Attention2D*)self;
    dist_bounds_check(&a->max, a->base.name, B, Tl, NH, NKV, HS);
    Comm* comm = a->comm;
    const int C = NH * HS, KVC = NKV * HS, W = attention_qkv_width(NH, NKV, HS);
    const CommScope saved = comm_enter_scope(comm, layer, COMM_FORWARD);
    const size_t S = (size_t)B * Tl * C, L = (size_t)B * NH * Tl;
    const long rows = (long)B * Tl;
    const size_t sr = sizeof(real), sa = sizeof(real_acc);
    const AttentionProblem p = row_col_problem(a, B, Tl, NH, NKV, HS, window);

    // Queries of row r, (B, Tq, C), and keys and values of column c, (B, Tk, 2KVC), gathered
    // concurrently.
    CommRequest *q_req, *kv_req;
    dist_copy_rows(a->send, C, qkv, W, rows, C, sr);
    const void* q_blocks = gather_start(a, MESH_ROW, a->send, a->recv, S, a->rt, &q_req);
    const void* kv_blocks = gather_kv_start(a, B, Tl, C, KVC, W, qkv, &kv_req);
    comm_wait(comm, q_req);
    dist_blocks_to_rows(a->q_full, C, q_blocks, S, a->g.pkv, B, Tl, C, sr);
    real* kv = kv_for_layer(a, layer);
    gather_kv_finish(a, B, Tl, KVC, kv_blocks, kv_req, kv);

    dist_attention_forward(&p, a->q_full, C, kv, 2 * KVC, kv + KVC, 2 * KVC, a->o_full, C,
                           a->lse_full);

    // LSE-merge reduce-scatter along the row: all-to-all of (O | LSE) blocks, block g holding
    // the partials of row member g's queries, then a local pkv-way merge.
    const size_t block = S + L;
    real_acc* send = (real_acc*)a->send;
    dist_rows_to_blocks(send, block, a->o_full, C, a->g.pkv, B, Tl, C, sa);
    dist_rows_to_blocks(send + S, block, a->lse_full, 1, a->g.pkv, B * NH, Tl, 1, sa);
    const real_acc* parts = send;
    if (a->g.pkv > 1) {
        comm_all_to_all(comm, MESH_ROW, send, a->recv, block, a->at);
        parts = (const real_acc*)a->recv;
    }
    const real_acc* mine = parts + a->g.c * block;
    dist_copy_rows(a->o_own, C, mine, C, rows, C, sa);
    dist_copy_rows(lse, L, mine + S, L, 1, (int)L, sa);
    for (int g = 0; g < a->g.pkv; g++) {
        if (g == a->g.c) continue;
        dist_attention_merge(B, NH, HS, Tl, a->o_own, C, lse, parts + g * block, C,
                             parts + g * block + S);
    }
    dist_acc_to_real(out, C, a->o_own, C, rows, C);
    comm_leave_scope(comm, saved);
}

static void attention2d_backward(AttentionLayer* self, int layer, long window, int B, int Tl, int NH,
                                 int NKV, int HS, const real* qkv, const real* out,
                                 const real_stat* lse, const real* dout, real* dqkv) {
    Attention2D* a = (Attention2D*)self;
    dist_bounds_check(&a->max, a->base.name, B, Tl, NH, NKV, HS);
    Comm* comm = a->comm;
    const int C = NH * HS, KVC = NKV * HS, W = attention_qkv_width(NH, NKV, HS);
    const CommScope saved = comm_enter_scope(comm, layer, COMM_BACKWARD);
    const size_t S = (size_t)B * Tl * C, L = (size_t)B * NH * Tl;
    const long rows = (long)B * Tl;
    const size_t sr = sizeof(real), sa = sizeof(real_acc);
    const AttentionProblem p = row_col_problem(a, B, Tl, NH, NKV, HS, window);
    const TokenPositions mine = token_positions(a->g.i, a->g.pq * a->g.pkv);
    const AttentionProblem own = attention_problem(B, NH, HS, Tl, Tl, mine, mine);

    // Row all-gathers of (Q | dO) in the storage type and (LSE | D) in the accumulator type,
    // concurrent with the K/V permutation and column all-gather.
    dist_attention_row_dot(&own, out, C, dout, C, a->d_own);
    real* qdo = (real*)a->send;
    dist_copy_rows(qdo, C, qkv, W, rows, C, sr);
    dist_copy_rows(qdo + S, C, dout, C, rows, C, sr);
    CommRequest *qdo_req, *stats_req, *kv_req = NULL;
    const real* qdo_rows =
        (const real*)gather_start(a, MESH_ROW, qdo, a->recv, 2 * S, a->rt, &qdo_req);
    real_acc* stats = a->stats_send;
    dist_copy_rows(stats, L, lse, L, 1, (int)L, sa);
    dist_copy_rows(stats + L, L, a->d_own, L, 1, (int)L, sa);
    const real_acc* stats_rows = (const real_acc*)gather_start(a, MESH_ROW, stats, a->stats_recv,
                                                               2 * L, a->at, &stats_req);
    real* kv = kv_for_layer(a, layer);
    const void* kv_blocks =
        a->keep_layers == 0 ? gather_kv_start(a, B, Tl, C, KVC, W, qkv, &kv_req) : NULL;
    comm_wait(comm, qdo_req);
    dist_blocks_to_rows(a->q_full, C, qdo_rows, 2 * S, a->g.pkv, B, Tl, C, sr);
    dist_blocks_to_rows(a->do_full, C, qdo_rows + S, 2 * S, a->g.pkv, B, Tl, C, sr);
    comm_wait(comm, stats_req);
    dist_blocks_to_rows(a->lse_full, 1, stats_rows, 2 * L, a->g.pkv, B * NH, Tl, 1, sa);
    dist_blocks_to_rows(a->d_full, 1, stats_rows + L, 2 * L, a->g.pkv, B * NH, Tl, 1, sa);
    if (kv_blocks) gather_kv_finish(a, B, Tl, KVC, kv_blocks, kv_req, kv);

    const size_t Skv = (size_t)B * Tl * KVC;
    const size_t Sq = (size_t)a->g.pkv * S, Sk = (size_t)a->g.pq * Skv;
    dist_zero_acc(a->dq_part, Sq);
    dist_zero_acc(a->dkv_part, 2 * Sk);
    dist_attention_backward(&p, a->q_full, C, kv, 2 * KVC, kv + KVC, 2 * KVC, a->do_full, C,
                            a->lse_full, a->d_full, a->dq_part, C, a->dkv_part, 2 * KVC,
                            a->dkv_part + KVC, 2 * KVC);

    // dQ: reduce-scatter along the row -> the local queries; concurrently dK|dV: reduce-scatter
    // along the column -> the permuted shard, then back to its owner.
    CommRequest *dq_req, *dkv_req;
    dist_rows_to_blocks(a->send, S, a->dq_part, C, a->g.pkv, B, Tl, C, sa);
    const real_acc* dq =
        reduce_scatter_start(a, MESH_ROW, (real_acc*)a->send, (real_acc*)a->recv, S, &dq_req);
    dist_rows_to_blocks(a->dkv_send, 2 * Skv, a->dkv_part, 2 * KVC, a->g.pq, B, Tl, 2 * KVC, sa);
    real_acc* dkv_perm =
        reduce_scatter_start(a, MESH_COL, a->dkv_send, a->dkv_recv, 2 * Skv, &dkv_req);
    comm_wait(comm, dq_req);
    dist_acc_to_real(dqkv, W, dq, C, rows, C);
    comm_wait(comm, dkv_req);
    permute(a, dkv_perm, a->dkv_own, a->g.perm_src, a->g.perm_dst, rows, 2 * KVC, a->at);
    dist_acc_to_real(dqkv + C, W, a->dkv_own, 2 * KVC, rows, 2 * KVC);
    comm_leave_scope(comm, saved);
}

static void attention2d_destroy(AttentionLayer* self) {
    Attention2D* a = (Attention2D*)self;
    void* buffers[] = {a->send,    a->recv,    a->stats_send, a->stats_recv, a->kv_recv,
                       a->dkv_send, a->dkv_recv, a->kv_own,  a->kv_perm,  a->kv_full,
                       a->kept,    a->q_full,  a->do_full, a->o_full,   a->o_own,
                       a->lse_full, a->d_full, a->d_own,   a->dq_part,  a->dkv_part,
                       a->dkv_own};
    for (size_t k = 0; k < sizeof buffers / sizeof *buffers; k++) dist_free(buffers[k]);
    free(a);
}

AttentionLayer* attention2d_create(Comm* comm, int B, int Tl, int NH, int NKV, int HS,
                                   int keep_kv_layers) {
    CHECK(keep_kv_layers >= 0, "caller bug", "attention2d_create: keep_kv_layers=%d",
          keep_kv_layers);
    Attention2D* a = (Attention2D*)xcalloc(1, sizeof *a, "attention2d layer");
    const Mesh* m = &comm->mesh;
    a->comm = comm;
    a->g = attention2d_grid(m);
    a->max = dist_bounds("attention2d", B, Tl, NH, NKV, HS);
    a->keep_layers = keep_kv_layers;

    a->rt = dist_real_comm_type();
    a->at = dist_acc_comm_type();

    const size_t S = (size_t)B * Tl * NH * HS, Skv = (size_t)B * Tl * NKV * HS;
    const size_t L = (size_t)B * NH * Tl;
    Attention2DScratch z;   // bytes of each buffer (attention/dist_scratch.h)
    attention2d_scratch(&z, S, Skv, L, sizeof(real), sizeof(real_acc), a->g.pq, a->g.pkv,
                        keep_kv_layers);
    a->send = dist_alloc(z.send, "attention2d send blocks");
    a->recv = dist_alloc(z.recv, "attention2d receive blocks");
    a->stats_send = (real_acc*)dist_alloc(z.stats_send, "attention2d LSE|D");
    a->stats_recv = (real_acc*)dist_alloc(z.stats_recv, "attention2d row LSE|D");
    a->kv_recv = (real*)dist_alloc(z.kv_recv, "attention2d column K|V blocks");
    a->dkv_send = (real_acc*)dist_alloc(z.dkv_send, "attention2d partial dK|dV blocks");
    a->dkv_recv = (real_acc*)dist_alloc(z.dkv_recv, "attention2d summed dK|dV");
    a->kv_own = (real*)dist_alloc(z.kv_own, "attention2d own K/V");
    a->kv_perm = (real*)dist_alloc(z.kv_perm, "attention2d permuted K/V");
    if (keep_kv_layers == 0) {
        a->kv_full = (real*)dist_alloc(z.kv_full, "attention2d column K/V");
    } else {
        a->kept = (real*)dist_alloc(z.kept, "attention2d kept K/V");
    }
    a->q_full = (real*)dist_alloc(z.q_full, "attention2d row Q");
    a->do_full = (real*)dist_alloc(z.do_full, "attention2d row dO");
    a->o_full = (real_acc*)dist_alloc(z.o_full, "attention2d row partial O");
    a->o_own = (real_acc*)dist_alloc(z.o_own, "attention2d merged O");
    a->lse_full = (real_acc*)dist_alloc(z.lse_full, "attention2d row LSE");
    a->d_full = (real_acc*)dist_alloc(z.d_full, "attention2d row D");
    a->d_own = (real_acc*)dist_alloc(z.d_own, "attention2d local D");
    a->dq_part = (real_acc*)dist_alloc(z.dq_part, "attention2d partial dQ");
    a->dkv_part = (real_acc*)dist_alloc(z.dkv_part, "attention2d partial dK/dV");
    a->dkv_own = (real_acc*)dist_alloc(z.dkv_own, "attention2d own dK/dV");

    a->base.forward = attention2d_forward;
    a->base.backward = attention2d_backward;
    a->base.destroy = attention2d_destroy;
    a->base.positions = token_layout(token_positions(a->g.i, m->P));
    a->base.name = "attention2d";
    return &a->base;
}
