// cuBLAS and cuBLASLt for the host runtime, on CBLAS (OpenBLAS). Column-major, as cuBLAS.
//
// Supported: A and B both CUDA_R_32F or both CUDA_R_16BF; C/D CUDA_R_32F or CUDA_R_16BF (bf16
// A/B with fp32 C/D allowed; fp32 A/B need fp32 C/D); compute CUBLAS_COMPUTE_32F and its
// _PEDANTIC/_FAST_* variants, all computed in full fp32 (bf16 inputs are widened exactly, sgemm
// runs in fp32, bf16 outputs are rounded once, to nearest even), except that cuBLAS's GEMMs
// (not cuBLASLt's) under _FAST_16BF and _FAST_TF32 first round fp32 inputs to nearest even at
// bf16's or TF32's mantissa, as tensor cores read them; scale type CUDA_R_32F; alpha and
// beta read as float (host or device pointer mode, both are host memory here: read when the call
// is made in host mode, when the GEMM runs in device mode). A call checks its arguments and
// queues the GEMM on its stream (the handle's for cuBLAS), with the descriptors copied. Operands must lie
// inside memory from cudaMalloc/cudaMallocHost (checked, with the footprint given by the sizes).
// Anything else returns CUBLAS_STATUS_NOT_SUPPORTED or _INVALID_VALUE and prints why to stderr.
//
// cuBLASLt epilogues: DEFAULT, RELU, RELU_BIAS, BIAS, GELU, GELU_BIAS, GELU_AUX, GELU_AUX_BIAS,
// DGELU, DGELU_BGRAD, BGRADA, BGRADB. GELU is the tanh approximation. With x = alpha*op(A)op(B)
// + beta*C (+ bias[row] for *_BIAS): *_AUX stores x to the aux matrix (EPILOGUE_AUX_POINTER,
// _AUX_LD) and D = gelu(x); DGELU gives D = x * gelu'(aux); DGELU_BGRAD also stores the row sums
// of D to the bias pointer (the reading users such as apex's fused MLP rely on; cuBLASLt's text,
// "apply independently GELU and Bias gradient to matmul output", does not settle whether the sums
// are taken before or after the GELU gradient, so model/matmul.cu does not use it); BGRADA stores bias[i] = sum_k op(A)[i][k], BGRADB bias[j] = sum_k
// op(B)[k][j] (alpha not applied). Bias and aux types default to D's type (BIAS_DATA_TYPE and
// EPILOGUE_AUX_DATA_TYPE may set fp32 or bf16). Layouts: column order only, batches through
// BATCH_COUNT and STRIDED_BATCH_OFFSET (bias and aux batch strides too). The workspace is unused.
//
// What cuBLASLt refuses: a conservative model of its documented constraints, not a copy of its
// rules (real cuBLASLt chooses among kernels whose alignment needs are not published). It may
// refuse a problem a GPU would run, so that callers' fallback paths run in tests; a GPU may still
// refuse something it accepts (other kernels, types or versions), so callers must handle both:
// - Invalid (CUBLAS_STATUS_INVALID_VALUE, in the heuristic and the matmul): an A/B/C/D, bias or
//   aux pointer not aligned to its element size; an EPILOGUE_AUX_LD that is not a multiple of 8
//   or less than D's rows (cublasLt.h: "Must be divisible by 8 and be no less than the number of
//   rows in the output matrix").
// - cublasLtMatmulAlgoGetHeuristic: the MIN_ALIGNMENT_A/B/C/D_BYTES preferences are the
//   alignment the caller promises for each matrix (cublasLt.h: "uint32_t, default: 256";
//   "Selecting a smaller value will exclude algorithms that can not work with matrix A that is
//   not as strictly aligned as they need"), and the bias and aux pointers set in the descriptor
//   count for their alignment ("Routines that don't dereference this pointer, like
//   cublasLtMatmulAlgoGetHeuristic() depend on its value to determine expected pointer
//   alignment"). Epilogue DEFAULT: one algorithm at any alignment. Any other epilogue (bias,
//   GELU and bias-gradient epilogues run in tensor-core kernels with 16-byte vector accesses;
//   our assumption, not a documented rule): no algorithm (0 found, status SUCCESS, as the real
//   heuristic answers when nothing fits) when a promised alignment is under 16 bytes, a leading
//   dimension (EPILOGUE_AUX_LD included) or, with batches, a batch stride times the element size
//   is not a multiple of 16 bytes, or the bias or aux pointer is not 16-byte aligned. Set
//   CUBLASLT_LOG_LEVEL (any value from 1) to have the reason printed, as the real library logs.
//   The algorithm records the alignments it was chosen for in its data words: the promises (a
//   power of two, at most 256) and the bias and aux pointers' own alignment.
// - cublasLtMatmul: CUBLAS_STATUS_NOT_SUPPORTED, the reason printed to stderr, when an A, B, D
//   (C when beta != 0), bias or aux pointer is less aligned than the algorithm was chosen for, or
//   the algorithm was chosen for another epilogue.
//   cublasLt.h warns (of cublasLtMatmulAlgoCheck) that success "doesn't fully guarantee algo will
//   run (will fail if e.g. buffers are not correctly aligned)". A NULL algorithm is chosen as the
//   heuristic would for the pointers' own alignment.
// - Fault injection: CUDA_HOST_CUBLASLT_REFUSE, a comma-separated list of epilogue names without
//   the CUBLASLT_EPILOGUE_ prefix (e.g. "BGRADB,GELU_AUX_BIAS,BIAS"), makes cublasLtMatmul (not
//   the heuristic) return NOT_SUPPORTED for those epilogues: a cuBLASLt whose heuristic offers an
//   algorithm that then refuses to run. Read once, at the first cublasLtMatmul; an unknown name
//   ends the program with a one-line error.
#pragma once
#include <stddef.h>
#include <stdint.h>
#include "tests/cuda_host/host_runtime.h"

