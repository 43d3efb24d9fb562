// Transport-independent half of the comm layer: scopes, counters, argument checks, dispatch.
#include "comm/comm.h"

#include <stdio.h>
#include <stdlib.h>

#include "comm/fail.h"

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
    return comm;
}

void comm_destroy(Comm* comm) {
    if (!comm) return;
    comm->ops->destroy(comm->ctx);
    free(comm->counts);
    free(comm->trace);
    free(comm);
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
    req = record_issue(comm, m, kind, g, bytes, req);
    if (req && comm->serial) {   // the plain schedule
        traced_wait(comm, req, 0);
        return NULL;
    }
    return req;
}

// Waits for req (host = 1: the host waits) and records the wait and any open flight span.
static void traced_wait(Comm* comm, CommRequest* req, int host) {
    struct CommTrace* tr = comm->trace;
    if (!tr) {
        comm->ops->wait(comm->ctx, req, host);
        return;
    }
    const int track = host ? tr->host : tr->compute;
    const int begin = timeline_mark(tr->tl, track);
    comm->ops->wait(comm->ctx, req, host);
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

void comm_all_reduce_host(Comm* comm, MeshGroup g, void* buf, size_t count, CommType t) {
    const long long bytes = tally_all_reduce(comm, g, count, t);
    const IssueMarks m = issue_begin(comm);
    comm->ops->all_reduce_host_sum(comm->ctx, g, buf, count, t);
    host_span(comm, m, COMM_ALL_REDUCE, g, bytes);
}

void comm_barrier(Comm* comm, MeshGroup g) {
    tally(comm, COMM_BARRIER, 0, 0);
    const IssueMarks m = issue_begin(comm);
    comm->ops->barrier(comm->ctx, g);
    host_span(comm, m, COMM_BARRIER, g, 0);
}
