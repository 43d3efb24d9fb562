// This machine as a cluster file (cpu_calibrate.h). Every number it writes is measured here, on
// one thread (tests/mpirun.sh runs each MPI rank with OMP_NUM_THREADS=1):
//   matmul     OpenBLAS sgemm through model/layers.c (matmul_forward / matmul_backward) over the
//              transformer's GEMM shapes, as efficiency of the FMA-issue peak (train/peak_flops.c),
//              binned by GFLOP per GEMM (Calculon's table format)
//   attention  attention_partial_forward / _backward (causal and fully visible blocks)
//   memory     residual_forward streams, binned by MB
//   vector     the rate that makes the model's non-GEMM kernels (tools/kernel_costs.c) add up to
//              what a measured token-local layer takes beyond its GEMMs, per token count
//   sharing    k one-thread processes running a layer at once: what time-shared cores deliver
//   network    the alpha-beta fits of tools/bench_collectives.sh (JSONL), per op and P
#include "costmodel/cpu_calibrate.h"

#include <errno.h>
#include <math.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "attention/dist_cost.h"
#include "attention/partial_attention.h"
#include "comm/fail.h"
#include "costmodel/costmodel.h"
#include "costmodel/reports.h"
#include "model/blas_kernels.h"
#include "model/layers.h"
#include "train/peak_flops.h"

// Head size of the attention measurement: the validation shapes' (tiny, C = 128, 4 heads). This
// kernel's rate per model FLOP depends on it (about 1.5x faster at 64), so other head sizes on
// this machine are predicted pessimistically.
enum { ATTENTION_HS = 32 };

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + 1e-9 * ts.tv_nsec;
}

typedef void (*Work)(void* ctx);

// Seconds per call: three batches of about 10 ms, the best one (a calibration measures what the
// machine can do; a batch slowed by another process is dropped).
static double seconds_per_call(Work fn, void* ctx) {
    fn(ctx);   // warm-up: first touch, OpenBLAS buffers
    double t0 = now();
    fn(ctx);
    const double once = now() - t0;
    long reps = once > 0 ? (long)(0.01 / once) : 1000;
    reps = reps < 1 ? 1 : reps > 100000 ? 100000 : reps;
    double best = INFINITY;
    for (int batch = 0; batch < 3; batch++) {
        t0 = now();
        for (long r = 0; r < reps; r++) fn(ctx);
        const double t = (now() - t0) / reps;
        best = t < best ? t : best;
    }
    return best;
}

// The buffers of one measurement, freed together.
enum { ARENA_MAX = 64 };
typedef struct {
    void* p[ARENA_MAX];
    int n;
    unsigned seed;
} Arena;

static void* arena_keep(Arena* a, void* p) {
    CHECK(a->n < ARENA_MAX, "caller bug", "more than %d calibration buffers", ARENA_MAX);
    return a->p[a->n++] = p;
}

// Small random values (no denormals, no overflow in exp or tanh).
static real* random_tensor(Arena* a, size_t n) {
    real* t = arena_keep(a, tensor_alloc(n, "calibration tensor"));
    for (size_t i = 0; i < n; i++) t[i] = (real)((rand_r(&a->seed) / (double)RAND_MAX - 0.5) * 0.1);
    return t;
}

static void arena_free(Arena* a) {
    for (int k = 0; k < a->n; k++) tensor_free(a->p[k]);
    a->n = 0;
}

// --- Measured points and Calculon-style curves ---------------------------------------------------

enum { MAX_POINTS = 1024 };
typedef struct {
    int n;
    double size[MAX_POINTS], eff[MAX_POINTS];
} Points;

static void add_point(Points* p, double size, double eff) {
    CHECK(p->n < MAX_POINTS, "caller bug", "more than %d calibration points", MAX_POINTS);
    p->size[p->n] = size;
    p->eff[p->n++] = eff > 1 ? 1 : eff;
}

static int by_value(const void* a, const void* b) {
    const double x = *(const double*)a, y = *(const double*)b;
    return (x > y) - (x < y);
}

// Bins [lo * 2^k, lo * 2^(k+1)), each bin's median efficiency, thresholds descending; the
// lowest occupied bin is extended down to 0 so every size has a value.
static EfficiencyCurve curve_from_points(const Points* p, double lo) {
    EfficiencyCurve c = {0};
    for (int k = 40; k >= 0 && c.n < CLUSTER_MAX_CURVE; k--) {
        const double from = lo * pow(2, k), to = 2 * from;
        double in[MAX_POINTS];
        int n = 0;
        for (int i = 0; i < p->n; i++)
            if (p->size[i] >= from && (p->size[i] < to || k == 40)) in[n++] = p->eff[i];
        if (!n) continue;
        qsort(in, (size_t)n, sizeof *in, by_value);
        c.threshold[c.n] = from;
        c.efficiency[c.n++] = n % 2 ? in[n / 2] : 0.5 * (in[n / 2 - 1] + in[n / 2]);
    }
    CHECK(c.n > 0, "caller bug", "no calibration points");
    c.threshold[c.n - 1] = 0;
    return c;
}

