// The comm layer's record on a timeline: each operation's issue, its flight on its group's track,
// and every wait for it, labelled with kind, group, counted bytes, layer and phase.
#include <stdio.h>
#include <stdlib.h>

#include "comm/comm_internal.h"
#include "comm/fail.h"

// An operation between its start and its wait: what its spans are labelled with.
typedef struct {
    CommRequest* req;     // NULL: free entry
    CommKind kind;
    MeshGroup group;
    long long bytes;
    int layer;
    CommPhase phase;
    int flight_begin;     // slot; -1 once its flight span is recorded
} Pending;

struct CommTrace {
    Timeline* tl;
    int compute, host;                 // track ids
    int group_track[MESH_NGROUPS];
    int device_streams;                // 1: operations run on the transport's streams
    Pending pending[COMM_MAX_INFLIGHT];
};

void comm_set_timeline(Comm* comm, Timeline* tl, void* compute_track, void* host_track) {
    free(comm->trace);
    comm->trace = NULL;
    if (!tl) return;
    struct CommTrace* tr = xcalloc(1, sizeof *tr, "comm trace");
    tr->tl = tl;
    tr->compute = timeline_track(tl, "compute", compute_track);
    tr->host = host_track == compute_track ? tr->compute : timeline_track(tl, "host", host_track);
    for (int g = 0; g < MESH_NGROUPS; g++) {
        void* stream = comm->ops->stream ? comm->ops->stream(comm->ctx, (MeshGroup)g) : NULL;
        if (stream) tr->device_streams = 1;
        char name[64];
        snprintf(name, sizeof name, "comm %s", mesh_group_name((MeshGroup)g));
        // Host transports: the group track only shows spans, its marks are host marks.
        tr->group_track[g] = timeline_track(tl, name, stream ? stream : host_track);
    }
    comm->trace = tr;
}

static TimelineLabel label_of(const Pending* p) {
    TimelineLabel l = {NULL, comm_kind_name(p->kind), mesh_group_name(p->group), p->bytes,
                       p->layer, comm_phase_name(p->phase)};
    return l;
}

IssueMarks comm_issue_begin(Comm* comm) {
    IssueMarks m = {-1, -1};
    struct CommTrace* tr = comm->trace;
    if (!tr) return m;
    m.issue = timeline_mark(tr->tl, tr->host);
    m.flight = tr->host == tr->compute ? m.issue : timeline_mark(tr->tl, tr->compute);
    return m;
}

// After the transport took the operation: its issue span, and its flight span where the end is
// known now (device streams; operations complete at once); otherwise the wait records it.
static CommRequest* record_issue(Comm* comm, IssueMarks m, CommKind kind, MeshGroup g,
                                 long long bytes, CommRequest* req) {
    struct CommTrace* tr = comm->trace;
    if (!tr) return req;
    Pending p = {req, kind, g, bytes, comm->layer, comm->phase, m.flight};
    const TimelineLabel label = label_of(&p);
    timeline_span(tr->tl, TL_COMM_ISSUE, tr->host, m.issue, timeline_mark(tr->tl, tr->host), &label);
    if (tr->device_streams || !req) {
        const int end = timeline_mark(tr->tl, req ? tr->group_track[g] : tr->host);
        // The request completes after the mark, so that waiting for it joins the mark's node.
        if (req && end >= 0 && comm->ops->complete_here) comm->ops->complete_here(comm->ctx, g, req);
        timeline_span(tr->tl, TL_COMM_FLIGHT, tr->group_track[g], m.flight, end, &label);
        p.flight_begin = -1;
    }
    if (!req) return req;
    for (int i = 0; i < COMM_MAX_INFLIGHT; i++) {
        if (!tr->pending[i].req) {
            tr->pending[i] = p;
            return req;
        }
    }
    FAIL("caller bug", "more than %d operations in flight", COMM_MAX_INFLIGHT);
}

// The issue recorded; with comm_set_overlap(comm, 0) the operation is waited for at once.
CommRequest* comm_issue_end(Comm* comm, IssueMarks m, CommKind kind, MeshGroup g,
                            long long bytes, CommRequest* req) {
    comm_watch_start(comm, kind, g, req);
    req = record_issue(comm, m, kind, g, bytes, req);
    if (req && comm->serial) {   // the plain schedule
        comm_traced_wait(comm, req, 0);
        return NULL;
    }
    return req;
}

// Waits for req (host = 1: the host waits) and records the wait and any open flight span.
void comm_traced_wait(Comm* comm, CommRequest* req, int host) {
    struct CommTrace* tr = comm->trace;
    if (!tr) {
        comm_transport_wait(comm, req, host);
        return;
    }
    const int track = host ? tr->host : tr->compute;
    const int begin = timeline_mark(tr->tl, track);
    comm_transport_wait(comm, req, host);
    const int end = timeline_mark(tr->tl, track);
    for (int i = 0; i < COMM_MAX_INFLIGHT; i++) {
        Pending* p = &tr->pending[i];
        if (p->req != req) continue;
        const TimelineLabel label = label_of(p);
        timeline_span(tr->tl, TL_WAIT, track, begin, end, &label);
        if (p->flight_begin >= 0)
            timeline_span(tr->tl, TL_COMM_FLIGHT, tr->group_track[p->group], p->flight_begin, end,
                          &label);
        p->req = NULL;
        return;
    }
}

void comm_close_spans(Comm* comm) {
    struct CommTrace* tr = comm->trace;
    if (!tr) return;
    for (int i = 0; i < COMM_MAX_INFLIGHT; i++) {
        Pending* p = &tr->pending[i];
        if (!p->req || p->flight_begin < 0) continue;
        const TimelineLabel label = label_of(p);
        timeline_span(tr->tl, TL_COMM_FLIGHT, tr->group_track[p->group], p->flight_begin,
                      timeline_mark(tr->tl, tr->host), &label);
        p->flight_begin = -1;
    }
}

// A blocking host operation (sums of host values, barriers): flight and wait on the host track.
void comm_host_span(Comm* comm, IssueMarks m, CommKind kind, MeshGroup g, long long bytes) {
    struct CommTrace* tr = comm->trace;
    if (!tr) return;
    Pending p = {NULL, kind, g, bytes, comm->layer, comm->phase, -1};
    const TimelineLabel label = label_of(&p);
    const int end = timeline_mark(tr->tl, tr->host);
    timeline_span(tr->tl, TL_COMM_FLIGHT, tr->group_track[g], m.issue, end, &label);
    timeline_span(tr->tl, TL_WAIT, tr->host, m.issue, end, &label);
}
