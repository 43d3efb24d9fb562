// NCCL over MPI for the host runtime: what each call does is in host_nccl.h. Every NCCL
// communicator is an MPI communicator of its own (split from MPI_COMM_WORLD), so the shim's
// messages never meet the program's own MPI traffic. MPI failures come back as ncclSystemError
// (MPI_ERRORS_RETURN on every communicator made here); nothing here aborts the job.
// MPI's C API only: its C++ bindings warn under -Wextra and would need libmpi_cxx.
#define OMPI_SKIP_MPICXX 1
#define MPICH_SKIP_MPICXX 1
#include <mpi.h>

#include <fcntl.h>
#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "tests/cuda_host/internal.h"
#include "tests/cuda_host/host_nccl.h"
#include "comm/fail.h"

// --- Errors ------------------------------------------------------------------------------------

// One message for the process, as NCCL keeps it (ncclGetLastError ignores its comm argument).
static char last_error[1024];

static ncclResult_t nccl_fail(ncclResult_t result, const char* fmt, ...) __attribute__((format(printf, 2, 3)));
static ncclResult_t nccl_fail(ncclResult_t result, const char* fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(last_error, sizeof last_error, fmt, ap);
    va_end(ap);
    const char* debug = getenv("NCCL_DEBUG");  // NCCL prints its warnings only when asked
    if (debug && *debug) fprintf(stderr, "NCCL WARN %s\n", last_error);
    return result;
}

static ncclResult_t mpi_fail(const char* fn, const char* call, int err) {
    char text[MPI_MAX_ERROR_STRING];
    int len = 0;
    if (MPI_Error_string(err, text, &len) != MPI_SUCCESS) snprintf(text, sizeof text, "MPI error %d", err);
    return nccl_fail(ncclSystemError, "%s: %s failed: %s", fn, call, text);
}

#define MPI_TRY(fn, name, call)                                 \
    do {                                                        \
        int mpi_err_ = (call);                                  \
        if (mpi_err_ != MPI_SUCCESS) return mpi_fail(fn, name, mpi_err_); \
    } while (0)

const char* ncclGetErrorString(ncclResult_t result) {
    switch (result) {
        case ncclSuccess: return "no error";
        case ncclUnhandledCudaError: return "unhandled cuda error (run with NCCL_DEBUG=INFO for details)";
        case ncclSystemError: return "unhandled system error (run with NCCL_DEBUG=INFO for details)";
        case ncclInternalError: return "internal error - please report this issue to the NCCL developers";
        case ncclInvalidArgument: return "invalid argument (run with NCCL_DEBUG=WARN for details)";
        case ncclInvalidUsage: return "invalid usage (run with NCCL_DEBUG=WARN for details)";
        case ncclRemoteError: return "remote process exited or there was a network error";
        case ncclInProgress: return "NCCL operation in progress";
        default: return "unknown result code";
    }
}

const char* ncclGetLastError(ncclComm_t comm) { return last_error; }

ncclResult_t ncclGetVersion(int* version) {
    if (!version) return nccl_fail(ncclInvalidArgument, "ncclGetVersion: version is NULL");
    *version = NCCL_VERSION_CODE;
    return ncclSuccess;
}

// --- MPI, 16-bit floating-point types and their reductions --------------------------------------

static void finalize_mpi(void) {
    int finalized = 0;
    MPI_Finalized(&finalized);
    if (!finalized) MPI_Finalize();
}

// MPI has no bf16: a 2-byte type of our own with a user sum (commutative, so MPI may combine in
// any order; each step is rounded like a GPU adding two bf16 values). The project reduces with
// ncclSum only, so that is the one reduction the shim has.
static MPI_Datatype bf16_type = MPI_DATATYPE_NULL;
static MPI_Op bf16_sum_op = MPI_OP_NULL;

static void bf16_sum(void* in, void* inout, int* len, MPI_Datatype*) {
    const unsigned short* a = (const unsigned short*)in;
    unsigned short* b = (unsigned short*)inout;
    for (int i = 0; i < *len; i++)
        b[i] = cuda_host_float_to_bf16_bits(cuda_host_bf16_bits_to_float(a[i]) + cuda_host_bf16_bits_to_float(b[i]));
}

// Initialises MPI unless the program has (then it is finalized at exit), and makes the bf16
// type and sum once.
static ncclResult_t ensure_mpi(const char* fn) {
    int initialized = 0, finalized = 0;
    MPI_Initialized(&initialized);
    MPI_Finalized(&finalized);
    if (finalized) return nccl_fail(ncclInvalidUsage, "%s: MPI has been finalized", fn);
    if (!initialized) {
        int provided = 0;
        MPI_TRY(fn, "MPI_Init_thread", MPI_Init_thread(NULL, NULL, MPI_THREAD_FUNNELED, &provided));
        atexit(finalize_mpi);
    }
    if (bf16_type != MPI_DATATYPE_NULL) return ncclSuccess;
    MPI_TRY(fn, "MPI_Type_contiguous", MPI_Type_contiguous(2, MPI_BYTE, &bf16_type));
    MPI_TRY(fn, "MPI_Type_commit", MPI_Type_commit(&bf16_type));
    MPI_TRY(fn, "MPI_Op_create", MPI_Op_create(bf16_sum, 1, &bf16_sum_op));
    return ncclSuccess;
}

// --- Communicators ------------------------------------------------------------------------------

enum { COMM_MAGIC = 0x4e43434c, COMM_DEAD = 0x44454144 };

