// NCCL for the host runtime: the subset of NCCL's API (names, values and signatures of NCCL
// 2.28's nccl.h) that the project uses, implemented over MPI in nccl.cpp, one rank per process
// under mpirun. CUDA sources reach it through comm/nccl_api.h (<nccl.h> under nvcc); include
// model/cuda_common.cuh first (this header takes cudaStream_t from the host runtime and works
// alone too). It does not include mpi.h: only nccl.cpp needs MPI's compile flags; a program that
// links $(CUDA_HOST_NCCL_OBJS) links MPI (tests/cuda_host/nccl.mk).
//
// Semantics (README.md in this folder, section "NCCL over MPI"):
// - MPI is initialised by the first ncclCommInitRank if the program has not done it (and then
//   finalized at exit); a program that initialises MPI itself keeps finalizing it.
// - An ncclUniqueId must be shared by every process of MPI_COMM_WORLD, with nranks equal to the
//   world size (checked: ncclInvalidUsage). Ranks may be numbered in any order.
// - A call checks its arguments and queues the operation on its stream (the host runtime's
//   scheduler, tests/cuda_host/stream_sched.cpp, runs it in stream order): it posts non-blocking
//   MPI calls when first run and completes when MPI says so, while other streams run. The
//   operations of one communicator post in the order they were issued (so every rank posts the
//   same MPI collectives in the same order); different communicators in any order. Buffers of
//   count > 0 must be device or pinned memory of the host runtime (cudaMalloc, cudaMallocHost),
//   as on a GPU.
// - Reductions: each element is reduced on one rank (MPI_Ireduce_scatter) and then copied to the
//   others, so every rank gets the same bits, as with NCCL's ring; the order of the summation is
//   that of MPI's non-blocking algorithms, independent of the schedule. Only ncclSum, on the
//   integers, fp32, fp64 and bf16 (the project's needs); bf16 is summed pairwise in float,
//   rounded to nearest even after each step. Other ops and types return ncclInvalidArgument.
// - ncclSend/ncclRecv between ncclGroupStart/ncclGroupEnd (groups nest) become one operation at
//   the outermost ncclGroupEnd: receives posted first, then sends, then all are awaited;
//   transfers between two ranks match in the order they were issued. A group over several
//   streams joins them, as NCCL's group launch. Outside a group each is a group of one.
//   Collectives inside a group are queued when called.
// - On a capturing stream an operation is recorded in the graph, not issued; each cudaGraphLaunch
//   issues it again, taking its turn on its communicators at the launch.
// - Failures of the calls return an ncclResult_t, never abort; ncclGetLastError says what failed
//   ("ncclAllGather: ..."), printed to stderr as well when NCCL_DEBUG is set. An MPI failure in a
//   queued operation, after its call returned, ends the job with the operation named.
// - As strict as NCCL 2.28 (README.md): a non-blocking communicator is in progress after every call
//   that does work (a split: the parent, with the new comm written when it settles) and refuses
//   other use until ncclCommGetAsyncError stops saying so; two ranks on one GPU, mismatched
//   splits and any use after abort or destroy are refused with NCCL's own words.
#pragma once
#include <limits.h>
#include <stddef.h>
#include "tests/cuda_host/host_runtime.h"

#define NCCL_MAJOR 2
#define NCCL_MINOR 28
#define NCCL_PATCH 9
#define NCCL_SUFFIX ""
#define NCCL_VERSION_CODE 22809
#define NCCL_VERSION(X, Y, Z) \
    (((X) <= 2 && (Y) <= 8) ? (X) * 1000 + (Y) * 100 + (Z) : (X) * 10000 + (Y) * 100 + (Z))

