// Ulysses attention (DeepSpeed-Ulysses): the sequence-parallel group trades sequence for heads.
// Rank i holds its tokens (Striped's cyclic layout: position t on rank t mod P) for every head;
// an all-to-all gives it the whole sequence for heads [i H, (i+1) H), H = NH / P, where it runs
// one single-device attention call (every mask, window and document applies as on one device,
// and every rank does the same work), and a second all-to-all returns each token's output to
// its owner. Per rank and layer the forward receives (P-1)/P of 4 S values (Q|K|V in, O out;
// S = B Tl C) and the LSE: the volume falls as 1/P at a fixed T, where the ring family's stays
// at 2 S, but P cannot exceed NH.
//
// Block d of an all-to-all is (B, Tl, w): peer d's rows, in the columns of the heads one side
// owns; received blocks stack as (P, B, Tl, w), and with the cyclic layout block g's row (b, j)
// is position g + P j, so dist_blocks_to_rows lays them out as (B, T, w) in one call.
//
// Q, K, V, O, dO and the returned gradients travel in the storage type `real`, rounded once
// where a single device rounds them (O and dQ|dK|dV after the fp32 sums); the LSE travels in
// real_acc. The heads' computation is the single-device one, bit for bit on the CPU.
//
// USP (unified sequence parallelism: Ulysses inside, a ring outside) is the same layer over the
// mesh column instead of the SP group, with a Striped ring over the mesh row doing the heads'
// computation: rank (r, c) holds the tokens t = c + pkv r (mod P); the column's all-to-all gives
// it the tokens t = c (mod pkv) for heads [r H, (r+1) H), H = NH / pq, and the ring of its row
// (the pkv ranks with the same heads) runs Striped attention over them. So the all-to-alls stay
// within pq ranks (one node, where the column's consecutive ranks are placed) and the ring's
// passes, of the same 2 S per step as Striped's, cross only pkv - 1 hops. pq = 1 is Striped,
// pkv = 1 Ulysses.
#include <limits.h>
#include <stdlib.h>

#include "attention/dist_attention.h"
#include "attention/dist_bounds.h"
#include "attention/dist_ops.h"
#include "attention/dist_scratch.h"
#include "comm/fail.h"

typedef struct {
    AttentionLayer base;
    Comm* comm;
    MeshGroup group;   // the all-to-alls' ranks: the SP group, or the mesh column (USP)
    int P;             // ranks in that group
    AttentionLayer* inner;   // USP: the Striped ring over the mesh row (NULL: one local call)
    DistBounds max;    // shapes the scratch is sized for
    CommType rt, at;   // comm types of real and real_acc
    real* send;        // (P, B, Tl, w) blocks for the peers, w up to 5 H HS
    real* recv;        // (P, B, Tl, w) blocks from the peers
    real* heads;       // (B, T, w) this rank's heads over the whole sequence
    real_acc* acc;     // (B, T, H HS) partial O; backward (B, T, 3 H HS) dQ|dK|dV sums (no inner)
    real_acc* lse_heads;              // (B, H, T) the heads' LSE
    real_acc *lse_send, *lse_recv;    // (P, B, H, Tl) the LSE's all-to-all blocks
    real_acc* d;                      // (B, H, T) rowsum(dO * O) of the heads (no inner)
} UlyssesAttention;

static void check_heads(const char* name, int NH, int P) {
    CHECK(NH % P == 0, "use a head count divisible by the all-to-all's ranks (P; usp: pq)",
          "%s attention: %d heads do not split over %d ranks", name, NH, P);
}

static void check_call(const UlyssesAttention* a, int B, int Tl, int NH, int HS) {
    dist_bounds_check(&a->max, a->base.name, B, Tl, NH, HS);
    check_heads(a->base.name, NH, a->P);
}

// Head columns for the peers: column block k (of `parts`, part_ld apart) of rows (B Tl, ld) holds
// peer d's heads in columns [d w, (d+1) w); they go to block d of (P, B Tl, width w) at column
// (first + k) w. The all-to-all's blocks are built from several tensors this way, side by side:
// one batched copy per column block, the P peers' blocks in one launch.
static void pack_heads(const UlyssesAttention* a, real* blocks, int width, int first,
                       const real* rows, long ld, long part_ld, int parts, long nrows, int w) {
    const long block = nrows * width * w;
    for (int k = 0; k < parts; k++)
        dist_copy_rows_batch(blocks + (size_t)(first + k) * w, (long)width * w, block,
                             rows + k * part_ld, ld, w, a->P, nrows, w, sizeof(real));
}

