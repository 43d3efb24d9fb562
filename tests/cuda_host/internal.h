// Shared by the host runtime's .cpp files; not for CUDA sources.
#pragma once
#include <stddef.h>
#include <functional>
#include <memory>
#include <vector>
#include "tests/cuda_host/cuda_host.h"

// Records err as this thread's last error with a printf-style detail (cuda_host_error_detail);
// returns err so that API functions can `return cuda_host_fail(...)`.
cudaError_t cuda_host_fail(cudaError_t err, const char* fmt, ...) __attribute__((format(printf, 2, 3)));
// Clears the detail on success paths that follow a failure.
void cuda_host_set_detail(const char* fmt, ...) __attribute__((format(printf, 1, 2)));

// What a host address range is to the runtime.
typedef enum {
    CUDA_HOST_MEM_UNTRACKED,  // not from the runtime: ordinary host memory
    CUDA_HOST_MEM_DEVICE,     // inside one cudaMalloc block
    CUDA_HOST_MEM_PINNED,     // inside one cudaMallocHost block
    CUDA_HOST_MEM_OVERRUN     // starts inside a block but runs past its end
} CudaHostMemKind;
CudaHostMemKind cuda_host_mem_kind(const void* ptr, size_t bytes);
// Total bytes currently allocated with cudaMalloc (as requested, not rounded: cudaMemGetInfo
// reports exactly what the program holds).
size_t cuda_host_device_bytes(void);
// The device's memory: 80 GiB, or CUDA_HOST_DEVICE_MEMORY (runtime_api.cpp).
size_t cuda_host_total_memory(void);
size_t cuda_host_pinned_limit(void);   // CUDA_HOST_PINNED_MEMORY (SIZE_MAX: none)

// Dynamic shared memory a launch of kernel may use: 48 KiB unless cudaFuncSetAttribute raised it.
size_t cuda_host_dynamic_smem_limit(const void* kernel);
// The most a kernel may opt in to (cudaDevAttrMaxSharedMemoryPerBlockOptin): 227 KiB as on an
// H100, or CUDA_HOST_SMEM_OPTIN bytes from the environment (at most 227 KiB) to act as a GPU with
// less, e.g. 101376 (99 KiB, sm_86/sm_89).
int cuda_host_smem_optin(void);

// Streams: NULL, cudaStreamLegacy, cudaStreamPerThread and live created streams are valid.
int cuda_host_stream_valid(cudaStream_t stream);

// --- Stream work (stream_sched.cpp) ----------------------------------------------------------------
// Every stream-ordered operation is an op queued on its stream when issued and run later by the
// scheduler, which picks among the streams whose first op may run one at random
// (CUDA_HOST_SCHEDULE_SEED); host synchronisation points run work until what they wait for is
// done. CUDA_HOST_SCHEDULE=inorder runs each op when it is issued instead.

// The pos-th op issued on a stream (from 1); done once the stream has completed pos ops (a
// stream completes its ops in order). pos 0 is always done.
struct CudaHostTicket {
    struct CUstream_st* stream;
    unsigned long long pos;
};

// One operation of a stream. The scheduler deletes it when complete.
struct CudaHostOp {
    virtual ~CudaHostOp() {}
    // Does the op, or a part of it; returns 1 when it is complete. split: other work could run
    // now, so a kernel may run some of its blocks only.
    virtual int step(int split) = 0;
    // Asked before the first step, once stream order and deps allow it: 0 while the op must wait
    // for something else (NCCL: an op issued earlier on its communicator has not started).
    virtual int can_start(void) { return 1; }
    // 1 while it has started and waits for something outside the runtime (MPI requests): it is
    // polled, and the host yields the CPU when nothing else can run.
    virtual int polling(void) { return 0; }
    // What the op is, for reports ("kernel foo (launched at f.cu:12)").
    virtual void describe(char* buf, size_t len) = 0;
    // Why can_start() is 0, for reports.
    virtual void describe_wait(char* buf, size_t len) { buf[0] = 0; }
    // Positions that must be done before the op starts, besides its own stream's order: the
    // event a wait captured, the legacy stream's rules, the streams an NCCL group joins.
    std::vector<CudaHostTicket> deps;
    int started = 0;
    // A fresh copy of the op as issued (not run), for a graph that replays it; NULL: the op
    // cannot be captured (a stream capture that meets it ends the job).
    virtual CudaHostOp* clone() const { return NULL; }
    // Called on each copy a graph launch issues, in the graph's order, before it is queued: what
    // each launch takes afresh (an NCCL operation's turn on its communicators).
    virtual void replayed(void) {}
    // What a replayed op keeps alive (the graph that holds its arguments).
    std::shared_ptr<void> keep;
};