struct ncclComm {
    unsigned magic;  // COMM_MAGIC while usable; COMM_DEAD after destroy or abort
    MPI_Comm mpi;    // MPI_COMM_NULL after ncclCommFinalize
    MPI_Comm ctl;    // a duplicate of mpi for the shim's own agreement checks (split)
    int rank, nranks;
    int id;          // for reports
    int device;      // the CUDA device of the process when the comm was made (the parent's, on a split)
    // The operations on this comm, numbered when issued. An operation posts its MPI calls only
    // once every operation issued before it on this comm has posted all of its own, so that every
    // rank posts the same collectives in the same order on the MPI communicator, whatever order
    // the streams run in. finished: completed (or dropped by an abort).
    unsigned long long issued, posted, finished;
    unsigned long long collectives;  // collectives issued (every rank issues the same ones; sends
                                     // and receives pair by peer and may differ in number)
    // Non-blocking communicators (config.blocking = 0), as NCCL 2.28 runs them: every call that
    // does work (init, a split of this comm, a collective, a group end, finalize) leaves the comm
    // in progress, and NCCL refuses any other use of it (ncclInvalidArgument, "Attempt to use
    // communicator before the previous operation returned ncclSuccess") until
    // ncclCommGetAsyncError on it has stopped saying ncclInProgress: here after `polls` more
    // polls, 1 to 3 in turn, so that a caller that polls once, or not at all, fails. Then the
    // query says `result` (an init can fail late, e.g. two ranks on one GPU), which stays.
    int blocking;
    ncclResult_t async, result;
    int polls;
    int finalized;   // ncclCommFinalize was called
    // A split of this comm in progress: NCCL writes the new comm only when the parent settles
    // (ncclCommSplit itself returns ncclSuccess with *newcomm NULL).
    ncclComm_t split_child;
    ncclComm_t* split_out;
};

// Destroyed and aborted communicators keep their dead marker (the memory is not reused), so that
// a later use is reported rather than undefined; NCCL's check of a freed comm says "corrupted".
static ncclResult_t comm_check(const char* fn, ncclComm_t comm) {
    if (!comm) return nccl_fail(ncclInvalidArgument, "%s : comm argument is NULL", fn);
    if (comm->magic == COMM_DEAD)
        return nccl_fail(ncclInvalidArgument, "%s: Error: corrupted comm object detected (comm %d was destroyed "
                         "or aborted: no call may use it again)", fn, comm->id);
    if (comm->magic != COMM_MAGIC)
        return nccl_fail(ncclInvalidArgument, "%s: Error: corrupted comm object detected (not a communicator)", fn);
    return ncclSuccess;
}

// NCCL's ncclCommEnsureReady: a comm in progress is refused; one whose last operation failed
// returns that failure.
static ncclResult_t comm_ready(const char* fn, ncclComm_t comm) {
    ncclResult_t r = comm_check(fn, comm);
    if (r != ncclSuccess) return r;
    if (comm->async == ncclInProgress)
        return nccl_fail(ncclInvalidArgument, "%s: Attempt to use communicator before the previous operation "
                         "returned ncclSuccess (comm %d is non-blocking: poll ncclCommGetAsyncError until it is "
                         "no longer ncclInProgress)", fn, comm->id);
    if (comm->async != ncclSuccess)
        return nccl_fail(comm->async, "%s: comm %d is in an error state (%s); only ncclCommAbort may use it", fn,
                         comm->id, ncclGetErrorString(comm->async));
    return ncclSuccess;
}

// A comm that must still have its MPI communicator.
static ncclResult_t comm_usable(const char* fn, ncclComm_t comm) {
    ncclResult_t r = comm_ready(fn, comm);
    if (r == ncclSuccess && comm->mpi == MPI_COMM_NULL)
        r = nccl_fail(ncclInvalidUsage, "%s: comm %d was finalized (ncclCommFinalize)", fn, comm->id);
    return r;
}

// Work started on comm that will end as `result`: a non-blocking comm is in progress from now on,
// and the call returns `returned`; a blocking one returns `result`.
static ncclResult_t start_async(ncclComm_t comm, ncclResult_t result, ncclResult_t returned) {
    static unsigned long long started;
    if (comm->blocking) return result;
    comm->async = ncclInProgress;
    comm->result = result;
    comm->polls = 1 + (int)(started++ % 3);
    return returned;
}

static ncclResult_t comm_wrap(const char* fn, MPI_Comm mpi, int device, int blocking, ncclComm_t* out) {
    static int next_id;
    int rank = 0, nranks = 0;
    MPI_Comm ctl = MPI_COMM_NULL;
    MPI_TRY(fn, "MPI_Comm_set_errhandler", MPI_Comm_set_errhandler(mpi, MPI_ERRORS_RETURN));
    MPI_TRY(fn, "MPI_Comm_rank", MPI_Comm_rank(mpi, &rank));
    MPI_TRY(fn, "MPI_Comm_size", MPI_Comm_size(mpi, &nranks));
    MPI_TRY(fn, "MPI_Comm_dup", MPI_Comm_dup(mpi, &ctl));
    ncclComm_t c = (ncclComm_t)calloc(1, sizeof *c);
    if (!c) return nccl_fail(ncclSystemError, "%s: out of memory", fn);
    c->magic = COMM_MAGIC;
    c->mpi = mpi;
    c->ctl = ctl;
    c->rank = rank;
    c->nranks = nranks;
    c->id = next_id++;
    c->device = device;
    c->blocking = blocking;
    c->async = c->result = ncclSuccess;
    *out = c;
    return ncclSuccess;
}

// Runs stream work until every operation issued on comm has completed.
static void drain_comm(ncclComm_t comm, const char* fn) {
    if (comm->finished < comm->issued)
        cuda_host_drain_until([comm] { return comm->finished == comm->issued ? 1 : 0; }, fn);
}

static int config_ok(const ncclConfig_t* config) { return !config || config->magic == 0xcafebeef; }

static const char id_magic[8] = "hostncl";  // the id's first 8 bytes; a 64-bit tag follows

ncclResult_t ncclGetUniqueId(ncclUniqueId* id) {
    if (!id) return nccl_fail(ncclInvalidArgument, "ncclGetUniqueId: uniqueId is NULL");
    static uint64_t calls;
    uint64_t tag = 0;
    int fd = open("/dev/urandom", O_RDONLY);
    if (fd < 0 || read(fd, &tag, sizeof tag) != (ssize_t)sizeof tag) {
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        tag = ((uint64_t)getpid() << 32) ^ (uint64_t)ts.tv_sec * 1000000007u ^ (uint64_t)ts.tv_nsec;
    }
    if (fd >= 0) close(fd);
    tag ^= ++calls * 0x9e3779b97f4a7c15ull;  // two ids of one process differ even without urandom
    memset(id, 0, sizeof *id);
    memcpy(id->internal, id_magic, sizeof id_magic);
    memcpy(id->internal + sizeof id_magic, &tag, sizeof tag);
    return ncclSuccess;
}

