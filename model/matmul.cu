// GEMM layers through cuBLASLt (declarations and contracts in model/matmul_cuda.cuh).
//
// Row-major (N, C) activations are column-major (C, N) matrices with leading dimension C, so
// with W the (OC, IC) row-major weight (= column-major (IC, OC), i.e. W^T):
//   forward   out^T (OC x N)  = W (OC x IC, transa = T) * inp^T (IC x N)        + bias[row]
//   dinp      dinp^T (IC x N) = W^T (IC x OC)           * dout^T (OC x N)       (beta 1 or 0)
//   dweight   dW^T (IC x OC)  = inp^T (IC x N)          * dout (N x OC, transb = T) (beta 1 or 0)
// and the bias gradient is the sum over k (= N) of op(B) = dout, the BGRADB epilogue of the
// dweight GEMM (or a deterministic two-pass column-sum kernel). The MLP's GELU rides on the GEMMs
// next to it: GELU_AUX_BIAS in fc's forward (pre-GELU to aux), DGELU in fcproj's dinp GEMM (reads
// that aux: pre_gelu^T is IC x N with leading dimension IC, as dinp^T).
//
// Every epilogue has one fallback, taken when cuBLASLt refuses it (its heuristic finds no
// algorithm, or cublasLtMatmul answers CUBLAS_STATUS_NOT_SUPPORTED: a heuristic's success does
// not guarantee the algorithm runs, e.g. for pointers less aligned than it assumed): the same GEMM
// with the DEFAULT epilogue, then our kernels (bias add, bias + GELU, column sums). The refusal is
// remembered in the plan, so the step loop does not ask again.
#include "model/matmul_cuda.cuh"
#include "model/layers_cuda.cuh"   // PackX, gelu_value

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

// --- Plans ---------------------------------------------------------------------------------------

// Everything the heuristic's answer depends on. Plain ints, compared with memcmp.
typedef struct {
    int transa, transb, m, n, k, lda, ldb, ldd;
    int epilogue;
    int align_a, align_b, align_d, align_bias, align_aux;  // bytes, capped at 256
} PlanKey;

enum { PLAN_OK = 0, PLAN_NO_ALGO = 1, PLAN_NOT_SUPPORTED = 2 };

struct MatmulPlan {
    PlanKey key;
    cublasLtMatmulDesc_t desc;
    cublasLtMatrixLayout_t a, b, d;
    cublasLtMatmulAlgo_t algo;
    // PLAN_OK, or why cuBLASLt refused the problem: callers take the fallback without asking again.
    int refused;
};

// One GEMM: D (m x n, ld ldd) = op(A) op(B) + beta * D, with the epilogue's bias and aux.
typedef struct {
    cublasOperation_t transa, transb;
    int m, n, k, lda, ldb, ldd;
    const void *A, *B;
    void* D;
    float beta;
    cublasLtEpilogue_t epilogue;
    void* bias;  // bias (BIAS) or bias gradient (BGRADB)
    void* aux;   // pre-GELU activation (written by GELU_AUX, read by DGELU), leading dimension m
} Gemm;

static int align_of(const void* p) {
    const uintptr_t a = (uintptr_t)p;
    int al = 256;
    while (al > 1 && a % (uintptr_t)al) al >>= 1;
    return al;
}

static int uses_bias(cublasLtEpilogue_t e) {
    return e == CUBLASLT_EPILOGUE_BIAS || e == CUBLASLT_EPILOGUE_GELU_AUX_BIAS ||
           e == CUBLASLT_EPILOGUE_BGRADB;
}
static int uses_aux(cublasLtEpilogue_t e) {
    return e == CUBLASLT_EPILOGUE_GELU_AUX || e == CUBLASLT_EPILOGUE_GELU_AUX_BIAS ||
           e == CUBLASLT_EPILOGUE_DGELU;
}

