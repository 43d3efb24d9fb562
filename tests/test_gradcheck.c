// Finite-difference gradient checks in double precision: this file and the layer sources are
// compiled with -DGPT_REAL_DOUBLE. Every layer's backward, the partial-attention backward with
// (offset, stride) positions, and the whole model are checked against central differences of
// a scalar loss sum(w * output) with random w.
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "attention/attention_layer.h"
#include "model/gpt.h"
#include "model/init.h"
#include "model/layers.h"

#ifndef GPT_REAL_DOUBLE
#error "test_gradcheck must be compiled with -DGPT_REAL_DOUBLE"
#endif

static int failures;
static unsigned long long rng_state = 42;

static double uniform(void) {   // xorshift64*, in [-1, 1)
    rng_state ^= rng_state >> 12;
    rng_state ^= rng_state << 25;
    rng_state ^= rng_state >> 27;
    return (double)((rng_state * 2685821657736338717ULL) >> 11) * 0x1.0p-52 - 1.0;
}

// The test arrays: each allocation is kept in a list and freed at the end of main (the checks
// hold on to their arrays through closures, so no function frees its own).
static real** arrays;
static size_t num_arrays;

static real* new_array(long n) {
    real** grown = realloc(arrays, sizeof(real*) * (num_arrays + 1));
    real* a = calloc(n ? n : 1, sizeof(real));
    if (!grown || !a) {
        fprintf(stderr, "test_gradcheck: out of memory for an array of %ld\n", n);
        exit(2);
    }
    arrays = grown;
    return arrays[num_arrays++] = a;
}

static void free_arrays(void) {
    for (size_t i = 0; i < num_arrays; i++) free(arrays[i]);
    free(arrays);
}

static real* random_array(long n, double scale) {
    real* a = new_array(n);
    for (long i = 0; i < n; i++) a[i] = scale * uniform();
    return a;
}

static real* zeros(long n) { return new_array(n); }

// A scalar loss of the current inputs, as a closure.
typedef double (*LossFn)(void* ctx);

// Compares analytic[i] with (loss(x+h) - loss(x-h)) / 2h for every element of x.
static void check(const char* name, real* x, const real* analytic, long n, LossFn loss,
                  void* ctx) {
    const double h = 1e-5;
    double max_diff = 0, max_ref = 0;
    for (long i = 0; i < n; i++) {
        const real saved = x[i];
        x[i] = saved + h;
        const double lp = loss(ctx);
        x[i] = saved - h;
        const double lm = loss(ctx);
        x[i] = saved;
        const double numeric = (lp - lm) / (2 * h);
        const double d = fabs(numeric - analytic[i]);
        if (isnan(d) || d > max_diff) max_diff = d;   // a NaN (e.g. a gradient never written) stays
        if (fabs(numeric) > max_ref) max_ref = fabs(numeric);
    }
    const double rel = max_diff / (max_ref > 1e-30 ? max_ref : 1e-30);
    const int ok = rel < 1e-6 && max_ref > 0;
    printf("%-4s %-34s n=%-6ld max|num-ana|/max|num| = %.2e\n", ok ? "ok" : "FAIL", name, n, rel);
    if (!ok) failures++;
}

static double weighted_sum(const real* y, const real* w, long n) {
    double s = 0;
    for (long i = 0; i < n; i++) s += (double)y[i] * w[i];
    return s;
}

// ---- layernorm ----
typedef struct {
    int N, C;
    double eps;   // the norm's epsilon (the model's gpt_norm_eps)
    real *x, *w, *b, *y, *mean, *rstd, *dy;
} LNCase;

static double ln_loss(void* p) {
    LNCase* c = p;
    layernorm_forward(c->y, c->mean, c->rstd, c->x, c->w, c->b, c->N, c->C, c->eps);
    return weighted_sum(c->y, c->dy, (long)c->N * c->C);
}

static real* nans(long n);

// Named "layernorm ..." at eps 1e-5, "layernorm eps=E ..." otherwise.
static const char* norm_name(char* buf, size_t n, const char* norm, double eps, const char* what) {
    if (eps == 1e-5) snprintf(buf, n, "%s %s", norm, what);
    else snprintf(buf, n, "%s eps=%g %s", norm, eps, what);
    return buf;
}

static void test_layernorm(double eps) {
    LNCase c = {.N = 5, .C = 7, .eps = eps};
    char name[64];
    const long n = (long)c.N * c.C;
    c.x = random_array(n, 1);
    c.w = random_array(c.C, 1);
    c.b = random_array(c.C, 1);
    c.y = zeros(n);
    c.mean = zeros(c.N);
    c.rstd = zeros(c.N);
    c.dy = random_array(n, 1);
    // GRAD_WRITE: the parameter gradients start as NaN, so a read of them fails the check.
    real *dx = zeros(n), *dw = nans(c.C), *db = nans(c.C);
    ln_loss(&c);
    layernorm_backward(dx, dw, db, c.dy, c.x, c.w, c.mean, c.rstd, c.N, c.C, GRAD_WRITE);
    check(norm_name(name, sizeof name, "layernorm", eps, "dinp"), c.x, dx, n, ln_loss, &c);
    check(norm_name(name, sizeof name, "layernorm", eps, "dweight"), c.w, dw, c.C, ln_loss, &c);
    check(norm_name(name, sizeof name, "layernorm", eps, "dbias"), c.b, db, c.C, ln_loss, &c);
}

