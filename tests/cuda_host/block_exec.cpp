// Kernel launches: checks the configuration as CUDA does and queues the launch on its stream; the
// scheduler (stream_sched.cpp) runs its blocks, each block's threads as cooperative fibers (see
// cuda_host.h for the model). Also the block barrier, warp
// collective rounds, the PTX twins' per-warp exchange slots (ptx.cpp).
#include "tests/cuda_host/internal.h"
#include "comm/fail.h"

#include <omp.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

__thread uint3 threadIdx;
__thread uint3 blockIdx;
__thread dim3 blockDim;
__thread dim3 gridDim;

enum { FIBER_READY, FIBER_WAITING, FIBER_DONE };

typedef struct {
    int state;
    const unsigned* wait_gen;  // while WAITING: the round counter it waits on ...
    unsigned wait_value;       // ... to move past this value
    uint3 tid;
    CudaHostWarpResult result;  // of the last warp round, copied out when the round completed
} Fiber;

// One warp's collective state. Only one round is collected at a time: a lane that arrives with
// a different mask while lanes wait is refused (not supported here).
typedef struct {
    unsigned gen;      // completed rounds
    unsigned mask;     // mask of the round being collected
    unsigned arrived;  // lanes of that round that have arrived
    unsigned present;  // lanes that exist in this block
    unsigned exited;   // lanes that returned from the kernel
    const char* what;  // the collective being collected, for reports
    unsigned long long value[32];
    int src[32];
} Warp;

typedef struct {
    CudaHostFibers* fibers;
    int capacity;  // fibers (and stacks) allocated
    Fiber* fiber;
    int nthreads, live, current;
    unsigned bar_gen;  // completed __syncthreads rounds
    int bar_arrived;
    Warp warp[CUDA_HOST_MAX_THREADS / 32];
    CudaHostLaneSlot slot[CUDA_HOST_MAX_THREADS / 32][32];  // the PTX twins' exchanges (ptx.cpp)
    unsigned char* dyn_smem;
    void* alt_stack;   // the alternate signal stack this thread got from us (NULL: its own)
    const CudaHostLaunch* launch;
    int in_kernel;
} Engine;

static __thread Engine* tl_engine;

// An OS thread's engine is freed when the thread exits: OpenMP and OpenBLAS start and end threads
// during a long run, and an engine holds n fiber stacks (2n memory mappings), so engines left
// behind by exited threads would reach the kernel's mapping limit (vm.max_map_count).
struct EngineOwner {
    ~EngineOwner() {
        Engine* e = tl_engine;
        if (!e) return;
        tl_engine = NULL;
        cuda_host_fibers_destroy(e->fibers);
        free(e->fiber);
        free(e->dyn_smem);
        if (e->alt_stack) {
            stack_t ss;
            memset(&ss, 0, sizeof ss);
            ss.ss_flags = SS_DISABLE;
            if (sigaltstack(&ss, NULL) == 0) free(e->alt_stack);
        }
        free(e);
    }
};
static thread_local EngineOwner tl_engine_owner;

static size_t read_stack_bytes(void) {
    const char* env = getenv("CUDA_HOST_STACK_KB");
    long kb = env ? atol(env) : 64;
    CHECK(kb >= 16 && kb <= 65536, "set CUDA_HOST_STACK_KB between 16 and 65536",
          "bad CUDA_HOST_STACK_KB '%s'", env ? env : "");
    return (size_t)kb * 1024;
}

static size_t stack_bytes(void) {
    static const size_t bytes = read_stack_bytes();  // C++ makes this first call thread-safe
    return bytes;
}

// A fiber that runs past the end of its stack faults in the guard page below it; say so rather
// than die with a bare "Segmentation fault". Other faults go to the previous handler.
static struct sigaction previous_segv;

