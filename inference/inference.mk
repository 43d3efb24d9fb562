# build/generate: text generation with a KV cache on one process or a sequence-parallel mesh
# (inference/generator.h), and its tests (tests/suites/generate.list).
# The KV cache and its prefill and decode layers are written once against attention/dist_ops.h,
# like the schedules (compiled as CUDA C++ for the CUDA backend).
KV_CACHE_SRCS = attention/kv_cache.c attention/decode_attention.c
GENERATE_SRCS = inference/generator.c $(KV_CACHE_SRCS)
GENERATE_OBJS = $(GENERATE_SRCS:%.c=$(BUILD)/%.o) $(BUILD)/model/sampling.o $(MODEL_OBJS) \
	$(CHECKPOINT_OBJS) $(DIST_ATTENTION_OBJS) $(COMM_OBJS) $(TRAIN_COMM_OBJS)

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

# --- The CUDA backend -------------------------------------------------------------------------------
# build/generate linked with the CUDA backend as the CUDA trainer is (train/train_cuda.mk): generate.c
# and the C objects as C, the generator and the cache layers written once compiled as CUDA C++
# (real = floatX), the trainer's backend objects. The C objects are the CUDA trainer's but the
# trainer program's own (TRAIN_PROGRAM_OBJS).
#   build/generate_cuda_host, build/generate_cuda_host_fp32   the host runtime (bf16, fp32)
#   build/generate_cuda                                       nvcc (built by `make train-cuda`)
GENERATE_CUDA_C_OBJS = $(BUILD)/inference/generate.o \
	$$(filter-out $$(TRAIN_PROGRAM_OBJS),$$(CUDA_TRAIN_C_OBJS))
GENERATE_CUDA_HOST_OBJS = $(GENERATE_SRCS:%.c=$(BUILD)/cuda-host-cxx/%.o)
GENERATE_CUDA_HOST_FP32_OBJS = $(GENERATE_SRCS:%.c=$(BUILD)/cuda-host-cxx-fp32/%.o)
.SECONDARY: $(GENERATE_CUDA_HOST_OBJS) $(GENERATE_CUDA_HOST_FP32_OBJS)
TEST_PROGS += $(BUILD)/generate_cuda_host $(BUILD)/generate_cuda_host_fp32

$(BUILD)/generate_cuda_host: $(GENERATE_CUDA_C_OBJS) $(GENERATE_CUDA_HOST_OBJS) \
		$$(CUDA_TRAIN_HOST_OBJS) $$(CUDA_HOST_OBJS)
	$(MPICC) $(CFLAGS) $^ -o $@ $(TOKENIZER_LIBS) $(LDLIBS) -lstdc++
$(BUILD)/generate_cuda_host_fp32: $(GENERATE_CUDA_C_OBJS) $(GENERATE_CUDA_HOST_FP32_OBJS) \
		$$(CUDA_TRAIN_HOST_OBJS_FP32) $$(CUDA_HOST_OBJS)
	$(MPICC) $(CFLAGS) $^ -o $@ $(TOKENIZER_LIBS) $(LDLIBS) -lstdc++

ifneq ($(CUDA_NVCC),)
GENERATE_NVCC_OBJS = $(GENERATE_SRCS:%.c=$(NVCC_BUILD)/cuda/%.o)
$(BUILD)/generate_cuda: $(GENERATE_CUDA_C_OBJS) $$(GENERATE_NVCC_OBJS) \
		$$(CUDA_TRAIN_NVCC_OBJS)
	$(CUDA_LIB_CHECK)
	$(MPICC) $(CFLAGS) $^ -o $@ $(CUDA_KERNEL_LINK) $(TOKENIZER_LIBS) $(CUDA_TRAIN_LIBS) $(LDLIBS) -lstdc++
endif

# The cache-vs-recomputation test (tests/test_generate.c) on the CUDA backend executed by the host
# runtime, fp32 storage: the test compiled as CUDA C++ too.
TEST_PROGS += $(BUILD)/tests/cuda_host/test_generate_fp32
SUITES_cuda += cuda-generate
.SECONDARY: $(BUILD)/cuda-host-cxx-fp32/tests/test_generate.o
$(BUILD)/tests/cuda_host/test_generate_fp32: $(BUILD)/cuda-host-cxx-fp32/tests/test_generate.o \
		$(GENERATE_CUDA_HOST_FP32_OBJS) $$(filter-out $$(TRAIN_PROGRAM_OBJS),$$(CUDA_TRAIN_C_OBJS)) \
		$$(CUDA_TRAIN_HOST_OBJS_FP32) $$(CUDA_HOST_OBJS)
	$(MPICC) $(CFLAGS) $^ -o $@ $(TOKENIZER_LIBS) $(LDLIBS) -lstdc++
