// fp32 GEMM on CBLAS with bf16/fp32 storage conversion, for cublas.cpp and cublaslt.cpp.
#include "tests/cuda_host/internal.h"
#include "comm/fail.h"

#include <cblas.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

size_t cuda_host_type_size(cudaDataType_t t) {
    return t == CUDA_R_32F ? 4 : t == CUDA_R_16BF ? 2 : 0;
}

const char* cuda_host_type_name(cudaDataType_t t) {
    switch (t) {
    case CUDA_R_32F: return "CUDA_R_32F";
    case CUDA_R_16BF: return "CUDA_R_16BF";
    case CUDA_R_16F: return "CUDA_R_16F";
    case CUDA_R_64F: return "CUDA_R_64F";
    case CUDA_R_8I: return "CUDA_R_8I";
    case CUDA_R_32I: return "CUDA_R_32I";
    default: return "an unknown cudaDataType";
    }
}

float cuda_host_load(const void* base, cudaDataType_t t, size_t i) {
    if (t == CUDA_R_32F) return ((const float*)base)[i];
    return __bfloat162float(((const __nv_bfloat16*)base)[i]);
}

void cuda_host_store(void* base, cudaDataType_t t, size_t i, float v) {
    if (t == CUDA_R_32F) ((float*)base)[i] = v;
    else ((__nv_bfloat16*)base)[i] = __float2bfloat16(v);
}

float* cuda_host_widen(const void* p, cudaDataType_t t, long rows, long cols, long ld) {
    float* out = (float*)xmalloc((size_t)(rows * cols) * sizeof(float), "GEMM operand");
    for (long c = 0; c < cols; c++)
        for (long r = 0; r < rows; r++) out[c * rows + r] = cuda_host_load(p, t, (size_t)(c * ld + r));
    return out;
}

cublasStatus_t cuda_host_blas_fail(cublasStatus_t status, const char* fmt, ...) {
    char msg[768];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    fprintf(stderr, "cuda host runtime: %s\n", msg);
    cuda_host_set_detail("%s", msg);
    return status;
}

int cuda_host_operand_ok(const char* what, const char* name, const void* p, cudaDataType_t t,
                         long rows, long cols, long ld, long long stride, int batch) {
    if (rows == 0 || cols == 0 || batch == 0) return 1;
    if (!p) {
        cuda_host_blas_fail(CUBLAS_STATUS_INVALID_VALUE, "%s: %s is NULL", what, name);
        return 0;
    }
    long long span = ((long long)(cols - 1) * ld + rows);
    if (batch > 1) span += (long long)(batch - 1) * (stride > 0 ? stride : 0);
    size_t bytes = (size_t)span * cuda_host_type_size(t);
    CudaHostMemKind k = cuda_host_mem_kind(p, bytes);
    if (k == CUDA_HOST_MEM_DEVICE || k == CUDA_HOST_MEM_PINNED) return 1;
    cuda_host_blas_fail(CUBLAS_STATUS_INVALID_VALUE, "%s: %s (%p, %zu bytes for %ld x %ld, ld %ld, "
                        "%d batches) %s", what, name, p, bytes, rows, cols, ld, batch,
                        k == CUDA_HOST_MEM_OVERRUN ? "runs past the end of its allocation"
                                                   : "is not in device memory");
    return 0;
}

void cuda_host_sgemm(int transa, int transb, int m, int n, int k, float alpha, const float* A,
                     long lda, const float* B, long ldb, float beta, float* T, long ldt) {
    if (m == 0 || n == 0) return;
    if (beta == 0.0f) {  // T may hold NaN poison, which 0 * NaN would keep
        for (int j = 0; j < n; j++) memset(T + (size_t)j * ldt, 0, (size_t)m * sizeof(float));
    }
    if (k == 0 || alpha == 0.0f) {
        if (beta != 0.0f && beta != 1.0f)
            for (int j = 0; j < n; j++)
                for (int i = 0; i < m; i++) T[(size_t)j * ldt + i] *= beta;
        return;
    }
    cblas_sgemm(CblasColMajor, transa ? CblasTrans : CblasNoTrans, transb ? CblasTrans : CblasNoTrans,
                m, n, k, alpha, A, (int)lda, B, (int)ldb, beta, T, (int)ldt);
}