static void segv_handler(int sig, siginfo_t* info, void* uctx) {
    Engine* e = tl_engine;
    if (e && e->in_kernel && cuda_host_fibers_guard_hit(e->fibers, info->si_addr)) {
        char msg[512];
        int n = snprintf(msg, sizeof msg, "error: kernel %s (launched at %s:%d) overflowed the %zu KiB "
                         "stack of a CUDA thread (hint: raise CUDA_HOST_STACK_KB, or move large local "
                         "arrays to shared or global memory)\n", e->launch->name, e->launch->file,
                         e->launch->line, stack_bytes() / 1024);
        if (write(2, msg, (size_t)n) < 0) _exit(3);
        _exit(1);
    }
    (void)sig, (void)uctx;
    sigaction(SIGSEGV, &previous_segv, NULL);  // returning re-runs the access under that handler
}

// Installs the handler once per process and, unless there is one, an alternate signal stack once
// per OS thread (the handler cannot run on the overflowed stack); returns that stack, or NULL.
static void* watch_stack_overflow(void) {
    static const int installed = [] {
        struct sigaction sa;
        memset(&sa, 0, sizeof sa);
        sa.sa_sigaction = segv_handler;
        sa.sa_flags = SA_SIGINFO | SA_ONSTACK;
        sigemptyset(&sa.sa_mask);
        return sigaction(SIGSEGV, &sa, &previous_segv);
    }();
    CHECK(installed == 0, "", "sigaction(SIGSEGV) failed");
    stack_t ss;
    CHECK(sigaltstack(NULL, &ss) == 0, "", "sigaltstack failed");
    if (!(ss.ss_flags & SS_DISABLE)) return NULL;  // the program has its own
    ss.ss_size = 64 * 1024;
    ss.ss_sp = xmalloc(ss.ss_size, "alternate signal stack");
    ss.ss_flags = 0;
    CHECK(sigaltstack(&ss, NULL) == 0, "", "sigaltstack failed");
    return ss.ss_sp;
}

// The calling OS thread's engine, with room for n fibers. Stacks are kept for later blocks.
static Engine* engine_get(int n) {
    Engine* e = tl_engine;
    if (!e) {
        e = (Engine*)xcalloc(1, sizeof *e, "host runtime engine");
        e->dyn_smem = (unsigned char*)aligned_alloc(128, CUDA_HOST_MAX_DYN_SMEM);
        CHECK(e->dyn_smem, "", "out of memory allocating dynamic shared memory");
        tl_engine = e;
        (void)&tl_engine_owner;   // registers the engine's release at this thread's exit
        e->alt_stack = watch_stack_overflow();
    }
    if (e->capacity < n) {
        cuda_host_fibers_destroy(e->fibers);
        free(e->fiber);
        e->fibers = cuda_host_fibers_create(n, stack_bytes());
        e->fiber = (Fiber*)xcalloc((size_t)n, sizeof(Fiber), "fiber table");
        e->capacity = n;
    }
    return e;
}

static Engine* engine_in_kernel(const char* what) {
    Engine* e = tl_engine;
    if (!e || !e->in_kernel) fail_msg("%s called outside a kernel", what);
    return e;
}

static void report_where(const Engine* e, char* buf, size_t len) {
    const CudaHostLaunch* l = e->launch;
    uint3 t = e->fiber[e->current].tid;
    snprintf(buf, len, "kernel %s (launched at %s:%d), block (%u,%u,%u), thread (%u,%u,%u)",
             l->name, l->file, l->line, blockIdx.x, blockIdx.y, blockIdx.z, t.x, t.y, t.z);
}

// Suspends the current fiber until *gen moves past value.
static void wait_on(Engine* e, const unsigned* gen, unsigned value) {
    Fiber* f = &e->fiber[e->current];
    f->state = FIBER_WAITING;
    f->wait_gen = gen;
    f->wait_value = value;
    cuda_host_fiber_switch(e->fibers, e->current, e->capacity);
}

void __syncthreads(void) {
    Engine* e = engine_in_kernel("__syncthreads");
    unsigned g = e->bar_gen;
    if (++e->bar_arrived == e->live) {
        e->bar_arrived = 0;
        e->bar_gen++;
        return;
    }
    wait_on(e, &e->bar_gen, g);
}

