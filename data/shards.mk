# Token shards and the distributed data loader; linked by every program that reads tokens.
DATA_OBJS = $(BUILD)/data/shard.o $(BUILD)/data/loader.o $(BUILD)/data/blend.o $(BUILD)/data/mc_eval.o \
	$(BUILD)/data/whole_file.o $(BUILD)/comm/atomic_file.o

TEST_PROGS += $(BUILD)/tests/test_shard $(BUILD)/tests/test_loader
SUITES_data += shards

$(BUILD)/tests/test_shard: $(BUILD)/tests/test_shard.o $(DATA_OBJS) $(FAIL_OBJS)
	$(CC) $(CFLAGS) $^ -o $@ $(LDLIBS)

$(BUILD)/tests/test_loader: $(BUILD)/tests/test_loader.o $(DATA_OBJS) $(FAIL_OBJS)
	$(CC) $(CFLAGS) $^ -o $@ $(LDLIBS)
