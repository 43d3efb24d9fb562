#include "comm/timeline.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "checkpoints/atomic_file.h"
#include "comm/fail.h"

// Marks reserved at creation: a few layers' worth, so most runs never drop a mark.
#define INITIAL_MARKS 256
// The part writer hands its buffer to the file once it holds this much.
#define FLUSH_BYTES (1 << 16)
// The first line of a part; the merge reads it back with the same format.
#define PART_HEADER "{\"timeline_part\":1,\"rank\":%d,\"world_size\":%d,\"events\":%ld,\"summary\":"

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
    // Sums over the steps ended.
    int steps, last_step;
    double sum_step_s, sum_busy_s, sum_wait_s, sum_exposed_s;
    long long sum_bytes, sum_dropped_marks;
};

static const char* const kind_names[TL_NKINDS] = {"compute", "comm-issue", "comm-flight", "wait"};

const char* timeline_kind_name(TimelineKind kind) {
    return (kind >= 0 && kind < TL_NKINDS) ? kind_names[kind] : "?";
}

// realloc that ends the job on failure, naming what grew (as xmalloc does).
static void* grow(void* p, size_t count, size_t size, const char* what) {
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
    hc->t = grow(hc->t, (size_t)n, sizeof *hc->t, "host clock marks");
    hc->cap = n;
}

const TimelineClock timeline_host_clock = {host_mark, host_resolve, host_reserve};

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
    tl->mark_track = grow(tl->mark_track, (size_t)n, sizeof *tl->mark_track, "timeline marks");
    tl->seconds = grow(tl->seconds, (size_t)n, sizeof *tl->seconds, "timeline marks");
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

void timeline_destroy(Timeline* tl) {
    if (!tl) return;
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
        tl->tracks = grow(tl->tracks, (size_t)tl->tracks_cap, sizeof *tl->tracks, "timeline tracks");
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
    // The last slot is the step-end mark's.
    if (tl->nmarks >= tl->marks_cap - 1) {
        tl->dropped_marks++;
        return -1;
    }
    return take_mark(tl, track);
}

