// The per-rank timeline: tracks, marks on a clock (a device's events or the host's), the spans of
// a step and its fractions (compute, exposed communication, waiting), the totals, and the spans
// kept for the Chrome trace, which timeline_trace.c writes and merges.
#include "comm/timeline.h"

#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "comm/fail.h"
#include "comm/timeline_internal.h"

// Marks reserved at creation: a few layers' worth, so most runs never drop a mark.
#define INITIAL_MARKS 256

static const char* const kind_names[TL_NKINDS] = {"compute", "comm-issue", "comm-flight", "wait"};

const char* timeline_kind_name(TimelineKind kind) {
    return (kind >= 0 && kind < TL_NKINDS) ? kind_names[kind] : "?";
}

// realloc that ends the job on failure, naming what grew (as xmalloc does).
void* timeline_grow(void* p, size_t count, size_t size, const char* what) {
    CHECK(count == 0 || size <= SIZE_MAX / count, "", "%s: %zu x %zu bytes overflow", what, count, size);
    const size_t bytes = count * size;
    void* q = realloc(p, bytes > 0 ? bytes : 1);
    CHECK(q, "out of memory", "cannot grow %s to %zu bytes", what, count * size);
    return q;
}

// ---------------------------------------------------------------------------------------------
// The host clock.

struct TimelineHostClock {
    double* t;
    int cap;
};

