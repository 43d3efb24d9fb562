// muon_step's split of the Newton-Schulz work over ranks (MuonShare, --optimizer dist_muon),
// through ops that record what each rank does instead of computing it. For every rank count and
// rank: every matrix's momentum advanced and its update applied once, in parameter order, and
// AdamW over exactly the other tensors, their second moments in consecutive compact slots; each
// matrix orthogonalized on exactly one rank, which broadcasts the very buffer its last GEMM
// wrote, of the matrix's bytes, before every rank's update reads it; a received result never
// lands in the buffer of one still to be sent (with an odd and an even number of iterations, so
// either buffer holds it); the ranks' GEMMs balanced within one matrix; no broadcast without
// sharing. Each layer's qkv matrix whole, and as its Q, K and V rows (Megatron-LM's default;
// grouped-query here, so K and V are narrower than Q).
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model/gpt.h"
#include "model/muon.h"

enum { MAX_MATRICES = 256 };

typedef struct {
    size_t offset;
    int rows, cols;
} Matrix;

typedef struct {
    const MuonScratch* scratch;
    int rank;
    // what this rank did
    int momentum_calls[MAX_MATRICES], orthogonalized[MAX_MATRICES], updates[MAX_MATRICES];
    int root[MAX_MATRICES];       // the broadcast's root before each update
    int gemms, broadcasts, failures;
    size_t adamw_elements;
    int next_update;              // updates must come in parameter order
    const void* last_gemm_out;    // the Newton-Schulz result once the iterations end
    const void* pending;          // this rank's result not yet broadcast (NULL: none)
    const void* broadcast_buf;    // the buffer of the last broadcast, for the update after it
    size_t broadcast_bytes;
    int broadcast_root;
    const Matrix* matrices;
    int count;
} Recorder;

static int fail(Recorder* q, const char* what, int j) {
    if (q->failures++ < 5) printf("FAIL rank %d: %s (matrix %d)\n", q->rank, what, j);
    return 0;
}

static int matrix_at(const Recorder* q, size_t offset) {
    for (int j = 0; j < q->count; j++)
        if (q->matrices[j].offset == offset) return j;
    return -1;
}

static void rec_momentum(void* ctx, size_t offset, size_t n, const MuonConfig* c, void* u) {
    (void)c;
    Recorder* q = ctx;
    const int j = matrix_at(q, offset);
    if (j < 0 || n != (size_t)q->matrices[j].rows * q->matrices[j].cols) {
        fail(q, "momentum of something that is not a matrix", j);
        return;
    }
    q->momentum_calls[j]++;
    if (u) {
        if (u != q->scratch->u) fail(q, "U outside scratch.u", j);
        q->orthogonalized[j]++;
    }
}

static void rec_normalize(void* ctx, int rows, int cols) { (void)ctx, (void)rows, (void)cols; }

static void rec_gemm(void* ctx, int ta, int tb, int M, int N, int K, double alpha, const void* A,
                     int lda, const void* B, int ldb, double beta, void* C, int ldc) {
    (void)ta, (void)tb, (void)M, (void)N, (void)K, (void)alpha, (void)A, (void)lda, (void)B;
    (void)ldb, (void)beta, (void)ldc;
    Recorder* q = ctx;
    q->gemms++;
    q->last_gemm_out = C;
    if (C == q->pending) fail(q, "a GEMM overwrote the result still to be broadcast", -1);
    q->pending = C == q->scratch->x || C == q->scratch->u ? C : q->pending;
}

static void rec_copy(void* ctx, void* dst, const void* src, size_t n) {
    (void)src, (void)n;
    Recorder* q = ctx;
    if (dst == q->pending) fail(q, "a copy overwrote the result still to be broadcast", -1);
}

static void rec_update(void* ctx, size_t offset, int rows, int cols, const void* x, double step,
                       double decay) {
    (void)step, (void)decay;
    Recorder* q = ctx;
    const int j = matrix_at(q, offset);
    if (j != q->next_update) {
        fail(q, "update out of parameter order", j);
        return;
    }
    q->next_update++;
    q->updates[j]++;
    if (rows != q->matrices[j].rows || cols != q->matrices[j].cols) fail(q, "update's shape", j);
    if (q->orthogonalized[j] && x != q->last_gemm_out)
        fail(q, "the owner's update does not read its Newton-Schulz result", j);
    if (q->broadcast_buf || q->broadcasts) {
        if (x != q->broadcast_buf) fail(q, "the update reads another buffer than the broadcast's", j);
        q->root[j] = q->broadcast_root;
        if (q->broadcast_bytes != (size_t)rows * cols * q->scratch->elem_size)
            fail(q, "broadcast of the wrong size", j);
        q->broadcast_buf = NULL;
    }
    if (x == q->pending) q->pending = NULL;
}

static void rec_adamw(void* ctx, size_t begin, size_t end, size_t v_slot) {
    Recorder* q = ctx;
    // the compact second moment: the AdamW tensors' elements one after another
    if (v_slot != q->adamw_elements) fail(q, "AdamW's second moment not in the next slots", -1);
    q->adamw_elements += end - begin;
    if (matrix_at(q, begin) >= 0) fail(q, "AdamW on a Muon matrix", matrix_at(q, begin));
}

static void rec_broadcast(void* ctx, void* buf, size_t bytes, int root) {
    Recorder* q = ctx;
    q->broadcasts++;
    if (q->broadcast_buf) fail(q, "two broadcasts without an update between", -1);
    if (buf == q->pending && root != q->rank)
        fail(q, "received into the buffer of this rank's result still to be sent", root);
    q->broadcast_buf = buf;
    q->broadcast_bytes = bytes;
    q->broadcast_root = root;
}

