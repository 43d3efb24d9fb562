# build/generate: text generation with a KV cache on one process or a sequence-parallel mesh
# (inference/generator.h), and its tests (tests/suites/generate.list).
# The KV cache and its prefill and decode layers are written once against attention/dist_ops.h,
# like the schedules (compiled as CUDA C++ for the CUDA backend).
KV_CACHE_SRCS = attention/kv_cache.c attention/decode_attention.c
GENERATE_SRCS = inference/generator.c $(KV_CACHE_SRCS)
GENERATE_OBJS = $(GENERATE_SRCS:%.c=$(BUILD)/%.o) $(BUILD)/model/sampling.o $(MODEL_OBJS) \
	$(CHECKPOINT_OBJS) $(DIST_ATTENTION_OBJS) $(COMM_OBJS) $(BUILD)/comm/comm_device_none.o

PROGRAMS += $(BUILD)/generate
TEST_PROGS += $(BUILD)/generate $(BUILD)/tests/test_generate
SUITES_generate += generate

$(BUILD)/generate: $(BUILD)/inference/generate.o $(GENERATE_OBJS) $(TOKENIZER_OBJS)
	$(MPICC) $(CFLAGS) $^ -o $@ $(TOKENIZER_LIBS) $(LDLIBS)

$(BUILD)/tests/test_generate: $(BUILD)/tests/test_generate.o $(GENERATE_OBJS)
	$(MPICC) $(CFLAGS) $^ -o $@ $(LDLIBS)

# Prefill and decode tokens/s, 1 vs P ranks, Tree vs Ring decoding, bytes per decoded token.
.PHONY: bench-generate
bench: bench-generate
bench-generate: $(BUILD)/generate $(BUILD)/tests/test_generate
	bash tools/bench_generate.sh $(BUILD)/bench/generate