// The machine, as NCCL's host hash tells ranks on one node apart: FNV-1a of the host name.
static uint64_t host_hash(void) {
    char name[256] = "";
    gethostname(name, sizeof name - 1);
    uint64_t h = 1469598103934665603ull;
    for (const char* p = name; *p; p++) h = (h ^ (unsigned char)*p) * 1099511628211ull;
    return h;
}

// What each process passed to ncclCommInitRank, gathered so that every process reaches the same
// verdict (no process leaves early while the others wait in MPI_Comm_split).
typedef struct {
    uint64_t tag, host;
    int32_t rank, id_ok, config_ok, device;
} InitInfo;

static ncclResult_t init_verdict(const char* fn, const InitInfo* all, int world, int nranks) {
    for (int i = 0; i < world; i++) {
        if (!all[i].id_ok)
            return nccl_fail(ncclInvalidArgument, "%s: MPI rank %d passed an ncclUniqueId that ncclGetUniqueId did not make", fn, i);
        if (all[i].tag != all[0].tag)
            return nccl_fail(ncclInvalidUsage,
                             "%s: MPI ranks 0 and %d passed different ncclUniqueIds; the host NCCL needs one id "
                             "shared by every process of MPI_COMM_WORLD", fn, i);
        if (!all[i].config_ok)
            return nccl_fail(ncclInvalidArgument, "%s: MPI rank %d passed a config not set from NCCL_CONFIG_INITIALIZER", fn, i);
        if (all[i].rank < 0 || all[i].rank >= nranks)
            return nccl_fail(ncclInvalidArgument, "%s: MPI rank %d passed rank %d, outside [0, %d)", fn, i, all[i].rank, nranks);
        for (int j = 0; j < i; j++)
            if (all[j].rank == all[i].rank)
                return nccl_fail(ncclInvalidUsage, "%s: MPI ranks %d and %d both passed rank %d", fn, j, i, all[i].rank);
    }
    return ncclSuccess;
}

// NCCL refuses one GPU for two ranks of a communicator; as with NCCL the init call itself may
// succeed (a non-blocking one fails when polled). Every rank reaches the verdict here.
static ncclResult_t duplicate_gpu(const char* fn, const InitInfo* all, int world) {
    for (int i = 0; i < world; i++)
        for (int j = 0; j < i; j++)
            if (all[i].host == all[j].host && all[i].device == all[j].device)
                return nccl_fail(ncclInvalidUsage, "%s: Duplicate GPU detected : rank %d and rank %d both on CUDA device %d "
                                 "(one process per GPU: cudaSetDevice, or CUDA_HOST_DEVICES on the host runtime)",
                                 fn, all[j].rank < all[i].rank ? all[j].rank : all[i].rank,
                                 all[j].rank < all[i].rank ? all[i].rank : all[j].rank, all[i].device);
    return ncclSuccess;
}

static ncclResult_t init_rank(const char* fn, ncclComm_t* comm, int nranks, ncclUniqueId id, int rank,
                              const ncclConfig_t* config) {
    if (!comm) return nccl_fail(ncclInvalidArgument, "%s: comm is NULL", fn);
    *comm = NULL;
    ncclResult_t r = ensure_mpi(fn);
    if (r != ncclSuccess) return r;
    int world = 0, device = 0;
    MPI_Comm_size(MPI_COMM_WORLD, &world);
    // Checked before any collective: a communicator of some processes only would hang in one.
    if (nranks != world)
        return nccl_fail(ncclInvalidUsage,
                         "%s: nranks %d differs from the %d processes of MPI_COMM_WORLD; the host NCCL makes "
                         "communicators of every process only (then ncclCommSplit)", fn, nranks, world);
    cudaGetDevice(&device);
    InitInfo mine = {0, host_hash(), rank, memcmp(id.internal, id_magic, sizeof id_magic) == 0, config_ok(config), device};
    memcpy(&mine.tag, id.internal + sizeof id_magic, sizeof mine.tag);
    InitInfo* all = (InitInfo*)malloc((size_t)world * sizeof *all);
    if (!all) return nccl_fail(ncclSystemError, "%s: out of memory", fn);
    int err = MPI_Allgather(&mine, (int)sizeof mine, MPI_BYTE, all, (int)sizeof mine, MPI_BYTE, MPI_COMM_WORLD);
    r = err != MPI_SUCCESS ? mpi_fail(fn, "MPI_Allgather", err) : init_verdict(fn, all, world, nranks);
    const ncclResult_t late = r == ncclSuccess ? duplicate_gpu(fn, all, world) : ncclSuccess;
    free(all);
    if (r != ncclSuccess) return r;
    const int blocking = !(config && config->blocking == 0);
    if (late != ncclSuccess && blocking) return late;
    MPI_Comm mpi;
    MPI_TRY(fn, "MPI_Comm_split", MPI_Comm_split(MPI_COMM_WORLD, 0, rank, &mpi));  // key: NCCL rank order
    r = comm_wrap(fn, mpi, device, blocking, comm);
    return r != ncclSuccess ? r : start_async(*comm, late, ncclInProgress);
}

ncclResult_t ncclCommInitRank(ncclComm_t* comm, int nranks, ncclUniqueId commId, int rank) {
    return init_rank("ncclCommInitRank", comm, nranks, commId, rank, NULL);
}

ncclResult_t ncclCommInitRankConfig(ncclComm_t* comm, int nranks, ncclUniqueId commId, int rank,
                                    ncclConfig_t* config) {
    return init_rank("ncclCommInitRankConfig", comm, nranks, commId, rank, config);
}

// Where each rank of the parent stands at a split, gathered on the parent's control duplicate.
typedef struct {
    unsigned long long collectives;  // collectives issued on the parent before this split
    int32_t color, key;
} SplitInfo;