// ---- matmul ----
typedef struct {
    int N, IC, OC;
    real *x, *w, *b, *y, *dy;
} MMCase;

static double mm_loss(void* p) {
    MMCase* c = p;
    matmul_forward(c->y, c->x, c->w, c->b, c->N, c->IC, c->OC);
    return weighted_sum(c->y, c->dy, (long)c->N * c->OC);
}

// Input gradients that the layer OVERWRITES start as NaN here, so a read of them fails the check.
static real* nans(long n) {
    real* a = new_array(n);
    for (long i = 0; i < n; i++) a[i] = NAN;
    return a;
}

// matmul_backward accumulates into dinp (which starts at 0 here); matmul_backward_overwrite
// writes it (it starts as NaN, so a read of it fails the check).
static void test_matmul(int overwrite) {
    MMCase c = {.N = 6, .IC = 5, .OC = 9};
    c.x = random_array((long)c.N * c.IC, 1);
    c.w = random_array((long)c.OC * c.IC, 1);
    c.b = random_array(c.OC, 1);
    c.y = zeros((long)c.N * c.OC);
    c.dy = random_array((long)c.N * c.OC, 1);
    real *dx = overwrite ? nans((long)c.N * c.IC) : zeros((long)c.N * c.IC);
    // The overwrite case also writes dweight and dbias (GRAD_WRITE): NaN unless written.
    real *dw = overwrite ? nans((long)c.OC * c.IC) : zeros((long)c.OC * c.IC);
    real* db = overwrite ? nans(c.OC) : zeros(c.OC);
    if (overwrite) matmul_backward_overwrite(dx, dw, db, c.dy, c.x, c.w, c.N, c.IC, c.OC, GRAD_WRITE);
    else matmul_backward(dx, dw, db, c.dy, c.x, c.w, c.N, c.IC, c.OC, GRAD_ACCUMULATE);
    const char* what = overwrite ? "matmul_backward_overwrite" : "matmul";
    char name[64];
    snprintf(name, sizeof name, "%s dinp", what);
    check(name, c.x, dx, (long)c.N * c.IC, mm_loss, &c);
    snprintf(name, sizeof name, "%s dweight", what);
    check(name, c.w, dw, (long)c.OC * c.IC, mm_loss, &c);
    snprintf(name, sizeof name, "%s dbias", what);
    check(name, c.b, db, c.OC, mm_loss, &c);
}

// ---- GELU fused with the GEMMs around it ----
// y = gelu(pre) @ w^T + b (the MLP's projection after its GELU), and pre = x @ wf^T + bf through
// matmul_forward_gelu (the layer before it).
typedef struct {
    int N, IC, OC;
    real *pre, *g, *w, *b, *y, *dy;
    real *x, *wf, *bf;  // matmul_forward_gelu's inputs (IC outputs from OC inputs)
} GeluMMCase;

static double gelu_mm_loss(void* p) {
    GeluMMCase* c = p;
    gelu_forward(c->g, c->pre, (long)c->N * c->IC);
    matmul_forward(c->y, c->g, c->w, c->b, c->N, c->IC, c->OC);
    return weighted_sum(c->y, c->dy, (long)c->N * c->OC);
}

// Through matmul_forward_gelu: pre = x @ wf^T + bf, g = gelu(pre), y = g @ w^T + b.
static double fwd_gelu_loss(void* p) {
    GeluMMCase* c = p;
    matmul_forward_gelu(c->g, c->pre, c->x, c->wf, c->bf, c->N, c->OC, c->IC);
    matmul_forward(c->y, c->g, c->w, c->b, c->N, c->IC, c->OC);
    return weighted_sum(c->y, c->dy, (long)c->N * c->OC);
}