// --- GEMMs -----------------------------------------------------------------------------------------

typedef struct {
    real *out, *inp, *w, *b, *dout, *dinp, *dw, *db;
    int N, IC, OC, backward;
} GemmCtx;

static void run_gemm(void* p) {
    GemmCtx* g = p;
    if (g->backward)
        matmul_backward(g->dinp, g->dw, g->db, g->dout, g->inp, g->w, g->N, g->IC, g->OC,
                        GRAD_ACCUMULATE);
    else matmul_forward(g->out, g->inp, g->w, g->b, g->N, g->IC, g->OC);
}

// sgemm efficiency over the GEMM shapes of a layer (C = 64, 128, 256; the LM head of 512 rows),
// N = 16 .. 4096 tokens; a backward call counts as two GEMMs of half its FLOPs each.
static Points measure_gemms(double peak) {
    enum { MAXN = 4096, MAXO = 1024 };
    Arena m = {.seed = 1};
    const size_t act = (size_t)MAXN * MAXO, w = (size_t)MAXO * MAXO;
    GemmCtx g = {random_tensor(&m, act), random_tensor(&m, act), random_tensor(&m, w),
                 random_tensor(&m, MAXO), random_tensor(&m, act), random_tensor(&m, act),
                 random_tensor(&m, w), random_tensor(&m, MAXO), 0, 0, 0, 0};
    static Points pts;
    pts.n = 0;
    const int Cs[] = {64, 128, 256};
    for (int ci = 0; ci < 3; ci++) {
        const int C = Cs[ci];
        const int shapes[5][2] = {{C, 3 * C}, {C, C}, {C, 4 * C}, {4 * C, C}, {C, 512}};
        for (int N = 16; N <= MAXN; N *= 2)
            for (int s = 0; s < 5; s++)
                for (int back = 0; back < 2; back++) {
                    g.N = N, g.IC = shapes[s][0], g.OC = shapes[s][1], g.backward = back;
                    const double flops = (back ? 4.0 : 2.0) * N * g.IC * g.OC;
                    const double t = seconds_per_call(run_gemm, &g);
                    add_point(&pts, flops / (back ? 2 : 1) / 1e9, flops / t / peak);
                }
    }
    arena_free(&m);
    return pts;
}

// --- Attention -------------------------------------------------------------------------------------

typedef struct {
    AttentionProblem p;
    real *q, *k, *v, *o, *dout, *dq, *dk, *dv;
    real_stat *lse, *d;
    int C, backward;
} AttnCtx;

// Random Q, K, V, O, dO and gradient buffers, with LSE and D, for one sequence of up to T
// tokens of NH heads of HS, in arena m.
static AttnCtx attention_buffers(Arena* m, int T, int NH, int HS) {
    const size_t n = (size_t)T * NH * HS;
    AttnCtx a = {.q = random_tensor(m, n), .k = random_tensor(m, n), .v = random_tensor(m, n),
                 .o = random_tensor(m, n), .dout = random_tensor(m, n), .dq = random_tensor(m, n),
                 .dk = random_tensor(m, n), .dv = random_tensor(m, n),
                 .lse = arena_keep(m, stat_alloc((size_t)NH * T, "lse")),
                 .d = arena_keep(m, stat_alloc((size_t)NH * T, "d")), .C = NH * HS};
    return a;
}

static void run_attention(void* ptr) {
    AttnCtx* a = ptr;
    const int C = a->C;
    if (a->backward)
        attention_partial_backward(&a->p, a->q, C, a->k, C, a->v, C, a->dout, C, a->lse, a->d,
                                   a->dq, C, a->dk, C, a->dv, C);
    else
        attention_partial_forward(&a->p, a->q, C, a->k, C, a->v, C, a->o, C, a->lse);
}

