// CUDA backend part 1 against the CPU twins, under the host runtime (built twice: bf16 storage,
// and fp32 with -DGPT_CUDA_FP32) or on a GPU: the cuBLASLt GEMMs (bias, fused GELU, backward with
// the BGRADB epilogue and with the column-sum kernel, backward overwriting dinp with and without
// the GELU gradient of the DGELU epilogue, and each epilogue's fallback), the fused
// softmax + cross-entropy + gradient, AdamW with stochastic rounding, and the global gradient norm.
// Inputs are rounded to floatX before the CPU sees them, every output is poisoned with NaN before
// each launch, and each check prints max|gpu - cpu| / max|cpu| next to its bound (tests/cuda/
// bounds.h: a host-runtime column and a GPU column per quantity, reported at the end).
//
// The fallbacks (model/matmul_cuda.cuh) run where cuBLASLt refuses an epilogue: matmul cases whose
// rows are not a multiple of 16 bytes or whose bias or activation pointers are not 16-byte aligned
// (the host runtime's cuBLASLt refuses those, tests/cuda_host/host_cublas.h), and, with
// CUDA_HOST_CUBLASLT_REFUSE=BIAS,GELU_AUX,GELU_AUX_BIAS,BGRADB,DGELU, every call of those epilogues
// (cublasLtMatmul refuses after the heuristic offered an algorithm). Under the host runtime each
// call's path (fused or fallback, from the context's counters) is checked against that model, and
// the well-aligned cases must run fused unless the knob names the epilogue; on a GPU the path is
// only reported (its cuBLASLt decides).
//
// `--quick` runs a subset that still reaches every kernel and both paths of each epilogue: one
// aligned and one misaligned matmul shape (the latter with and without offset pointers), one
// classifier, one AdamW, one norm (for compute-sanitizer).
#include "model/cuda_common.cuh"
#include "model/matmul_cuda.cuh"
#include "model/optim_cuda.cuh"
#include "tests/cuda/bounds.h"
#include "tests/cuda_host/test_check.h"

#include <cblas.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "model/gpt.h"
extern "C" {
#include "model/layers.h"
#include "model/optimizer.h"
}

// Bounds on max|gpu - cpu| / max|cpu| (tests/cuda/bounds.h): host runtime and GPU columns.
#ifdef GPT_CUDA_FP32
static Bound B_MATMUL = {"matmul", 1e-5, 2e-5,
                         "GPU: cuBLASLt's own blocking and split-K order of the fp32 sums", 0};
static Bound B_DLOGITS = {"dlogits", 1e-5, 2e-5, "GPU: __expf (2 ulp) in the softmax", 0};
static Bound B_LOSS = {"loss", 1e-5, 2e-5, "GPU: __expf and the log of the sum", 0};
#else
// bf16 rounds each output once (at most 2^-8 = 3.9e-3 relative); bias gradients through BGRADB
// and the forward fallbacks (GEMM result rounded before the bias add) twice (7.8e-3).
static Bound B_MATMUL = {"matmul", 1e-2, 1e-2,
                         "same: one or two bf16 roundings dominate; the GPU's fp32 sum order is ~1000x smaller", 0};
static Bound B_DLOGITS = {"dlogits", 8e-3, 8e-3, "same: one bf16 rounding of the gradient dominates", 0};
static Bound B_LOSS = {"loss", 1e-4, 1e-4,
                       "same: fp32 loss of bf16 logits; __expf's few ulp are far below the bound", 0};
#endif
// fp32 optimizer state and norm in both builds.
static Bound B_ADAMW = {"adamw", 1e-5, 1e-5,
                        "same: sqrtf and division are correctly rounded by default; FMA moves m and v by at "
                        "most 1 ulp", 0};
static Bound B_NORM = {"global-norm", 1e-5, 1e-5,
                       "same: squares summed in fp32 per 16-byte load (8 of bf16, 4 of fp32), then in double, fixed order", 0};

// --- Host helpers --------------------------------------------------------------------------------

static uint64_t rng = 0x2545F4914F6CDD1Dull;
static float frand(void) {  // uniform in [-1, 1)
    rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
    return (float)((rng >> 11) * (1.0 / 9007199254740992.0)) * 2.0f - 1.0f;
}

static float round_x(float x) { return to_float(from_float<floatX>(x)); }

// n values uniform in [-scale, scale), rounded to what floatX holds.
static float* random_x(size_t n, float scale) {
    float* h = (float*)malloc((n ? n : 1) * sizeof(float));
    for (size_t i = 0; i < n; i++) h[i] = round_x(scale * frand());
    return h;
}

static float* copy_of(const float* h, size_t n) {
    float* c = (float*)malloc((n ? n : 1) * sizeof(float));
    memcpy(c, h, n * sizeof(float));
    return c;
}

static floatX* alloc_x(size_t n) {
    floatX* d;
    CUDA_CHECK(cudaMalloc(&d, (n ? n : 1) * sizeof(floatX)));
    return d;
}

static void put_x(floatX* d, const float* h, size_t n) {
    floatX* tmp = (floatX*)malloc((n ? n : 1) * sizeof(floatX));
    for (size_t i = 0; i < n; i++) tmp[i] = from_float<floatX>(h[i]);
    CUDA_CHECK(cudaMemcpy(d, tmp, n * sizeof(floatX), cudaMemcpyHostToDevice));
    free(tmp);
}

static floatX* upload_x(const float* h, size_t n) {
    floatX* d = alloc_x(n);
    put_x(d, h, n);
    return d;
}

static void get_x(float* h, const floatX* d, size_t n) {
    floatX* tmp = (floatX*)malloc((n ? n : 1) * sizeof(floatX));
    CUDA_CHECK(cudaMemcpy(tmp, d, n * sizeof(floatX), cudaMemcpyDeviceToHost));
    for (size_t i = 0; i < n; i++) h[i] = to_float(tmp[i]);
    free(tmp);
}

static float* download_x(const floatX* d, size_t n) {
    float* h = (float*)malloc((n ? n : 1) * sizeof(float));
    get_x(h, d, n);
    return h;
}

static float* upload_f(const float* h, size_t n) {
    float* d;
    CUDA_CHECK(cudaMalloc(&d, (n ? n : 1) * sizeof(float)));
    CUDA_CHECK(cudaMemcpy(d, h, n * sizeof(float), cudaMemcpyHostToDevice));
    return d;
}

static float* download_f(const float* d, size_t n) {
    float* h = (float*)malloc((n ? n : 1) * sizeof(float));
    CUDA_CHECK(cudaMemcpy(h, d, n * sizeof(float), cudaMemcpyDeviceToHost));
    return h;
}

static void poison(void* d, size_t bytes) { CUDA_CHECK(cudaMemset(d, 0xff, bytes)); }

