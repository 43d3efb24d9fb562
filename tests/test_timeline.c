// The per-rank timeline (comm/timeline.c; its trace, comm/timeline_trace.c) on a scripted clock,
// so every fraction is exact:
// compute, waits, exposed communication and bytes of hand-worked steps (nested, overlapping,
// zero-length, clipped and reversed spans), totals weighted by step time, NULL timelines and
// marks outside a step as no-ops, marks beyond the reserved room dropped and the room grown
// between steps only, the trace's event cap, two ranks' parts merged into one Chrome trace (left
// in OUT/trace.json with the expected bytes in OUT/bytes.json for tools/check_trace.py), missing,
// malformed, truncated and foreign parts refused with the file named, the host clock, and the
// marks and spans of a captured CUDA graph replayed at each launch (host marks left out, a step
// without room for a launch dropping its marks, the room grown for the next).
// Usage: test_timeline [--out DIR] (default build/tmp/timeline; created if missing)
//        test_timeline --die nested-step|stale-slot|bad-track|bad-kind|mixed-capture|capture-host-clock:
//        a caller bug, which must end
//        the process with a one-line error (tests/suites/timeline.list).
#include "comm/timeline.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "comm/fail.h"
#include "tests/test_expect.h"

static int near(double a, double b) { return fabs(a - b) <= 1e-12; }

static int file_exists(const char* path) { return access(path, F_OK) == 0; }

// ---------------------------------------------------------------------------------------------
// The fake clock: mark k (in the order they are taken) gets script[k]; past the script (or
// without one) marks advance by 1 ms. It also checks the clock contract: slots below the room
// reserved, reserve() never between the origin mark and resolve().

typedef struct {
    const double* script;
    int nscript, next;
    double* t;
    int cap;
    int in_step;
    int reserves, reserves_in_step, bad_slots, last_reserve;
} FakeClock;

static void fake_mark(void* ctx, void* track, int slot) {
    FakeClock* fc = ctx;
    if (slot < 0 || slot >= fc->cap) {
        fc->bad_slots++;
        return;
    }
    if (slot == 0) fc->in_step = 1;
    fc->t[slot] = fc->next < fc->nscript ? fc->script[fc->next] : 1e-3 * fc->next;
    fc->next++;
}

static void fake_resolve(void* ctx, int n, double* seconds) {
    FakeClock* fc = ctx;
    fc->in_step = 0;
    for (int i = 0; i < n; i++) seconds[i] = fc->t[i] - fc->t[0];
}

static void fake_reserve(void* ctx, int n) {
    FakeClock* fc = ctx;
    fc->reserves++;
    fc->last_reserve = n;
    if (fc->in_step) fc->reserves_in_step++;
    if (n <= fc->cap) return;
    fc->t = realloc(fc->t, (size_t)n * sizeof *fc->t);
    if (!fc->t) setup_fail("out of memory");
    fc->cap = n;
}

// Marks inside a graph: any track but the host's (fake_host_tag), up to the room reserved.
static char fake_host_tag;

static int fake_capture_mark(void* ctx, void* track, int index) {
    FakeClock* fc = ctx;
    if (track == &fake_host_tag) return 0;
    return index < fc->cap ? 1 : -1;
}

static const TimelineClock fake_clock = {fake_mark, fake_resolve, fake_reserve, fake_capture_mark};

// Points the clock at the script of the next step.
static void fake_script(FakeClock* fc, const double* script, int n) {
    fc->script = script;
    fc->nscript = n;
    fc->next = 0;
}

// ---------------------------------------------------------------------------------------------
// Hand-worked steps.

typedef struct {
    int compute, row, col, host;
} Tracks;

static Tracks make_tracks(Timeline* tl) {
    Tracks k;
    k.compute = timeline_track(tl, "compute", NULL);
    k.row = timeline_track(tl, "comm row", NULL);
    k.col = timeline_track(tl, "comm col", NULL);
    k.host = timeline_track(tl, "host", NULL);
    return k;
}

// Compute [0,10] (layer 0 forward) with a wait [4,6] inside; an issue [2,2.5] on the host (it
// carries bytes that must not count); flights [2,6] (row) and [8,12] (col); the step ends at 12.
//   busy = [0,4] + [6,10] = 8;  wait = 2;  flight minus busy = [4,6] + [10,12] = 4
// Bytes: 100 and 50 times `scale`.
static const double example_script[] = {0, 2, 2.5, 4, 6, 6, 8, 10, 12, 12};