// NCCL pairs the ranks' collective calls on a communicator by their order: a rank that issued
// another number of collectives on the parent before this split is at another call (NCCL would
// pair the split with a collective and hang or corrupt both). Every rank reaches the same verdict.
static ncclResult_t split_verdict(const char* fn, ncclComm_t comm, int color, int key) {
    SplitInfo mine = {comm->collectives, color, key};
    std::vector<SplitInfo> all((size_t)comm->nranks);
    MPI_TRY(fn, "MPI_Allgather", MPI_Allgather(&mine, (int)sizeof mine, MPI_BYTE, all.data(), (int)sizeof mine,
                                               MPI_BYTE, comm->ctl));
    for (int i = 1; i < comm->nranks; i++)
        if (all[i].collectives != all[0].collectives)
            return nccl_fail(ncclInvalidUsage, "%s: mismatched calls on comm %d: rank 0 split it after %llu collectives "
                             "on it, rank %d after %llu (every rank must make the same collective calls on a communicator "
                             "in the same order; NCCL would pair this split with another rank's collective and hang)",
                             fn, comm->id, all[0].collectives, i, all[i].collectives);
    return ncclSuccess;
}

ncclResult_t ncclCommSplit(ncclComm_t comm, int color, int key, ncclComm_t* newcomm, ncclConfig_t* config) {
    const char* fn = "ncclCommSplit";
    ncclResult_t r = comm_usable(fn, comm);
    if (r != ncclSuccess) return r;
    if (!newcomm) return nccl_fail(ncclInvalidArgument, "%s : newcomm argument is NULL", fn);
    *newcomm = NULL;
    if (color < 0 && color != NCCL_SPLIT_NOCOLOR)
        return nccl_fail(ncclInvalidArgument, "%s: color %d is negative and not NCCL_SPLIT_NOCOLOR", fn, color);
    if (!config_ok(config))
        return nccl_fail(ncclInvalidArgument, "%s: config not set from NCCL_CONFIG_INITIALIZER", fn);
    r = split_verdict(fn, comm, color, key);  // before the drain, which would wait for the mismatched peer
    if (r != ncclSuccess) return r;
    comm->collectives++;
    drain_comm(comm, fn);  // MPI_Comm_split is a collective on comm->mpi: after the queued ones
    MPI_Comm mpi;
    MPI_TRY(fn, "MPI_Comm_split",
            MPI_Comm_split(comm->mpi, color == NCCL_SPLIT_NOCOLOR ? MPI_UNDEFINED : color, key, &mpi));
    // Without a config the new comm inherits the parent's blocking mode, as with NCCL.
    const int blocking = config && config->blocking != NCCL_CONFIG_UNDEF_INT ? config->blocking != 0 : comm->blocking;
    ncclComm_t child = NULL;
    if (mpi != MPI_COMM_NULL && (r = comm_wrap(fn, mpi, comm->device, blocking, &child)) != ncclSuccess) return r;
    if (comm->blocking) {  // NCCL runs the split blocking when the parent is
        *newcomm = child;
        return ncclSuccess;
    }
    comm->split_child = child;
    comm->split_out = newcomm;
    return start_async(comm, ncclSuccess, ncclSuccess);  // yes: ncclSuccess, with the parent in progress
}

// MPI_Comm_free after MPI_Finalize is erroneous: a program may finalize before destroying.
// The operations queued on the comm complete first (MPI_Comm_free is collective too).
static ncclResult_t free_mpi(const char* fn, ncclComm_t comm) {
    if (comm->mpi != MPI_COMM_NULL) drain_comm(comm, fn);
    int finalized = 0;
    MPI_Finalized(&finalized);
    if (comm->mpi != MPI_COMM_NULL && !finalized) {
        MPI_TRY(fn, "MPI_Comm_free", MPI_Comm_free(&comm->mpi));
        MPI_TRY(fn, "MPI_Comm_free", MPI_Comm_free(&comm->ctl));
    }
    comm->mpi = comm->ctl = MPI_COMM_NULL;
    return ncclSuccess;
}

ncclResult_t ncclCommFinalize(ncclComm_t comm) {
    const char* fn = "ncclCommFinalize";
    ncclResult_t r = comm_ready(fn, comm);
    if (r != ncclSuccess) return r;
    if (comm->finalized) return nccl_fail(ncclInvalidArgument, "%s: comm %d is finalized already", fn, comm->id);
    comm->finalized = 1;
    r = free_mpi(fn, comm);
    return r != ncclSuccess ? r : start_async(comm, ncclSuccess, ncclInProgress);
}

ncclResult_t ncclCommDestroy(ncclComm_t comm) {
    ncclResult_t r = comm_ready("ncclCommDestroy", comm);
    if (r == ncclSuccess) r = free_mpi("ncclCommDestroy", comm);
    if (r == ncclSuccess) comm->magic = COMM_DEAD;
    return r;
}

// Allowed in any state. No MPI call: the other ranks may be gone or stuck, and MPI_Comm_free is
// collective. Queued operations on the comm are dropped when the scheduler reaches them; a split
// in progress never delivers its comm.
ncclResult_t ncclCommAbort(ncclComm_t comm) {
    ncclResult_t r = comm_check("ncclCommAbort", comm);
    if (r != ncclSuccess) return r;
    if (comm->split_child) comm->split_child->magic = COMM_DEAD;
    comm->split_child = NULL;
    comm->split_out = NULL;
    comm->magic = COMM_DEAD;
    return ncclSuccess;
}

static ncclResult_t comm_int(const char* fn, const ncclComm_t comm, int* out, int value_if_ok) {
    ncclResult_t r = comm_ready(fn, comm);
    if (r != ncclSuccess) return r;
    if (!out) return nccl_fail(ncclInvalidArgument, "%s: output pointer is NULL", fn);
    *out = value_if_ok;
    return ncclSuccess;
}

ncclResult_t ncclCommCount(const ncclComm_t comm, int* count) {
    return comm_int("ncclCommCount", comm, count, comm ? comm->nranks : 0);
}

ncclResult_t ncclCommUserRank(const ncclComm_t comm, int* rank) {
    return comm_int("ncclCommUserRank", comm, rank, comm ? comm->rank : 0);
}

ncclResult_t ncclCommCuDevice(const ncclComm_t comm, int* device) {
    return comm_int("ncclCommCuDevice", comm, device, comm ? comm->device : 0);
}

