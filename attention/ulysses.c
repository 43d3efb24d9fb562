// Ulysses attention (DeepSpeed-Ulysses): the sequence-parallel group trades sequence for heads.
// Rank i holds its tokens (Striped's cyclic layout: position t on rank t mod P) for every head;
// an all-to-all gives it the whole sequence for heads [i H, (i+1) H), H = NH / P, where it runs
// one single-device attention call (every mask, window and document applies as on one device,
// and every rank does the same work), and a second all-to-all returns each token's output to
// its owner. Per rank and layer the forward receives (P-1)/P of 4 S values (Q|K|V in, O out;
// S = B Tl C) and the LSE: the volume falls as 1/P at a fixed T, where the ring family's stays
// at 2 S, but P cannot exceed NH. Under grouped-query attention (NKV < NH key/value heads) rank
// i gets K/V heads [i Hk, (i+1) Hk), Hk = NKV / P, exactly those its query heads read, so P
// cannot exceed NKV; K and V then move Skv = S NKV / NH values each instead of S.
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
    real* send;        // 3 S + 2 Skv: the all-to-alls' blocks for the peers
    real* recv;        // 3 S + 2 Skv: the blocks from the peers
    real* heads;       // 3 S + 2 Skv: this rank's heads over the whole sequence, chunk by chunk
    real_acc* acc;     // S + 2 Skv: partial O; backward dQ|dK|dV sums (no inner)
    real_acc* lse_heads;              // L: the heads' LSE
    real_acc *lse_send, *lse_recv;    // L each: the LSE's all-to-all blocks
    real_acc* d;                      // L: rowsum(dO * O) of the heads (no inner)
} UlyssesAttention;

// One call's shapes. Its H = NH / P query heads run in G chunks of h heads (wc = h HS columns);
// chunk g holds heads [d H + g h, d H + (g+1) h) of each peer d, and likewise its K/V heads, Hk =
// NKV / P in chunks of hk (wkc = hk HS columns): the K/V heads its query heads read. A Q tensor's
// S = B Tl NH HS values on a rank are S / G per chunk, S / (G P) per chunk and peer (one
// all-to-all block), a K or V tensor's Skv = B Tl NKV HS likewise; the LSE's L = B NH Tl too.
// Chunk g's part of each buffer starts at g times its part's size: qkv_g (Q|K|V) forward and
// for the returned gradients, all_g (Q|K|V|O|dO) backward.
typedef struct {
    int P, G, B, Tl, T, C, KVC, W, H, h, Hk, hk, HS, w, wc, wk, wkc;
    long rows;               // B Tl: this rank's tokens
    size_t Sg, Skg, Lg;      // S / G, Skv / G and L / G
    size_t qkv_g, all_g;     // Sg + 2 Skg; 3 Sg + 2 Skg
    int qkv_wc, all_wc;      // their row widths on the heads: wc + 2 wkc; 3 wc + 2 wkc
} Shape;

static void check_heads(const char* name, int NH, int NKV, int P, int chunks) {
    CHECK(NKV % P == 0, "use a (key/value) head count divisible by the all-to-all's ranks (P; usp: pq)",
          "%s attention: %d %s do not split over %d ranks", name, NKV,
          NKV == NH ? "heads" : "key/value heads", P);
    CHECK((NKV / P) % chunks == 0, "use --a2a-chunks dividing the (key/value) heads per rank",
          "%s attention: %d %sheads per rank do not split into %d chunks", name, NKV / P,
          NKV == NH ? "" : "key/value ", chunks);
}

static Shape call_shape(const UlyssesAttention* a, int B, int Tl, int NH, int NKV, int HS) {
    dist_bounds_check(&a->max, a->base.name, B, Tl, NH, NKV, HS);
    check_heads(a->base.name, NH, NKV, a->P, a->chunks);
    Shape z;
    z.P = a->P, z.G = a->chunks, z.B = B, z.Tl = Tl, z.T = a->P * Tl, z.C = NH * HS;
    z.KVC = NKV * HS, z.W = attention_qkv_width(NH, NKV, HS);
    z.H = NH / a->P, z.h = z.H / z.G, z.HS = HS, z.w = z.H * HS, z.wc = z.h * HS;
    z.Hk = NKV / a->P, z.hk = z.Hk / z.G, z.wk = z.Hk * HS, z.wkc = z.hk * HS;
    z.rows = (long)B * Tl;
    z.Sg = (size_t)B * Tl * NH * HS / z.G;
    z.Skg = (size_t)B * Tl * NKV * HS / z.G;
    z.Lg = (size_t)B * NH * Tl / z.G;
    z.qkv_g = z.Sg + 2 * z.Skg;
    z.all_g = 3 * z.Sg + 2 * z.Skg;
    z.qkv_wc = z.wc + 2 * z.wkc;
    z.all_wc = 3 * z.wc + 2 * z.wkc;
    return z;
}