// The MatmulEpilogueKind of an epilogue other than DEFAULT.
static int kind_of(cublasLtEpilogue_t e) {
    switch (e) {
    case CUBLASLT_EPILOGUE_BIAS: return MATMUL_EPI_BIAS;
    case CUBLASLT_EPILOGUE_GELU_AUX: return MATMUL_EPI_GELU_AUX;
    case CUBLASLT_EPILOGUE_GELU_AUX_BIAS: return MATMUL_EPI_GELU_AUX_BIAS;
    case CUBLASLT_EPILOGUE_DGELU: return MATMUL_EPI_DGELU;
    default: return MATMUL_EPI_BGRADB;
    }
}

const char* matmul_epilogue_kind_name(int kind) {
    static const char* const names[MATMUL_EPILOGUE_KINDS] = {"BIAS", "GELU_AUX", "GELU_AUX_BIAS", "BGRADB",
                                                             "DGELU"};
    return kind >= 0 && kind < MATMUL_EPILOGUE_KINDS ? names[kind] : "?";
}

static PlanKey key_of(const Gemm* g) {
    PlanKey k;
    memset(&k, 0, sizeof k);
    k.transa = (int)g->transa;
    k.transb = (int)g->transb;
    k.m = g->m, k.n = g->n, k.k = g->k;
    k.lda = g->lda, k.ldb = g->ldb, k.ldd = g->ldd;
    k.epilogue = (int)g->epilogue;
    k.align_a = align_of(g->A);
    k.align_b = align_of(g->B);
    k.align_d = align_of(g->D);
    k.align_bias = uses_bias(g->epilogue) ? align_of(g->bias) : 0;
    k.align_aux = uses_aux(g->epilogue) ? align_of(g->aux) : 0;
    return k;
}

// Points the descriptor at this call's bias and aux buffers (the plan was made for buffers of the
// same alignment).
static void set_epilogue_pointers(cublasLtMatmulDesc_t desc, const Gemm* g) {
    if (uses_bias(g->epilogue))
        CUDA_CHECK(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &g->bias,
                                                  sizeof g->bias));
    if (uses_aux(g->epilogue))
        CUDA_CHECK(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER,
                                                  &g->aux, sizeof g->aux));
}

static void destroy_plan(MatmulPlan* p) {
    CUDA_CHECK(cublasLtMatmulDescDestroy(p->desc));
    CUDA_CHECK(cublasLtMatrixLayoutDestroy(p->a));
    CUDA_CHECK(cublasLtMatrixLayoutDestroy(p->b));
    CUDA_CHECK(cublasLtMatrixLayoutDestroy(p->d));
}