static void test_gelu_matmuls(void) {
    GeluMMCase c = {.N = 6, .IC = 8, .OC = 5};
    const long ni = (long)c.N * c.IC;
    c.pre = random_array(ni, 3);
    c.g = zeros(ni);
    c.w = random_array((long)c.OC * c.IC, 1);
    c.b = random_array(c.OC, 1);
    c.y = zeros((long)c.N * c.OC);
    c.dy = random_array((long)c.N * c.OC, 1);
    gelu_mm_loss(&c);
    real *dpre = nans(ni), *dw = nans((long)c.OC * c.IC), *db = nans(c.OC);
    matmul_backward_gelu(dpre, dw, db, c.dy, c.g, c.pre, c.w, c.N, c.IC, c.OC, GRAD_WRITE);
    check("matmul_backward_gelu dpre", c.pre, dpre, ni, gelu_mm_loss, &c);
    check("matmul_backward_gelu dweight", c.w, dw, (long)c.OC * c.IC, gelu_mm_loss, &c);
    check("matmul_backward_gelu dbias", c.b, db, c.OC, gelu_mm_loss, &c);

    // matmul_forward_gelu's two outputs, differentiated through the chain above.
    c.x = random_array((long)c.N * c.OC, 1);
    c.wf = random_array((long)c.IC * c.OC, 1);
    c.bf = random_array(c.IC, 1);
    real* pre2 = nans(ni);
    c.pre = pre2;
    fwd_gelu_loss(&c);
    real *dx = zeros((long)c.N * c.OC), *dwf = zeros((long)c.IC * c.OC), *dbf = zeros(c.IC);
    memset(dw, 0, sizeof(real) * c.OC * c.IC);
    memset(db, 0, sizeof(real) * c.OC);
    matmul_backward_gelu(dpre, dw, db, c.dy, c.g, c.pre, c.w, c.N, c.IC, c.OC, GRAD_ACCUMULATE);
    matmul_backward(dx, dwf, dbf, dpre, c.x, c.wf, c.N, c.OC, c.IC, GRAD_ACCUMULATE);
    check("matmul_forward_gelu -> dinp", c.x, dx, (long)c.N * c.OC, fwd_gelu_loss, &c);
    check("matmul_forward_gelu -> dweight", c.wf, dwf, (long)c.IC * c.OC, fwd_gelu_loss, &c);
    check("matmul_forward_gelu -> dbias", c.bf, dbf, c.IC, fwd_gelu_loss, &c);
}

// ---- fused residual + layernorm ----
// loss = sum(dy * ln_out) + sum(dres * residual_out): both stored outputs are differentiated.
typedef struct {
    int N, C;
    double eps;
    real *a, *b, *w, *bias, *res, *y, *mean, *rstd, *dy, *dres;
} FRLCase;

static double frl_loss(void* p) {
    FRLCase* c = p;
    fused_residual_layernorm_forward(c->res, c->y, c->mean, c->rstd, c->a, c->b, c->w, c->bias, c->N,
                                     c->C, c->eps);
    const long n = (long)c->N * c->C;
    return weighted_sum(c->y, c->dy, n) + weighted_sum(c->res, c->dres, n);
}

static void test_fused_residual_layernorm(void) {
    FRLCase c = {.N = 5, .C = 7, .eps = 1e-5};
    const long n = (long)c.N * c.C;
    c.a = random_array(n, 1);
    c.b = random_array(n, 1);
    c.w = random_array(c.C, 1);
    c.bias = random_array(c.C, 1);
    c.res = zeros(n);
    c.y = zeros(n);
    c.mean = zeros(c.N);
    c.rstd = zeros(c.N);
    c.dy = random_array(n, 1);
    c.dres = random_array(n, 1);
    frl_loss(&c);
    // d(a) = d(b) = dres + the LayerNorm backward of dy at residual_out.
    real *dsum = new_array(n), *dw = zeros(c.C), *db = zeros(c.C);
    memcpy(dsum, c.dres, sizeof(real) * n);
    layernorm_backward(dsum, dw, db, c.dy, c.res, c.w, c.mean, c.rstd, c.N, c.C, GRAD_ACCUMULATE);
    check("fused residual+layernorm da", c.a, dsum, n, frl_loss, &c);
    check("fused residual+layernorm db", c.b, dsum, n, frl_loss, &c);
    check("fused residual+layernorm dweight", c.w, dw, c.C, frl_loss, &c);
    check("fused residual+layernorm dbias", c.bias, db, c.C, frl_loss, &c);
    // Equal to the two separate layers, also with residual_out written over a (in place).
    real *res2 = zeros(n), *y2 = zeros(n), *m2 = zeros(c.N), *r2 = zeros(c.N);
    residual_forward(res2, c.a, c.b, n);
    layernorm_forward(y2, m2, r2, res2, c.w, c.bias, c.N, c.C, c.eps);
    real* a_copy = new_array(n);
    memcpy(a_copy, c.a, sizeof(real) * n);
    fused_residual_layernorm_forward(a_copy, c.y, c.mean, c.rstd, a_copy, c.b, c.w, c.bias, c.N, c.C,
                                     c.eps);
    const int same = !memcmp(res2, a_copy, sizeof(real) * n) && !memcmp(y2, c.y, sizeof(real) * n) &&
                     !memcmp(m2, c.mean, sizeof(real) * c.N) && !memcmp(r2, c.rstd, sizeof(real) * c.N);
    printf("%-4s %-34s bitwise equal to residual_forward + layernorm_forward\n", same ? "ok" : "FAIL",
           "fused residual+layernorm in place");
    if (!same) failures++;
}

// ---- rmsnorm ----
static double rms_loss(void* p) {   // the LayerNorm case's fields; b is the residual's other term
    FRLCase* c = p;
    fused_residual_rmsnorm_forward(c->res, c->y, c->rstd, c->a, c->b, c->w, c->N, c->C, c->eps);
    const long n = (long)c->N * c->C;
    return weighted_sum(c->y, c->dy, n) + weighted_sum(c->res, c->dres, n);
}

