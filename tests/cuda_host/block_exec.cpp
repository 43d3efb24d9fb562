// Kernel launches: checks the configuration as CUDA does and queues the launch on its stream; the
// scheduler (stream_sched.cpp) runs its blocks, each block's threads as cooperative fibers (see
// cuda_host.h for the model). Also the block barrier, warp
// collective rounds, the PTX twins' per-warp exchange slots (ptx.cpp).
#include "tests/cuda_host/internal.h"
#include "comm/fail.h"

#include <omp.h>
#include <signal.h>
#include <time.h>
#include <atomic>
#include <mutex>
#include <thread>
#include <vector>
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
    // Spin-wait state (cuda_host_spin_*): the last ld.acquire, and how long the fiber has paused
    // in nanosleep seeing that same value with no progress anywhere.
    const void* acq_addr;
    unsigned acq_value;
    long spins;
    double spin_since;
    unsigned long long progress_seen;
} Fiber;

// The blocks of one launch not yet started, in a seeded order (queue_block). The OpenMP threads of
// a scheduler step take positions up to `quota`; a block that stalls in a spin-wait starts a helper
// OS thread that takes positions up to the end of the launch, so the block it waits for can run.
typedef struct BlockQueue {
    const CudaHostLaunch* launch;
    std::atomic<long> next;
    long nblocks;
    int mul, add, tail_mul;  // the permutation of each window of positions (queue_block)
    int lag_add;             // which warp lags in block b (block_lag_warp)
    std::mutex lock;
    std::vector<std::thread> helpers;
} BlockQueue;

// One warp's collective state. Only one round is collected at a time: a lane that arrives with
// a different mask while lanes wait is refused (not supported here).
typedef struct {
    unsigned gen;      // completed rounds
    unsigned mask;     // mask of the round being collected
    unsigned arrived;  // lanes of that round that have arrived
    unsigned present;  // lanes that exist in this block
    unsigned exited;   // lanes that returned from the kernel
    const char* what;  // the collective being collected, for reports
    int exchange;      // some lane of the round is in a PTX twin's exchange (cuda_host_warp_exchange)
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
    // Named barriers (bar.sync / bar.arrive id, n; id 0 is __syncthreads'): completed rounds,
    // threads arrived in the round being collected, and that round's thread count.
    unsigned nbar_gen[16];
    int nbar_arrived[16], nbar_count[16];
    Warp warp[CUDA_HOST_MAX_THREADS / 32];
    CudaHostLaneSlot slot[CUDA_HOST_MAX_THREADS / 32][32];  // the PTX twins' exchanges (ptx.cpp)
    unsigned char* dyn_smem;
    void* alt_stack;   // the alternate signal stack this thread got from us (NULL: its own)
    const CudaHostLaunch* launch;
    BlockQueue* queue;  // of the running block
    int helped;         // the running block has started a helper thread
    int in_kernel;
    // The pass over the block's fibers under way (run_block): whether the lagging warp sits it
    // out, and whether a fiber ran or was skipped for the lag (neither: a deadlock).
    int lag_warp, pass_lagging, pass_ran, pass_skipped;
} Engine;

static __thread Engine* tl_engine;

// An OS thread's engine is given back when the thread exits: OpenMP and OpenBLAS start and end
// threads during a long run, and an engine holds n fiber stacks (2n memory mappings), so engines
// left behind by exited threads would reach the kernel's mapping limit (vm.max_map_count). The
// next thread takes it from a pool: the helper threads of launches whose blocks spin-wait
// (start_helper) come and go by the hundred, and a new engine's stacks and shared memory cost a
// guard page each and a page fault at each first touch (the pool halved the system time of the
// semaphore-ordered attention tests). The pool holds at most CUDA_HOST_POOLED_FIBERS fibers' stacks
// in all; engines beyond that are freed. (Never destroyed: a thread may end after static
// destructors have run.)
typedef struct {
    std::mutex lock;
    std::vector<Engine*> engines;
    int fibers;
} EnginePool;
static EnginePool& engine_pool(void) {
    static EnginePool* pool = new EnginePool();
    return *pool;
}

