// A per-rank timeline of one training run: spans of compute, communication issue (host time
// spent posting a collective), communication in flight and waiting (compute blocked on a
// communication), per step and per layer, kept for a Chrome trace (Perfetto, chrome://tracing)
// and summed into the step's fractions. Plain C: no MPI, no CUDA; not thread-safe (one per rank).
//
// Time stamps are MARKS taken by a pluggable clock (TimelineClock): on the CPU a mark is the host
// clock now; on CUDA a mark is an event recorded on a stream, resolved after the step. Marks are
// numbered per step by SLOTS: slot 0 is the step's origin (taken by timeline_step_begin on the
// compute track), later marks count up. Spans name two slots, so a span may begin on one track
// and end on another (an in-flight span from the compute stream to a comm stream): every slot
// resolves relative to the same origin.
//
// Tracing off: pass a NULL Timeline* everywhere; every call is then a NULL check and nothing
// else (timeline_mark returns -1, timeline_step_end and timeline_totals return zeros).
// Outside a step (before timeline_step_begin, after timeline_step_end) timeline_mark returns -1
// and spans naming slot -1 are ignored, so the comm layer may mark unconditionally: collectives
// of setup, evaluation or checkpointing are simply not traced.
//
// FRACTIONS of one step. The step is [0, S] with 0 the origin and S the latest mark of the step
// on the compute track (timeline_step_end takes a step-end mark there, so S covers all the work
// enqueued on it). Every span is clipped to [0, S]; |X| is the length of a union of intervals.
//   busy compute       = union of TL_COMPUTE spans minus union of TL_WAIT spans
//                        (waits happen inside compute spans, on the compute track)
//   compute_frac       = |busy compute| / S
//   wait_frac          = |union of TL_WAIT spans| / S
//   exposed_comm_frac  = |union of TL_COMM_FLIGHT spans minus busy compute| / S
//                        (communication in flight while compute is not busy)
//   comm_bytes         = sum of label bytes of TL_COMM_FLIGHT spans only (issue spans may carry
//                        the same label; they are not counted, so nothing is counted twice)
// With S = 0 every fraction is 0. A span whose end resolves before its begin counts as empty.
//
// MEMORY. No allocation in the step loop once the first steps have run: the clock's reserve()
// is called only between steps (at creation and in timeline_step_end). A step that takes more
// marks than reserved drops the marks beyond (timeline_mark returns -1, the spans naming them are
// ignored, TimelineStep.dropped_marks counts them) and the next steps get room for them. Span
// arrays and the table of label strings grow by doubling and settle after the first step. The
// trace keeps at most max_events spans (timeline_set_max_events); a step whose spans do not fit
// is left out of the trace whole (counted in the part's "dropped_events"), its fractions still
// count.
//
// CUDA GRAPHS. A graph's device work is captured once and replayed at each launch, and so are
// the marks it takes: between timeline_capture_begin and timeline_capture_end (inside a step,
// around the capture) timeline_mark asks the clock for a captured mark (capture_mark: the CUDA
// clock records an event record node) and returns a captured slot, which timeline_span takes like
// any other; the spans naming captured slots make the capture's template, not the step's. A mark
// the clock cannot take inside a graph (the host's: no host code runs at a launch) is -1, so the
// spans naming it (the host's issue spans) are left out. At each launch timeline_replay gives the
// template's marks the step's next slots and adds its spans with them; the clock records those
// slots when the graph runs (the CUDA backend points the graph's event record nodes at the slots'
// events before the launch: gpt_graph_launch). A step without room for the template drops all
// its marks and spans (counted in dropped_marks) and the graph records into the capture's own events.
//
// TRACE. Each rank writes its part (timeline_write_part: TRACE.rank<N>, atomically); the caller
// makes every rank wait (a barrier); rank 0 merges the parts into one Chrome trace JSON file,
// atomically, and removes them (timeline_merge_parts). In the trace: per rank a process (pid =
// rank) named "rank N", per track a thread (tid = track id) named by the track, every span a
// complete event (ph "X") with ts and dur in microseconds, ts = the step origin's wall time
// (CLOCK_REALTIME, taken at timeline_step_begin) + the span's offset, so ranks on one machine
// line up. An event's cat is its kind ("compute", "comm-issue", "comm-flight", "wait") and its
// args are {kind (= cat), comm, group, bytes, layer, phase, step}. otherData holds the world size
// and each rank's totals (timeline_totals) and dropped counts. tools/check_trace.py checks a trace.
#pragma once
#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef enum { TL_COMPUTE, TL_COMM_ISSUE, TL_COMM_FLIGHT, TL_WAIT, TL_NKINDS } TimelineKind;