// The partial-attention kernel on T' x T' blocks, causal (a diagonal block) and fully visible
// (a ring step's earlier block), 4 heads of HS channels: efficiency by GFLOP per call, forward
// and backward apart (per model FLOP the forward's softmax costs more than the backward's), and
// masked[pass], what a score the kernel computes (in `tile`) but masks costs against a visible
// pair.
//
// The kernel's GEMMs compute every score of its tiles (attention_tile_pairs), its exponentials
// only the visible ones: a call of V visible pairs and C computed scores takes a V + b C. A full
// block (C = V) gives a + b, a causal one a second equation, so each T' gives masked = b / (a +
// b) (the median of T' >= 128, where the timings are long enough). FLOPs as the model prices
// them (costmodel.c slowest_rank_priced): V + masked (C - V) over 1 + masked (w - 1), w the
// causal block's computed scores per visible pair: a causal block's visible pairs, a full
// block's T'^2 over what the causal block's masked scores add.
static void measure_attention(double peak, int HS, AttentionTile tile, Points* fwd, Points* bwd,
                              double* masked) {
    enum { MAXT = 2048, NH = 4, SIZES = 8 };   // T' = 16 .. 2048
    Arena m = {.seed = 2};
    AttnCtx a = attention_buffers(&m, MAXT, NH, HS);
    double secs[SIZES][2][2], vis[SIZES][2], tiles[SIZES][2];  // [size][full][backward]
    for (int k = 0, T = 16; k < SIZES; k++, T *= 2)
        for (int full = 0; full < 2; full++) {
            // fully visible: every key before every query
            a.p = attention_problem(1, NH, HS, T, T, token_positions(full ? T : 0, 1),
                                    token_positions(0, 1));
            vis[k][full] = (double)attention_visible_pairs(&a.p);
            tiles[k][full] = (double)attention_tile_pairs(&a.p, tile);
            a.backward = 0;
            run_attention(&a);   // the LSE and D backward reads
            attention_row_dot(&a.p, a.o, a.C, a.dout, a.C, a.d);
            for (int back = 0; back < 2; back++) {
                a.backward = back;
                secs[k][full][back] = seconds_per_call(run_attention, &a);
            }
        }
    for (int back = 0; back < 2; back++) {
        double share[SIZES];
        int ns = 0;
        for (int k = 0; k < SIZES; k++) {
            if (16 << k < 128) continue;
            // full: (a + b) V_f = t_f; causal: a V_c + b C_c = t_c
            const double sum = secs[k][1][back] / vis[k][1];
            const double b = (secs[k][0][back] - sum * vis[k][0]) / (tiles[k][0] - vis[k][0]);
            share[ns++] = fmin(1, fmax(0, b / sum));
        }
        qsort(share, (size_t)ns, sizeof *share, by_value);
        masked[back] = ns % 2 ? share[ns / 2] : (share[ns / 2 - 1] + share[ns / 2]) / 2;
    }
    for (int k = 0, T = 16; k < SIZES; k++, T *= 2)
        for (int full = 0; full < 2; full++)
            for (int back = 0; back < 2; back++) {
                const double pairs = costmodel_priced_pairs(vis[k][full], tiles[k][full], T,
                                                            tile, masked[back]),
                             flops = (back ? 10.0 : 4.0) * HS * NH * pairs,
                             t = secs[k][full][back];
                add_point(back ? bwd : fwd, flops / 1e9, flops / t / peak);
                printf("  attention %-8s HS=%d T'=%4d %-6s: %9.3f ms, %6.2f GFLOP/s\n",
                       back ? "backward" : "forward", HS, T, full ? "full" : "causal", 1e3 * t,
                       flops / t / 1e9);
            }
    printf("  attention: a masked score costs %.3f (forward) and %.3f (backward) of a visible "
           "pair\n", masked[0], masked[1]);
    arena_free(&m);
}

