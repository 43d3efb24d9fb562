// The CPU backend of model/backend.h: parameters, gradients and moments are host fp32, and the
// parameters are their own master weights.
#include "model/backend.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>

#include "comm/bf16.h"
#include "comm/fail.h"
#include "model/muon.h"

struct Optimizer {
    size_t begin, count;
    real *m, *v;          // AdamW's moments; under Muon the compact ones (model/muon.h): m the
                          // other tensors' and the owned matrices' momenta (muon_m_elements),
                          // v the other tensors' (v_count)
    size_t v_count;
    GPTConfig cfg;
    int muon;             // 1: Muon for the hidden matrices (model/muon.h)
    MuonConfig muon_cfg;
    MuonScratch scratch;  // real buffers
    // Below --muon-fp32-matmul-prec highest: a GEMM's inputs rounded, in a Gram matrix's and the
    // largest matrix's elements (round_gram, then round_matrix, one block).
    real *round_gram, *round_matrix;
    size_t gram_elements, matrix_elements;
};

const char* gpt_backend_name(void) { return "cpu"; }
int gpt_backend_head_size(int HS, char* err, size_t errlen) {
    (void)HS;
    (void)err;
    (void)errlen;
    return 0;
}
int gpt_backend_host_memory(void) { return 1; }
size_t gpt_backend_param_chunk(void) { return 0; }
void* gpt_host_pinned_alloc(size_t bytes) {   // host memory is all the CPU has
    (void)bytes;
    return NULL;
}
void gpt_host_pinned_free(void* p) { (void)p; }

int gpt_backend_select_device(int local_rank, int local_size, int share, int* device, char* err) {
    (void)local_rank, (void)local_size, (void)share, (void)err;
    *device = -1;
    return 0;
}

void gpt_backend_device(BackendDevice* d) {
    memset(d, 0, sizeof *d);
    snprintf(d->name, sizeof d->name, "cpu");
    struct rusage ru;
    if (getrusage(RUSAGE_SELF, &ru) == 0) d->memory_used = (size_t)ru.ru_maxrss * 1024;   // KiB on Linux
}

void gpt_backend_sync(void) {}

int gpt_backend_counters(BackendCounters* out) {
    memset(out, 0, sizeof *out);
    return 0;   // no device to count calls to
}

// No graphs on the CPU: the trainer refuses --cuda-graph 1 before any of these is called.
int gpt_backend_graphs(void) { return 0; }
static void no_graphs(void) { fail_msg("caller bug: CUDA graphs asked of the CPU backend"); }
void gpt_graph_begin(void) { no_graphs(); }
GptGraph* gpt_graph_end(const char* what) {
    (void)what;
    no_graphs();
    return NULL;
}
void gpt_graph_launch(GptGraph* g, int first_mark) {
    (void)g;
    (void)first_mark;
    no_graphs();
}
int gpt_graph_marks(const GptGraph* g) {
    (void)g;
    return 0;
}
size_t gpt_graph_nodes(const GptGraph* g) {
    (void)g;
    return 0;
}
void gpt_graph_free(GptGraph* g) { (void)g; }

int gpt_backend_clock(BackendClock* out) {
    (void)out;
    return 0;   // host memory, host clock: the trainer's own
}

// Element-wise copies: real is float here, double in the finite-difference build.
static void to_float(float* dst, const real* src, size_t n) {
    for (size_t i = 0; i < n; i++) dst[i] = (float)src[i];
}

static void from_float(real* dst, const float* src, size_t n) {
    for (size_t i = 0; i < n; i++) dst[i] = src[i];
}

void gpt_params_from_host(GPT* m, const float* host) {
    from_float(m->params_memory, host, m->num_params);
}

void gpt_params_to_host(const GPT* m, float* host, size_t begin, size_t count,
                        GptGatherMaster gather, void* ctx) {
    (void)gather;   // no master copy, so no shard of one
    (void)ctx;
    CHECK(begin <= m->num_params && count <= m->num_params - begin, "caller bug",
          "gpt_params_to_host: [%zu, +%zu) of %zu parameters", begin, count, m->num_params);
    to_float(host + begin, m->params_memory + begin, count);
}

// The parameters are their own master copy: nothing was rounded.
void gpt_params_restore_rounding(GPT* m, int step) { (void)m; (void)step; }

void gpt_logits_row_to_host(const GPT* m, int n, float* host) {
    to_float(host, m->acts.logits + (size_t)n * m->cfg.Vp, (size_t)m->cfg.V);
}

void gpt_losses_to_host(const GPT* m, float* host) {
    const real_stat* l = m->acts.losses;
    for (size_t i = 0, n = (size_t)m->B * m->T; i < n; i++) host[i] = (float)l[i];
}

void gpt_grad_sum_squares(const GPT* m, size_t begin, size_t count, double* out) {
    *out = grad_sum_squares(m->grads_memory + begin, count);
}

void gpt_param_sum_squares(const GPT* m, size_t begin, size_t count, double* out) {
    *out = grad_sum_squares(m->params_memory + begin, count);   // a sum of squares of any reals
}

