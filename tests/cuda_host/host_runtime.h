// The CUDA runtime API subset of the host runtime: errors, devices, memory, streams, events and
// kernel launches. Stream work is queued when issued and run by a scheduler at host
// synchronisation points, the work of concurrent streams interleaved at random
// (CUDA_HOST_SCHEDULE_SEED; stream_sched.cpp and README.md say more).
#pragma once
#include <stddef.h>
#include <tuple>
#include <type_traits>
#include <utility>
#include "tests/cuda_host/host_types.h"

typedef enum cudaError {
    cudaSuccess = 0,
    cudaErrorInvalidValue = 1,
    cudaErrorMemoryAllocation = 2,
    cudaErrorInitializationError = 3,
    cudaErrorInvalidConfiguration = 9,
    cudaErrorInvalidSymbol = 13,
    cudaErrorInvalidDevicePointer = 17,
    cudaErrorInvalidMemcpyDirection = 21,
    cudaErrorInvalidDeviceFunction = 98,
    cudaErrorNoDevice = 100,
    cudaErrorInvalidDevice = 101,
    cudaErrorInvalidResourceHandle = 400,
    cudaErrorNotReady = 600,
    cudaErrorLaunchOutOfResources = 701,
    cudaErrorLaunchFailure = 719,
    cudaErrorNotSupported = 801,
    cudaErrorStreamCaptureUnsupported = 900,
    cudaErrorStreamCaptureInvalidated = 901,
    cudaErrorStreamCaptureMerge = 902,
    cudaErrorStreamCaptureUnmatched = 903,
    cudaErrorStreamCaptureUnjoined = 904,
    cudaErrorStreamCaptureIsolation = 905,
    cudaErrorStreamCaptureImplicit = 906,
    cudaErrorCapturedEvent = 907,
    cudaErrorUnknown = 999
} cudaError_t;

typedef enum cudaMemcpyKind {
    cudaMemcpyHostToHost = 0,
    cudaMemcpyHostToDevice = 1,
    cudaMemcpyDeviceToHost = 2,
    cudaMemcpyDeviceToDevice = 3,
    cudaMemcpyDefault = 4
} cudaMemcpyKind;

typedef enum cudaFuncAttribute {
    cudaFuncAttributeMaxDynamicSharedMemorySize = 8,
    cudaFuncAttributePreferredSharedMemoryCarveout = 9
} cudaFuncAttribute;

typedef enum cudaDeviceAttr {
    cudaDevAttrMaxThreadsPerBlock = 1,
    cudaDevAttrMaxSharedMemoryPerBlock = 8,
    cudaDevAttrWarpSize = 10,
    cudaDevAttrClockRate = 13,
    cudaDevAttrMultiProcessorCount = 16,
    cudaDevAttrMemoryClockRate = 36,
    cudaDevAttrGlobalMemoryBusWidth = 37,
    cudaDevAttrL2CacheSize = 38,
    cudaDevAttrComputeCapabilityMajor = 75,
    cudaDevAttrComputeCapabilityMinor = 76,
    cudaDevAttrMaxSharedMemoryPerMultiprocessor = 81,
    cudaDevAttrMaxSharedMemoryPerBlockOptin = 97
} cudaDeviceAttr;

// The fields of CUDA 13's cudaDeviceProp that a trainer reads; the host runtime reports an
// H100 SXM (sm_90).
struct cudaDeviceProp {
    char name[256];
    size_t totalGlobalMem;
    size_t sharedMemPerBlock;
    int regsPerBlock;
    int warpSize;
    int maxThreadsPerBlock;
    int maxThreadsDim[3];
    int maxGridSize[3];
    size_t totalConstMem;
    int major;
    int minor;
    int multiProcessorCount;
    int concurrentKernels;
    int asyncEngineCount;
    int unifiedAddressing;
    int memoryBusWidth;
    int l2CacheSize;
    int maxThreadsPerMultiProcessor;
    size_t sharedMemPerMultiprocessor;
    int regsPerMultiprocessor;
    int managedMemory;
    size_t sharedMemPerBlockOptin;
    int maxBlocksPerMultiProcessor;
};