static double rms_plain_loss(void* p) {
    FRLCase* c = p;
    rmsnorm_forward(c->y, c->rstd, c->a, c->w, c->N, c->C, c->eps);
    return weighted_sum(c->y, c->dy, (long)c->N * c->C);
}

static void test_rmsnorm(double eps) {
    FRLCase c = {.N = 5, .C = 7, .eps = eps};
    char name[64];
    const long n = (long)c.N * c.C;
    c.a = random_array(n, 1);
    c.b = random_array(n, 1);
    c.w = random_array(c.C, 1);
    c.res = zeros(n);
    c.y = zeros(n);
    c.rstd = zeros(c.N);
    c.dy = random_array(n, 1);
    c.dres = random_array(n, 1);
    // Alone: GRAD_WRITE over NaN weight gradients.
    real *dx = zeros(n), *dw = nans(c.C);
    rms_plain_loss(&c);
    rmsnorm_backward(dx, dw, c.dy, c.a, c.w, c.rstd, c.N, c.C, GRAD_WRITE);
    check(norm_name(name, sizeof name, "rmsnorm", eps, "dinp"), c.a, dx, n, rms_plain_loss, &c);
    check(norm_name(name, sizeof name, "rmsnorm", eps, "dweight"), c.w, dw, c.C, rms_plain_loss,
          &c);
    // Fused with the residual add: d(a) = d(b) = dres + the RMSNorm backward at residual_out.
    rms_loss(&c);
    real *dsum = new_array(n), *dw2 = random_array(c.C, 1), *dw_start = new_array(c.C);
    memcpy(dsum, c.dres, sizeof(real) * n);
    memcpy(dw_start, dw2, sizeof(real) * c.C);
    rmsnorm_backward(dsum, dw2, c.dy, c.res, c.w, c.rstd, c.N, c.C, GRAD_ACCUMULATE);
    for (int i = 0; i < c.C; i++) dw2[i] -= dw_start[i];   // what GRAD_ACCUMULATE added
    check(norm_name(name, sizeof name, "fused residual+rmsnorm", eps, "da"), c.a, dsum, n, rms_loss,
          &c);
    check(norm_name(name, sizeof name, "fused residual+rmsnorm", eps, "db"), c.b, dsum, n, rms_loss,
          &c);
    check(norm_name(name, sizeof name, "fused residual+rmsnorm", eps, "dweight"), c.w, dw2, c.C,
          rms_loss, &c);
    // Equal to the two separate layers, with residual_out written over a (in place).
    real *res2 = zeros(n), *y2 = zeros(n), *r2 = zeros(c.N), *a_copy = new_array(n);
    residual_forward(res2, c.a, c.b, n);
    rmsnorm_forward(y2, r2, res2, c.w, c.N, c.C, c.eps);
    memcpy(a_copy, c.a, sizeof(real) * n);
    fused_residual_rmsnorm_forward(a_copy, c.y, c.rstd, a_copy, c.b, c.w, c.N, c.C, c.eps);
    const int same = !memcmp(res2, a_copy, sizeof(real) * n) && !memcmp(y2, c.y, sizeof(real) * n) &&
                     !memcmp(r2, c.rstd, sizeof(real) * c.N);
    printf("%-4s %-34s bitwise equal to residual_forward + rmsnorm_forward\n", same ? "ok" : "FAIL",
           "fused residual+rmsnorm in place");
    if (!same) failures++;
}

// ---- swiglu ----
typedef struct {
    int N, F;
    real *x, *y, *dy;
} SwigluCase;

static double swiglu_loss(void* p) {
    SwigluCase* c = p;
    swiglu_forward(c->y, c->x, c->N, c->F);
    return weighted_sum(c->y, c->dy, (long)c->N * c->F);
}

static void test_swiglu(void) {
    SwigluCase c = {.N = 4, .F = 9};
    c.x = random_array(2L * c.N * c.F, 4);   // gates over the sigmoid's curved range
    c.y = zeros((long)c.N * c.F);
    c.dy = random_array((long)c.N * c.F, 1);
    real* dx = nans(2L * c.N * c.F);   // overwritten: a missed element stays NaN
    swiglu_backward(dx, c.x, c.dy, c.N, c.F);
    check("swiglu dinp", c.x, dx, 2L * c.N * c.F, swiglu_loss, &c);
}

// ---- gelu ----
typedef struct {
    long n;
    real *x, *y, *dy;
} GeluCase;

static double gelu_loss(void* p) {
    GeluCase* c = p;
    gelu_forward(c->y, c->x, c->n);
    return weighted_sum(c->y, c->dy, c->n);
}

