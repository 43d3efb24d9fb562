// The recording transport of record_comm.h. The bytes and messages of an operation are read back
// from comm.c's counters (which count before dispatching), so they are what the real transports
// count, not a second copy of the counting rules.
#include "explain/record_comm.h"

#include <stdlib.h>
#include <string.h>

#include "comm/fail.h"

static RecordedOp* record(CommRecorder* r, MeshGroup g, CommKind kind, CommType t, size_t count) {
    if (r->n == r->cap) {
        r->cap = r->cap ? 2 * r->cap : 64;
        r->op = realloc(r->op, (size_t)r->cap * sizeof *r->op);
        CHECK(r->op, "out of memory", "record_comm: %d operations", r->cap);
    }
    const Comm* comm = r->comm;
    RecordedOp* op = &r->op[r->n];
    memset(op, 0, sizeof *op);
    op->layer = comm->layer, op->phase = comm->phase, op->kind = kind, op->group = g;
    op->group_size = comm_size(comm, g), op->group_rank = comm_rank(comm, g);
    op->type = t, op->count = count;
    op->calls_before = r->calls ? *r->calls : -1;
    // This call's share of the counter: the counter now minus what earlier calls of the same
    // scope and kind recorded.
    CommCount now = comm_count(comm, comm->layer, comm->phase, kind);
    for (int k = 0; k < r->n; k++) {
        const RecordedOp* e = &r->op[k];
        if (e->layer != op->layer || e->phase != op->phase || e->kind != kind) continue;
        now.bytes -= e->bytes;
        now.messages -= e->messages;
    }
    op->bytes = now.bytes, op->messages = now.messages;
    r->n++;
    return op;
}

static void zero(void* buf, size_t count, CommType t) {
    if (buf && count) memset(buf, 0, count * comm_type_size(t));
}

static CommRequest* rec_all_gather(void* ctx, MeshGroup g, const void* send, void* recv,
                                   size_t count, CommType t) {
    CommRecorder* r = ctx;
    const RecordedOp* op = record(r, g, COMM_ALL_GATHER, t, count);
    zero(recv, (size_t)op->group_size * count, t);
    return NULL;
}

static CommRequest* rec_reduce_scatter(void* ctx, MeshGroup g, const void* send, void* recv,
                                       size_t count, CommType t) {
    record(ctx, g, COMM_REDUCE_SCATTER, t, count);
    zero(recv, count, t);
    return NULL;
}

static CommRequest* rec_all_reduce(void* ctx, MeshGroup g, void* buf, size_t count, CommType t) {
    record(ctx, g, COMM_ALL_REDUCE, t, count);
    zero(buf, count, t);
    return NULL;
}

static CommRequest* rec_all_to_all(void* ctx, MeshGroup g, const void* send, void* recv,
                                   size_t count, CommType t) {
    const RecordedOp* op = record(ctx, g, COMM_ALL_TO_ALL, t, count);
    zero(recv, (size_t)op->group_size * count, t);
    return NULL;
}

static CommRequest* rec_send_recv(void* ctx, MeshGroup g, CommType t, const CommTransfer* sends,
                                  int nsend, const CommTransfer* recvs, int nrecv) {
    size_t largest = 0;
    for (int k = 0; k < nsend; k++) largest = sends[k].count > largest ? sends[k].count : largest;
    for (int k = 0; k < nrecv; k++) largest = recvs[k].count > largest ? recvs[k].count : largest;
    RecordedOp* op = record(ctx, g, COMM_SEND_RECV, t, largest);
    op->nsend = nsend, op->nrecv = nrecv;
    for (int k = 0; k < nsend; k++) op->send_peer[k] = sends[k].peer, op->send_count[k] = sends[k].count;
    for (int k = 0; k < nrecv; k++) {
        op->recv_peer[k] = recvs[k].peer, op->recv_count[k] = recvs[k].count;
        zero(recvs[k].buf, recvs[k].count, t);
    }
    return NULL;
}

static CommRequest* rec_broadcast(void* ctx, MeshGroup g, void* buf, size_t count, CommType t,
                                  int root) {
    record(ctx, g, COMM_BROADCAST, t, count);
    zero(buf, count, t);
    return NULL;
}

static void rec_wait(void* ctx, CommRequest* req, int host) {}

// Host operations complete when they return: no request (NULL), as comm.h's transports do.
static CommRequest* rec_all_reduce_host(void* ctx, MeshGroup g, void* buf, size_t count,
                                        CommType t) {
    record(ctx, g, COMM_ALL_REDUCE, t, count);
    zero(buf, count, t);
    return NULL;
}

static CommRequest* rec_barrier(void* ctx, MeshGroup g) {
    record(ctx, g, COMM_BARRIER, COMM_U8, 0);
    return NULL;
}

static void rec_destroy(void* ctx) {
    CommRecorder* r = ctx;
    free(r->op);
    free(r);
}

static const CommOps record_ops = {
    .all_gather = rec_all_gather,
    .reduce_scatter_sum = rec_reduce_scatter,
    .all_reduce_sum = rec_all_reduce,
    .all_to_all = rec_all_to_all,
    .send_recv = rec_send_recv,
    .broadcast = rec_broadcast,
    .wait = rec_wait,
    .all_reduce_host_sum = rec_all_reduce_host,
    .barrier = rec_barrier,
    .destroy = rec_destroy,
    .stream = NULL,
};

Comm* record_comm_create(const Mesh* mesh, int num_layers, CommRecorder** rec) {
    CommRecorder* r = xcalloc(1, sizeof *r, "comm recorder");
    r->comm = comm_create(&record_ops, r, "record", 0, mesh, num_layers);
    *rec = r;
    return r->comm;
}

int record_sp_index(const Mesh* mesh, MeshGroup g, int member) {
    return mesh_group_world_rank(mesh, g, member) - mesh->dp_index * mesh->P;
}
