# The per-rank timeline of compute, communication and waits, and its Chrome trace
# (comm/timeline.h): plain C, no MPI or CUDA. It writes its files with comm/atomic_file.c and
# reports caller bugs through comm/fail.c, so a program that links TIMELINE_OBJS also links
# $(BUILD)/comm/atomic_file.o (in LAUNCH_OBJS and CHECKPOINT_OBJS already) and FAIL_OBJS.
TIMELINE_OBJS = $(BUILD)/comm/timeline.o $(BUILD)/comm/timeline_capture.o $(BUILD)/comm/timeline_trace.o

# Fractions on a scripted clock, reserve growth, parts of two ranks merged and checked by
# tools/check_trace.py, missing and malformed parts, the host clock.
TEST_PROGS += $(BUILD)/tests/test_timeline
SUITES_dist += timeline

$(BUILD)/tests/test_timeline: $(BUILD)/tests/test_timeline.o $(TIMELINE_OBJS) \
		$(BUILD)/comm/atomic_file.o $(FAIL_OBJS)
	$(CC) $(CFLAGS) $^ -o $@ $(LDLIBS)
