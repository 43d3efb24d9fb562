// Errors, the device and kernel attributes of the host runtime. Streams, events and the
// synchronisation calls are in stream_sched.cpp.
#include "tests/cuda_host/internal.h"
#include "comm/fail.h"

#include <errno.h>
#include <stdint.h>
#include <map>
#include <mutex>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

// --- Errors ------------------------------------------------------------------------------------

static __thread cudaError_t last_error;
static __thread char last_detail[1024];

cudaError_t cuda_host_fail(cudaError_t err, const char* fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(last_detail, sizeof last_detail, fmt, ap);
    va_end(ap);
    last_error = err;
    return err;
}

void cuda_host_set_detail(const char* fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(last_detail, sizeof last_detail, fmt, ap);
    va_end(ap);
}

const char* cuda_host_error_detail(void) { return last_detail; }

cudaError_t cudaGetLastError(void) {
    cudaError_t err = last_error;
    last_error = cudaSuccess;
    return err;
}

cudaError_t cudaPeekAtLastError(void) { return last_error; }

typedef struct {
    cudaError_t err;
    const char* name;
    const char* text;
} ErrorText;

static const ErrorText error_texts[] = {
    {cudaSuccess, "cudaSuccess", "no error"},
    {cudaErrorInvalidValue, "cudaErrorInvalidValue", "invalid argument"},
    {cudaErrorMemoryAllocation, "cudaErrorMemoryAllocation", "out of memory"},
    {cudaErrorInitializationError, "cudaErrorInitializationError", "initialization error"},
    {cudaErrorInvalidConfiguration, "cudaErrorInvalidConfiguration", "invalid configuration argument"},
    {cudaErrorInvalidSymbol, "cudaErrorInvalidSymbol", "invalid device symbol"},
    {cudaErrorInvalidDevicePointer, "cudaErrorInvalidDevicePointer", "invalid device pointer"},
    {cudaErrorInvalidMemcpyDirection, "cudaErrorInvalidMemcpyDirection", "invalid copy direction for memcpy"},
    {cudaErrorInvalidDeviceFunction, "cudaErrorInvalidDeviceFunction", "invalid device function"},
    {cudaErrorNoDevice, "cudaErrorNoDevice", "no CUDA-capable device is detected"},
    {cudaErrorInvalidDevice, "cudaErrorInvalidDevice", "invalid device ordinal"},
    {cudaErrorInvalidResourceHandle, "cudaErrorInvalidResourceHandle", "invalid resource handle"},
    {cudaErrorNotReady, "cudaErrorNotReady", "device not ready"},
    {cudaErrorLaunchOutOfResources, "cudaErrorLaunchOutOfResources", "too many resources requested for launch"},
    {cudaErrorLaunchFailure, "cudaErrorLaunchFailure", "unspecified launch failure"},
    {cudaErrorNotSupported, "cudaErrorNotSupported", "operation not supported"},
    {cudaErrorStreamCaptureUnsupported, "cudaErrorStreamCaptureUnsupported", "operation not permitted when stream is capturing"},
    {cudaErrorStreamCaptureInvalidated, "cudaErrorStreamCaptureInvalidated", "operation failed due to a previous error during capture"},
    {cudaErrorStreamCaptureMerge, "cudaErrorStreamCaptureMerge", "operation would result in a merge of separate capture sequences"},
    {cudaErrorStreamCaptureUnmatched, "cudaErrorStreamCaptureUnmatched", "capture was not ended in the same stream as it began"},
    {cudaErrorStreamCaptureUnjoined, "cudaErrorStreamCaptureUnjoined", "capturing stream has unjoined work"},
    {cudaErrorStreamCaptureIsolation, "cudaErrorStreamCaptureIsolation", "dependency created on uncaptured work in another stream"},
    {cudaErrorStreamCaptureImplicit, "cudaErrorStreamCaptureImplicit", "operation would make the legacy stream depend on a capturing blocking stream"},
    {cudaErrorCapturedEvent, "cudaErrorCapturedEvent", "operation not permitted on an event last recorded in a capturing stream"},
    {cudaErrorUnknown, "cudaErrorUnknown", "unknown error"},
};

