// The "mpi-staged" transport: device buffers copied to pinned host buffers on the compute stream,
// moved by the MPI transport's non-blocking operations (comm_mpi.c), and copied back on the
// compute stream when the operation is waited on, so results arrive in stream order. Starting an
// operation synchronises the stream once (its send data must be on the host before MPI reads
// them); that also guarantees that earlier copies out of a staging buffer have finished before
// the buffer is reused. Each operation in flight has its own pinned staging area.
#include "comm/comm_device_impl.h"
#include "comm/comm_mpi.h"

// An operation in flight: its staging area, the MPI operation on it, and where results go.
struct CommRequest {
    int in_use;
    CommRequest* inner;                     // the MPI operation on the staging area
    int nrecv;
    void* dst[COMM_MAX_TRANSFERS];          // device destinations of the results
    size_t offset[COMM_MAX_TRANSFERS];      // their bytes in `stage`
    size_t bytes[COMM_MAX_TRANSFERS];
    char* stage;                            // pinned
    size_t stage_bytes;
};

typedef struct {
    void* mpi;                  // the MPI transport's context (mesh groups)
    Mesh mesh;
    cudaStream_t compute;
    CommRequest pool[COMM_MAX_INFLIGHT];
} StagedComm;

// A free request with a pinned staging area of at least `bytes`. Growing it synchronises the
// stream first (see the file comment).
static CommRequest* take_request(StagedComm* s, size_t bytes) {
    CommRequest* req = NULL;
    for (int i = 0; i < COMM_MAX_INFLIGHT && !req; i++) {
        if (!s->pool[i].in_use) req = &s->pool[i];
    }
    CHECK(req, "wait for an operation before starting another",
          "more than %d mpi-staged operations in flight", COMM_MAX_INFLIGHT);
    if (req->stage_bytes < bytes) {
        CUDA_CHECK(cudaStreamSynchronize(s->compute));
        if (req->stage) CUDA_CHECK(cudaFreeHost(req->stage));
        req->stage = NULL;
        const cudaError_t err = cudaMallocHost((void**)&req->stage, bytes);
        if (err != cudaSuccess)
            FAIL("lower the batch or sequence length", "cudaMallocHost of %zu bytes for the "
                 "mpi-staged transport failed: %s", bytes, cudaGetErrorName(err));
        req->stage_bytes = bytes;
    }
    req->in_use = 1;
    req->nrecv = 0;
    return req;
}

static void to_host(StagedComm* s, void* host, const void* device, size_t bytes) {
    if (bytes) CUDA_CHECK(cudaMemcpyAsync(host, device, bytes, cudaMemcpyDeviceToHost, s->compute));
}

static void to_device(StagedComm* s, void* device, const void* host, size_t bytes) {
    if (bytes) CUDA_CHECK(cudaMemcpyAsync(device, host, bytes, cudaMemcpyHostToDevice, s->compute));
}

// Where the wait copies `bytes` of the staging area (from `offset`) to on the device.
static void add_result(CommRequest* req, void* device, size_t offset, size_t bytes) {
    req->dst[req->nrecv] = device;
    req->offset[req->nrecv] = offset;
    req->bytes[req->nrecv] = bytes;
    req->nrecv++;
}

// Stages in_count elements of send, starts the MPI collective `op` from the staging area into the
// area behind it, and notes out_count elements of its result for recv.
typedef CommRequest* (*HostCollective)(void* ctx, MeshGroup g, const void* send, void* recv,
                                       size_t count, CommType t);
static CommRequest* staged(void* ctx, HostCollective op, MeshGroup g, const void* send, void* recv,
                           size_t count, CommType t, size_t in_count, size_t out_count) {
    StagedComm* s = (StagedComm*)ctx;
    const size_t es = comm_type_size(t), in = in_count * es, out = out_count * es;
    CommRequest* req = take_request(s, in + out);
    to_host(s, req->stage, send, in);
    CUDA_CHECK(cudaStreamSynchronize(s->compute));
    req->inner = op(s->mpi, g, req->stage, req->stage + in, count, t);
    add_result(req, recv, in, out);
    return req;
}

static size_t group_size(void* ctx, MeshGroup g) {
    return (size_t)mesh_group_size(&((StagedComm*)ctx)->mesh, g);
}

static CommRequest* staged_all_gather(void* ctx, MeshGroup g, const void* send, void* recv,
                                      size_t count, CommType t) {
    return staged(ctx, comm_mpi_ops.all_gather, g, send, recv, count, t, count,
                  group_size(ctx, g) * count);
}

static CommRequest* staged_reduce_scatter_sum(void* ctx, MeshGroup g, const void* send,
                                              void* recv, size_t count, CommType t) {
    return staged(ctx, comm_mpi_ops.reduce_scatter_sum, g, send, recv, count, t,
                  group_size(ctx, g) * count, count);
}

static CommRequest* staged_all_to_all(void* ctx, MeshGroup g, const void* send, void* recv,
                                      size_t count, CommType t) {
    const size_t n = group_size(ctx, g) * count;
    return staged(ctx, comm_mpi_ops.all_to_all, g, send, recv, count, t, n, n);
}

// In place on the staging area, which then goes back.
static CommRequest* stage_in_place(StagedComm* s, void* buf, size_t bytes) {
    CommRequest* req = take_request(s, bytes);
    to_host(s, req->stage, buf, bytes);
    CUDA_CHECK(cudaStreamSynchronize(s->compute));
    add_result(req, buf, 0, bytes);
    return req;
}

