// The CUDA backend's timeline clock (model/backend.h, comm/timeline.h): a mark on a stream is a
// timing event recorded there, resolved with cudaEventElapsedTime against the step's origin event
// once the step's work is done; a mark on the host track is CLOCK_MONOTONIC, relative to the host
// time of the origin (the trainer starts a step with the compute stream idle, so the origin event
// and the host clock agree there). Events are created only in reserve(), between steps.
//
// Inside a graph capture a mark is an event record node (cudaEventRecordExternal) recording a
// captured event, one per captured mark; at each launch the backend points those nodes at the
// events of the step slots the timeline gave the launch (cuda_clock_bind), so every launch records
// its own marks, which resolve like any other.
#include <stdlib.h>
#include <time.h>

#include "model/backend.h"
#include "model/backend_kernels_cuda.cuh"
#include "model/timeline_clock_cuda.cuh"

typedef struct {
    int capacity;
    cudaEvent_t* events;     // (capacity) timing events
    cudaEvent_t* captured;   // (capacity) what captured mark k's node records until bound
    double* host;            // (capacity) host seconds of host-track marks
    char* on_host;           // (capacity) 1: the slot is a host mark
    double origin_host;      // host seconds of slot 0
} CudaClock;

static CudaClock the_clock;   // one per process, like the backend's stream

// The host track is this address: never a stream.
static char host_track_tag;

static double host_seconds(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static void clock_mark(void* ctx, void* track, int slot) {
    CudaClock* c = (CudaClock*)ctx;
    if (track == &host_track_tag) {
        c->on_host[slot] = 1;
        c->host[slot] = host_seconds();
        return;
    }
    c->on_host[slot] = 0;
    cudaStream_t stream = track ? (cudaStream_t)track : cuda_backend_stream();
    CUDA_CHECK(cudaEventRecord(c->events[slot], stream));
    if (slot == 0) c->origin_host = host_seconds();
}

static int clock_capture_mark(void* ctx, void* track, int index) {
    CudaClock* c = (CudaClock*)ctx;
    if (track == &host_track_tag) return 0;   // no host code runs at a launch
    if (index >= c->capacity) return -1;
    cudaStream_t stream = track ? (cudaStream_t)track : cuda_backend_stream();
    CUDA_CHECK(cudaEventRecordWithFlags(c->captured[index], stream, cudaEventRecordExternal));
    return 1;
}

int cuda_clock_captured_index(cudaEvent_t event) {
    for (int k = 0; k < the_clock.capacity; k++)
        if (the_clock.captured[k] == event) return k;
    return -1;
}

void cuda_clock_bind(cudaGraphExec_t exec, const cudaGraphNode_t* nodes, const int* index, int n,
                     int first) {
    CudaClock* c = &the_clock;
    for (int i = 0; i < n; i++) {
        const int slot = first + index[i];
        CHECK(first < 0 || slot < c->capacity, "caller bug", "graph mark slot %d beyond the "
              "clock's %d", slot, c->capacity);
        CUDA_CHECK(cudaGraphExecEventRecordNodeSetEvent(exec, nodes[i], first >= 0 ? c->events[slot]
                                                                               : c->captured[index[i]]));
        if (first >= 0) c->on_host[slot] = 0;
    }
}

static void clock_resolve(void* ctx, int n, double* seconds) {
    CudaClock* c = (CudaClock*)ctx;
    for (int i = 0; i < n; i++) {
        if (c->on_host[i]) {
            seconds[i] = c->host[i] - c->origin_host;
            continue;
        }
        float ms = 0;
        // After the step's read the compute stream is idle: most events have run, and a query
        // (which never blocks) spares the host a synchronisation per mark.
        const cudaError_t q = cudaEventQuery(c->events[i]);
        if (q == cudaErrorNotReady)
            CUDA_CHECK(cudaEventSynchronize(c->events[i]));
        else
            CUDA_CHECK(q);
        CUDA_CHECK(cudaEventElapsedTime(&ms, c->events[0], c->events[i]));
        seconds[i] = ms * 1e-3;
    }
}

static void clock_reserve(void* ctx, int n) {
    CudaClock* c = (CudaClock*)ctx;
    if (n <= c->capacity) return;
    c->events = (cudaEvent_t*)realloc(c->events, sizeof(cudaEvent_t) * n);
    c->captured = (cudaEvent_t*)realloc(c->captured, sizeof(cudaEvent_t) * n);
    c->host = (double*)realloc(c->host, sizeof(double) * n);
    c->on_host = (char*)realloc(c->on_host, (size_t)n);
    if (!c->events || !c->captured || !c->host || !c->on_host)
        FAIL("run with --timeline 0", "out of host memory for %d timeline marks", n);
    for (int i = c->capacity; i < n; i++) {
        CUDA_CHECK(cudaEventCreate(&c->events[i]));
        CUDA_CHECK(cudaEventCreate(&c->captured[i]));
    }
    c->capacity = n;
}

static const TimelineClock cuda_clock = {clock_mark, clock_resolve, clock_reserve,
                                         clock_capture_mark};

int gpt_backend_clock(BackendClock* out) {
    out->clock = &cuda_clock;
    out->ctx = &the_clock;
    out->compute_track = cuda_backend_stream();
    out->host_track = &host_track_tag;
    return 1;
}