void gpt_clip_scale(GPT* m, double max_norm, StepLimits limits) {
    m->scalars[GPT_CLIP_SCALE] =
        step_grad_scale(m->scalars[GPT_LOSS_SUM], m->scalars[GPT_GRAD_SUMSQ], max_norm, limits);
}

// The host is the device here: the fetched values are ready at once. Module-owned, one fetch at
// a time, as on CUDA.
static double fetched[GPT_NUM_SCALARS];

void gpt_scalars_fetch(const GPT* m) { memcpy(fetched, m->scalars, sizeof fetched); }

void gpt_scalars_wait(double out[GPT_NUM_SCALARS]) { memcpy(out, fetched, sizeof fetched); }

Optimizer* optimizer_create(GPT* m, size_t begin, size_t count, const MuonConfig* muon) {
    Optimizer* o = xcalloc(1, sizeof *o, "optimizer");
    o->begin = begin;
    o->count = count;
    o->cfg = m->cfg;
    o->v_count = muon ? muon_v_elements(&m->cfg, m->num_params) : count;
    o->m = xcalloc(muon ? muon_m_elements(&m->cfg, muon, m->num_params) : count, sizeof(real),
                   "AdamW first moments");
    o->v = xcalloc(o->v_count, sizeof(real), "AdamW second moments");
    if (muon) {
        CHECK(begin == 0 && count >= m->num_params, "caller bug",
              "optimizer_create: Muon needs every parameter, not [%zu, +%zu)", begin, count);
        o->muon = 1;
        o->muon_cfg = *muon;
        const size_t n = muon_scratch_elements(&m->cfg);
        o->scratch = muon_scratch_split(&m->cfg, xcalloc(n ? n : 1, sizeof(real), "Muon's scratch"),
                                        sizeof(real));
        muon_scratch_sizes(&m->cfg, &o->matrix_elements, &o->gram_elements);
        if (muon->matmul_prec != MUON_PREC_HIGHEST) {
            o->round_gram = xcalloc(o->gram_elements + o->matrix_elements, sizeof(real),
                                    "Muon's rounded GEMM inputs");
            o->round_matrix = o->round_gram + o->gram_elements;
        }
    }
    return o;
}

void optimizer_free(Optimizer* o) {
    if (!o) return;
    free(o->m);
    free(o->v);
    free(o->scratch.u);
    free(o->round_gram);
    free(o);
}

// --- Muon's steps on host buffers (model/muon.h) ---

typedef struct {
    GPT* model;
    Optimizer* o;
    real scale;   // the clip factor
    int t;        // AdamW's step and settings, for the tensors Muon leaves
    double lr;
    const AdamWConfig* adam;
} CpuMuon;

static void cpu_muon_momentum(void* ctx, size_t offset, size_t n, size_t m_slot, const MuonConfig* c,
                              void* uv) {
    CpuMuon* q = ctx;
    const real beta = (real)c->momentum, *g = q->model->grads_memory + offset;
    real *mom = q->o->m + m_slot, *u = uv;
#pragma omp parallel for simd
    for (size_t i = 0; i < n; i++) {
        const real gi = g[i] * q->scale;
        mom[i] = beta * mom[i] + (1 - beta) * gi;
        u[i] = c->nesterov ? (1 - beta) * gi + beta * mom[i] : mom[i];
    }
}

static void cpu_muon_normalize(void* ctx, int rows, int cols) {
    CpuMuon* q = ctx;
    const real* u = q->o->scratch.u;
    real* x = q->o->scratch.x;
    const size_t n = (size_t)rows * cols;
    double sumsq = 0;   // in order, one thread: the same bits whatever the thread count
    for (size_t i = 0; i < n; i++) sumsq += (double)u[i] * u[i];
    const real d = (real)(sqrt(sumsq) + MUON_NORM_EPS);
#pragma omp parallel for
    for (size_t i = 0; i < n; i++) x[muon_x_index(i, rows, cols)] = u[i] / d;
}

// n elements of src rounded to `bits` mantissa bits into dst (MuonMatmulPrec).
static const real* rounded(const real* src, size_t n, real* dst, int bits) {
#pragma omp parallel for
    for (size_t i = 0; i < n; i++) dst[i] = (real)float_round_mantissa((float)src[i], bits);
    return dst;
}

// A row-major operand's extent: rows of ld elements, the last one cols long.
static size_t operand_extent(int rows, int cols, int ld) {
    return rows ? (size_t)(rows - 1) * ld + cols : 0;
}