void cuda_host_check_width(int width, const char* what) {
    if (width < 1 || width > 32 || (width & (width - 1))) {
        char where[512];
        report_where(engine_in_kernel(what), where, sizeof where);
        fail_msg("%s: width %d is not a power of two in [1, 32] (%s)", what, width, where);
    }
}

static void complete_round(Engine* e, Warp* w, int warp_index) {
    unsigned members = w->mask & w->present, ballot = 0;
    for (int l = 0; l < 32; l++)
        if ((members >> l & 1u) && w->value[l]) ballot |= 1u << l;
    for (int l = 0; l < 32; l++) {
        if (!(members >> l & 1u)) continue;
        int s = w->src[l];
        CudaHostWarpResult* r = &e->fiber[warp_index * 32 + l].result;
        r->value = (members >> s & 1u) ? w->value[s] : ~0ull;
        r->ballot = ballot;
        r->members = members;
    }
    w->arrived = 0;
    w->gen++;
}

CudaHostWarpResult cuda_host_warp_round(unsigned mask, unsigned long long value, int src_lane,
                                        const char* what) {
    Engine* e = engine_in_kernel(what);
    int lane = e->current & 31, wi = e->current >> 5;
    Warp* w = &e->warp[wi];
    unsigned bit = 1u << lane;
    char where[512];
    if (!(mask & bit)) {
        report_where(e, where, sizeof where);
        fail_msg("%s: the calling lane %d is not in mask 0x%08x (%s)", what, lane, mask, where);
    }
    if (mask & w->exited) {
        report_where(e, where, sizeof where);
        fail_msg("%s: mask 0x%08x names lanes 0x%08x that have returned (%s)", what, mask,
                 mask & w->exited, where);
    }
    if (w->arrived == 0) {
        w->mask = mask;
        w->what = what;
    } else if (w->mask != mask) {
        report_where(e, where, sizeof where);
        fail_msg("%s: lanes 0x%08x wait in a collective with mask 0x%08x, lane %d arrives with mask "
                 "0x%08x; concurrent warp collectives with different masks are not supported by "
                 "the host runtime (%s)", what, w->arrived, w->mask, lane, mask, where);
    }
    w->value[lane] = value;
    w->src[lane] = src_lane & 31;
    w->arrived |= bit;
    if (w->arrived == (mask & w->present)) complete_round(e, w, wi);
    else wait_on(e, &w->gen, w->gen);
    return e->fiber[e->current].result;
}

unsigned __activemask(void) {
    Engine* e = engine_in_kernel("__activemask");
    Warp* w = &e->warp[e->current >> 5];
    return w->present & ~w->exited;
}

CudaHostLaneSlot* cuda_host_warp_slots(const char* what) {
    Engine* e = engine_in_kernel(what);
    if (e->warp[e->current >> 5].present != 0xffffffffu) {
        char where[512];
        report_where(e, where, sizeof where);
        fail_msg("%s needs a full warp of 32 threads (%s)", what, where);
    }
    return e->slot[e->current >> 5];
}

const CudaHostLaunch* cuda_host_current_launch(const char* what) { return engine_in_kernel(what)->launch; }

int cuda_host_current_thread(const char* what) { return engine_in_kernel(what)->current; }

void cuda_host_where(char* buf, size_t len, const char* what) { report_where(engine_in_kernel(what), buf, len); }

static void fiber_exit(Engine* e) {
    Fiber* f = &e->fiber[e->current];
    Warp* w = &e->warp[e->current >> 5];
    unsigned bit = 1u << (e->current & 31);
    cuda_host_ptx_thread_exit();
    f->state = FIBER_DONE;
    e->live--;
    w->exited |= bit;
    if (w->arrived && (w->mask & bit)) {
        char where[512];
        report_where(e, where, sizeof where);
        fail_msg("thread returned while lanes 0x%08x of its warp wait for it in a warp collective "
                 "(%s) with mask 0x%08x (%s)", w->arrived, w->what, w->mask, where);
    }
    if (e->bar_arrived > 0 && e->bar_arrived == e->live) {  // the others waited only for us
        e->bar_arrived = 0;
        e->bar_gen++;
    }
    cuda_host_fiber_switch(e->fibers, e->current, e->capacity);
    fail_msg("host runtime: a finished fiber was resumed");
}