typedef struct CUstream_st* cudaStream_t;
typedef struct CUevent_st* cudaEvent_t;
#define cudaStreamLegacy ((cudaStream_t)0x1)
#define cudaStreamPerThread ((cudaStream_t)0x2)
#define cudaStreamDefault 0x0
#define cudaStreamNonBlocking 0x1
#define cudaEventDefault 0x0
#define cudaEventBlockingSync 0x1
#define cudaEventDisableTiming 0x2
#define cudaEventRecordDefault 0x0
#define cudaEventRecordExternal 0x1
#define cudaHostAllocDefault 0x0

// Limits checked at launch, as on sm_80/sm_90.
#define CUDA_HOST_MAX_THREADS 1024
#define CUDA_HOST_DEFAULT_DYN_SMEM (48 * 1024)
#define CUDA_HOST_MAX_DYN_SMEM (227 * 1024)
// The fiber stacks that exited OS threads leave for the next ones (block_exec.cpp): at most this
// many in all, two memory mappings each (the stack and its guard page).
#define CUDA_HOST_POOLED_FIBERS 2048

// Errors, devices.
const char* cudaGetErrorString(cudaError_t err);
const char* cudaGetErrorName(cudaError_t err);
cudaError_t cudaGetLastError(void);
cudaError_t cudaPeekAtLastError(void);
cudaError_t cudaGetDeviceCount(int* count);
cudaError_t cudaSetDevice(int device);
cudaError_t cudaGetDevice(int* device);
cudaError_t cudaGetDeviceProperties(cudaDeviceProp* prop, int device);
cudaError_t cudaDeviceGetAttribute(int* value, cudaDeviceAttr attr, int device);
cudaError_t cudaDeviceSynchronize(void);
cudaError_t cudaDeviceReset(void);
cudaError_t cudaMemGetInfo(size_t* free_bytes, size_t* total_bytes);
cudaError_t cudaRuntimeGetVersion(int* version);
cudaError_t cudaDriverGetVersion(int* version);

// Memory. Device memory is host memory that the runtime tracks, so that copies, memsets and
// cuBLAS calls can check direction and bounds; new device memory is filled with 0xFF bytes
// (NaN as float or bf16) so that reading what was never written shows.
cudaError_t cudaMalloc(void** ptr, size_t bytes);
cudaError_t cudaFree(void* ptr);
cudaError_t cudaMallocAsync(void** ptr, size_t bytes, cudaStream_t stream);
cudaError_t cudaFreeAsync(void* ptr, cudaStream_t stream);
cudaError_t cudaMallocHost(void** ptr, size_t bytes);
cudaError_t cudaHostAlloc(void** ptr, size_t bytes, unsigned int flags);
cudaError_t cudaFreeHost(void* ptr);
cudaError_t cudaMemcpy(void* dst, const void* src, size_t bytes, cudaMemcpyKind kind);
cudaError_t cudaMemcpyAsync(void* dst, const void* src, size_t bytes, cudaMemcpyKind kind,
                            cudaStream_t stream = 0);
cudaError_t cudaMemset(void* ptr, int value, size_t bytes);
cudaError_t cudaMemsetAsync(void* ptr, int value, size_t bytes, cudaStream_t stream = 0);
template <typename T> static inline cudaError_t cudaMalloc(T** ptr, size_t bytes) {
    return cudaMalloc((void**)ptr, bytes);
}
template <typename T> static inline cudaError_t cudaMallocAsync(T** ptr, size_t bytes, cudaStream_t stream) {
    return cudaMallocAsync((void**)ptr, bytes, stream);
}
template <typename T> static inline cudaError_t cudaMallocHost(T** ptr, size_t bytes) {
    return cudaMallocHost((void**)ptr, bytes);
}
// __constant__ and __device__ variables are host globals here. to_symbol: 1 copy into the
// symbol, 0 out of it, -1 report an invalid direction.
cudaError_t cuda_host_copy_symbol(void* dst, size_t symbol_bytes, const void* src, size_t bytes,
                                  size_t offset, int to_symbol);
