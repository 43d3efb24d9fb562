// The communication layer: one interface, one implementation per transport (comm_mpi.c on host
// memory; comm_nccl.cu and comm_staged.cu on device memory, comm/comm_device.h). Schedules call the comm_*
// functions below; they count every call and dispatch to the backend's CommOps.
//
// Buffers are opaque to this layer (host memory for "mpi", device memory for "nccl" and
// "mpi-staged"); counts are in elements of a CommType. Groups are the mesh groups of comm/mesh.h;
// peers and roots are ranks inside the group. Every operation has an asynchronous form that
// returns a request and a blocking form; "complete" means complete in stream order on a device
// transport (work the caller enqueues later on the comm's stream sees the result).
//
// Counting, per rank, per (layer, phase) scope and per kind. "bytes" are the bytes this rank
// RECEIVES from other ranks in the bandwidth-optimal algorithm, independent of what the
// transport does internally; "messages" the number of such receptions; "calls" the API calls.
// With n ranks in the group and e bytes per element:
//   all-gather      count per rank           bytes (n-1)*count*e        messages n-1
//   reduce-scatter  count per rank (result)  bytes (n-1)*count*e        messages n-1
//   all-reduce      count                    bytes 2*(n-1)*count*e / n  messages 2*(n-1)
//                   (reduce-scatter then all-gather; integer division)
//   all-to-all      count per peer           bytes (n-1)*count*e        messages n-1
//   send/recv       each receive from a peer other than this rank: its bytes, one message
//   broadcast       count                    bytes count*e (0 on root)  messages 1 (0 on root)
//   barrier                                  bytes 0                    messages 0
// These match the closed-form volumes of attention2d.md (which counts elements received).
#pragma once
#include <stddef.h>

#include "comm/mesh.h"
#include "comm/timeline.h"

