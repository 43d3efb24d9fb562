// The "nccl" transport: NCCL collectives and grouped send/recv on device memory, one communicator
// per mesh group, split from the world's (ncclCommSplit, NCCL >= 2.18). Operations run on the
// stream of their group (one per mesh group, so that e.g. a row and a column all-gather proceed
// concurrently) after an event recorded on the compute stream; each returns a request (an event
// recorded after it), which the compute stream (comm_wait) or the host (comm_wait_host) waits on.
// Only the compute stream runs GEMMs, so the backend's one cuBLASLt workspace is never shared
// between streams.
//
// NCCL is loaded at run time (dlopen of libnccl.so.2): the trainer starts, and runs the mpi and
// mpi-staged transports, where NCCL is not installed. The host runtime (tests/cuda_host) provides
// the same API over MPI, linked in directly.
#include "comm/comm_device_impl.h"

#include <stdio.h>
#include <string.h>

#include "comm/comm_mpi.h"
#include "comm/rendezvous.h"

#if defined(CUDA_HOST)
#include "tests/cuda_host/host_nccl.h"
#else
#include <dlfcn.h>
#include <nccl.h>
#endif

// The NCCL functions this transport calls.
typedef struct {
    ncclResult_t (*GetVersion)(int*);
    ncclResult_t (*GetUniqueId)(ncclUniqueId*);
    ncclResult_t (*CommInitRank)(ncclComm_t*, int, ncclUniqueId, int);
    ncclResult_t (*CommSplit)(ncclComm_t, int, int, ncclComm_t*, ncclConfig_t*);
    ncclResult_t (*CommDestroy)(ncclComm_t);
    ncclResult_t (*CommAbort)(ncclComm_t);
    ncclResult_t (*AllGather)(const void*, void*, size_t, ncclDataType_t, ncclComm_t, cudaStream_t);
    ncclResult_t (*ReduceScatter)(const void*, void*, size_t, ncclDataType_t, ncclRedOp_t,
                                  ncclComm_t, cudaStream_t);
    ncclResult_t (*AllReduce)(const void*, void*, size_t, ncclDataType_t, ncclRedOp_t, ncclComm_t,
                              cudaStream_t);
    ncclResult_t (*Broadcast)(const void*, void*, size_t, ncclDataType_t, int, ncclComm_t,
                              cudaStream_t);
    ncclResult_t (*Send)(const void*, size_t, ncclDataType_t, int, ncclComm_t, cudaStream_t);
    ncclResult_t (*Recv)(void*, size_t, ncclDataType_t, int, ncclComm_t, cudaStream_t);
    ncclResult_t (*GroupStart)(void);
    ncclResult_t (*GroupEnd)(void);
    const char* (*GetErrorString)(ncclResult_t);
    const char* (*GetLastError)(ncclComm_t);
} NcclApi;

#if defined(CUDA_HOST)
static void nccl_api_load(NcclApi* api) {
    api->GetVersion = ncclGetVersion;
    api->GetUniqueId = ncclGetUniqueId;
    api->CommInitRank = ncclCommInitRank;
    api->CommSplit = ncclCommSplit;
    api->CommDestroy = ncclCommDestroy;
    api->CommAbort = ncclCommAbort;
    api->AllGather = ncclAllGather;
    api->ReduceScatter = ncclReduceScatter;
    api->AllReduce = ncclAllReduce;
    api->Broadcast = ncclBroadcast;
    api->Send = ncclSend;
    api->Recv = ncclRecv;
    api->GroupStart = ncclGroupStart;
    api->GroupEnd = ncclGroupEnd;
    api->GetErrorString = ncclGetErrorString;
    api->GetLastError = ncclGetLastError;
}
#else
static void* nccl_symbol(void* lib, const char* name) {
    void* f = dlsym(lib, name);
    if (!f)
        fail_msg("--comm nccl: the NCCL library has no %s (this program needs NCCL >= 2.18); use "
                 "--comm mpi-staged, or point LD_LIBRARY_PATH at a newer libnccl.so.2", name);
    return f;
}

