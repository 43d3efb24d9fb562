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
// owns (of one chunk: wc columns); received blocks stack as (P, B, Tl, w), and with the cyclic
// layout block d's row (b, j) is position d + P j, so dist_blocks_to_rows lays them out as
// (B, T, w) in one call.
//
// In G chunks of heads (--a2a-chunks), each exchange is G all-to-alls, one per chunk: every
// chunk's inputs are sent at once, chunk g computes as soon as its own have arrived, and its
// outputs leave while chunk g+1 computes, so only the first chunk's inputs and the last chunk's
// outputs wait for (or hold up) the computation. Each head is computed as with one chunk: the same
// bits, the same bytes, G times the calls.
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
    int chunks;        // head chunks whose all-to-alls travel while another chunk computes
    AttentionLayer* inner;   // USP: the Striped ring over the mesh row (NULL: one local call)
    DistBounds max;    // shapes the scratch is sized for
    CommType rt, at;   // comm types of real and real_acc
    real* send;        // 5 S: the all-to-alls' blocks for the peers
    real* recv;        // 5 S: the blocks from the peers
    real* heads;       // 5 S: this rank's heads over the whole sequence, chunk by chunk
    real_acc* acc;     // 3 S: partial O; backward dQ|dK|dV sums (no inner)
    real_acc* lse_heads;              // L: the heads' LSE
    real_acc *lse_send, *lse_recv;    // L each: the LSE's all-to-all blocks
    real_acc* d;                      // L: rowsum(dO * O) of the heads (no inner)
} UlyssesAttention;

// One call's shapes. Its H = NH / P heads run in G chunks of h heads (wc = h HS columns); chunk g
// holds heads [d H + g h, d H + (g+1) h) of each peer d. A tensor's S = B Tl NH HS values on a
// rank are S / G per chunk, S / (G P) per chunk and peer (one all-to-all block); the LSE's L = B
// NH Tl likewise. Chunk g's part of each buffer starts at g times its part's size.
typedef struct {
    int P, G, B, Tl, T, C, H, h, HS, w, wc;
    long rows;      // B Tl: this rank's tokens
    size_t Sg, Lg;  // S / G and L / G
} Shape;

static void check_heads(const char* name, int NH, int P, int chunks) {
    CHECK(NH % P == 0, "use a head count divisible by the all-to-all's ranks (P; usp: pq)",
          "%s attention: %d heads do not split over %d ranks", name, NH, P);
    CHECK((NH / P) % chunks == 0, "use --a2a-chunks dividing the heads per rank",
          "%s attention: %d heads per rank do not split into %d chunks", name, NH / P, chunks);
}

static Shape call_shape(const UlyssesAttention* a, int B, int Tl, int NH, int HS) {
    dist_bounds_check(&a->max, a->base.name, B, Tl, NH, HS);
    check_heads(a->base.name, NH, a->P, a->chunks);
    Shape z;
    z.P = a->P, z.G = a->chunks, z.B = B, z.Tl = Tl, z.T = a->P * Tl, z.C = NH * HS;
    z.H = NH / a->P, z.h = z.H / z.G, z.HS = HS, z.w = z.H * HS, z.wc = z.h * HS;
    z.rows = (long)B * Tl;
    z.Sg = (size_t)B * Tl * NH * HS / z.G;
    z.Lg = (size_t)B * NH * Tl / z.G;
    return z;
}

// Chunk g's head columns for the peers: column block k (of `parts`, part_ld apart) of rows (B Tl,
// ld) holds peer d's chunk in columns [d w + g wc, d w + (g+1) wc); it goes to block d of (P, B
// Tl, width wc) at column (first + k) wc. The all-to-all's blocks are built from several tensors
// this way, side by side: one batched copy per column block, the P peers' blocks in one launch.
static void pack_heads(const Shape* z, int g, real* blocks, int width, int first, const real* rows,
                       long ld, long part_ld, int parts) {
    const long block = z->rows * width * z->wc;
    for (int k = 0; k < parts; k++)
        dist_copy_rows_batch(blocks + (size_t)(first + k) * z->wc, (long)width * z->wc, block,
                             rows + k * part_ld + (size_t)g * z->wc, ld, z->w, z->P, z->rows,
                             z->wc, sizeof(real));
}

