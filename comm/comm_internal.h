// Internal to the comm layer (comm.c: scopes, counters, dispatch; comm_watchdog.c: the hang
// watchdog; comm_spans.c: the timeline record; comm_names.c: names of the enumerations): what each
// part gives the others. comm.c uses the other three, comm_spans.c the watchdog and the names.
#pragma once
#include "comm/comm.h"

// What an operation was, for the watchdog's message.
typedef struct {
    CommKind kind;
    MeshGroup group;
    int layer;
    CommPhase phase;
    unsigned long long order;   // operations started before it, over every group
} WatchedOp;

// What a stream capture started (comm_capture_begin .. comm_capture_end), added again at each
// launch of its graph (comm_replayed).
struct CommCapture {
    CommCount* counts;   // what its operations counted, laid out as Comm.counts
    WatchedOp* ops;      // its operations in the order started (order unused)
    int nops, cap;
};

// --- comm_watchdog.c -------------------------------------------------------------------------------
struct CommWatch* comm_watch_create(void);
// The operations a graph launch issued (comm_replayed), started in this order.
void comm_watch_replay(Comm* comm, const WatchedOp* ops, int n);
// Notes the operation just started on g, and its request (NULL: complete already).
void comm_watch_start(Comm* comm, CommKind kind, MeshGroup g, CommRequest* req);
// Waits for req, under the watchdog wherever the host waits (host = 1, or a transport whose
// waits block the host), and ends its record.
void comm_transport_wait(Comm* comm, CommRequest* req, int host);

// --- comm_spans.c ----------------------------------------------------------------------------------
// Marks taken before an operation is handed to the transport.
typedef struct {
    int issue;    // host track
    int flight;   // compute track: the operation may start once compute reaches this point
} IssueMarks;

IssueMarks comm_issue_begin(Comm* comm);
// The issue recorded; with comm_set_overlap(comm, 0) the operation is waited for at once.
CommRequest* comm_issue_end(Comm* comm, IssueMarks m, CommKind kind, MeshGroup g, long long bytes,
                            CommRequest* req);
// Waits for req (host = 1: the host waits) and records the wait and any open flight span.
void comm_traced_wait(Comm* comm, CommRequest* req, int host);
// A blocking host operation (sums of host values, barriers): flight and wait on the host track.
void comm_host_span(Comm* comm, IssueMarks m, CommKind kind, MeshGroup g, long long bytes);