// The inverse: block d of (P, B Tl, parts w) into columns [d w, (d+1) w) of each column block.
static void unpack_heads(const UlyssesAttention* a, real* rows, long ld, long part_ld,
                         const real* blocks, int parts, long nrows, int w) {
    const long block = nrows * parts * w;
    for (int k = 0; k < parts; k++)
        dist_copy_rows_batch(rows + k * part_ld, ld, w, blocks + (size_t)k * w, (long)parts * w,
                             block, a->P, nrows, w, sizeof(real));
}

// The layer's (B, NH, Tl) LSE and the peers' blocks (P, B, H, Tl): head d H + h of row b is
// block d's (b, h).
static void lse_to_blocks(const UlyssesAttention* a, real_acc* blocks, const real_acc* lse, int B,
                          int NH, int Tl) {
    const int H = NH / a->P;
    dist_copy_rows_batch(blocks, (long)H * Tl, (long)B * H * Tl, lse, (long)NH * Tl, (long)H * Tl,
                         a->P, B, H * Tl, sizeof(real_acc));
}

static void blocks_to_lse(const UlyssesAttention* a, real_acc* lse, const real_acc* blocks, int B,
                          int NH, int Tl) {
    const int H = NH / a->P;
    dist_copy_rows_batch(lse, (long)NH * Tl, (long)H * Tl, blocks, (long)H * Tl, (long)B * H * Tl,
                         a->P, B, H * Tl, sizeof(real_acc));
}

// All T positions of this rank's H heads: one single-device problem.
static AttentionProblem heads_problem(const UlyssesAttention* a, int B, int T, int H, int HS,
                                      long window) {
    const TokenPositions all = token_positions(0, 1);
    AttentionProblem p = attention_problem(B, H, HS, T, T, all, all);
    p.window = window;
    p.docs = a->base.docs;
    return p;
}

// One rank alone keeps its block: a copy, no communication (none counted, as the closed form says).
static CommRequest* all_to_all(UlyssesAttention* a, const void* send, void* recv, size_t count,
                               CommType t) {
    if (a->P > 1) return comm_all_to_all_start(a->comm, a->group, send, recv, count, t);
    CHECK(count <= INT_MAX, "caller bug", "ulysses: a block of %zu elements", count);
    dist_copy_rows(recv, (long)count, send, (long)count, 1, (int)count, comm_type_size(t));
    return NULL;
}

static void ulysses_forward(AttentionLayer* self, int layer, long window, int B, int Tl, int NH,
                            int HS, const real* qkv, real* out, real_stat* lse) {
    UlyssesAttention* a = (UlyssesAttention*)self;
    check_call(a, B, Tl, NH, HS);
    const CommScope saved = comm_enter_scope(a->comm, layer, COMM_FORWARD);
    const int P = a->P, C = NH * HS, H = NH / P, w = H * HS, T = P * Tl;
    const long rows = (long)B * Tl;
    const size_t block = (size_t)rows * w;   // one tensor's block for one peer

    // Q|K|V of every local token for each peer's heads; in: this rank's heads, every token.
    pack_heads(a, a->send, 3, 0, qkv, 3 * C, C, 3, rows, w);
    comm_wait(a->comm, all_to_all(a, a->send, a->recv, 3 * block, a->rt));
    dist_blocks_to_rows(a->heads, 3 * w, a->recv, 3 * block, P, B, Tl, 3 * w, sizeof(real));

    real* o_heads = a->heads;   // (B, T, w) the heads' O
    if (a->inner) {
        o_heads = a->recv;   // free once laid out
        a->inner->docs = a->base.docs;
        a->inner->forward(a->inner, layer, window, B, T, H, HS, a->heads, o_heads, a->lse_heads);
    } else {
        const AttentionProblem p = heads_problem(a, B, T, H, HS, window);
        dist_attention_forward(&p, a->heads, 3 * w, a->heads + w, 3 * w, a->heads + 2 * w, 3 * w,
                               a->acc, w, a->lse_heads);
        dist_acc_to_real(o_heads, w, a->acc, w, (long)B * T, w);
    }

    // O and its LSE back to the tokens' owners.
    dist_rows_to_blocks(a->send, block, o_heads, w, P, B, Tl, w, sizeof(real));
    dist_rows_to_blocks(a->lse_send, (long)B * H * Tl, a->lse_heads, 1, P, B * H, Tl, 1,
                        sizeof(real_acc));
    CommRequest* o_req = all_to_all(a, a->send, a->recv, block, a->rt);
    CommRequest* lse_req = all_to_all(a, a->lse_send, a->lse_recv, (size_t)B * H * Tl, a->at);
    comm_wait(a->comm, o_req);
    comm_wait(a->comm, lse_req);
    unpack_heads(a, out, C, 0, a->recv, 1, rows, w);
    blocks_to_lse(a, lse, a->lse_recv, B, NH, Tl);
    comm_leave_scope(a->comm, saved);
}