// Builds the descriptor, layouts and algorithm for g into p; p->refused = PLAN_NO_ALGO when the
// heuristic has none (found 0, or NOT_SUPPORTED: "no heuristic function available").
static void make_plan(MatmulContext* ctx, const Gemm* g, const PlanKey* key, MatmulPlan* p) {
    memset(p, 0, sizeof *p);
    p->key = *key;
    CUDA_CHECK(cublasLtMatmulDescCreate(&p->desc, CUBLAS_COMPUTE_32F, CUDA_R_32F));
    const int32_t ta = (int32_t)g->transa, tb = (int32_t)g->transb;
    const uint32_t epi = (uint32_t)g->epilogue;
    CUDA_CHECK(cublasLtMatmulDescSetAttribute(p->desc, CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof ta));
    CUDA_CHECK(cublasLtMatmulDescSetAttribute(p->desc, CUBLASLT_MATMUL_DESC_TRANSB, &tb, sizeof tb));
    CUDA_CHECK(cublasLtMatmulDescSetAttribute(p->desc, CUBLASLT_MATMUL_DESC_EPILOGUE, &epi, sizeof epi));
    if (uses_aux(g->epilogue)) {
        const int64_t aux_ld = g->m;
        CUDA_CHECK(cublasLtMatmulDescSetAttribute(p->desc, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD,
                                                  &aux_ld, sizeof aux_ld));
    }
    set_epilogue_pointers(p->desc, g);  // the heuristic reads their alignment
    const int ar = g->transa == CUBLAS_OP_N ? g->m : g->k, ac = g->transa == CUBLAS_OP_N ? g->k : g->m;
    const int br = g->transb == CUBLAS_OP_N ? g->k : g->n, bc = g->transb == CUBLAS_OP_N ? g->n : g->k;
    CUDA_CHECK(cublasLtMatrixLayoutCreate(&p->a, CUDA_R_X, ar, ac, g->lda));
    CUDA_CHECK(cublasLtMatrixLayoutCreate(&p->b, CUDA_R_X, br, bc, g->ldb));
    CUDA_CHECK(cublasLtMatrixLayoutCreate(&p->d, CUDA_R_X, g->m, g->n, g->ldd));

    // The operands' actual alignment (C is D): the heuristic assumes 256 bytes unless told.
    cublasLtMatmulPreference_t pref;
    CUDA_CHECK(cublasLtMatmulPreferenceCreate(&pref));
    const uint64_t ws = ctx->workspace_bytes;
    CUDA_CHECK(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES,
                                                    &ws, sizeof ws));
    const uint32_t al[4] = {(uint32_t)key->align_a, (uint32_t)key->align_b, (uint32_t)key->align_d,
                            (uint32_t)key->align_d};
    CUDA_CHECK(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, &al[0], sizeof al[0]));
    CUDA_CHECK(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, &al[1], sizeof al[1]));
    CUDA_CHECK(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, &al[2], sizeof al[2]));
    CUDA_CHECK(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, &al[3], sizeof al[3]));
    cublasLtMatmulHeuristicResult_t result;
    memset(&result, 0, sizeof result);
    int found = 0;
    const cublasStatus_t st = cublasLtMatmulAlgoGetHeuristic(ctx->lt, p->desc, p->a, p->b, p->d, p->d,
                                                             pref, 1, &result, &found);
    CUDA_CHECK(cublasLtMatmulPreferenceDestroy(pref));
    if (st != CUBLAS_STATUS_NOT_SUPPORTED) cuda_check_at(st, "cublasLtMatmulAlgoGetHeuristic", __FILE__, __LINE__);
    if (st != CUBLAS_STATUS_SUCCESS || found < 1 || result.state != CUBLAS_STATUS_SUCCESS) {
        p->refused = PLAN_NO_ALGO;
        ctx->refusals++;
        return;
    }
    p->algo = result.algo;
}

// The cached plan for g, made on first use.
static MatmulPlan* get_plan(MatmulContext* ctx, const Gemm* g) {
    const PlanKey key = key_of(g);
    for (int i = 0; i < ctx->num_plans; i++) {
        MatmulPlan* p = &ctx->plans[i];
        if (memcmp(&p->key, &key, sizeof key) == 0) {
            if (!p->refused) set_epilogue_pointers(p->desc, g);
            return p;
        }
    }
    int slot;
    if (ctx->num_plans < MATMUL_PLAN_CACHE) {
        slot = ctx->num_plans++;
    } else {  // round-robin eviction (only with more distinct shapes than slots)
        slot = ctx->next_evict;
        ctx->next_evict = (ctx->next_evict + 1) % MATMUL_PLAN_CACHE;
        destroy_plan(&ctx->plans[slot]);
    }
    make_plan(ctx, g, &key, &ctx->plans[slot]);
    return &ctx->plans[slot];
}