static TimelineStep example_step(Timeline* tl, FakeClock* fc, const Tracks* k, int step,
                                 long long scale) {
    fake_script(fc, example_script, 10);
    timeline_step_begin(tl, step);
    const int f1b = timeline_mark(tl, k->compute);   // 2
    const int i1e = timeline_mark(tl, k->host);      // 2.5
    const int wb = timeline_mark(tl, k->compute);    // 4
    const int f1e = timeline_mark(tl, k->row);       // 6
    const int we = timeline_mark(tl, k->compute);    // 6
    const int f2b = timeline_mark(tl, k->compute);   // 8
    const int ce = timeline_mark(tl, k->compute);    // 10
    const int f2e = timeline_mark(tl, k->col);       // 12
    const TimelineLabel layer0 = {NULL, NULL, NULL, 0, 0, "forward"};
    const TimelineLabel ag = {NULL, "all-gather", "row", 100 * scale, 0, "forward"};
    const TimelineLabel rs = {NULL, "reduce-scatter", "col", 50 * scale, 0, "forward"};
    const TimelineLabel wait = {NULL, "all-gather", "row", 0, 0, "forward"};
    timeline_span(tl, TL_COMPUTE, k->compute, TIMELINE_ORIGIN_SLOT, ce, &layer0);
    timeline_span(tl, TL_COMM_ISSUE, k->host, f1b, i1e, &ag);
    timeline_span(tl, TL_COMM_FLIGHT, k->row, f1b, f1e, &ag);
    timeline_span(tl, TL_WAIT, k->compute, wb, we, &wait);
    timeline_span(tl, TL_COMM_FLIGHT, k->col, f2b, f2e, &rs);
    return timeline_step_end(tl);   // its mark: 12
}

static void test_example(void) {
    printf("example step: compute [0,10], wait [4,6], flights [2,6] [8,12], end 12\n");
    FakeClock fc = {0};
    Timeline* tl = timeline_create(&fake_clock, &fc, 0, 1);
    const Tracks k = make_tracks(tl);
    const TimelineStep s = example_step(tl, &fc, &k, 7, 1);
    EXPECT(s.step == 7 && s.steps == 1, "step number %d, steps %d", s.step, s.steps);
    EXPECT(near(s.step_s, 12), "step_s %g == 12", s.step_s);
    EXPECT(near(s.compute_frac, 8.0 / 12), "compute_frac %.15g == 8/12", s.compute_frac);
    EXPECT(near(s.wait_frac, 2.0 / 12), "wait_frac %.15g == 2/12", s.wait_frac);
    EXPECT(near(s.exposed_comm_frac, 4.0 / 12), "exposed_comm_frac %.15g == 4/12",
           s.exposed_comm_frac);
    EXPECT(s.comm_bytes == 150, "comm_bytes %lld == 150 (flights only, the issue not counted)",
           s.comm_bytes);
    EXPECT(s.dropped_marks == 0 && fc.bad_slots == 0 && fc.reserves_in_step == 0,
           "no dropped marks (%d), slots in range, no reserve inside the step", s.dropped_marks);
    timeline_destroy(tl);
    free(fc.t);
}