static const ErrorText* find_error(cudaError_t err) {
    for (size_t i = 0; i < sizeof error_texts / sizeof error_texts[0]; i++)
        if (error_texts[i].err == err) return &error_texts[i];
    return NULL;
}

const char* cudaGetErrorString(cudaError_t err) {
    const ErrorText* t = find_error(err);
    return t ? t->text : "unrecognized error code";
}

const char* cudaGetErrorName(cudaError_t err) {
    const ErrorText* t = find_error(err);
    return t ? t->name : "cudaErrorUnknown";
}

// --- The device: one H100 SXM --------------------------------------------------------------------

static const size_t h100_mem = (size_t)80 << 30;

// Environment variable `name` as BYTES (a K, M or G suffix multiplies by 2^10, 2^20, 2^30);
// `unset` where it is not set.
static size_t env_bytes(const char* name, size_t unset) {
    const char* s = getenv(name);
    if (!s || !*s) return unset;
    char* end = NULL;
    errno = 0;
    const unsigned long long v = strtoull(s, &end, 10);
    const int shift = *end == 'K' ? 10 : *end == 'M' ? 20 : *end == 'G' ? 30 : 0;
    if (errno || end == s || v == 0 || (shift && end[1]) || (!shift && *end) || v > (~0ULL >> shift))
        fail_msg("%s=%s: expected a positive number of bytes, optionally with a K, M or G suffix",
                 name, s);
    return (size_t)(v << shift);
}

// CUDA_HOST_DEVICE_MEMORY=BYTES makes the device hold that much instead of 80 GiB, as a MIG slice
// or a GPU shared with other processes would: cudaMemGetInfo reports it and cudaMalloc refuses
// what goes past it, so that a test can see a program refuse a configuration that does not fit.
// The properties still describe an H100.
size_t cuda_host_total_memory(void) {
    static const size_t total = env_bytes("CUDA_HOST_DEVICE_MEMORY", h100_mem);
    return total;
}

// CUDA_HOST_PINNED_MEMORY=BYTES: the most host memory the process may pin (no limit by default),
// as a system's locked-memory limit or a small host makes it: cudaMallocHost past it fails with
// cudaErrorMemoryAllocation, so that a test can see a program fall back to ordinary memory.
size_t cuda_host_pinned_limit(void) {
    static const size_t limit = env_bytes("CUDA_HOST_PINNED_MEMORY", SIZE_MAX);
    return limit;
}

// CUDA_HOST_DEVICES=N makes the process see N identical devices (1 by default), so that a test
// of N ranks on one node can give each rank "its own GPU" as on an N-GPU machine. The memory
// behind them is the process's: the selected device changes nothing but cudaGetDevice.
static int device_count(void) {
    const char* s = getenv("CUDA_HOST_DEVICES");
    const int n = s ? atoi(s) : 1;
    return n >= 1 && n <= 64 ? n : 1;
}

static thread_local int current_device = 0;

cudaError_t cudaGetDeviceCount(int* count) {
    if (!count) return cuda_host_fail(cudaErrorInvalidValue, "cudaGetDeviceCount: NULL count");
    *count = device_count();
    return cudaSuccess;
}

cudaError_t cudaSetDevice(int device) {
    if (device < 0 || device >= device_count())
        return cuda_host_fail(cudaErrorInvalidDevice, "cudaSetDevice(%d): the host runtime has %d device(s) (CUDA_HOST_DEVICES)", device, device_count());
    current_device = device;
    return cudaSuccess;
}

cudaError_t cudaGetDevice(int* device) {
    if (!device) return cuda_host_fail(cudaErrorInvalidValue, "cudaGetDevice: NULL device");
    *device = current_device;
    return cudaSuccess;
}