// Queues op on stream (NULL, cudaStreamLegacy, cudaStreamPerThread or a created stream; the
// caller checked that it is valid) with the legacy default stream's ordering rules and returns
// its position. With CUDA_HOST_SCHEDULE=inorder, runs it to completion first.
CudaHostTicket cuda_host_enqueue(cudaStream_t stream, CudaHostOp* op);
// The same for work done in one go: `what` (a string literal) names it in reports.
CudaHostTicket cuda_host_enqueue_fn(cudaStream_t stream, const char* what, std::function<void()> fn);
// One op on several streams (an NCCL group): it runs on streams[0] after the work issued so far
// on every one of them, and later work on each of them runs after it.
CudaHostTicket cuda_host_enqueue_joined(const cudaStream_t* streams, int n, CudaHostOp* op);
// 1 if stream's work is being recorded by a stream capture (cudaStreamBeginCapture): what is
// issued on it then is recorded, not queued (cuda_host_enqueue returns a ticket that is done).
int cuda_host_capturing(cudaStream_t stream);
// Ends the job if a stream capture is open: `what` (cudaMalloc, a synchronisation, a query) is a
// call that CUDA refuses in global capture mode, invalidating the capture.
void cuda_host_capture_forbidden(const char* what);
// For a call on a capturing stream that CUDA cannot record (cudaFreeAsync, a copy of pageable
// memory): invalidates the capture and returns cudaErrorStreamCaptureUnsupported with `why`.
cudaError_t cuda_host_capture_refuse(cudaStream_t stream, const char* why);
// 1 if the op at t has completed.
int cuda_host_ticket_done(CudaHostTicket t);
// Host synchronisation: runs stream work until t is done / until done() / until every stream
// is empty. `what` names the API call in a deadlock report. A call from inside stream work (a
// failure hook) runs nothing.
void cuda_host_wait_ticket(CudaHostTicket t, const char* what);
void cuda_host_drain_until(const std::function<int()>& done, const char* what);
void cuda_host_drain_all(const char* what);
// The counters of cuda_host_counters (host_runtime.h): a kernel or GEMM issued (t: what
// cuda_host_enqueue returned; recorded by a capture, it counts when a graph launch runs it), a
// copy out of device memory into host memory issued. Host synchronisations are counted by the
// wait and drain functions above.
void cuda_host_count_launch(CudaHostTicket t);
void cuda_host_count_d2h(void);
// A number in [0, n) from the schedule's generator (n >= 1); for ops that split their work.
unsigned long long cuda_host_schedule_rand(unsigned long long n);
// 1 under CUDA_HOST_SCHEDULE=inorder.
int cuda_host_schedule_inorder(void);

// Fibers (fiber.cpp): n fibers with their own stacks, and slot n for the OS thread's own
// stack (the scheduler). Under CUDA_HOST_FIBER_UCONTEXT (or on a CPU other than x86-64) the
// switch is glibc's swapcontext; otherwise a small assembly switch that saves only what the
// SysV ABI says a call preserves (about 10x faster: swapcontext makes a system call).
typedef struct CudaHostFibers CudaHostFibers;
// Maps n stacks of stack_bytes, each with a PROT_NONE guard page below it.
CudaHostFibers* cuda_host_fibers_create(int n, size_t stack_bytes);
void cuda_host_fibers_destroy(CudaHostFibers* f);
// Prepares fiber i to run entry() from the top of its stack when switched to; entry must never
// return (it switches away for the last time instead).
void cuda_host_fiber_init(CudaHostFibers* f, int i, void (*entry)(void));
// Saves the running context as fiber `from` and resumes fiber `to`.
void cuda_host_fiber_switch(CudaHostFibers* f, int from, int to);
// 1 if addr lies in one of the guard pages below the stacks (a fiber overflowed its stack).
int cuda_host_fibers_guard_hit(const CudaHostFibers* f, const void* addr);

