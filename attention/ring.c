// Ring and Striped attention: one ring schedule, two token layouts. Rank i keeps its queries; at
// step s it holds the K|V block of origin rank (i - s) mod P and, while computing with it, sends
// it to rank i+1 and receives the next from rank i-1. S = B*Tl*C reals per shard.
#include <stdlib.h>
#include <string.h>

#include "attention/dist_attention.h"
#include "attention/token_blocks.h"
#include "comm/fail.h"

typedef struct {
    AttentionLayer base;
    Comm* comm;
    RingLayout layout;
    int P, i, next, prev;
    int max_B, max_Tl, max_NH, max_HS;
    real* kv[2];       // (B, Tl, 2C) K|V block in hand and the one arriving
    real* dkv[3];      // (B, Tl, 2C) dK|dV: travelling accumulator, arriving one, this step's part
    real* o_step;      // (B, Tl, C) one step's partial output
    real* lse_step;    // (B, NH, Tl)
    real* d_own;       // (B, NH, Tl) rowsum(dout * out)
} RingAttention;

static TokenPositions rank_positions(RingLayout layout, int P, int rank, int Tl) {
    if (layout == RING_CONTIGUOUS) return (TokenPositions){(long)rank * Tl, 1};
    return (TokenPositions){rank, P};
}

static void check_call(const RingAttention* a, int B, int Tl, int NH, int HS) {
    CHECK(B >= 1 && Tl >= 1 && NH >= 1 && HS >= 1 && B <= a->max_B && Tl <= a->max_Tl &&
              NH <= a->max_NH && HS <= a->max_HS,
          "create the layer with bounds that cover every call",
          "%s called with B=%d Tl=%d NH=%d HS=%d, bounds %d %d %d %d", a->base.name, B, Tl, NH,
          HS, a->max_B, a->max_Tl, a->max_NH, a->max_HS);
    // Contiguous chunks start at rank * Tl: another Tl would move the tokens away from the
    // positions the layer advertises.
    CHECK(a->layout == RING_CYCLIC || Tl == a->max_Tl, "create the ring layer for this length",
          "ring attention (contiguous layout) created for Tl=%d, called with Tl=%d", a->max_Tl, Tl);
}

// The local queries against the K|V block of rank `origin`.
static AttentionProblem step_problem(const RingAttention* a, int origin, int B, int Tl, int NH,
                                     int HS) {
    AttentionProblem p = {.B = B, .NH = NH, .HS = HS, .Tq = Tl, .Tk = Tl,
                          .qpos = rank_positions(a->layout, a->P, a->i, Tl),
                          .kpos = rank_positions(a->layout, a->P, origin, Tl)};
    return p;
}

// Whether any key of the block is visible to any query: the first key against the last query.
static int block_visible(const AttentionProblem* p) {
    return p->kpos.off <= p->qpos.off + p->qpos.stride * (p->Tq - 1);
}

static void swap(real** x, real** y) {
    real* t = *x;
    *x = *y;
    *y = t;
}

static void ring_forward(AttentionLayer* self, int layer, int B, int Tl, int NH, int HS,
                         const real* qkv, real* out, real* lse) {
    RingAttention* a = (RingAttention*)self;
    check_call(a, B, Tl, NH, HS);
    Comm* comm = a->comm;
    const int C = NH * HS;
    const CommScope saved = comm_enter_scope(comm, layer, COMM_FORWARD);
    const size_t S2 = (size_t)B * Tl * 2 * C;

    copy_rows(a->kv[0], 2 * C, qkv + C, 3 * C, (long)B * Tl, 2 * C);
    for (int s = 0; s < a->P; s++) {
        CommRequest* req = NULL;
        if (s < a->P - 1) {   // pass the block on while computing with it
            CommTransfer send = {a->next, a->kv[0], S2}, recv = {a->prev, a->kv[1], S2};
            req = comm_start(comm, MESH_SP, COMM_REAL, &send, 1, &recv, 1);
        }
        const AttentionProblem p = step_problem(a, (a->i - s + a->P) % a->P, B, Tl, NH, HS);
        const real* k = a->kv[0];
        if (s == 0) {   // the diagonal block: every query sees its own position
            attention_partial_forward(&p, qkv, 3 * C, k, 2 * C, k + C, 2 * C, out, C, lse);
        } else if (block_visible(&p)) {
            attention_partial_forward(&p, qkv, 3 * C, k, 2 * C, k + C, 2 * C, a->o_step, C,
                                      a->lse_step);
            attention_merge(B, NH, HS, Tl, out, C, lse, a->o_step, C, a->lse_step);
        }
        if (req) comm_wait(comm, req);
        swap(&a->kv[0], &a->kv[1]);
    }
    comm_leave_scope(comm, saved);
}

