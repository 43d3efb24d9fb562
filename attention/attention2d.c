// ATTENTION2D (arXiv 2503.15758) on a pq x pkv mesh, the non-overlapped schedule of
// attention2d.md generalised to rectangular meshes. Rank (r, c), SP index i = r + pq*c, holds the
// tokens t = i + P*j (cyclic). Shapes below: S = B*Tl*C reals (one shard), L = B*NH*Tl (one LSE
// shard), Tq = pkv*Tl queries of row r at positions r + pq*m, Tk = pq*Tl keys of column c at
// positions c + pkv*n.
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "attention/dist_attention.h"
#include "attention/token_blocks.h"
#include "comm/fail.h"

typedef struct {
    AttentionLayer base;
    Comm* comm;
    int pq, pkv, r, c, i;
    int perm_dst;      // SP rank that holds this rank's K/V shard after the permutation
    int perm_src;      // SP rank whose K/V shard this rank holds after it
    int max_B, max_Tl, max_NH, max_HS;
    int keep_layers;   // layers whose gathered K/V are kept for backward (0: none)
    // scratch, sized at the bounds
    real* send;        // packed blocks a collective sends
    real* recv;        // blocks a collective receives
    real* kv_own;      // (B, Tl, 2C) this rank's K|V rows (permutation send / inverse receive)
    real* kv_perm;     // (B, Tl, 2C) the permuted K|V shard this rank holds
    real* kv_full;     // (B, Tk, 2C) K|V of column c (when not kept)
    real* kept;        // keep_layers x (B, Tk, 2C)
    real* q_full;      // (B, Tq, C) queries of row r
    real* o_full;      // (B, Tq, C) forward: partial output; backward: dout of row r
    real* lse_full;    // (B, NH, Tq) forward: partial LSE; backward: final LSE of row r
    real* d_full;      // (B, NH, Tq) rowsum(dout * out) of row r
    real* d_own;       // (B, NH, Tl) the same for the local queries
    real* dq_part;     // (B, Tq, C) partial dQ of row r
    real* dkv_part;    // (B, Tk, 2C) partial dK|dV of column c
} Attention2D;

static void check_call(const Attention2D* a, int B, int Tl, int NH, int HS) {
    CHECK(B >= 1 && Tl >= 1 && NH >= 1 && HS >= 1 && B <= a->max_B && Tl <= a->max_Tl &&
              NH <= a->max_NH && HS <= a->max_HS,
          "create the layer with bounds that cover every call",
          "attention2d called with B=%d Tl=%d NH=%d HS=%d, bounds %d %d %d %d", B, Tl, NH, HS,
          a->max_B, a->max_Tl, a->max_NH, a->max_HS);
}

static AttentionProblem row_col_problem(const Attention2D* a, int B, int Tl, int NH, int HS) {
    AttentionProblem p = {.B = B, .NH = NH, .HS = HS, .Tq = a->pkv * Tl, .Tk = a->pq * Tl,
                          .qpos = {a->r, a->pq}, .kpos = {a->c, a->pkv}};
    return p;
}

// All-gather of `count` reals per rank along g into a->recv; a group of one gathers nothing and
// returns send itself.
static real* gather(Attention2D* a, MeshGroup g, real* send, size_t count) {
    if (comm_size(a->comm, g) == 1) return send;
    comm_all_gather(a->comm, g, send, a->recv, count, COMM_REAL);
    return a->recv;
}

// Reduce-scatter (sum) along g of blocks of `count` reals; returns this rank's summed block.
static real* reduce_scatter(Attention2D* a, MeshGroup g, real* send, size_t count) {
    if (comm_size(a->comm, g) == 1) return send;
    comm_reduce_scatter_sum(a->comm, g, send, a->recv, count, COMM_REAL);
    return a->recv;
}

// Sends n reals from `from` to SP rank peer_send and receives n from peer_recv into `to`; on a
// rank the permutation fixes (peer_send == i) it is a local copy.
static void permute(Attention2D* a, real* from, real* to, int peer_send, int peer_recv, size_t n) {
    if (peer_send == a->i) {
        memcpy(to, from, sizeof(real) * n);
        return;
    }
    CommTransfer send = {peer_send, from, n}, recv = {peer_recv, to, n};
    comm_wait(a->comm, comm_start(a->comm, MESH_SP, COMM_REAL, &send, 1, &recv, 1));
}

// K/V of column c, (B, Tk, 2C): pack own K|V, permute, all-gather along the column, interleave.
static void gather_kv(Attention2D* a, int B, int Tl, int C, const real* qkv, real* kv_full) {
    const size_t S2 = (size_t)B * Tl * 2 * C;
    copy_rows(a->kv_own, 2 * C, qkv + C, 3 * C, (long)B * Tl, 2 * C);
    permute(a, a->kv_own, a->kv_perm, a->perm_dst, a->perm_src, S2);
    const real* blocks = gather(a, MESH_COL, a->kv_perm, S2);
    blocks_to_rows(kv_full, 2 * C, blocks, S2, a->pq, B, Tl, 2 * C);
}