// The inverse: block d of (P, B Tl, parts wc) into chunk g's columns of each column block.
static void unpack_heads(const Shape* z, int g, real* rows, long ld, long part_ld,
                         const real* blocks, int parts) {
    const long block = z->rows * parts * z->wc;
    for (int k = 0; k < parts; k++)
        dist_copy_rows_batch(rows + k * part_ld + (size_t)g * z->wc, ld, z->w,
                             blocks + (size_t)k * z->wc, (long)parts * z->wc, block, z->P,
                             z->rows, z->wc, sizeof(real));
}

// The layer's (B, NH, Tl) LSE and chunk g's blocks (P, B, h, Tl): head d H + g h + j of row b is
// block d's (b, j).
static void lse_to_blocks(const Shape* z, int g, real_acc* blocks, const real_acc* lse) {
    const long H = z->H, h = z->h, Tl = z->Tl;
    dist_copy_rows_batch(blocks, h * Tl, z->B * h * Tl, lse + g * h * Tl, z->P * H * Tl, H * Tl,
                         z->P, z->B, (int)(h * Tl), sizeof(real_acc));
}

static void blocks_to_lse(const Shape* z, int g, real_acc* lse, const real_acc* blocks) {
    const long H = z->H, h = z->h, Tl = z->Tl;
    dist_copy_rows_batch(lse + g * h * Tl, z->P * H * Tl, H * Tl, blocks, h * Tl, z->B * h * Tl,
                         z->P, z->B, (int)(h * Tl), sizeof(real_acc));
}