// The first refusal of each epilogue kind in this process gets a note.
static void note_fallback(const Gemm* g, int refused) {
    static unsigned noted;
    static const char* const fallback[MATMUL_EPILOGUE_KINDS] = {
        "a DEFAULT GEMM and a bias kernel", "a DEFAULT GEMM into pre-GELU and a GELU kernel",
        "a DEFAULT GEMM into pre-GELU and a bias + GELU kernel", "a DEFAULT GEMM and the column-sum kernel",
        "a DEFAULT GEMM and a GELU-gradient kernel"};
    const int kind = kind_of(g->epilogue);
    if (noted & (1u << kind)) return;
    noted |= 1u << kind;
    fprintf(stderr, "note: cuBLASLt refused the %s epilogue (%s) for m=%d n=%d k=%d (" FLOATX_NAME "); "
            "refused problems use %s from now on (noted once)\n", matmul_epilogue_kind_name(kind),
            refused == PLAN_NO_ALGO ? "the heuristic found no algorithm" : "cublasLtMatmul: CUBLAS_STATUS_NOT_SUPPORTED",
            g->m, g->n, g->k, fallback[kind]);
}

// Runs g with its epilogue: 1 when done, 0 when cuBLASLt refuses it (now or, remembered in the
// plan, before), and the caller must take the fallback. A DEFAULT GEMM has no fallback: its
// refusal ends the job. Errors other than NOT_SUPPORTED end it too.
static int try_gemm(MatmulContext* ctx, const Gemm* g, const char* what, cudaStream_t stream) {
    MatmulPlan* p = get_plan(ctx, g);
    if (!p->refused) {
        const float alpha = 1.0f, beta = g->beta;
        const cublasStatus_t st = cublasLtMatmul(ctx->lt, p->desc, &alpha, g->A, p->a, g->B, p->b, &beta,
                                                 g->D, p->d, g->D, p->d, &p->algo, ctx->workspace,
                                                 ctx->workspace_bytes, stream);
        if (st == CUBLAS_STATUS_SUCCESS) return 1;
        if (st != CUBLAS_STATUS_NOT_SUPPORTED) cuda_check_at(st, "cublasLtMatmul", __FILE__, __LINE__);
        p->refused = PLAN_NOT_SUPPORTED;
        ctx->refusals++;
    }
    if (g->epilogue == CUBLASLT_EPILOGUE_DEFAULT)
        FAIL("run with CUBLASLT_LOG_LEVEL=5 for cuBLASLt's reason; check the shapes and pointer alignment",
             "%s: cuBLASLt %s the DEFAULT GEMM m=%d n=%d k=%d (lda %d, ldb %d, ldd %d; alignment A %d, B %d, "
             "D %d bytes; " FLOATX_NAME ")", what,
             p->refused == PLAN_NO_ALGO ? "found no algorithm for" : "refused (NOT_SUPPORTED)", g->m, g->n,
             g->k, g->lda, g->ldb, g->ldd, p->key.align_a, p->key.align_b, p->key.align_d);
    note_fallback(g, p->refused);
    return 0;
}

// The same GEMM without an epilogue (the fallbacks' first step), into D.
static void run_default_gemm(MatmulContext* ctx, const Gemm* g, void* D, const char* what, cudaStream_t stream) {
    Gemm d = *g;
    d.epilogue = CUBLASLT_EPILOGUE_DEFAULT;
    d.bias = d.aux = NULL;
    d.D = D;
    try_gemm(ctx, &d, what, stream);  // returns only when done
}

// --- Forward fallback kernel ---------------------------------------------------------------------

enum { EPILOGUE_THREADS = 256 };

// The forward fallback's epilogue on the DEFAULT GEMM's output x (n = N * OC values, row length
// OC), in place: x += bias[column] when bias is not NULL, stored in floatX; then, when gelu_out is
// not NULL, gelu_out = gelu(x) computed from the stored x, i.e. from exactly the pre-activation
// that backward reads (a fused epilogue may use its fp32 value; they differ by at most one floatX
// rounding of the input). Thread i handles VEC consecutive values: VEC = X128_ELEMS (16-byte
// accesses) needs OC % VEC == 0 and 16-byte aligned pointers, VEC = 1 nothing.
template <int VEC>
__global__ void matmul_epilogue_kernel(floatX* x, floatX* gelu_out, const floatX* bias, long n, int OC) {
    const long i = ((long)blockIdx.x * blockDim.x + threadIdx.x) * VEC;
    if (i >= n) return;
    PackX<VEC> v = load_packx<VEC>(x + i);
    if (bias) {
        const PackX<VEC> b = load_packx<VEC>(bias + i % OC);
        for (int k = 0; k < VEC; k++) v.v[k] = from_float<floatX>(to_float(v.v[k]) + to_float(b.v[k]));
        store_packx<VEC>(x + i, v);
    }
    if (gelu_out) {
        PackX<VEC> o;
        for (int k = 0; k < VEC; k++) o.v[k] = from_float<floatX>(gelu_value(to_float(v.v[k])));
        store_packx<VEC>(gelu_out + i, o);
    }
}

