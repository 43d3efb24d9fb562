// The hang watchdog of the comm layer: every host wait for communication polls under the limit of
// comm_set_timeout, and names the stalled operation (its kind, group, layer and phase, from the
// record of the operations started and in flight) before it ends the job.
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "comm/comm_internal.h"
#include "comm/fail.h"

struct CommWatch {
    unsigned long long started[MESH_NGROUPS];   // operations started on each group
    unsigned long long order;                   // ... on all groups
    WatchedOp recent[MESH_NGROUPS][COMM_WATCH_OPS];   // operation i of group g at i % COMM_WATCH_OPS
    struct {
        CommRequest* req;   // NULL: free entry
        WatchedOp op;
    } inflight[COMM_MAX_INFLIGHT];
};

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

// Notes op as started on its group.
static void watch_started(struct CommWatch* w, WatchedOp op) {
    op.order = w->order++;
    w->recent[op.group][w->started[op.group]++ % COMM_WATCH_OPS] = op;
}

// An operation recorded in a stream capture: started at each launch of its graph instead.
static void capture_note(struct CommCapture* c, WatchedOp op) {
    if (c->nops == c->cap) {
        c->cap = c->cap ? 2 * c->cap : 64;
        WatchedOp* grown = realloc(c->ops, (size_t)c->cap * sizeof *c->ops);
        CHECK(grown, "free host memory", "out of memory for %d captured comm operations", c->cap);
        c->ops = grown;
    }
    c->ops[c->nops++] = op;
}

void comm_watch_replay(Comm* comm, const WatchedOp* ops, int n) {
    int per_group[MESH_NGROUPS] = {0};
    for (int i = 0; i < n; i++) {
        watch_started(comm->watch, ops[i]);
        per_group[ops[i].group]++;
    }
    for (int g = 0; g < MESH_NGROUPS; g++)
        if (per_group[g]) comm->ops->replayed(comm->ctx, (MeshGroup)g, per_group[g]);
}

// Notes the operation just started on g, and its request (NULL: complete already).
void comm_watch_start(Comm* comm, CommKind kind, MeshGroup g, CommRequest* req) {
    struct CommWatch* w = comm->watch;
    const WatchedOp op = {kind, g, comm->layer, comm->phase, 0};
    if (comm->capture)
        capture_note(comm->capture, op);
    else
        watch_started(w, op);
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

// Waits for req, under the watchdog wherever the host waits (host = 1, or a transport whose
// waits block the host).
void comm_transport_wait(Comm* comm, CommRequest* req, int host) {
    if (host || !comm->ops->fence)
        host_wait(comm, req, host);
    else
        comm->ops->wait(comm->ctx, req, host);
    watch_end(comm, req);
}

struct CommWatch* comm_watch_create(void) {
    return xcalloc(1, sizeof(struct CommWatch), "comm watchdog");
}