// Where the column K/V of a layer live: the shared buffer, or the layer's kept copy.
static real* kv_for_layer(Attention2D* a, int layer) {
    if (a->keep_layers == 0) return a->kv_full;
    CHECK(layer >= 0 && layer < a->keep_layers, "create attention2d with keep_kv_layers >= layers",
          "attention2d keeps K/V of %d layers, called for layer %d", a->keep_layers, layer);
    return a->kept + (size_t)layer * a->max_B * a->pq * a->max_Tl * 2 * a->max_NH * a->max_HS;
}

static void attention2d_forward(AttentionLayer* self, int layer, int B, int Tl, int NH, int HS,
                                const real* qkv, real* out, real* lse) {
    Attention2D* a = (Attention2D*)self;
    check_call(a, B, Tl, NH, HS);
    Comm* comm = a->comm;
    const int C = NH * HS;
    const CommScope saved = comm_enter_scope(comm, layer, COMM_FORWARD);
    const size_t S = (size_t)B * Tl * C, L = (size_t)B * NH * Tl;
    const AttentionProblem p = row_col_problem(a, B, Tl, NH, HS);

    // Queries of row r: (B, Tq, C).
    copy_rows(a->send, C, qkv, 3 * C, (long)B * Tl, C);
    blocks_to_rows(a->q_full, C, gather(a, MESH_ROW, a->send, S), S, a->pkv, B, Tl, C);
    // Keys and values of column c: (B, Tk, 2C).
    real* kv = kv_for_layer(a, layer);
    gather_kv(a, B, Tl, C, qkv, kv);

    attention_partial_forward(&p, a->q_full, C, kv, 2 * C, kv + C, 2 * C, a->o_full, C,
                              a->lse_full);

    // LSE-merge reduce-scatter along the row: all-to-all of (O | LSE) blocks, block g holding
    // the partials of row member g's queries, then a local pkv-way merge.
    const size_t block = S + L;
    rows_to_blocks(a->send, block, a->o_full, C, a->pkv, B, Tl, C);
    rows_to_blocks(a->send + S, block, a->lse_full, 1, a->pkv, B * NH, Tl, 1);
    const real* parts = a->send;
    if (a->pkv > 1) {
        comm_all_to_all(comm, MESH_ROW, a->send, a->recv, block, COMM_REAL);
        parts = a->recv;
    }
    copy_rows(out, C, parts + a->c * block, C, (long)B * Tl, C);
    memcpy(lse, parts + a->c * block + S, sizeof(real) * L);
    for (int g = 0; g < a->pkv; g++) {
        if (g == a->c) continue;
        attention_merge(B, NH, HS, Tl, out, C, lse, parts + g * block, C, parts + g * block + S);
    }
    comm_leave_scope(comm, saved);
}

static void attention2d_backward(AttentionLayer* self, int layer, int B, int Tl, int NH, int HS,
                                 const real* qkv, const real* out, const real* lse,
                                 const real* dout, real* dqkv) {
    Attention2D* a = (Attention2D*)self;
    check_call(a, B, Tl, NH, HS);
    Comm* comm = a->comm;
    const int C = NH * HS;
    const CommScope saved = comm_enter_scope(comm, layer, COMM_BACKWARD);
    const size_t S = (size_t)B * Tl * C, L = (size_t)B * NH * Tl;
    const AttentionProblem p = row_col_problem(a, B, Tl, NH, HS);
    const AttentionProblem own = {.B = B, .NH = NH, .HS = HS, .Tq = Tl, .Tk = Tl,
                                  .qpos = {a->i, a->pq * a->pkv}, .kpos = {a->i, a->pq * a->pkv}};

    // Row all-gather of (Q | dO | LSE | D): block layout S + S + L + L.
    attention_row_dot(&own, out, C, dout, C, a->d_own);
    const size_t block = 2 * S + 2 * L;
    copy_rows(a->send, C, qkv, 3 * C, (long)B * Tl, C);
    memcpy(a->send + S, dout, sizeof(real) * S);
    memcpy(a->send + 2 * S, lse, sizeof(real) * L);
    memcpy(a->send + 2 * S + L, a->d_own, sizeof(real) * L);
    const real* rows = gather(a, MESH_ROW, a->send, block);
    blocks_to_rows(a->q_full, C, rows, block, a->pkv, B, Tl, C);
    blocks_to_rows(a->o_full, C, rows + S, block, a->pkv, B, Tl, C);
    blocks_to_rows(a->lse_full, 1, rows + 2 * S, block, a->pkv, B * NH, Tl, 1);
    blocks_to_rows(a->d_full, 1, rows + 2 * S + L, block, a->pkv, B * NH, Tl, 1);

    real* kv = kv_for_layer(a, layer);
    if (a->keep_layers == 0) gather_kv(a, B, Tl, C, qkv, kv);

    const size_t Sq = (size_t)a->pkv * S, Sk = (size_t)a->pq * S;
    memset(a->dq_part, 0, sizeof(real) * Sq);
    memset(a->dkv_part, 0, sizeof(real) * 2 * Sk);
    attention_partial_backward(&p, a->q_full, C, kv, 2 * C, kv + C, 2 * C, a->o_full, C,
                               a->lse_full, a->d_full, a->dq_part, C, a->dkv_part, 2 * C,
                               a->dkv_part + C, 2 * C);

    // dQ: reduce-scatter along the row -> the local queries.
    rows_to_blocks(a->send, S, a->dq_part, C, a->pkv, B, Tl, C);
    copy_rows(dqkv, 3 * C, reduce_scatter(a, MESH_ROW, a->send, S), C, (long)B * Tl, C);
    // dK|dV: reduce-scatter along the column -> the permuted shard, then back to its owner.
    rows_to_blocks(a->send, 2 * S, a->dkv_part, 2 * C, a->pq, B, Tl, 2 * C);
    real* dkv_perm = reduce_scatter(a, MESH_COL, a->send, 2 * S);
    permute(a, dkv_perm, a->kv_own, a->perm_src, a->perm_dst, 2 * S);
    copy_rows(dqkv + C, 3 * C, a->kv_own, 2 * C, (long)B * Tl, 2 * C);
    comm_leave_scope(comm, saved);
}