typedef enum {
    CUBLAS_STATUS_SUCCESS = 0,
    CUBLAS_STATUS_NOT_INITIALIZED = 1,
    CUBLAS_STATUS_ALLOC_FAILED = 3,
    CUBLAS_STATUS_INVALID_VALUE = 7,
    CUBLAS_STATUS_ARCH_MISMATCH = 8,
    CUBLAS_STATUS_MAPPING_ERROR = 11,
    CUBLAS_STATUS_EXECUTION_FAILED = 13,
    CUBLAS_STATUS_INTERNAL_ERROR = 14,
    CUBLAS_STATUS_NOT_SUPPORTED = 15,
    CUBLAS_STATUS_LICENSE_ERROR = 16
} cublasStatus_t;

typedef enum { CUBLAS_OP_N = 0, CUBLAS_OP_T = 1, CUBLAS_OP_C = 2 } cublasOperation_t;
typedef enum { CUBLAS_POINTER_MODE_HOST = 0, CUBLAS_POINTER_MODE_DEVICE = 1 } cublasPointerMode_t;
typedef enum {
    CUBLAS_DEFAULT_MATH = 0,
    CUBLAS_TENSOR_OP_MATH = 1,
    CUBLAS_PEDANTIC_MATH = 2,
    CUBLAS_TF32_TENSOR_OP_MATH = 3
} cublasMath_t;
typedef enum { CUBLAS_GEMM_DEFAULT = -1, CUBLAS_GEMM_DEFAULT_TENSOR_OP = 99 } cublasGemmAlgo_t;

typedef enum cudaDataType_t {
    CUDA_R_32F = 0,
    CUDA_R_64F = 1,
    CUDA_R_16F = 2,
    CUDA_R_8I = 3,
    CUDA_R_32I = 10,
    CUDA_R_16BF = 14
} cudaDataType_t;
typedef cudaDataType_t cudaDataType;

typedef enum {
    CUBLAS_COMPUTE_16F = 64,
    CUBLAS_COMPUTE_32F = 68,
    CUBLAS_COMPUTE_32F_PEDANTIC = 69,
    CUBLAS_COMPUTE_64F = 70,
    CUBLAS_COMPUTE_32I = 72,
    CUBLAS_COMPUTE_32F_FAST_16F = 74,
    CUBLAS_COMPUTE_32F_FAST_16BF = 75,
    CUBLAS_COMPUTE_32F_FAST_TF32 = 77
} cublasComputeType_t;

typedef struct cublasContext* cublasHandle_t;

const char* cublasGetStatusName(cublasStatus_t status);
const char* cublasGetStatusString(cublasStatus_t status);
cublasStatus_t cublasCreate(cublasHandle_t* handle);
cublasStatus_t cublasDestroy(cublasHandle_t handle);
cublasStatus_t cublasSetStream(cublasHandle_t handle, cudaStream_t stream);
cublasStatus_t cublasGetStream(cublasHandle_t handle, cudaStream_t* stream);
cublasStatus_t cublasSetMathMode(cublasHandle_t handle, cublasMath_t mode);
cublasStatus_t cublasSetPointerMode(cublasHandle_t handle, cublasPointerMode_t mode);
cublasStatus_t cublasSetWorkspace(cublasHandle_t handle, void* workspace, size_t bytes);