// A second step, on the same timeline as the example (totals): compute [0,5] with compute [1,3]
// nested and a zero-length compute at 5; waits [1,3] and a zero-length one at 3; flights [0,3],
// a reversed one (3 -> 1, empty) and [7,9] that the step end at 8 clips to [7,8].
//   busy = [0,5] - [1,3] = [0,1] + [3,5] = 3;  wait = 2;  flight minus busy = [1,3] + [7,8] = 3
static void test_nested_and_totals(void) {
    printf("nested, zero-length, reversed and clipped spans; totals over two steps\n");
    FakeClock fc = {0};
    Timeline* tl = timeline_create(&fake_clock, &fc, 0, 1);
    const Tracks k = make_tracks(tl);
    example_step(tl, &fc, &k, 0, 1);
    static const double script[] = {0, 1, 3, 5, 5, 7, 9, 8};
    fake_script(&fc, script, 8);
    timeline_step_begin(tl, 1);
    const int a = timeline_mark(tl, k.compute);   // 1
    const int b = timeline_mark(tl, k.compute);   // 3
    const int c = timeline_mark(tl, k.compute);   // 5
    const int d = timeline_mark(tl, k.compute);   // 5
    const int e = timeline_mark(tl, k.compute);   // 7
    const int f = timeline_mark(tl, k.row);       // 9
    const TimelineLabel ten = {"ten", "all-reduce", "dp", 10, -1, "other"};
    const TimelineLabel twenty = {"twenty", "all-gather", "row", 20, 1, "backward"};
    const TimelineLabel zero = {"reversed", "all-gather", "row", 0, 1, "backward"};
    timeline_span(tl, TL_COMPUTE, k.compute, 0, c, NULL);
    timeline_span(tl, TL_COMPUTE, k.compute, a, b, NULL);
    timeline_span(tl, TL_COMPUTE, k.compute, c, d, NULL);
    timeline_span(tl, TL_WAIT, k.compute, a, b, NULL);
    timeline_span(tl, TL_WAIT, k.compute, b, b, NULL);
    timeline_span(tl, TL_COMM_FLIGHT, k.row, 0, b, &ten);
    timeline_span(tl, TL_COMM_FLIGHT, k.row, b, a, &zero);
    timeline_span(tl, TL_COMM_FLIGHT, k.row, e, f, &twenty);
    const TimelineStep s = timeline_step_end(tl);   // end mark: 8
    EXPECT(near(s.step_s, 8), "step_s %g == 8 (the step-end mark, not the later comm mark)",
           s.step_s);
    EXPECT(near(s.compute_frac, 3.0 / 8), "compute_frac %.15g == 3/8", s.compute_frac);
    EXPECT(near(s.wait_frac, 2.0 / 8), "wait_frac %.15g == 2/8", s.wait_frac);
    EXPECT(near(s.exposed_comm_frac, 3.0 / 8), "exposed_comm_frac %.15g == 3/8",
           s.exposed_comm_frac);
    EXPECT(s.comm_bytes == 30, "comm_bytes %lld == 30", s.comm_bytes);
    // The resolved marks of the step just ended (the trainer's phase boundaries).
    EXPECT(near(timeline_mark_seconds(tl, b), 3) && near(timeline_mark_seconds(tl, e), 7) &&
               near(timeline_mark_seconds(tl, f), 9) && timeline_mark_seconds(tl, 0) == 0,
           "timeline_mark_seconds: marks 2, 5, 6 at 3, 7, 9 s, the origin at 0");
    EXPECT(timeline_mark_seconds(tl, -1) == -1 && timeline_mark_seconds(tl, 9) == -1 &&
               timeline_mark_seconds(NULL, 1) == -1,
           "timeline_mark_seconds: -1 for a dropped mark, a slot past the step's, no timeline");
    const TimelineStep t = timeline_totals(tl);
    EXPECT(t.steps == 2 && t.step == 1, "totals: %d steps, last %d", t.steps, t.step);
    EXPECT(near(t.step_s, 20), "totals: step_s %g == 12 + 8", t.step_s);
    EXPECT(near(t.compute_frac, 11.0 / 20), "totals: compute_frac %.15g == (8+3)/20",
           t.compute_frac);
    EXPECT(near(t.wait_frac, 4.0 / 20), "totals: wait_frac %.15g == (2+2)/20", t.wait_frac);
    EXPECT(near(t.exposed_comm_frac, 7.0 / 20), "totals: exposed_comm_frac %.15g == (4+3)/20",
           t.exposed_comm_frac);
    EXPECT(t.comm_bytes == 180, "totals: comm_bytes %lld == 150 + 30", t.comm_bytes);
    timeline_destroy(tl);
    free(fc.t);
}

// A step that takes no time: fractions 0, not NaN.
static void test_zero_step(void) {
    printf("a step of length 0\n");
    FakeClock fc = {0};
    Timeline* tl = timeline_create(&fake_clock, &fc, 0, 1);
    const Tracks k = make_tracks(tl);
    static const double script[] = {3, 3, 3, 3};
    fake_script(&fc, script, 4);
    timeline_step_begin(tl, 0);
    const int m = timeline_mark(tl, k.compute);
    const int r = timeline_mark(tl, k.row);
    const TimelineLabel ag = {NULL, "all-gather", "row", 8, 0, "forward"};
    timeline_span(tl, TL_COMPUTE, k.compute, 0, m, NULL);
    timeline_span(tl, TL_COMM_FLIGHT, k.row, m, r, &ag);
    const TimelineStep s = timeline_step_end(tl);
    EXPECT(s.step_s == 0 && s.compute_frac == 0 && s.wait_frac == 0 && s.exposed_comm_frac == 0,
           "step_s %g, fractions %g %g %g all 0", s.step_s, s.compute_frac, s.wait_frac,
           s.exposed_comm_frac);
    EXPECT(s.comm_bytes == 8, "a zero-length flight still counts its bytes (%lld)", s.comm_bytes);
    const TimelineStep t = timeline_totals(tl);
    EXPECT(t.compute_frac == 0 && t.steps == 1, "totals over zero time: fractions 0");
    timeline_destroy(tl);
    free(fc.t);
}