// max|got - want| / max|want|; infinite if anything is NaN.
static double rel_err(const float* got, const float* want, size_t n) {
    double num = 0.0, den = 0.0;
    for (size_t i = 0; i < n; i++) {
        const double d = fabs((double)got[i] - (double)want[i]);
        if (!(d <= num)) num = d;  // NaN makes num NaN
        if (fabs((double)want[i]) > den) den = fabs((double)want[i]);
    }
    if (num != num) return INFINITY;
    return den > 0 ? num / den : num;
}

// Equal element by element, NaN equal to NaN.
static int same_values(const float* a, const float* b, size_t n) {
    for (size_t i = 0; i < n; i++)
        if (!(a[i] == b[i] || (a[i] != a[i] && b[i] != b[i]))) return 0;
    return 1;
}

static void check_err(const char* what, double err, Bound* b) {
    check(bound_seen(b, err), "%-58s err %.3e (bound %.0e)", what, err, bound_limit(b));
}

// --- GEMMs ---------------------------------------------------------------------------------------

typedef struct {
    int N, IC, OC;
    int bias_off;  // elements: the bias and dbias vectors start this far into their allocations
    int act_off;   // elements: inp, out, pre-GELU, dout and dinp likewise (the weights never)
} MatmulCase;

// 1 if CUDA_HOST_CUBLASLT_REFUSE names the epilogue kind (the host runtime then refuses it in
// cublasLtMatmul; the runtime itself checks the names).
static int knob_names(int kind) {
#ifdef CUDA_HOST
    const char* v = getenv("CUDA_HOST_CUBLASLT_REFUSE");
    const char* name = matmul_epilogue_kind_name(kind);
    const size_t n = strlen(name);
    for (const char* s = v; s && *s;) {
        const char* comma = strchr(s, ',');
        const size_t len = comma ? (size_t)(comma - s) : strlen(s);
        if (len == n && !strncmp(s, name, n)) return 1;
        s = comma ? comma + 1 : s + len;
    }
#else
    (void)kind;
#endif
    return 0;
}

static int aligned16_elems(long elems) { return elems * (long)sizeof(floatX) % 16 == 0; }

// Whether the host runtime's cuBLASLt runs the kind's epilogue for this case (host_cublas.h):
// every matrix, the bias and the aux 16-byte aligned, rows of a multiple of 16 bytes, and the knob
// not naming it. Forward: weight, inp, out, pre-GELU, bias; BGRADB: inp, dout, dweight, and the
// context's scratch vector (aligned); DGELU: weight, dout, dinp, pre-GELU. The GELU epilogues also
// need aux rows (OC forward, IC for DGELU) of a multiple of 8 elements, or the launcher does not
// ask cuBLASLt at all.
static int expect_fused(const MatmulCase* c, int kind) {
    int ok = aligned16_elems(c->IC) && aligned16_elems(c->OC) && aligned16_elems(c->act_off);
    if (kind == MATMUL_EPI_BIAS || kind == MATMUL_EPI_GELU_AUX_BIAS) ok = ok && aligned16_elems(c->bias_off);
    if (kind == MATMUL_EPI_GELU_AUX || kind == MATMUL_EPI_GELU_AUX_BIAS) ok = ok && c->OC % 8 == 0;
    if (kind == MATMUL_EPI_DGELU) ok = ok && c->IC % 8 == 0;
    return ok && !knob_names(kind);
}

// Paths seen per kind over the whole run: [kind][0] fallback, [kind][1] fused.
static long paths_seen[MATMUL_EPILOGUE_KINDS][2];

typedef struct {
    long fused, fallback;
} PathCount;

static PathCount path_count(const MatmulContext* ctx, int kind) {
    PathCount p = {ctx->fused_calls[kind], ctx->fallback_calls[kind]};
    return p;
}

// The path the last call of `kind` took, from the context's counters: checked against the host
// runtime's model, reported on a GPU.
static void check_path(const MatmulContext* ctx, PathCount before, int kind, int want_fused, const char* what) {
    const PathCount now = path_count(ctx, kind);
    const long df = now.fused - before.fused, db = now.fallback - before.fallback;
    const int fused = df == 1 && db == 0, fallback = db == 1 && df == 0;
    const char* took = fused ? "fused" : fallback ? "fallback" : "?";
    if (fused || fallback) paths_seen[kind][fused]++;
#ifdef CUDA_HOST
    check((fused || fallback) && fused == want_fused, "%-58s %s %s (model: %s)", what,
          matmul_epilogue_kind_name(kind), took, want_fused ? "fused" : "fallback");
#else
    check(fused || fallback, "%-58s %s %s (the host model expects %s)", what, matmul_epilogue_kind_name(kind),
          took, want_fused ? "fused" : "fallback");
#endif
}

// Device buffer of n floatX at element offset off into its allocation (*base: what to free).
static floatX* alloc_at(size_t n, int off, floatX** base) {
    *base = alloc_x(n + (size_t)off);
    return *base + off;
}