// All T positions of h heads: one single-device problem.
static AttentionProblem heads_problem(const UlyssesAttention* a, const Shape* z, long window) {
    const TokenPositions all = token_positions(0, 1);
    AttentionProblem p = attention_problem(z->B, z->h, z->HS, z->T, z->T, all, all);
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

// Every chunk's all-to-all in starts at once; chunk g computes when its own has arrived, and its
// results leave while chunk g+1 computes (G = 1: in, compute, out). Forward: Q|K|V in send/recv
// [0, 3 S), O out in [3 S, 4 S), the heads' O in recv [4 S, 5 S).
static void ulysses_forward(AttentionLayer* self, int layer, long window, int B, int Tl, int NH,
                            int HS, const real* qkv, real* out, real_stat* lse) {
    UlyssesAttention* a = (UlyssesAttention*)self;
    const Shape z = call_shape(a, B, Tl, NH, HS);
    const CommScope saved = comm_enter_scope(a->comm, layer, COMM_FORWARD);
    const int P = z.P, G = z.G, wc = z.wc;
    const size_t Sg = z.Sg, Lg = z.Lg, S = Sg * G;
    CommRequest *in[ULYSSES_MAX_CHUNKS], *o_req[ULYSSES_MAX_CHUNKS], *lse_req[ULYSSES_MAX_CHUNKS];

    // Q|K|V of every local token for each peer's chunk; in: this rank's chunk, every token.
    for (int g = 0; g < G; g++) {
        pack_heads(&z, g, a->send + 3 * g * Sg, 3, 0, qkv, 3 * z.C, z.C, 3);
        in[g] = all_to_all(a, a->send + 3 * g * Sg, a->recv + 3 * g * Sg, 3 * Sg / P, a->rt);
    }
    for (int g = 0; g < G; g++) {
        real* heads = a->heads + 3 * g * Sg;          // (B, T, 3 wc)
        real* o_heads = a->recv + 4 * S + g * Sg;     // (B, T, wc)
        real_acc* lse_heads = a->lse_heads + g * Lg;  // (B, h, T)
        comm_wait(a->comm, in[g]);
        dist_blocks_to_rows(heads, 3 * wc, a->recv + 3 * g * Sg, 3 * Sg / P, P, B, Tl, 3 * wc,
                            sizeof(real));
        if (a->inner) {
            a->inner->docs = a->base.docs;
            a->inner->forward(a->inner, layer, window, B, z.T, z.h, HS, heads, o_heads,
                              lse_heads);
        } else {
            const AttentionProblem p = heads_problem(a, &z, window);
            real_acc* acc = a->acc + g * Sg;
            dist_attention_forward(&p, heads, 3 * wc, heads + wc, 3 * wc, heads + 2 * wc, 3 * wc,
                                   acc, wc, lse_heads);
            dist_acc_to_real(o_heads, wc, acc, wc, (long)B * z.T, wc);
        }
        // O and its LSE back to the tokens' owners.
        real* o_send = a->send + 3 * S + g * Sg;
        dist_rows_to_blocks(o_send, Sg / P, o_heads, wc, P, B, Tl, wc, sizeof(real));
        dist_rows_to_blocks(a->lse_send + g * Lg, Lg / P, lse_heads, 1, P, B * z.h, Tl, 1,
                            sizeof(real_acc));
        o_req[g] = all_to_all(a, o_send, a->recv + 3 * S + g * Sg, Sg / P, a->rt);
        lse_req[g] = all_to_all(a, a->lse_send + g * Lg, a->lse_recv + g * Lg, Lg / P, a->at);
    }
    for (int g = 0; g < G; g++) {
        comm_wait(a->comm, o_req[g]);
        comm_wait(a->comm, lse_req[g]);
        unpack_heads(&z, g, out, z.C, 0, a->recv + 3 * S + g * Sg, 1);
        blocks_to_lse(&z, g, lse, a->lse_recv + g * Lg);
    }
    comm_leave_scope(a->comm, saved);
}

// As the forward: chunk g's Q|K|V|O|dO (5 S / G) and LSE in at once, its dQ|dK|dV (3 S / G) out
// through the first 3 S / G of its own part of send and recv, free once its inputs are laid out.
static void ulysses_backward(AttentionLayer* self, int layer, long window, int B, int Tl, int NH,
                             int HS, const real* qkv, const real* out, const real_stat* lse,
                             const real* dout, real* dqkv) {
    UlyssesAttention* a = (UlyssesAttention*)self;
    const Shape z = call_shape(a, B, Tl, NH, HS);
    const CommScope saved = comm_enter_scope(a->comm, layer, COMM_BACKWARD);
    const int P = z.P, G = z.G, wc = z.wc, C = z.C;
    const size_t Sg = z.Sg, Lg = z.Lg;
    CommRequest *in[ULYSSES_MAX_CHUNKS], *lse_req[ULYSSES_MAX_CHUNKS], *out_req[ULYSSES_MAX_CHUNKS];

    // Q|K|V|O|dO for each peer's chunk, side by side in blocks 5 wc wide.
    for (int g = 0; g < G; g++) {
        real* send = a->send + 5 * g * Sg;
        pack_heads(&z, g, send, 5, 0, qkv, 3 * C, C, 3);
        pack_heads(&z, g, send, 5, 3, out, C, 0, 1);
        pack_heads(&z, g, send, 5, 4, dout, C, 0, 1);
        lse_to_blocks(&z, g, a->lse_send + g * Lg, lse);
        in[g] = all_to_all(a, send, a->recv + 5 * g * Sg, 5 * Sg / P, a->rt);
        lse_req[g] = all_to_all(a, a->lse_send + g * Lg, a->lse_recv + g * Lg, Lg / P, a->at);
    }
    const long all = (long)B * z.T;
    for (int g = 0; g < G; g++) {
        real* send = a->send + 5 * g * Sg;
        real* recv = a->recv + 5 * g * Sg;
        real* q = a->heads + 5 * g * Sg;               // (B, T, 5 wc) Q|K|V|O|dO
        real_acc* lse_heads = a->lse_heads + g * Lg;   // (B, h, T)
        comm_wait(a->comm, in[g]);
        comm_wait(a->comm, lse_req[g]);
        dist_blocks_to_rows(q, 5 * wc, recv, 5 * Sg / P, P, B, Tl, 5 * wc, sizeof(real));
        dist_blocks_to_rows(lse_heads, 1, a->lse_recv + g * Lg, Lg / P, P, B * z.h, Tl, 1,
                            sizeof(real_acc));
        real* dqkv_heads = q;   // (B, T, 3 wc) the chunk's dQ|dK|dV
        if (a->inner) {
            // The inner layer takes Q|K|V (B, T, 3 wc), O and dO (B, T, wc) as tensors of their
            // own: split out of the 5 wc-wide rows into the chunk's send part, free until its
            // return.
            real* qkv_h = send;
            real* o_h = qkv_h + (size_t)all * 3 * wc;
            real* do_h = o_h + (size_t)all * wc;
            dist_copy_rows(qkv_h, 3 * wc, q, 5 * wc, all, 3 * wc, sizeof(real));
            dist_copy_rows(o_h, wc, q + 3 * wc, 5 * wc, all, wc, sizeof(real));
            dist_copy_rows(do_h, wc, q + 4 * wc, 5 * wc, all, wc, sizeof(real));
            dqkv_heads = recv;
            a->inner->docs = a->base.docs;
            a->inner->backward(a->inner, layer, window, B, z.T, z.h, HS, qkv_h, o_h, lse_heads,
                               do_h, dqkv_heads);
        } else {
            const AttentionProblem p = heads_problem(a, &z, window);
            real_acc* acc = a->acc + 3 * g * Sg;
            real_acc* d = a->d + g * Lg;
            dist_attention_row_dot(&p, q + 3 * wc, 5 * wc, q + 4 * wc, 5 * wc, d);
            dist_zero_acc(acc, 3 * Sg);
            dist_attention_backward(&p, q, 5 * wc, q + wc, 5 * wc, q + 2 * wc, 5 * wc,
                                    q + 4 * wc, 5 * wc, lse_heads, d, acc, 3 * wc, acc + wc,
                                    3 * wc, acc + 2 * wc, 3 * wc);
            dist_acc_to_real(dqkv_heads, 3 * wc, acc, 3 * wc, all, 3 * wc);
        }
        // dQ|dK|dV back to the tokens' owners.
        dist_rows_to_blocks(send, 3 * Sg / P, dqkv_heads, 3 * wc, P, B, Tl, 3 * wc, sizeof(real));
        out_req[g] = all_to_all(a, send, recv, 3 * Sg / P, a->rt);
    }
    for (int g = 0; g < G; g++) {   // into chunk g's columns of the three column blocks of dqkv
        comm_wait(a->comm, out_req[g]);
        unpack_heads(&z, g, dqkv, 3 * C, C, a->recv + 5 * g * Sg, 3);
    }
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
                              int Tl, int NH, int HS, int chunks) {
    const Mesh* m = &comm->mesh;
    const int P = mesh_group_size(m, group), usp = group != MESH_SP;
    CHECK(chunks >= 1 && chunks <= ULYSSES_MAX_CHUNKS, "caller bug",
          "%s attention: %d head chunks, expected 1..%d", name, chunks, ULYSSES_MAX_CHUNKS);
    check_heads(name, NH, P, chunks);
    UlyssesAttention* a = (UlyssesAttention*)xcalloc(1, sizeof *a, "ulysses attention layer");
    a->comm = comm;
    a->group = group;
    a->P = P;
    a->chunks = chunks;
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

AttentionLayer* attention_ulysses_create(Comm* comm, int B, int Tl, int NH, int HS, int chunks) {
    return create(comm, MESH_SP, "ulysses", comm->mesh.sp_index, B, Tl, NH, HS, chunks);
}

AttentionLayer* attention_usp_create(Comm* comm, int B, int Tl, int NH, int HS, int chunks) {
    return create(comm, MESH_COL, "usp", attention_usp_place(&comm->mesh), B, Tl, NH, HS, chunks);
}
