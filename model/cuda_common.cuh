// What every CUDA source of the project includes first. It picks the real CUDA headers under
// nvcc, or the host runtime (tests/cuda_host) when the host C++ compiler builds the same source
// with -DCUDA_HOST, and defines the project's launch, dynamic shared memory and error-check macros
// so that one line of source means the same thing in both.
//
//   LAUNCH(kernel, grid, block, shmem_bytes, stream, args...)
//       kernel<<<grid, block, shmem_bytes, stream>>>(args...) under nvcc; a host launch under the
//       runtime. The launch is checked where it is written (cudaGetLastError): a refused launch
//       ends the job naming the kernel, file and line. With GPT_CUDA_SYNC_CHECK=1 in the
//       environment every launch is also followed by cudaDeviceSynchronize and a check, so a kernel
//       that faults is named at its own launch rather than at the next synchronisation (slow: for
//       debugging). Wrap a template kernel whose name has commas in parentheses:
//       LAUNCH((matmul_kernel<64, 4>), ...).
//   LAUNCH_UNCHECKED(...)
//       The launch alone, for tests that inspect cudaGetLastError themselves.
//   DYNAMIC_SHARED(T, name)
//       Declares `T* name` pointing at the block's dynamic shared memory (the launch's
//       shmem_bytes), 128-byte aligned. Use it instead of `extern __shared__ T name[];`, which the
//       host runtime cannot express (it would fail to link).
//   CUDA_CHECK(call)
//       For cudaError_t and cublasStatus_t results: on failure prints file, line, the call, the
//       error's name and text, the host runtime's detail and a hint, then ends the job (fail_at).
//   CUDA_RAISE_DYNAMIC_SMEM(kernel, bytes, what, value)
//       Lets `kernel` launch with `bytes` of dynamic shared memory (cudaFuncSetAttribute), once per
//       kernel and size; first checks the device's opt-in limit
//       (cudaDevAttrMaxSharedMemoryPerBlockOptin) and, if the request is over it, ends the job with
//       one line naming the kernel, what the size depends on ("head size", 128) and both sizes.
#pragma once

#if defined(__CUDACC__)
#include <cublasLt.h>
#include <cublas_v2.h>
#include <cuda_bf16.h>
#include <cuda_runtime.h>
#elif defined(CUDA_HOST)
#include "tests/cuda_host/cuda_host.h"
#else
#error "compile CUDA sources with nvcc, or with the host C++ compiler and -DCUDA_HOST -x c++ (tests/cuda_host/module.mk)"
#endif

#include <stdlib.h>
#include <string.h>

#include "comm/fail.h"

#if defined(__CUDACC__)
#define LAUNCH_UNCHECKED(kernel, grid, block, shmem_bytes, stream, ...) \
    kernel<<<(grid), (block), (shmem_bytes), (stream)>>>(__VA_ARGS__)
// 128 bytes: the kernels' shared-memory layouts align their regions to 128 (ldmatrix, cp.async: 16).
#define DYNAMIC_SHARED(T, name)                                              \
    extern __shared__ __align__(128) unsigned char cuda_dynamic_shared_[];  \
    T* name = reinterpret_cast<T*>(cuda_dynamic_shared_)