#define NCCL_LOAD(field, name) *(void**)&api->field = nccl_symbol(lib, name)
static void nccl_api_load(NcclApi* api) {
    void* lib = dlopen("libnccl.so.2", RTLD_NOW | RTLD_GLOBAL);
    if (!lib) lib = dlopen("libnccl.so", RTLD_NOW | RTLD_GLOBAL);
    if (!lib)
        fail_msg("--comm nccl: cannot load libnccl.so.2 (%s); install NCCL (e.g. the nvidia-nccl "
                 "package) and add its lib directory to LD_LIBRARY_PATH, or use --comm mpi-staged",
                 dlerror());
    NCCL_LOAD(GetVersion, "ncclGetVersion");
    NCCL_LOAD(GetUniqueId, "ncclGetUniqueId");
    NCCL_LOAD(CommInitRank, "ncclCommInitRank");
    NCCL_LOAD(CommSplit, "ncclCommSplit");
    NCCL_LOAD(CommDestroy, "ncclCommDestroy");
    NCCL_LOAD(CommAbort, "ncclCommAbort");
    NCCL_LOAD(AllGather, "ncclAllGather");
    NCCL_LOAD(ReduceScatter, "ncclReduceScatter");
    NCCL_LOAD(AllReduce, "ncclAllReduce");
    NCCL_LOAD(Broadcast, "ncclBroadcast");
    NCCL_LOAD(Send, "ncclSend");
    NCCL_LOAD(Recv, "ncclRecv");
    NCCL_LOAD(GroupStart, "ncclGroupStart");
    NCCL_LOAD(GroupEnd, "ncclGroupEnd");
    NCCL_LOAD(GetErrorString, "ncclGetErrorString");
    NCCL_LOAD(GetLastError, "ncclGetLastError");
}
#undef NCCL_LOAD
#endif

struct CommRequest {
    int in_use;
    cudaEvent_t done;   // recorded on the transport's stream after the operation
};

typedef struct {
    NcclApi api;
    Mesh mesh;
    ncclComm_t groups[MESH_NGROUPS];   // MESH_WORLD: the communicator the others split from
    cudaStream_t compute;              // the backend's stream
    cudaStream_t streams[MESH_NGROUPS];   // NCCL's, one per group
    cudaEvent_t ready;                 // compute stream position an operation starts after
    void* scratch;                     // device staging of host all-reduces
    size_t scratch_bytes;
    CommRequest pool[COMM_MAX_INFLIGHT];
} NcclComm;

// The transport of this process, for the fail hook (a module-owned pointer: one per process).
static NcclComm* active;

static void nccl_check(NcclComm* n, ncclResult_t r, MeshGroup g, const char* what,
                       const char* file, int line) {
    if (r == ncclSuccess) return;
    const char* last = n->api.GetLastError ? n->api.GetLastError(n->groups[g]) : "";
    fail_at(file, line, "another rank failed, or the ranks disagree on sizes or order of calls",
            "NCCL %s on the %s group failed: %s%s%s", what, mesh_group_name(g),
            n->api.GetErrorString(r), last && last[0] ? ": " : "", last ? last : "");
}
#define NCCL_CHECK(n, call, g, what) nccl_check((n), (call), (g), (what), __FILE__, __LINE__)

// A failure anywhere aborts the communicators (so no GPU kernel waits for a dead peer), then
// ends the job through MPI when it runs, else exits.
static void abort_job(int exit_code) {
    NcclComm* n = active;
    active = NULL;
    if (n) {
        for (int g = MESH_NGROUPS - 1; g >= 0; g--)
            if (n->groups[g]) n->api.CommAbort(n->groups[g]);
    }
    if (comm_mpi_active()) comm_mpi_abort_job(exit_code);
    exit(exit_code);
}

static ncclDataType_t nccl_type(CommType t) {
    switch (t) {
    case COMM_F32: return ncclFloat32;
    case COMM_F64: return ncclFloat64;
    case COMM_I32: return ncclInt32;
    case COMM_U8: return ncclUint8;
    case COMM_BF16: return ncclBfloat16;
    default: FAIL("caller bug", "unknown comm element type %d", (int)t);
    }
}

// The next operation on group g starts after everything enqueued so far on the compute stream.
static NcclComm* begin(void* ctx, MeshGroup g) {
    NcclComm* n = (NcclComm*)ctx;
    CUDA_CHECK(cudaEventRecord(n->ready, n->compute));
    CUDA_CHECK(cudaStreamWaitEvent(n->streams[g], n->ready, 0));
    return n;
}

// The request of the operation just enqueued on group g's stream.
static CommRequest* end(NcclComm* n, MeshGroup g) {
    CommRequest* req = NULL;
    for (int i = 0; i < COMM_MAX_INFLIGHT && !req; i++) {
        if (!n->pool[i].in_use) req = &n->pool[i];
    }
    CHECK(req, "wait for an operation before starting another",
          "more than %d NCCL operations in flight", COMM_MAX_INFLIGHT);
    CUDA_CHECK(cudaEventRecord(req->done, n->streams[g]));
    req->in_use = 1;
    return req;
}