extern "C" {

typedef struct ncclComm* ncclComm_t;
#define NCCL_COMM_NULL NULL

#define NCCL_UNIQUE_ID_BYTES 128
typedef struct { char internal[NCCL_UNIQUE_ID_BYTES]; } ncclUniqueId;

typedef enum {
    ncclSuccess = 0,
    ncclUnhandledCudaError = 1,
    ncclSystemError = 2,
    ncclInternalError = 3,
    ncclInvalidArgument = 4,
    ncclInvalidUsage = 5,
    ncclRemoteError = 6,
    ncclInProgress = 7,
    ncclNumResults = 8
} ncclResult_t;

#define NCCL_CONFIG_UNDEF_INT INT_MIN
#define NCCL_CONFIG_UNDEF_PTR NULL
#define NCCL_SPLIT_NOCOLOR -1

// Accepted and ignored (only its magic is checked, as NCCL refuses an uninitialised config).
typedef struct ncclConfig_v22800 {
    size_t size;
    unsigned int magic;
    unsigned int version;
    int blocking;
    int cgaClusterSize;
    int minCTAs;
    int maxCTAs;
    const char* netName;
    int splitShare;
    int trafficClass;
    const char* commName;
    int collnetEnable;
    int CTAPolicy;
    int shrinkShare;
    int nvlsCTAs;
    int nChannelsPerNetPeer;
    int nvlinkCentricSched;
} ncclConfig_t;

#define NCCL_CONFIG_INITIALIZER                                                                 \
    {                                                                                           \
        sizeof(ncclConfig_t), 0xcafebeef, NCCL_VERSION(NCCL_MAJOR, NCCL_MINOR, NCCL_PATCH),     \
            NCCL_CONFIG_UNDEF_INT, NCCL_CONFIG_UNDEF_INT, NCCL_CONFIG_UNDEF_INT,                \
            NCCL_CONFIG_UNDEF_INT, NCCL_CONFIG_UNDEF_PTR, NCCL_CONFIG_UNDEF_INT,                \
            NCCL_CONFIG_UNDEF_INT, NCCL_CONFIG_UNDEF_PTR, NCCL_CONFIG_UNDEF_INT,                \
            NCCL_CONFIG_UNDEF_INT, NCCL_CONFIG_UNDEF_INT, NCCL_CONFIG_UNDEF_INT,                \
            NCCL_CONFIG_UNDEF_INT, NCCL_CONFIG_UNDEF_INT,                                       \
    }

typedef enum { ncclNumOps_dummy = 5 } ncclRedOp_dummy_t;
typedef enum {
    ncclSum = 0,
    ncclProd = 1,
    ncclMax = 2,
    ncclMin = 3,
    ncclAvg = 4,
    ncclNumOps = 5,
    ncclMaxRedOp = 0x7fffffff >> (32 - 8 * sizeof(ncclRedOp_dummy_t))
} ncclRedOp_t;

// The fp8 types are moved (all-gather, broadcast, send/receive) but not reduced.
typedef enum {
    ncclInt8 = 0, ncclChar = 0,
    ncclUint8 = 1,
    ncclInt32 = 2, ncclInt = 2,
    ncclUint32 = 3,
    ncclInt64 = 4,
    ncclUint64 = 5,
    ncclFloat16 = 6, ncclHalf = 6,
    ncclFloat32 = 7, ncclFloat = 7,
    ncclFloat64 = 8, ncclDouble = 8,
    ncclBfloat16 = 9,
    ncclFloat8e4m3 = 10,
    ncclFloat8e5m2 = 11,
    ncclNumTypes = 12
} ncclDataType_t;

ncclResult_t ncclGetVersion(int* version);
ncclResult_t ncclGetUniqueId(ncclUniqueId* uniqueId);
ncclResult_t ncclCommInitRank(ncclComm_t* comm, int nranks, ncclUniqueId commId, int rank);
ncclResult_t ncclCommInitRankConfig(ncclComm_t* comm, int nranks, ncclUniqueId commId, int rank,
                                    ncclConfig_t* config);
ncclResult_t ncclCommSplit(ncclComm_t comm, int color, int key, ncclComm_t* newcomm, ncclConfig_t* config);
ncclResult_t ncclCommFinalize(ncclComm_t comm);
ncclResult_t ncclCommDestroy(ncclComm_t comm);
ncclResult_t ncclCommAbort(ncclComm_t comm);
ncclResult_t ncclCommCount(const ncclComm_t comm, int* count);
ncclResult_t ncclCommUserRank(const ncclComm_t comm, int* rank);
ncclResult_t ncclCommCuDevice(const ncclComm_t comm, int* device);
ncclResult_t ncclCommGetAsyncError(ncclComm_t comm, ncclResult_t* asyncError);
const char* ncclGetErrorString(ncclResult_t result);
const char* ncclGetLastError(ncclComm_t comm);

ncclResult_t ncclAllGather(const void* sendbuff, void* recvbuff, size_t sendcount,
                           ncclDataType_t datatype, ncclComm_t comm, cudaStream_t stream);
ncclResult_t ncclReduceScatter(const void* sendbuff, void* recvbuff, size_t recvcount,
                               ncclDataType_t datatype, ncclRedOp_t op, ncclComm_t comm,
                               cudaStream_t stream);
ncclResult_t ncclAllReduce(const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype,
                           ncclRedOp_t op, ncclComm_t comm, cudaStream_t stream);
ncclResult_t ncclBroadcast(const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype,
                           int root, ncclComm_t comm, cudaStream_t stream);
ncclResult_t ncclBcast(void* buff, size_t count, ncclDataType_t datatype, int root, ncclComm_t comm,
                       cudaStream_t stream);
ncclResult_t ncclSend(const void* sendbuff, size_t count, ncclDataType_t datatype, int peer,
                      ncclComm_t comm, cudaStream_t stream);
ncclResult_t ncclRecv(void* recvbuff, size_t count, ncclDataType_t datatype, int peer, ncclComm_t comm,
                      cudaStream_t stream);
ncclResult_t ncclGroupStart(void);
ncclResult_t ncclGroupEnd(void);

}  // extern "C"
