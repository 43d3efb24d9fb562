// muon_step's split of the Newton-Schulz work over ranks (MuonShare, --optimizer dist_muon),
// through ops that record what each rank does instead of computing it. For every rank count and
// rank: every matrix's update applied once, in parameter order, and AdamW over exactly the other
// tensors, their moments in consecutive compact slots; each matrix's momentum advanced on its
// owner alone (muon_matrix_owner), in the slots after the AdamW tensors', the rank's compact first
// moment as long as muon_m_elements says, and laid out as muon_m_from_host fills it; the
// checkpoint's full first moment gathered by muon_m_to_host on every rank alike (ranks as threads,
// the broadcasts real copies); each
// matrix orthogonalized on exactly one rank, which broadcasts the very buffer its last GEMM
// wrote, of the matrix's bytes, before every rank's update reads it; a received result never
// lands in the buffer of one still to be sent (with an odd and an even number of iterations, so
// either buffer holds it); the ranks' GEMMs balanced within one matrix; no broadcast without
// sharing. Each layer's qkv matrix whole, and as its Q, K and V rows (Megatron-LM's default;
// grouped-query here, so K and V are narrower than Q).
#include <pthread.h>
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
    int momentum_calls[MAX_MATRICES], updates[MAX_MATRICES];
    size_t m_slot[MAX_MATRICES];  // where each owned matrix's momentum lives
    int root[MAX_MATRICES];       // the broadcast's root before each update
    int gemms, broadcasts, failures;
    size_t adamw_elements, next_m_slot;
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

