// Streams, events and the scheduler that runs stream work concurrently.
//
// Every stream-ordered operation (a kernel, an async copy or memset, an event record, a wait, a
// GEMM, an NCCL operation) is queued on its stream when it is issued. Host synchronisation
// points (cudaStreamSynchronize, cudaEventSynchronize, cudaDeviceSynchronize, the synchronous
// copies, cudaFree...) run the queued work until what they wait for is done: each step picks, at
// random (CUDA_HOST_SCHEDULE_SEED), one stream whose first op may run and runs that op, or a part
// of it (a kernel runs a random number of its blocks when other work could run too). So work of
// streams that CUDA lets run concurrently is interleaved, differently for each seed, and a
// missing cudaStreamWaitEvent changes results instead of passing unnoticed.
//
// What orders the ops, as in CUDA:
// - a stream runs its ops in issue order;
// - cudaStreamWaitEvent waits for the event's most recent record issued before the wait (a
//   position in the recording stream's order; an event never recorded: nothing to wait for);
// - the legacy default stream (NULL, cudaStreamLegacy) waits for the work issued before it on
//   every blocking stream, and work issued later on a blocking stream waits for it; streams made
//   with cudaStreamNonBlocking do not synchronise with it. cudaStreamPerThread is a blocking
//   stream of the calling host thread.
// Every dependency points to work issued earlier, so the earliest op not yet done can always
// run: stream semantics alone never deadlock. What can hang is an op that waits for other
// processes (an NCCL receive nobody sends); CUDA_HOST_SCHEDULE_TIMEOUT_S makes that fatal.
//
// CUDA_HOST_SCHEDULE=inorder runs each op to completion when it is issued (the runtime's old
// behaviour, one valid schedule), for debugging.
#include "tests/cuda_host/internal.h"
#include "comm/fail.h"

#include <atomic>
#include <deque>
#include <mutex>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

enum { STREAM_MAGIC = 0x5354524d, EVENT_MAGIC = 0x45564e54, DEAD_MAGIC = 0x44454144 };
enum { STREAM_USER, STREAM_LEGACY, STREAM_PER_THREAD };

struct CUstream_st {
    unsigned magic;  // STREAM_MAGIC while the handle is live; DEAD_MAGIC after destroy
    unsigned flags;
    int kind;
    int id;  // for reports
    std::deque<CudaHostOp*> queue;  // ops not yet complete, in issue order
    unsigned long long issued, completed;
    int listed;  // in the scheduler's list of streams with work
};

struct CUevent_st {
    unsigned magic;
    unsigned flags;
    int recorded;             // recorded at least once
    CudaHostTicket last;      // where the most recent record was issued
    unsigned long long gen;   // records issued
    double when_ms;           // CLOCK_MONOTONIC time at which the record `gen` ran
};

// --- Settings from the environment ----------------------------------------------------------------

static double now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec * 1e-6;
}

static int read_inorder(void) {
    const char* v = getenv("CUDA_HOST_SCHEDULE");
    if (!v || !v[0] || !strcmp(v, "random")) return 0;
    if (!strcmp(v, "inorder")) return 1;
    fail_msg("CUDA_HOST_SCHEDULE=%s: expected 'random' (the default: stream work interleaved at "
             "random) or 'inorder' (each operation runs when it is issued)", v);
}

int cuda_host_schedule_inorder(void) {
    static const int inorder = read_inorder();
    return inorder;
}

static unsigned long long read_seed(void) {
    const char* v = getenv("CUDA_HOST_SCHEDULE_SEED");
    unsigned long long seed = 1;
    if (v && v[0]) {
        char* end;
        seed = strtoull(v, &end, 10);
        if (*end || v[0] == '-') fail_msg("CUDA_HOST_SCHEDULE_SEED=%s: expected a non-negative integer", v);
    }
    return seed;
}

// The MPI rank of this process from the launcher's environment (Open MPI, PMIx, MPICH), or 0:
// mixed into the seed so that the ranks of a job interleave their streams differently, as GPUs
// of different timing would.
static unsigned long long launcher_rank(void) {
    static const char* const names[] = {"OMPI_COMM_WORLD_RANK", "PMIX_RANK", "PMI_RANK"};
    for (const char* name : names) {
        const char* v = getenv(name);
        if (v && v[0]) return strtoull(v, NULL, 10);
    }
    return 0;
}

