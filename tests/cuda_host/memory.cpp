// Device and pinned memory of the host runtime. Every block is registered so that copies,
// memsets and cuBLAS calls can check that their ranges lie in the right kind of memory: what
// would fault or corrupt memory on a GPU fails with cudaErrorInvalidValue here. Copies and
// memsets are checked when issued and queued on their stream (stream_sched.cpp).
#include "tests/cuda_host/internal.h"
#include "comm/fail.h"

#include <map>
#include <mutex>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    size_t bytes;
    int pinned;
} Block;

static std::mutex lock;
static std::map<uintptr_t, Block> blocks;
static size_t device_bytes;
static size_t pinned_bytes;   // cudaMallocHost's, against cuda_host_pinned_limit

static const char* kind_name(CudaHostMemKind k) {
    switch (k) {
    case CUDA_HOST_MEM_DEVICE: return "device memory";
    case CUDA_HOST_MEM_PINNED: return "pinned host memory";
    case CUDA_HOST_MEM_OVERRUN: return "a range running past the end of its allocation";
    default: return "host memory not from the CUDA runtime";
    }
}

CudaHostMemKind cuda_host_mem_kind(const void* ptr, size_t bytes) {
    uintptr_t p = (uintptr_t)ptr;
    std::lock_guard<std::mutex> guard(lock);
    auto it = blocks.upper_bound(p);
    if (it == blocks.begin()) return CUDA_HOST_MEM_UNTRACKED;
    --it;
    uintptr_t base = it->first;
    size_t size = it->second.bytes;
    if (p >= base + size && !(p == base && size == 0)) return CUDA_HOST_MEM_UNTRACKED;
    if (bytes > size - (p - base)) return CUDA_HOST_MEM_OVERRUN;
    return it->second.pinned ? CUDA_HOST_MEM_PINNED : CUDA_HOST_MEM_DEVICE;
}

size_t cuda_host_device_bytes(void) {
    std::lock_guard<std::mutex> guard(lock);
    return device_bytes;
}

// Blocks of 2 MiB and more start on a 2 MiB boundary and are offered to transparent huge pages
// (advise_huge_pages). The 0xff fill below touches every page of a fresh block, one fault per 4 KiB
// page otherwise: 190-250 ms per 64 MiB on a paravirtualised build machine against 6-25 ms with
// 2 MiB pages, and every CUDA trainer process fills its two 32 MiB cuBLASLt workspaces.
static const size_t HUGE_PAGE = (size_t)2 << 20;

static cudaError_t allocate(void** ptr, size_t bytes, int pinned, const char* what) {
    if (!ptr) return cuda_host_fail(cudaErrorInvalidValue, "%s: NULL pointer argument", what);
    *ptr = NULL;
    if (bytes == 0) return cudaSuccess;
    const size_t total = pinned ? cuda_host_pinned_limit() : cuda_host_total_memory();
    size_t in_use;
    {   // the memory is taken from its total before the block exists
        std::lock_guard<std::mutex> guard(lock);
        size_t& used = pinned ? pinned_bytes : device_bytes;
        in_use = used;
        if (bytes <= total - in_use) used += bytes;
    }
    if (bytes > total - in_use)
        return cuda_host_fail(cudaErrorMemoryAllocation, "%s of %zu bytes: out of %s memory (%zu "
                              "of %zu bytes in use; %s)", what, bytes, pinned ? "pinned" : "device",
                              in_use, total,
                              pinned ? "CUDA_HOST_PINNED_MEMORY" : "CUDA_HOST_DEVICE_MEMORY");
    size_t rounded = (bytes + 255) / 256 * 256;  // cudaMalloc's 256-byte alignment
    void* p = aligned_alloc(rounded >= HUGE_PAGE ? HUGE_PAGE : 256, rounded);
    if (!p) {
        std::lock_guard<std::mutex> guard(lock);
        (pinned ? pinned_bytes : device_bytes) -= bytes;
        return cuda_host_fail(cudaErrorMemoryAllocation, "%s of %zu bytes failed", what, bytes);
    }
    advise_huge_pages(p, rounded);
    if (!pinned) memset(p, 0xff, rounded);  // NaN as float and bf16: unwritten data shows
    std::lock_guard<std::mutex> guard(lock);
    blocks[(uintptr_t)p] = Block{bytes, pinned};
    *ptr = p;
    return cudaSuccess;
}