static void rec_momentum(void* ctx, size_t offset, size_t n, size_t m_slot, const MuonConfig* c,
                         void* u) {
    (void)c;
    Recorder* q = ctx;
    const int j = matrix_at(q, offset);
    if (j < 0 || n != (size_t)q->matrices[j].rows * q->matrices[j].cols) {
        fail(q, "momentum of something that is not a matrix", j);
        return;
    }
    q->momentum_calls[j]++;
    if (u != q->scratch->u) fail(q, "U outside scratch.u", j);
    // the owned matrices' momenta one after another, after the AdamW tensors' moments
    if (m_slot != q->next_m_slot) fail(q, "momentum not in the next slots", j);
    q->m_slot[j] = m_slot;
    q->next_m_slot = m_slot + n;
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
    if (q->momentum_calls[j] && x != q->last_gemm_out)
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

static void rec_adamw(void* ctx, size_t begin, size_t end, size_t slot) {
    Recorder* q = ctx;
    // the compact moments: the AdamW tensors' elements one after another
    if (slot != q->adamw_elements) fail(q, "AdamW's moments not in the next slots", -1);
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

static size_t num_params(const Matrix* mats, int count, size_t adamw_elements) {
    size_t n = adamw_elements;
    for (int j = 0; j < count; j++) n += (size_t)mats[j].rows * mats[j].cols;
    return n;
}

static void host_copy_to(void* ctx, float* dst, const void* src, size_t n) {
    (void)ctx;
    memcpy(dst, src, n * sizeof(float));
}

static void host_copy_from(void* ctx, void* dst, const float* src, size_t n) {
    (void)ctx;
    memcpy(dst, src, n * sizeof(float));
}

static const MuonHostOps host_ops = {host_copy_to, host_copy_from};

// A full first moment whose every element names its place (exact in a float).
static float* numbered(size_t n) {
    float* full = malloc(n * sizeof(float));
    for (size_t i = 0; i < n; i++) full[i] = (float)(i + 1);
    return full;
}

typedef struct {
    const float* full;
    const float* compact;
    int bad;
} SpanCheck;

static void check_span(void* ctx, size_t begin, size_t n, size_t slot) {
    SpanCheck* s = ctx;
    if (memcmp(s->compact + slot, s->full + begin, n * sizeof(float))) s->bad = 1;
}

// muon_m_from_host puts every moment where the step reads it: the AdamW tensors' at their
// slots, each owned matrix's at the slot its momentum had, nothing past muon_m_elements.
static void check_m_layout(Recorder* q, const GPTConfig* cfg, const MuonConfig* c,
                           const MuonScratch* scratch, size_t adamw_elements) {
    const size_t n = num_params(q->matrices, q->count, adamw_elements);
    const size_t len = muon_m_elements(cfg, c, n);
    float *full = numbered(n), *compact = malloc((len + 1) * sizeof(float));
    compact[len] = -1;   // a guard past the end
    muon_m_from_host(&host_ops, NULL, scratch, cfg, c, compact, full);
    if (compact[len] != -1) fail(q, "muon_m_from_host wrote past muon_m_elements", -1);
    SpanCheck spans = {full, compact, 0};
    muon_v_spans(cfg, check_span, &spans);
    if (spans.bad) fail(q, "an AdamW tensor's first moment not at its slot", -1);
    for (int j = 0; j < q->count; j++) {
        const Matrix* w = &q->matrices[j];
        if (q->momentum_calls[j] && memcmp(compact + q->m_slot[j], full + w->offset,
                                           (size_t)w->rows * w->cols * sizeof(float)))
            fail(q, "a momentum not where the step reads it", j);
    }
    free(full);
    free(compact);
}

// muon_m_to_host with the ranks as threads: each rank fills its compact first moment from one
// full one, then gathers it back, the broadcasts real copies between the threads; every rank
// must get the full one back.
typedef struct {
    pthread_barrier_t barrier;
    const void* root_buf;
} World;

typedef struct {
    World* world;
    const GPTConfig* cfg;
    MuonConfig c;
    const float* full;
    size_t n;
    int bad;
} RankThread;

static void thread_broadcast(void* ctx, void* buf, size_t bytes, int root) {
    RankThread* t = ctx;
    if (t->c.share.rank == root) t->world->root_buf = buf;
    pthread_barrier_wait(&t->world->barrier);
    if (t->c.share.rank != root) memcpy(buf, t->world->root_buf, bytes);
    pthread_barrier_wait(&t->world->barrier);
}

static void* gather_rank(void* arg) {
    RankThread* t = arg;
    const GPTConfig* cfg = t->cfg;
    void* block = calloc(muon_scratch_elements(cfg), sizeof(float));
    const MuonScratch scratch = muon_scratch_split(cfg, block, sizeof(float));
    float* compact = malloc(muon_m_elements(cfg, &t->c, t->n) * sizeof(float));
    float* back = malloc(t->n * sizeof(float));
    muon_m_from_host(&host_ops, NULL, &scratch, cfg, &t->c, compact, t->full);
    muon_m_to_host(&host_ops, NULL, &scratch, cfg, &t->c, compact, back, t->n);
    t->bad = memcmp(back, t->full, t->n * sizeof(float)) != 0;
    free(block);
    free(compact);
    free(back);
    return NULL;
}

static int check_gather(const GPTConfig* cfg, size_t n, int ranks, int split_qkv) {
    World world;
    pthread_barrier_init(&world.barrier, NULL, (unsigned)ranks);
    float* full = numbered(n);
    RankThread* t = calloc((size_t)ranks, sizeof *t);
    pthread_t* id = calloc((size_t)ranks, sizeof *id);
    for (int r = 0; r < ranks; r++) {
        t[r] = (RankThread){&world, cfg, {.split_qkv = split_qkv}, full, n, 0};
        if (ranks > 1) t[r].c.share = (MuonShare){r, ranks, thread_broadcast, &t[r]};
        if (pthread_create(&id[r], NULL, gather_rank, &t[r])) {
            printf("FAIL: no thread for rank %d\n", r);
            return 1;
        }
    }
    int bad = 0;
    for (int r = 0; r < ranks; r++) {
        pthread_join(id[r], NULL);
        if (t[r].bad) printf("FAIL rank %d of %d: its gathered first moment differs\n", r, ranks);
        bad += t[r].bad;
    }
    printf("%s %d rank%s, qkv %s: every rank gathers the full first moment (%zu elements)\n",
           bad ? "FAIL" : "ok  ", ranks, ranks > 1 ? "s" : "", split_qkv ? "as Q, K, V" : "whole", n);
    pthread_barrier_destroy(&world.barrier);
    free(full);
    free(t);
    free(id);
    return bad;
}

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
        q.next_m_slot = adamw_elements;
        MuonConfig c = {.momentum = 0.9, .ns_steps = ns, .extra_scale = 1, .split_qkv = split_qkv};
        if (ranks > 1) c.share = (MuonShare){r, ranks, rec_broadcast, &q};
        muon_step(&recording_ops, &q, &scratch, cfg, &c, 1e-2, 0.1);
        int mine = 0;
        for (int j = 0; j < count; j++) {
            if (q.momentum_calls[j] > 1) fail(&q, "momentum advanced twice", j);
            if (q.updates[j] != 1) fail(&q, "update not applied exactly once", j);
            if (ranks > 1 && r > 0 && q.root[j] != root[j])
                fail(&q, "the ranks name different roots for one matrix", j);
            root[j] = q.root[j];
            if (q.momentum_calls[j]) {
                if (owner[j] >= 0) fail(&q, "orthogonalized on two ranks", j);
                if (muon_matrix_owner(&c.share, j) != r) fail(&q, "muon_matrix_owner names another", j);
                owner[j] = r;
                mine++;
            }
        }
        if (q.adamw_elements != adamw_elements) fail(&q, "AdamW's elements", -1);
        if (q.next_m_slot != muon_m_elements(cfg, &c, num_params(mats, count, adamw_elements)))
            fail(&q, "the first moment's length is not muon_m_elements'", -1);
        check_m_layout(&q, cfg, &c, &scratch, adamw_elements);
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
        for (size_t i = 0; i < sizeof rank_counts / sizeof *rank_counts; i++)
            failures += check_gather(&cfg, num_params(mats, count, adamw), rank_counts[i], split);
    }
    return failures != 0;
}
