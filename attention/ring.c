// Ring, Striped and Zigzag attention: one ring schedule, three token layouts. Rank i keeps its
// queries; at step s of the whole ring it holds the K|V block of origin rank (i - s) mod P and,
// while computing with it, sends it to rank i+1 and receives the next from rank i-1. S = B*Tl*C
// elements per shard; a K|V block is B*Tl*2KVC, KVC = NKV*HS (C, or less under grouped-query
// attention), and W = C + 2 KVC is the qkv row. The ring is the SP group, or one mesh row inside USP (attention/ulysses.c).
//
// A layout is one run of positions (Ring: contiguous, Striped: cyclic) or two (Zigzag: chunks i
// and 2P-1-i of Tl/2 tokens, local tokens alternating between them: attention/partial_attention.h,
// TokenLayout). A run is a strided view of the local rows (row stride doubled), so a step is one
// partial-attention call per visible (query run, key run) pair and nothing is packed: Zigzag's
// steps s > 0 have two visible pairs of Tl/2 x Tl/2, all unmasked, which is its load balance.
//
// K|V blocks travel in the storage type `real` (bf16 on the CUDA bf16 build); the output, its LSE
// and the dQ, dK|dV accumulators are real_acc (fp32 on CUDA), and so is the travelling dK|dV
// accumulator, which sums P partials (attention/dist_ops.h).
//
// Under a window or documents the ring stops early where no query reaches back far (ring_steps
// of attention/dist_cost.h): n < P steps see every block any query of the rank sees. Ring's
// contiguous chunks need the blocks of ranks i - n + 1 .. i, the one-way ring's first n steps.
// Zigzag's chunk i reaches back into ranks i - 1, i - 2, .. and its chunk 2P-1-i into ranks
// i + 1, i + 2, ..: a two-way tour, blocks from behind, then from ahead (ring_step_offset), each
// block passed on from the rank that held it the step before (the turn is one transfer of
// reach + 1 ranks back). A dK|dV accumulator follows its block and, complete at the block's last
// rank, goes home in one transfer. Every rank of the ring computes the same n and tour: the window
// is the layer's and the document span comes from the sequences they all hold.
#include <stdlib.h>
#include <string.h>

#include "attention/dist_attention.h"
#include "attention/dist_bounds.h"
#include "attention/dist_cost.h"
#include "attention/dist_ops.h"
#include "attention/dist_scratch.h"
#include "comm/fail.h"

typedef struct {
    AttentionLayer base;
    Comm* comm;
    RingLayout layout;
    int runs;             // runs of positions per rank: 1, or 2 for Zigzag
    MeshGroup group;      // the ring's ranks: the SP group, or a mesh row inside USP
    int P, i;             // ranks in the ring, this rank's place
    DistBounds max;    // shapes the scratch is sized for
    CommType rt, at;      // comm types of real and real_acc
    real* kv[RING_KV_BLOCKS];        // (B, Tl, 2KVC) K|V block in hand and the one arriving
    real_acc* dkv[RING_DKV_BLOCKS];  // (B, Tl, 2KVC) dK|dV: travelling accumulator, arriving one,
                                     // this step's part
    real_acc* o;          // (B, Tl, C) merged output of the local queries
    real_acc* o_step;     // (B, Tl, C) one step's partial output (NULL: merged in the forward)
    real_acc* lse_step;   // (B, NH, Tl/runs) one call's LSE (NULL likewise)
    real_acc* lse_runs;   // Zigzag: (runs, B, NH, Tl/runs) the layer's LSE run by run (else NULL)
    real_acc* d_own;      // (runs, B, NH, Tl/runs) rowsum(dout * out)
    real_acc* dq;         // (B, Tl, C) dQ accumulator
} RingAttention;

TokenLayout ring_rank_layout(RingLayout layout, int P, int rank, int Tl) {
    if (layout == RING_CONTIGUOUS) return token_layout(token_positions((long)rank * Tl, 1));
    if (layout == RING_CYCLIC) return token_layout(token_positions(rank, P));
    TokenLayout z;   // chunks rank and 2P-1-rank of Tl/2
    z.off[0] = (long)rank * (Tl / 2);
    z.off[1] = (long)(2 * P - 1 - rank) * (Tl / 2);
    z.stride = 1;
    z.chunks = 2;
    return z;
}

static void check_call(const RingAttention* a, int B, int Tl, int NH, int NKV, int HS) {
    dist_bounds_check(&a->max, a->base.name, B, Tl, NH, NKV, HS);
    // Contiguous chunks start at a multiple of Tl: another Tl would move the tokens away from
    // the positions the layer advertises.
    CHECK(a->layout == RING_CYCLIC || Tl == a->max.Tl, "create the ring layer for this length",
          "%s attention created for Tl=%d, called with Tl=%d", a->base.name, a->max.Tl, Tl);
}