// The poll of non-blocking communicators (see struct ncclComm): it completes a split in progress.
// A failed queued operation ends the job instead of showing here.
ncclResult_t ncclCommGetAsyncError(ncclComm_t comm, ncclResult_t* asyncError) {
    ncclResult_t r = comm_check("ncclGetAsyncError", comm);
    if (r != ncclSuccess) return r;
    if (!asyncError) return nccl_fail(ncclInvalidArgument, "ncclGetAsyncError : asyncError argument is NULL");
    if (comm->async == ncclInProgress && comm->polls-- <= 0) {
        comm->async = comm->result;
        if (comm->split_out) *comm->split_out = comm->split_child;
        comm->split_child = NULL;
        comm->split_out = NULL;
    }
    *asyncError = comm->async;
    return ncclSuccess;
}

// --- Argument checks shared by the operations ---------------------------------------------------

// A checked call: the MPI type of its elements and the communicator.
typedef struct {
    MPI_Datatype type;
    size_t size;  // bytes per element
    MPI_Comm mpi;
    int rank, nranks;
} Call;

static int mpi_type(ncclDataType_t t, MPI_Datatype* type, size_t* size) {
    switch (t) {
        case ncclInt8: *type = MPI_INT8_T, *size = 1; return 1;
        case ncclUint8: *type = MPI_UINT8_T, *size = 1; return 1;
        case ncclInt32: *type = MPI_INT32_T, *size = 4; return 1;
        case ncclUint32: *type = MPI_UINT32_T, *size = 4; return 1;
        case ncclInt64: *type = MPI_INT64_T, *size = 8; return 1;
        case ncclUint64: *type = MPI_UINT64_T, *size = 8; return 1;
        case ncclFloat32: *type = MPI_FLOAT, *size = 4; return 1;
        case ncclFloat64: *type = MPI_DOUBLE, *size = 8; return 1;
        case ncclBfloat16: *type = bf16_type, *size = 2; return 1;
        default: return 0;
    }
}

// Checks what every operation takes: the communicator, the type, the count (MPI counts are int)
// and the stream.
static ncclResult_t begin(const char* fn, ncclComm_t comm, ncclDataType_t t, size_t count,
                          cudaStream_t stream, Call* c) {
    ncclResult_t r = comm_usable(fn, comm);
    if (r != ncclSuccess) return r;
    if (!mpi_type(t, &c->type, &c->size))
        return nccl_fail(ncclInvalidArgument, "%s: datatype %d is unknown or not supported (the host NCCL has "
                         "the integers, fp32, fp64 and bf16)", fn, (int)t);
    if (count > (size_t)INT_MAX)
        return nccl_fail(ncclInvalidArgument, "%s: count %zu is over the host NCCL's limit of %d elements", fn, count, INT_MAX);
    if (!cuda_host_stream_valid(stream))  // what a GPU reports as cudaErrorInvalidResourceHandle
        return nccl_fail(ncclUnhandledCudaError, "%s: invalid stream (cudaErrorInvalidResourceHandle)", fn);
    c->mpi = comm->mpi;
    c->rank = comm->rank;
    c->nranks = comm->nranks;
    return ncclSuccess;
}

// A GPU faults on ordinary host memory, so the host runtime refuses it too.
static ncclResult_t check_buffer(const char* fn, const char* name, const void* p, size_t bytes) {
    if (bytes == 0) return ncclSuccess;
    CudaHostMemKind kind = cuda_host_mem_kind(p, bytes);
    if (kind == CUDA_HOST_MEM_DEVICE || kind == CUDA_HOST_MEM_PINNED) return ncclSuccess;
    if (kind == CUDA_HOST_MEM_OVERRUN)
        return nccl_fail(ncclInvalidArgument, "%s: %s %p: %zu bytes run past the end of its allocation", fn, name, p, bytes);
    return nccl_fail(ncclInvalidArgument, "%s: %s %p is not device memory (cudaMalloc or cudaMallocHost)", fn, name, p);
}

// Send and receive buffers of a collective: apart, or overlapping in NCCL's in-place form only.
static ncclResult_t check_buffers(const char* fn, const void* send, size_t send_bytes, const void* recv,
                                  size_t recv_bytes, int in_place) {
    ncclResult_t r = check_buffer(fn, "sendbuff", send, send_bytes);
    if (r == ncclSuccess) r = check_buffer(fn, "recvbuff", recv, recv_bytes);
    if (r != ncclSuccess) return r;
    const char *s = (const char*)send, *d = (const char*)recv;
    if (!in_place && s < d + recv_bytes && d < s + send_bytes)
        return nccl_fail(ncclInvalidArgument, "%s: sendbuff %p overlaps recvbuff %p but is not NCCL's in-place form",
                         fn, send, recv);
    return ncclSuccess;
}

static ncclResult_t reduce_op(const char* fn, ncclRedOp_t op, ncclDataType_t t, MPI_Op* mop) {
    if (op != ncclSum)
        return nccl_fail(ncclInvalidArgument, "%s: reduction op %d is not supported (the host NCCL has "
                         "ncclSum only, the one the project uses)", fn, (int)op);
    *mop = t == ncclBfloat16 ? bf16_sum_op : MPI_SUM;
    return ncclSuccess;
}

// --- Operations on streams ----------------------------------------------------------------------

// An NCCL operation queued on a stream. When the scheduler first runs it (stream order and the
// comm's posting order allow it) it posts non-blocking MPI calls; it then completes when
// MPI_Testall says so, while the scheduler runs other streams. The all-reduce has two phases (a
// reduce-scatter, then an all-gather of the reduced blocks); it keeps its comm's turn until the
// second is posted.
enum OpKind { OP_ALL_GATHER, OP_REDUCE_SCATTER, OP_ALL_REDUCE, OP_BROADCAST, OP_P2P };

// Sends and receives of a group, posted at the outermost ncclGroupEnd.
typedef struct {
    int is_send;
    void* buf;
    int count;
    MPI_Datatype type;
    int peer;
    ncclComm_t comm;
    cudaStream_t stream;
} P2p;

// One tag: MPI matches messages of one (source, tag, communicator) in the order they were posted,
// which is NCCL's order between two ranks (the comm's posting order keeps the issue order).
enum { P2P_TAG = 0x6e63 };

