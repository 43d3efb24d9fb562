// Transport-independent half of the comm layer: scopes, counters, argument checks, dispatch.
#include "comm/comm.h"

#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "comm/fail.h"

// --- Watchdog state ---------------------------------------------------------------------------

// What an operation was, for the watchdog's message.
typedef struct {
    CommKind kind;
    MeshGroup group;
    int layer;
    CommPhase phase;
    unsigned long long order;   // operations started before it, over every group
} WatchedOp;

struct CommWatch {
    unsigned long long started[MESH_NGROUPS];   // operations started on each group
    unsigned long long order;                   // ... on all groups
    WatchedOp recent[MESH_NGROUPS][COMM_WATCH_OPS];   // operation i of group g at i % COMM_WATCH_OPS
    struct {
        CommRequest* req;   // NULL: free entry
        WatchedOp op;
    } inflight[COMM_MAX_INFLIGHT];
};

Comm* comm_create(const CommOps* ops, void* ctx, const char* name, int device_memory,
                  const Mesh* mesh, int num_layers) {
    CHECK(num_layers >= 0, "caller bug", "comm_create: num_layers %d < 0", num_layers);
    Comm* comm = xcalloc(1, sizeof *comm, "comm");
    comm->ops = ops;
    comm->ctx = ctx;
    comm->name = name;
    comm->device_memory = device_memory;
    comm->mesh = *mesh;
    comm->num_layers = num_layers;
    comm->layer = COMM_NO_LAYER;
    comm->phase = COMM_OTHER;
    comm->counts = xcalloc((size_t)(num_layers + 1) * COMM_NPHASES * COMM_NKINDS,
                           sizeof(CommCount), "comm counters");
    comm->timeout_s = COMM_DEFAULT_TIMEOUT_S;
    comm->watch = xcalloc(1, sizeof *comm->watch, "comm watchdog");
    return comm;
}

void comm_destroy(Comm* comm) {
    if (!comm) return;
    comm->ops->destroy(comm->ctx);
    free(comm->counts);
    free(comm->trace);
    free(comm->watch);
    free(comm);
}

// --- Hang watchdog ------------------------------------------------------------------------------

void comm_set_timeout(Comm* comm, double seconds) {
    CHECK(seconds >= 0, "caller bug", "comm_set_timeout: %g s is negative", seconds);
    comm->timeout_s = seconds;
}

// A wait spins this long (a GPU step or a collective usually ends within it), then sleeps between
// polls, from the shortest pause doubling to the longest.
#define COMM_SPIN_S 0.2
#define COMM_PAUSE_MIN_S 20e-6
#define COMM_PAUSE_MAX_S 1e-3

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

int comm_poll(int (*done)(void* arg), int (*expired)(void* arg), void* arg, double timeout_s) {
    const double start = now_s();
    double deadline = start + timeout_s, pause = COMM_PAUSE_MIN_S;
    while (!done(arg)) {
        const double now = now_s();
        if (timeout_s > 0 && now > deadline) {
            if (!expired || !expired(arg)) return -1;
            deadline = now + timeout_s;
        }
        if (now - start < COMM_SPIN_S) {
            sched_yield();
            continue;
        }
        const struct timespec ts = {0, (long)(pause * 1e9)};
        nanosleep(&ts, NULL);
        pause = 2 * pause < COMM_PAUSE_MAX_S ? 2 * pause : COMM_PAUSE_MAX_S;
    }
    return 0;
}

// Notes the operation just started on g, and its request (NULL: complete already).
static void watch_start(Comm* comm, CommKind kind, MeshGroup g, CommRequest* req) {
    struct CommWatch* w = comm->watch;
    const WatchedOp op = {kind, g, comm->layer, comm->phase, w->order++};
    w->recent[g][w->started[g]++ % COMM_WATCH_OPS] = op;
    if (!req) return;
    for (int i = 0; i < COMM_MAX_INFLIGHT; i++) {
        if (!w->inflight[i].req) {
            w->inflight[i].req = req;
            w->inflight[i].op = op;
            return;
        }
    }
    FAIL("wait for an operation before starting another", "more than %d operations in flight",
         COMM_MAX_INFLIGHT);
}

// The entry of req (NULL: not an operation, e.g. a fence), released by watch_end.
static WatchedOp* watch_find(Comm* comm, CommRequest* req) {
    for (int i = 0; i < COMM_MAX_INFLIGHT; i++)
        if (comm->watch->inflight[i].req == req) return &comm->watch->inflight[i].op;
    return NULL;
}