static void cpu_muon_gemm(void* ctx, int ta, int tb, int M, int N, int K, double alpha,
                          const void* A, int lda, const void* B, int ldb, double beta, void* C, int ldc) {
    const Optimizer* o = ((CpuMuon*)ctx)->o;
    const int bits = muon_prec_mantissa_bits(o->muon_cfg.matmul_prec);
    // The inputs as tensor cores read them, rounded copies: one operand read twice (X X^T, A A) or
    // the larger of two in the matrix buffer, the smaller (a Gram matrix) in the Gram buffer.
    if (bits < 23) {
        const size_t na = operand_extent(ta ? K : M, ta ? M : K, lda);
        const size_t nb = operand_extent(tb ? N : K, tb ? K : N, ldb);
        const size_t small = A == B ? 0 : na < nb ? na : nb, large = na < nb ? nb : na;
        CHECK(small <= o->gram_elements && large <= o->matrix_elements, "caller bug",
              "Muon GEMM inputs of %zu and %zu elements: rounding buffers of %zu and %zu", na, nb,
              o->gram_elements, o->matrix_elements);
        if (A == B) {
            A = B = rounded(A, na, o->round_matrix, bits);
        } else {
            real* to_a = na < nb ? o->round_gram : o->round_matrix;
            A = rounded(A, na, to_a, bits);
            B = rounded(B, nb, to_a == o->round_gram ? o->round_matrix : o->round_gram, bits);
        }
    }
    cblas_rgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans, M, N,
                K, (real)alpha, A, lda, B, ldb, (real)beta, C, ldc);
}

static void cpu_muon_copy(void* ctx, void* dst, const void* src, size_t n) {
    (void)ctx;
    memcpy(dst, src, n * sizeof(real));
}

static void cpu_muon_update(void* ctx, size_t offset, int rows, int cols, const void* xv, double step,
                            double decay) {
    CpuMuon* q = ctx;
    const real* x = xv;
    real* w = q->model->params_memory + offset;
    const real s = (real)step, d = (real)decay;
    const size_t n = (size_t)rows * cols;
#pragma omp parallel for
    for (size_t i = 0; i < n; i++) w[i] -= d * w[i] + s * x[muon_x_index(i, rows, cols)];
}

static void cpu_muon_adamw(void* ctx, size_t begin, size_t end, size_t slot) {
    CpuMuon* q = ctx;
    adamw_update(&q->model->cfg, q->model->params_memory, q->model->grads_memory, q->o->m + slot,
                 q->o->v + slot, begin, end, q->t, q->lr, q->adam, q->scale);
}

static const MuonOps cpu_muon_ops = {cpu_muon_momentum, cpu_muon_normalize, cpu_muon_gemm,
                                     cpu_muon_copy, cpu_muon_update, cpu_muon_adamw};

void optimizer_step(Optimizer* o, GPT* m, int t, double lr, const AdamWConfig* cfg,
                    const double* grad_scale) {
    // The range may reach into the zero padding past the last parameter (ZeRO-1 shards).
    const size_t end = o->begin + o->count < m->num_params ? o->begin + o->count : m->num_params;
    if (!o->muon) {
        adamw_update(&m->cfg, m->params_memory, m->grads_memory, o->m, o->v, o->begin, end, t, lr,
                     cfg, *grad_scale);
        return;
    }
    // OPTIMIZER_SKIP: a non-finite step is dropped, on every rank alike (the scale comes from
    // the all-reduced norm), so dist_muon's broadcasts are skipped together.
    if (*grad_scale < 0) return;
    CpuMuon q = {m, o, (real)*grad_scale, t, lr, cfg};
    muon_step(&cpu_muon_ops, &q, &o->scratch, &m->cfg, &o->muon_cfg, lr, cfg->weight_decay);
}

static void cpu_to_host(void* ctx, float* dst, const void* src, size_t n) {
    (void)ctx;
    to_float(dst, src, n);
}

static void cpu_from_host(void* ctx, void* dst, const float* src, size_t n) {
    (void)ctx;
    from_float(dst, src, n);
}

static const MuonHostOps cpu_host_ops = {cpu_to_host, cpu_from_host};

void optimizer_moments_to_host(const Optimizer* o, float* m, float* v, size_t begin, size_t count) {
    CHECK(begin <= o->count && count <= o->count - begin, "caller bug",
          "optimizer_moments_to_host: [%zu, +%zu) of %zu", begin, count, o->count);
    if (!o->muon) {
        to_float(m + begin, o->m + begin, count);
        to_float(v + begin, o->v + begin, count);
        return;
    }
    muon_m_to_host(&cpu_host_ops, NULL, &o->scratch, &o->cfg, &o->muon_cfg, o->m, m, o->count);
    float* compact = xmalloc(o->v_count * sizeof(float) + 1, "second moments");
    to_float(compact, o->v, o->v_count);
    muon_v_expand(&o->cfg, compact, v, o->count);
    free(compact);
}

void optimizer_moments_from_host(Optimizer* o, const float* m, const float* v) {
    if (!o->muon) {
        from_float(o->m, m, o->count);
        from_float(o->v, v, o->count);
        return;
    }
    muon_m_from_host(&cpu_host_ops, NULL, &o->scratch, &o->cfg, &o->muon_cfg, o->m, m);
    float* compact = xmalloc(o->v_count * sizeof(float) + 1, "second moments");
    muon_v_compact(&o->cfg, v, compact);
    from_float(o->v, compact, o->v_count);
    free(compact);
}