static void ulysses_backward(AttentionLayer* self, int layer, long window, int B, int Tl, int NH,
                             int HS, const real* qkv, const real* out, const real_stat* lse,
                             const real* dout, real* dqkv) {
    UlyssesAttention* a = (UlyssesAttention*)self;
    check_call(a, B, Tl, NH, HS);
    const CommScope saved = comm_enter_scope(a->comm, layer, COMM_BACKWARD);
    const int P = a->P, C = NH * HS, H = NH / P, w = H * HS, T = P * Tl;
    const long rows = (long)B * Tl;
    const size_t block = (size_t)rows * w;

    // Q|K|V|O|dO for each peer's heads, side by side in blocks 5 w wide.
    pack_heads(a, a->send, 5, 0, qkv, 3 * C, C, 3, rows, w);
    pack_heads(a, a->send, 5, 3, out, C, 0, 1, rows, w);
    pack_heads(a, a->send, 5, 4, dout, C, 0, 1, rows, w);
    lse_to_blocks(a, a->lse_send, lse, B, NH, Tl);
    CommRequest* in_req = all_to_all(a, a->send, a->recv, 5 * block, a->rt);
    CommRequest* lse_req = all_to_all(a, a->lse_send, a->lse_recv, (size_t)B * H * Tl, a->at);
    comm_wait(a->comm, in_req);
    comm_wait(a->comm, lse_req);
    dist_blocks_to_rows(a->heads, 5 * w, a->recv, 5 * block, P, B, Tl, 5 * w, sizeof(real));
    dist_blocks_to_rows(a->lse_heads, 1, a->lse_recv, (long)B * H * Tl, P, B * H, Tl, 1,
                        sizeof(real_acc));

    const real* q = a->heads;
    const long all = (long)B * T;
    real* dqkv_heads = a->heads;   // (B, T, 3w) the heads' dQ|dK|dV
    if (a->inner) {
        // The inner layer takes Q|K|V (B, T, 3w), O and dO (B, T, w) as tensors of their own:
        // split out of the 5w-wide rows into the send buffer, free until the return.
        real* qkv_h = a->send;
        real* o_h = qkv_h + (size_t)all * 3 * w;
        real* do_h = o_h + (size_t)all * w;
        dist_copy_rows(qkv_h, 3 * w, q, 5 * w, all, 3 * w, sizeof(real));
        dist_copy_rows(o_h, w, q + 3 * w, 5 * w, all, w, sizeof(real));
        dist_copy_rows(do_h, w, q + 4 * w, 5 * w, all, w, sizeof(real));
        dqkv_heads = a->recv;
        a->inner->docs = a->base.docs;
        a->inner->backward(a->inner, layer, window, B, T, H, HS, qkv_h, o_h, a->lse_heads, do_h,
                           dqkv_heads);
    } else {
        const AttentionProblem p = heads_problem(a, B, T, H, HS, window);
        dist_attention_row_dot(&p, q + 3 * w, 5 * w, q + 4 * w, 5 * w, a->d);
        dist_zero_acc(a->acc, (size_t)3 * all * w);
        dist_attention_backward(&p, q, 5 * w, q + w, 5 * w, q + 2 * w, 5 * w, q + 4 * w, 5 * w,
                                a->lse_heads, a->d, a->acc, 3 * w, a->acc + w, 3 * w,
                                a->acc + 2 * w, 3 * w);
        dist_acc_to_real(dqkv_heads, 3 * w, a->acc, 3 * w, all, 3 * w);
    }

    // dQ|dK|dV back to the tokens' owners, into the three column blocks of dqkv.
    dist_rows_to_blocks(a->send, 3 * block, dqkv_heads, 3 * w, P, B, Tl, 3 * w, sizeof(real));
    comm_wait(a->comm, all_to_all(a, a->send, a->recv, 3 * block, a->rt));
    unpack_heads(a, dqkv, 3 * C, C, a->recv, 3, rows, w);
    comm_leave_scope(a->comm, saved);
}

