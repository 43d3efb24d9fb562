// GEMM layers through cuBLASLt (declarations and contracts in model/matmul_cuda.cuh).
//
// Row-major (N, C) activations are column-major (C, N) matrices with leading dimension C, so
// with W the (OC, IC) row-major weight (= column-major (IC, OC), i.e. W^T):
//   forward   out^T (OC x N)  = W (OC x IC, transa = T) * inp^T (IC x N)        + bias[row]
//   dinp      dinp^T (IC x N) = W^T (IC x OC)           * dout^T (OC x N)       (beta = 1)
//   dweight   dW^T (IC x OC)  = inp^T (IC x N)          * dout (N x OC, transb = T) (beta = 1)
// and the bias gradient is the sum over k (= N) of op(B) = dout, the BGRADB epilogue of the
// dweight GEMM (or a deterministic two-pass column-sum kernel).
#include "model/matmul_cuda.cuh"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

// Preference attributes for the operands' alignment. The heuristic assumes 256-byte aligned
// pointers unless told otherwise; the host runtime's header does not name these (it ignores
// preferences), so the values of cublasLt.h are spelled out there.
#if defined(__CUDACC__)
#define MM_PREF_ALIGN_A CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES
#define MM_PREF_ALIGN_B CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES
#define MM_PREF_ALIGN_C CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES
#define MM_PREF_ALIGN_D CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES
#else
#define MM_PREF_ALIGN_A ((cublasLtMatmulPreferenceAttributes_t)5)
#define MM_PREF_ALIGN_B ((cublasLtMatmulPreferenceAttributes_t)6)
#define MM_PREF_ALIGN_C ((cublasLtMatmulPreferenceAttributes_t)7)
#define MM_PREF_ALIGN_D ((cublasLtMatmulPreferenceAttributes_t)8)
#endif

// --- Plans ---------------------------------------------------------------------------------------

// Everything the heuristic's answer depends on. Plain ints, compared with memcmp.
typedef struct {
    int transa, transb, m, n, k, lda, ldb, ldd;
    int epilogue;
    int align_a, align_b, align_d, align_bias, align_aux;  // bytes, capped at 256
} PlanKey;

struct MatmulPlan {
    PlanKey key;
    cublasLtMatmulDesc_t desc;
    cublasLtMatrixLayout_t a, b, d;
    cublasLtMatmulAlgo_t algo;
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
    void* aux;   // pre-GELU activation (GELU_AUX), leading dimension m
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
    return e == CUBLASLT_EPILOGUE_GELU_AUX || e == CUBLASLT_EPILOGUE_GELU_AUX_BIAS;
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

// Builds the descriptor, layouts and algorithm for g into p. Returns 0 (and leaves nothing
// allocated) when cuBLASLt has no algorithm for it.
static int make_plan(MatmulContext* ctx, const Gemm* g, const PlanKey* key, MatmulPlan* p) {
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
    set_epilogue_pointers(p->desc, g);
    const int ar = g->transa == CUBLAS_OP_N ? g->m : g->k, ac = g->transa == CUBLAS_OP_N ? g->k : g->m;
    const int br = g->transb == CUBLAS_OP_N ? g->k : g->n, bc = g->transb == CUBLAS_OP_N ? g->n : g->k;
    CUDA_CHECK(cublasLtMatrixLayoutCreate(&p->a, CUDA_R_X, ar, ac, g->lda));
    CUDA_CHECK(cublasLtMatrixLayoutCreate(&p->b, CUDA_R_X, br, bc, g->ldb));
    CUDA_CHECK(cublasLtMatrixLayoutCreate(&p->d, CUDA_R_X, g->m, g->n, g->ldd));

    cublasLtMatmulPreference_t pref;
    CUDA_CHECK(cublasLtMatmulPreferenceCreate(&pref));
    const uint64_t ws = ctx->workspace_bytes;
    CUDA_CHECK(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES,
                                                    &ws, sizeof ws));
    const uint32_t al[4] = {(uint32_t)key->align_a, (uint32_t)key->align_b, (uint32_t)key->align_d,
                            (uint32_t)key->align_d};
    CUDA_CHECK(cublasLtMatmulPreferenceSetAttribute(pref, MM_PREF_ALIGN_A, &al[0], sizeof al[0]));
    CUDA_CHECK(cublasLtMatmulPreferenceSetAttribute(pref, MM_PREF_ALIGN_B, &al[1], sizeof al[1]));
    CUDA_CHECK(cublasLtMatmulPreferenceSetAttribute(pref, MM_PREF_ALIGN_C, &al[2], sizeof al[2]));
    CUDA_CHECK(cublasLtMatmulPreferenceSetAttribute(pref, MM_PREF_ALIGN_D, &al[3], sizeof al[3]));
    cublasLtMatmulHeuristicResult_t result;
    memset(&result, 0, sizeof result);
    int found = 0;
    const cublasStatus_t st = cublasLtMatmulAlgoGetHeuristic(ctx->lt, p->desc, p->a, p->b, p->d, p->d,
                                                             pref, 1, &result, &found);
    CUDA_CHECK(cublasLtMatmulPreferenceDestroy(pref));
    if (st != CUBLAS_STATUS_SUCCESS || found < 1) {
        destroy_plan(p);
        return 0;
    }
    p->algo = result.algo;
    return 1;
}

