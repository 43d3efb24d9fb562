// Transport-independent half of the comm layer: scopes, counters, argument checks, dispatch. The
// hang watchdog is in comm_watchdog.c, the timeline record in comm_spans.c.
#include "comm/comm.h"

#include <stdio.h>
#include <stdlib.h>

#include "comm/comm_internal.h"
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
    comm->timeout_s = COMM_DEFAULT_TIMEOUT_S;
    comm->watch = comm_watch_create();
    return comm;
}

void comm_destroy(Comm* comm) {
    if (!comm) return;
    comm->ops->destroy(comm->ctx);
    free(comm->counts);
    free(comm->trace);
    free(comm->watch);
    comm_capture_free(comm->capture);
    free(comm);
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

void comm_capture_begin(Comm* comm) {
    CHECK(!comm->capture, "caller bug", "comm_capture_begin: a capture is open already");
    comm->capture = xcalloc(1, sizeof *comm->capture, "comm capture");
    comm->capture->counts = xcalloc((size_t)(comm->num_layers + 1) * COMM_NPHASES * COMM_NKINDS,
                                    sizeof(CommCount), "comm capture counters");
}

CommCapture* comm_capture_end(Comm* comm) {
    CommCapture* c = comm->capture;
    CHECK(c, "caller bug", "comm_capture_end: no capture is open");
    comm->capture = NULL;
    CHECK(c->nops == 0 || comm->ops->replayed, "use --comm nccl",
          "the %s transport cannot run in a CUDA graph, and the capture started %d of its "
          "operations", comm->name, c->nops);
    return c;
}

void comm_replayed(Comm* comm, const CommCapture* c) {
    const size_t n = (size_t)(comm->num_layers + 1) * COMM_NPHASES * COMM_NKINDS;
    for (size_t i = 0; i < n; i++) {
        comm->counts[i].bytes += c->counts[i].bytes;
        comm->counts[i].messages += c->counts[i].messages;
        comm->counts[i].calls += c->counts[i].calls;
    }
    comm_watch_replay(comm, c->ops, c->nops);
}

int comm_capture_ops(const CommCapture* c) { return c->nops; }

int comm_capturable(const Comm* comm) { return comm->ops->replayed != NULL; }

void comm_capture_free(CommCapture* c) {
    if (!c) return;
    free(c->counts);
    free(c->ops);
    free(c);
}

// The counters of this scope, or of the open capture's.
static long long tally(Comm* comm, CommKind kind, long long bytes, long long messages) {
    CommCount* c = counter(comm, comm->layer, comm->phase, kind);
    if (comm->capture) c = comm->capture->counts + (c - comm->counts);
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
    const IssueMarks m = comm_issue_begin(comm);
    return comm_issue_end(comm, m, COMM_ALL_GATHER, g, bytes,
                          comm->ops->all_gather(comm->ctx, g, send, recv, count, t));
}

CommRequest* comm_reduce_scatter_sum_start(Comm* comm, MeshGroup g, const void* send, void* recv,
                                           size_t count, CommType t) {
    const int n = comm_size(comm, g);
    const long long bytes = tally(comm, COMM_REDUCE_SCATTER, (n - 1) * nbytes(count, t), n - 1);
    const IssueMarks m = comm_issue_begin(comm);
    return comm_issue_end(comm, m, COMM_REDUCE_SCATTER, g, bytes,
                          comm->ops->reduce_scatter_sum(comm->ctx, g, send, recv, count, t));
}

static long long tally_all_reduce(Comm* comm, MeshGroup g, size_t count, CommType t) {
    const int n = comm_size(comm, g);
    return tally(comm, COMM_ALL_REDUCE, 2 * (n - 1) * nbytes(count, t) / n, 2 * (n - 1));
}

CommRequest* comm_all_reduce_sum_start(Comm* comm, MeshGroup g, void* buf, size_t count,
                                       CommType t) {
    const long long bytes = tally_all_reduce(comm, g, count, t);
    const IssueMarks m = comm_issue_begin(comm);
    return comm_issue_end(comm, m, COMM_ALL_REDUCE, g, bytes,
                          comm->ops->all_reduce_sum(comm->ctx, g, buf, count, t));
}

CommRequest* comm_all_to_all_start(Comm* comm, MeshGroup g, const void* send, void* recv,
                                   size_t count, CommType t) {
    const int n = comm_size(comm, g);
    const long long bytes = tally(comm, COMM_ALL_TO_ALL, (n - 1) * nbytes(count, t), n - 1);
    const IssueMarks m = comm_issue_begin(comm);
    return comm_issue_end(comm, m, COMM_ALL_TO_ALL, g, bytes,
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
    const IssueMarks m = comm_issue_begin(comm);
    return comm_issue_end(comm, m, COMM_SEND_RECV, g, bytes,
                          comm->ops->send_recv(comm->ctx, g, t, sends, nsend, recvs, nrecv));
}

void comm_wait(Comm* comm, CommRequest* req) {
    if (req) comm_traced_wait(comm, req, 0);
}

void comm_wait_host(Comm* comm, CommRequest* req) {
    if (req) comm_traced_wait(comm, req, 1);
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
    const IssueMarks m = comm_issue_begin(comm);
    comm_wait(comm, comm_issue_end(comm, m, COMM_BROADCAST, g, bytes,
                                   comm->ops->broadcast(comm->ctx, g, buf, count, t, root)));
}

// A blocking host operation started as req: the host waits for it under the watchdog.
static void host_op_wait(Comm* comm, CommKind kind, MeshGroup g, CommRequest* req) {
    comm_watch_start(comm, kind, g, req);
    if (req) comm_transport_wait(comm, req, 1);
}

void comm_all_reduce_host(Comm* comm, MeshGroup g, void* buf, size_t count, CommType t) {
    const long long bytes = tally_all_reduce(comm, g, count, t);
    const IssueMarks m = comm_issue_begin(comm);
    host_op_wait(comm, COMM_ALL_REDUCE, g, comm->ops->all_reduce_host_sum(comm->ctx, g, buf, count, t));
    comm_host_span(comm, m, COMM_ALL_REDUCE, g, bytes);
}

void comm_barrier(Comm* comm, MeshGroup g) {
    tally(comm, COMM_BARRIER, 0, 0);
    const IssueMarks m = comm_issue_begin(comm);
    host_op_wait(comm, COMM_BARRIER, g, comm->ops->barrier(comm->ctx, g));
    comm_host_span(comm, m, COMM_BARRIER, g, 0);
}