static void test_matmul(MatmulContext* ctx, const MatmulCase* c) {
    const int N = c->N, IC = c->IC, OC = c->OC;
    char what[200], shape[96];
    if (c->bias_off || c->act_off)
        snprintf(shape, sizeof shape, "N=%d IC=%d OC=%d bias+%d act+%d", N, IC, OC, c->bias_off, c->act_off);
    else
        snprintf(shape, sizeof shape, "N=%d IC=%d OC=%d", N, IC, OC);
    float* inp = random_x((size_t)N * IC, 1.0f);
    float* w = random_x((size_t)OC * IC, 0.5f);
    float* b = random_x(OC, 0.5f);
    floatX *inp_base, *b_base, *out_base, *pre_base;
    floatX* d_inp = alloc_at((size_t)N * IC, c->act_off, &inp_base);
    floatX* d_b = alloc_at(OC, c->bias_off, &b_base);
    floatX* d_out = alloc_at((size_t)N * OC, c->act_off, &out_base);
    floatX* d_pre = alloc_at((size_t)N * OC, c->act_off, &pre_base);
    floatX* d_w = upload_x(w, (size_t)OC * IC);
    put_x(d_inp, inp, (size_t)N * IC);
    put_x(d_b, b, OC);
    float* want = (float*)malloc((size_t)N * OC * sizeof(float));
    float* want_pre = (float*)malloc((size_t)N * OC * sizeof(float));

    // forward, with and without bias
    for (int with_bias = 1; with_bias >= 0; with_bias--) {
        poison(d_out, (size_t)N * OC * sizeof(floatX));
        const PathCount before = path_count(ctx, MATMUL_EPI_BIAS);
        matmul_forward_cuda(ctx, d_out, NULL, d_inp, d_w, with_bias ? d_b : NULL, N, IC, OC, 0);
        matmul_forward(want, inp, w, with_bias ? b : NULL, N, IC, OC);
        float* got = download_x(d_out, (size_t)N * OC);
        snprintf(what, sizeof what, "matmul fwd %s %s", with_bias ? "+bias" : "no bias", shape);
        check_err(what, rel_err(got, want, (size_t)N * OC), &B_MATMUL);
        snprintf(what, sizeof what, "matmul fwd %s %s: path", with_bias ? "+bias" : "no bias", shape);
        if (with_bias) check_path(ctx, before, MATMUL_EPI_BIAS, expect_fused(c, MATMUL_EPI_BIAS), what);
        free(got);
    }
    // forward with the fused GELU: out = gelu(pre), pre = inp @ w^T (+ b)
    for (int with_bias = 1; with_bias >= 0; with_bias--) {
        const int kind = with_bias ? MATMUL_EPI_GELU_AUX_BIAS : MATMUL_EPI_GELU_AUX;
        poison(d_out, (size_t)N * OC * sizeof(floatX));
        poison(d_pre, (size_t)N * OC * sizeof(floatX));
        const PathCount before = path_count(ctx, kind);
        matmul_forward_cuda(ctx, d_out, d_pre, d_inp, d_w, with_bias ? d_b : NULL, N, IC, OC, 0);
        matmul_forward(want_pre, inp, w, with_bias ? b : NULL, N, IC, OC);
        gelu_forward(want, want_pre, (long)N * OC);
        float *got = download_x(d_out, (size_t)N * OC), *got_pre = download_x(d_pre, (size_t)N * OC);
        const char* label = with_bias ? "+bias+GELU" : "+GELU";
        snprintf(what, sizeof what, "matmul fwd %s %s: pre-GELU", label, shape);
        check_err(what, rel_err(got_pre, want_pre, (size_t)N * OC), &B_MATMUL);
        snprintf(what, sizeof what, "matmul fwd %s %s: GELU out", label, shape);
        check_err(what, rel_err(got, want, (size_t)N * OC), &B_MATMUL);
        snprintf(what, sizeof what, "matmul fwd %s %s: path", label, shape);
        check_path(ctx, before, kind, expect_fused(c, kind), what);
        free(got), free(got_pre);
    }

    // backward: accumulates into non-zero gradients
    float* dout = random_x((size_t)N * OC, 1.0f);
    float* dinp0 = random_x((size_t)N * IC, 1.0f);
    float* dw0 = random_x((size_t)OC * IC, 1.0f);
    float* db0 = random_x(OC, 1.0f);
    floatX *dout_base, *dinp_base, *db_base;
    floatX* d_dout = alloc_at((size_t)N * OC, c->act_off, &dout_base);
    floatX* d_dinp = alloc_at((size_t)N * IC, c->act_off, &dinp_base);
    floatX* d_db = alloc_at(OC, c->bias_off, &db_base);
    floatX* d_dw = alloc_x((size_t)OC * IC);
    put_x(d_dout, dout, (size_t)N * OC);
    float *dinp = copy_of(dinp0, (size_t)N * IC), *dw = copy_of(dw0, (size_t)OC * IC), *db = copy_of(db0, OC);
    matmul_backward(dinp, dw, db, dout, inp, w, N, IC, OC, GRAD_ACCUMULATE);
    static const char* const mode_name[3] = {"BGRADB", "column-sum kernel", "separate calls"};
    for (int mode = 0; mode < 3; mode++) {
        put_x(d_dinp, dinp0, (size_t)N * IC);
        put_x(d_dw, dw0, (size_t)OC * IC);
        put_x(d_db, db0, OC);
        poison(ctx->dbias_scratch, (size_t)ctx->max_bias_oc * sizeof(floatX));
        poison(ctx->dbias_partial, (size_t)MATMUL_DBIAS_MAX_CHUNKS * ctx->max_bias_oc * sizeof(float));
        ctx->use_bgradb = mode == 0;
        const PathCount before = path_count(ctx, MATMUL_EPI_BGRADB);
        if (mode < 2) {
            matmul_backward_cuda(ctx, d_dinp, d_dw, d_db, d_dout, d_inp, d_w, NULL, N, IC, OC, 1, 1, 0);
        } else {  // dinp + dbias without dweight (column sums), then dweight alone
            matmul_backward_cuda(ctx, d_dinp, NULL, d_db, d_dout, d_inp, d_w, NULL, N, IC, OC, 1, 1, 0);
            matmul_backward_cuda(ctx, NULL, d_dw, NULL, d_dout, d_inp, d_w, NULL, N, IC, OC, 1, 1, 0);
        }
        float *g_dinp = download_x(d_dinp, (size_t)N * IC), *g_dw = download_x(d_dw, (size_t)OC * IC),
              *g_db = download_x(d_db, OC);
        snprintf(what, sizeof what, "matmul bwd (%s) %s: dinp", mode_name[mode], shape);
        check_err(what, rel_err(g_dinp, dinp, (size_t)N * IC), &B_MATMUL);
        snprintf(what, sizeof what, "matmul bwd (%s) %s: dweight", mode_name[mode], shape);
        check_err(what, rel_err(g_dw, dw, (size_t)OC * IC), &B_MATMUL);
        snprintf(what, sizeof what, "matmul bwd (%s) %s: dbias", mode_name[mode], shape);
        check_err(what, rel_err(g_db, db, OC), &B_MATMUL);
        snprintf(what, sizeof what, "matmul bwd (%s) %s: path", mode_name[mode], shape);
        if (mode == 0) check_path(ctx, before, MATMUL_EPI_BGRADB, expect_fused(c, MATMUL_EPI_BGRADB), what);
        free(g_dinp), free(g_dw), free(g_db);
    }
    ctx->use_bgradb = 1;

    // backward that overwrites dinp (beta = 0), plain and through the GELU gradient (DGELU with the
    // pre-GELU (N, IC) as aux): dinp starts as NaN on both sides, so a read of it fails the check;
    // dweight and dbias accumulate, or with GRAD_WRITE (first micro-batch) start as NaN too and are
    // written: by the beta-0 GEMM and BGRADB straight into dbias, or the column sums (use_bgradb 0).
    static const char* const overwrite_name[6] = {"overwrite", "DGELU", "overwrite, column sums",
                                                  "overwrite, grads written", "DGELU, grads written",
                                                  "overwrite, column sums, grads written"};
    float* pre = random_x((size_t)N * IC, 2.0f);
    floatX* pre_in_base;
    floatX* d_pre_in = alloc_at((size_t)N * IC, c->act_off, &pre_in_base);
    put_x(d_pre_in, pre, (size_t)N * IC);
    for (int v = 0; v < 6; v++) {
        const int gelu = v % 3 == 1, write = v >= 3;
        const GradMode gm = write ? GRAD_WRITE : GRAD_ACCUMULATE;
        const char* label = overwrite_name[v];
        ctx->use_bgradb = v % 3 != 2;
        for (size_t i = 0; i < (size_t)N * IC; i++) dinp[i] = NAN;
        memcpy(dw, dw0, (size_t)OC * IC * sizeof(float));
        memcpy(db, db0, OC * sizeof(float));
        if (write) {
            for (size_t i = 0; i < (size_t)OC * IC; i++) dw[i] = NAN;
            for (int i = 0; i < OC; i++) db[i] = NAN;
        }
        if (gelu) matmul_backward_gelu(dinp, dw, db, dout, inp, pre, w, N, IC, OC, gm);
        else matmul_backward_overwrite(dinp, dw, db, dout, inp, w, N, IC, OC, gm);
        poison(d_dinp, (size_t)N * IC * sizeof(floatX));
        put_x(d_dw, dw0, (size_t)OC * IC);
        put_x(d_db, db0, OC);
        if (write) {
            poison(d_dw, (size_t)OC * IC * sizeof(floatX));
            poison(d_db, (size_t)OC * sizeof(floatX));
        }
        const PathCount before = path_count(ctx, MATMUL_EPI_DGELU);
        matmul_backward_cuda(ctx, d_dinp, d_dw, d_db, d_dout, d_inp, d_w, gelu ? d_pre_in : NULL, N, IC, OC, 0,
                             !write, 0);
        float *g_dinp = download_x(d_dinp, (size_t)N * IC), *g_dw = download_x(d_dw, (size_t)OC * IC),
              *g_db = download_x(d_db, OC);
        snprintf(what, sizeof what, "matmul bwd (%s) %s: dinp", label, shape);
        check_err(what, rel_err(g_dinp, dinp, (size_t)N * IC), &B_MATMUL);
        snprintf(what, sizeof what, "matmul bwd (%s) %s: dweight", label, shape);
        check_err(what, rel_err(g_dw, dw, (size_t)OC * IC), &B_MATMUL);
        snprintf(what, sizeof what, "matmul bwd (%s) %s: dbias", label, shape);
        check_err(what, rel_err(g_db, db, OC), &B_MATMUL);
        snprintf(what, sizeof what, "matmul bwd (%s) %s: path", label, shape);
        if (gelu) check_path(ctx, before, MATMUL_EPI_DGELU, expect_fused(c, MATMUL_EPI_DGELU), what);
        free(g_dinp), free(g_dw), free(g_db);
    }
    ctx->use_bgradb = 1;

    free(inp), free(w), free(b), free(want), free(want_pre), free(dout), free(dinp0), free(dw0), free(db0);
    free(dinp), free(dw), free(db), free(pre);
    floatX* bufs[] = {inp_base, d_w, b_base, out_base, pre_base, dout_base, dinp_base, d_dw, db_base, pre_in_base};
    for (floatX* p : bufs) CUDA_CHECK(cudaFree(p));
}