// The cached plan for g, made on first use; NULL if cuBLASLt has no algorithm for it.
static MatmulPlan* get_plan(MatmulContext* ctx, const Gemm* g) {
    const PlanKey key = key_of(g);
    for (int i = 0; i < ctx->num_plans; i++) {
        MatmulPlan* p = &ctx->plans[i];
        if (memcmp(&p->key, &key, sizeof key) == 0) {
            set_epilogue_pointers(p->desc, g);
            return p;
        }
    }
    MatmulPlan fresh;
    if (!make_plan(ctx, g, &key, &fresh)) return NULL;
    int slot;
    if (ctx->num_plans < MATMUL_PLAN_CACHE) {
        slot = ctx->num_plans++;
    } else {  // round-robin eviction (only with more distinct shapes than slots)
        slot = ctx->next_evict;
        ctx->next_evict = (ctx->next_evict + 1) % MATMUL_PLAN_CACHE;
        destroy_plan(&ctx->plans[slot]);
    }
    ctx->plans[slot] = fresh;
    return &ctx->plans[slot];
}

static void run_plan(MatmulContext* ctx, const MatmulPlan* p, const Gemm* g, cudaStream_t stream) {
    const float alpha = 1.0f, beta = g->beta;
    CUDA_CHECK(cublasLtMatmul(ctx->lt, p->desc, &alpha, g->A, p->a, g->B, p->b, &beta, g->D, p->d,
                              g->D, p->d, &p->algo, ctx->workspace, ctx->workspace_bytes, stream));
}