struct NcclOp : CudaHostOp {
    const char* fn = "";
    int kind = OP_P2P;
    // The comm(s) and this op's number on each (a group of sends and receives may use several).
    std::vector<std::pair<ncclComm_t, unsigned long long>> turns;
    // A collective's arguments, as checked when it was issued.
    const void* send = NULL;
    void* recv = NULL;
    size_t count = 0, size = 0;
    MPI_Datatype type = MPI_DATATYPE_NULL;
    MPI_Op op = MPI_OP_NULL;
    int root = 0, in_place = 0, rank = 0, nranks = 1;
    MPI_Comm mpi = MPI_COMM_NULL;
    std::vector<int> counts, displs;  // all-reduce: the block each rank reduces
    void* scratch = NULL;             // in-place reduce-scatter: the result before it is copied
    std::vector<P2p> p2p;
    std::vector<MPI_Request> reqs;    // posted and not complete
    std::vector<MPI_Status> statuses;
    int phase = 0;                    // phases posted
    int released = 0;                 // the turns were passed on

    ~NcclOp() override { free(scratch); }

    int can_start(void) override {
        for (auto& t : turns)
            if (t.first->magic == COMM_MAGIC && t.first->posted != t.second) return 0;
        return 1;
    }
    int polling(void) override { return !reqs.empty(); }
    void describe(char* buf, size_t len) override {
        const ncclComm_t c = turns[0].first;
        int n = snprintf(buf, len, "%s on comm %d (rank %d of %d), operation %llu on it", fn, c->id, c->rank,
                         c->nranks, turns[0].second + 1);
        for (size_t i = 0; i < p2p.size() && i < 4 && n > 0 && (size_t)n < len; i++)  // the transfers
            n += snprintf(buf + n, len - (size_t)n, "%s %s %d elements %s rank %d", i ? "," : ":",
                          p2p[i].is_send ? "send" : "receive", p2p[i].count, p2p[i].is_send ? "to" : "from",
                          p2p[i].peer);
    }
    void describe_wait(char* buf, size_t len) override {
        for (auto& t : turns)
            if (t.first->magic == COMM_MAGIC && t.first->posted != t.second) {
                snprintf(buf, len, "waits for its turn on comm %d: operations issued before it post first "
                         "(%llu of %llu posted)", t.first->id, t.first->posted, t.second);
                return;
            }
    }
    int step(int split) override;
    // A graph's copy of the call: its arguments, none of a run's state (the recorded op never
    // runs); its turns are taken at each launch.
    CudaHostOp* clone() const override {
        NcclOp* c = new NcclOp(*this);
        c->deps.clear();
        c->started = 0;
        c->keep.reset();
        c->reqs.clear();
        c->phase = c->released = 0;
        c->scratch = NULL;
        if (scratch && !(c->scratch = malloc(count * size)))
            fail_msg("host NCCL: out of memory for %zu bytes replaying %s", count * size, fn);
        return c;
    }
    // Each launch of a graph issues its operations again, in the captured order, after what the
    // process issued on the same communicators before the launch (as NCCL enqueues a graph's
    // kernels at cudaGraphLaunch): every rank must launch its graphs in the same order.
    void replayed(void) override {
        for (auto& t : turns) {
            t.second = t.first->issued++;
            if (kind != OP_P2P) t.first->collectives++;
        }
    }

    // The next op on each comm may post now.
    void release(void) {
        if (released) return;
        released = 1;
        for (auto& t : turns) t.first->posted++;
    }
    // Ends the job: the error happened after the call returned, in stream work.
    __attribute__((noreturn)) void fail(const char* call, int err) {
        mpi_fail(fn, call, err);
        fail_msg("%s queued on a stream (comm %d, rank %d of %d): %s", fn, turns[0].first->id,
                 turns[0].first->rank, turns[0].first->nranks, last_error);
    }
    void post(const char* call, int err) {
        if (err != MPI_SUCCESS) fail(call, err);
    }
    MPI_Request* next_request(void) {
        reqs.push_back(MPI_REQUEST_NULL);
        return &reqs.back();
    }
    void post_first(void);
};

void NcclOp::post_first(void) {
    int n = (int)count;
    switch (kind) {
    case OP_ALL_GATHER:
        post("MPI_Iallgather", MPI_Iallgather(in_place ? MPI_IN_PLACE : send, n, type, recv, n, type, mpi,
                                              next_request()));
        break;
    case OP_REDUCE_SCATTER:
        // In place, MPI would write the result over block 0 of sendbuff: reduce into scratch
        // instead, so that only this rank's own block changes, as with NCCL.
        post("MPI_Ireduce_scatter_block", MPI_Ireduce_scatter_block(send, in_place ? scratch : recv, n, type, op,
                                                                    mpi, next_request()));
        break;
    case OP_ALL_REDUCE:
        // In place, MPI leaves this rank's reduced block at the start of recvbuff.
        post("MPI_Ireduce_scatter",
             MPI_Ireduce_scatter(in_place ? MPI_IN_PLACE : send,
                                 in_place ? recv : (char*)recv + (size_t)displs[rank] * size, counts.data(), type,
                                 op, mpi, next_request()));
        break;
    case OP_BROADCAST:
        if (rank == root && send != recv) memmove(recv, send, count * size);
        post("MPI_Ibcast", MPI_Ibcast(recv, n, type, root, mpi, next_request()));
        break;
    default:
        // Receives first, so that no send waits for a receive not yet posted.
        for (int pass = 0; pass < 2; pass++)
            for (const P2p& o : p2p) {
                if (o.is_send != pass) continue;
                MPI_Comm m = o.comm->mpi;
                if (pass) post("MPI_Isend", MPI_Isend(o.buf, o.count, o.type, o.peer, P2P_TAG, m, next_request()));
                else post("MPI_Irecv", MPI_Irecv(o.buf, o.count, o.type, o.peer, P2P_TAG, m, next_request()));
            }
    }
}