// Every case, then the first again: its plans (refused ones included) come from the cache.
static void test_matmul_cases(const MatmulCase* cases, int n) {
    MatmulContext ctx;
    matmul_context_init(&ctx, 1 << 20, 264);
    for (int i = 0; i < n; i++) test_matmul(&ctx, &cases[i]);
    const int plans = ctx.num_plans;
    const long refusals = ctx.refusals;
    test_matmul(&ctx, &cases[0]);
    check(ctx.num_plans == plans && ctx.refusals == refusals, "matmul plan cache: %d plans, %ld refusals; a "
          "repeated case adds no plan and asks cuBLASLt nothing it refused", plans, refusals);
    matmul_context_destroy(&ctx);
#ifdef CUDA_HOST
    // Both paths of every epilogue ran (the fast path stays tested), unless the knob refuses it.
    for (int k = 0; k < MATMUL_EPILOGUE_KINDS; k++) {
        if (knob_names(k))
            check(paths_seen[k][1] == 0 && paths_seen[k][0] > 0, "%s refused by CUDA_HOST_CUBLASLT_REFUSE: %ld "
                  "fallback calls, no fused one", matmul_epilogue_kind_name(k), paths_seen[k][0]);
        else
            check(paths_seen[k][1] > 0 && paths_seen[k][0] > 0, "%s: %ld fused calls (aligned cases), %ld fallback "
                  "calls (refused cases)", matmul_epilogue_kind_name(k), paths_seen[k][1], paths_seen[k][0]);
    }
#else
    for (int k = 0; k < MATMUL_EPILOGUE_KINDS; k++)
        printf("info %s: %ld fused calls, %ld fallback calls\n", matmul_epilogue_kind_name(k), paths_seen[k][1],
               paths_seen[k][0]);
#endif
}

// --- Fused classifier ----------------------------------------------------------------------------