template <typename T>
static inline cudaError_t cudaMemcpyToSymbol(const T& symbol, const void* src, size_t bytes,
                                             size_t offset = 0,
                                             cudaMemcpyKind kind = cudaMemcpyHostToDevice) {
    if (kind != cudaMemcpyHostToDevice && kind != cudaMemcpyDeviceToDevice && kind != cudaMemcpyDefault)
        return cuda_host_copy_symbol(NULL, 0, NULL, 0, 0, -1);
    return cuda_host_copy_symbol((void*)&symbol, sizeof(T), src, bytes, offset, 1);
}
template <typename T>
static inline cudaError_t cudaMemcpyFromSymbol(void* dst, const T& symbol, size_t bytes,
                                               size_t offset = 0,
                                               cudaMemcpyKind kind = cudaMemcpyDeviceToHost) {
    if (kind != cudaMemcpyDeviceToHost && kind != cudaMemcpyDeviceToDevice && kind != cudaMemcpyDefault)
        return cuda_host_copy_symbol(NULL, 0, NULL, 0, 0, -1);
    return cuda_host_copy_symbol(dst, sizeof(T), (const void*)&symbol, bytes, offset, 0);
}

// Streams and events.
cudaError_t cudaStreamCreate(cudaStream_t* stream);
cudaError_t cudaStreamCreateWithFlags(cudaStream_t* stream, unsigned int flags);
cudaError_t cudaStreamDestroy(cudaStream_t stream);
cudaError_t cudaStreamSynchronize(cudaStream_t stream);
cudaError_t cudaStreamQuery(cudaStream_t stream);
cudaError_t cudaStreamWaitEvent(cudaStream_t stream, cudaEvent_t event, unsigned int flags = 0);
cudaError_t cudaEventCreate(cudaEvent_t* event);
cudaError_t cudaEventCreateWithFlags(cudaEvent_t* event, unsigned int flags);
cudaError_t cudaEventDestroy(cudaEvent_t event);
cudaError_t cudaEventRecord(cudaEvent_t event, cudaStream_t stream = 0);
// cudaEventRecordExternal: inside a stream capture the record becomes an event record node of the
// graph (each launch records the event the executable graph holds for it, timing included);
// outside one, the same as cudaEventRecord.
cudaError_t cudaEventRecordWithFlags(cudaEvent_t event, cudaStream_t stream = 0, unsigned int flags = 0);
cudaError_t cudaEventSynchronize(cudaEvent_t event);
cudaError_t cudaEventQuery(cudaEvent_t event);
cudaError_t cudaEventElapsedTime(float* ms, cudaEvent_t start, cudaEvent_t end);