static void attention2d_destroy(AttentionLayer* self) {
    Attention2D* a = (Attention2D*)self;
    real* buffers[] = {a->send,  a->recv,   a->kv_own, a->kv_perm, a->kv_full,  a->kept,
                       a->q_full, a->o_full, a->lse_full, a->d_full, a->d_own, a->dq_part,
                       a->dkv_part};
    for (size_t k = 0; k < sizeof buffers / sizeof *buffers; k++) free(buffers[k]);
    free(a);
}

static size_t max_size(size_t x, size_t y) { return x > y ? x : y; }

AttentionLayer* attention2d_create(Comm* comm, int B, int Tl, int NH, int HS, int keep_kv_layers) {
    CHECK(B >= 1 && Tl >= 1 && NH >= 1 && HS >= 1 && keep_kv_layers >= 0, "caller bug",
          "attention2d_create: B=%d Tl=%d NH=%d HS=%d keep_kv_layers=%d", B, Tl, NH, HS,
          keep_kv_layers);
    Attention2D* a = xcalloc(1, sizeof *a, "attention2d layer");
    const Mesh* m = &comm->mesh;
    a->comm = comm;
    a->pq = m->pq;
    a->pkv = m->pkv;
    a->r = m->r;
    a->c = m->c;
    a->i = m->sp_index;
    // This shard goes to the rank whose row-major index c' + pkv*r' equals i; the shard held
    // here is the one of SP rank c + pkv*r (attention2d.md, K/V permutation).
    a->perm_dst = mesh_sp_index(m, a->i / a->pkv, a->i % a->pkv);
    a->perm_src = a->c + a->pkv * a->r;
    a->max_B = B;
    a->max_Tl = Tl;
    a->max_NH = NH;
    a->max_HS = HS;
    a->keep_layers = keep_kv_layers;

    const size_t C = (size_t)NH * HS, S = (size_t)B * Tl * C, L = (size_t)B * NH * Tl;
    const size_t pq = a->pq, pkv = a->pkv;
    const size_t send = max_size(max_size(pkv * (S + L), 2 * S + 2 * L), 2 * pq * S);
    const size_t recv = max_size(2 * pq * S, pkv * (2 * S + 2 * L));
    a->send = xmalloc(sizeof(real) * send, "attention2d send blocks");
    a->recv = xmalloc(sizeof(real) * recv, "attention2d receive blocks");
    a->kv_own = xmalloc(sizeof(real) * 2 * S, "attention2d own K/V");
    a->kv_perm = xmalloc(sizeof(real) * 2 * S, "attention2d permuted K/V");
    if (keep_kv_layers == 0) {
        a->kv_full = xmalloc(sizeof(real) * 2 * pq * S, "attention2d column K/V");
    } else {
        a->kept = xmalloc(sizeof(real) * keep_kv_layers * 2 * pq * S, "attention2d kept K/V");
    }
    a->q_full = xmalloc(sizeof(real) * pkv * S, "attention2d row Q");
    a->o_full = xmalloc(sizeof(real) * pkv * S, "attention2d row O / dO");
    a->lse_full = xmalloc(sizeof(real) * pkv * L, "attention2d row LSE");
    a->d_full = xmalloc(sizeof(real) * pkv * L, "attention2d row D");
    a->d_own = xmalloc(sizeof(real) * L, "attention2d local D");
    a->dq_part = xmalloc(sizeof(real) * pkv * S, "attention2d partial dQ");
    a->dkv_part = xmalloc(sizeof(real) * 2 * pq * S, "attention2d partial dK/dV");

    a->base.forward = attention2d_forward;
    a->base.backward = attention2d_backward;
    a->base.destroy = attention2d_destroy;
    a->base.positions = (TokenPositions){a->i, m->P};
    a->base.name = "attention2d";
    return &a->base;
}