static void test_gelu(void) {
    GeluCase c = {.n = 40};
    c.x = random_array(c.n, 4);
    c.y = zeros(c.n);
    c.dy = random_array(c.n, 1);
    real* dx = zeros(c.n);
    gelu_backward(dx, c.x, c.dy, c.n);
    check("gelu dinp", c.x, dx, c.n, gelu_loss, &c);
}

// ---- encoder ----
typedef struct {
    int B, T, C;
    int* tokens;
    TokenLayout pos;
    real *wte, *wpe, *y, *dy;
} EncCase;

static double enc_loss(void* p) {
    EncCase* c = p;
    encoder_forward(c->y, c->tokens, c->wte, c->wpe, c->B, c->T, c->C, c->pos, NULL);
    return weighted_sum(c->y, c->dy, (long)c->B * c->T * c->C);
}

// pos: the local tokens' positions in a sequence of at most 12; name: for the messages.
static void test_encoder(TokenLayout pos, const char* name) {
    EncCase c = {.B = 2, .T = 4, .C = 3, .pos = pos};
    const int V = 5, maxT = 12;
    int tokens[8] = {1, 3, 1, 4, 0, 1, 4, 4};
    c.tokens = tokens;
    c.wte = random_array(V * c.C, 1);
    c.wpe = random_array(maxT * c.C, 1);
    c.y = zeros((long)c.B * c.T * c.C);
    c.dy = random_array((long)c.B * c.T * c.C, 1);
    // dwpe written (GRAD_WRITE: NaN unless written, every row of the table), dwte added.
    real *dwte = zeros(V * c.C), *dwpe = nans(maxT * c.C);
    encoder_backward(dwte, dwpe, c.dy, c.tokens, NULL, c.B, c.T, c.C, c.pos, NULL, NULL, maxT,
                     GRAD_WRITE);
    char what[96];
    snprintf(what, sizeof what, "encoder dwte (%s)", name);
    check(what, c.wte, dwte, V * c.C, enc_loss, &c);
    snprintf(what, sizeof what, "encoder dwpe (%s)", name);
    check(what, c.wpe, dwpe, maxT * c.C, enc_loss, &c);
}

// ---- rotary position embeddings ----
typedef struct {
    int B, T, NH, NKV, HS;
    RopeSpec rope;
    TokenLayout pos;
    const int* row_pos;
    real *x, *y, *dy;
} RopeCase;

static double rope_loss(void* p) {
    RopeCase* c = p;
    const long n = (long)c->B * c->T * (c->NH + 2 * c->NKV) * c->HS;
    memcpy(c->y, c->x, sizeof(real) * n);   // in place: rotate a copy
    rope_forward(c->y, c->B, c->T, c->NH, c->NKV, c->HS, c->pos, c->row_pos, c->rope);
    return weighted_sum(c->y, c->dy, n);
}

// Queries, keys and (untouched) values of 3 heads over 1 key/value head, at positions from a
// layout or per row, under a rotation (YaRN's scales the vectors too).
static void test_rope(TokenLayout pos, const int* row_pos, RopeSpec rope, const char* name) {
    RopeCase c = {.B = 2, .T = 3, .NH = 3, .NKV = 1, .HS = 6, .rope = rope, .pos = pos,
                  .row_pos = row_pos};
    const long n = (long)c.B * c.T * (c.NH + 2 * c.NKV) * c.HS;
    c.x = random_array(n, 1);
    c.y = zeros(n);
    c.dy = random_array(n, 1);
    real* dx = zeros(n);
    memcpy(dx, c.dy, sizeof(real) * n);
    rope_backward(dx, c.B, c.T, c.NH, c.NKV, c.HS, c.pos, c.row_pos, c.rope);
    char what[96];
    snprintf(what, sizeof what, "rope dqkv (%s)", name);
    check(what, c.x, dx, n, rope_loss, &c);
}

// ---- cross-entropy ----
typedef struct {
    int N, V, Vp;
    int* targets;
    real *logits, *work, *losses;
} CECase;

static double ce_loss(void* p) {
    CECase* c = p;
    double sum = 0;
    crossentropy_forward(c->losses, c->logits, c->targets, c->N, c->V, c->Vp, &sum);
    return sum;
}

static void test_crossentropy(void) {
    CECase c = {.N = 4, .V = 7, .Vp = 9};
    int targets[4] = {0, 6, 3, 3};
    c.targets = targets;
    const long n = (long)c.N * c.Vp;
    c.logits = random_array(n, 3);
    c.losses = zeros(c.N);
    real* grad = zeros(n);
    const real dloss = 0.7;
    const double loss = ce_loss(&c);
    // The training path's one pass: the same losses, and the gradient in place of the logits.
    memcpy(grad, c.logits, sizeof(real) * n);
    real* losses = zeros(c.N);
    double sum = 0.5;   // added to, not overwritten
    crossentropy_forward_backward(grad, losses, c.targets, dloss, c.N, c.V, c.Vp, &sum,
                                  (ZLoss){0, NULL, NULL});
    const int same = sum == 0.5 + loss && !memcmp(losses, c.losses, sizeof(real) * c.N);
    printf("%-4s %-34s the losses and their sum of crossentropy_forward\n", same ? "ok" : "FAIL",
           "cross-entropy forward+backward");
    if (!same) failures++;
    for (long i = 0; i < n; i++) grad[i] /= dloss;   // check d(sum of losses)/dlogits
    check("cross-entropy dlogits", c.logits, grad, n, ce_loss, &c);
}