#ifdef __cplusplus
extern "C" {
#endif

// COMM_BF16: bfloat16 (sums are done in fp32 and rounded to nearest even per addition).
typedef enum { COMM_F32, COMM_F64, COMM_I32, COMM_U8, COMM_BF16, COMM_NTYPES } CommType;
#ifdef GPT_REAL_DOUBLE
#define COMM_REAL COMM_F64
#else
#define COMM_REAL COMM_F32
#endif

typedef enum {
    COMM_ALL_GATHER, COMM_REDUCE_SCATTER, COMM_ALL_REDUCE, COMM_ALL_TO_ALL,
    COMM_SEND_RECV, COMM_BROADCAST, COMM_BARRIER, COMM_NKINDS
} CommKind;

typedef enum { COMM_FORWARD, COMM_BACKWARD, COMM_OTHER, COMM_NPHASES } CommPhase;
// The layer of a scope outside any layer (setup, gradient reduction, test bookkeeping).
#define COMM_NO_LAYER (-1)

typedef struct {
    long long bytes, messages, calls;
} CommCount;

// One point-to-point transfer of a grouped send/recv. Transfers between the same two ranks
// match in the order they are posted (in and across batches).
typedef struct {
    int peer;      // rank in the group
    void* buf;     // sends read it, receives write it
    size_t count;  // elements
} CommTransfer;

// Most transfers (sends + receives) in one batch, and operations in flight at once.
enum { COMM_MAX_TRANSFERS = 16, COMM_MAX_INFLIGHT = 64 };
// Operations per group whose completion a device transport can still tell (CommOps.completed);
// the watchdog names the oldest one not complete among them.
enum { COMM_WATCH_OPS = 256 };
// Seconds a host wait for communication may last before the job is aborted (comm_set_timeout).
#define COMM_DEFAULT_TIMEOUT_S 300.0

typedef struct CommRequest CommRequest;   // an operation in flight, owned by the transport

// What a transport implements. ctx is the transport's state; none of these count anything.
// Every operation starts and returns a request, or NULL when it is complete already (host
// transports complete collectives at once). Device transports order an operation after the work
// enqueued so far on the backend's compute stream, which they are given at creation
// (comm/comm_device.h); a request is then done "in stream order".
typedef struct {
    // send: count elements; recv: n*count, block i from group rank i.
    CommRequest* (*all_gather)(void* ctx, MeshGroup g, const void* send, void* recv, size_t count,
                               CommType t);
    // send: n*count, block i summed over the group lands on rank i; recv: count.
    CommRequest* (*reduce_scatter_sum)(void* ctx, MeshGroup g, const void* send, void* recv,
                                       size_t count, CommType t);
    // buf: count elements, summed over the group in place.
    CommRequest* (*all_reduce_sum)(void* ctx, MeshGroup g, void* buf, size_t count, CommType t);
    // send: n*count, block j goes to rank j; recv: n*count, block j came from rank j.
    CommRequest* (*all_to_all)(void* ctx, MeshGroup g, const void* send, void* recv, size_t count,
                               CommType t);
    // Posts all sends and receives together.
    CommRequest* (*send_recv)(void* ctx, MeshGroup g, CommType t, const CommTransfer* sends,
                              int nsend, const CommTransfer* recvs, int nrecv);
    CommRequest* (*broadcast)(void* ctx, MeshGroup g, void* buf, size_t count, CommType t,
                              int root);
    // host = 0: later work on the stream waits for req (the host does not, where device_waits);
    // host = 1: returns when req is complete. Either way req is released. comm.c calls it once
    // test said complete wherever the host would block (so it never blocks on other ranks).
    void (*wait)(void* ctx, CommRequest* req, int host);
    // 1 when req is complete (on the host: a host wait returns at once), 0 not yet; never blocks,
    // makes progress. Fails (fail.h) on an error the transport learns of meanwhile.
    int (*test)(void* ctx, CommRequest* req);
    // Sum of count elements of HOST memory over the group, in place (loss sums and norms on every
    // transport): started; buf is the transport's until the request is waited with host = 1.
    CommRequest* (*all_reduce_host_sum)(void* ctx, MeshGroup g, void* buf, size_t count,
                                        CommType t);
    CommRequest* (*barrier)(void* ctx, MeshGroup g);
    void (*destroy)(void* ctx);
    // The stream operations on group g run on (a cudaStream_t), for timeline marks; NULL (or a
    // NULL function) where operations run on the host or on the compute stream.
    void* (*stream)(void* ctx, MeshGroup g);
    // Device transports whose wait with host = 0 leaves the host free (nccl), NULL elsewhere:
    // fence: a request complete once the compute stream has done the work enqueued so far;
    // completed: how many of the operations started on group g (every op above on g counts one,
    // in order) are known complete, a lower bound that only grows.
    CommRequest* (*fence)(void* ctx);
    unsigned long long (*completed)(void* ctx, MeshGroup g);
    // Device transports whose operations can be captured in a CUDA graph (nccl), NULL elsewhere.
    // Operations started while the compute stream is capturing are not counted by completed;
    // replayed counts the ops operations of group g that a launch of the graph issued, complete
    // once the compute stream has done the launch.
    void (*replayed)(void* ctx, MeshGroup g, int ops);
    // Device transports (nccl), NULL elsewhere: req, the operation of group g started last, is
    // complete only once g's stream reaches its current end, after what the caller enqueued there
    // since (a timeline mark), so that a wait for req waits for that too: a graph capture must
    // join every node it holds, the marks included.
    void (*complete_here)(void* ctx, MeshGroup g, CommRequest* req);
} CommOps;

typedef struct {
    const CommOps* ops;
    void* ctx;
    const char* name;      // transport: "mpi", "nccl" or "mpi-staged"
    int device_memory;     // 1: buffers are device memory (nccl, mpi-staged)
    Mesh mesh;
    int num_layers;        // scopes 0..num_layers-1 plus COMM_NO_LAYER
    int layer;             // current scope
    CommPhase phase;
    CommCount* counts;     // (num_layers + 1) x COMM_NPHASES x COMM_NKINDS; last layer = none
    struct CommTrace* trace;   // spans for a timeline (comm_set_timeline), NULL: none
    int serial;                // 1: every operation is waited for as it starts (comm_set_overlap)
    double timeout_s;          // watchdog limit of a host wait (comm_set_timeout); 0: none
    struct CommWatch* watch;   // operations started and in flight, for the watchdog's message
    struct CommCapture* capture;   // an open capture (comm_capture_begin), NULL: none
} Comm;

// For transports: wraps ops and ctx into a Comm that counts. comm_destroy calls ops->destroy.
Comm* comm_create(const CommOps* ops, void* ctx, const char* name, int device_memory,
                  const Mesh* mesh, int num_layers);
void comm_destroy(Comm* comm);

// Records every operation into tl from now on (NULL: stop): on the host track (compute_track
// on the CPU) the time spent issuing it, on its group's track ("comm row", ...) its flight from
// the point the compute track reaches the issue to its completion (the end of its stream's work on
// a device transport; the return of the wait on a host transport, which learns of completion only
// there), and on the compute track every comm_wait (the stall of the compute stream, or of the
// host on the CPU). Labels: kind, group, counted bytes, layer, phase of the scope.
void comm_set_timeline(Comm* comm, Timeline* tl, void* compute_track, void* host_track);
// Before the timeline's step ends: operations still in flight (e.g. ZeRO-1's parameter all-gather
// overlapping the next step) get a flight span up to now; their waits are recorded as usual.
void comm_close_spans(Comm* comm);

size_t comm_type_size(CommType t);
const char* comm_kind_name(CommKind kind);
const char* comm_phase_name(CommPhase phase);

static inline int comm_size(const Comm* comm, MeshGroup g) { return mesh_group_size(&comm->mesh, g); }
static inline int comm_rank(const Comm* comm, MeshGroup g) { return mesh_group_rank(&comm->mesh, g); }

// Scope that later calls are counted under. layer: 0..num_layers-1 or COMM_NO_LAYER.
void comm_set_scope(Comm* comm, int layer, CommPhase phase);
// For a schedule that counts under its own scope and must leave the caller's as it was:
// `CommScope saved = comm_enter_scope(comm, layer, COMM_FORWARD); ... comm_leave_scope(comm, saved);`
typedef struct {
    int layer;
    CommPhase phase;
} CommScope;
CommScope comm_enter_scope(Comm* comm, int layer, CommPhase phase);
void comm_leave_scope(Comm* comm, CommScope saved);
// Counters of one scope and kind; comm_count_total sums the kinds.
CommCount comm_count(const Comm* comm, int layer, CommPhase phase, CommKind kind);
CommCount comm_count_total(const Comm* comm, int layer, CommPhase phase);
void comm_reset_counts(Comm* comm);
// overlap = 0 makes every *_start wait for its operation at once (in stream order) and return
// NULL: the plain, non-overlapped version of every schedule written with *_start / comm_wait,
// with the same buffers and the same results, for comparison. Default 1.
void comm_set_overlap(Comm* comm, int overlap);
// The hang watchdog. Every host wait for communication (comm_wait_host, comm_all_reduce_host,
// comm_barrier, the waits of host transports, comm_wait_compute) polls with a deadline: past
// seconds (> 0; 0 = no limit; default COMM_DEFAULT_TIMEOUT_S) it prints "error: rank R: KIND on
// group G (world ranks ...) in layer L PHASE did not complete within S s (--comm-timeout);
// another rank is stalled or dead" and ends the job through the fail hook (MPI_Abort; the NCCL
// transport aborts its communicators first). A wait that merely lasts (a straggler) spins
// briefly, then sleeps with backoff up to 1 ms between polls.
void comm_set_timeout(Comm* comm, double seconds);
// The polling loop of every such wait, for transports' own waits too (NCCL's non-blocking
// initialisation): calls done(arg) until it returns nonzero, spinning (with sched_yield) for a
// short while, then sleeping with backoff up to 1 ms between calls. Each time timeout_s (> 0)
// passes, expired(arg) (NULL: give up) says whether to wait another period (nonzero). Returns 0
// when done, -1 when it gave up.
int comm_poll(int (*done)(void* arg), int (*expired)(void* arg), void* arg, double timeout_s);
// The host waits until the compute stream has done the work enqueued so far (e.g. before it reads
// the step's results), under the watchdog: on the device transport whose communication runs on
// its own streams (nccl) the deadline applies while an operation is incomplete, and names the
// oldest; time spent on compute alone never counts. Returns at once on host transports.
void comm_wait_compute(Comm* comm);
// Bytes counted so far over every scope and kind.
long long comm_count_bytes(const Comm* comm);

// CUDA graphs. Between comm_capture_begin and comm_capture_end the backend's compute stream is
// being captured: the operations started meanwhile are recorded in the graph, not run, so what
// they count goes to the capture instead of the counters, and the watchdog does not wait for
// them. After each launch of the graph, comm_replayed adds the capture's counts and tells the
// watchdog of its operations, in their order, complete once the compute stream has done the
// launch. The transport must have CommOps.replayed when the capture started any operation
// (comm_capture_end refuses it otherwise).
typedef struct CommCapture CommCapture;
void comm_capture_begin(Comm* comm);
CommCapture* comm_capture_end(Comm* comm);
void comm_replayed(Comm* comm, const CommCapture* capture);
int comm_capture_ops(const CommCapture* capture);   // operations it started
int comm_capturable(const Comm* comm);   // 1: the transport's operations can be captured
void comm_capture_free(CommCapture* capture);

// Asynchronous forms: start, then comm_wait (device-ordered: work enqueued later on the comm's
// stream sees the result, the host goes on) or comm_wait_host (the host waits). Until then the
// buffers belong to the transport. NULL requests (already complete) may be waited on.
CommRequest* comm_all_gather_start(Comm* comm, MeshGroup g, const void* send, void* recv,
                                   size_t count, CommType t);
CommRequest* comm_reduce_scatter_sum_start(Comm* comm, MeshGroup g, const void* send, void* recv,
                                           size_t count, CommType t);
CommRequest* comm_all_reduce_sum_start(Comm* comm, MeshGroup g, void* buf, size_t count,
                                       CommType t);
CommRequest* comm_all_to_all_start(Comm* comm, MeshGroup g, const void* send, void* recv,
                                   size_t count, CommType t);
// Grouped send/recv (transfers of one batch are posted together).
CommRequest* comm_start(Comm* comm, MeshGroup g, CommType t, const CommTransfer* sends,
                        int nsend, const CommTransfer* recvs, int nrecv);
void comm_wait(Comm* comm, CommRequest* req);
void comm_wait_host(Comm* comm, CommRequest* req);

// Blocking forms (start + comm_wait): complete in stream order when they return.
void comm_all_gather(Comm* comm, MeshGroup g, const void* send, void* recv, size_t count,
                     CommType t);
void comm_reduce_scatter_sum(Comm* comm, MeshGroup g, const void* send, void* recv,
                             size_t count, CommType t);
void comm_all_reduce_sum(Comm* comm, MeshGroup g, void* buf, size_t count, CommType t);
void comm_all_to_all(Comm* comm, MeshGroup g, const void* send, void* recv, size_t count,
                     CommType t);
void comm_broadcast(Comm* comm, MeshGroup g, void* buf, size_t count, CommType t, int root);
// Sum over the group of count elements of HOST memory, on every transport (counted as an
// all-reduce); the host waits.
void comm_all_reduce_host(Comm* comm, MeshGroup g, void* buf, size_t count, CommType t);
void comm_barrier(Comm* comm, MeshGroup g);

#ifdef __cplusplus
}
#endif
