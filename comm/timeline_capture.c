// The timeline of work captured into a CUDA graph (comm/timeline.h, "CUDA GRAPHS"): a capture's
// begin and end, and each launch's replay of its template (the marks and spans timeline.c took
// while it was open) into the step's slots. A template's spans hold the timeline's interned
// labels, so it must not outlive its timeline.
#include <stdlib.h>

#include "comm/fail.h"
#include "comm/timeline_internal.h"

void timeline_capture_begin(Timeline* tl) {
    if (!tl) return;
    CHECK(tl->clock->capture_mark, "caller bug", "timeline_capture_begin: this clock cannot mark "
          "inside a CUDA graph (no capture_mark)");
    CHECK(tl->in_step && !tl->capture, "capture inside a step, one capture at a time",
          "timeline_capture_begin %s", tl->capture ? "inside another capture" : "outside a step");
    tl->capture = xcalloc(1, sizeof *tl->capture, "timeline capture");
}

TimelineCapture* timeline_capture_end(Timeline* tl) {
    if (!tl) return NULL;
    CHECK(tl->capture, "caller bug", "timeline_capture_end without timeline_capture_begin");
    TimelineCapture* c = tl->capture;
    tl->capture = NULL;
    return c;
}

int timeline_capture_marks(const TimelineCapture* cap) { return cap ? cap->nmarks : 0; }

int timeline_replay(Timeline* tl, const TimelineCapture* cap) {
    if (!tl || !cap || !tl->in_step) return -1;
    CHECK(!tl->capture, "caller bug", "timeline_replay inside a capture");
    tl->dropped_marks += cap->dropped;
    // The last slot is the step-end mark's.
    if (tl->nmarks + cap->nmarks > tl->marks_cap - 1) {
        tl->dropped_marks += cap->nmarks;
        return -1;
    }
    const int first = tl->nmarks;
    for (int k = 0; k < cap->nmarks; k++) tl->mark_track[first + k] = cap->track[k];
    tl->nmarks += cap->nmarks;
    for (int i = 0; i < cap->nspans; i++) {
        Span s = cap->spans[i];
        s.begin += first;
        s.end += first;
        timeline_push_span(&tl->spans, &tl->nspans, &tl->spans_cap, s);
    }
    return first;
}

int timeline_replayed_slot(int first, int captured_slot) {
    if (first < 0 || captured_slot < 0) return -1;
    CHECK(captured_slot >= CAPTURED_SLOT_BASE, "caller bug", "timeline_replayed_slot: slot %d was "
          "not taken inside a capture", captured_slot);
    return first + captured_slot - CAPTURED_SLOT_BASE;
}