#define CUDA_CHECK_DETAIL() ""
#else
#define LAUNCH_UNCHECKED(kernel, grid, block, shmem_bytes, stream, ...)                      \
    cuda_host_launch(kernel, #kernel, __FILE__, __LINE__, dim3(grid), dim3(block),           \
                     (size_t)(shmem_bytes), (stream), ##__VA_ARGS__)
#define DYNAMIC_SHARED(T, name) T* name = reinterpret_cast<T*>(cuda_host_dynamic_smem())
#define CUDA_CHECK_DETAIL() cuda_host_error_detail()
#endif

#define LAUNCH(kernel, grid, block, shmem_bytes, stream, ...)                       \
    do {                                                                             \
        LAUNCH_UNCHECKED(kernel, grid, block, shmem_bytes, stream, ##__VA_ARGS__);   \
        cuda_launch_check(#kernel, __FILE__, __LINE__);                              \
    } while (0)

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

// GPT_CUDA_SYNC_CHECK set to anything but "" or "0": synchronise after every launch (read once per
// translation unit; the environment does not change while a program runs).
static inline int cuda_sync_check_enabled(void) {
    static int enabled = -1;
    if (enabled < 0) {
        const char* v = getenv("GPT_CUDA_SYNC_CHECK");
        enabled = v && v[0] && strcmp(v, "0") != 0;
    }
    return enabled;
}

static inline void cuda_launch_check(const char* kernel, const char* file, int line) {
    cudaError_t err = cudaGetLastError();
    const char* when = "launch of";
    if (err == cudaSuccess && cuda_sync_check_enabled()) {
        err = cudaDeviceSynchronize();
        when = "GPT_CUDA_SYNC_CHECK: synchronising after";
    }
    if (err == cudaSuccess) return;
    const char* detail = CUDA_CHECK_DETAIL();
    fail_at(file, line, cuda_error_hint(err), "%s kernel %s failed: %s (%s)%s%s", when, kernel,
            cudaGetErrorName(err), cudaGetErrorString(err), detail[0] ? ": " : "", detail);
}

// The largest dynamic shared memory a block may opt in to on the current device, asked once per
// device (and translation unit) and remembered: the answer does not change while a program runs.
static inline int cuda_max_dynamic_smem_optin(void) {
    enum { MAX_DEVICES = 64 };
    static int known[MAX_DEVICES];  // 0: not asked yet
    int device = 0, bytes = 0;
    CUDA_CHECK(cudaGetDevice(&device));
    if (device >= 0 && device < MAX_DEVICES && known[device]) return known[device];
    CUDA_CHECK(cudaDeviceGetAttribute(&bytes, cudaDevAttrMaxSharedMemoryPerBlockOptin, device));
    if (device >= 0 && device < MAX_DEVICES) known[device] = bytes;
    return bytes;
}

// *raised: the size this kernel was last raised to (one static per kernel at the call site; a
// template launcher has one per instantiation, i.e. per kernel), so the attribute is set once per
// kernel and size, not at every launch: later calls cost one comparison. A block gets 48 KiB of
// shared memory without the attribute, static and dynamic together: a kernel with static
// __shared__ variables needs the attribute for less than 48 KiB of dynamic memory (the split-KV
// forward, 128 bytes static and 48 KiB dynamic at HS 64, failed to launch on an H200 without it).
static inline void cuda_raise_dynamic_smem(const void* kernel, int* raised, size_t bytes,
                                           const char* name, const char* what, int value,
                                           const char* file, int line) {
    if ((size_t)*raised >= bytes) return;
    cudaFuncAttributes attr;
    cuda_check_at(cudaFuncGetAttributes(&attr, kernel), "cudaFuncGetAttributes (static shared memory)", file, line);
    const size_t total = bytes + attr.sharedSizeBytes;
    if (total <= 48 * 1024) {
        *raised = (int)bytes;
        return;
    }
    const int limit = cuda_max_dynamic_smem_optin();
    if (total > (size_t)limit)
        fail_at(file, line, "this GPU has less shared memory per block than the kernel needs; use a "
                "smaller head size (or a GPU with more shared memory: A100, H100 allow 227 KiB)",
                "kernel %s (%s %d) needs %zu bytes of dynamic and %zu of static shared memory per "
                "block; this GPU allows %d (cudaDevAttrMaxSharedMemoryPerBlockOptin)", name, what, value,
                bytes, attr.sharedSizeBytes, limit);
    cuda_check_at(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)bytes),
                  "cudaFuncSetAttribute(MaxDynamicSharedMemorySize)", file, line);
    *raised = (int)bytes;
}

#define CUDA_RAISE_DYNAMIC_SMEM(kernel, bytes, what, value)                                     \
    do {                                                                                         \
        static int raised_ = 0;                                                                  \
        cuda_raise_dynamic_smem((const void*)(kernel), &raised_, (bytes), #kernel, (what),       \
                                (value), __FILE__, __LINE__);                                    \
    } while (0)