static void run_gemm(MatmulContext* ctx, const Gemm* g, const char* what, cudaStream_t stream) {
    MatmulPlan* p = get_plan(ctx, g);
    if (!p)
        FAIL("check the shapes and pointer alignment; run with CUBLASLT_LOG_LEVEL=5 for cuBLASLt's reason",
             "%s: cuBLASLt found no algorithm for m=%d n=%d k=%d (lda %d, ldb %d, ldd %d, epilogue %d, " FLOATX_NAME ")",
             what, g->m, g->n, g->k, g->lda, g->ldb, g->ldd, (int)g->epilogue);
    run_plan(ctx, p, g, stream);
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

// dbias[c] += the chunks' partial sums, added in chunk order.
__global__ void dbias_finish_kernel(floatX* dbias, const float* partial, int chunks, int OC) {
    const int c = blockIdx.x * blockDim.x + threadIdx.x;
    if (c >= OC) return;
    float s = 0.0f;
    for (int r = 0; r < chunks; r++) s += partial[(size_t)r * OC + c];
    dbias[c] = from_float<floatX>(to_float(dbias[c]) + s);
}

// dbias[c] += src[c] (src: the BGRADB epilogue's output).
__global__ void dbias_add_kernel(floatX* dbias, const floatX* src, int OC) {
    const int c = blockIdx.x * blockDim.x + threadIdx.x;
    if (c < OC) dbias[c] = from_float<floatX>(to_float(dbias[c]) + to_float(src[c]));
}

static void dbias_column_sums(MatmulContext* ctx, floatX* dbias, const floatX* dout, int N, int OC,
                              cudaStream_t stream) {
    int chunks = (N + 31) / 32;
    if (chunks > MATMUL_DBIAS_MAX_CHUNKS) chunks = MATMUL_DBIAS_MAX_CHUNKS;
    const int rows_per_chunk = (N + chunks - 1) / chunks;
    chunks = (N + rows_per_chunk - 1) / rows_per_chunk;
    const int vec = OC % X128_ELEMS == 0 && (uintptr_t)dout % 16 == 0;
    const dim3 grid((OC + DBIAS_COLS - 1) / DBIAS_COLS, chunks), block(DBIAS_TX, DBIAS_TY);
    LAUNCH(dbias_partial_kernel, grid, block, 0, stream, ctx->dbias_partial, dout, N, OC,
           rows_per_chunk, vec);
    LAUNCH(dbias_finish_kernel, (OC + 255) / 256, 256, 0, stream, dbias, (const float*)ctx->dbias_partial,
           chunks, OC);
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
    CHECK(!pre_gelu || OC % 8 == 0, "pad OC to a multiple of 8",
          "matmul_forward_cuda: the fused GELU needs OC %% 8 == 0 (cuBLASLt's aux leading dimension), got %d", OC);
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
    run_gemm(ctx, &g, "matmul_forward_cuda", stream);
}

void matmul_backward_cuda(MatmulContext* ctx, floatX* dinp, floatX* dweight, floatX* dbias,
                          const floatX* dout, const floatX* inp, const floatX* weight, int N, int IC,
                          int OC, cudaStream_t stream) {
    check_shape("matmul_backward_cuda", N, IC, OC);
    CHECK(!dbias || OC <= ctx->max_bias_oc, "raise max_bias_oc in matmul_context_init",
          "matmul_backward_cuda: OC %d exceeds the context's max_bias_oc %d", OC, ctx->max_bias_oc);
    if (N == 0) return;
    if (dinp) {
        Gemm g;
        memset(&g, 0, sizeof g);
        g.transa = CUBLAS_OP_N, g.transb = CUBLAS_OP_N;
        g.m = IC, g.n = N, g.k = OC;
        g.A = weight, g.lda = IC;
        g.B = dout, g.ldb = OC;
        g.D = dinp, g.ldd = IC;
        g.beta = 1.0f;
        g.epilogue = CUBLASLT_EPILOGUE_DEFAULT;
        run_gemm(ctx, &g, "matmul_backward_cuda (dinp)", stream);
    }
    int bias_done = 0;
    if (dweight) {
        Gemm g;
        memset(&g, 0, sizeof g);
        g.transa = CUBLAS_OP_N, g.transb = CUBLAS_OP_T;
        g.m = IC, g.n = OC, g.k = N;
        g.A = inp, g.lda = IC;
        g.B = dout, g.ldb = OC;
        g.D = dweight, g.ldd = IC;
        g.beta = 1.0f;
        g.epilogue = CUBLASLT_EPILOGUE_DEFAULT;
        if (dbias && ctx->use_bgradb) {
            // BGRADB overwrites its output: into the scratch vector, then added to dbias.
            g.epilogue = CUBLASLT_EPILOGUE_BGRADB;
            g.bias = ctx->dbias_scratch;
            MatmulPlan* p = get_plan(ctx, &g);
            if (p) {
                run_plan(ctx, p, &g, stream);
                LAUNCH(dbias_add_kernel, (OC + 255) / 256, 256, 0, stream, dbias,
                       (const floatX*)ctx->dbias_scratch, OC);
                bias_done = 1;
            } else {
                fprintf(stderr, "note: cuBLASLt has no BGRADB algorithm for m=%d n=%d k=%d; bias "
                        "gradients use the column-sum kernel from now on\n", g.m, g.n, g.k);
                ctx->use_bgradb = 0;
                g.epilogue = CUBLASLT_EPILOGUE_DEFAULT;
                g.bias = NULL;
            }
        }
        if (!bias_done) run_gemm(ctx, &g, "matmul_backward_cuda (dweight)", stream);
    }
    if (dbias && !bias_done) dbias_column_sums(ctx, dbias, dout, N, OC, stream);
}