static CommRequest* nccl_all_gather(void* ctx, MeshGroup g, const void* send, void* recv,
                                    size_t count, CommType t) {
    NcclComm* n = begin(ctx, g);
    NCCL_CHECK(n, n->api.AllGather(send, recv, count, nccl_type(t), n->groups[g], n->streams[g]), g,
               "all-gather");
    return end(n, g);
}

static CommRequest* nccl_reduce_scatter_sum(void* ctx, MeshGroup g, const void* send, void* recv,
                                            size_t count, CommType t) {
    NcclComm* n = begin(ctx, g);
    NCCL_CHECK(n, n->api.ReduceScatter(send, recv, count, nccl_type(t), ncclSum, n->groups[g],
                                       n->streams[g]),
               g, "reduce-scatter");
    return end(n, g);
}

static CommRequest* nccl_all_reduce_sum(void* ctx, MeshGroup g, void* buf, size_t count,
                                        CommType t) {
    NcclComm* n = begin(ctx, g);
    NCCL_CHECK(n, n->api.AllReduce(buf, buf, count, nccl_type(t), ncclSum, n->groups[g], n->streams[g]),
               g, "all-reduce");
    return end(n, g);
}

static CommRequest* nccl_all_to_all(void* ctx, MeshGroup g, const void* send, void* recv,
                                    size_t count, CommType t) {
    NcclComm* n = begin(ctx, g);
    const size_t bytes = count * comm_type_size(t);
    const int size = mesh_group_size(&n->mesh, g);
    NCCL_CHECK(n, n->api.GroupStart(), g, "group start");
    for (int j = 0; j < size; j++) {
        NCCL_CHECK(n, n->api.Recv((char*)recv + j * bytes, count, nccl_type(t), j, n->groups[g],
                                  n->streams[g]), g, "all-to-all receive");
        NCCL_CHECK(n, n->api.Send((const char*)send + j * bytes, count, nccl_type(t), j,
                                  n->groups[g], n->streams[g]), g, "all-to-all send");
    }
    NCCL_CHECK(n, n->api.GroupEnd(), g, "all-to-all");
    return end(n, g);
}

static CommRequest* nccl_send_recv(void* ctx, MeshGroup g, CommType t, const CommTransfer* sends,
                                   int nsend, const CommTransfer* recvs, int nrecv) {
    NcclComm* n = begin(ctx, g);
    NCCL_CHECK(n, n->api.GroupStart(), g, "group start");
    for (int i = 0; i < nrecv; i++)
        NCCL_CHECK(n, n->api.Recv(recvs[i].buf, recvs[i].count, nccl_type(t), recvs[i].peer,
                                  n->groups[g], n->streams[g]), g, "post receive");
    for (int i = 0; i < nsend; i++)
        NCCL_CHECK(n, n->api.Send(sends[i].buf, sends[i].count, nccl_type(t), sends[i].peer,
                                  n->groups[g], n->streams[g]), g, "post send");
    NCCL_CHECK(n, n->api.GroupEnd(), g, "send/recv batch");
    return end(n, g);
}

static CommRequest* nccl_broadcast(void* ctx, MeshGroup g, void* buf, size_t count, CommType t,
                                   int root) {
    NcclComm* n = begin(ctx, g);
    NCCL_CHECK(n, n->api.Broadcast(buf, buf, count, nccl_type(t), root, n->groups[g], n->streams[g]),
               g, "broadcast");
    return end(n, g);
}

static void nccl_wait(void* ctx, CommRequest* req, int host) {
    NcclComm* n = (NcclComm*)ctx;
    CHECK(req && req->in_use, "caller bug", "waiting on an NCCL operation that is not in flight");
    if (host)
        CUDA_CHECK(cudaEventSynchronize(req->done));
    else
        CUDA_CHECK(cudaStreamWaitEvent(n->compute, req->done, 0));
    req->in_use = 0;
}

// Host values through a device scratch buffer, on the transport's stream.
static void nccl_all_reduce_host_sum(void* ctx, MeshGroup g, void* buf, size_t count, CommType t) {
    NcclComm* n = (NcclComm*)ctx;
    const size_t bytes = count * comm_type_size(t);
    if (bytes > n->scratch_bytes) {
        CUDA_CHECK(cudaStreamSynchronize(n->streams[g]));
        if (n->scratch) CUDA_CHECK(cudaFree(n->scratch));
        CUDA_CHECK(cudaMalloc(&n->scratch, bytes));
        n->scratch_bytes = bytes;
    }
    CUDA_CHECK(cudaMemcpyAsync(n->scratch, buf, bytes, cudaMemcpyHostToDevice, n->streams[g]));
    NCCL_CHECK(n, n->api.AllReduce(n->scratch, n->scratch, count, nccl_type(t), ncclSum,
                                   n->groups[g], n->streams[g]), g, "all-reduce of host values");
    CUDA_CHECK(cudaMemcpyAsync(buf, n->scratch, bytes, cudaMemcpyDeviceToHost, n->streams[g]));
    CUDA_CHECK(cudaStreamSynchronize(n->streams[g]));
}