static void forward_epilogue(floatX* x, floatX* gelu_out, const floatX* bias, int N, int OC,
                             cudaStream_t stream) {
    const long n = (long)N * OC;
    const int vec = OC % X128_ELEMS == 0 && (uintptr_t)x % 16 == 0 && (uintptr_t)gelu_out % 16 == 0 &&
                    (uintptr_t)bias % 16 == 0;
    const long threads = vec ? n / X128_ELEMS : n;
    const unsigned blocks = (unsigned)((threads + EPILOGUE_THREADS - 1) / EPILOGUE_THREADS);
    if (vec) LAUNCH(matmul_epilogue_kernel<X128_ELEMS>, blocks, EPILOGUE_THREADS, 0, stream, x, gelu_out, bias, n, OC);
    else LAUNCH(matmul_epilogue_kernel<1>, blocks, EPILOGUE_THREADS, 0, stream, x, gelu_out, bias, n, OC);
}

// The DGELU fallback's epilogue on the DEFAULT GEMM's output x (dout @ weight, n = N * IC values),
// in place: x *= gelu'(pre_gelu), computed from the stored x (one floatX rounding more than the
// fused epilogue). VEC as above (IC % VEC == 0 and 16-byte aligned x and pre_gelu for X128_ELEMS).
template <int VEC>
__global__ void matmul_dgelu_kernel(floatX* x, const floatX* pre_gelu, long n) {
    const long i = ((long)blockIdx.x * blockDim.x + threadIdx.x) * VEC;
    if (i >= n) return;
    PackX<VEC> v = load_packx<VEC>(x + i);
    const PackX<VEC> p = load_packx<VEC>(pre_gelu + i);
    for (int k = 0; k < VEC; k++) v.v[k] = from_float<floatX>(to_float(v.v[k]) * gelu_grad_value(to_float(p.v[k])));
    store_packx<VEC>(x + i, v);
}

static void dgelu_epilogue(floatX* x, const floatX* pre_gelu, int N, int IC, cudaStream_t stream) {
    const long n = (long)N * IC;
    const int vec = IC % X128_ELEMS == 0 && (uintptr_t)x % 16 == 0 && (uintptr_t)pre_gelu % 16 == 0;
    const long threads = vec ? n / X128_ELEMS : n;
    const unsigned blocks = (unsigned)((threads + EPILOGUE_THREADS - 1) / EPILOGUE_THREADS);
    if (vec) LAUNCH(matmul_dgelu_kernel<X128_ELEMS>, blocks, EPILOGUE_THREADS, 0, stream, x, pre_gelu, n);
    else LAUNCH(matmul_dgelu_kernel<1>, blocks, EPILOGUE_THREADS, 0, stream, x, pre_gelu, n);
}

// --- Bias gradient kernels -----------------------------------------------------------------------

enum { DBIAS_TX = 32, DBIAS_TY = 8, DBIAS_THREADS = DBIAS_TX * DBIAS_TY, DBIAS_COLS = DBIAS_TX * X128_ELEMS };

