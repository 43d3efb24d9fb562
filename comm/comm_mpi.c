// MPI transport: one MPI communicator per mesh group, host buffers. Every collective and
// point-to-point batch is non-blocking (MPI-3 MPI_I* calls) and returns a request from a fixed pool
// of slots (nothing is allocated after create); comm_wait completes it. Open MPI progresses such
// operations inside MPI calls, so on the CPU most of the transfer happens in the wait: the
// timeline shows how much (comm/timeline.h).
#include "comm/comm_mpi.h"

#include <limits.h>
#include <mpi.h>
#include <stdio.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "comm/bf16.h"
#include "comm/fail.h"

static void mpi_check(int rc, const char* what, const char* file, int line) {
    if (rc == MPI_SUCCESS) return;
    char msg[MPI_MAX_ERROR_STRING];
    int len = 0;
    if (MPI_Error_string(rc, msg, &len) != MPI_SUCCESS) snprintf(msg, sizeof msg, "code %d", rc);
    fail_at(file, line, "another rank failed, or the ranks disagree on sizes or order of calls",
            "MPI %s failed: %s", what, msg);
}
// Every MPI call goes through this: errors return (MPI_ERRORS_RETURN) and end the job here.
#define MPI_CHECK(call, what) mpi_check((call), (what), __FILE__, __LINE__)

struct CommRequest {
    int in_use;
    int n;
    MPI_Request reqs[COMM_MAX_TRANSFERS];
};

typedef struct {
    MPI_Comm groups[MESH_NGROUPS];
    struct CommRequest pool[COMM_MAX_INFLIGHT];
} MpiComm;

void comm_mpi_abort_job(int exit_code) {
    int initialized = 0, finalized = 0, size = 1;
    MPI_Initialized(&initialized);
    MPI_Finalized(&finalized);
    // A world of one has nobody to take down: exit without MPI_Abort's banner.
    if (initialized && !finalized) MPI_Comm_size(MPI_COMM_WORLD, &size);
    if (initialized && !finalized && size > 1) MPI_Abort(MPI_COMM_WORLD, exit_code);
    exit(exit_code);
}

void comm_mpi_init(int* argc, char*** argv, int* world_rank, int* world_size) {
    int initialized = 0, provided = 0;
    MPI_Initialized(&initialized);
    // The program calls MPI from its main thread only; OpenMP regions never do.
    if (!initialized && MPI_Init_thread(argc, argv, MPI_THREAD_FUNNELED, &provided) != MPI_SUCCESS) {
        fail_msg("MPI_Init_thread failed (is the program started by a matching mpirun?)");
    }
    fail_set_hook(comm_mpi_abort_job);
    if (!initialized && provided < MPI_THREAD_FUNNELED) {
        fail_msg("MPI provides thread level %d, the program needs MPI_THREAD_FUNNELED", provided);
    }
    MPI_CHECK(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN), "set error handler");
    MPI_CHECK(MPI_Comm_rank(MPI_COMM_WORLD, world_rank), "rank of the world");
    MPI_CHECK(MPI_Comm_size(MPI_COMM_WORLD, world_size), "size of the world");
    char prefix[32];
    snprintf(prefix, sizeof prefix, "rank %d", *world_rank);
    fail_set_prefix(prefix);
}

void comm_mpi_finalize(void) {
    MPI_CHECK(MPI_Finalize(), "finalize");
    fail_set_hook(NULL);
}

// bfloat16 has no MPI type: 2-byte elements, summed by bf16_sum. Created on first use, freed by
// MPI_Finalize.
static MPI_Datatype bf16_type = MPI_DATATYPE_NULL;
static MPI_Op bf16_sum_op = MPI_OP_NULL;

// inout[i] = in[i] + inout[i], in fp32 and rounded once, as NCCL sums bf16.
static void bf16_sum(void* in, void* inout, int* len, MPI_Datatype* type) {
    (void)type;
    const uint16_t* a = in;
    uint16_t* b = inout;
    for (int i = 0; i < *len; i++) b[i] = bf16_from_float(bf16_to_float(a[i]) + bf16_to_float(b[i]));
}

static MPI_Datatype mpi_type(CommType t) {
    switch (t) {
    case COMM_F32: return MPI_FLOAT;
    case COMM_F64: return MPI_DOUBLE;
    case COMM_I32: return MPI_INT32_T;
    case COMM_U8: return MPI_UINT8_T;
    case COMM_BF16:
        if (bf16_type == MPI_DATATYPE_NULL) {
            MPI_CHECK(MPI_Type_contiguous(2, MPI_BYTE, &bf16_type), "create the bf16 type");
            MPI_CHECK(MPI_Type_commit(&bf16_type), "commit the bf16 type");
            MPI_CHECK(MPI_Op_create(bf16_sum, 1, &bf16_sum_op), "create the bf16 sum");
        }
        return bf16_type;
    default: FAIL("caller bug", "unknown comm element type %d", (int)t);
    }
}