static void ring_backward(AttentionLayer* self, int layer, int B, int Tl, int NH, int HS,
                          const real* qkv, const real* out, const real* lse, const real* dout,
                          real* dqkv) {
    RingAttention* a = (RingAttention*)self;
    check_call(a, B, Tl, NH, HS);
    Comm* comm = a->comm;
    const int C = NH * HS;
    const CommScope saved = comm_enter_scope(comm, layer, COMM_BACKWARD);
    const size_t S2 = (size_t)B * Tl * 2 * C;
    const long rows = (long)B * Tl;

    const AttentionProblem own = step_problem(a, a->i, B, Tl, NH, HS);
    attention_row_dot(&own, out, C, dout, C, a->d_own);
    for (long t = 0; t < rows; t++) memset(dqkv + t * 3 * C, 0, sizeof(real) * C);   // dQ += below
    copy_rows(a->kv[0], 2 * C, qkv + C, 3 * C, rows, 2 * C);
    // dkv[0]: accumulator of the block in hand's origin, complete for ranks origin..i-1 once
    // dkv[1] has arrived; dkv[2]: this rank's part. The parts computed here are added after
    // the wait, so compute never waits for the arriving accumulator.
    for (int s = 0; s < a->P; s++) {
        CommTransfer sends[2], recvs[2];
        int n = 0;
        if (s < a->P - 1) {
            sends[n] = (CommTransfer){a->next, a->kv[0], S2};
            recvs[n++] = (CommTransfer){a->prev, a->kv[1], S2};
        }
        if (s > 0) {   // the accumulator finished last step moves on with its K|V block
            sends[n] = (CommTransfer){a->next, a->dkv[0], S2};
            recvs[n++] = (CommTransfer){a->prev, a->dkv[1], S2};
        }
        CommRequest* req = n ? comm_start(comm, MESH_SP, COMM_REAL, sends, n, recvs, n) : NULL;

        const AttentionProblem p = step_problem(a, (a->i - s + a->P) % a->P, B, Tl, NH, HS);
        const real* k = a->kv[0];
        real* part = a->dkv[2];
        memset(part, 0, sizeof(real) * S2);
        if (block_visible(&p)) {
            attention_partial_backward(&p, qkv, 3 * C, k, 2 * C, k + C, 2 * C, dout, C, lse,
                                       a->d_own, dqkv, 3 * C, part, 2 * C, part + C, 2 * C);
        }
        if (req) comm_wait(comm, req);
        if (s > 0) {
            for (size_t e = 0; e < S2; e++) a->dkv[1][e] += part[e];
            swap(&a->dkv[0], &a->dkv[1]);   // the new accumulator; the sent one is free
        } else {
            swap(&a->dkv[0], &a->dkv[2]);
        }
        swap(&a->kv[0], &a->kv[1]);
    }
    // The accumulator in hand belongs to rank i+1 and is complete: one last hop home.
    const real* mine = a->dkv[0];
    if (a->P > 1) {
        CommTransfer send = {a->next, a->dkv[0], S2}, recv = {a->prev, a->dkv[1], S2};
        comm_wait(comm, comm_start(comm, MESH_SP, COMM_REAL, &send, 1, &recv, 1));
        mine = a->dkv[1];
    }
    copy_rows(dqkv + C, 3 * C, mine, 2 * C, rows, 2 * C);
    comm_leave_scope(comm, saved);
}

static void ring_destroy(AttentionLayer* self) {
    RingAttention* a = (RingAttention*)self;
    real* buffers[] = {a->kv[0], a->kv[1], a->dkv[0], a->dkv[1], a->dkv[2],
                       a->o_step, a->lse_step, a->d_own};
    for (size_t k = 0; k < sizeof buffers / sizeof *buffers; k++) free(buffers[k]);
    free(a);
}

AttentionLayer* attention_ring_create(Comm* comm, RingLayout layout, int B, int Tl, int NH,
                                      int HS) {
    CHECK(B >= 1 && Tl >= 1 && NH >= 1 && HS >= 1, "caller bug",
          "attention_ring_create: B=%d Tl=%d NH=%d HS=%d", B, Tl, NH, HS);
    CHECK(layout == RING_CONTIGUOUS || layout == RING_CYCLIC, "caller bug",
          "unknown ring layout %d", (int)layout);
    RingAttention* a = xcalloc(1, sizeof *a, "ring attention layer");
    const Mesh* m = &comm->mesh;
    a->comm = comm;
    a->layout = layout;
    a->P = m->P;
    a->i = m->sp_index;
    a->next = (a->i + 1) % a->P;
    a->prev = (a->i - 1 + a->P) % a->P;
    a->max_B = B;
    a->max_Tl = Tl;
    a->max_NH = NH;
    a->max_HS = HS;
    const size_t S = (size_t)B * Tl * NH * HS, L = (size_t)B * NH * Tl;
    for (int k = 0; k < 2; k++) a->kv[k] = xmalloc(sizeof(real) * 2 * S, "ring K/V block");
    for (int k = 0; k < 3; k++) a->dkv[k] = xmalloc(sizeof(real) * 2 * S, "ring dK/dV block");
    a->o_step = xmalloc(sizeof(real) * S, "ring step output");
    a->lse_step = xmalloc(sizeof(real) * L, "ring step LSE");
    a->d_own = xmalloc(sizeof(real) * L, "ring backward D");

    a->base.forward = ring_forward;
    a->base.backward = ring_backward;
    a->base.destroy = ring_destroy;
    a->base.positions = rank_positions(layout, a->P, a->i, Tl);
    a->base.name = layout == RING_CONTIGUOUS ? "ring" : "striped";
    return &a->base;
}