cublasStatus_t cublasSgemm(cublasHandle_t handle, cublasOperation_t transa, cublasOperation_t transb,
                           int m, int n, int k, const float* alpha, const float* A, int lda,
                           const float* B, int ldb, const float* beta, float* C, int ldc);
cublasStatus_t cublasSgemmStridedBatched(cublasHandle_t handle, cublasOperation_t transa,
                                         cublasOperation_t transb, int m, int n, int k,
                                         const float* alpha, const float* A, int lda,
                                         long long strideA, const float* B, int ldb,
                                         long long strideB, const float* beta, float* C, int ldc,
                                         long long strideC, int batchCount);
cublasStatus_t cublasGemmEx(cublasHandle_t handle, cublasOperation_t transa, cublasOperation_t transb,
                            int m, int n, int k, const void* alpha, const void* A, cudaDataType_t Atype,
                            int lda, const void* B, cudaDataType_t Btype, int ldb, const void* beta,
                            void* C, cudaDataType_t Ctype, int ldc, cublasComputeType_t computeType,
                            cublasGemmAlgo_t algo);
cublasStatus_t cublasGemmStridedBatchedEx(cublasHandle_t handle, cublasOperation_t transa,
                                          cublasOperation_t transb, int m, int n, int k,
                                          const void* alpha, const void* A, cudaDataType_t Atype,
                                          int lda, long long strideA, const void* B,
                                          cudaDataType_t Btype, int ldb, long long strideB,
                                          const void* beta, void* C, cudaDataType_t Ctype, int ldc,
                                          long long strideC, int batchCount,
                                          cublasComputeType_t computeType, cublasGemmAlgo_t algo);

// --- cuBLASLt ----------------------------------------------------------------------------------

typedef enum {
    CUBLASLT_EPILOGUE_DEFAULT = 1,
    CUBLASLT_EPILOGUE_RELU = 2,
    CUBLASLT_EPILOGUE_RELU_AUX = 2 | 128,
    CUBLASLT_EPILOGUE_BIAS = 4,
    CUBLASLT_EPILOGUE_RELU_BIAS = 2 | 4,
    CUBLASLT_EPILOGUE_RELU_AUX_BIAS = 2 | 128 | 4,
    CUBLASLT_EPILOGUE_DRELU = 8 | 128,
    CUBLASLT_EPILOGUE_DRELU_BGRAD = 8 | 128 | 16,
    CUBLASLT_EPILOGUE_GELU = 32,
    CUBLASLT_EPILOGUE_GELU_AUX = 32 | 128,
    CUBLASLT_EPILOGUE_GELU_BIAS = 32 | 4,
    CUBLASLT_EPILOGUE_GELU_AUX_BIAS = 32 | 128 | 4,
    CUBLASLT_EPILOGUE_DGELU = 64 | 128,
    CUBLASLT_EPILOGUE_DGELU_BGRAD = 64 | 128 | 16,
    CUBLASLT_EPILOGUE_BGRADA = 256,
    CUBLASLT_EPILOGUE_BGRADB = 512
} cublasLtEpilogue_t;

typedef enum {
    CUBLASLT_MATMUL_DESC_COMPUTE_TYPE = 0,
    CUBLASLT_MATMUL_DESC_SCALE_TYPE = 1,
    CUBLASLT_MATMUL_DESC_POINTER_MODE = 2,
    CUBLASLT_MATMUL_DESC_TRANSA = 3,
    CUBLASLT_MATMUL_DESC_TRANSB = 4,
    CUBLASLT_MATMUL_DESC_TRANSC = 5,
    CUBLASLT_MATMUL_DESC_FILL_MODE = 6,
    CUBLASLT_MATMUL_DESC_EPILOGUE = 7,
    CUBLASLT_MATMUL_DESC_BIAS_POINTER = 8,
    CUBLASLT_MATMUL_DESC_BIAS_BATCH_STRIDE = 10,
    CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER = 11,
    CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD = 12,
    CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_BATCH_STRIDE = 13,
    CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_DATA_TYPE = 22,
    CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE = 26
} cublasLtMatmulDescAttributes_t;

typedef enum {
    CUBLASLT_MATRIX_LAYOUT_TYPE = 0,
    CUBLASLT_MATRIX_LAYOUT_ORDER = 1,
    CUBLASLT_MATRIX_LAYOUT_ROWS = 2,
    CUBLASLT_MATRIX_LAYOUT_COLS = 3,
    CUBLASLT_MATRIX_LAYOUT_LD = 4,
    CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT = 5,
    CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET = 6
} cublasLtMatrixLayoutAttribute_t;

