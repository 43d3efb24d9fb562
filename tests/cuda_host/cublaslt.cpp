// cuBLASLt matmul with epilogues for the host runtime (see host_cublas.h for what is supported).
// Each batch entry: T = alpha * op(A) op(B) + beta * C in fp32, then the epilogue on T, then T
// stored to D (rounded once if D is bf16).
#include "tests/cuda_host/internal.h"
#include "comm/fail.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

enum { LT_MAGIC = 0x4c54484e, DESC_MAGIC = 0x4c544d44, LAYOUT_MAGIC = 0x4c544c59, PREF_MAGIC = 0x4c545046 };

struct cublasLtContext {
    unsigned magic;
};

struct cublasLtMatmulDescOpaque_t {
    unsigned magic;
    cublasComputeType_t compute;
    cudaDataType_t scale;
    int transa, transb;  // cublasOperation_t values
    unsigned epilogue;
    void* bias;
    long long bias_stride;
    int bias_type;  // -1: D's type
    void* aux;
    long long aux_ld, aux_stride;
    int aux_type;  // -1: D's type
};

struct cublasLtMatrixLayoutOpaque_t {
    unsigned magic;
    cudaDataType_t type;
    uint64_t rows, cols;
    int64_t ld;
    int batch;
    int64_t stride;
};

struct cublasLtMatmulPreferenceOpaque_t {
    unsigned magic;
};