// Removes ptr from the registry if it starts a live block of the given kind.
static int unregister(void* ptr, int pinned) {
    std::lock_guard<std::mutex> guard(lock);
    auto it = blocks.find((uintptr_t)ptr);
    if (it == blocks.end() || it->second.pinned != pinned) return 0;
    (pinned ? pinned_bytes : device_bytes) -= it->second.bytes;
    blocks.erase(it);
    return 1;
}

static cudaError_t release(void* ptr, int pinned, const char* what) {
    if (!ptr) return cudaSuccess;
    if (!unregister(ptr, pinned))
        return cuda_host_fail(cudaErrorInvalidValue, "%s(%p): not the start of a live %s allocation",
                              what, ptr, pinned ? "cudaMallocHost" : "cudaMalloc");
    free(ptr);
    return cudaSuccess;
}

// Allocations may synchronise the device: CUDA refuses them while a capture is open (global mode).
cudaError_t cudaMalloc(void** ptr, size_t bytes) {
    cuda_host_capture_forbidden("cudaMalloc");
    return allocate(ptr, bytes, 0, "cudaMalloc");
}
cudaError_t cudaMallocHost(void** ptr, size_t bytes) {
    cuda_host_capture_forbidden("cudaMallocHost");
    return allocate(ptr, bytes, 1, "cudaMallocHost");
}
cudaError_t cudaHostAlloc(void** ptr, size_t bytes, unsigned int flags) {
    if (flags != cudaHostAllocDefault)
        return cuda_host_fail(cudaErrorInvalidValue, "cudaHostAlloc: flags 0x%x are not supported by "
                              "the host runtime", flags);
    return allocate(ptr, bytes, 1, "cudaHostAlloc");
}

// cudaFree and cudaFreeHost synchronise the device first, as CUDA does: queued work may still
// use the memory.
cudaError_t cudaFree(void* ptr) {
    cuda_host_drain_all("cudaFree");
    return release(ptr, 0, "cudaFree");
}
cudaError_t cudaFreeHost(void* ptr) {
    cuda_host_drain_all("cudaFreeHost");
    return release(ptr, 1, "cudaFreeHost");
}

static int live_block(const void* ptr, int pinned) {
    std::lock_guard<std::mutex> guard(lock);
    auto it = blocks.find((uintptr_t)ptr);
    return it != blocks.end() && it->second.pinned == pinned;
}

// Stream-ordered allocation: the memory is allocated at once (usable by the work issued after
// the call, and by no earlier work, which cannot know the pointer); the free is queued.
cudaError_t cudaMallocAsync(void** ptr, size_t bytes, cudaStream_t stream) {
    if (!cuda_host_stream_valid(stream))
        return cuda_host_fail(cudaErrorInvalidResourceHandle, "cudaMallocAsync: invalid stream");
    if (cuda_host_capturing(stream))
        return cuda_host_capture_refuse(stream, "cudaMallocAsync on a capturing stream: the host "
                                        "runtime does not record memory nodes");
    return allocate(ptr, bytes, 0, "cudaMallocAsync");
}

cudaError_t cudaFreeAsync(void* ptr, cudaStream_t stream) {
    if (!cuda_host_stream_valid(stream))
        return cuda_host_fail(cudaErrorInvalidResourceHandle, "cudaFreeAsync: invalid stream");
    if (!ptr) return cudaSuccess;
    if (cuda_host_capturing(stream))
        return cuda_host_capture_refuse(stream, "cudaFreeAsync on a capturing stream: the host "
                                        "runtime does not record memory nodes");
    if (!live_block(ptr, 0))
        return cuda_host_fail(cudaErrorInvalidValue, "cudaFreeAsync(%p): not the start of a live cudaMalloc "
                              "allocation", ptr);
    cuda_host_enqueue_fn(stream, "cudaFreeAsync", [ptr] {
        if (release(ptr, 0, "cudaFreeAsync") != cudaSuccess)  // freed twice meanwhile
            fail_msg("cudaFreeAsync(%p) queued on a stream: %s", ptr, cuda_host_error_detail());
    });
    return cudaSuccess;
}

