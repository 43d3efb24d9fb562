// The "nccl" transport: NCCL collectives and grouped send/recv on device memory, one communicator
// per mesh group, split from the world's (ncclCommSplit, NCCL >= 2.18). Operations run on the
// stream of their group (one per mesh group, so that e.g. a row and a column all-gather proceed
// concurrently) after an event recorded on the compute stream; each returns a request (an event
// recorded after it), which the compute stream (comm_wait) or the host (comm_wait_host) waits on.
// Only the compute stream runs GEMMs, so the backend's one cuBLASLt workspace is never shared
// between streams.
//
// The communicators are non-blocking (config.blocking = 0): no NCCL call blocks the host. Every
// call is followed by polling each communicator it touched with ncclCommGetAsyncError until it
// leaves ncclInProgress, under the comm timeout (settle() below says why the return value is not
// enough), and the host waits only through the comm layer's watchdog (comm_watchdog.c): tests of events,
// async errors of the communicators, and a ring of events per group that tells which operation
// did not complete. A failure, or the watchdog, aborts every communicator (ncclCommAbort) before
// the job ends.
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
    ncclResult_t (*CommInitRankConfig)(ncclComm_t*, int, ncclUniqueId, int, ncclConfig_t*);
    ncclResult_t (*CommSplit)(ncclComm_t, int, int, ncclComm_t*, ncclConfig_t*);
    ncclResult_t (*CommFinalize)(ncclComm_t);
    ncclResult_t (*CommDestroy)(ncclComm_t);
    ncclResult_t (*CommAbort)(ncclComm_t);
    ncclResult_t (*CommGetAsyncError)(ncclComm_t, ncclResult_t*);
    ncclResult_t (*CommCount)(ncclComm_t, int*);
    ncclResult_t (*CommUserRank)(ncclComm_t, int*);
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
    api->CommInitRankConfig = ncclCommInitRankConfig;
    api->CommSplit = ncclCommSplit;
    api->CommFinalize = ncclCommFinalize;
    api->CommDestroy = ncclCommDestroy;
    api->CommAbort = ncclCommAbort;
    api->CommGetAsyncError = ncclCommGetAsyncError;
    api->CommCount = ncclCommCount;
    api->CommUserRank = ncclCommUserRank;
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
    NCCL_LOAD(CommInitRankConfig, "ncclCommInitRankConfig");
    NCCL_LOAD(CommSplit, "ncclCommSplit");
    NCCL_LOAD(CommFinalize, "ncclCommFinalize");
    NCCL_LOAD(CommDestroy, "ncclCommDestroy");
    NCCL_LOAD(CommAbort, "ncclCommAbort");
    NCCL_LOAD(CommGetAsyncError, "ncclCommGetAsyncError");
    NCCL_LOAD(CommCount, "ncclCommCount");
    NCCL_LOAD(CommUserRank, "ncclCommUserRank");
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
    void* host_dst;     // a sum of host values: where the wait copies the result (NULL: none)
    size_t host_bytes;
};

// Host sums go through these; sized at creation for what the trainer sums (one growth would
// synchronise the device, which the watchdog cannot bound).
enum { NCCL_HOST_SCRATCH_BYTES = 1 << 16 };

typedef struct {
    NcclApi api;
    Mesh mesh;
    ncclComm_t groups[MESH_NGROUPS];   // MESH_WORLD: the communicator the others split from
    cudaStream_t compute;              // the backend's stream
    cudaStream_t streams[MESH_NGROUPS];   // NCCL's, one per group
    cudaEvent_t ready;                 // compute stream position an operation starts after
    void* scratch;                     // device staging of host all-reduces
    void* host_scratch;                // pinned: their copies in and out
    size_t scratch_bytes;
    int32_t barrier_value;             // a barrier sums this
    double timeout_s;                  // bound on ncclInProgress
    CommRequest pool[COMM_MAX_INFLIGHT];
    // Completion of each group's operations, by marks: mark k of group g is the event
    // progress[g][k % COMM_WATCH_OPS], after which the first mark_end[g][k % COMM_WATCH_OPS]
    // operations of g are complete. An operation started eagerly is a mark of its own; the
    // operations of g that one graph launch issued share one. The first done[g] operations are
    // known complete (CommOps.completed).
    cudaEvent_t progress[MESH_NGROUPS][COMM_WATCH_OPS];
    unsigned long long mark_end[MESH_NGROUPS][COMM_WATCH_OPS];
    unsigned long long marks[MESH_NGROUPS], marks_done[MESH_NGROUPS];
    unsigned long long started[MESH_NGROUPS], done[MESH_NGROUPS];
} NcclComm;