int NcclOp::step(int) {
    for (auto& t : turns)
        if (t.first->magic != COMM_MAGIC) {  // aborted: dropped (its requests are abandoned)
            release();
            reqs.clear();
            for (auto& u : turns) u.first->finished++;
            return 1;
        }
    if (phase == 0) {
        post_first();
        phase = 1;
        if (kind != OP_ALL_REDUCE) release();
    }
    int flag = 0;
    statuses.resize(reqs.size());
    int err = MPI_Testall((int)reqs.size(), reqs.data(), &flag, statuses.data());
    for (size_t i = 0; err == MPI_ERR_IN_STATUS && i < statuses.size(); i++)  // the first that failed
        if (statuses[i].MPI_ERROR != MPI_SUCCESS && statuses[i].MPI_ERROR != MPI_ERR_PENDING) err = statuses[i].MPI_ERROR;
    if (err != MPI_SUCCESS) fail("MPI_Testall", err);
    if (!flag) return 0;
    reqs.clear();
    if (kind == OP_ALL_REDUCE && phase == 1) {  // every rank has its block: gather them
        char* own = (char*)recv + (size_t)displs[rank] * size;
        if (in_place) memmove(own, recv, (size_t)counts[rank] * size);
        post("MPI_Iallgatherv", MPI_Iallgatherv(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, recv, counts.data(),
                                                displs.data(), type, mpi, next_request()));
        phase = 2;
        release();
        return 0;
    }
    if (kind == OP_REDUCE_SCATTER && in_place) memcpy(recv, scratch, count * size);
    for (auto& t : turns) t.first->finished++;
    return 1;
}

static int group_depth;
static std::vector<ncclComm_t> group_comms;  // the comms the open group used
static ncclResult_t group_error;  // the first failed call inside the open group
static char group_error_text[sizeof last_error];

// After a call queued work on comm: inside a group the group's end settles it; outside, a
// non-blocking comm is in progress (NCCL enqueues from a thread of its own).
static ncclResult_t issued_on(ncclComm_t comm) {
    if (group_depth == 0) return start_async(comm, ncclSuccess, ncclInProgress);
    for (ncclComm_t c : group_comms)
        if (c == comm) return ncclSuccess;
    if (!group_comms.empty() && group_comms[0]->blocking != comm->blocking) {
        const ncclResult_t r = nccl_fail(ncclInvalidArgument, "Blocking and nonblocking communicators are not "
                                         "allowed in the same group (comms %d and %d)", group_comms[0]->id, comm->id);
        if (group_error == ncclSuccess) {
            group_error = r;
            snprintf(group_error_text, sizeof group_error_text, "%s", last_error);
        }
        return r;
    }
    group_comms.push_back(comm);
    return ncclSuccess;
}

// Queues a collective on comm's order and on the stream. In a stream capture it is recorded
// only: it takes its turn on the communicator at each launch of the graph (NcclOp::replayed).
static ncclResult_t issue(NcclOp* op, ncclComm_t comm, cudaStream_t stream) {
    if (cuda_host_capturing(stream)) {
        op->turns.push_back({comm, 0});
    } else {
        op->turns.push_back({comm, comm->issued++});
        comm->collectives++;
    }
    cuda_host_enqueue(stream, op);
    return issued_on(comm);
}

static NcclOp* collective(const char* fn, int kind, const Call* c, const void* send, void* recv, size_t count) {
    NcclOp* op = new NcclOp();
    op->fn = fn;
    op->kind = kind;
    op->send = send;
    op->recv = recv;
    op->count = count;
    op->size = c->size;
    op->type = c->type;
    op->rank = c->rank;
    op->nranks = c->nranks;
    op->mpi = c->mpi;
    return op;
}

// --- Collectives --------------------------------------------------------------------------------

ncclResult_t ncclAllGather(const void* sendbuff, void* recvbuff, size_t sendcount, ncclDataType_t datatype,
                           ncclComm_t comm, cudaStream_t stream) {
    const char* fn = "ncclAllGather";
    Call c = {};
    int in_place = 0;
    ncclResult_t r = begin(fn, comm, datatype, sendcount, stream, &c);
    size_t bytes = sendcount * c.size;
    if (r == ncclSuccess) {
        in_place = sendbuff == (char*)recvbuff + c.rank * bytes;
        r = check_buffers(fn, sendbuff, bytes, recvbuff, bytes * c.nranks, in_place);
    }
    if (r != ncclSuccess || sendcount == 0) return r;
    NcclOp* op = collective(fn, OP_ALL_GATHER, &c, sendbuff, recvbuff, sendcount);
    op->in_place = in_place;
    return issue(op, comm, stream);
}

ncclResult_t ncclReduceScatter(const void* sendbuff, void* recvbuff, size_t recvcount, ncclDataType_t datatype,
                               ncclRedOp_t op, ncclComm_t comm, cudaStream_t stream) {
    const char* fn = "ncclReduceScatter";
    Call c = {};
    MPI_Op mop = MPI_SUM;
    int in_place = 0;
    ncclResult_t r = begin(fn, comm, datatype, recvcount, stream, &c);
    size_t bytes = recvcount * c.size;
    if (r == ncclSuccess) r = reduce_op(fn, op, datatype, &mop);
    if (r == ncclSuccess) {
        in_place = recvbuff == (const char*)sendbuff + c.rank * bytes;
        r = check_buffers(fn, sendbuff, bytes * c.nranks, recvbuff, bytes, in_place);
    }
    if (r != ncclSuccess || recvcount == 0) return r;
    void* scratch = NULL;
    if (in_place && !(scratch = malloc(bytes))) return nccl_fail(ncclSystemError, "%s: out of memory for %zu bytes", fn, bytes);
    NcclOp* o = collective(fn, OP_REDUCE_SCATTER, &c, sendbuff, recvbuff, recvcount);
    o->op = mop;
    o->in_place = in_place;
    o->scratch = scratch;
    return issue(o, comm, stream);
}