static unsigned long long mix_rank(unsigned long long seed) {
    return seed ^ (launcher_rank() * 0xd1b54a32d192ed03ull);
}

// Seconds without progress, while only MPI operations are in flight, after which a host
// synchronisation point reports a deadlock; 0 (the default): wait forever, as NCCL does.
static double read_timeout_s(void) {
    const char* v = getenv("CUDA_HOST_SCHEDULE_TIMEOUT_S");
    if (!v || !v[0]) return 0.0;
    char* end;
    double s = strtod(v, &end);
    if (*end || !(s >= 0.0)) fail_msg("CUDA_HOST_SCHEDULE_TIMEOUT_S=%s: expected seconds (0: no limit)", v);
    return s;
}

// --- Scheduler state (all under `lock`) ---------------------------------------------------------

// Never destroyed: work may still be queued when static destructors and atexit handlers run.
struct Sched {
    // Recursive: a failure inside stream work may run hooks that call the runtime again.
    std::recursive_mutex lock;
    CUstream_st legacy;
    std::vector<CUstream_st*> active;  // streams with ops queued
    int next_stream_id = 1;
    unsigned query_budget = 1;  // scheduling steps the next stream or event query may run
    Sched() {
        legacy.magic = STREAM_MAGIC;
        legacy.flags = 0;
        legacy.kind = STREAM_LEGACY;
        legacy.id = 0;
        legacy.issued = legacy.completed = 0;
        legacy.listed = 0;
    }
};

static Sched& S(void) {
    static Sched* s = new Sched();
    return *s;
}
static unsigned long long rng_state;
static int rng_ready;
// Set while this thread runs an op: synchronisation from inside stream work runs nothing.
static thread_local int in_step;