static MPI_Op mpi_sum(CommType t) {
    (void)mpi_type(t);   // creates the bf16 op on first use
    return t == COMM_BF16 ? bf16_sum_op : MPI_SUM;
}

// MPI counts are int.
static int mpi_count(size_t count) {
    CHECK(count <= INT_MAX, "split the transfer, or reduce the batch or sequence length",
          "transfer of %zu elements exceeds MPI's int count", count);
    return (int)count;
}

static MPI_Comm group_comm(void* ctx, MeshGroup g) {
    CHECK(g >= 0 && g < MESH_NGROUPS, "caller bug", "unknown mesh group %d", (int)g);
    return ((MpiComm*)ctx)->groups[g];
}

// A free request slot; a full pool is a caller bug (too many operations in flight).
static CommRequest* take_request(MpiComm* m) {
    for (int i = 0; i < COMM_MAX_INFLIGHT; i++) {
        if (!m->pool[i].in_use) {
            m->pool[i].in_use = 1;
            m->pool[i].n = 0;
            return &m->pool[i];
        }
    }
    FAIL("wait for an operation before starting another", "more than %d MPI operations in flight",
         COMM_MAX_INFLIGHT);
}

static MPI_Request* next_slot(CommRequest* req) { return &req->reqs[req->n++]; }

static CommRequest* mpi_all_gather(void* ctx, MeshGroup g, const void* send, void* recv, size_t count,
                                   CommType t) {
    CommRequest* req = take_request(ctx);
    MPI_CHECK(MPI_Iallgather(send, mpi_count(count), mpi_type(t), recv, mpi_count(count),
                             mpi_type(t), group_comm(ctx, g), next_slot(req)),
              "all-gather");
    return req;
}

static CommRequest* mpi_reduce_scatter_sum(void* ctx, MeshGroup g, const void* send, void* recv,
                                           size_t count, CommType t) {
    CommRequest* req = take_request(ctx);
    MPI_CHECK(MPI_Ireduce_scatter_block(send, recv, mpi_count(count), mpi_type(t), mpi_sum(t),
                                        group_comm(ctx, g), next_slot(req)),
              "reduce-scatter");
    return req;
}

static CommRequest* mpi_all_reduce_sum(void* ctx, MeshGroup g, void* buf, size_t count,
                                       CommType t) {
    CommRequest* req = take_request(ctx);
    MPI_CHECK(MPI_Iallreduce(MPI_IN_PLACE, buf, mpi_count(count), mpi_type(t), mpi_sum(t),
                             group_comm(ctx, g), next_slot(req)),
              "all-reduce");
    return req;
}

static CommRequest* mpi_all_to_all(void* ctx, MeshGroup g, const void* send, void* recv, size_t count,
                                   CommType t) {
    CommRequest* req = take_request(ctx);
    MPI_CHECK(MPI_Ialltoall(send, mpi_count(count), mpi_type(t), recv, mpi_count(count),
                            mpi_type(t), group_comm(ctx, g), next_slot(req)),
              "all-to-all");
    return req;
}

static CommRequest* mpi_send_recv(void* ctx, MeshGroup g, CommType t, const CommTransfer* sends,
                                  int nsend, const CommTransfer* recvs, int nrecv) {
    CommRequest* req = take_request(ctx);
    MPI_Comm comm = group_comm(ctx, g);
    // Receives first, so a matching send finds its buffer posted.
    for (int i = 0; i < nrecv; i++) {
        MPI_CHECK(MPI_Irecv(recvs[i].buf, mpi_count(recvs[i].count), mpi_type(t), recvs[i].peer, 0,
                            comm, next_slot(req)),
                  "post receive");
    }
    for (int i = 0; i < nsend; i++) {
        MPI_CHECK(MPI_Isend(sends[i].buf, mpi_count(sends[i].count), mpi_type(t), sends[i].peer, 0,
                            comm, next_slot(req)),
                  "post send");
    }
    return req;
}

// Host memory: the sum of device buffers is the same operation.
static CommRequest* mpi_all_reduce_host_sum(void* ctx, MeshGroup g, void* buf, size_t count,
                                            CommType t) {
    return mpi_all_reduce_sum(ctx, g, buf, count, t);
}

static int mpi_test(void* ctx, CommRequest* req) {
    (void)ctx;
    CHECK(req && req->in_use, "caller bug", "testing an MPI operation that is not in flight");
    int done = 0;
    MPI_CHECK(MPI_Testall(req->n, req->reqs, &done, MPI_STATUSES_IGNORE), "test an operation");
    return done;
}

