// A comm transport that records instead of moving data: every operation a schedule issues (kind,
// group, peers, elements, the bytes and messages comm.c counts for it, scope) in order, with every
// receive buffer zero-filled. A schedule's sequence of calls depends only on shapes, so running
// it once per simulated rank over this transport shows exactly what it would send and receive.
#pragma once
#include "comm/comm.h"

typedef struct {
    int layer;
    CommPhase phase;
    CommKind kind;
    MeshGroup group;
    int group_size, group_rank;
    CommType type;
    size_t count;                       // elements: per rank (gathers, reduce-scatters), per peer
                                        // (all-to-all), in the buffer (all-reduce, broadcast);
                                        // send/recv: the largest transfer
    int nsend, nrecv;                   // send/recv transfers (group ranks in send_peer, recv_peer)
    int send_peer[COMM_MAX_TRANSFERS], recv_peer[COMM_MAX_TRANSFERS];
    size_t send_count[COMM_MAX_TRANSFERS], recv_count[COMM_MAX_TRANSFERS];
    long long bytes, messages;          // what comm.c counted for this call
    int calls_before;                   // compute calls recorded before it was issued (the
                                        // overlap: what it travels beside), -1: not recorded
} RecordedOp;

typedef struct {
    Comm* comm;        // the counting wrapper around this transport
    RecordedOp* op;    // in issue order
    int n, cap;
    const int* calls;  // compute calls so far (a ComputeRecorder's n), NULL: not recorded
} CommRecorder;

// A Comm over the recording transport for `mesh` with scopes 0..num_layers-1; *rec receives the
// recorder (owned by the Comm: comm_destroy frees it, so copy what you need first).
Comm* record_comm_create(const Mesh* mesh, int num_layers, CommRecorder** rec);

// SP index of member `member` of group g as seen from this rank's mesh.
int record_sp_index(const Mesh* mesh, MeshGroup g, int member);