typedef enum { CUBLASLT_ORDER_COL = 0, CUBLASLT_ORDER_ROW = 1 } cublasLtOrder_t;
typedef enum {
    CUBLASLT_POINTER_MODE_HOST = 0,
    CUBLASLT_POINTER_MODE_DEVICE = 1
} cublasLtPointerMode_t;

typedef enum {
    CUBLASLT_MATMUL_PREF_SEARCH_MODE = 0,
    CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES = 1,
    CUBLASLT_MATMUL_PREF_REDUCTION_SCHEME_MASK = 3,
    CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES = 5,
    CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES = 6,
    CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES = 7,
    CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES = 8,
    CUBLASLT_MATMUL_PREF_MAX_WAVES_COUNT = 9,
    CUBLASLT_MATMUL_PREF_IMPL_MASK = 12
} cublasLtMatmulPreferenceAttributes_t;

typedef struct cublasLtContext* cublasLtHandle_t;
typedef struct cublasLtMatmulDescOpaque_t* cublasLtMatmulDesc_t;
typedef struct cublasLtMatrixLayoutOpaque_t* cublasLtMatrixLayout_t;
typedef struct cublasLtMatmulPreferenceOpaque_t* cublasLtMatmulPreference_t;
typedef struct {
    uint64_t data[8];
} cublasLtMatmulAlgo_t;
typedef struct {
    cublasLtMatmulAlgo_t algo;
    size_t workspaceSize;
    cublasStatus_t state;
    float wavesCount;
    int reserved[4];
} cublasLtMatmulHeuristicResult_t;

cublasStatus_t cublasLtCreate(cublasLtHandle_t* handle);
cublasStatus_t cublasLtDestroy(cublasLtHandle_t handle);
cublasStatus_t cublasLtMatmulDescCreate(cublasLtMatmulDesc_t* desc, cublasComputeType_t computeType,
                                        cudaDataType_t scaleType);
cublasStatus_t cublasLtMatmulDescDestroy(cublasLtMatmulDesc_t desc);
cublasStatus_t cublasLtMatmulDescSetAttribute(cublasLtMatmulDesc_t desc,
                                              cublasLtMatmulDescAttributes_t attr, const void* buf,
                                              size_t size);
cublasStatus_t cublasLtMatrixLayoutCreate(cublasLtMatrixLayout_t* layout, cudaDataType_t type,
                                          uint64_t rows, uint64_t cols, int64_t ld);
cublasStatus_t cublasLtMatrixLayoutDestroy(cublasLtMatrixLayout_t layout);
cublasStatus_t cublasLtMatrixLayoutSetAttribute(cublasLtMatrixLayout_t layout,
                                                cublasLtMatrixLayoutAttribute_t attr,
                                                const void* buf, size_t size);
cublasStatus_t cublasLtMatmulPreferenceCreate(cublasLtMatmulPreference_t* pref);
cublasStatus_t cublasLtMatmulPreferenceDestroy(cublasLtMatmulPreference_t pref);
cublasStatus_t cublasLtMatmulPreferenceSetAttribute(cublasLtMatmulPreference_t pref,
                                                    cublasLtMatmulPreferenceAttributes_t attr,
                                                    const void* buf, size_t size);
// One algorithm when the runtime supports the problem and the refusal model above lets it run;
// none with SUCCESS when the model refuses it; none with NOT_SUPPORTED if the runtime lacks it.
cublasStatus_t cublasLtMatmulAlgoGetHeuristic(cublasLtHandle_t handle, cublasLtMatmulDesc_t desc,
                                              cublasLtMatrixLayout_t Adesc,
                                              cublasLtMatrixLayout_t Bdesc,
                                              cublasLtMatrixLayout_t Cdesc,
                                              cublasLtMatrixLayout_t Ddesc,
                                              cublasLtMatmulPreference_t pref, int requestedAlgoCount,
                                              cublasLtMatmulHeuristicResult_t results[],
                                              int* returnAlgoCount);
cublasStatus_t cublasLtMatmul(cublasLtHandle_t handle, cublasLtMatmulDesc_t desc, const void* alpha,
                              const void* A, cublasLtMatrixLayout_t Adesc, const void* B,
                              cublasLtMatrixLayout_t Bdesc, const void* beta, const void* C,
                              cublasLtMatrixLayout_t Cdesc, void* D, cublasLtMatrixLayout_t Ddesc,
                              const cublasLtMatmulAlgo_t* algo, void* workspace,
                              size_t workspaceSize, cudaStream_t stream);