// The track that timeline_step_begin and timeline_step_end mark: the first one created.
#define TIMELINE_COMPUTE_TRACK 0
// The slot of the step's origin.
#define TIMELINE_ORIGIN_SLOT 0
// Spans the trace keeps unless timeline_set_max_events says otherwise (72 bytes each on 64-bit).
#define TIMELINE_DEFAULT_MAX_EVENTS 1000000

// Where marks come from. `track` is opaque to the timeline (a cudaStream_t on CUDA; ignored by the
// host clock). The timeline calls mark() with slots 0, 1, 2, ... in order within a step (slot 0
// first: the origin), always below the n of the last reserve(); it skips the slots it gives a
// graph's launch (timeline_replay), which the graph's own nodes record.
typedef struct {
    // Records mark number `slot` at the current point of `track` (host clock: now).
    void (*mark)(void* ctx, void* track, int slot);
    // Seconds of marks 0..n-1 relative to mark 0 (the step's origin); called once per step, in
    // timeline_step_end, after the step's last mark (a device clock waits for its events here).
    void (*resolve)(void* ctx, int n, double* seconds);
    // Room for at least n marks; called between steps, never inside one.
    void (*reserve)(void* ctx, int n);
    // Optional (device clocks, NULL on the host's): records captured mark `index` (0, 1, ... in
    // each capture) at the current point of `track`, which is being captured into a graph.
    // Returns 1 when taken, 0 when the track cannot be marked inside a graph (the host's), -1
    // when index is beyond the room (as many captured marks as the last reserve() gave marks).
    int (*capture_mark)(void* ctx, void* track, int index);
} TimelineClock;

// The host clock: CLOCK_MONOTONIC, `track` ignored. Its ctx comes from timeline_host_clock_create
// (and is destroyed by the caller after the timeline).
extern const TimelineClock timeline_host_clock;
typedef struct TimelineHostClock TimelineHostClock;
TimelineHostClock* timeline_host_clock_create(void);
void timeline_host_clock_destroy(TimelineHostClock* hc);

typedef struct Timeline Timeline;

// A timeline of rank `rank` of world_size ranks, marking through clock (which must outlive it;
// clock_ctx is passed to its functions). Reserves room for the first steps' marks.
Timeline* timeline_create(const TimelineClock* clock, void* clock_ctx, int rank, int world_size);
void timeline_destroy(Timeline* tl);
// Most spans the trace keeps (default TIMELINE_DEFAULT_MAX_EVENTS); later steps are left out.
void timeline_set_max_events(Timeline* tl, long max_events);
// Room for n marks per step, the origin and the step-end mark included, from the next step on
// (optional: the timeline grows by itself after a step that ran out, dropping that step's extra
// marks). Between steps only.
void timeline_reserve_marks(Timeline* tl, int n);

// A named track ("compute", "comm row", "comm col", "comm sp", "comm dp", "comm world",
// "host"...); returns its id (0, 1, ... in order of creation; the first is the compute track).
// `clock_track` is what the clock's mark() gets. The name is copied. Returns -1 when tl is NULL.
int timeline_track(Timeline* tl, const char* name, void* clock_track);

// Starts step `step`: takes the origin mark (slot 0) on the compute track and the wall time
// (CLOCK_REALTIME) of the origin. The caller guarantees the compute track is idle here (the
// trainer syncs), so the origin mark is "now" on the host. Not inside a step; needs the compute
// track.
void timeline_step_begin(Timeline* tl, int step);
// A mark now on `track`; returns its slot, or -1 when tl is NULL, outside a step, or out of the
// room reserved for this step.
int timeline_mark(Timeline* tl, int track);