static void fiber_main(void) {
    Engine* e = tl_engine;
    e->launch->run_thread(e->launch->ctx);
    fiber_exit(e);
}

static void report_deadlock(Engine* e) {
    int at_bar = 0, at_warp = 0, done = 0;
    char warps[256] = "";
    for (int i = 0; i < e->nthreads; i++) {
        Fiber* f = &e->fiber[i];
        if (f->state == FIBER_DONE) done++;
        else if (f->wait_gen == &e->bar_gen) at_bar++;
        else at_warp++;
    }
    for (int wi = 0; wi * 32 < e->nthreads; wi++) {
        Warp* w = &e->warp[wi];
        size_t len = strlen(warps);
        if (w->arrived && len < sizeof warps - 64)
            snprintf(warps + len, sizeof warps - len, " warp %d: %s, mask 0x%08x, arrived 0x%08x;",
                     wi, w->what, w->mask, w->arrived);
    }
    const CudaHostLaunch* l = e->launch;
    fail_at(l->file, l->line,
            "every thread of a block must reach the same __syncthreads, and every lane named in "
            "a warp collective's mask must call it",
            "deadlock in kernel %s, block (%u,%u,%u): %d threads wait in __syncthreads, %d in warp "
            "collectives,%s %d returned", l->name, blockIdx.x, blockIdx.y, blockIdx.z, at_bar,
            at_warp, warps, done);
}

static void run_block(const CudaHostLaunch* l, long b) {
    int n = (int)(l->block.x * l->block.y * l->block.z);
    Engine* e = engine_get(n);
    gridDim = l->grid;
    blockDim = l->block;
    blockIdx.x = (unsigned)(b % l->grid.x);
    blockIdx.y = (unsigned)(b / l->grid.x % l->grid.y);
    blockIdx.z = (unsigned)(b / ((long)l->grid.x * l->grid.y));
    e->launch = l;
    e->nthreads = n;
    e->live = n;
    e->bar_gen = 0;
    e->bar_arrived = 0;
    for (int wi = 0; wi * 32 < n; wi++) {
        Warp* w = &e->warp[wi];
        int lanes = n - wi * 32 < 32 ? n - wi * 32 : 32;
        memset(w, 0, sizeof *w);
        w->present = lanes == 32 ? 0xffffffffu : (1u << lanes) - 1;
    }
    for (int i = 0; i < n; i++) {
        Fiber* f = &e->fiber[i];
        f->state = FIBER_READY;
        f->wait_gen = NULL;
        f->tid.x = (unsigned)i % l->block.x;
        f->tid.y = (unsigned)i / l->block.x % l->block.y;
        f->tid.z = (unsigned)i / (l->block.x * l->block.y);
        cuda_host_fiber_init(e->fibers, i, fiber_main);
    }
    if (l->shmem) memset(e->dyn_smem, 0xff, l->shmem);
    e->in_kernel = 1;
    while (e->live > 0) {
        int ran = 0;
        for (int i = 0; i < n; i++) {
            Fiber* f = &e->fiber[i];
            if (f->state == FIBER_DONE) continue;
            if (f->state == FIBER_WAITING) {
                if (*f->wait_gen == f->wait_value) continue;
                f->state = FIBER_READY;
            }
            e->current = i;
            threadIdx = f->tid;
            cuda_host_fiber_switch(e->fibers, e->capacity, i);
            ran = 1;
        }
        if (!ran) report_deadlock(e);
    }
    e->in_kernel = 0;
}

void* cuda_host_dynamic_smem(void) { return engine_in_kernel("DYNAMIC_SHARED")->dyn_smem; }