// The transport of this process, for the fail hook (a module-owned pointer: one per process).
static NcclComm* active;

static void __attribute__((noreturn)) nccl_failed(NcclComm* n, ncclResult_t r, ncclComm_t c,
                                                  MeshGroup g, const char* what, const char* file,
                                                  int line) {
    const char* last = n->api.GetLastError ? n->api.GetLastError(c) : "";
    const char* hint = r == ncclInvalidUsage
        ? "NCCL refused this use, its message says why: e.g. two ranks on one GPU (check "
          "--local-rank and CUDA_VISIBLE_DEVICES)"
        : "another rank failed, or the ranks disagree on sizes or order of calls";
    fail_at(file, line, hint, "NCCL %s on the %s group failed: %s%s%s", what, mesh_group_name(g),
            n->api.GetErrorString(r), last && last[0] ? ": " : "", last ? last : "");
}

// A call that returned r, with no communicator to wait for (no comm yet, or inside a group).
static void nccl_check(NcclComm* n, ncclResult_t r, MeshGroup g, const char* what,
                       const char* file, int line) {
    if (r != ncclSuccess && r != ncclInProgress) nccl_failed(n, r, NULL, g, what, file, line);
}

// Non-blocking communicators: a call may return before its work is done, whether it says
// ncclSuccess or ncclInProgress. ncclCommSplit returns ncclSuccess while the parent is still
// splitting, and writes the new communicator only when that completes; a collective or a group
// returns while a thread of NCCL's enqueues it. Until ncclCommGetAsyncError on a communicator
// stops saying ncclInProgress, NCCL refuses any other use of it ("Attempt to use communicator
// before the previous operation returned ncclSuccess"). So after each call returned r, every
// communicator it touched is polled here to its final state, under the comm timeout; g names the
// group in messages.
typedef struct {
    const NcclApi* api;
    ncclComm_t comm;
    ncclResult_t state;
} Settling;

static int settled(void* arg) {
    Settling* s = (Settling*)arg;
    const ncclResult_t r = s->api->CommGetAsyncError(s->comm, &s->state);
    if (r != ncclSuccess) s->state = r;
    return s->state != ncclInProgress;
}

static void settle(NcclComm* n, ncclResult_t r, ncclComm_t c, MeshGroup g, const char* what,
                   const char* file, int line) {
    nccl_check(n, r, g, what, file, line);
    Settling st = {&n->api, c, ncclInProgress};
    if (comm_poll(settled, NULL, &st, n->timeout_s) != 0)
        fail_at(file, line, "another rank is stalled or dead, or raise --comm-timeout",
                "NCCL %s on the %s group did not complete within %g s (--comm-timeout)", what,
                mesh_group_name(g), n->timeout_s);
    if (st.state != ncclSuccess) nccl_failed(n, st.state, c, g, what, file, line);
}

// A call on group g's communicator, which is then settled. The call runs first: it may write the
// communicator (init).
#define NCCL_CALL(n, call, g, what)                                            \
    do {                                                                       \
        const ncclResult_t r_ = (call);                                        \
        settle((n), r_, (n)->groups[g], (g), (what), __FILE__, __LINE__);      \
    } while (0)
// A call that leaves nothing to settle: inside a group (ncclGroupEnd settles), or before any
// communicator exists.
#define NCCL_CHECK(n, call, g, what) nccl_check((n), (call), (g), (what), __FILE__, __LINE__)