// splitmix64: small, fast, and good enough to pick streams and chunk sizes.
unsigned long long cuda_host_schedule_rand(unsigned long long n) {
    if (!rng_ready) {
        rng_state = mix_rank(read_seed());
        rng_ready = 1;
    }
    unsigned long long z = (rng_state += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    z ^= z >> 31;
    return n ? z % n : 0;
}

static CUstream_st* per_thread_stream(void) {
    static thread_local CUstream_st* s;
    if (!s) {  // never freed: the thread may end with work queued
        s = new CUstream_st();
        s->magic = STREAM_MAGIC;
        s->kind = STREAM_PER_THREAD;
        s->id = S().next_stream_id++;
    }
    return s;
}

static CUstream_st* resolve(cudaStream_t s) {
    if (s == NULL || s == cudaStreamLegacy) return &S().legacy;
    if (s == cudaStreamPerThread) return per_thread_stream();
    return s;
}

static int blocking(const CUstream_st* s) {
    return s->kind == STREAM_PER_THREAD || (s->kind == STREAM_USER && !(s->flags & cudaStreamNonBlocking));
}

static void stream_name(const CUstream_st* s, char* buf, size_t len) {
    if (s->kind == STREAM_LEGACY) snprintf(buf, len, "the legacy default stream");
    else if (s->kind == STREAM_PER_THREAD) snprintf(buf, len, "a per-thread default stream (%d)", s->id);
    else snprintf(buf, len, "stream %d (%p%s%s)", s->id, (const void*)s,
                  s->flags & cudaStreamNonBlocking ? ", non-blocking" : "",
                  s->magic == STREAM_MAGIC ? "" : ", destroyed");
}

int cuda_host_ticket_done(CudaHostTicket t) { return !t.stream || t.stream->completed >= t.pos; }

static int deps_done(const CudaHostOp* op) {
    for (const CudaHostTicket& d : op->deps)
        if (d.stream->completed < d.pos) return 0;
    return 1;
}

// Runs the op to completion now (inorder mode): everything issued before it is done.
static void run_now(CudaHostOp* op) {
    if (!deps_done(op) || !op->can_start()) {
        char what[256];
        op->describe(what, sizeof what);
        fail_msg("host runtime: %s cannot start when issued although CUDA_HOST_SCHEDULE=inorder", what);
    }
    const int outer = in_step;
    in_step = 1;
    op->started = 1;
    while (!op->step(0))
        if (op->polling()) sched_yield();
    in_step = outer;
}

// The legacy default stream's implicit synchronisation (see the file comment).
static void add_legacy_deps(CUstream_st* s, CudaHostOp* op) {
    if (s->kind == STREAM_LEGACY) {
        for (CUstream_st* t : S().active)
            if (t != s && blocking(t)) op->deps.push_back({t, t->issued});
    } else if (blocking(s) && S().legacy.completed < S().legacy.issued) {
        op->deps.push_back({&S().legacy, S().legacy.issued});
    }
}

static CudaHostTicket push(CUstream_st* s, CudaHostOp* op) {
    add_legacy_deps(s, op);
    if (cuda_host_schedule_inorder()) {
        run_now(op);
        delete op;
        s->issued++;
        s->completed++;
        return {s, s->issued};
    }
    s->queue.push_back(op);
    s->issued++;
    if (!s->listed) {
        s->listed = 1;
        S().active.push_back(s);
    }
    return {s, s->issued};
}

CudaHostTicket cuda_host_enqueue(cudaStream_t stream, CudaHostOp* op) {
    std::lock_guard<std::recursive_mutex> guard(S().lock);
    return push(resolve(stream), op);
}

// Work done in one go.
struct FnOp : CudaHostOp {
    const char* what;
    std::function<void()> fn;
    FnOp(const char* w, std::function<void()> f) : what(w), fn(std::move(f)) {}
    int step(int) override {
        fn();
        return 1;
    }
    void describe(char* buf, size_t len) override { snprintf(buf, len, "%s", what); }
};

CudaHostTicket cuda_host_enqueue_fn(cudaStream_t stream, const char* what, std::function<void()> fn) {
    return cuda_host_enqueue(stream, new FnOp(what, std::move(fn)));
}

// Nothing to do once its deps are done: cudaStreamWaitEvent, the joins of a multi-stream op.
struct WaitOp : CudaHostOp {
    const char* what;
    explicit WaitOp(const char* w) : what(w) {}
    int step(int) override { return 1; }
    void describe(char* buf, size_t len) override { snprintf(buf, len, "%s", what); }
};

CudaHostTicket cuda_host_enqueue_joined(const cudaStream_t* streams, int n, CudaHostOp* op) {
    std::lock_guard<std::recursive_mutex> guard(S().lock);
    CUstream_st* first = resolve(streams[0]);
    std::vector<CUstream_st*> others;
    for (int i = 1; i < n; i++) {
        CUstream_st* s = resolve(streams[i]);
        int seen = s == first;
        for (CUstream_st* o : others) seen |= o == s;
        if (!seen) others.push_back(s);
    }
    for (CUstream_st* s : others)
        if (s->completed < s->issued) op->deps.push_back({s, s->issued});
    CudaHostTicket t = push(first, op);
    for (CUstream_st* s : others) {
        WaitOp* w = new WaitOp("the join of an operation on several streams (ncclGroupEnd)");
        w->deps.push_back(t);
        push(s, w);
    }
    return t;
}

// --- Running the work ---------------------------------------------------------------------------

// Why the first op of s cannot run now, for reports.
static void explain(CUstream_st* s, char* buf, size_t len) {
    CudaHostOp* op = s->queue.front();
    char name[96], what[256], why[256] = "";
    stream_name(s, name, sizeof name);
    op->describe(what, sizeof what);
    if (op->started) {
        snprintf(why, sizeof why, op->polling() ? "started, waits for MPI" : "running");
    } else {
        for (const CudaHostTicket& d : op->deps)
            if (d.stream->completed < d.pos) {
                char other[96];
                stream_name(d.stream, other, sizeof other);
                snprintf(why, sizeof why, "waits for operation %llu of %s (%llu done)", d.pos, other,
                         d.stream->completed);
                break;
            }
        if (!why[0]) op->describe_wait(why, sizeof why);
        if (!why[0]) snprintf(why, sizeof why, "ready");
    }
    snprintf(buf, len, "%s: %s: %s", name, what, why);
}

static void report_deadlock(const char* what, const char* reason) {
    char list[2048] = "";
    size_t at = 0;
    for (CUstream_st* s : S().active) {
        char line[640];
        explain(s, line, sizeof line);
        int n = snprintf(list + at, sizeof list - at, "%s%s", at ? "; " : "", line);
        if (n < 0 || (size_t)n >= sizeof list - at) break;
        at += (size_t)n;
    }
    fail_msg("deadlock in the stream schedule at %s: %s: %s", what, reason, list);
}

enum { STEP_NONE, STEP_RAN, STEP_POLLED };

// One scheduling step: runs (part of) the first op of a random stream among those whose first
// op may run. STEP_NONE: no stream can run; STEP_POLLED: only MPI operations in flight were left
// and the one polled has not completed.
static int step_once(void) {
    CUstream_st* cand[64];
    std::vector<CUstream_st*> more;  // beyond 64 streams with work (rare)
    int n = 0, all_polling = 1;
    for (CUstream_st* s : S().active) {
        CudaHostOp* op = s->queue.front();
        if (!op->started && (!deps_done(op) || !op->can_start())) continue;
        all_polling &= op->started && op->polling();
        if (n < 64) cand[n] = s;
        else more.push_back(s);
        n++;
    }
    if (n == 0) return STEP_NONE;
    unsigned long long k = n > 1 ? cuda_host_schedule_rand((unsigned long long)n) : 0;
    CUstream_st* s = k < 64 ? cand[k] : more[k - 64];
    CudaHostOp* op = s->queue.front();
    const int outer = in_step;
    in_step = 1;
    op->started = 1;
    int done = op->step(n > 1);
    in_step = outer;
    if (!done) return all_polling && op->polling() ? STEP_POLLED : STEP_RAN;
    s->queue.pop_front();
    s->completed++;
    delete op;
    if (s->queue.empty()) {
        s->listed = 0;
        for (size_t i = 0; i < S().active.size(); i++)
            if (S().active[i] == s) {
                S().active[i] = S().active.back();
                S().active.pop_back();
                break;
            }
    }
    return STEP_RAN;
}

// --- Counters (host_runtime.h) ---------------------------------------------------------------------

// Atomic: kernels are launched from the host thread, but a failure hook may run on another.
static std::atomic<unsigned long long> n_launches, n_d2h, n_syncs;

void cuda_host_count_launch(void) { n_launches++; }
void cuda_host_count_d2h(void) { n_d2h++; }

void cuda_host_counters(CudaHostCounters* out) {
    out->launches = n_launches.load();
    out->d2h = n_d2h.load();
    out->syncs = n_syncs.load();
}

// Runs stream work until done(); the public entry points below count one host synchronisation
// each (a call from inside stream work runs nothing and is not counted).
static void drain_until(const std::function<int()>& done, const char* what) {
    std::lock_guard<std::recursive_mutex> guard(S().lock);
    if (in_step) return;
    static const double timeout_ms = read_timeout_s() * 1e3;
    double stalled_since = -1.0;
    while (!done()) {
        int r = step_once();
        if (r == STEP_NONE) report_deadlock(what, "no stream can run and no MPI operation is in flight");
        if (r == STEP_RAN) {
            stalled_since = -1.0;
            continue;
        }
        sched_yield();  // only MPI operations left: let the other ranks run
        if (timeout_ms <= 0.0) continue;
        double now = now_ms();
        if (stalled_since < 0.0) stalled_since = now;
        if (now - stalled_since > timeout_ms) {
            char reason[160];
            snprintf(reason, sizeof reason, "no progress for %g s (CUDA_HOST_SCHEDULE_TIMEOUT_S) while "
                     "only MPI operations are in flight", timeout_ms / 1e3);
            report_deadlock(what, reason);
        }
    }
}

static void count_sync(void) {
    if (!in_step) n_syncs++;
}

void cuda_host_drain_until(const std::function<int()>& done, const char* what) {
    count_sync();
    drain_until(done, what);
}

void cuda_host_wait_ticket(CudaHostTicket t, const char* what) {
    count_sync();   // a wait for finished work is still a synchronisation point of the program
    if (cuda_host_ticket_done(t)) return;
    drain_until([t] { return cuda_host_ticket_done(t); }, what);
}

void cuda_host_drain_all(const char* what) {
    count_sync();
    drain_until([] { return S().active.empty() ? 1 : 0; }, what);
}

void cuda_host_schedule_seed(unsigned long long seed) {
    std::lock_guard<std::recursive_mutex> guard(S().lock);
    cuda_host_drain_all("cuda_host_schedule_seed");
    rng_state = mix_rank(seed);
    rng_ready = 1;
}

// --- Streams ----------------------------------------------------------------------------------

int cuda_host_stream_valid(cudaStream_t s) {
    return s == NULL || s == cudaStreamLegacy || s == cudaStreamPerThread || s->magic == STREAM_MAGIC;
}

static int event_valid(cudaEvent_t e) { return e && e->magic == EVENT_MAGIC; }

cudaError_t cudaStreamCreateWithFlags(cudaStream_t* stream, unsigned int flags) {
    if (!stream) return cuda_host_fail(cudaErrorInvalidValue, "cudaStreamCreate: NULL stream");
    if (flags & ~(unsigned)cudaStreamNonBlocking)
        return cuda_host_fail(cudaErrorInvalidValue, "cudaStreamCreateWithFlags: unknown flags 0x%x", flags);
    std::lock_guard<std::recursive_mutex> guard(S().lock);
    cudaStream_t s = new CUstream_st();
    s->magic = STREAM_MAGIC;
    s->flags = flags;
    s->kind = STREAM_USER;
    s->id = S().next_stream_id++;
    *stream = s;
    return cudaSuccess;
}

cudaError_t cudaStreamCreate(cudaStream_t* stream) { return cudaStreamCreateWithFlags(stream, 0); }

// CUDA allows destroying a stream with work queued: the work still runs. Destroyed handles keep a
// dead marker (the memory is never reused) so that a later use is reported instead of silently
// working, and so that queued work and events recorded on it stay valid.
cudaError_t cudaStreamDestroy(cudaStream_t stream) {
    if (!stream || stream == cudaStreamLegacy || stream == cudaStreamPerThread || stream->magic != STREAM_MAGIC)
        return cuda_host_fail(cudaErrorInvalidResourceHandle, "cudaStreamDestroy: not a live stream");
    std::lock_guard<std::recursive_mutex> guard(S().lock);
    stream->magic = DEAD_MAGIC;
    return cudaSuccess;
}

cudaError_t cudaStreamSynchronize(cudaStream_t stream) {
    if (!cuda_host_stream_valid(stream))
        return cuda_host_fail(cudaErrorInvalidResourceHandle, "cudaStreamSynchronize: invalid stream");
    std::lock_guard<std::recursive_mutex> guard(S().lock);
    CUstream_st* s = resolve(stream);
    cuda_host_wait_ticket({s, s->issued}, "cudaStreamSynchronize");
    return cudaSuccess;
}

// A query runs stream work, then answers honestly. The first query after a ready answer runs one
// scheduling step, so a loop of queries sees cudaErrorNotReady while work is queued; each further
// not-ready answer doubles the steps the next query may run, as a GPU keeps working while the host
// polls. Without that, a host that sleeps between polls (comm_poll after its spin) would get one
// step of device work per sleep: 4 ranks on 2 cores then sat idle half the time.
static cudaError_t query_ticket(const CudaHostTicket& t) {
    for (unsigned k = 0; !in_step && k < S().query_budget && !cuda_host_ticket_done(t); k++) {
        const int r = step_once();
        if (r == STEP_NONE) break;
        if (r == STEP_POLLED) {
            sched_yield();  // only MPI operations left: let the other ranks run
            break;
        }
    }
    if (cuda_host_ticket_done(t)) {
        S().query_budget = 1;
        return cudaSuccess;
    }
    if (S().query_budget < (1u << 20)) S().query_budget *= 2;
    return cudaErrorNotReady;  // not an error: not recorded
}

cudaError_t cudaStreamQuery(cudaStream_t stream) {
    if (!cuda_host_stream_valid(stream))
        return cuda_host_fail(cudaErrorInvalidResourceHandle, "cudaStreamQuery: invalid stream");
    std::lock_guard<std::recursive_mutex> guard(S().lock);
    CUstream_st* s = resolve(stream);
    return query_ticket({s, s->issued});
}

cudaError_t cudaStreamWaitEvent(cudaStream_t stream, cudaEvent_t event, unsigned int flags) {
    if (!cuda_host_stream_valid(stream) || !event_valid(event))
        return cuda_host_fail(cudaErrorInvalidResourceHandle, "cudaStreamWaitEvent: invalid stream or event");
    if (flags != 0) return cuda_host_fail(cudaErrorInvalidValue, "cudaStreamWaitEvent: flags must be 0");
    std::lock_guard<std::recursive_mutex> guard(S().lock);
    // The record issued last before this call; none (never recorded) or done: nothing to wait for.
    if (!event->recorded || cuda_host_ticket_done(event->last)) return cudaSuccess;
    WaitOp* w = new WaitOp("cudaStreamWaitEvent");
    w->deps.push_back(event->last);
    cuda_host_enqueue(stream, w);
    return cudaSuccess;
}

cudaError_t cudaDeviceSynchronize(void) {
    cuda_host_drain_all("cudaDeviceSynchronize");
    return cudaSuccess;
}

cudaError_t cudaDeviceReset(void) {
    cuda_host_drain_all("cudaDeviceReset");
    return cudaSuccess;
}

// --- Events -------------------------------------------------------------------------------------

cudaError_t cudaEventCreateWithFlags(cudaEvent_t* event, unsigned int flags) {
    if (!event) return cuda_host_fail(cudaErrorInvalidValue, "cudaEventCreate: NULL event");
    if (flags & ~(unsigned)(cudaEventBlockingSync | cudaEventDisableTiming))
        return cuda_host_fail(cudaErrorInvalidValue, "cudaEventCreateWithFlags: unknown flags 0x%x", flags);
    cudaEvent_t e = (cudaEvent_t)xcalloc(1, sizeof *e, "event");
    e->magic = EVENT_MAGIC;
    e->flags = flags;
    *event = e;
    return cudaSuccess;
}

cudaError_t cudaEventCreate(cudaEvent_t* event) { return cudaEventCreateWithFlags(event, 0); }

// Records still queued may complete after this (CUDA allows it); the memory is never reused.
cudaError_t cudaEventDestroy(cudaEvent_t event) {
    if (!event_valid(event)) return cuda_host_fail(cudaErrorInvalidResourceHandle, "cudaEventDestroy: not a live event");
    std::lock_guard<std::recursive_mutex> guard(S().lock);
    event->magic = DEAD_MAGIC;
    return cudaSuccess;
}

// Takes the time when it runs, if no later record of the event was issued meanwhile.
struct RecordOp : CudaHostOp {
    cudaEvent_t event;
    unsigned long long gen;
    int step(int) override {
        if (event->gen == gen) event->when_ms = now_ms();
        return 1;
    }
    void describe(char* buf, size_t len) override { snprintf(buf, len, "cudaEventRecord of event %p", (void*)event); }
};

cudaError_t cudaEventRecord(cudaEvent_t event, cudaStream_t stream) {
    if (!event_valid(event) || !cuda_host_stream_valid(stream))
        return cuda_host_fail(cudaErrorInvalidResourceHandle, "cudaEventRecord: invalid event or stream");
    std::lock_guard<std::recursive_mutex> guard(S().lock);
    RecordOp* op = new RecordOp();
    op->event = event;
    op->gen = ++event->gen;
    event->recorded = 1;
    event->last = cuda_host_enqueue(stream, op);
    return cudaSuccess;
}

cudaError_t cudaEventSynchronize(cudaEvent_t event) {
    if (!event_valid(event)) return cuda_host_fail(cudaErrorInvalidResourceHandle, "cudaEventSynchronize: invalid event");
    std::lock_guard<std::recursive_mutex> guard(S().lock);
    if (event->recorded) cuda_host_wait_ticket(event->last, "cudaEventSynchronize");
    return cudaSuccess;
}

cudaError_t cudaEventQuery(cudaEvent_t event) {
    if (!event_valid(event)) return cuda_host_fail(cudaErrorInvalidResourceHandle, "cudaEventQuery: invalid event");
    std::lock_guard<std::recursive_mutex> guard(S().lock);
    if (!event->recorded) return cudaSuccess;
    return query_ticket(event->last);
}

cudaError_t cudaEventElapsedTime(float* ms, cudaEvent_t start, cudaEvent_t end) {
    if (!ms) return cuda_host_fail(cudaErrorInvalidValue, "cudaEventElapsedTime: NULL ms");
    if (!event_valid(start) || !event_valid(end))
        return cuda_host_fail(cudaErrorInvalidResourceHandle, "cudaEventElapsedTime: invalid event");
    if ((start->flags | end->flags) & cudaEventDisableTiming)
        return cuda_host_fail(cudaErrorInvalidResourceHandle, "cudaEventElapsedTime: an event was "
                              "created with cudaEventDisableTiming");
    if (!start->recorded || !end->recorded)
        return cuda_host_fail(cudaErrorInvalidResourceHandle, "cudaEventElapsedTime: an event was never recorded");
    std::lock_guard<std::recursive_mutex> guard(S().lock);
    if (!cuda_host_ticket_done(start->last) || !cuda_host_ticket_done(end->last))
        return cudaErrorNotReady;  // as CUDA: a record has not completed yet
    *ms = (float)(end->when_ms - start->when_ms);
    return cudaSuccess;
}