// Reduce-scatter into each rank's block of recvbuff, then all-gather the blocks: every element is
// reduced on exactly one rank, so all ranks get the same bits whatever MPI's algorithms.
ncclResult_t ncclAllReduce(const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype,
                           ncclRedOp_t op, ncclComm_t comm, cudaStream_t stream) {
    const char* fn = "ncclAllReduce";
    Call c = {};
    MPI_Op mop = MPI_SUM;
    ncclResult_t r = begin(fn, comm, datatype, count, stream, &c);
    if (r == ncclSuccess) r = reduce_op(fn, op, datatype, &mop);
    int in_place = sendbuff == recvbuff;
    if (r == ncclSuccess) r = check_buffers(fn, sendbuff, count * c.size, recvbuff, count * c.size, in_place);
    if (r != ncclSuccess || count == 0) return r;
    NcclOp* o = collective(fn, OP_ALL_REDUCE, &c, sendbuff, recvbuff, count);
    o->op = mop;
    o->in_place = in_place;
    o->counts.resize((size_t)c.nranks);
    o->displs.resize((size_t)c.nranks);
    for (int i = 0, at = 0; i < c.nranks; i++) {
        o->counts[i] = (int)(count / c.nranks) + (i < (int)(count % c.nranks));
        o->displs[i] = at;
        at += o->counts[i];
    }
    return issue(o, comm, stream);
}

static ncclResult_t broadcast(const char* fn, const void* sendbuff, void* recvbuff, size_t count,
                              ncclDataType_t datatype, int root, ncclComm_t comm, cudaStream_t stream) {
    Call c = {};
    ncclResult_t r = begin(fn, comm, datatype, count, stream, &c);
    if (r == ncclSuccess && (root < 0 || root >= c.nranks))
        r = nccl_fail(ncclInvalidArgument, "%s: root %d is outside [0, %d)", fn, root, c.nranks);
    size_t bytes = count * c.size;
    if (r == ncclSuccess && c.rank == root) r = check_buffer(fn, "sendbuff", sendbuff, bytes);  // read on the root only
    if (r == ncclSuccess) r = check_buffer(fn, "recvbuff", recvbuff, bytes);
    if (r != ncclSuccess || count == 0) return r;
    NcclOp* o = collective(fn, OP_BROADCAST, &c, sendbuff, recvbuff, count);
    o->root = root;
    return issue(o, comm, stream);
}

ncclResult_t ncclBroadcast(const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype, int root,
                           ncclComm_t comm, cudaStream_t stream) {
    return broadcast("ncclBroadcast", sendbuff, recvbuff, count, datatype, root, comm, stream);
}

ncclResult_t ncclBcast(void* buff, size_t count, ncclDataType_t datatype, int root, ncclComm_t comm,
                       cudaStream_t stream) {
    return broadcast("ncclBcast", buff, buff, count, datatype, root, comm, stream);
}

// --- Point to point and groups ------------------------------------------------------------------

static std::vector<P2p> group_ops;  // sends and receives waiting for the outermost ncclGroupEnd

// Queues the group's transfers as one operation: on the stream of its first transfer, joined
// with the others' streams (as NCCL's group launch), and in the order of every comm it uses.
static ncclResult_t run_group(const char* fn) {
    if (group_ops.empty()) return ncclSuccess;
    NcclOp* op = new NcclOp();
    op->fn = fn;
    op->kind = OP_P2P;
    op->p2p.swap(group_ops);
    std::vector<cudaStream_t> streams;
    const int captured = cuda_host_capturing(op->p2p[0].stream);   // turns taken at each launch
    for (const P2p& o : op->p2p) {
        int seen = 0;
        for (auto& t : op->turns) seen |= t.first == o.comm;
        if (!seen) op->turns.push_back({o.comm, captured ? 0 : o.comm->issued++});
        streams.push_back(o.stream);
    }
    cuda_host_enqueue_joined(streams.data(), (int)streams.size(), op);
    return ncclSuccess;
}

static ncclResult_t p2p(const char* fn, int is_send, const void* buf, size_t count, ncclDataType_t datatype, int peer,
                        ncclComm_t comm, cudaStream_t stream) {
    Call c = {};
    ncclResult_t r = begin(fn, comm, datatype, count, stream, &c);
    if (r == ncclSuccess && (peer < 0 || peer >= c.nranks))
        r = nccl_fail(ncclInvalidArgument, "%s: peer %d is outside [0, %d)", fn, peer, c.nranks);
    if (r == ncclSuccess) r = check_buffer(fn, is_send ? "sendbuff" : "recvbuff", buf, count * c.size);
    if (r != ncclSuccess) {
        if (group_depth > 0 && group_error == ncclSuccess) {
            group_error = r;
            snprintf(group_error_text, sizeof group_error_text, "%s", last_error);
        }
        return r;
    }
    P2p o = {is_send, (void*)buf, (int)count, c.type, peer, comm, stream};
    group_ops.push_back(o);
    if (group_depth == 0) run_group(fn);  // outside a group: a group of one
    return issued_on(comm);
}

ncclResult_t ncclSend(const void* sendbuff, size_t count, ncclDataType_t datatype, int peer, ncclComm_t comm,
                      cudaStream_t stream) {
    return p2p("ncclSend", 1, sendbuff, count, datatype, peer, comm, stream);
}

ncclResult_t ncclRecv(void* recvbuff, size_t count, ncclDataType_t datatype, int peer, ncclComm_t comm,
                      cudaStream_t stream) {
    return p2p("ncclRecv", 0, recvbuff, count, datatype, peer, comm, stream);
}

ncclResult_t ncclGroupStart(void) {
    if (group_depth++ == 0) group_error = ncclSuccess;
    return ncclSuccess;
}

// A group with a failed call posts nothing (its peers would wait for what never comes, as
// with NCCL) and returns that call's error. Otherwise every non-blocking comm the group used is
// in progress, and the call says ncclInProgress.
ncclResult_t ncclGroupEnd(void) {
    if (group_depth == 0) return nccl_fail(ncclInvalidUsage, "ncclGroupEnd: not in a group call (no ncclGroupStart is open)");
    if (--group_depth > 0) return ncclSuccess;
    std::vector<ncclComm_t> comms;
    comms.swap(group_comms);
    if (group_error != ncclSuccess) {
        group_ops.clear();
        return nccl_fail(group_error, "ncclGroupEnd: nothing was posted: a call in the group failed: %s", group_error_text);
    }
    run_group("ncclGroupEnd");
    ncclResult_t r = ncclSuccess;
    for (ncclComm_t c : comms)
        if (start_async(c, ncclSuccess, ncclInProgress) == ncclInProgress) r = ncclInProgress;
    return r;
}
