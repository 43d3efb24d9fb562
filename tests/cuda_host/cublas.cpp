// cuBLAS GEMMs of the host runtime (see host_cublas.h for what is supported).
#include "tests/cuda_host/internal.h"
#include "comm/bf16.h"
#include "comm/fail.h"

#include <stdlib.h>
#include <string.h>

enum { HANDLE_MAGIC = 0x43424c53 };

struct cublasContext {
    unsigned magic;
    cudaStream_t stream;
    cublasPointerMode_t pointer_mode;
};

const char* cublasGetStatusName(cublasStatus_t status) {
    switch (status) {
    case CUBLAS_STATUS_SUCCESS: return "CUBLAS_STATUS_SUCCESS";
    case CUBLAS_STATUS_NOT_INITIALIZED: return "CUBLAS_STATUS_NOT_INITIALIZED";
    case CUBLAS_STATUS_ALLOC_FAILED: return "CUBLAS_STATUS_ALLOC_FAILED";
    case CUBLAS_STATUS_INVALID_VALUE: return "CUBLAS_STATUS_INVALID_VALUE";
    case CUBLAS_STATUS_ARCH_MISMATCH: return "CUBLAS_STATUS_ARCH_MISMATCH";
    case CUBLAS_STATUS_MAPPING_ERROR: return "CUBLAS_STATUS_MAPPING_ERROR";
    case CUBLAS_STATUS_EXECUTION_FAILED: return "CUBLAS_STATUS_EXECUTION_FAILED";
    case CUBLAS_STATUS_INTERNAL_ERROR: return "CUBLAS_STATUS_INTERNAL_ERROR";
    case CUBLAS_STATUS_NOT_SUPPORTED: return "CUBLAS_STATUS_NOT_SUPPORTED";
    case CUBLAS_STATUS_LICENSE_ERROR: return "CUBLAS_STATUS_LICENSE_ERROR";
    }
    return "CUBLAS_STATUS_UNKNOWN";
}

const char* cublasGetStatusString(cublasStatus_t status) {
    switch (status) {
    case CUBLAS_STATUS_SUCCESS: return "success";
    case CUBLAS_STATUS_NOT_INITIALIZED: return "the library was not initialized";
    case CUBLAS_STATUS_ALLOC_FAILED: return "the resource allocation failed";
    case CUBLAS_STATUS_INVALID_VALUE: return "an invalid numeric value was used as an argument";
    case CUBLAS_STATUS_NOT_SUPPORTED: return "the functionality requested is not supported";
    default: return "an internal operation failed";
    }
}

static int handle_ok(cublasHandle_t h) { return h && h->magic == HANDLE_MAGIC; }