// The launch configuration errors CUDA reports through cudaGetLastError.
static cudaError_t check_launch(const CudaHostLaunch* l) {
    dim3 g = l->grid, b = l->block;
    unsigned long long threads = (unsigned long long)b.x * b.y * b.z;
    if (!cuda_host_stream_valid(l->stream))
        return cuda_host_fail(cudaErrorInvalidResourceHandle, "launch of %s at %s:%d: invalid stream",
                              l->name, l->file, l->line);
    if (!g.x || !g.y || !g.z || !b.x || !b.y || !b.z)
        return cuda_host_fail(cudaErrorInvalidConfiguration,
                              "launch of %s at %s:%d: zero-sized grid (%u,%u,%u) or block (%u,%u,%u)",
                              l->name, l->file, l->line, g.x, g.y, g.z, b.x, b.y, b.z);
    if (threads > CUDA_HOST_MAX_THREADS || b.x > 1024 || b.y > 1024 || b.z > 64)
        return cuda_host_fail(cudaErrorInvalidConfiguration,
                              "launch of %s at %s:%d: block (%u,%u,%u) has %llu threads; the limits "
                              "are 1024 threads and (1024,1024,64) per dimension",
                              l->name, l->file, l->line, b.x, b.y, b.z, threads);
    if (g.x > 0x7fffffffu || g.y > 65535 || g.z > 65535)
        return cuda_host_fail(cudaErrorInvalidConfiguration,
                              "launch of %s at %s:%d: grid (%u,%u,%u) over the limits (2^31-1,65535,65535)",
                              l->name, l->file, l->line, g.x, g.y, g.z);
    size_t limit = cuda_host_dynamic_smem_limit(l->kernel);
    if (l->shmem > limit)
        return cuda_host_fail(cudaErrorInvalidValue,
                              "launch of %s at %s:%d: %zu bytes of dynamic shared memory, over this "
                              "kernel's limit of %zu (raise it with cudaFuncSetAttribute("
                              "cudaFuncAttributeMaxDynamicSharedMemorySize), at most %d)",
                              l->name, l->file, l->line, l->shmem, limit, cuda_host_smem_optin());
    return cudaSuccess;
}

// Blocks [begin, end) of a launch, spread over OpenMP threads.
static void run_blocks(const CudaHostLaunch* l, long begin, long end) {
    long nblocks = end - begin;
    int threads = omp_in_parallel() ? 1 : omp_get_max_threads();
    if (threads > nblocks) threads = (int)nblocks;
    if (threads < 2) {
        for (long b = begin; b < end; b++) run_block(l, b);
        return;
    }
    long chunk = nblocks / ((long)threads * 8) + 1;
#pragma omp parallel for num_threads(threads) schedule(dynamic, chunk)
    for (long b = begin; b < end; b++) run_block(l, b);
}

// A queued launch. When other stream work could run too, a step runs a random number of the
// blocks left, so that the blocks of concurrent kernels interleave as on a GPU.
struct KernelOp : CudaHostOp {
    CudaHostLaunch launch;
    long next = 0, nblocks = 0;
    ~KernelOp() override { launch.release(launch.ctx); }
    int step(int split) override {
        long left = nblocks - next;
        long n = split ? 1 + (long)cuda_host_schedule_rand((unsigned long long)left) : left;
        run_blocks(&launch, next, next + n);
        next += n;
        return next == nblocks;
    }
    void describe(char* buf, size_t len) override {
        snprintf(buf, len, "kernel %s (launched at %s:%d, %ld of %ld blocks run)", launch.name, launch.file,
                 launch.line, next, nblocks);
    }
};

void cuda_host_launch_blocks(const CudaHostLaunch* l) {
    if (tl_engine && tl_engine->in_kernel) {
        l->release(l->ctx);
        fail_msg("launch of %s at %s:%d from inside a kernel: dynamic parallelism is not supported "
                 "by the host runtime", l->name, l->file, l->line);
    }
    if (check_launch(l) != cudaSuccess) {
        l->release(l->ctx);
        return;
    }
    KernelOp* op = new KernelOp();
    op->launch = *l;
    op->nblocks = (long)l->grid.x * l->grid.y * l->grid.z;
    cuda_host_enqueue(l->stream, op);
    cuda_host_count_launch();
}