static void test_classifier(int N, int V, int Vp) {
    char what[160];
    const size_t n = (size_t)N * Vp;
    float* logits = (float*)malloc(n * sizeof(float));
    int* targets = (int*)malloc(N * sizeof(int));
    for (int r = 0; r < N; r++) {
        const float offset = (float)(r % 3) * 30.0f - 20.0f;  // large logits: the max must be tracked
        for (int v = 0; v < Vp; v++)
            // a ramp: later chunks of a row raise the running max (padding: NaN, never used)
            logits[(size_t)r * Vp + v] = v < V ? round_x(offset + 4.0f * frand() + 12.0f * v / V) : NAN;
        targets[r] = (int)((rng >> 20) % (uint64_t)V);
        frand();
    }
    targets[0] = V - 1;  // the last real column
    const float dloss = 1.0f / (1.7f * N);
    float* losses = (float*)malloc(N * sizeof(float));
    float* losses2 = (float*)malloc(N * sizeof(float));
    double cpu_sum = 0, cpu_sum2 = 0;
    crossentropy_forward(losses, logits, targets, N, V, Vp, &cpu_sum);
    float* dlogits = copy_of(logits, n);
    crossentropy_forward_backward(dlogits, losses2, targets, dloss, N, V, Vp, &cpu_sum2,
                                  (ZLoss){0, NULL, NULL});

    floatX* d_logits = upload_x(logits, n);
    int* d_targets;
    CUDA_CHECK(cudaMalloc(&d_targets, N * sizeof(int)));
    CUDA_CHECK(cudaMemcpy(d_targets, targets, N * sizeof(int), cudaMemcpyHostToDevice));
    float* d_losses;
    CUDA_CHECK(cudaMalloc(&d_losses, N * sizeof(float)));

    // losses only: the logits stay as they are
    poison(d_losses, N * sizeof(float));
    classifier_forward_backward_cuda(d_logits, d_losses, d_targets, dloss, N, V, Vp, 0, 0.0f, NULL, 0);
    float* got_losses = download_f(d_losses, N);
    float* same = download_x(d_logits, n);
    snprintf(what, sizeof what, "classifier N=%d V=%d Vp=%d: losses (no dlogits)", N, V, Vp);
    check_err(what, rel_err(got_losses, losses, N), &B_LOSS);
    check(same_values(same, logits, n), "classifier N=%d V=%d Vp=%d: logits untouched without dlogits", N, V, Vp);
    free(got_losses), free(same);

    // losses and dlogits in place
    poison(d_losses, N * sizeof(float));
    classifier_forward_backward_cuda(d_logits, d_losses, d_targets, dloss, N, V, Vp, 1, 0.0f, NULL, 0);
    got_losses = download_f(d_losses, N);
    float* got = download_x(d_logits, n);
    snprintf(what, sizeof what, "classifier N=%d V=%d Vp=%d: losses", N, V, Vp);
    check_err(what, rel_err(got_losses, losses, N), &B_LOSS);
    snprintf(what, sizeof what, "classifier N=%d V=%d Vp=%d: dlogits (0 on padding)", N, V, Vp);
    check_err(what, rel_err(got, dlogits, n), &B_DLOGITS);

    // The losses' sum on the device, ADDED to what the accumulator holds, against the CPU's sum
    // of the same values in row order (double: a different order changes the last bits only), and
    // bitwise the same when repeated. And the CPU twins: crossentropy_forward_backward's losses and
    // sum are crossentropy_forward's.
    double *d_sum, got_sum[2];
    CUDA_CHECK(cudaMalloc(&d_sum, sizeof(double)));
    double want_sum = 0.25;
    for (int r = 0; r < N; r++) want_sum += got_losses[r];
    for (int rep = 0; rep < 2; rep++) {
        const double start = 0.25;
        CUDA_CHECK(cudaMemcpy(d_sum, &start, sizeof(double), cudaMemcpyHostToDevice));
        loss_sum_cuda(d_sum, d_losses, N, 0);
        CUDA_CHECK(cudaMemcpy(&got_sum[rep], d_sum, sizeof(double), cudaMemcpyDeviceToHost));
    }
    check(fabs(got_sum[0] - want_sum) <= 1e-12 * fabs(want_sum) &&
              memcmp(&got_sum[0], &got_sum[1], sizeof(double)) == 0,
          "loss sum N=%d: 0.25 + %.17g on the device (host, row order: %.17g), bitwise repeatable", N,
          got_sum[0] - 0.25, want_sum - 0.25);
    check(cpu_sum == cpu_sum2 && memcmp(losses, losses2, N * sizeof(float)) == 0,
          "crossentropy_forward_backward (CPU) N=%d: the losses and sum of crossentropy_forward", N);
    CUDA_CHECK(cudaFree(d_sum));
    free(got_losses), free(got);

    // Under the z-loss (coefficient 1e-2: these rows' lse reach ~50, so the softmax's factor
    // 1 + 2 c lse reaches 2): the per-row z-losses and dlogits against the CPU twin's, the losses
    // unchanged, the z-losses' sum in row order; without the coefficient's factor the dlogits
    // would miss by half (far outside the bound).
    const float zc = 1e-2f;
    float* zl = (float*)malloc(N * sizeof(float));
    float* zdlogits = copy_of(logits, n);
    double cpu_z = 0.5, cpu_sum3 = 0;
    crossentropy_forward_backward(zdlogits, losses2, targets, dloss, N, V, Vp, &cpu_sum3,
                                  (ZLoss){zc, zl, &cpu_z});
    double zl_sum = 0.5;
    for (int r = 0; r < N; r++) zl_sum += zl[r];
    check(cpu_sum3 == cpu_sum && memcmp(losses, losses2, N * sizeof(float)) == 0 && cpu_z == zl_sum,
          "crossentropy_forward_backward (CPU) N=%d under the z-loss: the same losses and sum, the "
          "z-losses' sum in row order", N);
    floatX* d_zlogits = upload_x(logits, n);
    float* d_z;
    CUDA_CHECK(cudaMalloc(&d_z, N * sizeof(float)));
    poison(d_losses, N * sizeof(float));
    poison(d_z, N * sizeof(float));
    classifier_forward_backward_cuda(d_zlogits, d_losses, d_targets, dloss, N, V, Vp, 1, zc, d_z, 0);
    got_losses = download_f(d_losses, N);
    float* got_z = download_f(d_z, N);
    got = download_x(d_zlogits, n);
    snprintf(what, sizeof what, "classifier N=%d V=%d Vp=%d z-loss 1e-2: losses", N, V, Vp);
    check_err(what, rel_err(got_losses, losses, N), &B_LOSS);
    snprintf(what, sizeof what, "classifier N=%d V=%d Vp=%d z-loss 1e-2: z-losses", N, V, Vp);
    check_err(what, rel_err(got_z, zl, N), &B_LOSS);
    snprintf(what, sizeof what, "classifier N=%d V=%d Vp=%d z-loss 1e-2: dlogits", N, V, Vp);
    check_err(what, rel_err(got, zdlogits, n), &B_DLOGITS);
    free(got_losses), free(got_z), free(got), free(zl), free(zdlogits);
    CUDA_CHECK(cudaFree(d_zlogits)), CUDA_CHECK(cudaFree(d_z));

    free(logits), free(targets), free(losses), free(losses2), free(dlogits);
    CUDA_CHECK(cudaFree(d_logits)), CUDA_CHECK(cudaFree(d_targets)), CUDA_CHECK(cudaFree(d_losses));
}

// --- AdamW ---------------------------------------------------------------------------------------

// The bf16 neighbours of x: *lo rounds toward zero, *hi is the next value away from zero.
static void bf16_bracket(float x, float* lo, float* hi) {
    uint32_t b;
    memcpy(&b, &x, 4);
    uint32_t l = b & 0xffff0000u, h = l + 0x10000u;
    memcpy(lo, &l, 4);
    memcpy(hi, &h, 4);
}