static void watch_end(Comm* comm, CommRequest* req) {
    for (int i = 0; i < COMM_MAX_INFLIGHT; i++)
        if (comm->watch->inflight[i].req == req) comm->watch->inflight[i].req = NULL;
}

// Device transports: operations completed over every group so far.
static unsigned long long completed_total(Comm* comm) {
    unsigned long long sum = 0;
    for (int g = 0; g < MESH_NGROUPS; g++) sum += comm->ops->completed(comm->ctx, (MeshGroup)g);
    return sum;
}

// Device transports: the oldest operation not complete, NULL when all are. Of a group with more
// than COMM_WATCH_OPS incomplete, the oldest still known stands in.
static const WatchedOp* oldest_incomplete(Comm* comm) {
    const struct CommWatch* w = comm->watch;
    const WatchedOp* oldest = NULL;
    for (int g = 0; g < MESH_NGROUPS; g++) {
        const unsigned long long started = w->started[g];
        unsigned long long done = comm->ops->completed(comm->ctx, (MeshGroup)g);
        if (done >= started) continue;
        if (started - done > COMM_WATCH_OPS) done = started - COMM_WATCH_OPS;
        const WatchedOp* op = &w->recent[g][done % COMM_WATCH_OPS];
        if (!oldest || op->order < oldest->order) oldest = op;
    }
    return oldest;
}

// silent_s: how long the host has seen no operation complete (at least the timeout: the test of
// the watchdog checks that, whenever the stall began).
static void __attribute__((noreturn)) report_hang(const Comm* comm, const WatchedOp* op,
                                                  double silent_s) {
    char ranks[160] = "", where[96];
    const int n = comm_size(comm, op->group);
    for (int i = 0, at = 0; i < n && at < (int)sizeof ranks - 16; i++) {
        if (i == 8 && n > 9) {
            snprintf(ranks + at, sizeof ranks - (size_t)at, ",... (%d ranks)", n);
            break;
        }
        at += snprintf(ranks + at, sizeof ranks - (size_t)at, "%s%d", i ? "," : "",
                       mesh_group_world_rank(&comm->mesh, op->group, i));
    }
    if (op->layer == COMM_NO_LAYER)
        snprintf(where, sizeof where, "outside any layer (setup/gradient reduction)");
    else
        snprintf(where, sizeof where, "in layer %d %s", op->layer, comm_phase_name(op->phase));
    fail_msg("%s on group %s (world ranks %s) %s did not complete within %g s (--comm-timeout); "
             "another rank is stalled or dead (no operation completed for %.1f s)",
             comm_kind_name(op->kind), mesh_group_name(op->group), ranks, where, comm->timeout_s,
             silent_s);
}

// A host wait in progress: on a host transport its deadline runs from its start and names its
// operation; on a device transport it restarts whenever an operation completes and names the
// oldest incomplete one (none incomplete: the wait is for compute, which is not limited).
typedef struct {
    Comm* comm;
    CommRequest* req;
    const WatchedOp* op;
    unsigned long long seen;   // device transports: completed_total at the last deadline
    double progress_s;         // when the wait began, or last saw an operation complete
} WatchedWait;

static int wait_done(void* arg) {
    WatchedWait* w = arg;
    return w->comm->ops->test(w->comm->ctx, w->req);
}

static int wait_expired(void* arg) {
    WatchedWait* w = arg;
    const WatchedOp* stalled = w->op;
    const double now = now_s();
    if (w->comm->ops->completed) {
        const unsigned long long done = completed_total(w->comm);
        stalled = done != w->seen ? NULL : oldest_incomplete(w->comm);
        if (done != w->seen) w->progress_s = now;
        w->seen = done;
    }
    if (stalled) report_hang(w->comm, stalled, now - w->progress_s);
    return 1;
}

// The host waits for req under the watchdog, then the transport releases it.
static void host_wait(Comm* comm, CommRequest* req, int host) {
    if (comm->timeout_s > 0) {
        WatchedWait w = {comm, req, watch_find(comm, req), 0, now_s()};
        CHECK(w.op || comm->ops->completed, "caller bug", "waiting on an unknown request");
        if (comm->ops->completed) w.seen = completed_total(comm);
        comm_poll(wait_done, wait_expired, &w, comm->timeout_s);
    }
    comm->ops->wait(comm->ctx, req, host);
}

