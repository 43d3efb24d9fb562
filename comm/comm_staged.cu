// The "mpi-staged" transport: device buffers copied to pinned host buffers on the compute stream,
// moved by the MPI transport (comm_mpi.c), and copied back on the compute stream, so results
// arrive in stream order. Every operation synchronises the stream once (its send data must be on
// the host before MPI reads it); that also guarantees that earlier copies out of a staging buffer
// have finished before the buffer is reused.
#include "comm/comm_device_impl.h"
#include "comm/comm_mpi.h"

// A send/recv batch in flight: its own staging area, and where the received data go.
struct CommRequest {
    int in_use;
    CommRequest* inner;                     // the MPI batch on the staging area
    int nrecv;
    void* dst[COMM_MAX_TRANSFERS];          // device destinations of the receives
    size_t offset[COMM_MAX_TRANSFERS];      // their bytes in `stage`
    size_t bytes[COMM_MAX_TRANSFERS];
    char* stage;                            // pinned
    size_t stage_bytes;
};

typedef struct {
    void* mpi;                  // the MPI transport's context (mesh groups)
    Mesh mesh;
    cudaStream_t compute;
    char* send;                 // pinned staging of collectives
    char* recv;
    size_t send_bytes, recv_bytes;
    CommRequest pool[COMM_MAX_INFLIGHT];
} StagedComm;

// Grows a pinned buffer to at least `bytes` (after the stream is idle: see the file comment).
static void reserve(StagedComm* s, char** buf, size_t* have, size_t bytes) {
    if (*have >= bytes) return;
    CUDA_CHECK(cudaStreamSynchronize(s->compute));
    if (*buf) CUDA_CHECK(cudaFreeHost(*buf));
    const cudaError_t err = cudaMallocHost((void**)buf, bytes);
    if (err != cudaSuccess)
        FAIL("lower the batch or sequence length", "cudaMallocHost of %zu bytes for the mpi-staged "
             "transport failed: %s", bytes, cudaGetErrorName(err));
    *have = bytes;
}

static void to_host(StagedComm* s, void* host, const void* device, size_t bytes) {
    if (bytes) CUDA_CHECK(cudaMemcpyAsync(host, device, bytes, cudaMemcpyDeviceToHost, s->compute));
}

static void to_device(StagedComm* s, void* device, const void* host, size_t bytes) {
    if (bytes) CUDA_CHECK(cudaMemcpyAsync(device, host, bytes, cudaMemcpyHostToDevice, s->compute));
}

// Copies `bytes` of device memory into the pinned s->send and waits for the stream, so that MPI
// can read the host copy.
static char* stage_out(StagedComm* s, const void* device, size_t bytes) {
    reserve(s, &s->send, &s->send_bytes, bytes);
    to_host(s, s->send, device, bytes);
    CUDA_CHECK(cudaStreamSynchronize(s->compute));
    return s->send;
}

// Stages in_count elements of send, runs the MPI collective `op` on the staging buffers, and
// copies out_count elements of its result to recv in stream order.
typedef CommRequest* (*HostCollective)(void* ctx, MeshGroup g, const void* send, void* recv,
                                       size_t count, CommType t);