cudaError_t cudaGetDeviceProperties(cudaDeviceProp* p, int device) {
    if (!p) return cuda_host_fail(cudaErrorInvalidValue, "cudaGetDeviceProperties: NULL prop");
    if (device < 0 || device >= device_count())
        return cuda_host_fail(cudaErrorInvalidDevice, "cudaGetDeviceProperties(%d): %d device(s) (CUDA_HOST_DEVICES)", device, device_count());
    memset(p, 0, sizeof *p);
    snprintf(p->name, sizeof p->name, "NVIDIA H100 80GB HBM3 (CUDA host runtime)");
    p->totalGlobalMem = h100_mem;
    p->sharedMemPerBlock = CUDA_HOST_DEFAULT_DYN_SMEM;
    p->regsPerBlock = 65536;
    p->warpSize = 32;
    p->maxThreadsPerBlock = CUDA_HOST_MAX_THREADS;
    p->maxThreadsDim[0] = 1024, p->maxThreadsDim[1] = 1024, p->maxThreadsDim[2] = 64;
    p->maxGridSize[0] = 0x7fffffff, p->maxGridSize[1] = 65535, p->maxGridSize[2] = 65535;
    p->totalConstMem = 65536;
    p->major = 9;
    p->minor = 0;
    p->multiProcessorCount = 132;
    p->concurrentKernels = 1;
    p->asyncEngineCount = 3;
    p->unifiedAddressing = 1;
    p->memoryBusWidth = 5120;
    p->l2CacheSize = 50 << 20;
    p->maxThreadsPerMultiProcessor = 2048;
    p->sharedMemPerMultiprocessor = 228 * 1024;
    p->regsPerMultiprocessor = 65536;
    p->managedMemory = 1;
    p->sharedMemPerBlockOptin = (size_t)cuda_host_smem_optin();
    p->maxBlocksPerMultiProcessor = 32;
    return cudaSuccess;
}

cudaError_t cudaDeviceGetAttribute(int* value, cudaDeviceAttr attr, int device) {
    cudaDeviceProp p;
    if (!value) return cuda_host_fail(cudaErrorInvalidValue, "cudaDeviceGetAttribute: NULL value");
    cudaError_t err = cudaGetDeviceProperties(&p, device);
    if (err != cudaSuccess) return err;
    switch (attr) {
    case cudaDevAttrMaxThreadsPerBlock: *value = p.maxThreadsPerBlock; break;
    case cudaDevAttrMaxSharedMemoryPerBlock: *value = (int)p.sharedMemPerBlock; break;
    case cudaDevAttrWarpSize: *value = p.warpSize; break;
    case cudaDevAttrMultiProcessorCount: *value = p.multiProcessorCount; break;
    case cudaDevAttrL2CacheSize: *value = p.l2CacheSize; break;
    case cudaDevAttrComputeCapabilityMajor: *value = p.major; break;
    case cudaDevAttrComputeCapabilityMinor: *value = p.minor; break;
    case cudaDevAttrMaxSharedMemoryPerMultiprocessor: *value = (int)p.sharedMemPerMultiprocessor; break;
    case cudaDevAttrMaxSharedMemoryPerBlockOptin: *value = (int)p.sharedMemPerBlockOptin; break;
    // An H100 SXM's clocks (kHz) and HBM3 bus (bits).
    case cudaDevAttrClockRate: *value = 1980000; break;
    case cudaDevAttrMemoryClockRate: *value = 2619000; break;
    case cudaDevAttrGlobalMemoryBusWidth: *value = p.memoryBusWidth; break;
    default:
        return cuda_host_fail(cudaErrorInvalidValue, "cudaDeviceGetAttribute: attribute %d is not "
                              "supported by the host runtime", (int)attr);
    }
    return cudaSuccess;
}

// CUDA 13.0, as the toolkit the project builds with.
cudaError_t cudaRuntimeGetVersion(int* version) {
    if (!version) return cuda_host_fail(cudaErrorInvalidValue, "cudaRuntimeGetVersion: NULL version");
    *version = 13000;
    return cudaSuccess;
}

cudaError_t cudaDriverGetVersion(int* version) {
    if (!version) return cuda_host_fail(cudaErrorInvalidValue, "cudaDriverGetVersion: NULL version");
    *version = 13000;
    return cudaSuccess;
}


cudaError_t cudaMemGetInfo(size_t* free_bytes, size_t* total_bytes) {
    if (!free_bytes || !total_bytes) return cuda_host_fail(cudaErrorInvalidValue, "cudaMemGetInfo: NULL argument");
    const size_t used = cuda_host_device_bytes(), total = cuda_host_total_memory();
    *total_bytes = total;
    *free_bytes = used < total ? total - used : 0;
    return cudaSuccess;
}

// --- Kernel attributes -----------------------------------------------------------------------

static std::mutex attr_lock;
static std::map<const void*, size_t> dyn_smem_limits;
static std::map<const void*, size_t> static_smem;   // cuda_host_declare_static_smem

