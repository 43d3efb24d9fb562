// Internal to the timeline (timeline.c records, timeline_trace.c writes and merges the Chrome
// trace): the timeline's state and what both parts use.
#pragma once
#include <stddef.h>

#include "comm/timeline.h"

typedef struct {
    char* name;
    void* clock_track;
} Track;

// A span of the current step, in slots; strings are interned (owned by the timeline).
typedef struct {
    TimelineKind kind;
    int track, begin, end, layer;
    long long bytes;
    const char *name, *comm_kind, *group, *phase;
} Span;

// A span kept for the trace: wall-clock begin (ns since the epoch) and duration in ns, integers
// so that the printed microseconds are exact.
typedef struct {
    TimelineKind kind;
    int track, step, layer;
    long long bytes, ts_ns, dur_ns;
    const char *name, *comm_kind, *group, *phase;
} Event;

typedef struct {
    double a, b;
} Interval;

// Captured slots (timeline_mark inside a capture) are CAPTURED_SLOT_BASE + the template's index.
#define CAPTURED_SLOT_BASE (1 << 28)

// The template of a capture (timeline_capture.c): marks' tracks and spans naming mark indices.
struct TimelineCapture {
    int* track;
    int nmarks, marks_cap;
    Span* spans;
    int nspans, spans_cap;
    int dropped;   // marks beyond the clock's room
};

struct Timeline {
    const TimelineClock* clock;
    void* clock_ctx;
    int rank, world_size;
    Track* tracks;
    int ntracks, tracks_cap;
    // The current step.
    int in_step, step;
    long long origin_wall_ns;
    int* mark_track;      // track of each slot
    double* seconds;      // resolved slots
    int nmarks, marks_cap;   // marks_cap: what the clock has room for (the last one kept for the end)
    int dropped_marks;
    Span* spans;
    int nspans, spans_cap;
    Interval* scratch;    // the interval lists of the fractions: 5 per span at most
    int scratch_cap;
    // Interned label strings: open addressing, a power-of-two table.
    char** strings;
    size_t nstrings, strings_cap;
    // The trace.
    Event* events;
    long nevents, events_cap, max_events, dropped_events;
    TimelineCapture* capture;   // open capture (timeline_capture_begin), NULL: none
    // Sums over the steps ended.
    int steps, last_step;
    double sum_step_s, sum_busy_s, sum_wait_s, sum_exposed_s;
    long long sum_bytes, sum_dropped_marks;
};

// realloc that ends the job on failure, naming what grew (as xmalloc does).
void* timeline_grow(void* p, size_t count, size_t size, const char* what);
// Appends s to an array of spans grown by doubling.
void timeline_push_span(Span** spans, int* n, int* cap, Span s);