// Calls under a sliding window, timed against what the model prices them at with the curves
// just measured (c): the forward and backward of one ring step's block of Striped and Zigzag,
// and ATTENTION2D's call, at T = 2048 under a 64-token window (the CPU validation's windowed
// points), and a fully visible Ring block. Printed, not fitted: the check of the tile pricing on
// the kernel alone, without the trainer around it.
static void check_masked_calls(const Cluster* c, int HS) {
    enum { NH = 4, T = 2048, W = 64 };
    const struct { const char* what; int Tq, Tk; TokenPositions q, k; long window; } calls[] = {
        {"striped P=8, a step's block", T / 8, T / 8, {5, 8}, {2, 8}, W},
        {"striped P=16, a step's block", T / 16, T / 16, {9, 16}, {3, 16}, W},
        {"zigzag P=4, own first chunk", T / 8, T / 8, {0, 1}, {0, 1}, W},
        {"2d 2x4, rank (1, 2)", T / 2, T / 4, {1, 2}, {2, 4}, W},
        {"ring P=8, an earlier block", T / 8, T / 8, {T / 2, 1}, {0, 1}, 0},
    };
    Arena m = {.seed = 4};
    AttnCtx a = attention_buffers(&m, T, NH, HS);
    printf("  masked calls, predicted / measured ms (pairs priced as pairs, then by tiles):\n");
    for (size_t k = 0; k < sizeof calls / sizeof calls[0]; k++) {
        a.p = attention_problem(1, NH, HS, calls[k].Tq, calls[k].Tk, calls[k].q, calls[k].k);
        a.p.window = calls[k].window;
        const double vis = (double)attention_visible_pairs(&a.p);
        a.backward = 0;
        run_attention(&a);
        attention_row_dot(&a.p, a.o, a.C, a.dout, a.C, a.d);
        for (int back = 0; back < 2; back++) {
            a.backward = back;
            const double t = seconds_per_call(run_attention, &a),
                         priced = costmodel_priced_pairs(
                             vis, (double)attention_tile_pairs(&a.p, c->attention_tile[back]),
                             calls[k].Tq, c->attention_tile[back], c->attention_masked_cost[back]);
            const double by_pairs = costmodel_attention_seconds(c, back, 1, NH, HS, calls[k].Tq,
                                                                calls[k].Tk, vis, 1),
                         by_tiles = costmodel_attention_seconds(c, back, 1, NH, HS, calls[k].Tq,
                                                                calls[k].Tk, priced, 1);
            printf("    %-30s %-8s %8.3f ms: pairs %8.3f (%+5.0f%%), tiles %8.3f (%+5.0f%%)\n",
                   calls[k].what, back ? "backward" : "forward", 1e3 * t, 1e3 * by_pairs,
                   100 * (by_pairs / t - 1), 1e3 * by_tiles, 100 * (by_tiles / t - 1));
        }
    }
    arena_free(&m);
}

// --- Memory ------------------------------------------------------------------------------------

typedef struct {
    real *a, *b, *out;
    long n;
} StreamCtx;

static void run_stream(void* p) {
    StreamCtx* s = p;
    residual_forward(s->out, s->a, s->b, s->n);
}

// Bytes/s of residual_forward (read 2, write 1) from 12 KiB to 48 MiB; *best: the fastest.
static Points measure_memory(double* best) {
    enum { MAXN = 1 << 22 };
    Arena m = {.seed = 3};
    StreamCtx s = {random_tensor(&m, MAXN), random_tensor(&m, MAXN), random_tensor(&m, MAXN), 0};
    double bw[32], mb[32];
    int n = 0;
    *best = 0;
    for (long len = 1 << 10; len <= MAXN; len *= 2, n++) {
        s.n = len;
        const double bytes = 3.0 * len * sizeof(real);
        bw[n] = bytes / seconds_per_call(run_stream, &s);
        mb[n] = bytes / 1e6;
        *best = bw[n] > *best ? bw[n] : *best;
    }
    static Points pts;
    pts.n = 0;
    for (int k = 0; k < n; k++) add_point(&pts, mb[k], bw[k] / *best);
    arena_free(&m);
    return pts;
}

// --- The token-local layer: the non-GEMM rate -------------------------------------------------------

typedef struct {
    int N, C, V, Vp;
    int *tokens, *targets;
    real *wte, *wpe, *lw, *lb, *wqkv, *bqkv, *wproj, *bproj, *wfc, *bfc, *wfcp, *bfcp;
    real *x, *ln, *qkv, *att, *res2, *ln2, *fch, *fchg, *res3, *lnf, *logits;
    real *dwte, *dwpe, *dlw, *dlb, *dwqkv, *dbqkv, *dwproj, *dbproj, *dwfc, *dbfc, *dwfcp, *dbfcp;
    real *dres, *dbuf, *dfch, *datt, *dqkv, *dln;
    real_stat *m1, *r1, *m2, *r2, *m3, *r3, *losses;
} LayerCtx;