// AdamW on a tiny GPT's parameter vector over [begin, end), 3 steps, against adamw_update.
static void test_adamw(const GPTConfig* cfg, size_t begin, size_t end, int use_master) {
    char what[200];
    const size_t n = gpt_num_params(cfg), ns = end - begin;
    size_t sizes[NUM_PARAM_TENSORS];
    int decays[NUM_PARAM_TENSORS];
    gpt_param_sizes(cfg, sizes);
    for (int k = 0; k < NUM_PARAM_TENSORS; k++) decays[k] = gpt_param_decays(k);
    const AdamWTensorTable table = adamw_tensor_table(sizes, decays, NUM_PARAM_TENSORS);
    AdamWConfig opt = {0.9, 0.95, 1e-8, 0.1};
    const double lr = 1e-2, grad_scale = 0.7;
    const unsigned long long seed = 1234;

    float* master0 = (float*)malloc(n * sizeof(float));
    for (size_t i = 0; i < n; i++) master0[i] = 0.5f * frand();
    // Without a master copy the parameters themselves are the state: start from floatX values.
    if (!use_master)
        for (size_t i = 0; i < n; i++) master0[i] = round_x(master0[i]);
    float* cpu_p = copy_of(master0, n);
    float* cpu_m = (float*)calloc(ns ? ns : 1, sizeof(float));
    float* cpu_v = (float*)calloc(ns ? ns : 1, sizeof(float));
    floatX* d_params = upload_x(master0, n);
    float* params0 = download_x(d_params, n);
    float* d_master = use_master ? upload_f(master0 + begin, ns) : NULL;
    float *d_m = upload_f(cpu_m, ns), *d_v = upload_f(cpu_v, ns);
    floatX* d_grads = alloc_x(n);
    double* d_scale;   // the clip factor, read by the kernel from device memory
    CUDA_CHECK(cudaMalloc(&d_scale, sizeof(double)));
    CUDA_CHECK(cudaMemcpy(d_scale, &grad_scale, sizeof(double), cudaMemcpyHostToDevice));
    const int steps = use_master ? 3 : 1;
    for (int t = 1; t <= steps; t++) {
        float* grads = random_x(n, 1.0f);
        put_x(d_grads, grads, n);
        if (use_master) {  // the parameters in range are pure outputs: poison them
            float* cur = download_x(d_params, n);
            for (size_t i = begin; i < end; i++) cur[i] = NAN;
            put_x(d_params, cur, n);
            free(cur);
        }
        adamw_update(cfg, cpu_p, grads, cpu_m, cpu_v, begin, end, t, lr, &opt, grad_scale);
        adamw_update_cuda(d_params, d_master, d_grads, d_m, d_v, begin, end, &table, t, lr, opt.beta1,
                          opt.beta2, opt.eps, opt.weight_decay, d_scale, seed, 0);
        free(grads);
    }
    float* got_p = download_x(d_params, n);
    float *got_m = download_f(d_m, ns), *got_v = download_f(d_v, ns);
    float* got_master = use_master ? download_f(d_master, ns) : copy_of(got_p + begin, ns);
    snprintf(what, sizeof what, "adamw [%zu, %zu) of %zu%s, %d step(s): m", begin, end, n,
             use_master ? "" : " (no master)", steps);
    check_err(what, rel_err(got_m, cpu_m, ns), &B_ADAMW);
    snprintf(what, sizeof what, "adamw [%zu, %zu) of %zu%s, %d step(s): v", begin, end, n,
             use_master ? "" : " (no master)", steps);
    check_err(what, rel_err(got_v, cpu_v, ns), &B_ADAMW);
    // With a master copy (or fp32 storage) the fp32 result matches tightly; without a master copy
    // in bf16 the parameter is the CPU value rounded to a neighbour (checked below).
    if (use_master || sizeof(floatX) == sizeof(float)) {
        snprintf(what, sizeof what, "adamw [%zu, %zu) of %zu%s, %d step(s): fp32 master weights", begin,
                 end, n, use_master ? "" : " (no master)", steps);
        check_err(what, rel_err(got_master, cpu_p + begin, ns), &B_ADAMW);
    }
    // Parameters: a floatX neighbour of the master value (bf16: one of the two bracketing values;
    // fp32: equal); outside [begin, end): untouched.
    size_t bad = 0, outside_changed = 0;
    for (size_t i = 0; i < n; i++) {
        if (i < begin || i >= end) {
            outside_changed += got_p[i] != params0[i];
            continue;
        }
        const float ref = use_master ? got_master[i - begin] : cpu_p[i];
        if (sizeof(floatX) == sizeof(float)) {
            bad += use_master ? got_p[i] != ref : fabsf(got_p[i] - ref) > 1e-5f * (fabsf(ref) + 1e-3f);
        } else {
            float lo, hi;
            bf16_bracket(ref, &lo, &hi);
            const float tol = use_master ? 0.0f : 1e-3f * fabsf(hi - lo);  // CPU vs GPU fp32 last bits
            bad += !(fabsf(got_p[i] - lo) <= tol || fabsf(got_p[i] - hi) <= tol);
        }
    }
    snprintf(what, sizeof what, "adamw [%zu, %zu)%s: params are the master rounded to a floatX neighbour", begin,
             end, use_master ? "" : " (no master)");
    check(bad == 0, "%-74s (%zu bad)", what, bad);
    snprintf(what, sizeof what, "adamw [%zu, %zu): parameters outside the range untouched", begin, end);
    check(outside_changed == 0, "%-74s (%zu changed)", what, outside_changed);

    // A dropped step (grad_scale OPTIMIZER_SKIP: the loss or the norm was not finite): with NaN
    // gradients, parameters, master weights and moments stay bit for bit, on both backends.
    const double skip = OPTIMIZER_SKIP;
    CUDA_CHECK(cudaMemcpy(d_scale, &skip, sizeof(double), cudaMemcpyHostToDevice));
    float* nan_grads = (float*)malloc(n * sizeof(float));
    for (size_t i = 0; i < n; i++) nan_grads[i] = NAN;
    put_x(d_grads, nan_grads, n);
    float* cpu_before = copy_of(cpu_p, n);
    adamw_update(cfg, cpu_p, nan_grads, cpu_m, cpu_v, begin, end, steps + 1, lr, &opt, skip);
    adamw_update_cuda(d_params, d_master, d_grads, d_m, d_v, begin, end, &table, steps + 1, lr,
                      opt.beta1, opt.beta2, opt.eps, opt.weight_decay, d_scale, seed, 0);
    float* skip_p = download_x(d_params, n);
    float *skip_m = download_f(d_m, ns), *skip_v = download_f(d_v, ns);
    float* skip_master = use_master ? download_f(d_master, ns) : copy_of(skip_p + begin, ns);
    snprintf(what, sizeof what, "adamw [%zu, %zu)%s: a skipped step (NaN gradients) changes nothing",
             begin, end, use_master ? "" : " (no master)");
    check(!memcmp(skip_p, got_p, n * sizeof(float)) && !memcmp(skip_m, got_m, ns * sizeof(float)) &&
              !memcmp(skip_v, got_v, ns * sizeof(float)) &&
              !memcmp(skip_master, got_master, ns * sizeof(float)) &&
              !memcmp(cpu_before, cpu_p, n * sizeof(float)),
          "%s", what);
    free(nan_grads), free(cpu_before), free(skip_p), free(skip_m), free(skip_v), free(skip_master);

    free(master0), free(cpu_p), free(cpu_m), free(cpu_v), free(params0), free(got_p), free(got_m);
    free(got_v), free(got_master);
    CUDA_CHECK(cudaFree(d_params)), CUDA_CHECK(cudaFree(d_m)), CUDA_CHECK(cudaFree(d_v));
    CUDA_CHECK(cudaFree(d_grads)), CUDA_CHECK(cudaFree(d_scale));
    if (d_master) CUDA_CHECK(cudaFree(d_master));
}