// Stream capture and graphs (stream_sched.cpp). Work issued on a capturing stream, or on a stream
// that joined its capture by waiting for an event recorded in it, is recorded instead of queued;
// cudaGraphLaunch issues the recorded work again, in its order, the capture's origin stream mapped
// to the launch's. Global mode only: while a capture is open, a host synchronisation, a query,
// cudaMalloc or work on the legacy stream ends the job (CUDA refuses the call and invalidates the
// capture). Kernels, GEMMs, device and pinned copies and memsets, event records and waits are
// captured; NCCL operations and copies of pageable memory are refused.
typedef struct CUgraph_st* cudaGraph_t;
typedef struct CUgraphExec_st* cudaGraphExec_t;
typedef struct CUgraphNode_st* cudaGraphNode_t;
typedef enum cudaStreamCaptureMode {
    cudaStreamCaptureModeGlobal = 0,
    cudaStreamCaptureModeThreadLocal = 1,
    cudaStreamCaptureModeRelaxed = 2
} cudaStreamCaptureMode;
typedef enum cudaStreamCaptureStatus {
    cudaStreamCaptureStatusNone = 0,
    cudaStreamCaptureStatusActive = 1,
    cudaStreamCaptureStatusInvalidated = 2
} cudaStreamCaptureStatus;
cudaError_t cudaStreamBeginCapture(cudaStream_t stream, cudaStreamCaptureMode mode);
cudaError_t cudaStreamEndCapture(cudaStream_t stream, cudaGraph_t* graph);
cudaError_t cudaStreamIsCapturing(cudaStream_t stream, cudaStreamCaptureStatus* status);
cudaError_t cudaGraphInstantiate(cudaGraphExec_t* exec, cudaGraph_t graph, unsigned long long flags = 0);
cudaError_t cudaGraphLaunch(cudaGraphExec_t exec, cudaStream_t stream);
cudaError_t cudaGraphExecDestroy(cudaGraphExec_t exec);
cudaError_t cudaGraphDestroy(cudaGraph_t graph);
// The graph's nodes: kernels, GEMMs, copies, memsets, NCCL operations and external event records
// (other event records and waits are its edges), in capture order. nodes NULL: the count; else up
// to *num_nodes handles (the same handles on every call), the rest NULL, *num_nodes the number
// returned.
cudaError_t cudaGraphGetNodes(cudaGraph_t graph, cudaGraphNode_t* nodes, size_t* num_nodes);
typedef enum cudaGraphNodeType {
    cudaGraphNodeTypeKernel = 0x00,
    cudaGraphNodeTypeMemcpy = 0x01,
    cudaGraphNodeTypeMemset = 0x02,
    cudaGraphNodeTypeHost = 0x03,
    cudaGraphNodeTypeGraph = 0x04,
    cudaGraphNodeTypeEmpty = 0x05,
    cudaGraphNodeTypeWaitEvent = 0x06,
    cudaGraphNodeTypeEventRecord = 0x07
} cudaGraphNodeType;
// cudaGraphNodeTypeEventRecord for an external event record; cudaGraphNodeTypeKernel for every
// other node (the host runtime does not tell kernels from copies, memsets and NCCL operations).
cudaError_t cudaGraphNodeGetType(cudaGraphNode_t node, cudaGraphNodeType* type);
// The event an event record node records (as captured); cudaErrorInvalidValue for other nodes.
cudaError_t cudaGraphEventRecordNodeGetEvent(cudaGraphNode_t node, cudaEvent_t* event);
// The event that node (of the graph exec was instantiated from) records in the launches of exec
// issued from now on; launches already issued keep theirs.
cudaError_t cudaGraphExecEventRecordNodeSetEvent(cudaGraphExec_t exec, cudaGraphNode_t node,
                                                 cudaEvent_t event);

// Kernel attributes, keyed by the kernel's address.
cudaError_t cuda_host_func_set_attribute(const void* kernel, cudaFuncAttribute attr, int value);
template <typename F>
static inline cudaError_t cudaFuncSetAttribute(F* kernel, cudaFuncAttribute attr, int value) {
    return cuda_host_func_set_attribute((const void*)kernel, attr, value);
}

// A kernel's static __shared__ bytes, as nvcc would report them (ptxas "smem"): the host runtime
// cannot see them (static __shared__ is thread_local here), so a test that needs the limits CUDA
// applies to them declares them. A block gets 48 KiB without cudaFuncSetAttribute, static and
// dynamic together; with it, the attribute bounds the dynamic part and the sum must stay within the
// opt-in limit.
cudaError_t cuda_host_declare_static_smem(const void* kernel, size_t bytes);
template <typename F>
static inline cudaError_t cuda_host_declare_static_smem(F* kernel, size_t bytes) {
    return cuda_host_declare_static_smem((const void*)kernel, bytes);
}

// What CUDA reports of a compiled kernel. The host runtime reports the image an H100 would load
// (sm_90 machine code, PTX 9.0), the kernel's dynamic shared memory limit and its declared static
// shared memory; registers and local memory are nvcc's business (0 here).
struct cudaFuncAttributes {
    size_t sharedSizeBytes, constSizeBytes, localSizeBytes;
    int maxThreadsPerBlock, numRegs, ptxVersion, binaryVersion, cacheModeCA, maxDynamicSharedSizeBytes,
        preferredShmemCarveout;
};
cudaError_t cuda_host_func_get_attributes(cudaFuncAttributes* attr, const void* kernel);
template <typename F>
static inline cudaError_t cudaFuncGetAttributes(cudaFuncAttributes* attr, F* kernel) {
    return cuda_host_func_get_attributes(attr, (const void*)kernel);
}

// Text that explains the last failed call of this host thread in more detail than its error
// code (which limit, which pointer); "" if none. Printed by CUDA_CHECK.
const char* cuda_host_error_detail(void);

