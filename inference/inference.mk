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

# The same cache-vs-recomputation test on the CUDA backend executed by the host runtime
# (tests/cuda_host), fp32 storage: the generator, the cache layers and the test as CUDA C++.
GENERATE_CUDA_HOST_FP32_OBJS = $(addprefix $(BUILD)/cuda-host-cxx-fp32/,$(GENERATE_SRCS:.c=.o) \
	tests/test_generate.o)
.SECONDARY: $(GENERATE_CUDA_HOST_FP32_OBJS)
TEST_PROGS += $(BUILD)/tests/cuda_host/test_generate_fp32
SUITES_cuda += cuda-generate
$(BUILD)/tests/cuda_host/test_generate_fp32: $(GENERATE_CUDA_HOST_FP32_OBJS) \
		$$(filter-out $$(BUILD)/train/train.o,$$(CUDA_TRAIN_C_OBJS)) \
		$$(CUDA_TRAIN_HOST_OBJS_FP32) $$(CUDA_HOST_OBJS)
	$(MPICC) $(CFLAGS) $^ -o $@ $(TOKENIZER_LIBS) $(LDLIBS) -lstdc++