void comm_wait_compute(Comm* comm) {
    if (!comm->ops->fence) return;
    CHECK(comm->ops->completed && comm->ops->test, "transport bug",
          "%s: a fence without completion counts", comm->name);
    host_wait(comm, comm->ops->fence(comm->ctx), 1);
}

// --- Timeline spans ---------------------------------------------------------------------------

// An operation between its start and its wait: what its spans are labelled with.
typedef struct {
    CommRequest* req;     // NULL: free entry
    CommKind kind;
    MeshGroup group;
    long long bytes;
    int layer;
    CommPhase phase;
    int flight_begin;     // slot; -1 once its flight span is recorded
} Pending;

struct CommTrace {
    Timeline* tl;
    int compute, host;                 // track ids
    int group_track[MESH_NGROUPS];
    int device_streams;                // 1: operations run on the transport's streams
    Pending pending[COMM_MAX_INFLIGHT];
};

void comm_set_timeline(Comm* comm, Timeline* tl, void* compute_track, void* host_track) {
    free(comm->trace);
    comm->trace = NULL;
    if (!tl) return;
    struct CommTrace* tr = xcalloc(1, sizeof *tr, "comm trace");
    tr->tl = tl;
    tr->compute = timeline_track(tl, "compute", compute_track);
    tr->host = host_track == compute_track ? tr->compute : timeline_track(tl, "host", host_track);
    for (int g = 0; g < MESH_NGROUPS; g++) {
        void* stream = comm->ops->stream ? comm->ops->stream(comm->ctx, (MeshGroup)g) : NULL;
        if (stream) tr->device_streams = 1;
        char name[64];
        snprintf(name, sizeof name, "comm %s", mesh_group_name((MeshGroup)g));
        // Host transports: the group track only shows spans, its marks are host marks.
        tr->group_track[g] = timeline_track(tl, name, stream ? stream : host_track);
    }
    comm->trace = tr;
}

static TimelineLabel label_of(const Pending* p) {
    TimelineLabel l = {NULL, comm_kind_name(p->kind), mesh_group_name(p->group), p->bytes,
                       p->layer, comm_phase_name(p->phase)};
    return l;
}

// Marks taken before an operation is handed to the transport.
typedef struct {
    int issue;    // host track
    int flight;   // compute track: the operation may start once compute reaches this point
} IssueMarks;

static IssueMarks issue_begin(Comm* comm) {
    IssueMarks m = {-1, -1};
    struct CommTrace* tr = comm->trace;
    if (!tr) return m;
    m.issue = timeline_mark(tr->tl, tr->host);
    m.flight = tr->host == tr->compute ? m.issue : timeline_mark(tr->tl, tr->compute);
    return m;
}

// After the transport took the operation: its issue span, and its flight span where the end is
// known now (device streams; operations complete at once); otherwise the wait records it.
static CommRequest* record_issue(Comm* comm, IssueMarks m, CommKind kind, MeshGroup g,
                                 long long bytes, CommRequest* req) {
    struct CommTrace* tr = comm->trace;
    if (!tr) return req;
    Pending p = {req, kind, g, bytes, comm->layer, comm->phase, m.flight};
    const TimelineLabel label = label_of(&p);
    timeline_span(tr->tl, TL_COMM_ISSUE, tr->host, m.issue, timeline_mark(tr->tl, tr->host), &label);
    if (tr->device_streams || !req) {
        const int end = timeline_mark(tr->tl, req ? tr->group_track[g] : tr->host);
        timeline_span(tr->tl, TL_COMM_FLIGHT, tr->group_track[g], m.flight, end, &label);
        p.flight_begin = -1;
    }
    if (!req) return req;
    for (int i = 0; i < COMM_MAX_INFLIGHT; i++) {
        if (!tr->pending[i].req) {
            tr->pending[i] = p;
            return req;
        }
    }
    FAIL("caller bug", "more than %d operations in flight", COMM_MAX_INFLIGHT);
}

static void traced_wait(Comm* comm, CommRequest* req, int host);

// The issue recorded; with comm_set_overlap(comm, 0) the operation is waited for at once.
static CommRequest* issue_end(Comm* comm, IssueMarks m, CommKind kind, MeshGroup g,
                              long long bytes, CommRequest* req) {
    watch_start(comm, kind, g, req);
    req = record_issue(comm, m, kind, g, bytes, req);
    if (req && comm->serial) {   // the plain schedule
        traced_wait(comm, req, 0);
        return NULL;
    }
    return req;
}