void timeline_span(Timeline* tl, TimelineKind kind, int track, int begin_slot, int end_slot,
                   const TimelineLabel* label) {
    if (!tl) return;
    CHECK(kind >= 0 && kind < TL_NKINDS, "", "timeline_span: kind %d", (int)kind);
    check_track(tl, track, "timeline_span");
    if (begin_slot < 0 || end_slot < 0) return;
    CHECK(tl->in_step && begin_slot < tl->nmarks && end_slot < tl->nmarks,
          "spans name marks of the current step", "timeline_span: slots %d..%d of %d marks%s",
          begin_slot, end_slot, tl->nmarks, tl->in_step ? "" : " (outside a step)");
    if (tl->nspans == tl->spans_cap) {
        tl->spans_cap = tl->spans_cap ? 2 * tl->spans_cap : 64;
        tl->spans = grow(tl->spans, (size_t)tl->spans_cap, sizeof *tl->spans, "timeline spans");
    }
    const TimelineLabel none = {NULL, NULL, NULL, 0, -1, NULL};
    if (!label) label = &none;
    tl->spans[tl->nspans++] = (Span){kind, track, begin_slot, end_slot, label->layer, label->bytes,
                                     intern(tl, label->name), intern(tl, label->comm_kind),
                                     intern(tl, label->group), intern(tl, label->phase)};
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
        tl->scratch = grow(tl->scratch, (size_t)tl->scratch_cap, sizeof *tl->scratch,
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
        tl->events = grow(tl->events, (size_t)cap, sizeof *tl->events, "timeline trace");
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

// ---------------------------------------------------------------------------------------------
// Writing: a growing text buffer, JSON strings, the part file.

typedef struct {
    char* data;
    size_t len, cap;
} Text;

static void text_reserve(Text* t, size_t more) {
    if (t->len + more + 1 <= t->cap) return;
    size_t cap = t->cap ? t->cap : 4096;
    while (cap < t->len + more + 1) cap *= 2;
    t->data = grow(t->data, cap, 1, "trace text");
    t->cap = cap;
}

static void __attribute__((format(printf, 2, 3))) text_printf(Text* t, const char* fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    const int n = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    CHECK(n >= 0, "", "vsnprintf failed for \"%s\"", fmt);
    text_reserve(t, (size_t)n);
    va_start(ap, fmt);
    vsnprintf(t->data + t->len, t->cap - t->len, fmt, ap);
    va_end(ap);
    t->len += (size_t)n;
}

static void text_put(Text* t, const char* s, size_t n) {
    text_reserve(t, n);
    memcpy(t->data + t->len, s, n);
    t->len += n;
    t->data[t->len] = 0;
}

// Length of the well-formed UTF-8 sequence at p (1..4; no overlong forms, surrogates or code
// points above U+10FFFF, which strict JSON readers refuse), or 0.
static size_t utf8_len(const unsigned char* p) {
    const unsigned c = p[0];
    if (c < 0x80) return 1;
    size_t len;
    unsigned lo = 0x80, hi = 0xbf;   // bounds of the second byte
    if (c >= 0xc2 && c <= 0xdf) len = 2;
    else if (c >= 0xe0 && c <= 0xef) { len = 3; if (c == 0xe0) lo = 0xa0; if (c == 0xed) hi = 0x9f; }
    else if (c >= 0xf0 && c <= 0xf4) { len = 4; if (c == 0xf0) lo = 0x90; if (c == 0xf4) hi = 0x8f; }
    else return 0;
    if (p[1] < lo || p[1] > hi) return 0;   // also stops at the terminating 0
    for (size_t i = 2; i < len; i++)
        if ((p[i] & 0xc0) != 0x80) return 0;
    return len;
}

// s as a quoted JSON string: quotes, backslashes and control bytes escaped; bytes that are not
// UTF-8 become \u00XX (so any label gives valid JSON). NULL is "".
static void text_json_string(Text* t, const char* s) {
    text_put(t, "\"", 1);
    const unsigned char* p = (const unsigned char*)(s ? s : "");
    while (*p) {
        const size_t len = utf8_len(p);
        if (*p == '"' || *p == '\\') {
            const char esc[2] = {'\\', (char)*p};
            text_put(t, esc, 2);
        } else if (*p == '\n') {
            text_put(t, "\\n", 2);
        } else if (*p < 0x20 || len == 0) {
            text_printf(t, "\\u%04x", *p);
        } else {
            text_put(t, (const char*)p, len);
            p += len;
            continue;
        }
        p++;
    }
    text_put(t, "\"", 1);
}

// ns as microseconds with three exact decimals.
static void text_us(Text* t, long long ns) {
    const char* sign = ns < 0 ? "-" : "";
    const unsigned long long a = ns < 0 ? 0ull - (unsigned long long)ns : (unsigned long long)ns;
    text_printf(t, "%s%llu.%03llu", sign, a / 1000, a % 1000);
}

// A JSON number, or 0 for what JSON cannot hold (a clock that returned NaN).
static void text_number(Text* t, double x) { text_printf(t, "%.9g", isfinite(x) ? x : 0.0); }

// "12.3 KB": decimal units, as people read transfer sizes.
static void human_bytes(long long bytes, char* out, size_t n) {
    const double b = (double)bytes;
    if (bytes < 1000) snprintf(out, n, "%lld B", bytes);
    else if (b < 1e6) snprintf(out, n, "%.1f KB", b / 1e3);
    else if (b < 1e9) snprintf(out, n, "%.1f MB", b / 1e6);
    else snprintf(out, n, "%.1f GB", b / 1e9);
}

// Appends " word" (or "word" at the start) to out when word is non-empty.
static void add_word(char* out, size_t n, const char* word) {
    if (!word || !word[0]) return;
    const size_t len = strlen(out);
    snprintf(out + len, n - len, "%s%s", len ? " " : "", word);
}

// The name of an event without one: "all-gather row 12.3 KB", "layer 3 forward",
// "wait all-gather row".
static void derived_name(const Event* e, char* out, size_t n) {
    char num[48] = "";
    out[0] = 0;
    if (e->kind == TL_WAIT) add_word(out, n, "wait");
    if (e->kind != TL_COMPUTE) {
        add_word(out, n, e->comm_kind);
        add_word(out, n, e->group);
    }
    if (e->kind == TL_COMM_ISSUE || e->kind == TL_COMM_FLIGHT) {
        if (e->bytes > 0) human_bytes(e->bytes, num, sizeof num);
    } else if (e->layer >= 0) {
        snprintf(num, sizeof num, "layer %d", e->layer);
    }
    add_word(out, n, num);
    if (e->kind == TL_COMPUTE) add_word(out, n, e->phase);
    if (!out[0]) snprintf(out, n, "%s", timeline_kind_name(e->kind));
}

static void text_event(Text* t, const Timeline* tl, const Event* e) {
    char name[512];
    if (!e->name) derived_name(e, name, sizeof name);
    text_printf(t, "{\"ph\":\"X\",\"pid\":%d,\"tid\":%d,\"ts\":", tl->rank, e->track);
    text_us(t, e->ts_ns);
    text_put(t, ",\"dur\":", 7);
    text_us(t, e->dur_ns);
    text_put(t, ",\"name\":", 8);
    text_json_string(t, e->name ? e->name : name);
    text_printf(t, ",\"cat\":\"%s\",\"args\":{\"kind\":\"%s\",\"comm\":", timeline_kind_name(e->kind),
                timeline_kind_name(e->kind));
    text_json_string(t, e->comm_kind);
    text_put(t, ",\"group\":", 9);
    text_json_string(t, e->group);
    text_printf(t, ",\"bytes\":%lld,\"layer\":%d,\"phase\":", e->bytes, e->layer);
    text_json_string(t, e->phase);
    text_printf(t, ",\"step\":%d}}\n", e->step);
}

// The header line: the event count and this rank's totals (the merge puts them in otherData).
static void text_header(Text* t, const Timeline* tl, long lines) {
    const TimelineStep s = timeline_totals(tl);
    text_printf(t, PART_HEADER, tl->rank, tl->world_size, lines);
    text_printf(t, "{\"rank\":%d,\"steps\":%d,\"step_s\":", tl->rank, s.steps);
    text_number(t, s.step_s);
    text_put(t, ",\"compute_frac\":", 16);
    text_number(t, s.compute_frac);
    text_put(t, ",\"exposed_comm_frac\":", 21);
    text_number(t, s.exposed_comm_frac);
    text_put(t, ",\"wait_frac\":", 13);
    text_number(t, s.wait_frac);
    text_printf(t, ",\"comm_bytes\":%lld,\"dropped_marks\":%lld,\"dropped_events\":%ld}}\n",
                s.comm_bytes, tl->sum_dropped_marks, tl->dropped_events);
}

// Names of the rank's process and of its threads (one per track), sorted by rank and track id.
static void text_metadata(Text* t, const Timeline* tl) {
    const int r = tl->rank;
    text_printf(t, "{\"ph\":\"M\",\"pid\":%d,\"tid\":0,\"name\":\"process_name\","
                   "\"args\":{\"name\":\"rank %d\"}}\n", r, r);
    text_printf(t, "{\"ph\":\"M\",\"pid\":%d,\"tid\":0,\"name\":\"process_sort_index\","
                   "\"args\":{\"sort_index\":%d}}\n", r, r);
    for (int i = 0; i < tl->ntracks; i++) {
        text_printf(t, "{\"ph\":\"M\",\"pid\":%d,\"tid\":%d,\"name\":\"thread_name\",\"args\":{\"name\":",
                    r, i);
        text_json_string(t, tl->tracks[i].name);
        text_put(t, "}}\n", 3);
        text_printf(t, "{\"ph\":\"M\",\"pid\":%d,\"tid\":%d,\"name\":\"thread_sort_index\","
                       "\"args\":{\"sort_index\":%d}}\n", r, i, i);
    }
}

// Hands the buffer to the file once it is large (or always, with force); -1 on a write error.
static int flush_text(AtomicFile* af, Text* t, int force, char* err, size_t errlen) {
    if (!force && t->len < FLUSH_BYTES) return 0;
    if (atomic_write(af, t->data, t->len, err, errlen) != 0) return -1;
    t->len = 0;
    return 0;
}

static void part_path(char* out, size_t n, const char* trace_path, int rank) {
    snprintf(out, n, "%s.rank%d", trace_path, rank);
}

int timeline_write_part(const Timeline* tl, const char* trace_path, char* err, size_t errlen) {
    if (!tl) return 0;
    char path[4096];
    part_path(path, sizeof path, trace_path, tl->rank);
    if (strlen(trace_path) + 16 >= sizeof path)
        return set_err(err, errlen, "%s: trace path too long", trace_path);
    AtomicFile af;
    if (atomic_open(&af, path, err, errlen) != 0) return -1;
    Text t = {0};
    text_header(&t, tl, 2 + 2l * tl->ntracks + tl->nevents);
    text_metadata(&t, tl);
    int rc = 0;
    for (long i = 0; i < tl->nevents && rc == 0; i++) {
        text_event(&t, tl, &tl->events[i]);
        rc = flush_text(&af, &t, 0, err, errlen);
    }
    if (rc == 0) rc = flush_text(&af, &t, 1, err, errlen);   // atomic_write aborts on failure
    free(t.data);
    if (rc != 0) return -1;
    return atomic_commit(&af, err, errlen);
}

// ---------------------------------------------------------------------------------------------
// Merging the parts.

// One line of f without its newline, in *line (getline's buffer); 1, 0 at the end, -1 on a read
// error (message in err).
static int read_line(FILE* f, char** line, size_t* cap, size_t* len, const char* path, char* err,
                     size_t errlen) {
    errno = 0;
    const ssize_t n = getline(line, cap, f);
    if (n < 0) {
        if (ferror(f)) return set_err(err, errlen, "%s: read failed: %s", path, strerror(errno));
        return 0;
    }
    *len = (size_t)n;
    if (*len && (*line)[*len - 1] == '\n') (*line)[--*len] = 0;
    return 1;
}

// Whether a line holds one JSON object the way a part writes it: {...} with no NUL inside.
static int object_line(const char* line, size_t len) {
    return len >= 2 && line[0] == '{' && line[len - 1] == '}' && strlen(line) == len;
}

// The summary object of a part's header line (checked against rank and world size), copied.
static char* parse_header(const char* line, size_t len, int rank, int world_size, long* lines,
                          const char* path, char* err, size_t errlen) {
    int r = -1, w = -1, at = 0;
    long n = -1;
    if (!object_line(line, len) || sscanf(line, PART_HEADER "%n", &r, &w, &n, &at) != 3 || at == 0 ||
        n < 0 || len < (size_t)at + 2 || line[at] != '{' || line[len - 2] != '}') {
        set_err(err, errlen, "%s: line 1: malformed part (expected a timeline part header)", path);
        return NULL;
    }
    if (r != rank || w != world_size) {
        set_err(err, errlen, "%s: malformed part: written by rank %d of %d, expected rank %d of %d",
                path, r, w, rank, world_size);
        return NULL;
    }
    *lines = n;
    const size_t slen = len - 1 - (size_t)at;
    char* summary = xmalloc(slen + 1, "trace summary");
    memcpy(summary, line + at, slen);
    summary[slen] = 0;
    return summary;
}

typedef struct {
    AtomicFile af;
    Text text;
    long events;          // written so far (a comma goes before every event but the first)
    char** summaries;     // per rank
} Merge;

// Copies the event lines of one part into the merge; returns its summary, or NULL with err set.
static char* merge_part(Merge* m, const char* path, int rank, int world_size, char* err,
                        size_t errlen) {
    FILE* f = fopen(path, "r");
    if (!f) {
        if (errno == ENOENT)
            set_err(err, errlen, "%s: missing part of rank %d (hint: every rank writes its part with "
                    "timeline_write_part before rank 0 merges)", path, rank);
        else
            set_err(err, errlen, "%s: cannot open: %s", path, strerror(errno));
        return NULL;
    }
    char* line = NULL;
    size_t cap = 0, len = 0;
    long lines = 0, seen = 0, lineno = 1;
    char* summary = NULL;
    int rc = read_line(f, &line, &cap, &len, path, err, errlen), bad = rc != 1;
    if (rc == 0) set_err(err, errlen, "%s: malformed part: empty", path);
    if (rc == 1) summary = parse_header(line, len, rank, world_size, &lines, path, err, errlen);
    bad = bad || !summary;
    while (!bad && (rc = read_line(f, &line, &cap, &len, path, err, errlen)) == 1) {
        lineno++;
        if (!object_line(line, len))
            bad = set_err(err, errlen, "%s: line %ld: malformed part (expected one JSON object per "
                          "line)", path, lineno);
        else if (++seen > lines)
            bad = set_err(err, errlen, "%s: line %ld: malformed part (more events than its header "
                          "says)", path, lineno);
        if (bad) break;
        if (m->events++) text_put(&m->text, ",\n", 2);
        text_put(&m->text, line, len);
        bad = flush_text(&m->af, &m->text, 0, err, errlen);   // aborts the trace on failure
    }
    if (!bad && rc < 0) bad = -1;   // a read error
    if (!bad && seen != lines)
        bad = set_err(err, errlen, "%s: malformed part: %ld events, its header says %ld "
                      "(truncated?)", path, seen, lines);
    if (bad) {
        free(summary);
        summary = NULL;
    }
    free(line);
    if (fclose(f) != 0 && summary) {
        set_err(err, errlen, "%s: close failed: %s", path, strerror(errno));
        free(summary);
        summary = NULL;
    }
    return summary;
}

// Ends the document: display unit and otherData with the world size and every rank's totals.
static void text_trailer(Text* t, char* const* summaries, int world_size) {
    text_printf(t, "\n],\n\"displayTimeUnit\":\"ms\",\n\"otherData\":{\"world_size\":%d,\"ranks\":[",
                world_size);
    for (int r = 0; r < world_size; r++) {
        if (r) text_put(t, ",", 1);
        text_put(t, summaries[r], strlen(summaries[r]));
    }
    text_put(t, "]}}\n", 4);
}

// Removes the parts once the trace is in place.
static int remove_parts(const char* trace_path, int world_size, char* err, size_t errlen) {
    char path[4096];
    for (int r = 0; r < world_size; r++) {
        part_path(path, sizeof path, trace_path, r);
        if (unlink(path) != 0)
            return set_err(err, errlen, "%s: trace written, but cannot remove this part: %s", path,
                           strerror(errno));
    }
    return 0;
}

int timeline_merge_parts(const char* trace_path, int world_size, char* err, size_t errlen) {
    if (world_size < 1) return set_err(err, errlen, "%s: world size %d", trace_path, world_size);
    if (strlen(trace_path) + 16 >= 4096)
        return set_err(err, errlen, "%s: trace path too long", trace_path);
    Merge m = {.events = 0};
    if (atomic_open(&m.af, trace_path, err, errlen) != 0) return -1;
    m.summaries = xcalloc((size_t)world_size, sizeof *m.summaries, "trace summaries");
    text_put(&m.text, "{\"traceEvents\":[\n", 17);
    int ok = 1;
    char path[4096];
    for (int r = 0; r < world_size && ok; r++) {
        part_path(path, sizeof path, trace_path, r);
        m.summaries[r] = merge_part(&m, path, r, world_size, err, errlen);
        ok = m.summaries[r] != NULL;
    }
    if (ok) {
        text_trailer(&m.text, m.summaries, world_size);
        ok = flush_text(&m.af, &m.text, 1, err, errlen) == 0 && atomic_commit(&m.af, err, errlen) == 0;
    } else if (m.af.f) {
        atomic_abort(&m.af);   // a bad part (a failed write has aborted already)
    }
    for (int r = 0; r < world_size; r++) free(m.summaries[r]);
    free(m.summaries);
    free(m.text.data);
    if (!ok) return -1;
    return remove_parts(trace_path, world_size, err, errlen);
}