static void mpi_wait(void* ctx, CommRequest* req, int host) {
    (void)host;   // host memory: complete is complete
    CHECK(req && req->in_use, "caller bug", "waiting on an MPI operation that is not in flight");
    MPI_CHECK(MPI_Waitall(req->n, req->reqs, MPI_STATUSES_IGNORE), "wait for an operation");
    req->in_use = 0;
}

static CommRequest* mpi_broadcast(void* ctx, MeshGroup g, void* buf, size_t count, CommType t,
                                  int root) {
    CommRequest* req = take_request(ctx);
    MPI_CHECK(MPI_Ibcast(buf, mpi_count(count), mpi_type(t), root, group_comm(ctx, g),
                         next_slot(req)),
              "broadcast");
    return req;
}

static CommRequest* mpi_barrier(void* ctx, MeshGroup g) {
    CommRequest* req = take_request(ctx);
    MPI_CHECK(MPI_Ibarrier(group_comm(ctx, g), next_slot(req)), "barrier");
    return req;
}

static void mpi_destroy(void* ctx) {
    MpiComm* m = ctx;
    for (int i = 0; i < COMM_MAX_INFLIGHT; i++) {
        CHECK(!m->pool[i].in_use, "caller bug", "comm destroyed with a send/recv batch in flight");
    }
    for (int g = 0; g < MESH_NGROUPS; g++) MPI_CHECK(MPI_Comm_free(&m->groups[g]), "free group");
    free(m);
}

const CommOps comm_mpi_ops = {
    .all_gather = mpi_all_gather,
    .reduce_scatter_sum = mpi_reduce_scatter_sum,
    .all_reduce_sum = mpi_all_reduce_sum,
    .all_to_all = mpi_all_to_all,
    .send_recv = mpi_send_recv,
    .broadcast = mpi_broadcast,
    .wait = mpi_wait,
    .test = mpi_test,
    .all_reduce_host_sum = mpi_all_reduce_host_sum,
    .barrier = mpi_barrier,
    .destroy = mpi_destroy,
};

void* comm_mpi_context(const Mesh* mesh) {
    int world_size = 0;
    MPI_CHECK(MPI_Comm_size(MPI_COMM_WORLD, &world_size), "size of the world");
    CHECK(world_size == mesh->world_size, "call mesh_init with the MPI world size",
          "mesh of %d ranks in an MPI world of %d", mesh->world_size, world_size);
    MpiComm* m = xcalloc(1, sizeof *m, "MPI comm");
    for (int g = 0; g < MESH_NGROUPS; g++) {
        MPI_CHECK(MPI_Comm_split(MPI_COMM_WORLD, mesh_group_color(mesh, g),
                                 mesh_group_rank(mesh, g), &m->groups[g]),
                  "split the mesh groups");
        MPI_CHECK(MPI_Comm_set_errhandler(m->groups[g], MPI_ERRORS_RETURN), "set error handler");
        int rank = -1, size = -1;
        MPI_CHECK(MPI_Comm_rank(m->groups[g], &rank), "rank in a group");
        MPI_CHECK(MPI_Comm_size(m->groups[g], &size), "size of a group");
        CHECK(rank == mesh_group_rank(mesh, g) && size == mesh_group_size(mesh, g), "mesh bug",
              "%s group: MPI rank %d of %d, mesh says %d of %d", mesh_group_name(g), rank, size,
              mesh_group_rank(mesh, g), mesh_group_size(mesh, g));
    }
    return m;
}

Comm* comm_mpi_create(const Mesh* mesh, int num_layers) {
    return comm_create(&comm_mpi_ops, comm_mpi_context(mesh), "mpi", 0, mesh, num_layers);
}

int comm_mpi_active(void) {
    int initialized = 0, finalized = 0;
    MPI_Initialized(&initialized);
    MPI_Finalized(&finalized);
    return initialized && !finalized;
}

void comm_mpi_broadcast_bytes(void* buf, size_t bytes, int root) {
    MPI_CHECK(MPI_Bcast(buf, mpi_count(bytes), MPI_BYTE, root, MPI_COMM_WORLD), "broadcast");
}

void comm_mpi_node_rank(int* local_rank, int* local_size) {
    MPI_Comm node;
    MPI_CHECK(MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &node),
              "split the world by node");
    MPI_CHECK(MPI_Comm_rank(node, local_rank), "rank on the node");
    MPI_CHECK(MPI_Comm_size(node, local_size), "ranks on the node");
    MPI_CHECK(MPI_Comm_free(&node), "free the node group");
}