// Waits for req, under the watchdog wherever the host waits (host = 1, or a transport whose
// waits block the host).
static void transport_wait(Comm* comm, CommRequest* req, int host) {
    if (host || !comm->ops->fence)
        host_wait(comm, req, host);
    else
        comm->ops->wait(comm->ctx, req, host);
    watch_end(comm, req);
}

// Waits for req (host = 1: the host waits) and records the wait and any open flight span.
static void traced_wait(Comm* comm, CommRequest* req, int host) {
    struct CommTrace* tr = comm->trace;
    if (!tr) {
        transport_wait(comm, req, host);
        return;
    }
    const int track = host ? tr->host : tr->compute;
    const int begin = timeline_mark(tr->tl, track);
    transport_wait(comm, req, host);
    const int end = timeline_mark(tr->tl, track);
    for (int i = 0; i < COMM_MAX_INFLIGHT; i++) {
        Pending* p = &tr->pending[i];
        if (p->req != req) continue;
        const TimelineLabel label = label_of(p);
        timeline_span(tr->tl, TL_WAIT, track, begin, end, &label);
        if (p->flight_begin >= 0)
            timeline_span(tr->tl, TL_COMM_FLIGHT, tr->group_track[p->group], p->flight_begin, end,
                          &label);
        p->req = NULL;
        return;
    }
}

void comm_close_spans(Comm* comm) {
    struct CommTrace* tr = comm->trace;
    if (!tr) return;
    for (int i = 0; i < COMM_MAX_INFLIGHT; i++) {
        Pending* p = &tr->pending[i];
        if (!p->req || p->flight_begin < 0) continue;
        const TimelineLabel label = label_of(p);
        timeline_span(tr->tl, TL_COMM_FLIGHT, tr->group_track[p->group], p->flight_begin,
                      timeline_mark(tr->tl, tr->host), &label);
        p->flight_begin = -1;
    }
}

// A blocking host operation (sums of host values, barriers): flight and wait on the host track.
static void host_span(Comm* comm, IssueMarks m, CommKind kind, MeshGroup g, long long bytes) {
    struct CommTrace* tr = comm->trace;
    if (!tr) return;
    Pending p = {NULL, kind, g, bytes, comm->layer, comm->phase, -1};
    const TimelineLabel label = label_of(&p);
    const int end = timeline_mark(tr->tl, tr->host);
    timeline_span(tr->tl, TL_COMM_FLIGHT, tr->group_track[g], m.issue, end, &label);
    timeline_span(tr->tl, TL_WAIT, tr->host, m.issue, end, &label);
}

size_t comm_type_size(CommType t) {
    switch (t) {
    case COMM_F32: return 4;
    case COMM_F64: return 8;
    case COMM_I32: return 4;
    case COMM_U8: return 1;
    case COMM_BF16: return 2;
    default: FAIL("caller bug", "unknown comm element type %d", (int)t);
    }
}

const char* comm_kind_name(CommKind kind) {
    static const char* names[COMM_NKINDS] = {"all-gather", "reduce-scatter", "all-reduce",
                                             "all-to-all", "send-recv",  "broadcast",
                                             "barrier"};
    return kind >= 0 && kind < COMM_NKINDS ? names[kind] : "?";
}

const char* comm_phase_name(CommPhase phase) {
    static const char* names[COMM_NPHASES] = {"forward", "backward", "other"};
    return phase >= 0 && phase < COMM_NPHASES ? names[phase] : "?";
}

static int layer_slot(const Comm* comm, int layer) {
    CHECK(layer == COMM_NO_LAYER || (layer >= 0 && layer < comm->num_layers), "caller bug",
          "comm scope layer %d outside 0..%d (or COMM_NO_LAYER)", layer, comm->num_layers - 1);
    return layer == COMM_NO_LAYER ? comm->num_layers : layer;
}

static CommCount* counter(const Comm* comm, int layer, CommPhase phase, CommKind kind) {
    CHECK(phase >= 0 && phase < COMM_NPHASES, "caller bug", "unknown comm phase %d", (int)phase);
    return &comm->counts[((size_t)layer_slot(comm, layer) * COMM_NPHASES + phase) * COMM_NKINDS +
                         kind];
}

void comm_set_scope(Comm* comm, int layer, CommPhase phase) {
    (void)counter(comm, layer, phase, 0);   // validates both
    comm->layer = layer;
    comm->phase = phase;
}