// Tracing off: every call on NULL does nothing; marks outside a step are -1 and their spans no-ops.
static void test_null_and_outside(const char* out) {
    printf("NULL timeline, marks outside a step\n");
    Timeline* none = NULL;
    char err[ERR_LEN] = "", path[512];
    snprintf(path, sizeof path, "%s/null.json", out);
    EXPECT(timeline_track(none, "compute", NULL) == -1, "timeline_track(NULL) == -1");
    timeline_set_max_events(none, 5);
    timeline_reserve_marks(none, 5000);
    timeline_step_begin(none, 0);
    EXPECT(timeline_mark(none, 0) == -1, "timeline_mark(NULL) == -1");
    timeline_span(none, TL_COMPUTE, 0, 0, 1, NULL);
    const TimelineStep s = timeline_step_end(none), t = timeline_totals(none);
    EXPECT(s.steps == 0 && s.step_s == 0 && s.comm_bytes == 0, "timeline_step_end(NULL): zeros");
    EXPECT(t.steps == 0 && t.step_s == 0 && t.comm_bytes == 0, "timeline_totals(NULL): zeros");
    char part[600];
    snprintf(part, sizeof part, "%s.rank0", path);
    EXPECT(timeline_write_part(none, path, err, sizeof err) == 0 && !file_exists(path) &&
               !file_exists(part),
           "timeline_write_part(NULL) writes nothing");
    timeline_destroy(none);

    FakeClock fc = {0};
    Timeline* tl = timeline_create(&fake_clock, &fc, 0, 1);
    const Tracks k = make_tracks(tl);
    const int before = timeline_mark(tl, k.row);
    timeline_span(tl, TL_COMM_FLIGHT, k.row, before, before, NULL);
    example_step(tl, &fc, &k, 0, 1);
    const int after = timeline_mark(tl, k.col);
    timeline_span(tl, TL_COMM_FLIGHT, k.col, after, after, NULL);
    EXPECT(before == -1 && after == -1 && fc.next == 10,
           "marks before and after the step: -1, no clock mark taken");
    const TimelineStep u = timeline_totals(tl);
    EXPECT(u.steps == 1 && u.comm_bytes == 150, "their spans are ignored (bytes %lld)", u.comm_bytes);
    timeline_destroy(tl);
    free(fc.t);
}

// A step with more marks than reserved drops the extra ones, and the next step has room for them:
// the clock's reserve() only ever runs between steps.
static void test_reserve_growth(void) {
    printf("marks beyond the reserved room; growth between steps\n");
    FakeClock fc = {0};
    Timeline* tl = timeline_create(&fake_clock, &fc, 0, 1);
    const Tracks k = make_tracks(tl);
    const int first_room = fc.last_reserve;
    EXPECT(fc.reserves == 1 && first_room >= 2, "one reserve at creation (%d marks)", first_room);
    const int n = 4 * first_room;
    for (int step = 0; step < 3; step++) {
        fake_script(&fc, NULL, 0);
        timeline_step_begin(tl, step);
        int ok = 0, prev = 0;
        for (int i = 0; i < n; i++) {
            const int m = timeline_mark(tl, k.compute);
            if (m >= 0) ok++;
            const TimelineLabel l = {NULL, NULL, NULL, 1, i, "forward"};
            timeline_span(tl, TL_COMPUTE, k.compute, prev, m, &l);   // -1: ignored
            if (m >= 0) prev = m;
        }
        const TimelineStep s = timeline_step_end(tl);
        if (step == 0) {
            EXPECT(ok == first_room - 2 && s.dropped_marks == n - ok,
                   "step 0: %d marks fit (room %d less origin and end), %d dropped", ok, first_room,
                   s.dropped_marks);
            EXPECT(fc.reserves == 2 && fc.last_reserve >= n + 2,
                   "grown once after step 0, to %d marks", fc.last_reserve);
        } else {
            EXPECT(ok == n && s.dropped_marks == 0 && fc.reserves == 2,
                   "step %d: all %d marks fit, no further reserve", step, n);
        }
        EXPECT(s.compute_frac > 0.99 && s.compute_frac <= 1.0, "step %d: compute_frac %.6f",
               step, s.compute_frac);
    }
    EXPECT(timeline_totals(tl).dropped_marks == n - (first_room - 2), "totals: dropped marks %d",
           timeline_totals(tl).dropped_marks);
    timeline_reserve_marks(tl, 10 * n);
    EXPECT(fc.reserves == 3 && fc.last_reserve == 10 * n, "timeline_reserve_marks(%d) reserves it",
           10 * n);
    timeline_reserve_marks(tl, 5);
    EXPECT(fc.reserves == 3, "a smaller timeline_reserve_marks does not call the clock");
    EXPECT(fc.reserves_in_step == 0 && fc.bad_slots == 0,
           "never reserved inside a step (%d), no slot beyond the room (%d)", fc.reserves_in_step,
           fc.bad_slots);
    timeline_destroy(tl);
    free(fc.t);
}

// ---------------------------------------------------------------------------------------------
// A captured graph: the marks taken while it is captured make a template; each launch replays it
// into the step's slots, which the test then sets as the graph's event record nodes would.

// One launch of a 4-mark template at times c0 (compute begins), f0 (a transfer starts), f1 (it
// ends on the row's stream), c1 (compute ends); returns the first slot.
static int launch_at(Timeline* tl, FakeClock* fc, const TimelineCapture* cap, double c0, double f0,
                     double f1, double c1) {
    const int first = timeline_replay(tl, cap);
    if (first >= 0) {
        fc->t[first] = c0, fc->t[first + 1] = f0, fc->t[first + 2] = f1, fc->t[first + 3] = c1;
    }
    return first;
}