// One layer without attention, the LM head and the embeddings, in model/gpt.c's order.
static void run_layer(void* p) {
    LayerCtx* l = p;
    const int N = l->N, C = l->C;
    const TokenLayout pos = token_layout(token_positions(0, 1));
    double loss = 0;
    encoder_forward(l->x, l->tokens, l->wte, l->wpe, 1, N, C, pos, NULL);
    layernorm_forward(l->ln, l->m1, l->r1, l->x, l->lw, l->lb, N, C, GPT_NORM_EPS_DEFAULT);
    matmul_forward(l->qkv, l->ln, l->wqkv, l->bqkv, N, C, 3 * C);
    matmul_forward(l->res2, l->att, l->wproj, l->bproj, N, C, C);
    fused_residual_layernorm_forward(l->res2, l->ln2, l->m2, l->r2, l->res2, l->x, l->lw, l->lb, N, C,
                                     GPT_NORM_EPS_DEFAULT);
    matmul_forward_gelu(l->fchg, l->fch, l->ln2, l->wfc, l->bfc, N, C, 4 * C);
    matmul_forward(l->res3, l->fchg, l->wfcp, l->bfcp, N, 4 * C, C);
    fused_residual_layernorm_forward(l->res3, l->lnf, l->m3, l->r3, l->res3, l->res2, l->lw, l->lb, N, C,
                                     GPT_NORM_EPS_DEFAULT);
    matmul_forward(l->logits, l->lnf, l->wte, NULL, N, C, l->Vp);
    crossentropy_forward_backward(l->logits, l->losses, l->targets, 1.0f / N, N, l->V, l->Vp, &loss,
                                  (ZLoss){0, NULL, NULL});
    const GradMode acc = GRAD_ACCUMULATE;
    matmul_backward(l->dln, l->dwte, NULL, l->logits, l->lnf, l->wte, N, C, l->Vp, acc);
    layernorm_backward(l->dres, l->dlw, l->dlb, l->dln, l->res3, l->lw, l->m3, l->r3, N, C, acc);
    matmul_backward_gelu(l->dfch, l->dwfcp, l->dbfcp, l->dres, l->fchg, l->fch, l->wfcp, N, 4 * C, C,
                         acc);
    matmul_backward_overwrite(l->dbuf, l->dwfc, l->dbfc, l->dfch, l->ln2, l->wfc, N, C, 4 * C, acc);
    layernorm_backward(l->dres, l->dlw, l->dlb, l->dbuf, l->res2, l->lw, l->m2, l->r2, N, C, acc);
    matmul_backward_overwrite(l->datt, l->dwproj, l->dbproj, l->dres, l->att, l->wproj, N, C, C, acc);
    matmul_backward_overwrite(l->dln, l->dwqkv, l->dbqkv, l->dqkv, l->ln, l->wqkv, N, C, 3 * C, acc);
    layernorm_backward(l->dres, l->dlw, l->dlb, l->dln, l->x, l->lw, l->m1, l->r1, N, C, acc);
    encoder_backward(l->dwte, l->dwpe, l->dres, l->tokens, NULL, 1, N, C, pos, NULL, NULL, N, acc);
}

static LayerCtx layer_create(Arena* m, int maxN, int C, int V) {
    LayerCtx l = {.N = maxN, .C = C, .V = V, .Vp = (V + 127) / 128 * 128};
    const size_t N = (size_t)maxN, c = (size_t)C, vp = (size_t)l.Vp;
    l.tokens = arena_keep(m, xcalloc(N, sizeof(int), "tokens"));
    l.targets = arena_keep(m, xcalloc(N, sizeof(int), "targets"));
    for (size_t i = 0; i < N; i++)
        l.tokens[i] = (int)(i * 7 % (size_t)V), l.targets[i] = (int)(i * 3 % (size_t)V);
    real** vectors[] = {&l.lw, &l.lb, &l.bqkv, &l.bproj, &l.bfc, &l.bfcp, &l.dlw, &l.dlb,
                        &l.dbqkv, &l.dbproj, &l.dbfc, &l.dbfcp};
    for (size_t k = 0; k < sizeof vectors / sizeof *vectors; k++) *vectors[k] = random_tensor(m, 4 * c);
    real** matrices[] = {&l.wqkv, &l.wproj, &l.wfc, &l.wfcp, &l.dwqkv, &l.dwproj, &l.dwfc, &l.dwfcp};
    for (size_t k = 0; k < sizeof matrices / sizeof *matrices; k++)
        *matrices[k] = random_tensor(m, 4 * c * c);
    l.wte = random_tensor(m, vp * c), l.dwte = random_tensor(m, vp * c);
    l.wpe = random_tensor(m, N * c), l.dwpe = random_tensor(m, N * c);
    real** acts[] = {&l.x, &l.ln, &l.att, &l.res2, &l.ln2, &l.res3, &l.lnf, &l.dres, &l.dbuf,
                     &l.datt, &l.dln};
    for (size_t k = 0; k < sizeof acts / sizeof *acts; k++) *acts[k] = random_tensor(m, N * c);
    l.qkv = random_tensor(m, 3 * N * c), l.dqkv = random_tensor(m, 3 * N * c);
    l.fch = random_tensor(m, 4 * N * c), l.fchg = random_tensor(m, 4 * N * c);
    l.dfch = random_tensor(m, 4 * N * c), l.logits = random_tensor(m, N * vp);
    real_stat** stats[] = {&l.m1, &l.r1, &l.m2, &l.r2, &l.m3, &l.r3, &l.losses};
    for (size_t k = 0; k < sizeof stats / sizeof *stats; k++)
        *stats[k] = arena_keep(m, stat_alloc(N, "statistics"));
    return l;
}