// The objective under the z-loss: the cross-entropy plus coef lse^2 per row, lse recovered as
// the row's loss plus its target's logit.
typedef struct {
    CECase ce;
    real coef;
} ZCase;

static double z_objective(void* p) {
    ZCase* c = p;
    double sum = ce_loss(&c->ce);
    for (int n = 0; n < c->ce.N; n++) {
        const double lse = c->ce.losses[n] + c->ce.logits[(long)n * c->ce.Vp + c->ce.targets[n]];
        sum += c->coef * lse * lse;
    }
    return sum;
}

// PaLM's z-loss at a coefficient large enough (0.3) that its gradient is not lost in the
// cross-entropy's: the training pass's dlogits against the objective's finite differences, the
// cross-entropy losses unchanged by it, and the per-row z-losses and their sum.
static void test_crossentropy_z_loss(void) {
    ZCase c = {.ce = {.N = 4, .V = 7, .Vp = 9}, .coef = 0.3};
    int targets[4] = {0, 6, 3, 3};
    c.ce.targets = targets;
    const long n = (long)c.ce.N * c.ce.Vp;
    c.ce.logits = random_array(n, 4);
    for (long i = 0; i < n; i++) c.ce.logits[i] += 1.5;   // lse away from 0: the z term matters
    c.ce.losses = zeros(c.ce.N);
    const double ce = ce_loss(&c.ce), objective = z_objective(&c);
    real* grad = zeros(n);
    memcpy(grad, c.ce.logits, sizeof(real) * n);
    real* losses = zeros(c.ce.N);
    real* zl = zeros(c.ce.N);
    double sum = 0.25, zsum = 0.5;   // both added to
    const real dloss = 0.7;
    crossentropy_forward_backward(grad, losses, c.ce.targets, dloss, c.ce.N, c.ce.V, c.ce.Vp, &sum,
                                  (ZLoss){(real_stat)c.coef, zl, &zsum});
    double zsum_ref = 0;
    for (int i = 0; i < c.ce.N; i++) zsum_ref += zl[i];
    const double zrel = fabs((zsum - 0.5) - (objective - ce)) / (objective - ce);
    const int same = sum == 0.25 + ce && !memcmp(losses, c.ce.losses, sizeof(real) * c.ce.N) &&
                     zsum == 0.5 + zsum_ref && zrel < 1e-5 && objective - ce > 1.0;
    printf("%-4s %-34s cross-entropy losses unchanged, z-losses sum to the objective's z term "
           "(rel %.1e)\n", same ? "ok" : "FAIL", "z-loss forward+backward", zrel);
    if (!same) failures++;
    for (long i = 0; i < n; i++) grad[i] /= dloss;
    check("z-loss dlogits", c.ce.logits, grad, n, z_objective, &c);
}

// ---- partial attention with positions ----
typedef struct {
    AttentionProblem p;
    real *q, *k, *v, *o, *lse, *dy;
} AttnCase;

static double attn_loss(void* ptr) {
    AttnCase* c = ptr;
    const AttentionProblem* p = &c->p;
    const int C = p->NH * p->HS;
    attention_partial_forward(p, c->q, C, c->k, C, c->v, C, c->o, C, c->lse);
    return weighted_sum(c->o, c->dy, (long)p->B * p->Tq * C);
}

static void test_attention(int Tq, int Tk, TokenPositions qpos, TokenPositions kpos,
                           const char* label) {
    AttnCase c = {.p = {.B = 2, .NH = 2, .NKV = 2, .HS = 3, .Tq = Tq, .Tk = Tk, .qpos = qpos,
                        .kpos = kpos}};
    const AttentionProblem* p = &c.p;
    const int C = p->NH * p->HS;
    const long nq = (long)p->B * Tq * C, nk = (long)p->B * Tk * C;
    c.q = random_array(nq, 1);
    c.k = random_array(nk, 1);
    c.v = random_array(nk, 1);
    c.o = zeros(nq);
    c.lse = zeros((long)p->B * p->NH * Tq);
    c.dy = random_array(nq, 1);
    real *dq = zeros(nq), *dk = zeros(nk), *dv = zeros(nk), *d = zeros((long)p->B * p->NH * Tq);
    attn_loss(&c);
    attention_row_dot(p, c.o, C, c.dy, C, d);
    attention_partial_backward(p, c.q, C, c.k, C, c.v, C, c.dy, C, c.lse, d, dq, C, dk, C, dv,
                               C);
    char name[96];
    snprintf(name, sizeof name, "attention dq %s", label);
    check(name, c.q, dq, nq, attn_loss, &c);
    snprintf(name, sizeof name, "attention dk %s", label);
    check(name, c.k, dk, nk, attn_loss, &c);
    snprintf(name, sizeof name, "attention dv %s", label);
    check(name, c.v, dv, nk, attn_loss, &c);
}