CommScope comm_enter_scope(Comm* comm, int layer, CommPhase phase) {
    const CommScope saved = {comm->layer, comm->phase};
    comm_set_scope(comm, layer, phase);
    return saved;
}

void comm_leave_scope(Comm* comm, CommScope saved) { comm_set_scope(comm, saved.layer, saved.phase); }

CommCount comm_count(const Comm* comm, int layer, CommPhase phase, CommKind kind) {
    CHECK(kind >= 0 && kind < COMM_NKINDS, "caller bug", "unknown comm kind %d", (int)kind);
    return *counter(comm, layer, phase, kind);
}

CommCount comm_count_total(const Comm* comm, int layer, CommPhase phase) {
    CommCount sum = {0, 0, 0};
    for (int k = 0; k < COMM_NKINDS; k++) {
        CommCount c = comm_count(comm, layer, phase, k);
        sum.bytes += c.bytes;
        sum.messages += c.messages;
        sum.calls += c.calls;
    }
    return sum;
}

void comm_set_overlap(Comm* comm, int overlap) { comm->serial = !overlap; }

long long comm_count_bytes(const Comm* comm) {
    const size_t n = (size_t)(comm->num_layers + 1) * COMM_NPHASES * COMM_NKINDS;
    long long bytes = 0;
    for (size_t i = 0; i < n; i++) bytes += comm->counts[i].bytes;
    return bytes;
}

void comm_reset_counts(Comm* comm) {
    const size_t n = (size_t)(comm->num_layers + 1) * COMM_NPHASES * COMM_NKINDS;
    for (size_t i = 0; i < n; i++) comm->counts[i] = (CommCount){0, 0, 0};
}

static long long tally(Comm* comm, CommKind kind, long long bytes, long long messages) {
    CommCount* c = counter(comm, comm->layer, comm->phase, kind);
    c->bytes += bytes;
    c->messages += messages;
    c->calls += 1;
    return bytes;
}

// Bytes of `count` elements of type t.
static long long nbytes(size_t count, CommType t) { return (long long)(count * comm_type_size(t)); }

CommRequest* comm_all_gather_start(Comm* comm, MeshGroup g, const void* send, void* recv,
                                   size_t count, CommType t) {
    const int n = comm_size(comm, g);
    const long long bytes = tally(comm, COMM_ALL_GATHER, (n - 1) * nbytes(count, t), n - 1);
    const IssueMarks m = issue_begin(comm);
    return issue_end(comm, m, COMM_ALL_GATHER, g, bytes,
                     comm->ops->all_gather(comm->ctx, g, send, recv, count, t));
}

CommRequest* comm_reduce_scatter_sum_start(Comm* comm, MeshGroup g, const void* send, void* recv,
                                           size_t count, CommType t) {
    const int n = comm_size(comm, g);
    const long long bytes = tally(comm, COMM_REDUCE_SCATTER, (n - 1) * nbytes(count, t), n - 1);
    const IssueMarks m = issue_begin(comm);
    return issue_end(comm, m, COMM_REDUCE_SCATTER, g, bytes,
                     comm->ops->reduce_scatter_sum(comm->ctx, g, send, recv, count, t));
}

static long long tally_all_reduce(Comm* comm, MeshGroup g, size_t count, CommType t) {
    const int n = comm_size(comm, g);
    return tally(comm, COMM_ALL_REDUCE, 2 * (n - 1) * nbytes(count, t) / n, 2 * (n - 1));
}

CommRequest* comm_all_reduce_sum_start(Comm* comm, MeshGroup g, void* buf, size_t count,
                                       CommType t) {
    const long long bytes = tally_all_reduce(comm, g, count, t);
    const IssueMarks m = issue_begin(comm);
    return issue_end(comm, m, COMM_ALL_REDUCE, g, bytes,
                     comm->ops->all_reduce_sum(comm->ctx, g, buf, count, t));
}

CommRequest* comm_all_to_all_start(Comm* comm, MeshGroup g, const void* send, void* recv,
                                   size_t count, CommType t) {
    const int n = comm_size(comm, g);
    const long long bytes = tally(comm, COMM_ALL_TO_ALL, (n - 1) * nbytes(count, t), n - 1);
    const IssueMarks m = issue_begin(comm);
    return issue_end(comm, m, COMM_ALL_TO_ALL, g, bytes,
                     comm->ops->all_to_all(comm->ctx, g, send, recv, count, t));
}