// A failure anywhere aborts the communicators (so no GPU kernel waits for a dead peer), then
// ends the job through MPI when it runs, else exits.
static void abort_job(int exit_code) {
    NcclComm* n = active;
    active = NULL;
    if (n) {
        // The world first: aborting it stops a split in flight, after which NCCL has written (or
        // will never write) the split's communicator. ncclCommAbort is allowed on a communicator
        // in any state and returns once it is gone.
        int aborted = 0;
        for (int g = 0; g < MESH_NGROUPS; g++)
            if (n->groups[g]) aborted += n->api.CommAbort(n->groups[g]) == ncclSuccess;
        fprintf(stderr, "rank %d: aborted %d NCCL communicators (ncclCommAbort)\n",
                n->mesh.world_rank, aborted);
        fflush(stderr);
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

// A free request, done when `stream` reaches this point.
static CommRequest* take_request(NcclComm* n, cudaStream_t stream) {
    CommRequest* req = NULL;
    for (int i = 0; i < COMM_MAX_INFLIGHT && !req; i++) {
        if (!n->pool[i].in_use) req = &n->pool[i];
    }
    CHECK(req, "wait for an operation before starting another",
          "more than %d NCCL operations in flight", COMM_MAX_INFLIGHT);
    CUDA_CHECK(cudaEventRecord(req->done, stream));
    req->in_use = 1;
    req->host_dst = NULL;
    return req;
}

// ops more operations of group g started, complete when `stream` reaches this point: a mark.
static void mark(NcclComm* n, MeshGroup g, int ops, cudaStream_t stream) {
    n->started[g] += (unsigned long long)ops;
    const unsigned long long k = n->marks[g]++ % COMM_WATCH_OPS;
    n->mark_end[g][k] = n->started[g];
    CUDA_CHECK(cudaEventRecord(n->progress[g][k], stream));
}

// The request of the operation just enqueued on group g's stream, which counts as started there;
// in a capture of the compute stream it starts at each launch of the graph instead (nccl_replayed).
static CommRequest* end(NcclComm* n, MeshGroup g) {
    CommRequest* req = take_request(n, n->streams[g]);
    cudaStreamCaptureStatus capture = cudaStreamCaptureStatusNone;
    CUDA_CHECK(cudaStreamIsCapturing(n->compute, &capture));
    if (capture == cudaStreamCaptureStatusNone) mark(n, g, 1, n->streams[g]);
    return req;
}

// The ops operations of group g that a graph launch just issued: the graph's streams are its own,
// so they are known complete when the compute stream has done the launch. One mark for them all:
// one event record per group and launch, whatever the graph holds.
static void nccl_replayed(void* ctx, MeshGroup g, int ops) {
    mark((NcclComm*)ctx, g, ops, ((NcclComm*)ctx)->compute);
}

// Operations of group g known complete: the marks' events in order (a mark whose slot was
// recorded again by a later one is complete when that one is).
static unsigned long long nccl_completed(void* ctx, MeshGroup g) {
    NcclComm* n = (NcclComm*)ctx;
    unsigned long long* done = &n->marks_done[g];
    const unsigned long long marks = n->marks[g];
    while (*done < marks) {
        const unsigned long long k = marks - *done > COMM_WATCH_OPS ? marks - COMM_WATCH_OPS : *done;
        const cudaError_t e = cudaEventQuery(n->progress[g][k % COMM_WATCH_OPS]);
        if (e == cudaErrorNotReady) break;
        CUDA_CHECK(e);
        n->done[g] = n->mark_end[g][k % COMM_WATCH_OPS];
        *done = k + 1;
    }
    return n->done[g];
}

static CommRequest* nccl_all_gather(void* ctx, MeshGroup g, const void* send, void* recv,
                                    size_t count, CommType t) {
    NcclComm* n = begin(ctx, g);
    NCCL_CALL(n, n->api.AllGather(send, recv, count, nccl_type(t), n->groups[g], n->streams[g]), g,
               "all-gather");
    return end(n, g);
}

static CommRequest* nccl_reduce_scatter_sum(void* ctx, MeshGroup g, const void* send, void* recv,
                                            size_t count, CommType t) {
    NcclComm* n = begin(ctx, g);
    NCCL_CALL(n, n->api.ReduceScatter(send, recv, count, nccl_type(t), ncclSum, n->groups[g],
                                       n->streams[g]),
               g, "reduce-scatter");
    return end(n, g);
}

static CommRequest* nccl_all_reduce_sum(void* ctx, MeshGroup g, void* buf, size_t count,
                                        CommType t) {
    NcclComm* n = begin(ctx, g);
    NCCL_CALL(n, n->api.AllReduce(buf, buf, count, nccl_type(t), ncclSum, n->groups[g], n->streams[g]),
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
    NCCL_CALL(n, n->api.GroupEnd(), g, "all-to-all");
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
    NCCL_CALL(n, n->api.GroupEnd(), g, "send/recv batch");
    return end(n, g);
}

static CommRequest* nccl_broadcast(void* ctx, MeshGroup g, void* buf, size_t count, CommType t,
                                   int root) {
    NcclComm* n = begin(ctx, g);
    NCCL_CALL(n, n->api.Broadcast(buf, buf, count, nccl_type(t), root, n->groups[g], n->streams[g]),
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
    if (req->host_dst) {
        CHECK(host, "caller bug", "a sum of host values waited for on the stream only");
        memcpy(req->host_dst, n->host_scratch, req->host_bytes);
    }
    req->in_use = 0;
}

// A failure NCCL found in the background (a peer gone, a network error) ends the job.
static void check_async_errors(NcclComm* n) {
    for (int g = 0; g < MESH_NGROUPS; g++) {
        ncclResult_t state = ncclSuccess;
        NCCL_CHECK(n, n->api.CommGetAsyncError(n->groups[g], &state), (MeshGroup)g, "async error query");
        if (state != ncclSuccess && state != ncclInProgress)
            nccl_failed(n, state, n->groups[g], (MeshGroup)g, "operation in flight", __FILE__, __LINE__);
    }
}

static int nccl_test(void* ctx, CommRequest* req) {
    NcclComm* n = (NcclComm*)ctx;
    CHECK(req && req->in_use, "caller bug", "testing an NCCL operation that is not in flight");
    const cudaError_t e = cudaEventQuery(req->done);
    if (e == cudaSuccess) return 1;
    if (e != cudaErrorNotReady) CUDA_CHECK(e);
    check_async_errors(n);
    return 0;
}

// Host values through pinned and device scratch, on the transport's stream; the wait copies the
// sum back (a copy to pageable memory would block the host outside the watchdog).
static CommRequest* nccl_all_reduce_host_sum(void* ctx, MeshGroup g, void* buf, size_t count,
                                             CommType t) {
    NcclComm* n = (NcclComm*)ctx;
    const size_t bytes = count * comm_type_size(t);
    if (bytes > n->scratch_bytes) {   // beyond what the trainer sums: synchronises the device
        CUDA_CHECK(cudaDeviceSynchronize());
        CUDA_CHECK(cudaFree(n->scratch));
        CUDA_CHECK(cudaFreeHost(n->host_scratch));
        CUDA_CHECK(cudaMalloc(&n->scratch, bytes));
        CUDA_CHECK(cudaMallocHost(&n->host_scratch, bytes));
        n->scratch_bytes = bytes;
    }
    memcpy(n->host_scratch, buf, bytes);   // the previous sum was waited for: the buffer is free
    CUDA_CHECK(cudaMemcpyAsync(n->scratch, n->host_scratch, bytes, cudaMemcpyHostToDevice, n->streams[g]));
    NCCL_CALL(n, n->api.AllReduce(n->scratch, n->scratch, count, nccl_type(t), ncclSum,
                                   n->groups[g], n->streams[g]), g, "all-reduce of host values");
    CUDA_CHECK(cudaMemcpyAsync(n->host_scratch, n->scratch, bytes, cudaMemcpyDeviceToHost, n->streams[g]));
    CommRequest* req = end(n, g);
    req->host_dst = buf;
    req->host_bytes = bytes;
    return req;
}

static CommRequest* nccl_barrier(void* ctx, MeshGroup g) {
    NcclComm* n = (NcclComm*)ctx;
    n->barrier_value = 1;
    return nccl_all_reduce_host_sum(ctx, g, &n->barrier_value, 1, COMM_I32);
}

// The compute stream's position now, as a request.
static CommRequest* nccl_fence(void* ctx) {
    NcclComm* n = (NcclComm*)ctx;
    return take_request(n, n->compute);
}

static void nccl_destroy(void* ctx) {
    NcclComm* n = (NcclComm*)ctx;
    for (int g = 0; g < MESH_NGROUPS; g++) CUDA_CHECK(cudaStreamSynchronize(n->streams[g]));
    for (int i = 0; i < COMM_MAX_INFLIGHT; i++) {
        CHECK(!n->pool[i].in_use, "caller bug", "comm destroyed with an NCCL operation in flight");
        CUDA_CHECK(cudaEventDestroy(n->pool[i].done));
    }
    // Finalize (non-blocking: it flushes the communicator's work, settled under the timeout, so a
    // dead peer cannot hang the exit), then destroy (blocking, local). Children before the world.
    for (int g = MESH_NGROUPS - 1; g >= 0; g--) {
        NCCL_CALL(n, n->api.CommFinalize(n->groups[g]), (MeshGroup)g, "finalize");
        NCCL_CHECK(n, n->api.CommDestroy(n->groups[g]), (MeshGroup)g, "destroy");
        n->groups[g] = NULL;   // gone: a failure from here on must not abort it
    }
    active = NULL;
    CUDA_CHECK(cudaFree(n->scratch));
    CUDA_CHECK(cudaFreeHost(n->host_scratch));
    for (int g = 0; g < MESH_NGROUPS; g++)
        for (int i = 0; i < COMM_WATCH_OPS; i++) CUDA_CHECK(cudaEventDestroy(n->progress[g][i]));
    CUDA_CHECK(cudaEventDestroy(n->ready));
    for (int g = 0; g < MESH_NGROUPS; g++) CUDA_CHECK(cudaStreamDestroy(n->streams[g]));
    free(n);
}

static void* nccl_stream(void* ctx, MeshGroup g) { return ((NcclComm*)ctx)->streams[g]; }

static void nccl_complete_here(void* ctx, MeshGroup g, CommRequest* req) {
    CUDA_CHECK(cudaEventRecord(req->done, ((NcclComm*)ctx)->streams[g]));
}

static const CommOps nccl_ops = {
    nccl_all_gather, nccl_reduce_scatter_sum, nccl_all_reduce_sum,      nccl_all_to_all,
    nccl_send_recv,  nccl_broadcast,          nccl_wait,                nccl_test,
    nccl_all_reduce_host_sum,                 nccl_barrier,             nccl_destroy,
    nccl_stream,     nccl_fence,              nccl_completed,          nccl_replayed,
    nccl_complete_here,
};

// Each communicator must be the mesh's group: its size and this rank's place in it (ranks that
// disagree on the mesh split into other groups, which NCCL accepts).
static void check_group_shape(NcclComm* n, MeshGroup g) {
    int count = -1, rank = -1;
    NCCL_CHECK(n, n->api.CommCount(n->groups[g], &count), g, "communicator size query");
    NCCL_CHECK(n, n->api.CommUserRank(n->groups[g], &rank), g, "communicator rank query");
    const int want_count = mesh_group_size(&n->mesh, g), want_rank = mesh_group_rank(&n->mesh, g);
    CHECK(count == want_count && rank == want_rank,
          "the ranks disagree on the mesh (--dp, --pq, --pkv) or on the world size",
          "NCCL communicator of the %s group has %d ranks and puts this rank at %d; the mesh "
          "expects %d ranks with this rank at %d", mesh_group_name(g), count, rank, want_count,
          want_rank);
}

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
    for (int g = 0; g < MESH_NGROUPS; g++)
        for (int i = 0; i < COMM_WATCH_OPS; i++)
            CUDA_CHECK(cudaEventCreateWithFlags(&n->progress[g][i], cudaEventDisableTiming));
    n->scratch_bytes = NCCL_HOST_SCRATCH_BYTES;
    CUDA_CHECK(cudaMalloc(&n->scratch, n->scratch_bytes));
    CUDA_CHECK(cudaMallocHost(&n->host_scratch, n->scratch_bytes));
    n->timeout_s = o->comm_timeout_s;
    ncclUniqueId id;
    memset(&id, 0, sizeof id);
    share_unique_id(n, mesh, o, &id);
    active = n;   // from here on a failure aborts the communicators made so far
    fail_set_hook(abort_job);
    ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
    config.blocking = 0;
    NCCL_CALL(n, n->api.CommInitRankConfig(&n->groups[MESH_WORLD], mesh->world_size, id,
                                           mesh->world_rank, &config), MESH_WORLD, "communicator init");
    check_group_shape(n, MESH_WORLD);
    for (int g = 0; g < MESH_NGROUPS; g++) {
        if (g == MESH_WORLD) continue;
        const ncclResult_t r = n->api.CommSplit(n->groups[MESH_WORLD],
                                                mesh_group_color(mesh, (MeshGroup)g),
                                                mesh_group_rank(mesh, (MeshGroup)g), &n->groups[g], &config);
        // The split runs on the parent: the new communicator exists once the world's settles.
        settle(n, r, n->groups[MESH_WORLD], (MeshGroup)g, "communicator split", __FILE__, __LINE__);
        CHECK(n->groups[g], "a bug in the NCCL library, or a mismatched libnccl.so.2",
              "NCCL communicator split on the %s group completed without a communicator",
              mesh_group_name((MeshGroup)g));
        NCCL_CALL(n, ncclSuccess, (MeshGroup)g, "communicator split");
        check_group_shape(n, (MeshGroup)g);
    }
    return comm_create(&nccl_ops, n, "nccl", 1, mesh, num_layers);
}