// One tensor's chunk g for the peers: rows (B Tl, ld) hold peer d's chunk in columns [d pw + g
// cw, d pw + (g+1) cw) (pw, cw: the peer's and the chunk's columns, w and wc for Q, O, dO; wk
// and wkc for K, V); it goes to block d of (P, B Tl, width) at column `col`. An all-to-all's
// blocks are built from several tensors this way, side by side: one batched copy per tensor,
// the P peers' blocks in one launch.
static void pack_heads(const Shape* z, int g, real* blocks, int width, int col, const real* rows,
                       long ld, int pw, int cw) {
    dist_copy_rows_batch(blocks + col, width, z->rows * width, rows + (size_t)g * cw, ld, pw, z->P,
                         z->rows, cw, sizeof(real));
}

// The inverse: column `col` of block d of (P, B Tl, width) into chunk g's columns of rows.
static void unpack_heads(const Shape* z, int g, real* rows, long ld, int pw, int cw,
                         const real* blocks, int width, int col) {
    dist_copy_rows_batch(rows + (size_t)g * cw, ld, pw, blocks + col, width, z->rows * width, z->P,
                         z->rows, cw, sizeof(real));
}

// Q|K|V of qkv (rows of W: Q at 0, K at C, V at C + KVC) packed, chunk g, into blocks whose rows
// are `width` wide, from column 0: Q (wc) | K (wkc) | V (wkc).
static void pack_qkv(const Shape* z, int g, real* blocks, int width, const real* qkv) {
    pack_heads(z, g, blocks, width, 0, qkv, z->W, z->w, z->wc);
    pack_heads(z, g, blocks, width, z->wc, qkv + z->C, z->W, z->wk, z->wkc);
    pack_heads(z, g, blocks, width, z->wc + z->wkc, qkv + z->C + z->KVC, z->W, z->wk, z->wkc);
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
    p.NKV = z->hk;
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
// [0, G qkv_g) (3 S with multi-head attention), O out in the next S, the heads' O in recv the S
// after that.
static void ulysses_forward(AttentionLayer* self, int layer, long window, int B, int Tl, int NH,
                            int NKV, int HS, const real* qkv, real* out, real_stat* lse) {
    UlyssesAttention* a = (UlyssesAttention*)self;
    const Shape z = call_shape(a, B, Tl, NH, NKV, HS);
    const CommScope saved = comm_enter_scope(a->comm, layer, COMM_FORWARD);
    const int P = z.P, G = z.G, wc = z.wc, wkc = z.wkc, qw = z.qkv_wc;
    const size_t Sg = z.Sg, Lg = z.Lg, S = Sg * G, in_g = z.qkv_g, O = G * in_g;
    CommRequest *in[ULYSSES_MAX_CHUNKS], *o_req[ULYSSES_MAX_CHUNKS], *lse_req[ULYSSES_MAX_CHUNKS];

    // Q|K|V of every local token for each peer's chunk; in: this rank's chunk, every token.
    for (int g = 0; g < G; g++) {
        pack_qkv(&z, g, a->send + g * in_g, qw, qkv);
        in[g] = all_to_all(a, a->send + g * in_g, a->recv + g * in_g, in_g / P, a->rt);
    }
    for (int g = 0; g < G; g++) {
        real* heads = a->heads + g * in_g;            // (B, T, wc + 2 wkc)
        real* o_heads = a->recv + O + S + g * Sg;     // (B, T, wc)
        real_acc* lse_heads = a->lse_heads + g * Lg;  // (B, h, T)
        comm_wait(a->comm, in[g]);
        dist_blocks_to_rows(heads, qw, a->recv + g * in_g, in_g / P, P, B, Tl, qw, sizeof(real));
        if (a->inner) {
            a->inner->docs = a->base.docs;
            a->inner->forward(a->inner, layer, window, B, z.T, z.h, z.hk, HS, heads, o_heads,
                              lse_heads);
        } else {
            const AttentionProblem p = heads_problem(a, &z, window);
            real_acc* acc = a->acc + g * Sg;
            dist_attention_forward(&p, heads, qw, heads + wc, qw, heads + wc + wkc, qw, acc, wc,
                                   lse_heads);
            dist_acc_to_real(o_heads, wc, acc, wc, (long)B * z.T, wc);
        }
        // O and its LSE back to the tokens' owners.
        real* o_send = a->send + O + g * Sg;
        dist_rows_to_blocks(o_send, Sg / P, o_heads, wc, P, B, Tl, wc, sizeof(real));
        dist_rows_to_blocks(a->lse_send + g * Lg, Lg / P, lse_heads, 1, P, B * z.h, Tl, 1,
                            sizeof(real_acc));
        o_req[g] = all_to_all(a, o_send, a->recv + O + g * Sg, Sg / P, a->rt);
        lse_req[g] = all_to_all(a, a->lse_send + g * Lg, a->lse_recv + g * Lg, Lg / P, a->at);
    }
    for (int g = 0; g < G; g++) {
        comm_wait(a->comm, o_req[g]);
        comm_wait(a->comm, lse_req[g]);
        unpack_heads(&z, g, out, z.C, z.w, wc, a->recv + O + g * Sg, wc, 0);
        blocks_to_lse(&z, g, lse, a->lse_recv + g * Lg);
    }
    comm_leave_scope(a->comm, saved);
}

// As the forward: chunk g's Q|K|V|O|dO (all_g) and LSE in at once, its dQ|dK|dV (qkv_g) out
// through the first qkv_g of its own part of send and recv, free once its inputs are laid out.
static void ulysses_backward(AttentionLayer* self, int layer, long window, int B, int Tl, int NH,
                             int NKV, int HS, const real* qkv, const real* out,
                             const real_stat* lse, const real* dout, real* dqkv) {
    UlyssesAttention* a = (UlyssesAttention*)self;
    const Shape z = call_shape(a, B, Tl, NH, NKV, HS);
    const CommScope saved = comm_enter_scope(a->comm, layer, COMM_BACKWARD);
    const int P = z.P, G = z.G, wc = z.wc, wkc = z.wkc, C = z.C, qw = z.qkv_wc, aw = z.all_wc;
    const size_t Lg = z.Lg, in_g = z.all_g, out_g = z.qkv_g;
    CommRequest *in[ULYSSES_MAX_CHUNKS], *lse_req[ULYSSES_MAX_CHUNKS], *out_req[ULYSSES_MAX_CHUNKS];

    // Q|K|V|O|dO for each peer's chunk, side by side in blocks 3 wc + 2 wkc wide.
    for (int g = 0; g < G; g++) {
        real* send = a->send + g * in_g;
        pack_qkv(&z, g, send, aw, qkv);
        pack_heads(&z, g, send, aw, qw, out, C, z.w, wc);
        pack_heads(&z, g, send, aw, qw + wc, dout, C, z.w, wc);
        lse_to_blocks(&z, g, a->lse_send + g * Lg, lse);
        in[g] = all_to_all(a, send, a->recv + g * in_g, in_g / P, a->rt);
        lse_req[g] = all_to_all(a, a->lse_send + g * Lg, a->lse_recv + g * Lg, Lg / P, a->at);
    }
    const long all = (long)B * z.T;
    for (int g = 0; g < G; g++) {
        real* send = a->send + g * in_g;
        real* recv = a->recv + g * in_g;
        real* q = a->heads + g * in_g;                 // (B, T, 3 wc + 2 wkc) Q|K|V|O|dO
        real_acc* lse_heads = a->lse_heads + g * Lg;   // (B, h, T)
        comm_wait(a->comm, in[g]);
        comm_wait(a->comm, lse_req[g]);
        dist_blocks_to_rows(q, aw, recv, in_g / P, P, B, Tl, aw, sizeof(real));
        dist_blocks_to_rows(lse_heads, 1, a->lse_recv + g * Lg, Lg / P, P, B * z.h, Tl, 1,
                            sizeof(real_acc));
        real* dqkv_heads = q;   // (B, T, wc + 2 wkc) the chunk's dQ|dK|dV
        if (a->inner) {
            // The inner layer takes Q|K|V (B, T, wc + 2 wkc), O and dO (B, T, wc) as tensors of
            // their own: split out of the rows into the chunk's send part, free until its return.
            real* qkv_h = send;
            real* o_h = qkv_h + (size_t)all * qw;
            real* do_h = o_h + (size_t)all * wc;
            dist_copy_rows(qkv_h, qw, q, aw, all, qw, sizeof(real));
            dist_copy_rows(o_h, wc, q + qw, aw, all, wc, sizeof(real));
            dist_copy_rows(do_h, wc, q + qw + wc, aw, all, wc, sizeof(real));
            dqkv_heads = recv;
            a->inner->docs = a->base.docs;
            a->inner->backward(a->inner, layer, window, B, z.T, z.h, z.hk, HS, qkv_h, o_h,
                               lse_heads, do_h, dqkv_heads);
        } else {
            const AttentionProblem p = heads_problem(a, &z, window);
            real_acc* acc = a->acc + g * out_g;
            real_acc* d = a->d + g * Lg;
            dist_attention_row_dot(&p, q + qw, aw, q + qw + wc, aw, d);
            dist_zero_acc(acc, out_g);
            dist_attention_backward(&p, q, aw, q + wc, aw, q + wc + wkc, aw, q + qw + wc, aw,
                                    lse_heads, d, acc, qw, acc + wc, qw, acc + wc + wkc, qw);
            dist_acc_to_real(dqkv_heads, qw, acc, qw, all, qw);
        }
        // dQ|dK|dV back to the tokens' owners.
        dist_rows_to_blocks(send, out_g / P, dqkv_heads, qw, P, B, Tl, qw, sizeof(real));
        out_req[g] = all_to_all(a, send, recv, out_g / P, a->rt);
    }
    for (int g = 0; g < G; g++) {   // into chunk g's columns of dqkv's dQ, dK and dV
        comm_wait(a->comm, out_req[g]);
        const real* back = a->recv + g * in_g;
        unpack_heads(&z, g, dqkv, z.W, z.w, wc, back, qw, 0);
        unpack_heads(&z, g, dqkv + C, z.W, z.wk, wkc, back, qw, wc);
        unpack_heads(&z, g, dqkv + C + z.KVC, z.W, z.wk, wkc, back, qw, wc + wkc);
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
                              int Tl, int NH, int NKV, int HS, int chunks) {
    const Mesh* m = &comm->mesh;
    const int P = mesh_group_size(m, group), usp = group != MESH_SP;
    CHECK(chunks >= 1 && chunks <= ULYSSES_MAX_CHUNKS, "caller bug",
          "%s attention: %d head chunks, expected 1..%d", name, chunks, ULYSSES_MAX_CHUNKS);
    check_heads(name, NH, NKV, P, chunks);
    UlyssesAttention* a = (UlyssesAttention*)xcalloc(1, sizeof *a, "ulysses attention layer");
    a->comm = comm;
    a->group = group;
    a->P = P;
    a->chunks = chunks;
    a->max = dist_bounds(name, B, Tl, NH, NKV, HS);
    a->rt = dist_real_comm_type();
    a->at = dist_acc_comm_type();
    const size_t S = (size_t)B * Tl * NH * HS, Skv = (size_t)B * Tl * NKV * HS;
    const size_t L = (size_t)B * NH * Tl;
    UlyssesScratch z;   // bytes of each buffer (attention/dist_scratch.h)
    ulysses_scratch(&z, S, Skv, L, sizeof(real), sizeof(real_acc), usp);
    a->send = (real*)dist_alloc(z.send, "ulysses send blocks");
    a->recv = (real*)dist_alloc(z.recv, "ulysses receive blocks");
    a->heads = (real*)dist_alloc(z.heads, "ulysses heads");
    a->lse_heads = (real_acc*)dist_alloc(z.lse_heads, "ulysses heads LSE");
    a->lse_send = (real_acc*)dist_alloc(z.lse_send, "ulysses LSE send blocks");
    a->lse_recv = (real_acc*)dist_alloc(z.lse_recv, "ulysses LSE receive blocks");
    if (usp) {   // the column's tokens t = c (mod pkv), H heads, on the ring of the row
        a->inner = attention_ring_create_on(comm, MESH_ROW, RING_CYCLIC, B, P * Tl, NH / P,
                                            NKV / P, HS);
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

AttentionLayer* attention_ulysses_create(Comm* comm, int B, int Tl, int NH, int NKV, int HS,
                                         int chunks) {
    return create(comm, MESH_SP, "ulysses", comm->mesh.sp_index, B, Tl, NH, NKV, HS, chunks);
}

AttentionLayer* attention_usp_create(Comm* comm, int B, int Tl, int NH, int NKV, int HS,
                                     int chunks) {
    return create(comm, MESH_COL, "usp", attention_usp_place(&comm->mesh), B, Tl, NH, NKV, HS,
                  chunks);
}