cublasStatus_t cublasCreate(cublasHandle_t* handle) {
    if (!handle) return cuda_host_blas_fail(CUBLAS_STATUS_INVALID_VALUE, "cublasCreate: NULL handle");
    cublasHandle_t h = (cublasHandle_t)xcalloc(1, sizeof *h, "cuBLAS handle");
    h->magic = HANDLE_MAGIC;
    *handle = h;
    return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasDestroy(cublasHandle_t handle) {
    if (!handle_ok(handle)) return cuda_host_blas_fail(CUBLAS_STATUS_NOT_INITIALIZED, "invalid cuBLAS handle");
    cuda_host_drain_all("cublasDestroy");  // as cuBLAS: "implicitly calls cudaDeviceSynchronize()"
    handle->magic = 0;
    free(handle);
    return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasSetStream(cublasHandle_t handle, cudaStream_t stream) {
    if (!handle_ok(handle)) return cuda_host_blas_fail(CUBLAS_STATUS_NOT_INITIALIZED, "invalid cuBLAS handle");
    if (!cuda_host_stream_valid(stream))
        return cuda_host_blas_fail(CUBLAS_STATUS_INVALID_VALUE, "cublasSetStream: invalid stream");
    handle->stream = stream;
    return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasGetStream(cublasHandle_t handle, cudaStream_t* stream) {
    if (!handle_ok(handle)) return cuda_host_blas_fail(CUBLAS_STATUS_NOT_INITIALIZED, "invalid cuBLAS handle");
    if (!stream) return cuda_host_blas_fail(CUBLAS_STATUS_INVALID_VALUE, "cublasGetStream: NULL stream");
    *stream = handle->stream;
    return CUBLAS_STATUS_SUCCESS;
}

// Math modes only allow faster, less precise paths; fp32 is always used here.
cublasStatus_t cublasSetMathMode(cublasHandle_t handle, cublasMath_t mode) {
    if (!handle_ok(handle)) return cuda_host_blas_fail(CUBLAS_STATUS_NOT_INITIALIZED, "invalid cuBLAS handle");
    if (mode != CUBLAS_DEFAULT_MATH && mode != CUBLAS_TENSOR_OP_MATH && mode != CUBLAS_PEDANTIC_MATH &&
        mode != CUBLAS_TF32_TENSOR_OP_MATH)
        return cuda_host_blas_fail(CUBLAS_STATUS_INVALID_VALUE, "cublasSetMathMode: mode %d", (int)mode);
    return CUBLAS_STATUS_SUCCESS;
}

// Both modes work: device memory is host memory here. Host mode reads alpha and beta when the
// call is made, device mode when the GEMM runs, as cuBLAS does.
cublasStatus_t cublasSetPointerMode(cublasHandle_t handle, cublasPointerMode_t mode) {
    if (!handle_ok(handle)) return cuda_host_blas_fail(CUBLAS_STATUS_NOT_INITIALIZED, "invalid cuBLAS handle");
    if (mode != CUBLAS_POINTER_MODE_HOST && mode != CUBLAS_POINTER_MODE_DEVICE)
        return cuda_host_blas_fail(CUBLAS_STATUS_INVALID_VALUE, "cublasSetPointerMode: mode %d", (int)mode);
    handle->pointer_mode = mode;
    return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasSetWorkspace(cublasHandle_t handle, void* workspace, size_t bytes) {
    if (!handle_ok(handle)) return cuda_host_blas_fail(CUBLAS_STATUS_NOT_INITIALIZED, "invalid cuBLAS handle");
    (void)workspace, (void)bytes;  // not needed: CBLAS manages its own memory
    return CUBLAS_STATUS_SUCCESS;
}

static int compute_ok(cublasComputeType_t c) {
    return c == CUBLAS_COMPUTE_32F || c == CUBLAS_COMPUTE_32F_PEDANTIC || c == CUBLAS_COMPUTE_32F_FAST_16BF ||
           c == CUBLAS_COMPUTE_32F_FAST_TF32 || c == CUBLAS_COMPUTE_32F_FAST_16F;
}

// The mantissa bits a compute type keeps of fp32 inputs: the tensor cores read them as TF32 (10)
// or bf16 (7) under the FAST types; rounded here to nearest even (the hardware's conversion may
// differ in the last bit, so a test compares such GEMMs within a tolerance). 23: all of them.
static int fp32_input_bits(cublasComputeType_t c) {
    return c == CUBLAS_COMPUTE_32F_FAST_16BF ? 7 : c == CUBLAS_COMPUTE_32F_FAST_TF32 ? 10 : 23;
}

// A column-major fp32 operand (rows x cols, ld) rounded to `bits` mantissa bits, packed.
static float* rounded_operand(const void* p, long rows, long cols, long ld, int bits) {
    float* out = (float*)xmalloc((size_t)rows * cols * sizeof(float) + 1, "rounded GEMM input");
    for (long j = 0; j < cols; j++)
        for (long i = 0; i < rows; i++)
            out[j * rows + i] = float_round_mantissa(((const float*)p)[j * ld + i], bits);
    return out;
}

// The GEMM itself, when the scheduler runs it (arguments checked by gemm()).
static void run_gemm(int ta, int tb, int m, int n, int k, float al, const void* A, cudaDataType_t at,
                     long lda, long long sa, const void* B, cudaDataType_t bt, long ldb, long long sb,
                     float be, void* C, cudaDataType_t ct, long ldc, long long sc, int batch,
                     cublasComputeType_t compute) {
    long ar = ta ? k : m, ac = ta ? m : k, br = tb ? n : k, bc = tb ? k : n;
    size_t as = cuda_host_type_size(at), cs = cuda_host_type_size(ct);
    for (int b = 0; b < batch; b++) {
        const char* Ab = (const char*)A + (size_t)(b * sa) * as;
        const char* Bb = (const char*)B + (size_t)(b * sb) * as;
        char* Cb = (char*)C + (size_t)(b * sc) * cs;
        const float *a = (const float*)Ab, *bm = (const float*)Bb;
        float *wa = NULL, *wb = NULL;
        long la = lda, lb = ldb;
        if (at == CUDA_R_16BF && k > 0) {
            a = wa = cuda_host_widen(Ab, at, ar, ac, lda), la = ar;
            bm = wb = cuda_host_widen(Bb, bt, br, bc, ldb), lb = br;
        } else if (fp32_input_bits(compute) < 23 && k > 0) {
            a = wa = rounded_operand(Ab, ar, ac, lda, fp32_input_bits(compute)), la = ar;
            bm = wb = rounded_operand(Bb, br, bc, ldb, fp32_input_bits(compute)), lb = br;
        }
        if (ct == CUDA_R_32F) {
            cuda_host_sgemm(ta, tb, m, n, k, al, a, la, bm, lb, be, (float*)Cb, ldc);
        } else {
            float* t = be != 0.0f ? cuda_host_widen(Cb, ct, m, n, ldc)
                                  : (float*)xmalloc((size_t)m * n * sizeof(float), "GEMM result");
            cuda_host_sgemm(ta, tb, m, n, k, al, a, la, bm, lb, be, t, m);
            for (long j = 0; j < n; j++)
                for (long i = 0; i < m; i++) cuda_host_store(Cb, ct, (size_t)(j * ldc + i), t[j * m + i]);
            free(t);
        }
        free(wa);
        free(wb);
    }
}

// The one strided-batched GEMM every entry point goes through: checked now, queued on the
// handle's stream.
static cublasStatus_t gemm(const char* what, cublasHandle_t handle, cublasOperation_t transa,
                           cublasOperation_t transb, int m, int n, int k, const void* alpha,
                           const void* A, cudaDataType_t at, int lda, long long sa, const void* B,
                           cudaDataType_t bt, int ldb, long long sb, const void* beta, void* C,
                           cudaDataType_t ct, int ldc, long long sc, int batch,
                           cublasComputeType_t compute) {
    if (!handle_ok(handle)) return cuda_host_blas_fail(CUBLAS_STATUS_NOT_INITIALIZED, "%s: invalid handle", what);
    if (!compute_ok(compute))
        return cuda_host_blas_fail(CUBLAS_STATUS_NOT_SUPPORTED, "%s: compute type %d is not supported by "
                                   "the host runtime (CUBLAS_COMPUTE_32F family only)", what, (int)compute);
    if (at != bt || !cuda_host_type_size(at) || !cuda_host_type_size(ct) ||
        (at == CUDA_R_32F && ct != CUDA_R_32F))
        return cuda_host_blas_fail(CUBLAS_STATUS_NOT_SUPPORTED, "%s: types A %s, B %s, C %s are not "
                                   "supported by the host runtime (A = B in {32F, 16BF}, C in {32F, 16BF}, "
                                   "32F inputs need a 32F C)", what, cuda_host_type_name(at),
                                   cuda_host_type_name(bt), cuda_host_type_name(ct));
    if (transa > CUBLAS_OP_C || transb > CUBLAS_OP_C || transa < 0 || transb < 0)
        return cuda_host_blas_fail(CUBLAS_STATUS_INVALID_VALUE, "%s: invalid transpose", what);
    int ta = transa != CUBLAS_OP_N, tb = transb != CUBLAS_OP_N;  // real types: C means T
    long ar = ta ? k : m, ac = ta ? m : k, br = tb ? n : k, bc = tb ? k : n;
    if (m < 0 || n < 0 || k < 0 || batch < 0 || sa < 0 || sb < 0 || sc < 0 || lda < (ar > 1 ? ar : 1) || ldb < (br > 1 ? br : 1) ||
        ldc < (m > 1 ? m : 1))
        return cuda_host_blas_fail(CUBLAS_STATUS_INVALID_VALUE, "%s: m %d, n %d, k %d, lda %d, ldb %d, "
                                   "ldc %d, batch %d (strides %lld, %lld, %lld) are inconsistent", what,
                                   m, n, k, lda, ldb, ldc, batch, sa, sb, sc);
    if (m == 0 || n == 0 || batch == 0) return CUBLAS_STATUS_SUCCESS;
    if (!alpha || !beta) return cuda_host_blas_fail(CUBLAS_STATUS_INVALID_VALUE, "%s: NULL alpha or beta", what);
    // Host pointer mode: the scalars are read now (the caller may reuse them at once); device mode:
    // when the GEMM runs, and A and B are checked whatever alpha will be.
    const int device_scalars = handle->pointer_mode == CUBLAS_POINTER_MODE_DEVICE;
    float al = device_scalars ? 1.0f : *(const float*)alpha, be = device_scalars ? 1.0f : *(const float*)beta;
    if ((k > 0 && al != 0.0f && (!cuda_host_operand_ok(what, "A", A, at, ar, ac, lda, sa, batch) ||
                                 !cuda_host_operand_ok(what, "B", B, bt, br, bc, ldb, sb, batch))) ||
        !cuda_host_operand_ok(what, "C", C, ct, m, n, ldc, sc, batch))
        return CUBLAS_STATUS_INVALID_VALUE;
    const CudaHostTicket t = cuda_host_enqueue_fn(handle->stream, what, [=] {
        const float a = device_scalars ? *(const float*)alpha : al, b = device_scalars ? *(const float*)beta : be;
        run_gemm(ta, tb, m, n, k, a, A, at, lda, sa, B, bt, ldb, sb, b, C, ct, ldc, sc, batch, compute);
    });
    cuda_host_count_launch(t);
    return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasSgemm(cublasHandle_t handle, cublasOperation_t transa, cublasOperation_t transb,
                           int m, int n, int k, const float* alpha, const float* A, int lda,
                           const float* B, int ldb, const float* beta, float* C, int ldc) {
    return gemm("cublasSgemm", handle, transa, transb, m, n, k, alpha, A, CUDA_R_32F, lda, 0, B,
                CUDA_R_32F, ldb, 0, beta, C, CUDA_R_32F, ldc, 0, 1, CUBLAS_COMPUTE_32F);
}

cublasStatus_t cublasSgemmStridedBatched(cublasHandle_t handle, cublasOperation_t transa,
                                         cublasOperation_t transb, int m, int n, int k,
                                         const float* alpha, const float* A, int lda,
                                         long long strideA, const float* B, int ldb,
                                         long long strideB, const float* beta, float* C, int ldc,
                                         long long strideC, int batchCount) {
    return gemm("cublasSgemmStridedBatched", handle, transa, transb, m, n, k, alpha, A, CUDA_R_32F,
                lda, strideA, B, CUDA_R_32F, ldb, strideB, beta, C, CUDA_R_32F, ldc, strideC,
                batchCount, CUBLAS_COMPUTE_32F);
}

cublasStatus_t cublasGemmEx(cublasHandle_t handle, cublasOperation_t transa, cublasOperation_t transb,
                            int m, int n, int k, const void* alpha, const void* A, cudaDataType_t Atype,
                            int lda, const void* B, cudaDataType_t Btype, int ldb, const void* beta,
                            void* C, cudaDataType_t Ctype, int ldc, cublasComputeType_t computeType,
                            cublasGemmAlgo_t algo) {
    (void)algo;  // every algorithm computes the same product
    return gemm("cublasGemmEx", handle, transa, transb, m, n, k, alpha, A, Atype, lda, 0, B, Btype,
                ldb, 0, beta, C, Ctype, ldc, 0, 1, computeType);
}

cublasStatus_t cublasGemmStridedBatchedEx(cublasHandle_t handle, cublasOperation_t transa,
                                          cublasOperation_t transb, int m, int n, int k,
                                          const void* alpha, const void* A, cudaDataType_t Atype,
                                          int lda, long long strideA, const void* B,
                                          cudaDataType_t Btype, int ldb, long long strideB,
                                          const void* beta, void* C, cudaDataType_t Ctype, int ldc,
                                          long long strideC, int batchCount,
                                          cublasComputeType_t computeType, cublasGemmAlgo_t algo) {
    (void)algo;
    return gemm("cublasGemmStridedBatchedEx", handle, transa, transb, m, n, k, alpha, A, Atype, lda,
                strideA, B, Btype, ldb, strideB, beta, C, Ctype, ldc, strideC, batchCount, computeType);
}
