// What every CUDA source of the project includes first. It picks the real CUDA headers under
// nvcc, or the host runtime (tests/cuda_host) when the host C++ compiler builds the same source
// with -DCUDA_HOST, and defines the project's launch, dynamic shared memory and error-check macros
// so that one line of source means the same thing in both.
//
//   LAUNCH(kernel, grid, block, shmem_bytes, stream, args...)
//       kernel<<<grid, block, shmem_bytes, stream>>>(args...) under nvcc; a host launch under the
//       runtime. Errors are reported as CUDA reports them: CUDA_CHECK(cudaGetLastError()) after
//       the launch. Wrap a template kernel whose name has commas in parentheses:
//       LAUNCH((matmul_kernel<64, 4>), ...).
//   DYNAMIC_SHARED(T, name)
//       Declares `T* name` pointing at the block's dynamic shared memory (the launch's
//       shmem_bytes). Use it instead of `extern __shared__ T name[];`, which the host runtime
//       cannot express (it would fail to link).
//   CUDA_CHECK(call)
//       For cudaError_t and cublasStatus_t results: on failure prints file, line, the call, the
//       error's name and text, the host runtime's detail and a hint, then ends the job (fail_at).
#pragma once

#if defined(__CUDACC__)
#include <cublasLt.h>
#include <cublas_v2.h>
#include <cuda_bf16.h>
#include <cuda_runtime.h>
#include <curand_kernel.h>
#include <mma.h>
#elif defined(CUDA_HOST)
#include "tests/cuda_host/cuda_host.h"
#else
#error "compile CUDA sources with nvcc, or with the host C++ compiler and -DCUDA_HOST -x c++ (tests/cuda_host/module.mk)"
#endif

#include "comm/fail.h"

#if defined(__CUDACC__)
#define LAUNCH(kernel, grid, block, shmem_bytes, stream, ...) \
    kernel<<<(grid), (block), (shmem_bytes), (stream)>>>(__VA_ARGS__)
#define DYNAMIC_SHARED(T, name)                                              \
    extern __shared__ __align__(16) unsigned char cuda_dynamic_shared_[];   \
    T* name = reinterpret_cast<T*>(cuda_dynamic_shared_)
#define CUDA_CHECK_DETAIL() ""
#else
#define LAUNCH(kernel, grid, block, shmem_bytes, stream, ...)                                \
    cuda_host_launch(kernel, #kernel, __FILE__, __LINE__, dim3(grid), dim3(block),           \
                     (size_t)(shmem_bytes), (stream), ##__VA_ARGS__)
#define DYNAMIC_SHARED(T, name) T* name = reinterpret_cast<T*>(cuda_host_dynamic_smem())
#define CUDA_CHECK_DETAIL() cuda_host_error_detail()
#endif

static inline const char* cuda_error_hint(cudaError_t err) {
    switch (err) {
    case cudaErrorInvalidConfiguration:
        return "a block has more than 1024 threads (or a dimension over (1024, 1024, 64)), or the grid "
               "or block has a zero dimension";
    case cudaErrorInvalidValue:
        return "check sizes, pointers and copy directions; dynamic shared memory over 48 KiB needs "
               "cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, bytes)";
    case cudaErrorMemoryAllocation:
        return "out of device memory: reduce the batch size, sequence length or model size";
    case cudaErrorNoDevice:
        return "no CUDA GPU is visible: check CUDA_VISIBLE_DEVICES, or use the CPU backend";
    case cudaErrorInvalidDevice:
        return "the device index is out of range: check CUDA_VISIBLE_DEVICES and the local rank";
    case cudaErrorInvalidResourceHandle:
        return "a stream or event was used after being destroyed, or never created";
    case cudaErrorLaunchOutOfResources:
        return "the kernel needs too many registers or too much shared memory for this block size";
    default:
        return "";
    }
}

static inline const char* cuda_error_hint(cublasStatus_t st) {
    switch (st) {
    case CUBLAS_STATUS_NOT_INITIALIZED: return "create the handle (cublasCreate / cublasLtCreate) first";
    case CUBLAS_STATUS_INVALID_VALUE: return "check m, n, k, the leading dimensions, batch strides and pointers";
    case CUBLAS_STATUS_NOT_SUPPORTED: return "this type, layout or epilogue combination is not supported";
    case CUBLAS_STATUS_ARCH_MISMATCH: return "the GPU's compute capability lacks this feature";
    default: return "";
    }
}

static inline void cuda_check_at(cudaError_t err, const char* call, const char* file, int line) {
    if (err == cudaSuccess) return;
    const char* detail = CUDA_CHECK_DETAIL();
    fail_at(file, line, cuda_error_hint(err), "%s failed: %s (%s)%s%s", call, cudaGetErrorName(err),
            cudaGetErrorString(err), detail[0] ? ": " : "", detail);
}

static inline void cuda_check_at(cublasStatus_t st, const char* call, const char* file, int line) {
    if (st == CUBLAS_STATUS_SUCCESS) return;
    const char* detail = CUDA_CHECK_DETAIL();
    fail_at(file, line, cuda_error_hint(st), "%s failed: %s (%s)%s%s", call, cublasGetStatusName(st),
            cublasGetStatusString(st), detail[0] ? ": " : "", detail);
}

#define CUDA_CHECK(call) cuda_check_at((call), #call, __FILE__, __LINE__)