// GEMM helpers shared by cublas.cpp and cublaslt.cpp (gemm.cpp). Matrices are column-major.
// Bytes per element of a supported storage type (CUDA_R_32F, CUDA_R_16BF); 0 for others.
size_t cuda_host_type_size(cudaDataType_t t);
const char* cuda_host_type_name(cudaDataType_t t);
float cuda_host_load(const void* base, cudaDataType_t t, size_t i);
void cuda_host_store(void* base, cudaDataType_t t, size_t i, float v);
// A packed float copy (leading dimension rows) of a rows x cols matrix; free() it.
float* cuda_host_widen(const void* p, cudaDataType_t t, long rows, long cols, long ld);
// 1 if `batch` rows x cols matrices (leading dimension ld, `stride` elements apart) lie in
// device or pinned memory; otherwise prints and records why (naming `what`) and returns 0.
int cuda_host_operand_ok(const char* what, const char* name, const void* p, cudaDataType_t t,
                         long rows, long cols, long ld, long long stride, int batch);
// T = alpha * op(A) op(B) + beta * T in fp32 (T is m x n); beta == 0 ignores T's contents and
// k == 0 only scales T, as BLAS specifies.
void cuda_host_sgemm(int transa, int transb, int m, int n, int k, float alpha, const float* A,
                     long lda, const float* B, long ldb, float beta, float* T, long ldt);
// Prints "cuda host runtime: <message>" to stderr, records it for cuda_host_error_detail and
// returns status: unsupported or invalid cuBLAS use is never silent.
cublasStatus_t cuda_host_blas_fail(cublasStatus_t status, const char* fmt, ...)
    __attribute__((format(printf, 2, 3)));

// --- Hooks for the PTX twins (ptx.cpp; block_exec.cpp keeps the per-warp and per-thread state) ---
// One lane's deposit in a full-warp exchange: a tag naming the instruction, its operands, and the
// lane's result, written when the exchange completes.
typedef struct {
    unsigned tag;  // 0: none (the exchange's completion clears every lane's tag)
    union {
        struct {
            float f[12];  // mma: the lane's 8 A and 4 B elements, unpacked
            float c[4];   // mma: its accumulator in
        };
        uintptr_t ptr;  // ldmatrix: the lane's row address
    };
    union {
        float d[4];     // mma: its accumulator out
        uint32_t r[4];  // ldmatrix: its registers
    };
} CudaHostLaneSlot;
// The 32 exchange slots of the calling lane's warp. Fails (naming what) outside a kernel or unless
// the warp has 32 threads.
CudaHostLaneSlot* cuda_host_warp_slots(const char* what);
// A full-warp exchange round (the caller has filled its slot): the last lane to arrive runs
// cuda_host_exchange_complete on the warp's 32 slots before any lane goes on, so the instruction
// executes once for the warp, on the operands and shared memory of one moment, as on a GPU.
void cuda_host_warp_exchange(const char* what);
// ptx.cpp: checks that the 32 lanes are in the instruction of lane `completer` (named `what`),
// writes each lane's result into its slot and clears the tags.
void cuda_host_exchange_complete(CudaHostLaneSlot* s, int completer, const char* what);
// The running launch, and the calling CUDA thread's linear index in its block; fail outside a kernel.
const CudaHostLaunch* cuda_host_current_launch(const char* what);
int cuda_host_current_thread(const char* what);
// "kernel k (launched at f:l), block (x,y,z), thread (x,y,z)" of the calling thread, for messages.
void cuda_host_where(char* buf, size_t len, const char* what);
// Called when a CUDA thread returns from the kernel (ptx.cpp: fails if it left cp.async copies).
void cuda_host_ptx_thread_exit(void);
// Spin-waits (block_exec.cpp), for the ld.acquire, red.release and nanosleep twins: the value an
// ld.acquire read (the fiber's wait state); a nanosleep: yields to the block's other threads and,
// once the wait has stalled, starts a helper thread for the launch's other blocks, sleeps, and
// fails after CUDA_HOST_SPIN_TIMEOUT_S (default 30) seconds without progress; progress: a
// red.release (blocks that finish count too).
void cuda_host_spin_acquired(const void* addr, unsigned value);
void cuda_host_spin_pause(unsigned ns);
void cuda_host_spin_progress(void);
// Hopper twins (ptx_sm90.cpp): called when a block starts (its threads not yet run) and when all
// its threads have returned (fails if TMA copies were never waited for, or a warpgroup's threads
// made different setmaxnreg calls). Block-level state lives on the OS thread that runs the block.
void cuda_host_ptx_block_begin(void);
void cuda_host_ptx_block_end(void);
// Switches to the block's other threads (the caller stays ready): the mbarrier twin's try_wait.
void cuda_host_yield(const char* what);
// 1 if [p, p + bytes) lies in the running block's shared memory (dynamic or static; ptx.cpp).
int cuda_host_in_shared(const void* p, size_t bytes);