// ---- whole model ----
typedef struct {
    GPT* m;
    int *inputs, *targets;
} ModelCase;

// The evaluation path: forward, then the loss alone.
static double model_loss(void* p) {
    ModelCase* c = p;
    gpt_loss_zero(c->m);
    gpt_forward(c->m, c->inputs, c->targets);
    gpt_loss(c->m);
    return gpt_loss_read(c->m) / (c->m->B * c->m->T);
}

static void test_model(GPTConfig cfg) {
    const int B = 2, T = 7;
    AttentionLayer* attn = attention_local_create(B, T, cfg.NH, gpt_kv_heads(&cfg), cfg.C / cfg.NH);
    GPT m;
    gpt_create(&m, &cfg, B, T, attn, 1);
    gpt_init_params(&cfg, 7, GPT_INIT_STD, m.params_memory);
    // Non-trivial biases and LayerNorm parameters, so that every path carries gradient.
    for (size_t i = 0; i < m.num_params; i++) m.params_memory[i] += 0.1 * uniform();
    int inputs[14], targets[14];
    for (int i = 0; i < B * T; i++) {
        inputs[i] = (int)((uniform() + 1) * 0.5 * cfg.V) % cfg.V;
        targets[i] = (int)((uniform() + 1) * 0.5 * cfg.V) % cfg.V;
    }
    ModelCase c = {&m, inputs, targets};
    // The backward WRITES every gradient (m.grads_write) over NaN: one it misses fails the check.
    for (size_t i = 0; i < m.num_params; i++) m.grads_memory[i] = NAN;
    m.grads_write = 1;
    const double eval_loss = model_loss(&c);
    // The training path: the loss comes from the backward's one classifier pass.
    gpt_loss_zero(&m);
    gpt_forward(&m, inputs, targets);
    gpt_backward(&m, 1.0 / (B * T));
    const double train_loss = gpt_loss_read(&m) / (B * T);
    printf("%-4s %-34s %.17g (forward + gpt_loss: %.17g)\n", train_loss == eval_loss ? "ok" : "FAIL",
           "model loss from gpt_backward", train_loss, eval_loss);
    if (train_loss != eval_loss) failures++;
    real* analytic = malloc(sizeof(real) * m.num_params);
    memcpy(analytic, m.grads_memory, sizeof(real) * m.num_params);
    size_t off = 0;
    for (int t = 0; t < NUM_PARAM_TENSORS; t++) {
        char name[64];
        snprintf(name, sizeof name, "model d%s", gpt_param_name(t));
        if (m.param_sizes[t] == 0) continue;   // no wpe under rope, no biases where absent
        if (t == 0) {   // wte: only the real vocabulary rows carry gradient; check those
            check(name, m.params_memory, analytic, (long)cfg.V * cfg.C, model_loss, &c);
        } else {
            check(name, m.params_memory + off, analytic + off, (long)m.param_sizes[t],
                  model_loss, &c);
        }
        off += m.param_sizes[t];
    }
    free(analytic);
    gpt_free(&m);
    attention_layer_free(attn);
}