static const MuonOps recording_ops = {rec_momentum, rec_normalize, rec_gemm, rec_copy, rec_update,
                                      rec_adamw};

// One rank count: every rank's step recorded and checked. Returns the failures.
static int check_ranks(const GPTConfig* cfg, const Matrix* mats, int count, size_t adamw_elements,
                       int ranks, int ns, int split_qkv) {
    int owner[MAX_MATRICES], root[MAX_MATRICES], failures = 0, most = 0, least = 1 << 30;
    for (int j = 0; j < count; j++) owner[j] = root[j] = -1;
    void* block = calloc(muon_scratch_elements(cfg), sizeof(float));
    const MuonScratch scratch = muon_scratch_split(cfg, block, sizeof(float));
    for (int r = 0; r < ranks; r++) {
        static Recorder q;
        memset(&q, 0, sizeof q);
        q.scratch = &scratch, q.rank = r, q.matrices = mats, q.count = count;
        MuonConfig c = {.momentum = 0.9, .ns_steps = ns, .extra_scale = 1, .split_qkv = split_qkv};
        if (ranks > 1) c.share = (MuonShare){r, ranks, rec_broadcast, &q};
        muon_step(&recording_ops, &q, &scratch, cfg, &c, 1e-2, 0.1);
        int mine = 0;
        for (int j = 0; j < count; j++) {
            if (q.momentum_calls[j] != 1) fail(&q, "momentum not advanced exactly once", j);
            if (q.updates[j] != 1) fail(&q, "update not applied exactly once", j);
            if (ranks > 1 && r > 0 && q.root[j] != root[j])
                fail(&q, "the ranks name different roots for one matrix", j);
            root[j] = q.root[j];
            if (q.orthogonalized[j]) {
                if (owner[j] >= 0) fail(&q, "orthogonalized on two ranks", j);
                owner[j] = r;
                mine++;
            }
        }
        if (q.adamw_elements != adamw_elements) fail(&q, "AdamW's elements", -1);
        if (q.gemms != 3 * ns * mine) fail(&q, "GEMMs beyond its own matrices' iterations", -1);
        if (q.broadcasts != (ranks > 1 ? count : 0)) fail(&q, "broadcasts", -1);
        most = mine > most ? mine : most;
        least = mine < least ? mine : least;
        failures += q.failures;
    }
    for (int j = 0; j < count; j++) {
        if (owner[j] < 0) {
            printf("FAIL ranks %d: matrix %d orthogonalized nowhere\n", ranks, j);
            failures++;
        }
        if (ranks > 1 && root[j] != owner[j]) {
            printf("FAIL ranks %d: matrix %d broadcast from rank %d, orthogonalized on %d\n", ranks,
                   j, root[j], owner[j]);
            failures++;
        }
    }
    if (most - least > 1) {
        printf("FAIL ranks %d: %d to %d matrices per rank\n", ranks, least, most);
        failures++;
    }
    printf("%s %d rank%s, %d iterations, qkv %s: %d matrices, %d to %d orthogonalized per rank, "
           "%s\n", failures ? "FAIL" : "ok  ", ranks, ranks > 1 ? "s" : "", ns,
           split_qkv ? "as Q, K, V" : "whole", count, least, most,
           ranks > 1 ? "each result broadcast by its owner before every rank's update"
                     : "no broadcast");
    free(block);
    return failures;
}

// The matrices muon_step must visit, in order: each tensor's layers; with split_qkv each layer's
// qkv matrix as its C query rows, then its key rows and its value rows (kv each).
static int expected_matrices(const GPTConfig* cfg, int split_qkv, Matrix* mats, size_t* adamw) {
    size_t sizes[NUM_PARAM_TENSORS], at = 0;
    gpt_param_sizes(cfg, sizes);
    int count = 0;
    *adamw = 0;
    for (int k = 0; k < NUM_PARAM_TENSORS; at += sizes[k], k++) {
        int rows, cols;
        if (!muon_tensor_shape(cfg, k, &rows, &cols)) {
            *adamw += sizes[k];
            continue;
        }
        for (int l = 0; l < cfg->L; l++) {
            const size_t w = at + (size_t)l * rows * cols;
            if (k != 4 || !split_qkv) {
                mats[count++] = (Matrix){w, rows, cols};
                continue;
            }
            const int C = cfg->C, kv = (rows - C) / 2;
            mats[count++] = (Matrix){w, C, cols};
            mats[count++] = (Matrix){w + (size_t)C * cols, kv, cols};
            mats[count++] = (Matrix){w + (size_t)(C + kv) * cols, kv, cols};
        }
    }
    return count;
}

int main(void) {
    GPTConfig cfg;
    if (gpt_config_preset("tiny", 0, 0, &cfg) != 0) return 1;
    cfg.L = 3;
    cfg.kv_heads = cfg.NH / 2;   // grouped-query: the key and value blocks narrower than Q's
    int failures = 0;
    const int rank_counts[] = {1, 2, 3, 4, 5, 12, 13, 40};
    for (int split = 0; split <= 1; split++) {
        Matrix mats[MAX_MATRICES];
        size_t adamw;
        const int count = expected_matrices(&cfg, split, mats, &adamw);
        // an odd and an even number of iterations: the result ends in either iterate buffer
        for (int ns = 3; ns <= 4; ns++)
            for (size_t i = 0; i < sizeof rank_counts / sizeof *rank_counts; i++)
                failures += check_ranks(&cfg, mats, count, adamw, rank_counts[i], ns, split);
    }
    return failures != 0;
}