static void nccl_barrier(void* ctx, MeshGroup g) {
    int32_t one = 1;
    nccl_all_reduce_host_sum(ctx, g, &one, 1, COMM_I32);
}

static void nccl_destroy(void* ctx) {
    NcclComm* n = (NcclComm*)ctx;
    for (int g = 0; g < MESH_NGROUPS; g++) CUDA_CHECK(cudaStreamSynchronize(n->streams[g]));
    for (int i = 0; i < COMM_MAX_INFLIGHT; i++) {
        CHECK(!n->pool[i].in_use, "caller bug", "comm destroyed with an NCCL operation in flight");
        CUDA_CHECK(cudaEventDestroy(n->pool[i].done));
    }
    active = NULL;
    for (int g = MESH_NGROUPS - 1; g >= 0; g--)
        NCCL_CHECK(n, n->api.CommDestroy(n->groups[g]), (MeshGroup)g, "destroy");
    if (n->scratch) CUDA_CHECK(cudaFree(n->scratch));
    CUDA_CHECK(cudaEventDestroy(n->ready));
    for (int g = 0; g < MESH_NGROUPS; g++) CUDA_CHECK(cudaStreamDestroy(n->streams[g]));
    free(n);
}

static void* nccl_stream(void* ctx, MeshGroup g) { return ((NcclComm*)ctx)->streams[g]; }

static const CommOps nccl_ops = {
    nccl_all_gather, nccl_reduce_scatter_sum, nccl_all_reduce_sum, nccl_all_to_all,
    nccl_send_recv,  nccl_broadcast,          nccl_wait,           nccl_all_reduce_host_sum,
    nccl_barrier,    nccl_destroy,            nccl_stream,
};

// The world's unique id from rank 0: over MPI, or through the rendezvous file or socket.
static void share_unique_id(NcclComm* n, const Mesh* mesh, const DeviceCommOptions* o,
                            ncclUniqueId* id) {
    if (mesh->world_rank == 0) NCCL_CHECK(n, n->api.GetUniqueId(id), MESH_WORLD, "unique id");
    if (strcmp(o->rendezvous, "mpi") == 0) {
        CHECK(comm_mpi_active(), "start the program with mpirun, or pick --rendezvous file:PATH or tcp:HOST:PORT",
              "--rendezvous mpi: MPI is not running");
        comm_mpi_broadcast_bytes(id, sizeof *id, 0);
        return;
    }
    char err[ERR_LEN];
    if (rendezvous_exchange(o->rendezvous, o->run_key, mesh->world_rank, mesh->world_size, id,
                            sizeof *id, o->timeout_s, err) != 0)
        fail_msg("--rendezvous %s", err);
}

Comm* comm_nccl_create(const Mesh* mesh, int num_layers, const DeviceCommOptions* o,
                       cudaStream_t compute) {
    NcclComm* n = (NcclComm*)xcalloc(1, sizeof *n, "NCCL comm");
    nccl_api_load(&n->api);
    n->mesh = *mesh;
    n->compute = compute;
    for (int g = 0; g < MESH_NGROUPS; g++)
        CUDA_CHECK(cudaStreamCreateWithFlags(&n->streams[g], cudaStreamNonBlocking));
    CUDA_CHECK(cudaEventCreateWithFlags(&n->ready, cudaEventDisableTiming));
    for (int i = 0; i < COMM_MAX_INFLIGHT; i++)
        CUDA_CHECK(cudaEventCreateWithFlags(&n->pool[i].done, cudaEventDisableTiming));
    ncclUniqueId id;
    memset(&id, 0, sizeof id);
    share_unique_id(n, mesh, o, &id);
    NCCL_CHECK(n, n->api.CommInitRank(&n->groups[MESH_WORLD], mesh->world_size, id,
                                      mesh->world_rank), MESH_WORLD, "communicator init");
    active = n;
    fail_set_hook(abort_job);
    for (int g = 0; g < MESH_NGROUPS; g++) {
        if (g == MESH_WORLD) continue;
        NCCL_CHECK(n, n->api.CommSplit(n->groups[MESH_WORLD], mesh_group_color(mesh, (MeshGroup)g),
                                       mesh_group_rank(mesh, (MeshGroup)g), &n->groups[g], NULL),
                   (MeshGroup)g, "communicator split");
    }
    return comm_create(&nccl_ops, n, "nccl", 1, mesh, num_layers);
}