// Bisection (in log space) for the vector rate that makes the model's non-GEMM kernels of the
// layer take `residue` seconds on cluster c (memory curve already set).
static double fit_vector_rate(Cluster* c, const CostShape* s, double N, double residue) {
    double lo = 1e6, hi = 1e14;
    for (int it = 0; it < 80; it++) {
        const double mid = sqrt(lo * hi);
        c->vector_flops = mid;
        double gemm, other;
        costmodel_token_local_split(c, s, N, N, &gemm, &other);
        if (other > residue) lo = mid;
        else hi = mid;
    }
    return sqrt(lo * hi);
}

// Per token count N: the measured layer minus the model's GEMM time with the measured sgemm
// curve is the non-GEMM work; the vector rate that explains it, as a point at 10 N C FLOPs (a
// typical non-GEMM kernel of the layer: LayerNorm ~7-14, GELU ~30-40 per element).
static Points measure_vector(Cluster* c, double peak, int C, int V) {
    enum { MAXN = 4096 };
    Arena m = {.seed = 4};
    LayerCtx l = layer_create(&m, MAXN, C, V);
    static Points pts;
    pts.n = 0;
    for (int N = 16; N <= MAXN; N *= 2) {
        l.N = N;
        const double t = seconds_per_call(run_layer, &l);
        const CostShape s = {1, C, 4, V, N, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0};
        c->vector_flops = peak;
        double gemm, other;
        costmodel_token_local_split(c, &s, N, N, &gemm, &other);
        const double residue = t - gemm > 0.05 * t ? t - gemm : 0.05 * t;
        const double rate = fit_vector_rate(c, &s, N, residue);
        add_point(&pts, 10.0 * N * C / 1e9, rate / peak);
        printf("  layer N=%5d C=%d: %8.3f ms measured, GEMMs (model) %8.3f ms, the rest %8.3f ms "
               "-> non-GEMM rate %.2f GFLOP/s\n", N, C, 1e3 * t, 1e3 * gemm, 1e3 * residue, rate / 1e9);
    }
    arena_free(&m);
    return pts;
}

// --- Ranks sharing the cores --------------------------------------------------------------------

// Wall seconds of k processes each running `reps` layers at the same time (fork; all checked).
static double concurrent_seconds(LayerCtx* l, int k, long reps) {
    enum { MAXK = 64 };
    CHECK(k <= MAXK, "caller bug", "%d processes", k);
    pid_t pid[MAXK];
    fflush(stdout);
    const double t0 = now();
    for (int i = 0; i < k; i++) {
        pid[i] = fork();
        CHECK(pid[i] >= 0, "fork failed", "process %d of %d: %s", i, k, strerror(errno));
        if (pid[i] == 0) {
            for (long r = 0; r < reps; r++) run_layer(l);
            _exit(0);
        }
    }
    for (int i = 0; i < k; i++) {
        int status;
        CHECK(waitpid(pid[i], &status, 0) == pid[i] && WIFEXITED(status) && WEXITSTATUS(status) == 0,
              "a calibration process failed", "process %d of %d", i, k);
    }
    return now() - t0;
}

// Aggregate throughput of k one-thread ranks over min(k, cores) ranks alone, k = 1 .. 32: what
// the time-shared cores deliver (SMT siblings, memory, context switches), by ranks on the node.
static EfficiencyCurve measure_sharing(int cores) {
    Arena m = {.seed = 5};
    LayerCtx l = layer_create(&m, 256, 128, 512);
    const double once = seconds_per_call(run_layer, &l);
    const long reps = once > 0 ? (long)(0.2 / once) + 1 : 50;
    const double alone = concurrent_seconds(&l, 1, reps);
    static Points pts;
    pts.n = 0;
    for (int k = 1; k <= 32; k *= 2) {
        const double t = k == 1 ? alone : concurrent_seconds(&l, k, reps);
        const double eff = k * alone / ((k < cores ? k : cores) * t);
        add_point(&pts, k, eff);
        printf("  %2d processes on %d cores: %.3f s for what takes one %.3f s alone -> efficiency %.3f\n",
               k, cores, t, alone, eff);
    }
    arena_free(&m);
    return curve_from_points(&pts, 1);
}

// --- Collective fits ---------------------------------------------------------------------------

// The "fit" records of tools/bench_collectives.c's JSONL (one object per line, its own format).
// --- The cluster file --------------------------------------------------------------------------