// Checks one side of a copy: want_device says whether the direction puts it in device memory.
static cudaError_t check_side(const char* what, const char* side, const void* p, size_t bytes,
                              int want_device, int any) {
    CudaHostMemKind k = cuda_host_mem_kind(p, bytes);
    if (k == CUDA_HOST_MEM_OVERRUN)
        return cuda_host_fail(cudaErrorInvalidValue, "%s: %s range %p + %zu bytes runs past the end "
                              "of its allocation", what, side, p, bytes);
    if (any) return cudaSuccess;
    if (want_device && k != CUDA_HOST_MEM_DEVICE)
        return cuda_host_fail(cudaErrorInvalidValue, "%s: %s %p should be device memory but is %s",
                              what, side, p, kind_name(k));
    if (!want_device && k == CUDA_HOST_MEM_DEVICE)
        return cuda_host_fail(cudaErrorInvalidValue, "%s: %s %p should be host memory but is device "
                              "memory (wrong cudaMemcpyKind?)", what, side, p);
    return cudaSuccess;
}

// A copy queued on `stream`, with CUDA's rules for host memory that is not pinned (pageable):
// the source is copied aside at the call (CUDA stages pageable data before returning), and a copy
// into pageable memory is complete when the call returns. Copies between device and pinned memory
// are fully asynchronous. `sync` (cudaMemcpy, on the legacy stream): the call also returns only
// once the copy is done, unless both sides are device memory (CUDA: "no host-side
// synchronization is performed").
static cudaError_t copy(void* dst, const void* src, size_t bytes, cudaMemcpyKind kind,
                        cudaStream_t stream, int sync, const char* what) {
    if (bytes == 0) return cudaSuccess;
    if (!dst || !src) return cuda_host_fail(cudaErrorInvalidValue, "%s: NULL pointer", what);
    int dst_dev, src_dev;
    switch (kind) {
    case cudaMemcpyHostToHost: dst_dev = 0, src_dev = 0; break;
    case cudaMemcpyHostToDevice: dst_dev = 1, src_dev = 0; break;
    case cudaMemcpyDeviceToHost: dst_dev = 0, src_dev = 1; break;
    case cudaMemcpyDeviceToDevice: dst_dev = 1, src_dev = 1; break;
    case cudaMemcpyDefault: dst_dev = src_dev = 0; break;
    default: return cuda_host_fail(cudaErrorInvalidMemcpyDirection, "%s: kind %d", what, (int)kind);
    }
    int any = kind == cudaMemcpyDefault;
    cudaError_t err = check_side(what, "destination", dst, bytes, dst_dev, any);
    if (err == cudaSuccess) err = check_side(what, "source", src, bytes, src_dev, any);
    if (err != cudaSuccess) return err;
    const CudaHostMemKind dk = cuda_host_mem_kind(dst, bytes), sk = cuda_host_mem_kind(src, bytes);
    if ((dk == CUDA_HOST_MEM_UNTRACKED || sk == CUDA_HOST_MEM_UNTRACKED) && cuda_host_capturing(stream))
        return cuda_host_capture_refuse(stream, "a copy of pageable host memory on a capturing "
                                        "stream: pin it (cudaMallocHost) to copy it in a graph");
    if (sk == CUDA_HOST_MEM_DEVICE && dk != CUDA_HOST_MEM_DEVICE) cuda_host_count_d2h();
    CudaHostTicket t;
    if (sk == CUDA_HOST_MEM_UNTRACKED && dk != CUDA_HOST_MEM_UNTRACKED) {
        char* staged = (char*)xmalloc(bytes, "pageable source of a copy");
        memcpy(staged, src, bytes);
        t = cuda_host_enqueue_fn(stream, what, [dst, staged, bytes] {
            memcpy(dst, staged, bytes);
            free(staged);
        });
    } else {
        t = cuda_host_enqueue_fn(stream, what, [dst, src, bytes] { memmove(dst, src, bytes); });
    }
    const int both_device = dk == CUDA_HOST_MEM_DEVICE && sk == CUDA_HOST_MEM_DEVICE;
    if (dk == CUDA_HOST_MEM_UNTRACKED || (sync && !both_device)) cuda_host_wait_ticket(t, what);
    return cudaSuccess;
}

