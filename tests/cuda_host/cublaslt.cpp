// cuBLASLt matmul with epilogues for the host runtime (see host_cublas.h for what is supported and
// for the model of what cuBLASLt refuses). Each batch entry: T = alpha * op(A) op(B) + beta * C in
// fp32, then the epilogue on T, then T stored to D (rounded once if D is bf16).
#include "tests/cuda_host/internal.h"
#include "comm/fail.h"

#include <math.h>
#include <stdio.h>
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
    int pointer_mode;  // cublasLtPointerMode_t: when alpha and beta are read
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
    uint32_t min_align[4];  // MIN_ALIGNMENT_A/B/C/D_BYTES: what the caller promises (default 256)
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
    cuda_host_drain_all("cublasLtDestroy");  // queued matmuls may still use it
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
        if (ok) d->pointer_mode = i32;
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
    for (int i = 0; i < 4; i++) p->min_align[i] = 256;  // cublasLt.h's default
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

// The alignment promises are kept for the heuristic; the other preferences only narrow the
// search, which the single host algorithm (no workspace) always passes.
cublasStatus_t cublasLtMatmulPreferenceSetAttribute(cublasLtMatmulPreference_t pref,
                                                    cublasLtMatmulPreferenceAttributes_t attr,
                                                    const void* buf, size_t size) {
    const char* what = "cublasLtMatmulPreferenceSetAttribute";
    if (!pref || pref->magic != PREF_MAGIC)
        return cuda_host_blas_fail(CUBLAS_STATUS_INVALID_VALUE, "%s: invalid preference", what);
    uint32_t u32;
    uint64_t u64;
    int ok;
    switch (attr) {
    case CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES: case CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES:
    case CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES: case CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES:
        ok = attr_value(what, attr, buf, size, 4, &u32);
        if (ok && u32 == 0)
            return cuda_host_blas_fail(CUBLAS_STATUS_INVALID_VALUE, "%s: a minimum alignment of 0 bytes "
                                       "(attribute %d)", what, (int)attr);
        if (ok) pref->min_align[attr - CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES] = u32;
        break;
    case CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES: ok = attr_value(what, attr, buf, size, 8, &u64); break;
    case CUBLASLT_MATMUL_PREF_SEARCH_MODE: case CUBLASLT_MATMUL_PREF_REDUCTION_SCHEME_MASK:
    case CUBLASLT_MATMUL_PREF_MAX_WAVES_COUNT:
        ok = attr_value(what, attr, buf, size, 4, &u32);
        break;
    case CUBLASLT_MATMUL_PREF_IMPL_MASK: ok = attr_value(what, attr, buf, size, 8, &u64); break;
    default:
        return cuda_host_blas_fail(CUBLAS_STATUS_NOT_SUPPORTED, "%s: preference attribute %d is not "
                                   "supported by the host runtime", what, (int)attr);
    }
    return ok ? CUBLAS_STATUS_SUCCESS : CUBLAS_STATUS_INVALID_VALUE;
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

// --- What cuBLASLt refuses (the model in host_cublas.h) -------------------------------------------

static const struct {
    const char* name;
    unsigned value;
} epilogue_names[] = {
    {"DEFAULT", CUBLASLT_EPILOGUE_DEFAULT}, {"RELU", CUBLASLT_EPILOGUE_RELU},
    {"RELU_AUX", CUBLASLT_EPILOGUE_RELU_AUX}, {"BIAS", CUBLASLT_EPILOGUE_BIAS},
    {"RELU_BIAS", CUBLASLT_EPILOGUE_RELU_BIAS}, {"RELU_AUX_BIAS", CUBLASLT_EPILOGUE_RELU_AUX_BIAS},
    {"DRELU", CUBLASLT_EPILOGUE_DRELU}, {"DRELU_BGRAD", CUBLASLT_EPILOGUE_DRELU_BGRAD},
    {"GELU", CUBLASLT_EPILOGUE_GELU}, {"GELU_AUX", CUBLASLT_EPILOGUE_GELU_AUX},
    {"GELU_BIAS", CUBLASLT_EPILOGUE_GELU_BIAS}, {"GELU_AUX_BIAS", CUBLASLT_EPILOGUE_GELU_AUX_BIAS},
    {"DGELU", CUBLASLT_EPILOGUE_DGELU}, {"DGELU_BGRAD", CUBLASLT_EPILOGUE_DGELU_BGRAD},
    {"BGRADA", CUBLASLT_EPILOGUE_BGRADA}, {"BGRADB", CUBLASLT_EPILOGUE_BGRADB},
};
enum { NUM_EPILOGUE_NAMES = sizeof epilogue_names / sizeof epilogue_names[0] };

static const char* epilogue_name(unsigned e) {
    for (int i = 0; i < NUM_EPILOGUE_NAMES; i++)
        if (epilogue_names[i].value == e) return epilogue_names[i].name;
    return "(unknown)";
}

// Bit i: CUDA_HOST_CUBLASLT_REFUSE names epilogue_names[i]. An unknown name ends the program.
static unsigned parse_refuse_knob(void) {
    const char* v = getenv("CUDA_HOST_CUBLASLT_REFUSE");
    unsigned mask = 0;
    if (!v || !v[0]) return 0;
    for (const char* s = v;;) {
        const char* comma = strchr(s, ',');
        const size_t n = comma ? (size_t)(comma - s) : strlen(s);
        int found = -1;
        for (int i = 0; i < NUM_EPILOGUE_NAMES; i++)
            if (strlen(epilogue_names[i].name) == n && !strncmp(epilogue_names[i].name, s, n)) found = i;
        if (found < 0)
            fail_msg("CUDA_HOST_CUBLASLT_REFUSE=%s: unknown epilogue name '%.*s' (expected a comma-separated "
                     "list of names such as BIAS,GELU_AUX_BIAS,BGRADB)", v, (int)n, s);
        mask |= 1u << found;
        if (!comma) break;
        s = comma + 1;
    }
    return mask;
}

// 1 if CUDA_HOST_CUBLASLT_REFUSE makes cublasLtMatmul refuse epilogue e (read once).
static int knob_refuses(unsigned e) {
    static const unsigned mask = parse_refuse_knob();
    for (int i = 0; i < NUM_EPILOGUE_NAMES; i++)
        if (epilogue_names[i].value == e) return (mask >> i) & 1;
    return 0;
}

// CUBLASLT_LOG_LEVEL from 1 on: the heuristic says why it found nothing (read once).
static int lt_logging(void) {
    static const int level = getenv("CUBLASLT_LOG_LEVEL") ? atoi(getenv("CUBLASLT_LOG_LEVEL")) : 0;
    return level > 0;
}

static int uses_bias(unsigned e) {
    return (e & (EPI_BIAS | EPI_BGRAD)) || e == CUBLASLT_EPILOGUE_BGRADA || e == CUBLASLT_EPILOGUE_BGRADB;
}
static int uses_aux(unsigned e) { return (e & EPI_AUX_OUT) != 0; }  // GELU_AUX(_BIAS), DGELU(_BGRAD)

// The largest power of two (at most 256) that divides the address.
static uint32_t align_of(const void* p) {
    const uintptr_t a = (uintptr_t)p;
    uint32_t al = 256;
    while (al > 1 && a % al) al >>= 1;
    return al;
}

// The largest power of two (at most 256) not above a promised alignment.
static uint32_t promise_pow2(uint32_t promise) {
    uint32_t al = 256;
    while (al > 1 && al > promise) al >>= 1;
    return al;
}

// Invalid whatever the algorithm: a bias or aux pointer not aligned to its elements, or an
// EPILOGUE_AUX_LD that cublasLt.h forbids.
static cublasStatus_t check_epilogue_operands(const char* what, cublasLtMatmulDesc_t d, const Problem* p) {
    if (uses_bias(p->epi) && (uintptr_t)d->bias % cuda_host_type_size(p->bias_type))
        return cuda_host_blas_fail(CUBLAS_STATUS_INVALID_VALUE, "%s: the bias pointer %p is not aligned to its "
                                   "%zu-byte elements", what, d->bias, cuda_host_type_size(p->bias_type));
    if (uses_aux(p->epi)) {
        if (d->aux_ld < p->m || d->aux_ld % 8)
            return cuda_host_blas_fail(CUBLAS_STATUS_INVALID_VALUE, "%s: EPILOGUE_AUX_LD %lld must be divisible "
                                       "by 8 and at least the %ld rows of D", what, d->aux_ld, p->m);
        if ((uintptr_t)d->aux % cuda_host_type_size(p->aux_type))
            return cuda_host_blas_fail(CUBLAS_STATUS_INVALID_VALUE, "%s: the aux pointer %p is not aligned to its "
                                       "%zu-byte elements", what, d->aux, cuda_host_type_size(p->aux_type));
    }
    return CUBLAS_STATUS_SUCCESS;
}

// The heuristic's choice for promised alignments of A, B, C, D: 1 and the algorithm, or 0 and the
// reason in why. Algorithm data words: [0] magic, [1] epilogue, [2..5] the alignments of A, B, C, D
// it was chosen for, [6] of the bias pointer, [7] of the aux pointer (0: not used).
static int choose_algo(cublasLtMatmulDesc_t d, const cublasLtMatrixLayout_t L[4], const Problem* p,
                       const uint32_t promise[4], cublasLtMatmulAlgo_t* algo, char* why, size_t why_len) {
    static const char name[4] = {'A', 'B', 'C', 'D'};
    const char* epi = epilogue_name(p->epi);
    memset(algo, 0, sizeof *algo);
    if (p->epi != CUBLASLT_EPILOGUE_DEFAULT) {  // tensor-core epilogue kernels: 16-byte vectors
        for (int i = 0; i < 4; i++) {
            const long long es = (long long)cuda_host_type_size(L[i]->type);
            if (promise[i] < 16) {
                snprintf(why, why_len, "epilogue %s needs 16-byte aligned matrices; MIN_ALIGNMENT_%c_BYTES "
                         "promises %u", epi, name[i], promise[i]);
                return 0;
            }
            if (L[i]->ld * es % 16 || (L[i]->batch > 1 && L[i]->stride * es % 16)) {
                snprintf(why, why_len, "epilogue %s needs leading dimensions and batch strides of 16-byte "
                         "multiples; %c has ld %lld, stride %lld of %lld-byte elements", epi, name[i],
                         (long long)L[i]->ld, (long long)L[i]->stride, es);
                return 0;
            }
        }
        const long long bs = (long long)cuda_host_type_size(p->bias_type);
        if (uses_bias(p->epi) && ((uintptr_t)d->bias % 16 || (p->batch > 1 && d->bias_stride * bs % 16))) {
            snprintf(why, why_len, "epilogue %s needs a 16-byte aligned bias vector; the bias pointer is %p "
                     "(batch stride %lld)", epi, d->bias, d->bias_stride);
            return 0;
        }
        const long long xs = (long long)cuda_host_type_size(p->aux_type);
        if (uses_aux(p->epi) && ((uintptr_t)d->aux % 16 || d->aux_ld * xs % 16 ||
                                 (p->batch > 1 && d->aux_stride * xs % 16))) {
            snprintf(why, why_len, "epilogue %s needs a 16-byte aligned aux matrix with a leading dimension "
                     "of a 16-byte multiple; the aux pointer is %p, EPILOGUE_AUX_LD %lld", epi, d->aux,
                     d->aux_ld);
            return 0;
        }
    }
    algo->data[0] = LT_MAGIC;
    algo->data[1] = p->epi;
    for (int i = 0; i < 4; i++) algo->data[2 + i] = promise_pow2(promise[i]);
    algo->data[6] = uses_bias(p->epi) ? align_of(d->bias) : 0;
    algo->data[7] = uses_aux(p->epi) ? align_of(d->aux) : 0;
    return 1;
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
    if ((st = check_epilogue_operands(what, desc, &p)) != CUBLAS_STATUS_SUCCESS) return st;
    const cublasLtMatrixLayout_t L[4] = {Adesc, Bdesc, Cdesc, Ddesc};
    cublasLtMatmulAlgo_t algo;
    char why[320];
    if (!choose_algo(desc, L, &p, pref->min_align, &algo, why, sizeof why)) {
        if (lt_logging()) fprintf(stderr, "cuda host runtime: %s: no algorithm: %s\n", what, why);
        return CUBLAS_STATUS_SUCCESS;  // as the real heuristic: success, nothing found
    }
    memset(&results[0], 0, sizeof results[0]);
    results[0].algo = algo;
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

// The matmul itself, when the scheduler runs it (arguments checked by cublasLtMatmul).
static void run_matmul(const Problem& p, const cublasLtMatmulDescOpaque_t& d, const cublasLtMatrixLayoutOpaque_t& La,
                       const cublasLtMatrixLayoutOpaque_t& Lb, const cublasLtMatrixLayoutOpaque_t& Lc,
                       const cublasLtMatrixLayoutOpaque_t& Ld, float al, float be, const void* A, const void* B,
                       const void* C, void* D) {
    long m = p.m, n = p.n, k = p.k;
    int bias_in = (p.epi & EPI_BIAS) != 0;
    int aux_used = (p.epi & EPI_AUX_OUT) != 0;
    long bias_len = p.epi == CUBLASLT_EPILOGUE_BGRADB ? n : m;
    long ar = p.ta ? k : m, ac = p.ta ? m : k, br = p.tb ? n : k, bc = p.tb ? k : n;
    size_t es = cuda_host_type_size(p.ab), ds = cuda_host_type_size(p.cd);
    size_t bs = cuda_host_type_size(p.bias_type), xs = cuda_host_type_size(p.aux_type);
    for (int b = 0; b < p.batch; b++) {
        const char* Ab = (const char*)A + (size_t)(b * La.stride) * es;
        const char* Bb = (const char*)B + (size_t)(b * Lb.stride) * es;
        const char* Cb = (const char*)C + (size_t)(b * Lc.stride) * ds;
        char* Db = (char*)D + (size_t)(b * Ld.stride) * ds;
        char* bias = (char*)d.bias + (size_t)(b * d.bias_stride) * bs;
        char* aux = (char*)d.aux + (size_t)(b * d.aux_stride) * xs;
        float* a = cuda_host_widen(Ab, p.ab, ar, ac, La.ld);
        float* bm = cuda_host_widen(Bb, p.ab, br, bc, Lb.ld);
        float* t = be != 0.0f ? cuda_host_widen(Cb, p.cd, m, n, Lc.ld)
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
                    x *= gelu_grad(cuda_host_load(aux, p.aux_type, (size_t)(j * d.aux_ld + i)));
                } else {
                    if (aux_used) cuda_host_store(aux, p.aux_type, (size_t)(j * d.aux_ld + i), x);
                    if (p.epi & EPI_GELU) x = gelu(x);
                    if (p.epi & EPI_RELU) x = x > 0.0f ? x : 0.0f;
                }
                t[j * m + i] = x;
                cuda_host_store(Db, p.cd, (size_t)(j * Ld.ld + i), x);
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
}

cublasStatus_t cublasLtMatmul(cublasLtHandle_t handle, cublasLtMatmulDesc_t desc, const void* alpha,
                              const void* A, cublasLtMatrixLayout_t Adesc, const void* B,
                              cublasLtMatrixLayout_t Bdesc, const void* beta, const void* C,
                              cublasLtMatrixLayout_t Cdesc, void* D, cublasLtMatrixLayout_t Ddesc,
                              const cublasLtMatmulAlgo_t* algo, void* workspace, size_t workspaceSize,
                              cudaStream_t stream) {
    const char* what = "cublasLtMatmul";
    (void)workspace, (void)workspaceSize;
    if (!handle || handle->magic != LT_MAGIC) return cuda_host_blas_fail(CUBLAS_STATUS_NOT_INITIALIZED, "invalid cuBLASLt handle");
    if (!cuda_host_stream_valid(stream)) return cuda_host_blas_fail(CUBLAS_STATUS_INVALID_VALUE, "%s: invalid stream", what);
    Problem p;
    cublasStatus_t st = check_problem(what, desc, Adesc, Bdesc, Cdesc, Ddesc, &p);
    if (st != CUBLAS_STATUS_SUCCESS) return st;
    if (!alpha || !beta) return cuda_host_blas_fail(CUBLAS_STATUS_INVALID_VALUE, "%s: NULL alpha or beta", what);
    // Host pointer mode: the scalars are read now (the caller may reuse them at once); device mode:
    // when the matmul runs, and C is checked whatever beta will be.
    const int device_scalars = desc->pointer_mode == CUBLASLT_POINTER_MODE_DEVICE;
    float al = device_scalars ? 1.0f : *(const float*)alpha, be = device_scalars ? 1.0f : *(const float*)beta;
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
    if ((st = check_epilogue_operands(what, desc, &p)) != CUBLAS_STATUS_SUCCESS) return st;
    if (aux_used && !cuda_host_operand_ok(what, "the aux matrix", desc->aux, p.aux_type, m, n, desc->aux_ld,
                                          desc->aux_stride, p.batch))
        return CUBLAS_STATUS_INVALID_VALUE;
    // The operands as the algorithm sees them (C only when read), element-aligned or invalid.
    static const char* const name[6] = {"A", "B", "C", "D", "the bias pointer", "the aux pointer"};
    const void* ptr[6] = {A, B, be != 0.0f ? C : NULL, D, bias_in || bias_out ? desc->bias : NULL,
                          aux_used ? desc->aux : NULL};
    const cudaDataType_t type[6] = {p.ab, p.ab, p.cd, p.cd, p.bias_type, p.aux_type};
    for (int i = 0; i < 6; i++)
        if ((uintptr_t)ptr[i] % cuda_host_type_size(type[i]))
            return cuda_host_blas_fail(CUBLAS_STATUS_INVALID_VALUE, "%s: %s (%p) is not aligned to its %zu-byte "
                                       "elements", what, name[i], ptr[i], cuda_host_type_size(type[i]));
    if (knob_refuses(p.epi))
        return cuda_host_blas_fail(CUBLAS_STATUS_NOT_SUPPORTED, "%s: epilogue %s refused by "
                                   "CUDA_HOST_CUBLASLT_REFUSE (a heuristic's algorithm that does not run)",
                                   what, epilogue_name(p.epi));
    cublasLtMatmulAlgo_t chosen;
    if (!algo) {  // cuBLASLt chooses, for the pointers at hand
        const cublasLtMatrixLayout_t L[4] = {Adesc, Bdesc, Cdesc, Ddesc};
        const uint32_t promise[4] = {align_of(A), align_of(B), align_of(ptr[2] ? C : D), align_of(D)};
        char why[320];
        if (!choose_algo(desc, L, &p, promise, &chosen, why, sizeof why))
            return cuda_host_blas_fail(CUBLAS_STATUS_NOT_SUPPORTED, "%s: no algorithm (algo NULL): %s", what, why);
        algo = &chosen;
    }
    if (algo->data[0] != LT_MAGIC)
        return cuda_host_blas_fail(CUBLAS_STATUS_INVALID_VALUE, "%s: the algorithm is not one from "
                                   "cublasLtMatmulAlgoGetHeuristic", what);
    if (algo->data[1] != p.epi)
        return cuda_host_blas_fail(CUBLAS_STATUS_NOT_SUPPORTED, "%s: the algorithm was chosen for epilogue %s, "
                                   "the descriptor asks for %s", what, epilogue_name((unsigned)algo->data[1]),
                                   epilogue_name(p.epi));
    for (int i = 0; i < 6; i++) {
        const uint64_t need = algo->data[2 + i];
        if (ptr[i] && align_of(ptr[i]) < need)
            return cuda_host_blas_fail(CUBLAS_STATUS_NOT_SUPPORTED, "%s: %s (%p) is %u-byte aligned; the algorithm "
                                       "(epilogue %s) was chosen for %llu-byte alignment", what, name[i], ptr[i],
                                       align_of(ptr[i]), epilogue_name(p.epi), (unsigned long long)need);
    }
    // Queued with everything it reads from the descriptors copied: the caller may change or
    // destroy them once the call returns, as with cuBLASLt.
    const cublasLtMatmulDescOpaque_t d = *desc;
    const cublasLtMatrixLayoutOpaque_t La = *Adesc, Lb = *Bdesc, Lc = *Cdesc, Ld = *Ddesc;
    const CudaHostTicket t = cuda_host_enqueue_fn(stream, what, [=] {
        const float a = device_scalars ? *(const float*)alpha : al, b = device_scalars ? *(const float*)beta : be;
        run_matmul(p, d, La, Lb, Lc, Ld, a, b, A, B, C, D);
    });
    cuda_host_count_launch(t);
    return CUBLAS_STATUS_SUCCESS;
}