static void engine_free(Engine* e) {
    cuda_host_fibers_destroy(e->fibers);
    free(e->fiber);
    free(e->dyn_smem);
    free(e);
}

struct EngineOwner {
    ~EngineOwner() {
        Engine* e = tl_engine;
        if (!e || e->in_kernel) return;  // exit() from a fiber (a failure) runs on one of these stacks
        tl_engine = NULL;
        if (e->alt_stack) {   // the thread's own: the next thread gets a new one (watch_stack_overflow)
            stack_t ss;
            memset(&ss, 0, sizeof ss);
            ss.ss_flags = SS_DISABLE;
            if (sigaltstack(&ss, NULL) == 0) free(e->alt_stack);
            e->alt_stack = NULL;
        }
        {
            EnginePool& pool = engine_pool();
            std::lock_guard<std::mutex> guard(pool.lock);
            if (pool.fibers + e->capacity <= CUDA_HOST_POOLED_FIBERS) {
                pool.engines.push_back(e);
                pool.fibers += e->capacity;
                return;
            }
        }
        engine_free(e);
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
        {
            EnginePool& pool = engine_pool();
            std::lock_guard<std::mutex> guard(pool.lock);
            if (!pool.engines.empty()) {
                e = pool.engines.back();
                pool.engines.pop_back();
                pool.fibers -= e->capacity;
            }
        }
        if (!e) {
            e = (Engine*)xcalloc(1, sizeof *e, "host runtime engine");
            // 1024-byte aligned: TMA's 128-byte swizzle uses the address bits up to bit 9, so a kernel
            // that aligns its tiles to 1024 bytes sees the same swizzle here as on a GPU.
            e->dyn_smem = (unsigned char*)aligned_alloc(1024, CUDA_HOST_MAX_DYN_SMEM);
            CHECK(e->dyn_smem, "", "out of memory allocating dynamic shared memory");
        }
        tl_engine = e;
        (void)&tl_engine_owner;   // registers the engine's release at this thread's exit
        e->alt_stack = watch_stack_overflow();
    }
    if (e->capacity < n) {   // (a pooled engine keeps its stacks: only a larger block needs more)
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

// A pass runs each fiber that can run once, in thread order, until it waits, yields or returns.
// The first fiber at or after position i that can run in this pass (a waiting one whose round
// has completed becomes ready; the lagging warp may sit the pass out), or nthreads: none.
static int pass_next(Engine* e, int i) {
    for (; i < e->nthreads; i++) {
        Fiber* f = &e->fiber[i];
        if (f->state == FIBER_DONE) continue;
        if (f->state == FIBER_WAITING) {
            if (*f->wait_gen == f->wait_value) continue;
            f->state = FIBER_READY;
        }
        if (e->pass_lagging && i / 32 == e->lag_warp) {
            e->pass_skipped = 1;
            continue;
        }
        break;
    }
    return i;
}

static void enter(Engine* e, int i) {
    e->current = i;
    threadIdx = e->fiber[i].tid;
    e->pass_ran = 1;
}

// Leaves the running fiber (waiting, yielding or returned) for the next one of the pass, straight
// from fiber to fiber, or for the scheduler (run_block) when the pass is over.
static void switch_away(Engine* e) {
    int from = e->current, to = pass_next(e, from + 1);
    if (to == e->nthreads) to = e->capacity;  // the scheduler's context
    else enter(e, to);
    cuda_host_fiber_switch(e->fibers, from, to);
}

// Suspends the current fiber until *gen moves past value.
static void wait_on(Engine* e, const unsigned* gen, unsigned value) {
    Fiber* f = &e->fiber[e->current];
    f->state = FIBER_WAITING;
    f->wait_gen = gen;
    f->wait_value = value;
    switch_away(e);
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

// bar.sync (wait) / bar.arrive id, n: n threads (a multiple of 32; 0: the block's threads rounded
// up to whole warps) complete the round. PTX counts whole warps; here each thread counts one.
static void named_barrier(unsigned id, unsigned n, int wait, const char* what) {
    Engine* e = engine_in_kernel(what);
    int block_warps = (e->nthreads + 31) / 32;
    if (n == 0) n = (unsigned)(32 * block_warps);
    char where[512];
    if (id >= 16 || n % 32 || n > (unsigned)(32 * block_warps)) {
        report_where(e, where, sizeof where);
        fail_msg("%s %u, %u: the barrier must be in [0, 16) and the thread count a multiple of 32 of at "
                 "most the block's %d warps (%s)", what, id, n, block_warps, where);
    }
    if (id == 0) {  // barrier 0 is __syncthreads' (as on a GPU): only the whole block may use it
        if (n != (unsigned)(32 * block_warps) || !wait) {
            report_where(e, where, sizeof where);
            fail_msg("%s 0, %u: barrier 0 is __syncthreads' and takes the whole block (%d threads) with "
                     "bar.sync; use ids 1-15 for subsets (%s)", what, n, e->nthreads, where);
        }
        __syncthreads();
        return;
    }
    if (e->nbar_arrived[id] == 0) e->nbar_count[id] = (int)n;
    else if (e->nbar_count[id] != (int)n) {
        report_where(e, where, sizeof where);
        fail_msg("%s %u, %u: %d threads are in a round of barrier %u with thread count %d; all "
                 "participants must give the same count (%s)", what, id, n, e->nbar_arrived[id], id,
                 e->nbar_count[id], where);
    }
    unsigned g = e->nbar_gen[id];
    if (++e->nbar_arrived[id] == (int)n) {
        e->nbar_arrived[id] = 0;
        e->nbar_gen[id]++;
        return;
    }
    if (wait) wait_on(e, &e->nbar_gen[id], g);
}

void cuda_host_named_barrier_sync(unsigned id, unsigned nthreads) { named_barrier(id, nthreads, 1, "bar.sync"); }
void cuda_host_named_barrier_arrive(unsigned id, unsigned nthreads) { named_barrier(id, nthreads, 0, "bar.arrive"); }

void cuda_host_yield(const char* what) { switch_away(engine_in_kernel(what)); }

void cuda_host_check_width(int width, const char* what) {
    if (width < 1 || width > 32 || (width & (width - 1))) {
        char where[512];
        report_where(engine_in_kernel(what), where, sizeof where);
        fail_msg("%s: width %d is not a power of two in [1, 32] (%s)", what, width, where);
    }
}

static void complete_round(Engine* e, Warp* w, int warp_index, const char* what) {
    if (w->exchange) {
        w->exchange = 0;
        cuda_host_exchange_complete(e->slot[warp_index], e->current & 31, what);
    }
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
    if (w->arrived == (mask & w->present)) complete_round(e, w, wi, what);
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

void cuda_host_warp_exchange(const char* what) {
    Engine* e = engine_in_kernel(what);
    e->warp[e->current >> 5].exchange = 1;
    cuda_host_warp_round(0xffffffffu, 0, 0, what);
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
    switch_away(e);
    fail_msg("host runtime: a finished fiber was resumed");
}

static void fiber_main(void) {
    Engine* e = tl_engine;
    e->launch->run_thread(e->launch->ctx);
    fiber_exit(e);
}

static void report_deadlock(Engine* e) {
    int at_bar = 0, at_warp = 0, at_named = 0, done = 0;
    char warps[256] = "";
    for (int i = 0; i < e->nthreads; i++) {
        Fiber* f = &e->fiber[i];
        if (f->state == FIBER_DONE) done++;
        else if (f->wait_gen == &e->bar_gen) at_bar++;
        else if (f->wait_gen >= e->nbar_gen && f->wait_gen < e->nbar_gen + 16) at_named++;
        else at_warp++;
    }
    for (int id = 1; id < 16; id++) {
        size_t len = strlen(warps);
        if (e->nbar_arrived[id] && len < sizeof warps - 64)
            snprintf(warps + len, sizeof warps - len, " bar.sync %d: %d of %d threads arrived;", id,
                     e->nbar_arrived[id], e->nbar_count[id]);
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
            "deadlock in kernel %s, block (%u,%u,%u): %d threads wait in __syncthreads, %d in named "
            "barriers, %d in warp collectives,%s %d returned", l->name, blockIdx.x, blockIdx.y, blockIdx.z,
            at_bar, at_named, at_warp, warps, done);
}

// Blocks finished and red.release operations, process-wide: a spin-wait that sees neither for
// CUDA_HOST_SPIN_TIMEOUT_S is reported as a deadlock.
static std::atomic<unsigned long long> spin_progress;

void cuda_host_spin_progress(void) { spin_progress.fetch_add(1, std::memory_order_relaxed); }

// CUDA_HOST_LAG=K (K >= 2; unset, 0 or 1: off): in every block of two warps or more one warp lags,
// running one pass of the block's fibers in K, so that the others run up to K - 1 barrier-to-barrier
// steps ahead of it (a warpgroup collective holds its other warps back with it). Without it every
// fiber takes one step a pass, in thread order, and a missing ordering between warps that would
// race on a GPU (a warpgroup writing shared memory that another's wgmma, still in flight, reads; a
// buffer refilled before its reader is done) passes because the reader always gets there first.
// The warp is chosen per block from the seeded schedule: (b + r) mod warps, r drawn per launch, so
// that the seeds and the blocks of a launch lag different warps.
static int read_lag(void) {
    const char* v = getenv("CUDA_HOST_LAG");
    if (!v || !v[0]) return 0;
    char* end;
    long k = strtol(v, &end, 10);
    if (*end || k < 0 || k > 1000)
        fail_msg("CUDA_HOST_LAG=%s: expected a whole number of passes from 0 to 1000 (0 and 1: no lag)", v);
    return k > 1 ? (int)k : 0;
}
static int lag_passes(void) {
    static const int k = read_lag();
    return k;
}

// The lagging warp of block b, or -1: none.
static int block_lag_warp(const BlockQueue* q, long b, int nthreads) {
    if (!lag_passes() || nthreads < 64) return -1;
    return (int)((b + q->lag_add) % ((nthreads + 31) / 32));
}

static void run_block(BlockQueue* q, long b) {
    const CudaHostLaunch* l = q->launch;
    int n = (int)(l->block.x * l->block.y * l->block.z);
    Engine* e = engine_get(n);
    gridDim = l->grid;
    blockDim = l->block;
    blockIdx.x = (unsigned)(b % l->grid.x);
    blockIdx.y = (unsigned)(b / l->grid.x % l->grid.y);
    blockIdx.z = (unsigned)(b / ((long)l->grid.x * l->grid.y));
    e->launch = l;
    e->queue = q;
    e->helped = 0;
    e->nthreads = n;
    e->live = n;
    e->bar_gen = 0;
    e->bar_arrived = 0;
    memset(e->nbar_gen, 0, sizeof e->nbar_gen);
    memset(e->nbar_arrived, 0, sizeof e->nbar_arrived);
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
        f->acq_addr = NULL;
        f->spins = 0;
        f->tid.x = (unsigned)i % l->block.x;
        f->tid.y = (unsigned)i / l->block.x % l->block.y;
        f->tid.z = (unsigned)i / (l->block.x * l->block.y);
        cuda_host_fiber_init(e->fibers, i, fiber_main);
    }
    if (l->shmem) memset(e->dyn_smem, 0xff, l->shmem);
    e->in_kernel = 1;
    cuda_host_ptx_block_begin();
    e->lag_warp = block_lag_warp(q, b, n);
    for (long pass = 0; e->live > 0; pass++) {
        e->pass_lagging = e->lag_warp >= 0 && pass % lag_passes() != 0;   // this pass skips the warp
        e->pass_ran = e->pass_skipped = 0;
        int i = pass_next(e, 0);
        if (i < n) {   // the pass's fibers hand over to each other (switch_away); the last returns here
            enter(e, i);
            cuda_host_fiber_switch(e->fibers, e->capacity, i);
        }
        if (!e->pass_ran && !e->pass_skipped) report_deadlock(e);   // (skipped: the warp runs within K passes)
    }
    cuda_host_ptx_block_end();
    e->in_kernel = 0;
    cuda_host_spin_progress();
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

// --- The order of a launch's blocks, helper threads, spin-waits ----------------------------------

// Blocks start in windows of 8 positions, each window in a seeded order: block indices stay
// nearly ascending (as a GPU dispatches them), but the blocks of a window start in a different
// order under each seed, so a result that depends on the order of blocks shows (test_ptx's
// ordered accumulation without its wait). CUDA_HOST_SCHEDULE=inorder keeps ascending order.
static const long BLOCK_WINDOW = 8;

static int gcd(int a, int b) { return b ? gcd(b, a % b) : a; }

// A multiplier in [1, w] coprime with w, from r: k -> (a k + c) mod w permutes [0, w).
static int coprime_multiplier(unsigned long long r, int w) {
    int a = 1 + (int)(r % (unsigned long long)w);
    while (gcd(a, w) != 1) a = a % w + 1;
    return a;
}

static void queue_init(BlockQueue* q, const CudaHostLaunch* l, long nblocks) {
    q->launch = l;
    q->nblocks = nblocks;
    q->next = 0;
    q->mul = q->tail_mul = 1;
    q->add = 0;
    q->lag_add = lag_passes() ? (int)cuda_host_schedule_rand(1 << 16) : 0;
    if (cuda_host_schedule_inorder()) return;
    long tail = nblocks % BLOCK_WINDOW;
    q->mul = coprime_multiplier(cuda_host_schedule_rand(BLOCK_WINDOW), (int)BLOCK_WINDOW);
    q->add = (int)cuda_host_schedule_rand(BLOCK_WINDOW);
    q->tail_mul = tail ? coprime_multiplier(cuda_host_schedule_rand((unsigned long long)tail), (int)tail) : 1;
}

// The block index at position p.
static long queue_block(const BlockQueue* q, long p) {
    long base = p - p % BLOCK_WINDOW, w = q->nblocks - base < BLOCK_WINDOW ? q->nblocks - base : BLOCK_WINDOW;
    long a = w == BLOCK_WINDOW ? q->mul : q->tail_mul;
    return base + (a * (p - base) + q->add) % w;
}

// Runs blocks from the queue, one after another, until its positions below limit are taken.
static void take_blocks(BlockQueue* q, long limit) {
    long p = q->next.load();
    while (p < limit) {
        if (!q->next.compare_exchange_weak(p, p + 1)) continue;  // p is reloaded
        run_block(q, queue_block(q, p));
        p = q->next.load();
    }
}

static void helper_main(BlockQueue* q) { take_blocks(q, q->nblocks); }

// A block stalls in a spin-wait: one more OS thread starts the launch's other blocks (the OS
// thread of the stalled block can run nothing else), at most one per stalled block; helpers take
// blocks until the launch has none left. So every block of the launch starts while others wait:
// waits for smaller block indices (or any order without a cycle) end under every seed and number
// of OpenMP threads.
static void start_helper(Engine* e) {
    BlockQueue* q = e->queue;
    if (e->helped || q->next.load() >= q->nblocks) return;
    e->helped = 1;
    std::lock_guard<std::mutex> guard(q->lock);
    try {
        q->helpers.emplace_back(helper_main, q);
    } catch (const std::exception& ex) {
        fail_msg("host runtime: cannot start a thread for the blocks of kernel %s that a spin-wait "
                 "waits for: %s", q->launch->name, ex.what());
    }
}

// Blocks up to position quota, spread over OpenMP threads, and any that helpers start.
static void run_blocks(BlockQueue* q, long quota) {
    long nblocks = quota - q->next.load();
    int threads = omp_in_parallel() ? 1 : omp_get_max_threads();
    if (threads > nblocks) threads = (int)nblocks;
    if (threads < 2) take_blocks(q, quota);
    else {
#pragma omp parallel num_threads(threads)
        take_blocks(q, quota);
    }
    for (;;) {  // a helper may start another before it ends
        std::vector<std::thread> done;
        {
            std::lock_guard<std::mutex> guard(q->lock);
            done.swap(q->helpers);
        }
        if (done.empty()) break;
        for (std::thread& t : done) t.join();
    }
}

static double spin_timeout_s(void) {
    static const double limit = [] {
        const char* v = getenv("CUDA_HOST_SPIN_TIMEOUT_S");
        if (!v || !v[0]) return 30.0;
        char* end;
        double s = strtod(v, &end);
        if (*end || !(s > 0.0)) fail_msg("CUDA_HOST_SPIN_TIMEOUT_S=%s: expected seconds (> 0)", v);
        return s;
    }();
    return limit;
}

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

void cuda_host_spin_acquired(const void* addr, unsigned value) {
    Engine* e = engine_in_kernel("ld.acquire");
    Fiber* f = &e->fiber[e->current];
    if (f->acq_addr != addr || f->acq_value != value) {
        f->acq_addr = addr;
        f->acq_value = value;
        f->spins = 0;
    }
}

// Set by the spin-wait that reports a deadlock; the others then sleep while the job ends.
static std::atomic<int> spin_failed;

// Pauses after this many nanosleeps that saw the same ld.acquire value: the block has stalled.
enum { STALL_SPINS = 4 };

void cuda_host_spin_pause(unsigned ns) {
    Engine* e = engine_in_kernel("__nanosleep");
    int me = e->current;
    Fiber* f = &e->fiber[me];
    unsigned long long progress = spin_progress.load(std::memory_order_relaxed);
    if (f->spins == 0 || f->progress_seen != progress) {
        f->spins = 0;
        f->spin_since = now_s();
        f->progress_seen = progress;
    }
    f->spins++;
    switch_away(e);  // the block's other threads run first
    if (f->spins < STALL_SPINS) return;
    start_helper(e);
    long sleep_ns = ns < 1000u ? 1000L : ns > 100000u ? 100000L : (long)ns;
    struct timespec ts = {0, sleep_ns};
    nanosleep(&ts, NULL);  // the OS thread too: the block it waits for may share this core
    while (spin_failed.load()) pause();  // another spin-wait is ending the job: stay out of its way
    double waited = now_s() - f->spin_since;
    if (waited > spin_timeout_s() && !spin_failed.exchange(1)) {
        const CudaHostLaunch* l = e->launch;
        fail_at(l->file, l->line,
                "a block may wait only for blocks that can run before it ends (smaller block indices, "
                "earlier tickets); CUDA_HOST_SPIN_TIMEOUT_S sets this limit",
                "spin-wait that never ends in kernel %s, block (%u,%u,%u), thread (%u,%u,%u): its "
                "ld.acquire of %p has read %u for %.1f s while no block finished and no red.release ran",
                l->name, blockIdx.x, blockIdx.y, blockIdx.z, f->tid.x, f->tid.y, f->tid.z, f->acq_addr,
                f->acq_value, waited);
    }
}

// A queued launch. When other stream work could run too, a step runs a random number of the
// blocks left, so that the blocks of concurrent kernels interleave as on a GPU.
struct KernelOp : CudaHostOp {
    CudaHostLaunch launch;
    BlockQueue queue;
    int queued = 0;
    int owns_ctx = 1;  // a graph's replay borrows the arguments of the launch it recorded
    ~KernelOp() override {
        if (owns_ctx) launch.release(launch.ctx);
    }
    CudaHostOp* clone() const override {
        KernelOp* k = new KernelOp();
        k->launch = launch;
        k->owns_ctx = 0;
        return k;
    }
    int step(int split) override {
        if (!queued) queue_init(&queue, &launch, (long)launch.grid.x * launch.grid.y * launch.grid.z);
        queued = 1;
        long left = queue.nblocks - queue.next.load();
        long n = split ? 1 + (long)cuda_host_schedule_rand((unsigned long long)left) : left;
        run_blocks(&queue, queue.next.load() + n);
        return queue.next.load() >= queue.nblocks;
    }
    void describe(char* buf, size_t len) override {
        long nblocks = (long)launch.grid.x * launch.grid.y * launch.grid.z;
        snprintf(buf, len, "kernel %s (launched at %s:%d, %ld of %ld blocks run)", launch.name, launch.file,
                 launch.line, queued ? queue.next.load() : 0L, nblocks);
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
    cuda_host_count_launch(cuda_host_enqueue(l->stream, op));
}