static void cpu_model(char* out, size_t len) {
    snprintf(out, len, "unknown CPU");
    FILE* f = fopen("/proc/cpuinfo", "r");
    if (!f) return;
    char line[512];
    while (fgets(line, sizeof line, f))
        if (!strncmp(line, "model name", 10) && strchr(line, ':')) {
            snprintf(out, len, "%s", strchr(line, ':') + 2);
            out[strcspn(out, "\n")] = 0;
            break;
        }
    fclose(f);
}

static void write_cluster(const char* path, const Cluster* c, const CollectiveFit* link_fit,
                          const char* jsonl, int cores) {
    AtomicFile out;
    FILE* f = report_file_open(&out, path);
    char date[64], cpu[256], mm[1024], af[1024], ab[1024], vec[1024], mem[1024], sh[1024];
    const time_t t = time(NULL);
    strftime(date, sizeof date, "%Y-%m-%d %H:%M UTC", gmtime(&t));
    cpu_model(cpu, sizeof cpu);
    cluster_format_curve(&c->matmul_eff, mm, sizeof mm);
    cluster_format_curve(&c->attention_fwd_eff, af, sizeof af);
    cluster_format_curve(&c->attention_bwd_eff, ab, sizeof ab);
    cluster_format_curve(&c->vector_eff, vec, sizeof vec);
    cluster_format_curve(&c->memory_eff, mem, sizeof mem);
    cluster_format_curve(&c->shared_eff, sh, sizeof sh);
    const Link* l = &c->link[TIER_INTRA];
    fprintf(f,
            "# This machine, measured by `build/costmodel --calibrate` (`make costmodel-calibrate` or `make bench-quick`) on %s:\n"
            "# %s, %d cores, OpenBLAS kernels %s, one thread per rank (OMP_NUM_THREADS=1, as\n"
            "# tests/mpirun.sh runs ranks). Network: alpha-beta fits of tools/bench_collectives.sh in\n"
            "# %s (every rank on this one node, the transport's shared memory). Do not edit: rerun.\n"
            "name = cpu-local\n"
            "node.gpus = 4096                  # ranks per node: every rank of a run on this one machine (mpirun --oversubscribe)\n"
            "node.shared_cores = %d            # measured: online cores; ranks beyond them time-share compute and copies\n"
            "node.shared_efficiency = %s   # measured: k one-thread processes of a layer at once, k x (time alone) / (min(k, cores) x time)\n"
            "node.async_comm = 0               # host MPI progresses only inside MPI calls: transfers add to compute (make bench-overlap)\n"
            "device.memory_gib = %.2f          # measured: the node's memory (MemTotal), shared by its ranks\n"
            "matmul.peak_tflops = %.6f         # measured: FMA-issue peak of one thread (train/peak_flops.c)\n"
            "matmul.efficiency = %s   # measured: OpenBLAS sgemm via model/layers.c, layer shapes C = 64..256, N = 16..4096\n"
            "attention.forward_efficiency = %s   # measured: attention_partial_forward, 4 heads of %d, T' = 16..2048, causal and full blocks\n"
            "attention.backward_efficiency = %s   # measured: attention_partial_backward, as the forward\n"
            "attention.tiles = %dx%d %dx%d         # attention/partial_attention.c: ATTENTION_CPU_TILE_ROWS queries a tile, keys from the first one visible\n"
            "attention.masked_cost = %.3f %.3f     # measured: a masked score the kernel computes (its GEMMs) against a visible pair (GEMMs and exponential), causal against full blocks\n"
            "vector.peak_tflops = %.6f         # measured: the same FMA units (train/peak_flops.c)\n"
            "vector.efficiency = %s   # fitted: the rate making the non-GEMM kernels of a measured layer add up, per N\n"
            "memory.bandwidth_gbs = %.3f       # measured: residual_forward, the fastest size\n"
            "memory.efficiency = %s   # measured: residual_forward by MB moved, of the fastest\n"
            "bytes.activation = 4              # fp32 CPU build\n"
            "bytes.accumulator = 4             # fp32 CPU build\n"
            "bytes.param = 4                   # fp32 parameters and gradients\n"
            "bytes.optimizer_state = 8         # AdamW m and v in fp32, no master copy (CPU build)\n"
            "inter.nics_per_node = 1           # one machine: no network (unused)\n"
            "intra.bandwidth_gbs = %.4f        # fit: send_recv over %d ranks, 1/beta (the fits below replace it)\n"
            "intra.p2p_bandwidth_gbs = %.4f    # fit: send_recv over %d ranks, 1/beta\n"
            "intra.efficiency = 1              # a fit is achieved bandwidth already\n"
            "intra.call_latency_us = %.4f      # fit: send_recv over %d ranks, alpha\n"
            "intra.hop_latency_us = 0          # a fit's alpha is per call\n"
            "inter.bandwidth_gbs = %.4f        # one machine: the shared-memory fit (unused)\n"
            "inter.efficiency = 1              # as intra\n"
            "inter.call_latency_us = %.4f      # as intra\n"
            "inter.hop_latency_us = 0          # as intra\n",
            date, cpu, cores, blas_kernel_name(), jsonl, c->shared_cores, sh,
            c->memory_bytes / 1073741824.0, c->matmul_flops / 1e12, mm, af, ATTENTION_HS, ab,
            c->attention_tile[0].rows, c->attention_tile[0].keys, c->attention_tile[1].rows,
            c->attention_tile[1].keys, c->attention_masked_cost[0], c->attention_masked_cost[1],
            c->vector_flops / 1e12, vec, c->memory_bw / 1e9, mem, l->bandwidth / 1e9, link_fit->P,
            l->bandwidth / 1e9, link_fit->P, 1e6 * l->call_latency, link_fit->P,
            l->bandwidth / 1e9, 1e6 * l->call_latency);
    for (int k = 0; k < c->nfits; k++)
        fprintf(f, "fit.%s.p%d = %.6g %.6g   # measured: bench_collectives alpha (s per call), beta (s per bus byte)\n",
                fit_op_name(c->fit[k].op), c->fit[k].P, c->fit[k].alpha, c->fit[k].beta);
    report_file_commit(&out);
}