// Query run qrun of the local tokens against key run krun of the K|V block of rank `origin`.
static AttentionProblem run_problem(const RingAttention* a, int qrun, int origin, int krun, int B,
                                    int Tl, int NH, int NKV, int HS, long window) {
    const int n = Tl / a->runs;
    AttentionProblem p =
        attention_problem(B, NH, HS, n, n,
                          token_layout_run(ring_rank_layout(a->layout, a->P, a->i, Tl), qrun),
                          token_layout_run(ring_rank_layout(a->layout, a->P, origin, Tl), krun));
    p.NKV = NKV;
    p.window = window;
    p.docs = a->base.docs;
    return p;
}


static void swap_real(real** x, real** y) {
    real* t = *x;
    *x = *y;
    *y = t;
}

static void swap_acc(real_acc** x, real_acc** y) {
    real_acc* t = *x;
    *x = *y;
    *y = t;
}

// Sends `count` elements of `send` to the rank `hops` ahead and receives as many from the rank
// `hops` behind (hops 1: the next and the previous one; negative: the other way).
static CommRequest* pass_ahead(RingAttention* a, int hops, CommType t, void* send, void* recv,
                               size_t count) {
    hops = (hops % a->P + a->P) % a->P;
    CommTransfer out, in;
    out.peer = (a->i + hops) % a->P, out.buf = send, out.count = count;
    in.peer = (a->i - hops + a->P) % a->P, in.buf = recv, in.count = count;
    return comm_start(a->comm, a->group, t, &out, 1, &in, 1);
}

// The ring steps of this layer call (ring_steps): P, or fewer where the queries reach back less
// far than the ring is long.
static int steps_of(const RingAttention* a, long window, int Tl) {
    return ring_steps(a->layout, a->P, Tl, window, a->base.docs.start ? a->base.docs.span : 0);
}

static int offset_of(const RingAttention* a, int steps, int s) {
    return ring_step_offset(a->layout, a->P, steps, s);
}

// Passes the block held at step s (and, in the backward, its accumulator one step later) to the
// rank that holds it at step s + 1, receiving the next one: 1 rank ahead on the one-way ring.
static CommRequest* pass_on(RingAttention* a, int steps, int s, CommType t, void* send,
                            void* recv, size_t count) {
    return pass_ahead(a, offset_of(a, steps, s) - offset_of(a, steps, s + 1), t, send, recv,
                      count);
}

static void ring_forward(AttentionLayer* self, int layer, long window, int B, int Tl, int NH, int NKV,
                         int HS, const real* qkv, real* out, real_stat* lse) {
    RingAttention* a = (RingAttention*)self;
    check_call(a, B, Tl, NH, NKV, HS);
    Comm* comm = a->comm;
    const int C = NH * HS, KVC = NKV * HS, W = attention_qkv_width(NH, NKV, HS);
    const CommScope saved = comm_enter_scope(comm, layer, COMM_FORWARD);
    const size_t S2 = (size_t)B * Tl * 2 * KVC;
    const long rows = (long)B * Tl;

    const int R = a->runs, n = Tl / R;   // runs are views with R times the row stride
    dist_copy_rows(a->kv[0], 2 * KVC, qkv + C, W, rows, 2 * KVC, sizeof(real));
    int have[2] = {0, 0};   // whether query run r holds a partial output yet
    const int steps = steps_of(a, window, Tl);
    for (int s = 0; s < steps; s++) {
        // Pass the block on while computing with it.
        CommRequest* req = s < steps - 1 ? pass_on(a, steps, s, a->rt, a->kv[0], a->kv[1], S2)
                                         : NULL;
        const int origin = ring_step_origin(a->layout, a->P, steps, a->i, s);
        for (int qr = 0; qr < R; qr++)
            for (int kr = 0; kr < R; kr++) {
                const AttentionProblem p =
                    run_problem(a, qr, origin, kr, B, Tl, NH, NKV, HS, window);
                if (!attention_any_visible(&p)) continue;
                const real* q = qkv + (size_t)qr * W;
                const real* k = a->kv[0] + (size_t)kr * 2 * KVC;
                real_acc* o = a->o + (size_t)qr * C;
                // the layer's LSE itself with one run, else run qr of the scratch
                real_acc* run_lse = R == 1 ? lse : a->lse_runs + (size_t)qr * B * NH * n;
                if (!have[qr]) {   // the first visible block (the diagonal: a query sees itself)
                    dist_attention_forward(&p, q, R * W, k, R * 2 * KVC, k + KVC, R * 2 * KVC,
                                           o, R * C, run_lse);
                    have[qr] = 1;
                } else {
                    real_acc* o_step = a->o_step ? a->o_step + (size_t)qr * C : NULL;
                    dist_attention_forward_merge(&p, q, R * W, k, R * 2 * KVC, k + KVC,
                                                 R * 2 * KVC, o, R * C, run_lse, o_step,
                                                 a->lse_step);
                }
            }
        comm_wait(comm, req);
        swap_real(&a->kv[0], &a->kv[1]);
    }
    dist_acc_to_real(out, C, a->o, C, rows, C);
    if (R > 1)   // (runs, B*NH, n) -> (B*NH, Tl), run r of row m landing on column r + R*j
        dist_blocks_to_rows(lse, 1, a->lse_runs, (long)B * NH * n, R, B * NH, n, 1,
                            sizeof(real_acc));
    comm_leave_scope(comm, saved);
}