static size_t static_smem_of(const void* kernel) {   // attr_lock held
    auto it = static_smem.find(kernel);
    return it == static_smem.end() ? 0 : it->second;
}

cudaError_t cuda_host_declare_static_smem(const void* kernel, size_t bytes) {
    if (!kernel) return cuda_host_fail(cudaErrorInvalidDeviceFunction, "cuda_host_declare_static_smem: NULL kernel");
    if (bytes > CUDA_HOST_DEFAULT_DYN_SMEM)
        return cuda_host_fail(cudaErrorInvalidValue, "cuda_host_declare_static_smem: %zu bytes, over the 48 KiB "
                              "CUDA allows for static shared memory", bytes);
    std::lock_guard<std::mutex> guard(attr_lock);
    static_smem[kernel] = bytes;
    return cudaSuccess;
}

cudaError_t cuda_host_func_set_attribute(const void* kernel, cudaFuncAttribute attr, int value) {
    if (!kernel) return cuda_host_fail(cudaErrorInvalidDeviceFunction, "cudaFuncSetAttribute: NULL kernel");
    if (attr == cudaFuncAttributePreferredSharedMemoryCarveout) {
        if (value < -1 || value > 100)
            return cuda_host_fail(cudaErrorInvalidValue, "cudaFuncSetAttribute: carveout %d not in [-1, 100]", value);
        return cudaSuccess;  // a performance hint
    }
    if (attr != cudaFuncAttributeMaxDynamicSharedMemorySize)
        return cuda_host_fail(cudaErrorInvalidValue, "cudaFuncSetAttribute: attribute %d is not "
                              "supported by the host runtime", (int)attr);
    std::lock_guard<std::mutex> guard(attr_lock);
    const int room = cuda_host_smem_optin() - (int)static_smem_of(kernel);   // the opt-in limit less static
    if (value < 0 || value > room)
        return cuda_host_fail(cudaErrorInvalidValue, "cudaFuncSetAttribute: max dynamic shared memory "
                              "%d not in [0, %d] (the opt-in limit %d less %zu bytes of static shared memory)",
                              value, room, cuda_host_smem_optin(), static_smem_of(kernel));
    dyn_smem_limits[kernel] = (size_t)value;
    return cudaSuccess;
}

int cuda_host_smem_optin(void) {
    static const int bytes = [] {
        const char* v = getenv("CUDA_HOST_SMEM_OPTIN");
        if (!v || !v[0]) return CUDA_HOST_MAX_DYN_SMEM;
        char* end;
        const long n = strtol(v, &end, 10);
        if (*end || n < CUDA_HOST_DEFAULT_DYN_SMEM || n > CUDA_HOST_MAX_DYN_SMEM)
            fail_msg("CUDA_HOST_SMEM_OPTIN=%s: expected bytes in [%d, %d]", v, CUDA_HOST_DEFAULT_DYN_SMEM,
                     CUDA_HOST_MAX_DYN_SMEM);
        return (int)n;
    }();
    return bytes;
}

cudaError_t cuda_host_func_get_attributes(cudaFuncAttributes* attr, const void* kernel) {
    if (!attr || !kernel) return cuda_host_fail(cudaErrorInvalidValue, "cudaFuncGetAttributes: NULL argument");
    memset(attr, 0, sizeof *attr);
    attr->maxThreadsPerBlock = CUDA_HOST_MAX_THREADS;
    attr->ptxVersion = 90;
    attr->binaryVersion = 90;
    attr->maxDynamicSharedSizeBytes = (int)cuda_host_dynamic_smem_limit(kernel);
    {
        std::lock_guard<std::mutex> guard(attr_lock);
        attr->sharedSizeBytes = static_smem_of(kernel);
    }
    attr->preferredShmemCarveout = -1;
    return cudaSuccess;
}

size_t cuda_host_dynamic_smem_limit(const void* kernel) {
    std::lock_guard<std::mutex> guard(attr_lock);
    auto it = dyn_smem_limits.find(kernel);
    // Without the attribute a block's 48 KiB hold its static variables too.
    return it == dyn_smem_limits.end() ? CUDA_HOST_DEFAULT_DYN_SMEM - static_smem_of(kernel) : it->second;
}
