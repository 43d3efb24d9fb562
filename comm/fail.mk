# Error reporting and flag values, linked into every program.
FAIL_OBJS = $(BUILD)/comm/fail.o $(BUILD)/comm/flag_values.o