static CommRequest* staged(void* ctx, HostCollective op, MeshGroup g, const void* send, void* recv,
                           size_t count, CommType t, size_t in_count, size_t out_count) {
    StagedComm* s = (StagedComm*)ctx;
    const size_t es = comm_type_size(t);
    reserve(s, &s->recv, &s->recv_bytes, out_count * es);
    op(s->mpi, g, stage_out(s, send, in_count * es), s->recv, count, t);
    to_device(s, recv, s->recv, out_count * es);
    return NULL;
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

// In place: MPI works on the host copy in s->send, which then goes back.
static CommRequest* staged_all_reduce_sum(void* ctx, MeshGroup g, void* buf, size_t count,
                                          CommType t) {
    StagedComm* s = (StagedComm*)ctx;
    const size_t bytes = count * comm_type_size(t);
    comm_mpi_ops.all_reduce_host_sum(s->mpi, g, stage_out(s, buf, bytes), count, t);
    to_device(s, buf, s->send, bytes);
    return NULL;
}

static CommRequest* staged_broadcast(void* ctx, MeshGroup g, void* buf, size_t count, CommType t,
                                     int root) {
    StagedComm* s = (StagedComm*)ctx;
    const size_t bytes = count * comm_type_size(t);
    comm_mpi_ops.broadcast(s->mpi, g, stage_out(s, buf, bytes), count, t, root);
    to_device(s, buf, s->send, bytes);
    return NULL;
}

static CommRequest* staged_send_recv(void* ctx, MeshGroup g, CommType t, const CommTransfer* sends,
                                     int nsend, const CommTransfer* recvs, int nrecv) {
    StagedComm* s = (StagedComm*)ctx;
    CommRequest* req = NULL;
    for (int i = 0; i < COMM_MAX_INFLIGHT && !req; i++) {
        if (!s->pool[i].in_use) req = &s->pool[i];
    }
    CHECK(req, "wait for a batch before starting another",
          "more than %d send/recv batches in flight", COMM_MAX_INFLIGHT);
    const size_t es = comm_type_size(t);
    size_t total = 0;
    for (int i = 0; i < nsend; i++) total += sends[i].count * es;
    for (int i = 0; i < nrecv; i++) total += recvs[i].count * es;
    reserve(s, &req->stage, &req->stage_bytes, total);
    CommTransfer host_sends[COMM_MAX_TRANSFERS], host_recvs[COMM_MAX_TRANSFERS];
    size_t at = 0;
    for (int i = 0; i < nsend; i++) {
        host_sends[i] = sends[i];
        host_sends[i].buf = req->stage + at;
        to_host(s, req->stage + at, sends[i].buf, sends[i].count * es);
        at += sends[i].count * es;
    }
    req->nrecv = nrecv;
    for (int i = 0; i < nrecv; i++) {
        host_recvs[i] = recvs[i];
        host_recvs[i].buf = req->stage + at;
        req->dst[i] = recvs[i].buf;
        req->offset[i] = at;
        req->bytes[i] = recvs[i].count * es;
        at += recvs[i].count * es;
    }
    CUDA_CHECK(cudaStreamSynchronize(s->compute));
    req->inner = comm_mpi_ops.send_recv(s->mpi, g, t, host_sends, nsend, host_recvs, nrecv);
    req->in_use = 1;
    return req;
}

static void staged_wait(void* ctx, CommRequest* req, int host) {
    StagedComm* s = (StagedComm*)ctx;
    CHECK(req && req->in_use, "caller bug", "waiting on a send/recv batch that is not in flight");
    comm_mpi_ops.wait(s->mpi, req->inner, 1);
    for (int i = 0; i < req->nrecv; i++) to_device(s, req->dst[i], req->stage + req->offset[i], req->bytes[i]);
    if (host) CUDA_CHECK(cudaStreamSynchronize(s->compute));
    req->in_use = 0;
}

static void staged_all_reduce_host_sum(void* ctx, MeshGroup g, void* buf, size_t count, CommType t) {
    comm_mpi_ops.all_reduce_host_sum(((StagedComm*)ctx)->mpi, g, buf, count, t);
}

static void staged_barrier(void* ctx, MeshGroup g) { comm_mpi_ops.barrier(((StagedComm*)ctx)->mpi, g); }

static void staged_destroy(void* ctx) {
    StagedComm* s = (StagedComm*)ctx;
    CUDA_CHECK(cudaStreamSynchronize(s->compute));
    for (int i = 0; i < COMM_MAX_INFLIGHT; i++) {
        CHECK(!s->pool[i].in_use, "caller bug", "comm destroyed with a send/recv batch in flight");
        if (s->pool[i].stage) CUDA_CHECK(cudaFreeHost(s->pool[i].stage));
    }
    if (s->send) CUDA_CHECK(cudaFreeHost(s->send));
    if (s->recv) CUDA_CHECK(cudaFreeHost(s->recv));
    comm_mpi_ops.destroy(s->mpi);
    free(s);
}

static const CommOps staged_ops = {
    staged_all_gather, staged_reduce_scatter_sum, staged_all_reduce_sum, staged_all_to_all,
    staged_send_recv,  staged_broadcast,          staged_wait,           staged_all_reduce_host_sum,
    staged_barrier,    staged_destroy,
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