// Labels of a span. Every field may be NULL / -1 / 0; strings are copied (interned once each).
//   name       the event's name; NULL: derived when the trace is written ("all-gather row
//              12.3 KB" for communication, "layer 3 forward" for compute, "wait all-gather row")
//   comm_kind  "all-gather"...      group  "row"...
//   bytes      this rank's received bytes as counted by comm.c (counted on TL_COMM_FLIGHT only)
//   layer      -1: none (a zero-initialized label says layer 0)
//   phase      "forward" / "backward" / "other"
typedef struct {
    const char* name;
    const char* comm_kind;
    const char* group;
    long long bytes;
    int layer;
    const char* phase;
} TimelineLabel;

// A span from mark begin_slot to mark end_slot of this step, on `track` (where the trace shows
// it). A slot of -1 (a dropped mark, or a mark taken outside a step) makes it a no-op; label may
// be NULL.
void timeline_span(Timeline* tl, TimelineKind kind, int track, int begin_slot, int end_slot,
                   const TimelineLabel* label);

// One step's numbers (timeline_step_end) or the sums over the steps so far (timeline_totals).
typedef struct {
    int step;            // step_end: the step number; totals: the last step ended
    int steps;           // step_end: 1; totals: steps summed
    double step_s;       // step_end: S; totals: sum of S
    double compute_frac, exposed_comm_frac, wait_frac;   // totals: weighted by step time
    long long comm_bytes;                                 // totals: summed
    int dropped_marks;   // marks that did not fit the reserved room (summed in totals)
} TimelineStep;

// Ends the step: takes the step-end mark on the compute track, resolves the marks (the clock
// waits for the step's work), computes the fractions, keeps the spans (in host seconds) for the
// trace and returns the step's numbers. Zeros when tl is NULL.
TimelineStep timeline_step_end(Timeline* tl);
// Sums over the steps ended so far, for the end-of-run summary. Zeros when tl is NULL.
TimelineStep timeline_totals(const Timeline* tl);
// Seconds of mark `slot` of the step timeline_step_end ended last, from that step's origin (e.g.
// the boundaries of a step's phases, marked by the caller on the compute track); -1 when tl is
// NULL, slot is -1 (a dropped mark) or no mark of that step, or the step has not ended.
double timeline_mark_seconds(const Timeline* tl, int slot);

// Writes this rank's part, trace_path.rank<N> (one event per line, atomically). Returns 0, or -1
// with a one-line message in err. A no-op returning 0 when tl is NULL.
int timeline_write_part(const Timeline* tl, const char* trace_path, char* err, size_t errlen);
// Rank 0, after every rank wrote its part: merges parts 0..world_size-1 into trace_path (one Chrome
// trace JSON document, atomically) and removes the parts. Returns 0, or -1 with a one-line message
// naming the file when a part is missing or malformed (trace_path then untouched, parts kept).
int timeline_merge_parts(const char* trace_path, int world_size, char* err, size_t errlen);

// The marks and spans taken while a graph is captured (CUDA GRAPHS above).
typedef struct TimelineCapture TimelineCapture;
// Starts a capture (inside a step; the clock must have capture_mark). A no-op when tl is NULL.
void timeline_capture_begin(Timeline* tl);
// Ends it: the template of its marks and spans (NULL when tl is NULL).
TimelineCapture* timeline_capture_end(Timeline* tl);
// Marks of the template (0 for NULL).
int timeline_capture_marks(const TimelineCapture* cap);
// At a launch of the captured graph: the step slot of the template's first mark (its mark k is
// slot first + k), or -1 (tl or cap NULL, outside a step, or no room: the marks are dropped).
int timeline_replay(Timeline* tl, const TimelineCapture* cap);
// The step slot of a captured slot (what timeline_mark returned during the capture) at the
// launch whose template starts at `first`; -1 when either is -1.
int timeline_replayed_slot(int first, int captured_slot);
void timeline_capture_free(TimelineCapture* cap);

// The name of a kind, as the trace's cat: "compute", "comm-issue", "comm-flight", "wait".
const char* timeline_kind_name(TimelineKind kind);

#ifdef __cplusplus
}
#endif
