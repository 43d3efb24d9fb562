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
    struct Capture* capture;  // the stream capture recording its work, NULL: none
};

struct CUevent_st {
    unsigned magic;
    unsigned flags;
    int recorded;             // recorded at least once
    CudaHostTicket last;      // where the most recent record was issued
    unsigned long long gen;   // records issued
    double when_ms;           // CLOCK_MONOTONIC time at which the record `gen` ran
    struct Capture* capture;  // last recorded inside this open capture, NULL: not
    int capture_slot;         // which of its records
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

static CudaHostTicket capture_op(CUstream_st* s, CudaHostOp* op);
static void capture_check_legacy(CUstream_st* s, const CudaHostOp* op);

CudaHostTicket cuda_host_enqueue(cudaStream_t stream, CudaHostOp* op) {
    std::lock_guard<std::recursive_mutex> guard(S().lock);
    CUstream_st* s = resolve(stream);
    if (s->capture) return capture_op(s, op);
    capture_check_legacy(s, op);
    return push(s, op);
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
    CudaHostOp* clone() const override { return new FnOp(what, fn); }
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
    for (int i = 0; i < n; i++) {
        if (!resolve(streams[i])->capture) continue;
        for (int j = 0; j < n; j++)
            if (resolve(streams[j]) != first) {
                char what[256];
                op->describe(what, sizeof what);
                fail_msg("host runtime: %s joins several streams, one of them capturing: the host "
                         "runtime records an operation on one stream only (issue the group's "
                         "transfers on one stream)", what);
            }
        return capture_op(first, op);
    }
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
static std::atomic<unsigned long long> n_launches, n_d2h, n_syncs, n_graph_launches, n_graph_kernels;
static void capture_count_launch(void);

void cuda_host_count_launch(CudaHostTicket t) {
    if (t.stream) n_launches++;
    else capture_count_launch();   // recorded: counted when a graph launch runs it
}
void cuda_host_count_d2h(void) { n_d2h++; }

void cuda_host_counters(CudaHostCounters* out) {
    out->launches = n_launches.load();
    out->d2h = n_d2h.load();
    out->syncs = n_syncs.load();
    out->graph_launches = n_graph_launches.load();
    out->graph_kernels = n_graph_kernels.load();
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

static void count_sync(const char* what) {
    if (in_step) return;
    cuda_host_capture_forbidden(what);
    n_syncs++;
}

void cuda_host_drain_until(const std::function<int()>& done, const char* what) {
    count_sync(what);
    drain_until(done, what);
}

void cuda_host_wait_ticket(CudaHostTicket t, const char* what) {
    count_sync(what);   // a wait for finished work is still a synchronisation point of the program
    if (cuda_host_ticket_done(t)) return;
    drain_until([t] { return cuda_host_ticket_done(t); }, what);
}

void cuda_host_drain_all(const char* what) {
    count_sync(what);
    drain_until([] { return S().active.empty() ? 1 : 0; }, what);
}

void cuda_host_schedule_seed(unsigned long long seed) {
    std::lock_guard<std::recursive_mutex> guard(S().lock);
    cuda_host_drain_all("cuda_host_schedule_seed");
    rng_state = mix_rank(seed);
    rng_ready = 1;
}

// --- Streams ----------------------------------------------------------------------------------

static cudaError_t capture_wait(CUstream_st* s, cudaEvent_t event);
static cudaError_t capture_record(CUstream_st* s, cudaEvent_t event);

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
static cudaError_t query_ticket(const CudaHostTicket& t, const char* what) {
    if (!in_step) cuda_host_capture_forbidden(what);
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
    return query_ticket({s, s->issued}, "cudaStreamQuery");
}

cudaError_t cudaStreamWaitEvent(cudaStream_t stream, cudaEvent_t event, unsigned int flags) {
    if (!cuda_host_stream_valid(stream) || !event_valid(event))
        return cuda_host_fail(cudaErrorInvalidResourceHandle, "cudaStreamWaitEvent: invalid stream or event");
    if (flags != 0) return cuda_host_fail(cudaErrorInvalidValue, "cudaStreamWaitEvent: flags must be 0");
    std::lock_guard<std::recursive_mutex> guard(S().lock);
    CUstream_st* s = resolve(stream);
    if (event->capture || s->capture) return capture_wait(s, event);
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
    if (resolve(stream)->capture) return capture_record(resolve(stream), event);
    event->capture = NULL;   // its latest record is this one, outside any capture
    RecordOp* op = new RecordOp();
    op->event = event;
    op->gen = ++event->gen;
    event->recorded = 1;
    event->last = cuda_host_enqueue(stream, op);
    return cudaSuccess;
}

static cudaError_t capture_event_node(CUstream_st* s, cudaEvent_t event);

cudaError_t cudaEventRecordWithFlags(cudaEvent_t event, cudaStream_t stream, unsigned int flags) {
    if (flags & ~(unsigned)cudaEventRecordExternal)
        return cuda_host_fail(cudaErrorInvalidValue, "cudaEventRecordWithFlags: unknown flags 0x%x", flags);
    if (!(flags & cudaEventRecordExternal)) return cudaEventRecord(event, stream);
    if (!event_valid(event) || !cuda_host_stream_valid(stream))
        return cuda_host_fail(cudaErrorInvalidResourceHandle, "cudaEventRecordWithFlags: invalid "
                              "event or stream");
    std::lock_guard<std::recursive_mutex> guard(S().lock);
    if (resolve(stream)->capture) return capture_event_node(resolve(stream), event);
    return cudaEventRecord(event, stream);
}

cudaError_t cudaEventSynchronize(cudaEvent_t event) {
    if (!event_valid(event)) return cuda_host_fail(cudaErrorInvalidResourceHandle, "cudaEventSynchronize: invalid event");
    std::lock_guard<std::recursive_mutex> guard(S().lock);
    if (event->capture)
        return cuda_host_fail(cudaErrorCapturedEvent, "cudaEventSynchronize: the event was last "
                              "recorded in a stream capture that is still open");
    if (event->recorded) cuda_host_wait_ticket(event->last, "cudaEventSynchronize");
    return cudaSuccess;
}

cudaError_t cudaEventQuery(cudaEvent_t event) {
    if (!event_valid(event)) return cuda_host_fail(cudaErrorInvalidResourceHandle, "cudaEventQuery: invalid event");
    std::lock_guard<std::recursive_mutex> guard(S().lock);
    if (event->capture)
        return cuda_host_fail(cudaErrorCapturedEvent, "cudaEventQuery: the event was last recorded "
                              "in a stream capture that is still open");
    if (!event->recorded) return cudaSuccess;
    return query_ticket(event->last, "cudaEventQuery");
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

// --- Stream capture and graphs --------------------------------------------------------------------
//
// A capture records what is issued on its streams, in issue order: ops (copied again for each
// launch by CudaHostOp::clone), event records and event waits. The records of an open capture are
// its own (numbered slots): they do not touch the event's state outside the capture, and a wait
// for one joins the waiting stream to the capture, as CUDA forks a capture into other streams.
// cudaGraphLaunch issues the recorded entries again in the same order on the same streams (the
// origin mapped to the launch's stream), each wait depending on the replayed record of its slot:
// the graph's dependencies, plus the order of each stream's own work outside it, which CUDA does
// not impose but which only removes schedules, never adds one. A record with
// cudaEventRecordExternal is a node instead (ENTRY_EVENT_NODE): each launch records the event the
// executable graph holds for that node (cudaGraphExecEventRecordNodeSetEvent changes it).

enum { GRAPH_MAGIC = 0x47524150, EXEC_MAGIC = 0x47455845, NODE_MAGIC = 0x4e4f4445 };
enum EntryKind { ENTRY_OP, ENTRY_RECORD, ENTRY_WAIT, ENTRY_EVENT_NODE };

struct GraphEntry {
    EntryKind kind;
    CUstream_st* stream;
    std::shared_ptr<CudaHostOp> op;  // ENTRY_OP: as issued, never run
    int launch;                      // ENTRY_OP: a kernel or GEMM
    int slot;                        // ENTRY_RECORD, ENTRY_WAIT
    cudaEvent_t event;               // ENTRY_EVENT_NODE: the event it records, as captured
};

// A node handle (cudaGraphGetNodes): entry `entry` of its graph; valid while the graph lives.
struct CUgraphNode_st {
    unsigned magic;
    struct GraphData* graph;
    int entry;
};

static int entry_is_node(const GraphEntry& e) { return e.kind == ENTRY_OP || e.kind == ENTRY_EVENT_NODE; }

struct GraphData {
    CUstream_st* origin;
    std::vector<GraphEntry> entries;
    int slots = 0;
    std::vector<std::unique_ptr<CUgraphNode_st>> nodes;   // made by the first cudaGraphGetNodes
};

struct Capture {
    std::shared_ptr<GraphData> graph;
    std::vector<CUstream_st*> streams;   // the origin, then the streams that joined
    std::vector<cudaEvent_t> events;     // recorded in the capture
    cudaError_t error = cudaSuccess;     // not cudaSuccess: invalidated
    char why[256] = "";
};

struct CUgraph_st {
    unsigned magic;
    std::shared_ptr<GraphData> graph;
};

struct CUgraphExec_st {
    unsigned magic;
    std::shared_ptr<GraphData> graph;
    CudaHostTicket last;  // the end of its latest launch: launches of one exec run one at a time
    std::vector<cudaEvent_t> events;   // per entry: what an ENTRY_EVENT_NODE records at launch
};

static int open_captures;
static thread_local Capture* last_capture;  // the capture that recorded this thread's last op

int cuda_host_capturing(cudaStream_t stream) {
    std::lock_guard<std::recursive_mutex> guard(S().lock);
    return cuda_host_stream_valid(stream) && resolve(stream)->capture != NULL;
}

void cuda_host_capture_forbidden(const char* what) {
    if (open_captures == 0) return;
    fail_msg("host runtime: %s while a stream capture is open: CUDA refuses it in global capture "
             "mode (cudaErrorStreamCaptureUnsupported) and invalidates the capture; issue it before "
             "cudaStreamBeginCapture or after cudaStreamEndCapture", what);
}

// Work on the legacy stream waits for every blocking stream: for a capturing one, CUDA refuses it.
static void capture_check_legacy(CUstream_st* s, const CudaHostOp* op) {
    if (s->kind != STREAM_LEGACY || open_captures == 0) return;
    char what[256] = "cudaGraphLaunch";
    if (op) const_cast<CudaHostOp*>(op)->describe(what, sizeof what);
    fail_msg("host runtime: %s on the legacy default stream while a stream capture is open: CUDA "
             "refuses it (cudaErrorStreamCaptureImplicit); use a stream of your own", what);
}

static CudaHostTicket capture_op(CUstream_st* s, CudaHostOp* op) {
    CudaHostOp* copy = op->clone();
    if (!copy) {
        char what[256];
        op->describe(what, sizeof what);
        fail_msg("host runtime: %s issued on a capturing stream: the host runtime cannot record it "
                 "in a graph (kernels, GEMMs, copies of device or pinned memory, memsets and events "
                 "can be)", what);
    }
    delete copy;
    s->capture->graph->entries.push_back({ENTRY_OP, s, std::shared_ptr<CudaHostOp>(op), 0, 0, NULL});
    last_capture = s->capture;
    return {NULL, 0};
}

static void capture_count_launch(void) {
    if (last_capture && !last_capture->graph->entries.empty())
        last_capture->graph->entries.back().launch = 1;
}

static cudaError_t capture_invalidate(Capture* c, cudaError_t err, const char* why) {
    if (c->error == cudaSuccess) {
        c->error = err;
        snprintf(c->why, sizeof c->why, "%s", why);
    }
    return cuda_host_fail(err, "%s", why);
}

cudaError_t cuda_host_capture_refuse(cudaStream_t stream, const char* why) {
    std::lock_guard<std::recursive_mutex> guard(S().lock);
    return capture_invalidate(resolve(stream)->capture, cudaErrorStreamCaptureUnsupported, why);
}

static cudaError_t capture_record(CUstream_st* s, cudaEvent_t event) {
    Capture* c = s->capture;
    const int slot = c->graph->slots++;
    c->graph->entries.push_back({ENTRY_RECORD, s, NULL, 0, slot, NULL});
    if (!event->capture) c->events.push_back(event);
    event->capture = c;
    event->capture_slot = slot;
    return cudaSuccess;
}

// An external record: a node of the graph, not an edge; other captured work cannot wait for it.
static cudaError_t capture_event_node(CUstream_st* s, cudaEvent_t event) {
    s->capture->graph->entries.push_back({ENTRY_EVENT_NODE, s, NULL, 0, 0, event});
    return cudaSuccess;
}

static cudaError_t capture_wait(CUstream_st* s, cudaEvent_t event) {
    Capture* c = event->capture;
    if (!c) {  // a capturing stream waits for work outside its capture
        if (!event->recorded) return cudaSuccess;   // never recorded: nothing to wait for
        return capture_invalidate(s->capture, cudaErrorStreamCaptureIsolation,
                                  "cudaStreamWaitEvent: a capturing stream waits for an event "
                                  "recorded outside the capture (the graph could not keep that "
                                  "dependency)");
    }
    if (s->capture && s->capture != c)
        return capture_invalidate(c, cudaErrorStreamCaptureMerge, "cudaStreamWaitEvent: the "
                                  "stream belongs to another open capture");
    if (!s->capture) {  // joins the capture (a fork)
        if (s->kind == STREAM_LEGACY)
            return capture_invalidate(c, cudaErrorStreamCaptureImplicit, "cudaStreamWaitEvent: "
                                      "the legacy default stream cannot join a capture");
        s->capture = c;
        c->streams.push_back(s);
    }
    c->graph->entries.push_back({ENTRY_WAIT, s, NULL, 0, event->capture_slot, NULL});
    return cudaSuccess;
}

cudaError_t cudaStreamBeginCapture(cudaStream_t stream, cudaStreamCaptureMode mode) {
    if (!cuda_host_stream_valid(stream))
        return cuda_host_fail(cudaErrorInvalidResourceHandle, "cudaStreamBeginCapture: invalid stream");
    if (mode != cudaStreamCaptureModeGlobal)
        return cuda_host_fail(cudaErrorInvalidValue, "cudaStreamBeginCapture: the host runtime "
                              "supports cudaStreamCaptureModeGlobal only (mode %d)", (int)mode);
    std::lock_guard<std::recursive_mutex> guard(S().lock);
    CUstream_st* s = resolve(stream);
    if (s->kind == STREAM_LEGACY)
        return cuda_host_fail(cudaErrorStreamCaptureUnsupported, "cudaStreamBeginCapture: the "
                              "legacy default stream cannot be captured");
    if (s->capture)
        return cuda_host_fail(cudaErrorStreamCaptureUnsupported, "cudaStreamBeginCapture: the "
                              "stream is already capturing");
    Capture* c = new Capture();
    c->graph = std::make_shared<GraphData>();
    c->graph->origin = s;
    c->streams.push_back(s);
    s->capture = c;
    open_captures++;
    return cudaSuccess;
}

// 1 if every joined stream's last operation comes before the origin's last entry in the graph's
// order (the stream order of each stream, and each wait after the record of its slot). Event
// records and waits are not nodes of a CUDA graph: a stream that ends on one is joined if its
// last operation is.
static int capture_joined(const Capture* c) {
    const std::vector<GraphEntry>& e = c->graph->entries;
    const int n = (int)e.size();
    std::vector<int> prev(n, -1), record_of(c->graph->slots, -1), seen(n, 0);
    struct Tail { CUstream_st* stream; int entry, op; };   // each stream's last entry and operation
    std::vector<Tail> tails;
    for (int i = 0; i < n; i++) {
        Tail* t = NULL;
        for (Tail& u : tails)
            if (u.stream == e[i].stream) t = &u;
        if (!t) {
            tails.push_back({e[i].stream, -1, -1});
            t = &tails.back();
        }
        prev[i] = t->entry;
        t->entry = i;
        if (entry_is_node(e[i])) t->op = i;
        if (e[i].kind == ENTRY_RECORD) record_of[e[i].slot] = i;
    }
    std::vector<int> todo;
    for (const Tail& t : tails)
        if (t.stream == c->graph->origin) todo.push_back(t.entry);
    while (!todo.empty()) {
        const int i = todo.back();
        todo.pop_back();
        if (i < 0 || seen[i]) continue;
        seen[i] = 1;
        todo.push_back(prev[i]);
        if (e[i].kind == ENTRY_WAIT) todo.push_back(record_of[e[i].slot]);
    }
    for (const Tail& t : tails)
        if (t.stream != c->graph->origin && t.op >= 0 && !seen[t.op]) return 0;
    return 1;
}

cudaError_t cudaStreamEndCapture(cudaStream_t stream, cudaGraph_t* graph) {
    if (!graph) return cuda_host_fail(cudaErrorInvalidValue, "cudaStreamEndCapture: NULL graph");
    if (!cuda_host_stream_valid(stream))
        return cuda_host_fail(cudaErrorInvalidResourceHandle, "cudaStreamEndCapture: invalid stream");
    std::lock_guard<std::recursive_mutex> guard(S().lock);
    *graph = NULL;
    CUstream_st* s = resolve(stream);
    Capture* c = s->capture;
    if (!c)
        return cuda_host_fail(cudaErrorInvalidValue, "cudaStreamEndCapture: the stream is not capturing");
    if (c->graph->origin != s)
        return capture_invalidate(c, cudaErrorStreamCaptureUnmatched, "cudaStreamEndCapture: the "
                                  "capture began on another stream");
    const int joined = capture_joined(c);
    for (CUstream_st* t : c->streams) t->capture = NULL;
    for (cudaEvent_t e : c->events) e->capture = NULL;
    open_captures--;
    if (last_capture == c) last_capture = NULL;
    const cudaError_t err = c->error;
    char why[256];
    snprintf(why, sizeof why, "%s", c->why);
    std::shared_ptr<GraphData> g = c->graph;
    delete c;
    if (err != cudaSuccess)
        return cuda_host_fail(cudaErrorStreamCaptureInvalidated, "cudaStreamEndCapture: the capture "
                              "was invalidated: %s", why);
    if (!joined)
        return cuda_host_fail(cudaErrorStreamCaptureUnjoined, "cudaStreamEndCapture: a stream that "
                              "joined the capture has work the origin stream never waited for");
    *graph = new CUgraph_st{GRAPH_MAGIC, g};
    return cudaSuccess;
}

cudaError_t cudaStreamIsCapturing(cudaStream_t stream, cudaStreamCaptureStatus* status) {
    if (!status) return cuda_host_fail(cudaErrorInvalidValue, "cudaStreamIsCapturing: NULL status");
    if (!cuda_host_stream_valid(stream))
        return cuda_host_fail(cudaErrorInvalidResourceHandle, "cudaStreamIsCapturing: invalid stream");
    std::lock_guard<std::recursive_mutex> guard(S().lock);
    const Capture* c = resolve(stream)->capture;
    *status = !c ? cudaStreamCaptureStatusNone
                 : c->error ? cudaStreamCaptureStatusInvalidated : cudaStreamCaptureStatusActive;
    return cudaSuccess;
}

cudaError_t cudaGraphInstantiate(cudaGraphExec_t* exec, cudaGraph_t graph, unsigned long long flags) {
    if (!exec) return cuda_host_fail(cudaErrorInvalidValue, "cudaGraphInstantiate: NULL exec");
    if (!graph || graph->magic != GRAPH_MAGIC)
        return cuda_host_fail(cudaErrorInvalidValue, "cudaGraphInstantiate: not a live graph");
    if (flags != 0)
        return cuda_host_fail(cudaErrorInvalidValue, "cudaGraphInstantiate: the host runtime "
                              "supports flags 0 only (0x%llx)", flags);
    *exec = new CUgraphExec_st{EXEC_MAGIC, graph->graph, {NULL, 0}, {}};
    for (const GraphEntry& e : graph->graph->entries) (*exec)->events.push_back(e.event);
    return cudaSuccess;
}

cudaError_t cudaGraphLaunch(cudaGraphExec_t exec, cudaStream_t stream) {
    if (!exec || exec->magic != EXEC_MAGIC)
        return cuda_host_fail(cudaErrorInvalidValue, "cudaGraphLaunch: not a live executable graph");
    if (!cuda_host_stream_valid(stream))
        return cuda_host_fail(cudaErrorInvalidResourceHandle, "cudaGraphLaunch: invalid stream");
    std::lock_guard<std::recursive_mutex> guard(S().lock);
    CUstream_st* L = resolve(stream);
    if (L->capture)
        return cuda_host_fail(cudaErrorStreamCaptureUnsupported, "cudaGraphLaunch: the host runtime "
                              "does not capture graph launches");
    capture_check_legacy(L, NULL);
    const GraphData& g = *exec->graph;
    std::vector<CudaHostTicket> slots((size_t)g.slots, CudaHostTicket{NULL, 0});
    WaitOp* start = new WaitOp("the start of cudaGraphLaunch (after the exec's previous launch)");
    if (!cuda_host_ticket_done(exec->last)) start->deps.push_back(exec->last);
    CudaHostTicket end = push(L, start);
    for (size_t i = 0; i < g.entries.size(); i++) {
        const GraphEntry& e = g.entries[i];
        CUstream_st* s = e.stream == g.origin ? L : e.stream;
        CudaHostOp* op;
        if (e.kind == ENTRY_EVENT_NODE) {
            cudaEvent_t ev = exec->events[i];
            if (!event_valid(ev))
                fail_msg("host runtime: cudaGraphLaunch: an event record node's event %p was "
                         "destroyed (set a live one with cudaGraphExecEventRecordNodeSetEvent)", (void*)ev);
            RecordOp* r = new RecordOp();
            r->event = ev;
            r->gen = ++ev->gen;
            ev->recorded = 1;
            ev->capture = NULL;
            op = r;
        } else if (e.kind == ENTRY_OP) {
            op = e.op->clone();
            op->keep = exec->graph;
            op->replayed();
            if (e.launch) n_graph_kernels++;
        } else {
            op = new WaitOp(e.kind == ENTRY_RECORD ? "an event record of a graph" : "an event wait of a graph");
            if (e.kind == ENTRY_WAIT && slots[(size_t)e.slot].stream) op->deps.push_back(slots[(size_t)e.slot]);
        }
        const CudaHostTicket t = push(s, op);
        if (e.kind == ENTRY_EVENT_NODE) exec->events[i]->last = t;
        if (e.kind == ENTRY_RECORD) slots[(size_t)e.slot] = t;
        if (s == L) end = t;
    }
    exec->last = end;   // every other stream's entries joined the origin before its end
    n_graph_launches++;
    return cudaSuccess;
}

cudaError_t cudaGraphExecDestroy(cudaGraphExec_t exec) {
    if (!exec || exec->magic != EXEC_MAGIC)
        return cuda_host_fail(cudaErrorInvalidValue, "cudaGraphExecDestroy: not a live executable graph");
    exec->magic = DEAD_MAGIC;
    exec->graph.reset();   // replayed ops still queued keep the recorded arguments alive
    return cudaSuccess;
}

cudaError_t cudaGraphDestroy(cudaGraph_t graph) {
    if (!graph || graph->magic != GRAPH_MAGIC)
        return cuda_host_fail(cudaErrorInvalidValue, "cudaGraphDestroy: not a live graph");
    graph->magic = DEAD_MAGIC;
    graph->graph.reset();
    return cudaSuccess;
}

cudaError_t cudaGraphGetNodes(cudaGraph_t graph, cudaGraphNode_t* nodes, size_t* num_nodes) {
    if (!graph || graph->magic != GRAPH_MAGIC)
        return cuda_host_fail(cudaErrorInvalidValue, "cudaGraphGetNodes: not a live graph");
    if (!num_nodes) return cuda_host_fail(cudaErrorInvalidValue, "cudaGraphGetNodes: NULL num_nodes");
    std::lock_guard<std::recursive_mutex> guard(S().lock);
    GraphData& g = *graph->graph;
    if (g.nodes.empty())
        for (size_t i = 0; i < g.entries.size(); i++)
            if (entry_is_node(g.entries[i]))
                g.nodes.emplace_back(new CUgraphNode_st{NODE_MAGIC, &g, (int)i});
    if (!nodes) {
        *num_nodes = g.nodes.size();
        return cudaSuccess;
    }
    size_t n = 0;
    for (; n < *num_nodes && n < g.nodes.size(); n++) nodes[n] = g.nodes[n].get();
    for (size_t i = n; i < *num_nodes; i++) nodes[i] = NULL;
    *num_nodes = n;
    return cudaSuccess;
}

static const GraphEntry* node_entry(cudaGraphNode_t node) {
    if (!node || node->magic != NODE_MAGIC) return NULL;
    return &node->graph->entries[(size_t)node->entry];
}

cudaError_t cudaGraphNodeGetType(cudaGraphNode_t node, cudaGraphNodeType* type) {
    const GraphEntry* e = node_entry(node);
    if (!e || !type) return cuda_host_fail(cudaErrorInvalidValue, "cudaGraphNodeGetType: not a live node");
    *type = e->kind == ENTRY_EVENT_NODE ? cudaGraphNodeTypeEventRecord : cudaGraphNodeTypeKernel;
    return cudaSuccess;
}

cudaError_t cudaGraphEventRecordNodeGetEvent(cudaGraphNode_t node, cudaEvent_t* event) {
    const GraphEntry* e = node_entry(node);
    if (!e || !event || e->kind != ENTRY_EVENT_NODE)
        return cuda_host_fail(cudaErrorInvalidValue, "cudaGraphEventRecordNodeGetEvent: not an "
                              "event record node");
    *event = e->event;
    return cudaSuccess;
}

cudaError_t cudaGraphExecEventRecordNodeSetEvent(cudaGraphExec_t exec, cudaGraphNode_t node,
                                                 cudaEvent_t event) {
    if (!exec || exec->magic != EXEC_MAGIC)
        return cuda_host_fail(cudaErrorInvalidValue, "cudaGraphExecEventRecordNodeSetEvent: not a "
                              "live executable graph");
    const GraphEntry* e = node_entry(node);
    if (!e || node->graph != exec->graph.get() || e->kind != ENTRY_EVENT_NODE)
        return cuda_host_fail(cudaErrorInvalidValue, "cudaGraphExecEventRecordNodeSetEvent: not an "
                              "event record node of the graph the exec was instantiated from");
    if (!event_valid(event))
        return cuda_host_fail(cudaErrorInvalidValue, "cudaGraphExecEventRecordNodeSetEvent: not a "
                              "live event");
    std::lock_guard<std::recursive_mutex> guard(S().lock);
    exec->events[(size_t)node->entry] = event;
    return cudaSuccess;
}