// Stochastic rounding: with lr = 0 and zero gradients the master stays x, and the bf16 copy must
// round up with probability frac(x) (in ulps), differently at every step and for every element.
static void test_stochastic_rounding(void) {
    if (sizeof(floatX) == sizeof(float)) {
        printf("skip stochastic rounding: fp32 storage does not round\n");
        return;
    }
    const size_t n = 1 << 16, half = n / 2;
    const float x1 = 1.0f + (77.0f / 256.0f) * 0x1p-7f;     // 0.30078 ulp above a bf16 value
    const float x2 = -(3.0f + (200.0f / 256.0f) * 0x1p-6f);  // 0.78125 ulp above (in magnitude)
    const double f1 = 77.0 / 256.0, f2 = 200.0 / 256.0;
    float* master = (float*)malloc(n * sizeof(float));
    for (size_t i = 0; i < n; i++) master[i] = i < half ? x1 : x2;
    float* zeros = (float*)calloc(n, sizeof(float));
    float *d_master = upload_f(master, n), *d_m = upload_f(zeros, n), *d_v = upload_f(zeros, n);
    floatX *d_params = alloc_x(n), *d_grads = upload_x(zeros, n);
    const size_t size = n;
    const int decays = 1;
    const AdamWTensorTable table = adamw_tensor_table(&size, &decays, 1);
    float* prev = NULL;
    for (int t = 1; t <= 2; t++) {
        poison(d_params, n * sizeof(floatX));
        adamw_update_cuda(d_params, d_master, d_grads, d_m, d_v, 0, n, &table, t, 0.0, 0.9, 0.95, 1e-8, 0.1,
                          NULL, 42, 0);
        float* p = download_x(d_params, n);
        float* mst = download_f(d_master, n);
        size_t up1 = 0, up2 = 0, other = 0, same_as_prev = 0, same_as_next = 0;
        for (size_t i = 0; i < n; i++) {
            float lo, hi;
            bf16_bracket(master[i], &lo, &hi);
            if (p[i] == hi) (i < half ? up1 : up2)++;
            else if (p[i] != lo) other++;
            if (prev) same_as_prev += p[i] == prev[i];
            if (i + 1 < half) same_as_next += p[i] == p[i + 1];
        }
        const double r1 = (double)up1 / half, r2 = (double)up2 / half;
        check(memcmp(mst, master, n * sizeof(float)) == 0 && other == 0,
              "SR step %d: master unchanged (lr 0), every bf16 value one of the two neighbours", t);
        check(fabs(r1 - f1) < 0.012, "SR step %d: x = 1+0.3008 ulp rounds up with p %.4f (want %.4f); mean "
              "error %+.4f ulp", t, r1, f1, r1 - f1);
        check(fabs(r2 - f2) < 0.012, "SR step %d: x = -(3+0.7813 ulp) rounds away from 0 with p %.4f (want "
              "%.4f); mean error %+.4f ulp", t, r2, f2, r2 - f2);
        // independent decisions: neighbours agree with probability f^2 + (1-f)^2 = 0.58, not 1
        const double agree_next = (double)same_as_next / (half - 1);
        check(fabs(agree_next - (f1 * f1 + (1 - f1) * (1 - f1))) < 0.02,
              "SR step %d: neighbouring elements agree with p %.4f (independent: %.4f)", t, agree_next,
              f1 * f1 + (1 - f1) * (1 - f1));
        if (prev) {
            const double agree = (double)same_as_prev / n;
            const double want = 0.5 * (f1 * f1 + (1 - f1) * (1 - f1)) + 0.5 * (f2 * f2 + (1 - f2) * (1 - f2));
            check(fabs(agree - want) < 0.02, "SR: steps 1 and 2 agree with p %.4f (independent: %.4f)", agree,
                  want);
        }
        free(prev);
        prev = p;
        free(mst);
    }
    free(prev), free(master), free(zeros);
    CUDA_CHECK(cudaFree(d_master)), CUDA_CHECK(cudaFree(d_m)), CUDA_CHECK(cudaFree(d_v));
    CUDA_CHECK(cudaFree(d_params)), CUDA_CHECK(cudaFree(d_grads));
}

// --- Global norm ---------------------------------------------------------------------------------