static void check_transfers(const Comm* comm, MeshGroup g, const CommTransfer* list, int n,
                            const char* what) {
    const int size = comm_size(comm, g);
    for (int i = 0; i < n; i++) {
        CHECK(list[i].peer >= 0 && list[i].peer < size, "caller bug",
              "%s %d to/from rank %d outside the %s group of %d ranks", what, i, list[i].peer,
              mesh_group_name(g), size);
    }
}

CommRequest* comm_start(Comm* comm, MeshGroup g, CommType t, const CommTransfer* sends,
                        int nsend, const CommTransfer* recvs, int nrecv) {
    CHECK(nsend >= 0 && nrecv >= 0 && nsend + nrecv <= COMM_MAX_TRANSFERS, "caller bug",
          "comm_start: %d sends + %d receives (at most %d in one batch)", nsend, nrecv,
          COMM_MAX_TRANSFERS);
    check_transfers(comm, g, sends, nsend, "send");
    check_transfers(comm, g, recvs, nrecv, "receive");
    const int me = comm_rank(comm, g);
    long long bytes = 0, messages = 0;
    for (int i = 0; i < nrecv; i++) {
        if (recvs[i].peer == me) continue;   // a copy to itself moves nothing between ranks
        bytes += nbytes(recvs[i].count, t);
        messages++;
    }
    tally(comm, COMM_SEND_RECV, bytes, messages);
    const IssueMarks m = issue_begin(comm);
    return issue_end(comm, m, COMM_SEND_RECV, g, bytes,
                     comm->ops->send_recv(comm->ctx, g, t, sends, nsend, recvs, nrecv));
}

void comm_wait(Comm* comm, CommRequest* req) {
    if (req) traced_wait(comm, req, 0);
}

void comm_wait_host(Comm* comm, CommRequest* req) {
    if (req) traced_wait(comm, req, 1);
}

void comm_all_gather(Comm* comm, MeshGroup g, const void* send, void* recv, size_t count,
                     CommType t) {
    comm_wait(comm, comm_all_gather_start(comm, g, send, recv, count, t));
}

void comm_reduce_scatter_sum(Comm* comm, MeshGroup g, const void* send, void* recv,
                             size_t count, CommType t) {
    comm_wait(comm, comm_reduce_scatter_sum_start(comm, g, send, recv, count, t));
}

void comm_all_reduce_sum(Comm* comm, MeshGroup g, void* buf, size_t count, CommType t) {
    comm_wait(comm, comm_all_reduce_sum_start(comm, g, buf, count, t));
}

void comm_all_to_all(Comm* comm, MeshGroup g, const void* send, void* recv, size_t count,
                     CommType t) {
    comm_wait(comm, comm_all_to_all_start(comm, g, send, recv, count, t));
}

void comm_broadcast(Comm* comm, MeshGroup g, void* buf, size_t count, CommType t, int root) {
    const int size = comm_size(comm, g);
    CHECK(root >= 0 && root < size, "caller bug", "broadcast root %d outside the %s group of %d",
          root, mesh_group_name(g), size);
    const int receives = comm_rank(comm, g) != root;
    const long long bytes = tally(comm, COMM_BROADCAST, receives * nbytes(count, t), receives);
    const IssueMarks m = issue_begin(comm);
    comm_wait(comm, issue_end(comm, m, COMM_BROADCAST, g, bytes,
                              comm->ops->broadcast(comm->ctx, g, buf, count, t, root)));
}

// A blocking host operation started as req: the host waits for it under the watchdog.
static void host_op_wait(Comm* comm, CommKind kind, MeshGroup g, CommRequest* req) {
    watch_start(comm, kind, g, req);
    if (req) transport_wait(comm, req, 1);
}

void comm_all_reduce_host(Comm* comm, MeshGroup g, void* buf, size_t count, CommType t) {
    const long long bytes = tally_all_reduce(comm, g, count, t);
    const IssueMarks m = issue_begin(comm);
    host_op_wait(comm, COMM_ALL_REDUCE, g, comm->ops->all_reduce_host_sum(comm->ctx, g, buf, count, t));
    host_span(comm, m, COMM_ALL_REDUCE, g, bytes);
}

void comm_barrier(Comm* comm, MeshGroup g) {
    tally(comm, COMM_BARRIER, 0, 0);
    const IssueMarks m = issue_begin(comm);
    host_op_wait(comm, COMM_BARRIER, g, comm->ops->barrier(comm->ctx, g));
    host_span(comm, m, COMM_BARRIER, g, 0);
}