static void test_capture(void) {
    printf("a captured graph's marks and spans, replayed at each launch\n");
    FakeClock fc = {0};
    Timeline* tl = timeline_create(&fake_clock, &fc, 0, 1);
    const int compute = timeline_track(tl, "compute", NULL);
    const int row = timeline_track(tl, "comm row", NULL);
    const int host = timeline_track(tl, "host", &fake_host_tag);
    static const double script[] = {0, 0.5, 10};   // origin, one eager mark, the step's end
    fake_script(&fc, script, 3);
    timeline_step_begin(tl, 0);
    const int eager = timeline_mark(tl, compute);
    timeline_capture_begin(tl);
    const int c0 = timeline_mark(tl, compute);
    const int issue = timeline_mark(tl, host);   // no host code runs at a launch
    const int f0 = timeline_mark(tl, compute);
    const int f1 = timeline_mark(tl, row);
    const int c1 = timeline_mark(tl, compute);
    const TimelineLabel layer = {NULL, NULL, NULL, 0, 0, "forward"};
    const TimelineLabel ag = {NULL, "all-gather", "row", 64, 0, "forward"};
    timeline_span(tl, TL_COMPUTE, compute, c0, c1, &layer);
    timeline_span(tl, TL_COMM_ISSUE, host, f0, issue, &ag);   // -1: left out
    timeline_span(tl, TL_COMM_FLIGHT, row, f0, f1, &ag);
    TimelineCapture* cap = timeline_capture_end(tl);
    EXPECT(issue == -1 && c0 >= 0 && f1 >= 0 && timeline_capture_marks(cap) == 4,
           "4 captured marks, the host's left out (%d)", issue);
    EXPECT(fc.next == 2, "the capture took none of the step's marks (%d taken)", fc.next);
    // Launch 1: compute [1,4], flight [2,5]; launch 2: compute [5,9], flight [6,7].
    const int first1 = launch_at(tl, &fc, cap, 1, 2, 5, 4);
    const int first2 = launch_at(tl, &fc, cap, 5, 6, 7, 9);
    EXPECT(first1 == eager + 1 && first2 == first1 + 4, "launches at slots %d and %d", first1, first2);
    EXPECT(timeline_replayed_slot(first2, c1) == first2 + 3 && timeline_replayed_slot(-1, c1) == -1 &&
           timeline_replayed_slot(first2, -1) == -1, "captured slots map to the launch's slots");
    const TimelineStep st = timeline_step_end(tl);
    //   busy = [1,4] + [5,9] = 7; flight minus busy = [4,5] = 1; S = 10; bytes 2 x 64
    EXPECT(near(st.step_s, 10) && near(st.compute_frac, 0.7) && near(st.exposed_comm_frac, 0.1) &&
           st.comm_bytes == 128 && st.dropped_marks == 0,
           "two launches: step %g, compute_frac %g (0.7), exposed %g (0.1), bytes %lld (128), "
           "dropped %d", st.step_s, st.compute_frac, st.exposed_comm_frac, st.comm_bytes,
           st.dropped_marks);
    EXPECT(near(timeline_mark_seconds(tl, timeline_replayed_slot(first2, c1)), 9),
           "the second launch's last mark resolves to 9 s");

    // A template of 200 marks: two launches overflow the room of a first step; the timeline then
    // grows, and the next step holds both.
    timeline_step_begin(tl, 1);
    timeline_capture_begin(tl);
    int prev = timeline_mark(tl, compute);
    for (int i = 1; i < 200; i++) {
        const int m = timeline_mark(tl, compute);
        timeline_span(tl, TL_COMPUTE, compute, prev, m, &layer);
        prev = m;
    }
    TimelineCapture* big = timeline_capture_end(tl);
    const int room = fc.cap;
    const int a = timeline_replay(tl, big), b = timeline_replay(tl, big);
    const TimelineStep s1 = timeline_step_end(tl);
    EXPECT(room < 403 && a == 1 && b == -1 && s1.dropped_marks == 200,
           "room %d: the first launch fits, the second's 200 marks dropped (%d)", room,
           s1.dropped_marks);
    timeline_step_begin(tl, 2);
    const int a2 = timeline_replay(tl, big), b2 = timeline_replay(tl, big);
    const TimelineStep s2 = timeline_step_end(tl);
    EXPECT(a2 == 1 && b2 == 201 && s2.dropped_marks == 0 && fc.reserves_in_step == 0,
           "the next step holds both launches (%d, %d), grown between steps", a2, b2);
    timeline_capture_free(cap);
    timeline_capture_free(big);
    timeline_destroy(tl);
    free(fc.t);
}