// The send/recv fit with the fewest ranks as the link lines (the fits replace them anyway).
static const CollectiveFit* links_from_fits(Cluster* c) {
    const CollectiveFit* f = cluster_fit(c, FIT_SEND_RECV, 2);
    if (!f) f = &c->fit[0];
    for (int t = 0; t < TIER_COUNT; t++) c->link[t] = (Link){1 / f->beta, 1 / f->beta, 1, f->alpha, 0};
    return f;
}

int cpu_calibrate(char** argv, const char* jsonl, const char* out) {
    blas_ensure_vector_kernels(argv);   // the OpenBLAS kernels the trainer uses
    omp_set_num_threads(1);
    static Cluster c;
    memset(&c, 0, sizeof c);
    snprintf(c.name, sizeof c.name, "cpu-local");
    c.attention_tile[0] = c.attention_tile[1] = (AttentionTile){ATTENTION_CPU_TILE_ROWS, 1};
    const long cores = sysconf(_SC_NPROCESSORS_ONLN), pages = sysconf(_SC_PHYS_PAGES);
    CHECK(cores > 0 && pages > 0, "sysconf failed", "cores %ld, pages %ld", cores, pages);
    c.shared_cores = (int)cores;
    c.gpus_per_node = 4096;
    c.memory_bytes = (double)pages * sysconf(_SC_PAGESIZE);
    c.act_bytes = c.acc_bytes = c.param_bytes = 4, c.state_bytes = 8, c.nics_per_node = 1;
    c.shared_eff = (EfficiencyCurve){1, {0}, {1}};
    const double peak = peak_flops_measure(1);
    c.matmul_flops = c.vector_flops = peak;
    printf("calibrate: one-thread FMA peak %.2f GFLOP/s, OpenBLAS kernels %s\n", peak / 1e9,
           blas_kernel_name());
    const Points gemm = measure_gemms(peak);
    c.matmul_eff = curve_from_points(&gemm, 1.0 / (1 << 16));
    static Points fwd, bwd;
    measure_attention(peak, ATTENTION_HS, c.attention_tile[0], &fwd, &bwd, c.attention_masked_cost);
    c.attention_fwd_eff = curve_from_points(&fwd, 1.0 / (1 << 16));
    c.attention_bwd_eff = curve_from_points(&bwd, 1.0 / (1 << 16));
    const Points mem = measure_memory(&c.memory_bw);
    c.memory_eff = curve_from_points(&mem, 1.0 / 256);
    check_masked_calls(&c, ATTENTION_HS);
    c.vector_eff = (EfficiencyCurve){1, {0}, {1}};
    const Points vec = measure_vector(&c, peak, 128, 512);
    c.vector_eff = curve_from_points(&vec, 1.0 / (1 << 16));
    c.vector_flops = peak;
    c.shared_eff = measure_sharing((int)cores);
    char err[ERR_LEN];
    if (cluster_read_fits(jsonl, &c, err, sizeof err) != 0) fail_msg("%s (run make bench-collectives)", err);
    write_cluster(out, &c, links_from_fits(&c), jsonl, (int)cores);
    static Cluster check;
    if (cluster_load(out, &check, err, sizeof err) != 0) fail_msg("calibration wrote a bad file: %s", err);
    printf("calibrate: wrote %s (%d collective fits)\n", out, c.nfits);
    return 0;
}