// partial[chunk][c] = sum of dout[r][c] over the rows r of the chunk (blockIdx.y), in a fixed
// order: thread (tx, ty) sums rows ty, ty + 8, ... of its X128_ELEMS columns, then the 8 row
// phases are added in order. vec: OC is a multiple of X128_ELEMS and dout is 16-byte aligned.
__global__ void __launch_bounds__(DBIAS_THREADS)
    dbias_partial_kernel(float* partial, const floatX* dout, int N, int OC, int rows_per_chunk, int vec) {
    __shared__ float acc_s[DBIAS_TY][DBIAS_COLS];
    const int tx = threadIdx.x, ty = threadIdx.y;
    const int col0 = blockIdx.x * DBIAS_COLS;
    const int c0 = col0 + tx * X128_ELEMS;
    const int r0 = blockIdx.y * rows_per_chunk;
    const int r1 = min(N, r0 + rows_per_chunk);
    float acc[X128_ELEMS];
    for (int k = 0; k < X128_ELEMS; k++) acc[k] = 0.0f;
    if (c0 < OC) {
        for (int r = r0 + ty; r < r1; r += DBIAS_TY) {
            const floatX* row = dout + (size_t)r * OC + c0;
            if (vec) {
                const x128 x = load128(row);
                for (int k = 0; k < X128_ELEMS; k++) acc[k] += to_float(x.v[k]);
            } else {
                for (int k = 0; k < X128_ELEMS; k++)
                    if (c0 + k < OC) acc[k] += to_float(row[k]);
            }
        }
    }
    for (int k = 0; k < X128_ELEMS; k++) acc_s[ty][tx * X128_ELEMS + k] = acc[k];
    __syncthreads();
    for (int j = ty * DBIAS_TX + tx; j < DBIAS_COLS; j += DBIAS_THREADS) {
        float s = 0.0f;
        for (int y = 0; y < DBIAS_TY; y++) s += acc_s[y][j];
        if (col0 + j < OC) partial[(size_t)blockIdx.y * OC + col0 + j] = s;
    }
}

// dbias[c] = (or +=, accumulate) the chunks' partial sums, added in chunk order.
__global__ void dbias_finish_kernel(floatX* dbias, const float* partial, int chunks, int OC, int accumulate) {
    const int c = blockIdx.x * blockDim.x + threadIdx.x;
    if (c >= OC) return;
    float s = 0.0f;
    for (int r = 0; r < chunks; r++) s += partial[(size_t)r * OC + c];
    dbias[c] = from_float<floatX>(accumulate ? to_float(dbias[c]) + s : s);
}

// dbias[c] += src[c] (src: the BGRADB epilogue's output).
__global__ void dbias_add_kernel(floatX* dbias, const floatX* src, int OC) {
    const int c = blockIdx.x * blockDim.x + threadIdx.x;
    if (c < OC) dbias[c] = from_float<floatX>(to_float(dbias[c]) + to_float(src[c]));
}

static void dbias_column_sums(MatmulContext* ctx, floatX* dbias, const floatX* dout, int N, int OC,
                              int accumulate, cudaStream_t stream) {
    int chunks = (N + 31) / 32;
    if (chunks > MATMUL_DBIAS_MAX_CHUNKS) chunks = MATMUL_DBIAS_MAX_CHUNKS;
    const int rows_per_chunk = (N + chunks - 1) / chunks;
    chunks = (N + rows_per_chunk - 1) / rows_per_chunk;
    const int vec = OC % X128_ELEMS == 0 && (uintptr_t)dout % 16 == 0;
    const dim3 grid((OC + DBIAS_COLS - 1) / DBIAS_COLS, chunks), block(DBIAS_TX, DBIAS_TY);
    LAUNCH(dbias_partial_kernel, grid, block, 0, stream, ctx->dbias_partial, dout, N, OC,
           rows_per_chunk, vec);
    LAUNCH(dbias_finish_kernel, (OC + 255) / 256, 256, 0, stream, dbias, (const float*)ctx->dbias_partial,
           chunks, OC, accumulate);
}

// --- Launchers -----------------------------------------------------------------------------------