cudaError_t cudaMemcpy(void* dst, const void* src, size_t bytes, cudaMemcpyKind kind) {
    return copy(dst, src, bytes, kind, cudaStreamLegacy, 1, "cudaMemcpy");
}

cudaError_t cudaMemcpyAsync(void* dst, const void* src, size_t bytes, cudaMemcpyKind kind,
                            cudaStream_t stream) {
    if (!cuda_host_stream_valid(stream))
        return cuda_host_fail(cudaErrorInvalidResourceHandle, "cudaMemcpyAsync: invalid stream");
    return copy(dst, src, bytes, kind, stream, 0, "cudaMemcpyAsync");
}

// Device memory only; queued. cudaMemset is on the legacy stream and, as CUDA documents for device
// memory, asynchronous with respect to the host.
static cudaError_t set(void* ptr, int value, size_t bytes, cudaStream_t stream, const char* what) {
    if (bytes == 0) return cudaSuccess;
    CudaHostMemKind k = cuda_host_mem_kind(ptr, bytes);
    if (k != CUDA_HOST_MEM_DEVICE)
        return cuda_host_fail(cudaErrorInvalidValue, "%s: %p + %zu bytes is %s, not device memory",
                              what, ptr, bytes, kind_name(k));
    cuda_host_enqueue_fn(stream, what, [ptr, value, bytes] { memset(ptr, value, bytes); });
    return cudaSuccess;
}

cudaError_t cudaMemset(void* ptr, int value, size_t bytes) {
    return set(ptr, value, bytes, cudaStreamLegacy, "cudaMemset");
}

cudaError_t cudaMemsetAsync(void* ptr, int value, size_t bytes, cudaStream_t stream) {
    if (!cuda_host_stream_valid(stream))
        return cuda_host_fail(cudaErrorInvalidResourceHandle, "cudaMemsetAsync: invalid stream");
    return set(ptr, value, bytes, stream, "cudaMemsetAsync");
}

// __constant__ and __device__ variables are host globals that kernels read: a copy to or from one
// is a cudaMemcpy on the legacy stream, done when the call returns.
cudaError_t cuda_host_copy_symbol(void* dst, size_t symbol_bytes, const void* src, size_t bytes,
                                  size_t offset, int to_symbol) {
    const char* what = to_symbol ? "cudaMemcpyToSymbol" : "cudaMemcpyFromSymbol";
    if (to_symbol < 0)
        return cuda_host_fail(cudaErrorInvalidMemcpyDirection, "cudaMemcpy{To,From}Symbol: wrong kind");
    if (offset > symbol_bytes || bytes > symbol_bytes - offset)
        return cuda_host_fail(cudaErrorInvalidValue, "%s: %zu bytes at offset %zu exceed the "
                              "symbol's %zu bytes", what, bytes, offset, symbol_bytes);
    if (bytes == 0) return cudaSuccess;
    if (!dst || !src) return cuda_host_fail(cudaErrorInvalidValue, "%s: NULL pointer", what);
    if (!to_symbol && cuda_host_mem_kind(dst, bytes) != CUDA_HOST_MEM_DEVICE) cuda_host_count_d2h();
    char* d = to_symbol ? (char*)dst + offset : (char*)dst;
    const char* s = to_symbol ? (const char*)src : (const char*)src + offset;
    CudaHostTicket t = cuda_host_enqueue_fn(cudaStreamLegacy, what, [d, s, bytes] { memcpy(d, s, bytes); });
    cuda_host_wait_ticket(t, what);
    return cudaSuccess;
}