static CommRequest* staged_all_reduce_sum(void* ctx, MeshGroup g, void* buf, size_t count,
                                          CommType t) {
    StagedComm* s = (StagedComm*)ctx;
    CommRequest* req = stage_in_place(s, buf, count * comm_type_size(t));
    req->inner = comm_mpi_ops.all_reduce_sum(s->mpi, g, req->stage, count, t);
    return req;
}

static CommRequest* staged_broadcast(void* ctx, MeshGroup g, void* buf, size_t count, CommType t,
                                     int root) {
    StagedComm* s = (StagedComm*)ctx;
    CommRequest* req = stage_in_place(s, buf, count * comm_type_size(t));
    req->inner = comm_mpi_ops.broadcast(s->mpi, g, req->stage, count, t, root);
    return req;
}

static CommRequest* staged_send_recv(void* ctx, MeshGroup g, CommType t, const CommTransfer* sends,
                                     int nsend, const CommTransfer* recvs, int nrecv) {
    StagedComm* s = (StagedComm*)ctx;
    const size_t es = comm_type_size(t);
    size_t total = 0;
    for (int i = 0; i < nsend; i++) total += sends[i].count * es;
    for (int i = 0; i < nrecv; i++) total += recvs[i].count * es;
    CommRequest* req = take_request(s, total);
    CommTransfer host_sends[COMM_MAX_TRANSFERS], host_recvs[COMM_MAX_TRANSFERS];
    size_t at = 0;
    for (int i = 0; i < nsend; i++) {
        host_sends[i] = sends[i];
        host_sends[i].buf = req->stage + at;
        to_host(s, req->stage + at, sends[i].buf, sends[i].count * es);
        at += sends[i].count * es;
    }
    for (int i = 0; i < nrecv; i++) {
        host_recvs[i] = recvs[i];
        host_recvs[i].buf = req->stage + at;
        add_result(req, recvs[i].buf, at, recvs[i].count * es);
        at += recvs[i].count * es;
    }
    CUDA_CHECK(cudaStreamSynchronize(s->compute));
    req->inner = comm_mpi_ops.send_recv(s->mpi, g, t, host_sends, nsend, host_recvs, nrecv);
    return req;
}

static void staged_wait(void* ctx, CommRequest* req, int host) {
    StagedComm* s = (StagedComm*)ctx;
    CHECK(req && req->in_use, "caller bug", "waiting on an mpi-staged operation that is not in flight");
    if (req->inner) comm_mpi_ops.wait(s->mpi, req->inner, 1);
    for (int i = 0; i < req->nrecv; i++) to_device(s, req->dst[i], req->stage + req->offset[i], req->bytes[i]);
    if (host && req->nrecv > 0) CUDA_CHECK(cudaStreamSynchronize(s->compute));   // the copies back
    req->inner = NULL;
    req->in_use = 0;
}

// The MPI operation of req (complete when there is none); the copies back are local work.
static int staged_test(void* ctx, CommRequest* req) {
    StagedComm* s = (StagedComm*)ctx;
    CHECK(req && req->in_use, "caller bug", "testing an mpi-staged operation that is not in flight");
    return !req->inner || comm_mpi_ops.test(s->mpi, req->inner);
}

// Host memory needs no staging: an operation of its own with no results to copy.
static CommRequest* wrap_host(StagedComm* s, CommRequest* inner) {
    CommRequest* req = take_request(s, 0);
    req->inner = inner;
    return req;
}

static CommRequest* staged_all_reduce_host_sum(void* ctx, MeshGroup g, void* buf, size_t count,
                                               CommType t) {
    StagedComm* s = (StagedComm*)ctx;
    return wrap_host(s, comm_mpi_ops.all_reduce_host_sum(s->mpi, g, buf, count, t));
}

static CommRequest* staged_barrier(void* ctx, MeshGroup g) {
    StagedComm* s = (StagedComm*)ctx;
    return wrap_host(s, comm_mpi_ops.barrier(s->mpi, g));
}

static void staged_destroy(void* ctx) {
    StagedComm* s = (StagedComm*)ctx;
    CUDA_CHECK(cudaStreamSynchronize(s->compute));
    for (int i = 0; i < COMM_MAX_INFLIGHT; i++) {
        CHECK(!s->pool[i].in_use, "caller bug", "comm destroyed with a send/recv batch in flight");
        if (s->pool[i].stage) CUDA_CHECK(cudaFreeHost(s->pool[i].stage));
    }
    comm_mpi_ops.destroy(s->mpi);
    free(s);
}

static const CommOps staged_ops = {
    staged_all_gather,  staged_reduce_scatter_sum, staged_all_reduce_sum, staged_all_to_all,
    staged_send_recv,   staged_broadcast,          staged_wait,           staged_test,
    staged_all_reduce_host_sum, staged_barrier,    staged_destroy,        NULL,
    NULL,               NULL,                      NULL,                  NULL,
};

Comm* comm_staged_create(const Mesh* mesh, int num_layers, cudaStream_t compute) {
    CHECK(comm_mpi_active(), "start the program with mpirun (or srun with PMIx)",
          "the mpi-staged transport needs MPI, which is not running");
    StagedComm* s = (StagedComm*)xcalloc(1, sizeof *s, "mpi-staged comm");
    s->mpi = comm_mpi_context(mesh);
    s->mesh = *mesh;
    s->compute = compute;
    return comm_create(&staged_ops, s, "mpi-staged", 1, mesh, num_layers);
}