void matmul_context_init(MatmulContext* ctx, size_t workspace_bytes, int max_bias_oc) {
    memset(ctx, 0, sizeof *ctx);
    CHECK(max_bias_oc >= 0, "caller bug", "matmul_context_init: max_bias_oc %d < 0", max_bias_oc);
    ctx->workspace_bytes = workspace_bytes ? workspace_bytes : (size_t)32 << 20;
    ctx->max_bias_oc = max_bias_oc;
    CUDA_CHECK(cublasLtCreate(&ctx->lt));
    CUDA_CHECK(cudaMalloc(&ctx->workspace, ctx->workspace_bytes));
    const size_t oc = max_bias_oc > 0 ? (size_t)max_bias_oc : 1;
    CUDA_CHECK(cudaMalloc(&ctx->dbias_scratch, oc * sizeof(floatX)));
    CUDA_CHECK(cudaMalloc(&ctx->dbias_partial, MATMUL_DBIAS_MAX_CHUNKS * oc * sizeof(float)));
    ctx->plans = (MatmulPlan*)xcalloc(MATMUL_PLAN_CACHE, sizeof(MatmulPlan), "cuBLASLt plan cache");
    ctx->use_bgradb = 1;
}

void matmul_context_destroy(MatmulContext* ctx) {
    for (int i = 0; i < ctx->num_plans; i++) destroy_plan(&ctx->plans[i]);
    free(ctx->plans);
    CUDA_CHECK(cudaFree(ctx->workspace));
    CUDA_CHECK(cudaFree(ctx->dbias_scratch));
    CUDA_CHECK(cudaFree(ctx->dbias_partial));
    CUDA_CHECK(cublasLtDestroy(ctx->lt));
    memset(ctx, 0, sizeof *ctx);
}

static void check_shape(const char* what, int N, int IC, int OC) {
    CHECK(N >= 0 && IC > 0 && OC > 0, "caller bug", "%s: bad shape N=%d IC=%d OC=%d", what, N, IC, OC);
}

void matmul_forward_cuda(MatmulContext* ctx, floatX* out, floatX* pre_gelu, const floatX* inp,
                         const floatX* weight, const floatX* bias, int N, int IC, int OC,
                         cudaStream_t stream) {
    check_shape("matmul_forward_cuda", N, IC, OC);
    if (N == 0) return;
    Gemm g;
    memset(&g, 0, sizeof g);
    g.transa = CUBLAS_OP_T, g.transb = CUBLAS_OP_N;
    g.m = OC, g.n = N, g.k = IC;
    g.A = weight, g.lda = IC;
    g.B = inp, g.ldb = IC;
    g.D = out, g.ldd = OC;
    g.beta = 0.0f;
    g.bias = (void*)bias;
    g.aux = pre_gelu;
    if (pre_gelu) g.epilogue = bias ? CUBLASLT_EPILOGUE_GELU_AUX_BIAS : CUBLASLT_EPILOGUE_GELU_AUX;
    else g.epilogue = bias ? CUBLASLT_EPILOGUE_BIAS : CUBLASLT_EPILOGUE_DEFAULT;
    const char* what = "matmul_forward_cuda";
    // cuBLASLt's aux leading dimension (OC) must be a multiple of 8: otherwise straight to the fallback.
    const int aux_ld_ok = !pre_gelu || OC % 8 == 0;
    if (aux_ld_ok && try_gemm(ctx, &g, what, stream)) {
        if (g.epilogue != CUBLASLT_EPILOGUE_DEFAULT) ctx->fused_calls[kind_of(g.epilogue)]++;
        return;
    }
    // Fallback: the plain GEMM into the pre-activation (or out), then bias and GELU in one pass.
    ctx->fallback_calls[kind_of(g.epilogue)]++;
    floatX* x = pre_gelu ? pre_gelu : out;
    run_default_gemm(ctx, &g, x, what, stream);
    forward_epilogue(x, pre_gelu ? out : NULL, bias, N, OC, stream);
}