// ---------------------------------------------------------------------------------------------
// Parts and the merge.

static char* read_text(const char* path) {
    FILE* f = fopen(path, "rb");
    if (!f) return NULL;
    if (fseek(f, 0, SEEK_END) != 0) setup_fail("%s: seek: %s", path, strerror(errno));
    const long n = ftell(f);
    if (n < 0 || fseek(f, 0, SEEK_SET) != 0) setup_fail("%s: seek: %s", path, strerror(errno));
    char* s = malloc((size_t)n + 1);
    if (!s || fread(s, 1, (size_t)n, f) != (size_t)n) setup_fail("%s: read failed", path);
    s[n] = 0;
    fclose(f);
    return s;
}

static void write_text(const char* path, const char* text) {
    FILE* f = fopen(path, "wb");
    if (!f || fputs(text, f) < 0 || fclose(f) != 0) setup_fail("%s: cannot write", path);
}

static void make_dir(const char* path) {
    if (mkdir(path, 0777) != 0 && errno != EEXIST) setup_fail("mkdir %s: %s", path, strerror(errno));
}

static int contains(const char* text, const char* part) { return text && strstr(text, part); }

// One rank of `world`: two example steps (bytes scaled by rank + 1), plus a track and a label
// whose names need JSON escaping; writes its part. Returns its comm bytes.
static long long write_rank_part(const char* trace, int rank, int world, long max_events) {
    FakeClock fc = {0};
    Timeline* tl = timeline_create(&fake_clock, &fc, rank, world);
    if (max_events >= 0) timeline_set_max_events(tl, max_events);
    const Tracks k = make_tracks(tl);
    const int odd = timeline_track(tl, "odd \"track\" \\ \t", NULL);
    example_step(tl, &fc, &k, 0, rank + 1);
    example_step(tl, &fc, &k, 1, rank + 1);
    static const double script[] = {0, 1, 2};
    fake_script(&fc, script, 3);
    timeline_step_begin(tl, 2);
    const int m = timeline_mark(tl, odd);
    const TimelineLabel l = {"quote \" backslash \\ newline \n bell \a utf8 \xc3\xa9 bad \xff\xc0",
                             "all-to-all", "sp", 0, 2, "backward"};
    timeline_span(tl, TL_COMM_FLIGHT, odd, 0, m, &l);
    timeline_step_end(tl);
    char err[ERR_LEN] = "";
    if (timeline_write_part(tl, trace, err, sizeof err) != 0) setup_fail("%s", err);
    const long long bytes = timeline_totals(tl).comm_bytes;
    timeline_destroy(tl);
    free(fc.t);
    return bytes;
}

static void test_merge(const char* out) {
    printf("two ranks' parts merged into one trace\n");
    char trace[512], part0[600], part1[600], path[600], err[ERR_LEN] = "";
    snprintf(trace, sizeof trace, "%s/trace.json", out);
    snprintf(part0, sizeof part0, "%s.rank0", trace);
    snprintf(part1, sizeof part1, "%s.rank1", trace);
    remove(trace);
    const long long b0 = write_rank_part(trace, 0, 2, -1);
    const long long b1 = write_rank_part(trace, 1, 2, -1);
    EXPECT(b0 == 300 && b1 == 600, "rank bytes %lld, %lld (2 steps x 150 x rank+1)", b0, b1);
    EXPECT(file_exists(part0) && file_exists(part1), "both parts written");
    char* p0 = read_text(part0);
    EXPECT(contains(p0, "\"dur\":4000000.000") && contains(p0, "\"dur\":500000.000"),
           "part 0: the [2,6] flight lasts 4000000.000 us, the issue 500000.000 us");
    EXPECT(contains(p0, "\"name\":\"all-gather row 100 B\"") &&
               contains(p0, "\"name\":\"layer 0 forward\"") &&
               contains(p0, "\"name\":\"wait all-gather row layer 0\""),
           "derived names: comm, compute, wait");
    EXPECT(contains(p0, "\"odd \\\"track\\\" \\\\ \\u0009\"") &&
               contains(p0, "quote \\\" backslash \\\\ newline \\n bell \\u0007 utf8 \xc3\xa9 bad "
                            "\\u00ff\\u00c0"),
           "track and label names JSON-escaped");
    free(p0);
    const int rc = timeline_merge_parts(trace, 2, err, sizeof err);
    EXPECT(rc == 0, "merge: %s", rc == 0 ? "ok" : err);
    EXPECT(!file_exists(part0) && !file_exists(part1), "parts removed after the merge");
    char* t = read_text(trace);
    EXPECT(contains(t, "{\"traceEvents\":[\n") && contains(t, "\"displayTimeUnit\":\"ms\"") &&
               contains(t, "\"otherData\":{\"world_size\":2,\"ranks\":[{\"rank\":0,\"steps\":3,") &&
               contains(t, "{\"rank\":1,\"steps\":3,"),
           "trace: events, display unit, otherData with both ranks' totals");
    EXPECT(contains(t, "\"args\":{\"name\":\"rank 1\"}") && contains(t, "\"pid\":1,\"tid\":4,\"name\":"
                                                                        "\"thread_name\""),
           "trace: rank 1's process and its tracks named");
    free(t);
    // The expected bytes for tools/check_trace.py --bytes, and a wrong file for its refusal.
    char text[256];
    snprintf(path, sizeof path, "%s/bytes.json", out);
    snprintf(text, sizeof text, "{\"0\": %lld, \"1\": %lld}\n", b0, b1);
    write_text(path, text);
    snprintf(path, sizeof path, "%s/bytes_wrong.json", out);
    snprintf(text, sizeof text, "{\"0\": %lld, \"1\": %lld}\n", b0, b1 + 1);
    write_text(path, text);
}