static double monotonic_s(void) {
    struct timespec ts;
    CHECK(clock_gettime(CLOCK_MONOTONIC, &ts) == 0, "", "clock_gettime(CLOCK_MONOTONIC): %s",
          strerror(errno));
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static void host_mark(void* ctx, void* track, int slot) {
    TimelineHostClock* hc = ctx;
    CHECK(slot >= 0 && slot < hc->cap, "the timeline reserves before marking",
          "host clock: slot %d outside the %d reserved", slot, hc->cap);
    hc->t[slot] = monotonic_s();
}

static void host_resolve(void* ctx, int n, double* seconds) {
    const TimelineHostClock* hc = ctx;
    for (int i = 0; i < n; i++) seconds[i] = hc->t[i] - hc->t[0];
}

static void host_reserve(void* ctx, int n) {
    TimelineHostClock* hc = ctx;
    if (n <= hc->cap) return;
    hc->t = timeline_grow(hc->t, (size_t)n, sizeof *hc->t, "host clock marks");
    hc->cap = n;
}

const TimelineClock timeline_host_clock = {host_mark, host_resolve, host_reserve, NULL};

TimelineHostClock* timeline_host_clock_create(void) {
    return xcalloc(1, sizeof(TimelineHostClock), "host clock");
}

void timeline_host_clock_destroy(TimelineHostClock* hc) {
    if (!hc) return;
    free(hc->t);
    free(hc);
}

// ---------------------------------------------------------------------------------------------
// Creation, tracks, interned strings.

// Gives the clock (and the timeline's own slot arrays) room for n marks; between steps only.
static void grow_marks(Timeline* tl, int n) {
    if (n <= tl->marks_cap) return;
    tl->clock->reserve(tl->clock_ctx, n);
    tl->mark_track = timeline_grow(tl->mark_track, (size_t)n, sizeof *tl->mark_track, "timeline marks");
    tl->seconds = timeline_grow(tl->seconds, (size_t)n, sizeof *tl->seconds, "timeline marks");
    tl->marks_cap = n;
}

Timeline* timeline_create(const TimelineClock* clock, void* clock_ctx, int rank, int world_size) {
    CHECK(clock && clock->mark && clock->resolve && clock->reserve, "",
          "timeline_create: a clock with mark, resolve and reserve is required");
    CHECK(world_size >= 1 && rank >= 0 && rank < world_size, "",
          "timeline_create: rank %d of world size %d", rank, world_size);
    Timeline* tl = xcalloc(1, sizeof *tl, "timeline");
    tl->clock = clock;
    tl->clock_ctx = clock_ctx;
    tl->rank = rank;
    tl->world_size = world_size;
    tl->max_events = TIMELINE_DEFAULT_MAX_EVENTS;
    tl->last_step = -1;
    grow_marks(tl, INITIAL_MARKS);
    return tl;
}

void timeline_capture_free(TimelineCapture* cap) {
    if (!cap) return;
    free(cap->track);
    free(cap->spans);
    free(cap);
}

void timeline_destroy(Timeline* tl) {
    if (!tl) return;
    timeline_capture_free(tl->capture);
    for (int i = 0; i < tl->ntracks; i++) free(tl->tracks[i].name);
    for (size_t i = 0; i < tl->strings_cap; i++) free(tl->strings[i]);
    free(tl->tracks);
    free(tl->mark_track);
    free(tl->seconds);
    free(tl->spans);
    free(tl->scratch);
    free(tl->strings);
    free(tl->events);
    free(tl);
}

void timeline_set_max_events(Timeline* tl, long max_events) {
    if (!tl) return;
    CHECK(max_events >= 0, "", "timeline_set_max_events: %ld", max_events);
    tl->max_events = max_events;
}

void timeline_reserve_marks(Timeline* tl, int n) {
    if (!tl) return;
    CHECK(!tl->in_step, "call it between steps", "timeline_reserve_marks inside step %d", tl->step);
    grow_marks(tl, n);
}

int timeline_track(Timeline* tl, const char* name, void* clock_track) {
    if (!tl) return -1;
    CHECK(name, "", "timeline_track: a name is required");
    if (tl->ntracks == tl->tracks_cap) {
        tl->tracks_cap = tl->tracks_cap ? 2 * tl->tracks_cap : 8;
        tl->tracks = timeline_grow(tl->tracks, (size_t)tl->tracks_cap, sizeof *tl->tracks, "timeline tracks");
    }
    const size_t len = strlen(name);
    char* copy = xmalloc(len + 1, "track name");
    memcpy(copy, name, len + 1);
    tl->tracks[tl->ntracks] = (Track){copy, clock_track};
    return tl->ntracks++;
}

// FNV-1a: spreads the few hundred distinct labels of a run over the table.
static size_t hash_string(const char* s) {
    uint64_t h = 1469598103934665603ull;
    for (; *s; s++) h = (h ^ (unsigned char)*s) * 1099511628211ull;
    return (size_t)h;
}

// Slot of s in a table of cap (a power of two) entries: where it is, or the empty slot it goes to.
static size_t string_slot(char* const* table, size_t cap, const char* s) {
    size_t i = hash_string(s) & (cap - 1);
    while (table[i] && strcmp(table[i], s) != 0) i = (i + 1) & (cap - 1);
    return i;
}

// Doubles the table (at half load), rehashing every string.
static void grow_strings(Timeline* tl) {
    const size_t cap = tl->strings_cap ? 2 * tl->strings_cap : 64;
    char** table = xcalloc(cap, sizeof *table, "timeline label strings");
    for (size_t i = 0; i < tl->strings_cap; i++)
        if (tl->strings[i]) table[string_slot(table, cap, tl->strings[i])] = tl->strings[i];
    free(tl->strings);
    tl->strings = table;
    tl->strings_cap = cap;
}

// The timeline's copy of s (one per distinct string, so labels settle after the first step).
static const char* intern(Timeline* tl, const char* s) {
    if (!s) return NULL;
    if (2 * (tl->nstrings + 1) > tl->strings_cap) grow_strings(tl);
    const size_t i = string_slot(tl->strings, tl->strings_cap, s);
    if (!tl->strings[i]) {
        const size_t len = strlen(s);
        tl->strings[i] = xmalloc(len + 1, "timeline label");
        memcpy(tl->strings[i], s, len + 1);
        tl->nstrings++;
    }
    return tl->strings[i];
}

// ---------------------------------------------------------------------------------------------
// Steps, marks, spans.

static long long realtime_ns(void) {
    struct timespec ts;
    CHECK(clock_gettime(CLOCK_REALTIME, &ts) == 0, "", "clock_gettime(CLOCK_REALTIME): %s",
          strerror(errno));
    return (long long)ts.tv_sec * 1000000000ll + ts.tv_nsec;
}

static void check_track(const Timeline* tl, int track, const char* what) {
    CHECK(track >= 0 && track < tl->ntracks, "create tracks with timeline_track",
          "%s: track %d of %d", what, track, tl->ntracks);
}

// Takes the next slot on track; the caller made sure there is room.
static int take_mark(Timeline* tl, int track) {
    const int slot = tl->nmarks++;
    tl->mark_track[slot] = track;
    tl->clock->mark(tl->clock_ctx, tl->tracks[track].clock_track, slot);
    return slot;
}

// Inside a capture: a captured mark on track (a captured slot), or -1 where the clock took none.
static int capture_mark(Timeline* tl, int track) {
    TimelineCapture* c = tl->capture;
    const int taken = tl->clock->capture_mark(tl->clock_ctx, tl->tracks[track].clock_track, c->nmarks);
    if (taken < 0) c->dropped++;
    if (taken <= 0) return -1;
    if (c->nmarks == c->marks_cap) {
        c->marks_cap = c->marks_cap ? 2 * c->marks_cap : 64;
        c->track = timeline_grow(c->track, (size_t)c->marks_cap, sizeof *c->track, "captured marks");
    }
    c->track[c->nmarks] = track;
    return CAPTURED_SLOT_BASE + c->nmarks++;
}

void timeline_step_begin(Timeline* tl, int step) {
    if (!tl) return;
    CHECK(!tl->in_step, "end every step with timeline_step_end",
          "timeline_step_begin(%d) inside step %d", step, tl->step);
    CHECK(tl->ntracks > 0, "create the compute track first", "timeline_step_begin: no tracks");
    tl->in_step = 1;
    tl->step = step;
    tl->nmarks = 0;
    tl->nspans = 0;
    tl->dropped_marks = 0;
    tl->origin_wall_ns = realtime_ns();
    take_mark(tl, TIMELINE_COMPUTE_TRACK);
}

int timeline_mark(Timeline* tl, int track) {
    if (!tl) return -1;
    check_track(tl, track, "timeline_mark");
    if (!tl->in_step) return -1;
    if (tl->capture) return capture_mark(tl, track);
    // The last slot is the step-end mark's.
    if (tl->nmarks >= tl->marks_cap - 1) {
        tl->dropped_marks++;
        return -1;
    }
    return take_mark(tl, track);
}

void timeline_push_span(Span** spans, int* n, int* cap, Span s) {
    if (*n == *cap) {
        *cap = *cap ? 2 * *cap : 64;
        *spans = timeline_grow(*spans, (size_t)*cap, sizeof **spans, "timeline spans");
    }
    (*spans)[(*n)++] = s;
}

// Inside a capture: a span naming captured slots, added to the template.
static void capture_span(Timeline* tl, Span s) {
    TimelineCapture* c = tl->capture;
    // A span from before a capture into it (or out of it) would belong to no single launch.
    CHECK(c && s.begin >= CAPTURED_SLOT_BASE && s.end >= CAPTURED_SLOT_BASE &&
          s.begin < CAPTURED_SLOT_BASE + c->nmarks && s.end < CAPTURED_SLOT_BASE + c->nmarks,
          "spans name marks of one capture", "timeline_span: slots %d..%d are not both marks of "
          "the open capture", s.begin, s.end);
    s.begin -= CAPTURED_SLOT_BASE;
    s.end -= CAPTURED_SLOT_BASE;
    timeline_push_span(&c->spans, &c->nspans, &c->spans_cap, s);
}

void timeline_span(Timeline* tl, TimelineKind kind, int track, int begin_slot, int end_slot,
                   const TimelineLabel* label) {
    if (!tl) return;
    CHECK(kind >= 0 && kind < TL_NKINDS, "", "timeline_span: kind %d", (int)kind);
    check_track(tl, track, "timeline_span");
    if (begin_slot < 0 || end_slot < 0) return;
    const TimelineLabel none = {NULL, NULL, NULL, 0, -1, NULL};
    if (!label) label = &none;
    const Span s = {kind, track, begin_slot, end_slot, label->layer, label->bytes,
                    intern(tl, label->name), intern(tl, label->comm_kind),
                    intern(tl, label->group), intern(tl, label->phase)};
    if (begin_slot >= CAPTURED_SLOT_BASE || end_slot >= CAPTURED_SLOT_BASE) {
        capture_span(tl, s);
        return;
    }
    CHECK(tl->in_step && begin_slot < tl->nmarks && end_slot < tl->nmarks,
          "spans name marks of the current step", "timeline_span: slots %d..%d of %d marks%s",
          begin_slot, end_slot, tl->nmarks, tl->in_step ? "" : " (outside a step)");
    timeline_push_span(&tl->spans, &tl->nspans, &tl->spans_cap, s);
}

// ---------------------------------------------------------------------------------------------
// Fractions: unions and differences of interval lists.

static int interval_cmp(const void* x, const void* y) {
    const Interval *a = x, *b = y;
    return (a->a > b->a) - (a->a < b->a);
}

// Sorts v and merges overlapping intervals in place; returns the new count.
static int merge_intervals(Interval* v, int n) {
    if (n == 0) return 0;
    qsort(v, (size_t)n, sizeof *v, interval_cmp);
    int k = 0;
    for (int i = 1; i < n; i++) {
        if (v[i].a <= v[k].b) {
            if (v[i].b > v[k].b) v[k].b = v[i].b;
        } else {
            v[++k] = v[i];
        }
    }
    return k + 1;
}

// out = a minus b (both sorted and disjoint); returns the count (at most na + nb).
static int subtract_intervals(const Interval* a, int na, const Interval* b, int nb, Interval* out) {
    int n = 0, j = 0;
    for (int i = 0; i < na; i++) {
        double cur = a[i].a;
        const double end = a[i].b;
        while (j < nb && b[j].b <= cur) j++;   // a is sorted: these end before every later a too
        for (int k = j; k < nb && b[k].a < end && cur < end; k++) {
            if (b[k].a > cur) out[n++] = (Interval){cur, b[k].a};
            if (b[k].b > cur) cur = b[k].b;
        }
        if (cur < end) out[n++] = (Interval){cur, end};
    }
    return n;
}

static double total_length(const Interval* v, int n) {
    double s = 0;
    for (int i = 0; i < n; i++) s += v[i].b - v[i].a;
    return s;
}

// The spans of one kind, clipped to [0, S], empty ones left out; returns the merged count.
static int collect(const Timeline* tl, TimelineKind kind, double S, Interval* out) {
    int n = 0;
    for (int i = 0; i < tl->nspans; i++) {
        const Span* s = &tl->spans[i];
        if (s->kind != kind) continue;
        const double a = fmax(tl->seconds[s->begin], 0.0), b = fmin(tl->seconds[s->end], S);
        if (b > a) out[n++] = (Interval){a, b};   // false for NaN too
    }
    return merge_intervals(out, n);
}

typedef struct {
    double busy, wait, exposed;
} StepTimes;

// Busy compute, waiting and exposed communication of the current step (seconds resolved).
static StepTimes step_times(Timeline* tl, double S) {
    // C, W, F hold at most one interval per span; C - W at most |C| + |W|; F - B at most |F| + |B|.
    if (tl->scratch_cap < 5 * tl->nspans) {
        tl->scratch_cap = 5 * tl->spans_cap;
        tl->scratch = timeline_grow(tl->scratch, (size_t)tl->scratch_cap, sizeof *tl->scratch,
                                    "timeline intervals");
    }
    Interval* C = tl->scratch;
    const int nc = collect(tl, TL_COMPUTE, S, C);
    Interval* W = C + nc;
    const int nw = collect(tl, TL_WAIT, S, W);
    Interval* F = W + nw;
    const int nf = collect(tl, TL_COMM_FLIGHT, S, F);
    Interval* B = F + nf;
    const int nb = subtract_intervals(C, nc, W, nw, B);
    Interval* X = B + nb;
    const int nx = subtract_intervals(F, nf, B, nb, X);
    return (StepTimes){total_length(B, nb), total_length(W, nw), total_length(X, nx)};
}

// The step's spans, in wall-clock ns, appended to the trace (the whole step or none of it).
static void keep_events(Timeline* tl) {
    if (tl->nevents + tl->nspans > tl->max_events) {
        tl->dropped_events += tl->nspans;
        return;
    }
    if (tl->nevents + tl->nspans > tl->events_cap) {
        long cap = tl->events_cap ? 2 * tl->events_cap : 1024;
        while (cap < tl->nevents + tl->nspans) cap *= 2;
        tl->events = timeline_grow(tl->events, (size_t)cap, sizeof *tl->events, "timeline trace");
        tl->events_cap = cap;
    }
    for (int i = 0; i < tl->nspans; i++) {
        const Span* s = &tl->spans[i];
        const double t0 = tl->seconds[s->begin], t1 = tl->seconds[s->end];
        const double dur = t1 > t0 ? t1 - t0 : 0.0;
        const long long off = isfinite(t0) ? llround(t0 * 1e9) : 0;
        tl->events[tl->nevents++] = (Event){s->kind, s->track, tl->step, s->layer, s->bytes,
                                            tl->origin_wall_ns + off, llround(dur * 1e9),
                                            s->name, s->comm_kind, s->group, s->phase};
    }
}

static long long flight_bytes(const Timeline* tl) {
    long long bytes = 0;
    for (int i = 0; i < tl->nspans; i++)
        if (tl->spans[i].kind == TL_COMM_FLIGHT) bytes += tl->spans[i].bytes;
    return bytes;
}

TimelineStep timeline_step_end(Timeline* tl) {
    TimelineStep r = {0};
    if (!tl) return r;
    CHECK(tl->in_step, "start every step with timeline_step_begin", "timeline_step_end outside a step");
    CHECK(!tl->capture, "end the capture first", "timeline_step_end inside a capture");
    take_mark(tl, TIMELINE_COMPUTE_TRACK);   // marks_cap - 1 was kept for it
    tl->clock->resolve(tl->clock_ctx, tl->nmarks, tl->seconds);
    double S = 0;
    for (int i = 0; i < tl->nmarks; i++)
        if (tl->mark_track[i] == TIMELINE_COMPUTE_TRACK && tl->seconds[i] > S) S = tl->seconds[i];
    const StepTimes t = step_times(tl, S);
    keep_events(tl);
    r = (TimelineStep){tl->step, 1, S, 0, 0, 0, flight_bytes(tl), tl->dropped_marks};
    if (S > 0) {
        r.compute_frac = t.busy / S;
        r.exposed_comm_frac = t.exposed / S;
        r.wait_frac = t.wait / S;
    }
    tl->steps++;
    tl->last_step = tl->step;
    tl->sum_step_s += S;
    tl->sum_busy_s += t.busy;
    tl->sum_wait_s += t.wait;
    tl->sum_exposed_s += t.exposed;
    tl->sum_bytes += r.comm_bytes;
    tl->sum_dropped_marks += tl->dropped_marks;
    tl->in_step = 0;
    // A step that ran out of marks: room for all of them (doubled) from the next step on.
    const int wanted = tl->nmarks + tl->dropped_marks;
    if (tl->dropped_marks > 0) {
        int cap = tl->marks_cap;
        while (cap < wanted + 1) cap *= 2;
        grow_marks(tl, cap);
    }
    return r;
}

double timeline_mark_seconds(const Timeline* tl, int slot) {
    if (!tl || tl->in_step || tl->steps == 0 || slot < 0 || slot >= tl->nmarks) return -1;
    return tl->seconds[slot];
}

TimelineStep timeline_totals(const Timeline* tl) {
    TimelineStep r = {0};
    if (!tl) return r;
    r.step = tl->last_step;
    r.steps = tl->steps;
    r.step_s = tl->sum_step_s;
    r.comm_bytes = tl->sum_bytes;
    r.dropped_marks = (int)tl->sum_dropped_marks;
    if (tl->sum_step_s > 0) {
        r.compute_frac = tl->sum_busy_s / tl->sum_step_s;
        r.exposed_comm_frac = tl->sum_exposed_s / tl->sum_step_s;
        r.wait_frac = tl->sum_wait_s / tl->sum_step_s;
    }
    return r;
}