static void ulysses_destroy(AttentionLayer* self) {
    UlyssesAttention* a = (UlyssesAttention*)self;
    void* buffers[] = {a->send,     a->recv,     a->heads,    a->acc,
                       a->lse_heads, a->lse_send, a->lse_recv, a->d};
    for (size_t k = 0; k < sizeof buffers / sizeof *buffers; k++) dist_free(buffers[k]);
    attention_layer_free(a->inner);
    free(a);
}

// The layer over `group` (the SP group, or the mesh column for USP, whose ring runs over the row);
// this rank's tokens are those at t = pos (mod P) for the whole SP group's P.
static AttentionLayer* create(Comm* comm, MeshGroup group, const char* name, int pos, int B,
                              int Tl, int NH, int HS) {
    const Mesh* m = &comm->mesh;
    const int P = mesh_group_size(m, group), usp = group != MESH_SP;
    check_heads(name, NH, P);
    UlyssesAttention* a = (UlyssesAttention*)xcalloc(1, sizeof *a, "ulysses attention layer");
    a->comm = comm;
    a->group = group;
    a->P = P;
    a->max = dist_bounds(name, B, Tl, NH, HS);
    a->rt = dist_real_comm_type();
    a->at = dist_acc_comm_type();
    const size_t S = (size_t)B * Tl * NH * HS, L = (size_t)B * NH * Tl;
    UlyssesScratch z;   // bytes of each buffer (attention/dist_scratch.h)
    ulysses_scratch(&z, S, L, sizeof(real), sizeof(real_acc), usp);
    a->send = (real*)dist_alloc(z.send, "ulysses send blocks");
    a->recv = (real*)dist_alloc(z.recv, "ulysses receive blocks");
    a->heads = (real*)dist_alloc(z.heads, "ulysses heads");
    a->lse_heads = (real_acc*)dist_alloc(z.lse_heads, "ulysses heads LSE");
    a->lse_send = (real_acc*)dist_alloc(z.lse_send, "ulysses LSE send blocks");
    a->lse_recv = (real_acc*)dist_alloc(z.lse_recv, "ulysses LSE receive blocks");
    if (usp) {   // the column's tokens t = c (mod pkv), H heads, on the ring of the row
        a->inner = attention_ring_create_on(comm, MESH_ROW, RING_CYCLIC, B, P * Tl, NH / P, HS);
    } else {
        a->acc = (real_acc*)dist_alloc(z.acc, "ulysses output and gradient sums");
        a->d = (real_acc*)dist_alloc(z.d, "ulysses backward D");
    }

    a->base.forward = ulysses_forward;
    a->base.backward = ulysses_backward;
    a->base.destroy = ulysses_destroy;
    a->base.positions = token_layout(token_positions(pos, m->P));
    a->base.name = name;
    return &a->base;
}

AttentionLayer* attention_ulysses_create(Comm* comm, int B, int Tl, int NH, int HS) {
    return create(comm, MESH_SP, "ulysses", comm->mesh.sp_index, B, Tl, NH, HS);
}

AttentionLayer* attention_usp_create(Comm* comm, int B, int Tl, int NH, int HS) {
    return create(comm, MESH_COL, "usp", attention_usp_place(&comm->mesh), B, Tl, NH, HS);
}