// A trace capped at 10 events keeps step 0's 5 spans and step 1's 5, leaves step 2's 1 out.
static void test_event_cap(const char* out) {
    printf("the trace's event cap\n");
    char trace[512], part[600];
    snprintf(trace, sizeof trace, "%s/capped.json", out);
    snprintf(part, sizeof part, "%s.rank0", trace);
    write_rank_part(trace, 0, 1, 10);
    char* p = read_text(part);
    EXPECT(contains(p, "\"dropped_events\":1}") && contains(p, "\"step\":1}") &&
               !contains(p, "\"step\":2}"),
           "step 2 left out of the trace, counted as 1 dropped event");
    free(p);
    char err[ERR_LEN] = "";
    const int rc = timeline_merge_parts(trace, 1, err, sizeof err);
    EXPECT(rc == 0, "merge of one part: %s", rc == 0 ? "ok" : err);
}

// Expects the merge of world parts under trace to fail with a message containing want and want2,
// leaving the trace absent and the parts in place.
static void expect_merge_fails(const char* trace, int world, const char* want, const char* want2,
                               const char* what) {
    char err[ERR_LEN] = "", part[600], tmp[600];
    const int rc = timeline_merge_parts(trace, world, err, sizeof err);
    snprintf(part, sizeof part, "%s.rank0", trace);
    snprintf(tmp, sizeof tmp, "%s.tmp.%d", trace, (int)getpid());
    EXPECT(rc == -1 && contains(err, want) && contains(err, want2) && !strchr(err, '\n'),
           "%s: \"%s\"", what, err);
    EXPECT(!file_exists(trace) && !file_exists(tmp) && file_exists(part),
           "%s: no trace, no temporary file, parts kept", what);
}

static void test_bad_parts(const char* out) {
    printf("missing, malformed, truncated and foreign parts\n");
    char dir[512], trace[600], p2[700], text[4096];
    snprintf(dir, sizeof dir, "%s/bad", out);
    make_dir(dir);
    snprintf(trace, sizeof trace, "%s/trace.json", dir);
    snprintf(p2, sizeof p2, "%s.rank2", trace);
    remove(trace);
    remove(p2);
    write_rank_part(trace, 0, 3, -1);
    write_rank_part(trace, 1, 3, -1);
    expect_merge_fails(trace, 3, "trace.json.rank2: ", "missing part of rank 2", "missing part");
    write_text(p2, "hello\n");
    expect_merge_fails(trace, 3, "trace.json.rank2: line 1: ", "malformed part", "garbage part");
    write_text(p2, "");
    expect_merge_fails(trace, 3, "trace.json.rank2: ", "malformed part: empty", "empty part");
    // Rank 1's part renamed as rank 2's: right format, wrong writer.
    char p1[700];
    snprintf(p1, sizeof p1, "%s.rank1", trace);
    char* t1 = read_text(p1);
    write_text(p2, t1);
    expect_merge_fails(trace, 3, "trace.json.rank2: ", "written by rank 1 of 3, expected rank 2",
                       "foreign part");
    // Rank 2's own part, truncated (its last line gone), then with a bad event line.
    write_rank_part(trace, 2, 3, -1);
    char* t2 = read_text(p2);
    size_t n = strlen(t2);
    t2[n - 1] = 0;
    *strrchr(t2, '\n') = 0;
    snprintf(text, sizeof text, "%s\n", t2);
    write_text(p2, text);
    expect_merge_fails(trace, 3, "trace.json.rank2: ", "(truncated?)", "truncated part");
    snprintf(text, sizeof text, "%s\n\"not an object\"\n", t2);
    write_text(p2, text);
    char want[64];
    int lines = 1;
    for (const char* c = t2; *c; c++) lines += *c == '\n';
    snprintf(want, sizeof want, "line %d: malformed part", lines + 1);
    expect_merge_fails(trace, 3, "trace.json.rank2: ", want, "bad event line");
    free(t1);
    free(t2);
    char err[ERR_LEN] = "";
    EXPECT(timeline_merge_parts(trace, 0, err, sizeof err) == -1 && contains(err, "world size 0"),
           "world size 0 refused: \"%s\"", err);
    for (int r = 0; r < 3; r++) {
        snprintf(p2, sizeof p2, "%s.rank%d", trace, r);
        remove(p2);
    }
}