cublasStatus_t cublasLtCreate(cublasLtHandle_t* handle) {
    if (!handle) return cuda_host_blas_fail(CUBLAS_STATUS_INVALID_VALUE, "cublasLtCreate: NULL handle");
    cublasLtHandle_t h = (cublasLtHandle_t)xcalloc(1, sizeof *h, "cuBLASLt handle");
    h->magic = LT_MAGIC;
    *handle = h;
    return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtDestroy(cublasLtHandle_t handle) {
    if (!handle || handle->magic != LT_MAGIC) return cuda_host_blas_fail(CUBLAS_STATUS_NOT_INITIALIZED, "invalid cuBLASLt handle");
    handle->magic = 0;
    free(handle);
    return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatmulDescCreate(cublasLtMatmulDesc_t* desc, cublasComputeType_t computeType,
                                        cudaDataType_t scaleType) {
    if (!desc) return cuda_host_blas_fail(CUBLAS_STATUS_INVALID_VALUE, "cublasLtMatmulDescCreate: NULL desc");
    cublasLtMatmulDesc_t d = (cublasLtMatmulDesc_t)xcalloc(1, sizeof *d, "cuBLASLt matmul descriptor");
    d->magic = DESC_MAGIC;
    d->compute = computeType;
    d->scale = scaleType;
    d->transa = d->transb = CUBLAS_OP_N;
    d->epilogue = CUBLASLT_EPILOGUE_DEFAULT;
    d->bias_type = d->aux_type = -1;
    *desc = d;
    return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatmulDescDestroy(cublasLtMatmulDesc_t desc) {
    if (!desc || desc->magic != DESC_MAGIC)
        return cuda_host_blas_fail(CUBLAS_STATUS_INVALID_VALUE, "cublasLtMatmulDescDestroy: invalid descriptor");
    desc->magic = 0;
    free(desc);
    return CUBLAS_STATUS_SUCCESS;
}

// Copies an attribute value of exactly `want` bytes.
static int attr_value(const char* what, int attr, const void* buf, size_t size, size_t want, void* out) {
    if (!buf || size != want) {
        cuda_host_blas_fail(CUBLAS_STATUS_INVALID_VALUE, "%s: attribute %d takes %zu bytes, got %zu",
                            what, attr, want, size);
        return 0;
    }
    memcpy(out, buf, want);
    return 1;
}

cublasStatus_t cublasLtMatmulDescSetAttribute(cublasLtMatmulDesc_t d, cublasLtMatmulDescAttributes_t attr,
                                              const void* buf, size_t size) {
    const char* what = "cublasLtMatmulDescSetAttribute";
    if (!d || d->magic != DESC_MAGIC) return cuda_host_blas_fail(CUBLAS_STATUS_INVALID_VALUE, "%s: invalid descriptor", what);
    int32_t i32;
    int ok;
    switch (attr) {
    case CUBLASLT_MATMUL_DESC_COMPUTE_TYPE:
        if ((ok = attr_value(what, attr, buf, size, 4, &i32))) d->compute = (cublasComputeType_t)i32;
        break;
    case CUBLASLT_MATMUL_DESC_SCALE_TYPE:
        if ((ok = attr_value(what, attr, buf, size, 4, &i32))) d->scale = (cudaDataType_t)i32;
        break;
    case CUBLASLT_MATMUL_DESC_POINTER_MODE:  // host and device pointers are both host memory here
        ok = attr_value(what, attr, buf, size, 4, &i32);
        if (ok && i32 != CUBLASLT_POINTER_MODE_HOST && i32 != CUBLASLT_POINTER_MODE_DEVICE)
            return cuda_host_blas_fail(CUBLAS_STATUS_NOT_SUPPORTED, "%s: pointer mode %d is not supported "
                                       "by the host runtime", what, i32);
        break;
    case CUBLASLT_MATMUL_DESC_TRANSA: ok = attr_value(what, attr, buf, size, 4, &d->transa); break;
    case CUBLASLT_MATMUL_DESC_TRANSB: ok = attr_value(what, attr, buf, size, 4, &d->transb); break;
    case CUBLASLT_MATMUL_DESC_TRANSC:
        ok = attr_value(what, attr, buf, size, 4, &i32);
        if (ok && i32 != CUBLAS_OP_N)
            return cuda_host_blas_fail(CUBLAS_STATUS_NOT_SUPPORTED, "%s: TRANSC must be CUBLAS_OP_N", what);
        break;
    case CUBLASLT_MATMUL_DESC_EPILOGUE: ok = attr_value(what, attr, buf, size, 4, &d->epilogue); break;
    case CUBLASLT_MATMUL_DESC_BIAS_POINTER: ok = attr_value(what, attr, buf, size, sizeof(void*), &d->bias); break;
    case CUBLASLT_MATMUL_DESC_BIAS_BATCH_STRIDE: ok = attr_value(what, attr, buf, size, 8, &d->bias_stride); break;
    case CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE: ok = attr_value(what, attr, buf, size, 4, &d->bias_type); break;
    case CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER: ok = attr_value(what, attr, buf, size, sizeof(void*), &d->aux); break;
    case CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD: ok = attr_value(what, attr, buf, size, 8, &d->aux_ld); break;
    case CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_BATCH_STRIDE: ok = attr_value(what, attr, buf, size, 8, &d->aux_stride); break;
    case CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_DATA_TYPE: ok = attr_value(what, attr, buf, size, 4, &d->aux_type); break;
    default:
        return cuda_host_blas_fail(CUBLAS_STATUS_NOT_SUPPORTED, "%s: matmul descriptor attribute %d is "
                                   "not supported by the host runtime", what, (int)attr);
    }
    return ok ? CUBLAS_STATUS_SUCCESS : CUBLAS_STATUS_INVALID_VALUE;
}

cublasStatus_t cublasLtMatrixLayoutCreate(cublasLtMatrixLayout_t* layout, cudaDataType_t type,
                                          uint64_t rows, uint64_t cols, int64_t ld) {
    if (!layout) return cuda_host_blas_fail(CUBLAS_STATUS_INVALID_VALUE, "cublasLtMatrixLayoutCreate: NULL layout");
    cublasLtMatrixLayout_t l = (cublasLtMatrixLayout_t)xcalloc(1, sizeof *l, "cuBLASLt layout");
    l->magic = LAYOUT_MAGIC;
    l->type = type;
    l->rows = rows;
    l->cols = cols;
    l->ld = ld;
    l->batch = 1;
    *layout = l;
    return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatrixLayoutDestroy(cublasLtMatrixLayout_t layout) {
    if (!layout || layout->magic != LAYOUT_MAGIC)
        return cuda_host_blas_fail(CUBLAS_STATUS_INVALID_VALUE, "cublasLtMatrixLayoutDestroy: invalid layout");
    layout->magic = 0;
    free(layout);
    return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatrixLayoutSetAttribute(cublasLtMatrixLayout_t l, cublasLtMatrixLayoutAttribute_t attr,
                                                const void* buf, size_t size) {
    const char* what = "cublasLtMatrixLayoutSetAttribute";
    if (!l || l->magic != LAYOUT_MAGIC) return cuda_host_blas_fail(CUBLAS_STATUS_INVALID_VALUE, "%s: invalid layout", what);
    int32_t i32;
    int ok;
    switch (attr) {
    case CUBLASLT_MATRIX_LAYOUT_TYPE:
        if ((ok = attr_value(what, attr, buf, size, 4, &i32))) l->type = (cudaDataType_t)i32;
        break;
    case CUBLASLT_MATRIX_LAYOUT_ORDER:
        ok = attr_value(what, attr, buf, size, 4, &i32);
        if (ok && i32 != CUBLASLT_ORDER_COL)
            return cuda_host_blas_fail(CUBLAS_STATUS_NOT_SUPPORTED, "%s: order %d is not supported by the "
                                       "host runtime (CUBLASLT_ORDER_COL only)", what, i32);
        break;
    case CUBLASLT_MATRIX_LAYOUT_ROWS: ok = attr_value(what, attr, buf, size, 8, &l->rows); break;
    case CUBLASLT_MATRIX_LAYOUT_COLS: ok = attr_value(what, attr, buf, size, 8, &l->cols); break;
    case CUBLASLT_MATRIX_LAYOUT_LD: ok = attr_value(what, attr, buf, size, 8, &l->ld); break;
    case CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT: ok = attr_value(what, attr, buf, size, 4, &l->batch); break;
    case CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET: ok = attr_value(what, attr, buf, size, 8, &l->stride); break;
    default:
        return cuda_host_blas_fail(CUBLAS_STATUS_NOT_SUPPORTED, "%s: layout attribute %d is not supported "
                                   "by the host runtime", what, (int)attr);
    }
    return ok ? CUBLAS_STATUS_SUCCESS : CUBLAS_STATUS_INVALID_VALUE;
}

cublasStatus_t cublasLtMatmulPreferenceCreate(cublasLtMatmulPreference_t* pref) {
    if (!pref) return cuda_host_blas_fail(CUBLAS_STATUS_INVALID_VALUE, "cublasLtMatmulPreferenceCreate: NULL pref");
    cublasLtMatmulPreference_t p = (cublasLtMatmulPreference_t)xcalloc(1, sizeof *p, "cuBLASLt preference");
    p->magic = PREF_MAGIC;
    *pref = p;
    return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatmulPreferenceDestroy(cublasLtMatmulPreference_t pref) {
    if (!pref || pref->magic != PREF_MAGIC)
        return cuda_host_blas_fail(CUBLAS_STATUS_INVALID_VALUE, "cublasLtMatmulPreferenceDestroy: invalid preference");
    pref->magic = 0;
    free(pref);
    return CUBLAS_STATUS_SUCCESS;
}

// Preferences only narrow the algorithm search; the single host algorithm needs no workspace.
cublasStatus_t cublasLtMatmulPreferenceSetAttribute(cublasLtMatmulPreference_t pref,
                                                    cublasLtMatmulPreferenceAttributes_t attr,
                                                    const void* buf, size_t size) {
    if (!pref || pref->magic != PREF_MAGIC || !buf || !size)
        return cuda_host_blas_fail(CUBLAS_STATUS_INVALID_VALUE, "cublasLtMatmulPreferenceSetAttribute: "
                                   "invalid preference or value (attribute %d)", (int)attr);
    return CUBLAS_STATUS_SUCCESS;
}

// --- The problem, checked once for the heuristic and the matmul ----------------------------------

enum {
    EPI_BIAS = 4,        // adds bias[row]
    EPI_RELU = 2,
    EPI_GELU = 32,
    EPI_AUX_OUT = 128,   // with GELU: stores the GELU input to aux
    EPI_DGELU = 64,
    EPI_BGRAD = 16
};

typedef struct {
    int ta, tb;
    long m, n, k;
    int batch;
    unsigned epi;
    cudaDataType_t ab, cd, bias_type, aux_type;
} Problem;

static int epilogue_supported(unsigned e) {
    switch (e) {
    case CUBLASLT_EPILOGUE_DEFAULT: case CUBLASLT_EPILOGUE_RELU: case CUBLASLT_EPILOGUE_RELU_BIAS:
    case CUBLASLT_EPILOGUE_BIAS: case CUBLASLT_EPILOGUE_GELU: case CUBLASLT_EPILOGUE_GELU_BIAS:
    case CUBLASLT_EPILOGUE_GELU_AUX: case CUBLASLT_EPILOGUE_GELU_AUX_BIAS: case CUBLASLT_EPILOGUE_DGELU:
    case CUBLASLT_EPILOGUE_DGELU_BGRAD: case CUBLASLT_EPILOGUE_BGRADA: case CUBLASLT_EPILOGUE_BGRADB:
        return 1;
    }
    return 0;
}

static int layout_ok(cublasLtMatrixLayout_t l) { return l && l->magic == LAYOUT_MAGIC; }

static cublasStatus_t check_problem(const char* what, cublasLtMatmulDesc_t d, cublasLtMatrixLayout_t A,
                                    cublasLtMatrixLayout_t B, cublasLtMatrixLayout_t C,
                                    cublasLtMatrixLayout_t D, Problem* p) {
    if (!d || d->magic != DESC_MAGIC || !layout_ok(A) || !layout_ok(B) || !layout_ok(C) || !layout_ok(D))
        return cuda_host_blas_fail(CUBLAS_STATUS_INVALID_VALUE, "%s: invalid descriptor or layout", what);
    if (d->compute != CUBLAS_COMPUTE_32F && d->compute != CUBLAS_COMPUTE_32F_PEDANTIC &&
        d->compute != CUBLAS_COMPUTE_32F_FAST_16BF && d->compute != CUBLAS_COMPUTE_32F_FAST_TF32 &&
        d->compute != CUBLAS_COMPUTE_32F_FAST_16F)
        return cuda_host_blas_fail(CUBLAS_STATUS_NOT_SUPPORTED, "%s: compute type %d is not supported by "
                                   "the host runtime (CUBLAS_COMPUTE_32F family only)", what, (int)d->compute);
    if (d->scale != CUDA_R_32F)
        return cuda_host_blas_fail(CUBLAS_STATUS_NOT_SUPPORTED, "%s: scale type %s is not supported (32F only)",
                                   what, cuda_host_type_name(d->scale));
    if (A->type != B->type || C->type != D->type || !cuda_host_type_size(A->type) ||
        !cuda_host_type_size(D->type) || (A->type == CUDA_R_32F && D->type != CUDA_R_32F))
        return cuda_host_blas_fail(CUBLAS_STATUS_NOT_SUPPORTED, "%s: types A %s, B %s, C %s, D %s are not "
                                   "supported by the host runtime (A = B in {32F, 16BF}, C = D in {32F, "
                                   "16BF}, 32F inputs need 32F outputs)", what, cuda_host_type_name(A->type),
                                   cuda_host_type_name(B->type), cuda_host_type_name(C->type),
                                   cuda_host_type_name(D->type));
    if (d->transa < 0 || d->transa > CUBLAS_OP_C || d->transb < 0 || d->transb > CUBLAS_OP_C)
        return cuda_host_blas_fail(CUBLAS_STATUS_INVALID_VALUE, "%s: invalid transpose", what);
    if (!epilogue_supported(d->epilogue))
        return cuda_host_blas_fail(CUBLAS_STATUS_NOT_SUPPORTED, "%s: epilogue %u is not supported by the host "
                                   "runtime (see tests/cuda_host/host_cublas.h)", what, d->epilogue);
    p->ta = d->transa != CUBLAS_OP_N;
    p->tb = d->transb != CUBLAS_OP_N;
    p->m = (long)D->rows;
    p->n = (long)D->cols;
    p->k = (long)(p->ta ? A->rows : A->cols);
    p->batch = D->batch;
    p->epi = d->epilogue;
    p->ab = A->type;
    p->cd = D->type;
    p->bias_type = d->bias_type < 0 ? D->type : (cudaDataType_t)d->bias_type;
    p->aux_type = d->aux_type < 0 ? D->type : (cudaDataType_t)d->aux_type;
    uint64_t am = p->ta ? A->cols : A->rows, bk = p->tb ? B->cols : B->rows, bn = p->tb ? B->rows : B->cols;
    if (D->rows > 0x7fffffff || D->cols > 0x7fffffff || (uint64_t)p->k > 0x7fffffff || am != D->rows ||
        bk != (uint64_t)p->k || bn != D->cols || C->rows != D->rows || C->cols != D->cols ||
        A->ld < (int64_t)(A->rows > 1 ? A->rows : 1) || B->ld < (int64_t)(B->rows > 1 ? B->rows : 1) ||
        C->ld < (int64_t)(C->rows > 1 ? C->rows : 1) || D->ld < (int64_t)(D->rows > 1 ? D->rows : 1))
        return cuda_host_blas_fail(CUBLAS_STATUS_INVALID_VALUE, "%s: shapes do not fit: op(A) %llu x %ld, "
                                   "op(B) %llu x %llu, C %llu x %llu, D %llu x %llu, ld A %lld B %lld C %lld "
                                   "D %lld", what, (unsigned long long)am, p->k, (unsigned long long)bk,
                                   (unsigned long long)bn, (unsigned long long)C->rows,
                                   (unsigned long long)C->cols, (unsigned long long)D->rows,
                                   (unsigned long long)D->cols, (long long)A->ld, (long long)B->ld,
                                   (long long)C->ld, (long long)D->ld);
    if (A->batch != D->batch || B->batch != D->batch || C->batch != D->batch || D->batch < 1 ||
        A->stride < 0 || B->stride < 0 || C->stride < 0 || D->stride < 0)
        return cuda_host_blas_fail(CUBLAS_STATUS_INVALID_VALUE, "%s: batch counts A %d, B %d, C %d, D %d must "
                                   "be equal and strides non-negative", what, A->batch, B->batch, C->batch,
                                   D->batch);
    if (((p->epi & (EPI_BIAS | EPI_BGRAD)) || p->epi == CUBLASLT_EPILOGUE_BGRADA ||
         p->epi == CUBLASLT_EPILOGUE_BGRADB) && !cuda_host_type_size(p->bias_type))
        return cuda_host_blas_fail(CUBLAS_STATUS_NOT_SUPPORTED, "%s: bias type %s is not supported", what,
                                   cuda_host_type_name(p->bias_type));
    if ((p->epi & EPI_AUX_OUT) && !cuda_host_type_size(p->aux_type))
        return cuda_host_blas_fail(CUBLAS_STATUS_NOT_SUPPORTED, "%s: aux type %s is not supported", what,
                                   cuda_host_type_name(p->aux_type));
    return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatmulAlgoGetHeuristic(cublasLtHandle_t handle, cublasLtMatmulDesc_t desc,
                                              cublasLtMatrixLayout_t Adesc, cublasLtMatrixLayout_t Bdesc,
                                              cublasLtMatrixLayout_t Cdesc, cublasLtMatrixLayout_t Ddesc,
                                              cublasLtMatmulPreference_t pref, int requestedAlgoCount,
                                              cublasLtMatmulHeuristicResult_t results[],
                                              int* returnAlgoCount) {
    const char* what = "cublasLtMatmulAlgoGetHeuristic";
    if (!handle || handle->magic != LT_MAGIC) return cuda_host_blas_fail(CUBLAS_STATUS_NOT_INITIALIZED, "invalid cuBLASLt handle");
    if (!pref || pref->magic != PREF_MAGIC || requestedAlgoCount < 1 || !results || !returnAlgoCount)
        return cuda_host_blas_fail(CUBLAS_STATUS_INVALID_VALUE, "%s: invalid preference or result arguments", what);
    *returnAlgoCount = 0;
    Problem p;
    cublasStatus_t st = check_problem(what, desc, Adesc, Bdesc, Cdesc, Ddesc, &p);
    if (st != CUBLAS_STATUS_SUCCESS) return st;
    memset(&results[0], 0, sizeof results[0]);
    results[0].algo.data[0] = LT_MAGIC;
    results[0].state = CUBLAS_STATUS_SUCCESS;
    results[0].wavesCount = 1.0f;
    *returnAlgoCount = 1;
    return CUBLAS_STATUS_SUCCESS;
}

// --- The matmul ----------------------------------------------------------------------------------

static const float gelu_scale = 0.7978845608028654f;  // sqrt(2 / pi)

static float gelu(float x) {
    float u = gelu_scale * (x + 0.044715f * x * x * x);
    return 0.5f * x * (1.0f + tanhf(u));
}

static float gelu_grad(float x) {
    float u = gelu_scale * (x + 0.044715f * x * x * x);
    float t = tanhf(u);
    return 0.5f * (1.0f + t) + 0.5f * x * (1.0f - t * t) * gelu_scale * (1.0f + 3.0f * 0.044715f * x * x);
}

cublasStatus_t cublasLtMatmul(cublasLtHandle_t handle, cublasLtMatmulDesc_t desc, const void* alpha,
                              const void* A, cublasLtMatrixLayout_t Adesc, const void* B,
                              cublasLtMatrixLayout_t Bdesc, const void* beta, const void* C,
                              cublasLtMatrixLayout_t Cdesc, void* D, cublasLtMatrixLayout_t Ddesc,
                              const cublasLtMatmulAlgo_t* algo, void* workspace, size_t workspaceSize,
                              cudaStream_t stream) {
    const char* what = "cublasLtMatmul";
    (void)algo, (void)workspace, (void)workspaceSize;
    if (!handle || handle->magic != LT_MAGIC) return cuda_host_blas_fail(CUBLAS_STATUS_NOT_INITIALIZED, "invalid cuBLASLt handle");
    if (!cuda_host_stream_valid(stream)) return cuda_host_blas_fail(CUBLAS_STATUS_INVALID_VALUE, "%s: invalid stream", what);
    Problem p;
    cublasStatus_t st = check_problem(what, desc, Adesc, Bdesc, Cdesc, Ddesc, &p);
    if (st != CUBLAS_STATUS_SUCCESS) return st;
    if (!alpha || !beta) return cuda_host_blas_fail(CUBLAS_STATUS_INVALID_VALUE, "%s: NULL alpha or beta", what);
    float al = *(const float*)alpha, be = *(const float*)beta;
    long m = p.m, n = p.n, k = p.k;
    int bias_in = (p.epi & EPI_BIAS) != 0;
    int bias_out = (p.epi & EPI_BGRAD) || p.epi == CUBLASLT_EPILOGUE_BGRADA || p.epi == CUBLASLT_EPILOGUE_BGRADB;
    int aux_used = (p.epi & EPI_AUX_OUT) != 0;
    long bias_len = p.epi == CUBLASLT_EPILOGUE_BGRADB ? n : m;
    long ar = p.ta ? k : m, ac = p.ta ? m : k, br = p.tb ? n : k, bc = p.tb ? k : n;
    if (!cuda_host_operand_ok(what, "A", A, p.ab, ar, ac, Adesc->ld, Adesc->stride, p.batch) ||
        !cuda_host_operand_ok(what, "B", B, p.ab, br, bc, Bdesc->ld, Bdesc->stride, p.batch) ||
        !cuda_host_operand_ok(what, "D", D, p.cd, m, n, Ddesc->ld, Ddesc->stride, p.batch) ||
        (be != 0.0f && !cuda_host_operand_ok(what, "C", C, p.cd, m, n, Cdesc->ld, Cdesc->stride, p.batch)) ||
        ((bias_in || bias_out) &&
         !cuda_host_operand_ok(what, "the bias vector", desc->bias, p.bias_type, bias_len, 1, bias_len,
                               desc->bias_stride, p.batch)))
        return CUBLAS_STATUS_INVALID_VALUE;
    if (aux_used) {
        if (desc->aux_ld < m || desc->aux_ld % 8)
            return cuda_host_blas_fail(CUBLAS_STATUS_INVALID_VALUE, "%s: EPILOGUE_AUX_LD %lld must be a multiple "
                                       "of 8 and at least the %ld rows of D", what, desc->aux_ld, m);
        if (!cuda_host_operand_ok(what, "the aux matrix", desc->aux, p.aux_type, m, n, desc->aux_ld,
                                  desc->aux_stride, p.batch))
            return CUBLAS_STATUS_INVALID_VALUE;
    }
    size_t es = cuda_host_type_size(p.ab), ds = cuda_host_type_size(p.cd);
    size_t bs = cuda_host_type_size(p.bias_type), xs = cuda_host_type_size(p.aux_type);
    for (int b = 0; b < p.batch; b++) {
        const char* Ab = (const char*)A + (size_t)(b * Adesc->stride) * es;
        const char* Bb = (const char*)B + (size_t)(b * Bdesc->stride) * es;
        const char* Cb = (const char*)C + (size_t)(b * Cdesc->stride) * ds;
        char* Db = (char*)D + (size_t)(b * Ddesc->stride) * ds;
        char* bias = (char*)desc->bias + (size_t)(b * desc->bias_stride) * bs;
        char* aux = (char*)desc->aux + (size_t)(b * desc->aux_stride) * xs;
        float* a = cuda_host_widen(Ab, p.ab, ar, ac, Adesc->ld);
        float* bm = cuda_host_widen(Bb, p.ab, br, bc, Bdesc->ld);
        float* t = be != 0.0f ? cuda_host_widen(Cb, p.cd, m, n, Cdesc->ld)
                              : (float*)xmalloc((size_t)(m * n) * sizeof(float), "matmul result");
        cuda_host_sgemm(p.ta, p.tb, (int)m, (int)n, (int)k, al, a, ar, bm, br, be, t, m);
        if (p.epi == CUBLASLT_EPILOGUE_BGRADA || p.epi == CUBLASLT_EPILOGUE_BGRADB) {
            // sums of op(A) over its columns (k) or of op(B) over its rows (k)
            for (long i = 0; i < bias_len; i++) {
                float s = 0.0f;
                for (long q = 0; q < k; q++) {
                    if (p.epi == CUBLASLT_EPILOGUE_BGRADA) s += p.ta ? a[i * ar + q] : a[q * ar + i];
                    else s += p.tb ? bm[q * br + i] : bm[i * br + q];
                }
                cuda_host_store(bias, p.bias_type, (size_t)i, s);
            }
        }
        for (long j = 0; j < n; j++)
            for (long i = 0; i < m; i++) {
                float x = t[j * m + i];
                if (bias_in) x += cuda_host_load(bias, p.bias_type, (size_t)i);
                if (p.epi & EPI_DGELU) {
                    x *= gelu_grad(cuda_host_load(aux, p.aux_type, (size_t)(j * desc->aux_ld + i)));
                } else {
                    if (aux_used) cuda_host_store(aux, p.aux_type, (size_t)(j * desc->aux_ld + i), x);
                    if (p.epi & EPI_GELU) x = gelu(x);
                    if (p.epi & EPI_RELU) x = x > 0.0f ? x : 0.0f;
                }
                t[j * m + i] = x;
                cuda_host_store(Db, p.cd, (size_t)(j * Ddesc->ld + i), x);
            }
        if (p.epi & EPI_BGRAD) {  // DGELU_BGRAD: row sums of the gradient just computed
            for (long i = 0; i < m; i++) {
                float s = 0.0f;
                for (long j = 0; j < n; j++) s += t[j * m + i];
                cuda_host_store(bias, p.bias_type, (size_t)i, s);
            }
        }
        free(a);
        free(bm);
        free(t);
    }
    return CUBLAS_STATUS_SUCCESS;
}