int main(void) {
    printf("finite-difference checks in %s, h = 1e-5, tolerance 1e-6\n", REAL_NAME);
    test_layernorm(1e-5);
    test_layernorm(0.1);   // an epsilon near the rows' variance (~1/3): the backward must agree
    test_matmul(0);
    test_matmul(1);
    test_gelu();
    test_gelu_matmuls();
    test_fused_residual_layernorm();
    test_rmsnorm(1e-5);
    test_rmsnorm(0.1);
    test_swiglu();
    // Local tokens 2, 5, 8, 11 of each sequence (a cyclic shard), then a zigzag shard (chunks
    // [2, 4) and [7, 9): local tokens 2, 7, 3, 8); tokens repeat on purpose.
    test_encoder(token_layout(token_positions(2, 3)), "offset 2, stride 3");
    test_encoder((TokenLayout){.off = {2, 7}, .stride = 1, .chunks = 2}, "zigzag chunks 2 and 7");
    const RopeSpec plain = {.theta = 100};
    test_rope(token_layout(token_positions(0, 1)), NULL, plain, "positions 0..2");
    test_rope((TokenLayout){.off = {5, 40}, .stride = 1, .chunks = 2}, NULL, plain,
              "zigzag chunks 5, 40");
    static const int rows[6] = {0, 1, 0, 7, 3, 2};
    test_rope(token_layout(token_positions(0, 1)), rows, plain, "per-row positions");
    // Context extension at HS 6 from 16 positions: YaRN's ramp keeps pair 0 and interpolates
    // pairs 1-2 (and scales by 0.1 ln 4 + 1); Llama 3.1's blends pair 0 and interpolates 1-2.
    test_rope((TokenLayout){.off = {5, 40}, .stride = 1, .chunks = 2}, NULL,
              (RopeSpec){100, ROPE_SCALING_YARN, 4.0f, 16}, "yarn x4 from 16");
    test_rope(token_layout(token_positions(0, 1)), rows,
              (RopeSpec){100, ROPE_SCALING_LLAMA3, 4.0f, 16}, "llama3 x4 from 16");
    test_rope(token_layout(token_positions(3, 2)), NULL,
              (RopeSpec){100, ROPE_SCALING_LINEAR, 2.5f, 16}, "linear x2.5");
    test_crossentropy();
    test_crossentropy_z_loss();
    test_attention(70, 70, (TokenPositions){0, 1}, (TokenPositions){0, 1}, "single device");
    // ATTENTION2D 2x3 mesh, rank (r=1, c=2): queries 1, 3, 5, ..., keys 2, 5, 8, ...
    test_attention(40, 27, (TokenPositions){1, 2}, (TokenPositions){2, 3}, "mesh 2x3 (1,2)");
    // Ring: a later query chunk against an earlier key chunk, and the diagonal chunk.
    test_attention(20, 20, (TokenPositions){40, 1}, (TokenPositions){20, 1}, "ring past chunk");
    test_attention(20, 20, (TokenPositions){20, 1}, (TokenPositions){20, 1}, "ring diagonal");
    // Early queries see no key at all (empty partial rows).
    test_attention(9, 9, (TokenPositions){0, 4}, (TokenPositions){3, 4}, "empty rows");
    test_model((GPTConfig){.max_T = 9, .V = 23, .Vp = 32, .L = 2, .NH = 3, .C = 6});
    // Llama's block: RMSNorm, SwiGLU of hidden width 10, rotary positions, 3 heads on 1 K/V head.
    printf("llama block: rmsnorm, swiglu F=10, rope, 1 key/value head\n");
    test_model((GPTConfig){.max_T = 9, .V = 23, .Vp = 32, .L = 2, .NH = 3, .C = 6, .kv_heads = 1,
                           .rope_theta = 100, .norm = GPT_NORM_RMSNORM, .mlp = GPT_MLP_SWIGLU,
                           .ffn_hidden = 10});
    printf("llama block without linear biases\n");
    test_model((GPTConfig){.max_T = 9, .V = 23, .Vp = 32, .L = 2, .NH = 3, .C = 6, .kv_heads = 1,
                           .rope_theta = 100, .norm = GPT_NORM_RMSNORM, .mlp = GPT_MLP_SWIGLU,
                           .ffn_hidden = 10, .no_linear_bias = 1});
    // An untied classifier: its own gradient, and wte's from the encoder alone (written over
    // NaN: the backward zeroes it before the encoder adds to it).
    printf("untied classifier\n");
    test_model((GPTConfig){.max_T = 9, .V = 23, .Vp = 32, .L = 2, .NH = 3, .C = 6,
                           .untied_classifier = 1});
    printf("llama block without linear biases, untied classifier\n");
    test_model((GPTConfig){.max_T = 9, .V = 23, .Vp = 32, .L = 2, .NH = 3, .C = 6, .kv_heads = 1,
                           .rope_theta = 100, .norm = GPT_NORM_RMSNORM, .mlp = GPT_MLP_SWIGLU,
                           .ffn_hidden = 10, .no_linear_bias = 1, .untied_classifier = 1});
    // QK-norm (heads of 4: a LayerNorm over 2 channels would leave only the sign): GPT's block with
    // LayerNorm (weights and biases per layer) and rotary positions (without them the keys' bias
    // adds q.b to every score of a query, which the softmax ignores: its gradient is 0), and
    // Qwen3's: RMSNorm, rotary positions after the norm, 2 query heads on 1 key/value head, no
    // linear biases.
    // The norms' epsilon 1e-3: these small projections give heads of 4 channels variances near
    // 1e-3, where 1e-5's curvature brings the central difference's own error (h = 1e-5) to the
    // 1e-6 bound (dwte 1.3e-6 at 1e-5; every QK-norm gradient within 4e-8 either way).
    printf("qk-norm, layernorm (eps 1e-3), rope\n");
    test_model((GPTConfig){.max_T = 9, .V = 23, .Vp = 32, .L = 2, .NH = 2, .C = 8,
                           .rope_theta = 100, .norm_eps = 1e-3f, .qk_norm = 1});
    printf("qk-norm, qwen3 block: rmsnorm, swiglu F=10, rope, 1 key/value head, no linear biases\n");
    test_model((GPTConfig){.max_T = 9, .V = 23, .Vp = 32, .L = 2, .NH = 2, .C = 8, .kv_heads = 1,
                           .rope_theta = 100, .norm = GPT_NORM_RMSNORM, .mlp = GPT_MLP_SWIGLU,
                           .ffn_hidden = 10, .no_linear_bias = 1, .qk_norm = 1});
    free_arrays();
    printf("%s: %d failure(s)\n", failures ? "FAILED" : "passed", failures);
    return failures ? 1 : 0;
}