static void ring_backward(AttentionLayer* self, int layer, long window, int B, int Tl, int NH,
                          int NKV, int HS, const real* qkv, const real* out, const real_stat* lse,
                          const real* dout, real* dqkv) {
    RingAttention* a = (RingAttention*)self;
    check_call(a, B, Tl, NH, NKV, HS);
    Comm* comm = a->comm;
    const int C = NH * HS, KVC = NKV * HS, W = attention_qkv_width(NH, NKV, HS);
    const CommScope saved = comm_enter_scope(comm, layer, COMM_BACKWARD);
    const size_t S2 = (size_t)B * Tl * 2 * KVC;
    const long rows = (long)B * Tl;

    const int R = a->runs, n = Tl / R;
    if (R > 1)   // the layer's (B*NH, Tl) LSE as runs of (B*NH, n)
        dist_rows_to_blocks(a->lse_runs, (long)B * NH * n, lse, 1, R, B * NH, n, 1,
                            sizeof(real_acc));
    for (int qr = 0; qr < R; qr++) {
        const AttentionProblem own = run_problem(a, qr, a->i, qr, B, Tl, NH, NKV, HS, window);
        dist_attention_row_dot(&own, out + (size_t)qr * C, R * C, dout + (size_t)qr * C, R * C,
                               a->d_own + (size_t)qr * B * NH * n);
    }
    dist_zero_acc(a->dq, (size_t)rows * C);
    dist_copy_rows(a->kv[0], 2 * KVC, qkv + C, W, rows, 2 * KVC, sizeof(real));
    // dkv[0]: accumulator of the block in hand's origin, complete for the ranks that held the
    // block before this one once dkv[1] has arrived; dkv[2]: this rank's part. The parts
    // computed here are added after the wait, so compute never waits for the arriving
    // accumulator. K|V and the accumulators have different types, so they travel in two batches.
    const int steps = steps_of(a, window, Tl);
    for (int s = 0; s < steps; s++) {
        CommRequest* kv_req =
            s < steps - 1 ? pass_on(a, steps, s, a->rt, a->kv[0], a->kv[1], S2) : NULL;
        // the accumulator finished last step moves on the way its K|V block went
        CommRequest* dkv_req =
            s > 0 ? pass_on(a, steps, s - 1, a->at, a->dkv[0], a->dkv[1], S2) : NULL;

        const int origin = ring_step_origin(a->layout, a->P, steps, a->i, s);
        real_acc* part = a->dkv[2];
        dist_zero_acc(part, S2);
        for (int qr = 0; qr < R; qr++)
            for (int kr = 0; kr < R; kr++) {
                const AttentionProblem p =
                    run_problem(a, qr, origin, kr, B, Tl, NH, NKV, HS, window);
                if (!attention_any_visible(&p)) continue;
                const real* k = a->kv[0] + (size_t)kr * 2 * KVC;
                real_acc* dk = part + (size_t)kr * 2 * KVC;
                const size_t qo = (size_t)qr * C;
                dist_attention_backward(&p, qkv + (size_t)qr * W, R * W, k, R * 2 * KVC, k + KVC,
                                        R * 2 * KVC, dout + qo, R * C,
                                        R == 1 ? lse : a->lse_runs + (size_t)qr * B * NH * n,
                                        a->d_own + (size_t)qr * B * NH * n, a->dq + qo, R * C, dk,
                                        R * 2 * KVC, dk + KVC, R * 2 * KVC);
            }
        comm_wait(comm, kv_req);
        comm_wait(comm, dkv_req);
        if (s > 0) {
            dist_add_acc(a->dkv[1], part, S2);
            swap_acc(&a->dkv[0], &a->dkv[1]);   // the new accumulator; the sent one is free
        } else {
            swap_acc(&a->dkv[0], &a->dkv[2]);
        }
        swap_real(&a->kv[0], &a->kv[1]);
    }
    // The accumulator in hand belongs to the last step's origin (i - steps + 1 on the one-way
    // ring, i + reach on Zigzag's tour) and is complete: one last transfer home, which brings
    // this rank's own from the rank at the opposite offset.
    const real_acc* mine = a->dkv[0];
    if (steps > 1) {
        comm_wait(comm, pass_ahead(a, offset_of(a, steps, steps - 1), a->at, a->dkv[0],
                                   a->dkv[1], S2));
        mine = a->dkv[1];
    }
    dist_acc_to_real(dqkv, W, a->dq, C, rows, C);
    dist_acc_to_real(dqkv + C, W, mine, 2 * KVC, rows, 2 * KVC);
    comm_leave_scope(comm, saved);
}