void matmul_backward_cuda(MatmulContext* ctx, floatX* dinp, floatX* dweight, floatX* dbias,
                          const floatX* dout, const floatX* inp, const floatX* weight,
                          const floatX* pre_gelu, int N, int IC, int OC, int accumulate_dinp,
                          int accumulate_grads, cudaStream_t stream) {
    check_shape("matmul_backward_cuda", N, IC, OC);
    CHECK(!dbias || OC <= ctx->max_bias_oc, "raise max_bias_oc in matmul_context_init",
          "matmul_backward_cuda: OC %d exceeds the context's max_bias_oc %d", OC, ctx->max_bias_oc);
    // DGELU applies the gradient to the whole GEMM result, beta * dinp included: no accumulation.
    CHECK(!pre_gelu || !accumulate_dinp, "caller bug",
          "matmul_backward_cuda: the GELU gradient (pre_gelu) needs accumulate_dinp = 0");
    if (N == 0) return;
    if (dinp) {
        const char* what = "matmul_backward_cuda (dinp)";
        Gemm g;
        memset(&g, 0, sizeof g);
        g.transa = CUBLAS_OP_N, g.transb = CUBLAS_OP_N;
        g.m = IC, g.n = N, g.k = OC;
        g.A = weight, g.lda = IC;
        g.B = dout, g.ldb = OC;
        g.D = dinp, g.ldd = IC;
        g.beta = accumulate_dinp ? 1.0f : 0.0f;
        g.epilogue = pre_gelu ? CUBLASLT_EPILOGUE_DGELU : CUBLASLT_EPILOGUE_DEFAULT;
        g.aux = (void*)pre_gelu;
        // cuBLASLt's aux leading dimension (IC) must be a multiple of 8: otherwise the fallback.
        if (pre_gelu && (IC % 8 != 0 || !try_gemm(ctx, &g, what, stream))) {
            ctx->fallback_calls[MATMUL_EPI_DGELU]++;
            run_default_gemm(ctx, &g, dinp, what, stream);
            dgelu_epilogue(dinp, pre_gelu, N, IC, stream);
        } else if (pre_gelu) {
            ctx->fused_calls[MATMUL_EPI_DGELU]++;
        } else {
            try_gemm(ctx, &g, what, stream);
        }
    }
    int bias_done = 0;
    if (dweight) {
        const char* what = "matmul_backward_cuda (dweight)";
        Gemm g;
        memset(&g, 0, sizeof g);
        g.transa = CUBLAS_OP_N, g.transb = CUBLAS_OP_T;
        g.m = IC, g.n = OC, g.k = N;
        g.A = inp, g.lda = IC;
        g.B = dout, g.ldb = OC;
        g.D = dweight, g.ldd = IC;
        g.beta = accumulate_grads ? 1.0f : 0.0f;  // beta 0: dweight is not read (no zeroing pass)
        g.epilogue = CUBLASLT_EPILOGUE_DEFAULT;
        if (dbias && ctx->use_bgradb) {
            // BGRADB overwrites its output: straight into dbias when writing; when accumulating,
            // into the scratch vector, then added to dbias.
            g.epilogue = CUBLASLT_EPILOGUE_BGRADB;
            g.bias = accumulate_grads ? ctx->dbias_scratch : dbias;
            if (try_gemm(ctx, &g, what, stream)) {
                if (accumulate_grads)
                    LAUNCH(dbias_add_kernel, (OC + 255) / 256, 256, 0, stream, dbias,
                           (const floatX*)ctx->dbias_scratch, OC);
                ctx->fused_calls[MATMUL_EPI_BGRADB]++;
                bias_done = 1;
            } else {  // fallback: the plain GEMM below, then the column sums
                ctx->fallback_calls[MATMUL_EPI_BGRADB]++;
            }
        }
        if (!bias_done) run_default_gemm(ctx, &g, dweight, what, stream);
    }
    if (dbias && !bias_done) dbias_column_sums(ctx, dbias, dout, N, OC, accumulate_grads, stream);
}