static void test_global_norm(size_t n, size_t misalign) {
    char what[160];
    float* g = random_x(n + misalign, 1.0f);
    floatX* d_g = upload_x(g, n + misalign);
    double *d_out, *d_scratch;
    CUDA_CHECK(cudaMalloc(&d_out, sizeof(double)));
    CUDA_CHECK(cudaMalloc(&d_scratch, GLOBAL_NORM_MAX_BLOCKS * sizeof(double)));
    const double want = grad_sum_squares(g + misalign, n);
    double got[2];
    for (int rep = 0; rep < 2; rep++) {
        poison(d_out, sizeof(double));
        poison(d_scratch, GLOBAL_NORM_MAX_BLOCKS * sizeof(double));
        global_norm_squared_cuda(d_out, d_g + misalign, n, d_scratch, 0, 0);
        CUDA_CHECK(cudaMemcpy(&got[rep], d_out, sizeof(double), cudaMemcpyDeviceToHost));
    }
    const double err = fabs(got[0] - want) / want;
    snprintf(what, sizeof what, "global norm^2 n=%zu%s: %.6g vs %.6g", n, misalign ? " (unaligned)" : "", got[0], want);
    check_err(what, err == err ? err : INFINITY, &B_NORM);
    check(memcmp(&got[0], &got[1], sizeof(double)) == 0, "global norm^2 n=%zu: bitwise equal on a second run", n);
    // two halves with accumulate
    const size_t h = n / 2;
    poison(d_out, sizeof(double));
    global_norm_squared_cuda(d_out, d_g + misalign, h, d_scratch, 0, 0);
    global_norm_squared_cuda(d_out, d_g + misalign + h, n - h, d_scratch, 1, 0);
    double acc;
    CUDA_CHECK(cudaMemcpy(&acc, d_out, sizeof(double), cudaMemcpyDeviceToHost));
    snprintf(what, sizeof what, "global norm^2 n=%zu as two accumulated halves", n);
    const double acc_err = fabs(acc - want) / want;
    check_err(what, acc_err == acc_err ? acc_err : INFINITY, &B_NORM);
    // The fp32 form (the master weights' norm, --log-params-norm) on fp32 values not rounded to
    // the storage type: 4 squares per 16-byte load, or one by one when misaligned.
    float* f = (float*)malloc((n + misalign) * sizeof(float));
    for (size_t i = 0; i < n + misalign; i++) f[i] = frand();
    float* d_f;
    CUDA_CHECK(cudaMalloc(&d_f, (n + misalign) * sizeof(float)));
    CUDA_CHECK(cudaMemcpy(d_f, f, (n + misalign) * sizeof(float), cudaMemcpyHostToDevice));
    const float* exact = f + misalign;
    double want_f = 0;
    for (size_t i = 0; i < n; i++) want_f += (double)exact[i] * exact[i];
    double got_f[2];
    for (int rep = 0; rep < 2; rep++) {
        poison(d_out, sizeof(double));
        global_norm_squared_f32_cuda(d_out, d_f + misalign, n, d_scratch, 0, 0);
        CUDA_CHECK(cudaMemcpy(&got_f[rep], d_out, sizeof(double), cudaMemcpyDeviceToHost));
    }
    const double err_f = fabs(got_f[0] - want_f) / want_f;
    snprintf(what, sizeof what, "global norm^2 of fp32 n=%zu%s: %.6g vs %.6g", n,
             misalign ? " (unaligned)" : "", got_f[0], want_f);
    check_err(what, err_f == err_f ? err_f : INFINITY, &B_NORM);
    check(memcmp(&got_f[0], &got_f[1], sizeof(double)) == 0,
          "global norm^2 of fp32 n=%zu: bitwise equal on a second run", n);
    CUDA_CHECK(cudaFree(d_f));
    free(f);
    // The clip factor on the device: bitwise the host's clip_factor(sqrt(sum), max) of the same
    // sum, clipping (max below the norm), not clipping, and off (max 0).
    double* d_scale;
    CUDA_CHECK(cudaMalloc(&d_scale, sizeof(double)));
    const double max_norms[3] = {0.5 * sqrt(got[0]), 2.0 * sqrt(got[0]) + 1.0, 0.0};
    for (int k = 0; k < 3; k++) {
        poison(d_scale, sizeof(double));
        clip_scale_cuda(d_scale, NULL, d_out, max_norms[k], INFINITY, INFINITY, 0);
        double scale, sum;
        CUDA_CHECK(cudaMemcpy(&scale, d_scale, sizeof(double), cudaMemcpyDeviceToHost));
        CUDA_CHECK(cudaMemcpy(&sum, d_out, sizeof(double), cudaMemcpyDeviceToHost));
        const double host = clip_factor(sqrt(sum), max_norms[k]);
        check(memcmp(&scale, &host, sizeof(double)) == 0, "clip factor n=%zu, max %.4g: %.17g on the device, "
              "%.17g on the host", n, max_norms[k], scale, host);
    }
    // A non-finite loss sum or sum of squares, or one above its limit (the loss-spike detector):
    // OPTIMIZER_SKIP on the device as on the host; values at their limits are applied.
    // {loss sum, sum of squares, loss sum limit, sum of squares limit, skipped}
    const double cases[7][5] = {{NAN, 1.0, INFINITY, INFINITY, 1}, {INFINITY, 1.0, INFINITY, INFINITY, 1},
                                {1.0, INFINITY, INFINITY, INFINITY, 1}, {2.5, 1.0, 2.0, INFINITY, 1},
                                {1.0, 4.5, INFINITY, 4.0, 1}, {2.0, 4.0, 2.0, 4.0, 0},
                                {1.0, 1.0, INFINITY, INFINITY, 0}};
    double* d_loss;
    CUDA_CHECK(cudaMalloc(&d_loss, sizeof(double)));
    for (int k = 0; k < 7; k++) {
        const double* c = cases[k];
        CUDA_CHECK(cudaMemcpy(d_loss, &c[0], sizeof(double), cudaMemcpyHostToDevice));
        CUDA_CHECK(cudaMemcpy(d_out, &c[1], sizeof(double), cudaMemcpyHostToDevice));
        clip_scale_cuda(d_scale, d_loss, d_out, 1.0, c[2], c[3], 0);
        double scale;
        CUDA_CHECK(cudaMemcpy(&scale, d_scale, sizeof(double), cudaMemcpyDeviceToHost));
        const double host = step_grad_scale(c[0], c[1], 1.0, (StepLimits){c[2], c[3]});
        const int want = c[4] != 0;
        check((scale == OPTIMIZER_SKIP) == want && (host == OPTIMIZER_SKIP) == want,
              "loss sum %g, sum of squares %g, limits %g and %g: the step is %s (device %g, host %g)",
              c[0], c[1], c[2], c[3], want ? "skipped" : "applied", scale, host);
    }
    CUDA_CHECK(cudaFree(d_loss));
    free(g);
    CUDA_CHECK(cudaFree(d_g)), CUDA_CHECK(cudaFree(d_out)), CUDA_CHECK(cudaFree(d_scratch));
    CUDA_CHECK(cudaFree(d_scale));
}

int main(int argc, char** argv) {
    const bool quick = argc == 2 && !strcmp(argv[1], "--quick");
    if (argc > 1 && !quick) {
        printf("usage: %s [--quick]\n", argv[0]);
        return 2;
    }
    printf("storage: %s; %s bounds matmul %.0e dlogits %.0e loss %.0e adamw %.0e norm %.0e\n", FLOATX_NAME,
           bound_column(), bound_limit(&B_MATMUL), bound_limit(&B_DLOGITS), bound_limit(&B_LOSS),
           bound_limit(&B_ADAMW), bound_limit(&B_NORM));
    // Rows of IC = 45 or OC = 45 values are not a multiple of 16 bytes: the host runtime's cuBLASLt
    // refuses the epilogues (fallback with 16-byte vectors where OC allows, scalar otherwise);
    // 128/96 and 40/264 are aligned (fused); the offsets misalign the bias (forward BIAS and
    // GELU_AUX_BIAS refused) or the activations (every epilogue refused, DEFAULT at 2 bytes).
    const MatmulCase cases[] = {{37, 45, 72, 0, 0},  {64, 128, 96, 0, 0}, {19, 24, 45, 0, 0},
                                {130, 40, 264, 0, 0}, {64, 128, 96, 1, 0}, {64, 128, 96, 0, 1},
                                {37, 45, 72, 1, 1}};
    const MatmulCase quick_cases[] = {{64, 128, 96, 0, 0}, {37, 45, 72, 0, 0}, {37, 45, 72, 1, 1}};
    if (quick) test_matmul_cases(quick_cases, sizeof quick_cases / sizeof quick_cases[0]);
    else test_matmul_cases(cases, sizeof cases / sizeof cases[0]);

    if (!quick) test_classifier(37, 333, 384);
    if (!quick) test_classifier(6, 128, 128);
    if (!quick) test_classifier(3, 1001, 1024);
    test_classifier(2, 9000, 9088);  // several 16-byte chunks per thread: the online rescaling

    // max_T, V, Vp, L, NH, C: tensor boundaries off multiples of 8 (every field: -Werror under nvcc)
    GPTConfig cfg = {8, 50, 64, 2, 2, 10, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0};
    const size_t n = gpt_num_params(&cfg);
    test_adamw(&cfg, 0, n, 1);       // everything (16-byte path, partial last group)
    if (!quick) {
        test_adamw(&cfg, 3, n - 5, 1);   // a shard starting off a group boundary (element path)
        test_adamw(&cfg, 16, 2000, 1);   // an aligned shard
        test_adamw(&cfg, 0, n, 0);       // no master copy
        test_stochastic_rounding();
    }

    if (!quick) test_global_norm(1, 0);
    if (!quick) test_global_norm(1000, 0);
    if (!quick) test_global_norm(1001, 0);   // 16-byte loads, then a tail of one
    if (!quick) test_global_norm(100003, 1);
    test_global_norm(300000, 0);
    const Bound bounds[] = {B_MATMUL, B_DLOGITS, B_LOSS, B_ADAMW, B_NORM};
    bounds_report("matmul-" FLOATX_NAME, bounds, 5);
    return test_finish("test_matmul_loss_adamw (" FLOATX_NAME ")");
}