// ---------------------------------------------------------------------------------------------
// The host clock.

static void test_host_clock(void) {
    printf("the host clock\n");
    TimelineHostClock* hc = timeline_host_clock_create();
    enum { N = 2000 };
    timeline_host_clock.reserve(hc, N);
    for (int i = 0; i < N; i++) timeline_host_clock.mark(hc, NULL, i);
    static double s[N];
    timeline_host_clock.resolve(hc, N, s);
    int ok = s[0] == 0;
    for (int i = 1; i < N; i++) ok = ok && s[i] >= s[i - 1];
    EXPECT(ok, "%d marks non-decreasing from 0 (last %.3g s)", N, s[N - 1]);

    Timeline* tl = timeline_create(&timeline_host_clock, hc, 0, 1);
    const int compute = timeline_track(tl, "compute", NULL);
    for (int step = 0; step < 3; step++) {
        timeline_step_begin(tl, step);
        int m = 0;
        for (int i = 0; i < 300; i++) {   // past the first room
            const int slot = timeline_mark(tl, compute);
            if (slot >= 0) m = slot;
        }
        timeline_span(tl, TL_COMPUTE, compute, 0, m, NULL);
        const TimelineStep r = timeline_step_end(tl);
        EXPECT(r.step_s >= 0 && r.compute_frac >= 0 && r.compute_frac <= 1 &&
                   (step == 0 || r.dropped_marks == 0),
               "step %d: step_s %.3g s, compute_frac %.3f, dropped %d", step, r.step_s,
               r.compute_frac, r.dropped_marks);
    }
    timeline_destroy(tl);
    timeline_host_clock_destroy(hc);
}

// A timeline on the host clock inside its first step (kept reachable for the leak checker).
static Timeline* host_step(void) {
    static Timeline* tl;
    tl = timeline_create(&timeline_host_clock, timeline_host_clock_create(), 0, 1);
    timeline_track(tl, "compute", NULL);
    timeline_step_begin(tl, 0);
    return tl;
}

// Commits the caller bug `what`; returns only if the timeline let it pass.
static void die(const char* what) {
    if (strcmp(what, "capture-host-clock") == 0) {
        timeline_capture_begin(host_step());
        printf("--die %s: the timeline did not stop the caller bug\n", what);
        exit(3);
    }
    FakeClock fc = {0};
    Timeline* tl = timeline_create(&fake_clock, &fc, 0, 1);
    const Tracks k = make_tracks(tl);
    timeline_step_begin(tl, 0);
    const int m = timeline_mark(tl, k.row);
    if (strcmp(what, "nested-step") == 0) {
        timeline_step_begin(tl, 1);
    } else if (strcmp(what, "stale-slot") == 0) {
        timeline_step_end(tl);
        timeline_step_begin(tl, 1);
        timeline_span(tl, TL_COMM_FLIGHT, k.row, 0, m, NULL);   // slot m is step 0's
    } else if (strcmp(what, "bad-track") == 0) {
        timeline_mark(tl, 9);
    } else if (strcmp(what, "bad-kind") == 0) {
        timeline_span(tl, TL_NKINDS, k.row, 0, m, NULL);
    } else if (strcmp(what, "mixed-capture") == 0) {
        timeline_capture_begin(tl);
        timeline_span(tl, TL_COMM_FLIGHT, k.row, m, timeline_mark(tl, k.row), NULL);
    } else {
        setup_fail("--die %s: unknown case", what);
    }
    printf("--die %s: the timeline did not stop the caller bug\n", what);
    exit(3);
}

int main(int argc, char** argv) {
    const char* out = "build/tmp/timeline";
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--out") == 0 && i + 1 < argc) out = argv[++i];
        else if (strcmp(argv[i], "--die") == 0 && i + 1 < argc) die(argv[++i]);
        else setup_fail("usage: test_timeline [--out DIR] [--die CASE]");
    }
    make_dir(out);
    test_example();
    test_nested_and_totals();
    test_zero_step();
    test_null_and_outside(out);
    test_reserve_growth();
    test_merge(out);
    test_event_cap(out);
    test_bad_parts(out);
    test_host_clock();
    test_capture();
    printf("%s: %d failure%s\n", failures ? "FAIL" : "ok", failures, failures == 1 ? "" : "s");
    return failures ? 1 : 0;
}