static void ring_destroy(AttentionLayer* self) {
    RingAttention* a = (RingAttention*)self;
    void* buffers[] = {a->kv[0],     a->kv[1],    a->dkv[0], a->dkv[1], a->dkv[2], a->o,
                       a->o_step,    a->lse_step, a->lse_runs, a->d_own, a->dq};
    for (size_t k = 0; k < sizeof buffers / sizeof *buffers; k++) dist_free(buffers[k]);
    free(a);
}

static const char* const RING_NAMES[] = {"ring", "striped", "zigzag"};   // by RingLayout

int ring_layout_parse(const char* name, RingLayout* out) {
    for (int k = 0; k < 3; k++)
        if (strcmp(name, RING_NAMES[k]) == 0) {
            *out = (RingLayout)k;
            return 0;
        }
    return -1;
}

AttentionLayer* attention_ring_create_on(Comm* comm, MeshGroup group, RingLayout layout, int B,
                                         int Tl, int NH, int NKV, int HS) {
    CHECK(layout == RING_CONTIGUOUS || layout == RING_CYCLIC || layout == RING_ZIGZAG,
          "caller bug", "unknown ring layout %d", (int)layout);
    CHECK(layout != RING_ZIGZAG || Tl % 2 == 0, "use a sequence length divisible by 2P",
          "zigzag attention: %d local tokens do not split into two chunks", Tl);
    RingAttention* a = (RingAttention*)xcalloc(1, sizeof *a, "ring attention layer");
    const Mesh* m = &comm->mesh;
    a->comm = comm;
    a->layout = layout;
    a->runs = layout == RING_ZIGZAG ? 2 : 1;
    a->group = group;
    a->P = mesh_group_size(m, group);
    a->i = mesh_group_rank(m, group);
    a->max = dist_bounds(RING_NAMES[layout], B, Tl, NH, NKV, HS);
    a->rt = dist_real_comm_type();
    a->at = dist_acc_comm_type();
    const size_t S = (size_t)B * Tl * NH * HS, Skv = (size_t)B * Tl * NKV * HS;
    const size_t L = (size_t)B * NH * Tl;
    RingScratch z;   // bytes of each buffer (attention/dist_scratch.h)
    ring_scratch(&z, S, Skv, L, sizeof(real), sizeof(real_acc), a->runs,
                 dist_attention_merges_in_forward());
    for (int k = 0; k < RING_KV_BLOCKS; k++) a->kv[k] = (real*)dist_alloc(z.kv, "ring K/V block");
    for (int k = 0; k < RING_DKV_BLOCKS; k++)
        a->dkv[k] = (real_acc*)dist_alloc(z.dkv, "ring dK/dV block");
    a->o = (real_acc*)dist_alloc(z.o, "ring output");
    if (z.o_step) {   // none where the forward merges (attention/dist_ops.h)
        a->o_step = (real_acc*)dist_alloc(z.o_step, "ring step output");
        a->lse_step = (real_acc*)dist_alloc(z.lse_step, "ring step LSE");
    }
    if (a->runs > 1) a->lse_runs = (real_acc*)dist_alloc(z.lse_runs, "zigzag LSE runs");
    a->d_own = (real_acc*)dist_alloc(z.d_own, "ring backward D");
    a->dq = (real_acc*)dist_alloc(z.dq, "ring dQ accumulator");

    a->base.forward = ring_forward;
    a->base.backward = ring_backward;
    a->base.destroy = ring_destroy;
    a->base.positions = ring_rank_layout(layout, a->P, a->i, Tl);
    a->base.name = RING_NAMES[layout];
    return &a->base;
}

AttentionLayer* attention_ring_create(Comm* comm, RingLayout layout, int B, int Tl, int NH,
                                      int NKV, int HS) {
    return attention_ring_create_on(comm, MESH_SP, layout, B, Tl, NH, NKV, HS);
}