// What the process has asked of the device so far, for tests that bound a training step's host
// synchronisation (model/backend.h: gpt_backend_counters). Counted when a call is made, whether
// or not work was pending:
//   launches  kernels (LAUNCH) and cuBLAS/cuBLASLt GEMMs queued (each is a kernel on a GPU);
//             memsets, copies, event records and NCCL operations are not launches; nor are
//             kernels recorded by a stream capture: a graph launch runs them (graph_kernels)
//   d2h       copies out of device memory into host memory (cudaMemcpy/cudaMemcpyAsync of kind
//             DeviceToHost, or Default between a device source and a host destination;
//             cudaMemcpyFromSymbol)
//   syncs     calls that block the host until device work is done: cudaStreamSynchronize,
//             cudaEventSynchronize, cudaDeviceSynchronize/Reset, cudaFree/FreeHost,
//             cublas(Lt)Destroy, synchronous copies (cudaMemcpy other than device to device, any
//             copy into pageable memory, cudaMemcpyTo/FromSymbol), NCCL calls that drain their
//             communicator when they must wait. Not: cudaStreamQuery/cudaEventQuery (they never
//             block), cudaMemset on device memory (asynchronous, as CUDA documents), calls made
//             from inside stream work.
typedef struct {
    unsigned long long launches, d2h, syncs;
    unsigned long long graph_launches;  // cudaGraphLaunch calls
    unsigned long long graph_kernels;   // kernels and GEMMs those launches ran
} CudaHostCounters;
void cuda_host_counters(CudaHostCounters* out);

// For the runtime's own tests: synchronises the device, then restarts the schedule's random
// generator as CUDA_HOST_SCHEDULE_SEED=seed would, so that one program can try several schedules.
void cuda_host_schedule_seed(unsigned long long seed);

// Launches. LAUNCH (model/cuda_common.cuh) calls cuda_host_launch, which converts the arguments
// to the kernel's parameter types once, into a heap copy (as CUDA copies them at launch: the
// kernel runs later, when the scheduler gets to it); each CUDA thread calls the kernel with its
// own copy of the parameters.
typedef struct {
    const char* name;  // the kernel expression as written, for messages
    const char* file;
    int line;
    dim3 grid, block;
    size_t shmem;
    cudaStream_t stream;
    const void* kernel;                  // identity for cudaFuncSetAttribute
    void (*run_thread)(const void* ctx);  // runs the kernel body for the current CUDA thread
    const void* ctx;
    void (*release)(const void* ctx);    // frees ctx once the kernel has run (or was refused)
} CudaHostLaunch;

// Checks the configuration (errors go to cudaGetLastError at once, as CUDA reports them) and
// queues the kernel on its stream; takes ownership of launch->ctx.
void cuda_host_launch_blocks(const CudaHostLaunch* launch);
// Start of the block's dynamic shared memory (DYNAMIC_SHARED); fails outside a kernel.
void* cuda_host_dynamic_smem(void);

template <typename Body> static void cuda_host_run_body(const void* ctx) {
    (*(const Body*)ctx)();
}
template <typename Body> static void cuda_host_free_body(const void* ctx) { delete (const Body*)ctx; }

// The kernel and its parameters, by value.
template <typename... P> struct CudaHostKernelBody {
    void (*kernel)(P...);
    std::tuple<typename std::decay<P>::type...> params;
    void operator()() const { std::apply(kernel, params); }
};

template <typename... P, typename... A>
static void cuda_host_launch(void (*kernel)(P...), const char* name, const char* file, int line,
                             dim3 grid, dim3 block, size_t shmem, cudaStream_t stream,
                             A&&... args) {
    static_assert(sizeof...(P) == sizeof...(A), "LAUNCH: argument count differs from the kernel's");
    typedef CudaHostKernelBody<P...> Body;
    const Body* body = new Body{kernel, std::tuple<typename std::decay<P>::type...>(std::forward<A>(args)...)};
    CudaHostLaunch launch = {name, file, line, grid, block, shmem, stream, (const void*)kernel,
                             cuda_host_run_body<Body>, body, cuda_host_free_body<Body>};
    cuda_host_launch_blocks(&launch);
}
