# Error reporting, linked into every program.
FAIL_OBJS = $(BUILD)/comm/fail.o
