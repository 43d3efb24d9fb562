# CUDA partial attention (attention/partial_attention.cu): its test against the CPU twin, built
# for the host runtime (tests/cuda_host) in both storage precisions: bf16 (the default) and fp32
# (-DGPT_CUDA_FP32, objects under $(BUILD)/cuda-host-fp32-attn/). nvcc compiles the same sources
# in `make cuda-compile-check`.
#
# This fragment is read before tests/cuda_host/module.mk (fragments are included in sorted order),
# where CUDA_HOST_OBJS is defined with `:=`: the link prerequisites that name it are expanded a
# second time, after every makefile has been read (.SECONDEXPANSION, `$$(...)`).
CUDA_ATTN_TESTS := $(BUILD)/tests/cuda/test_attention_cuda $(BUILD)/tests/cuda/test_attention_cuda_fp32
TEST_PROGS += $(CUDA_ATTN_TESTS)
SUITES_cuda += cuda-attention
SUITES_sweep += cuda-attention-sweep
.SECONDARY: $(BUILD)/cuda-host/tests/cuda/test_attention_cuda.o $(BUILD)/cuda-host/attention/partial_attention.o \
            $(BUILD)/cuda-host-fp32-attn/tests/cuda/test_attention_cuda.o \
            $(BUILD)/cuda-host-fp32-attn/attention/partial_attention.o

# The same .cu sources with fp32 storage.
$(BUILD)/cuda-host-fp32-attn/%.o: %.cu
	@mkdir -p $(dir $@)
	$(CXX) $(CUDA_HOST_CXXFLAGS) -DGPT_CUDA_FP32 -MMD -MP -x c++ -c $< -o $@

.SECONDEXPANSION:
$(BUILD)/tests/cuda/test_attention_cuda: $(BUILD)/cuda-host/tests/cuda/test_attention_cuda.o \
		$(BUILD)/cuda-host/attention/partial_attention.o $(BUILD)/attention/partial_attention.o \
		$$(CUDA_HOST_OBJS) $(FAIL_OBJS)
	@mkdir -p $(dir $@)
	$(CXX) $(CUDA_HOST_CXXFLAGS) $^ $(LDLIBS) -o $@

$(BUILD)/tests/cuda/test_attention_cuda_fp32: $(BUILD)/cuda-host-fp32-attn/tests/cuda/test_attention_cuda.o \
		$(BUILD)/cuda-host-fp32-attn/attention/partial_attention.o $(BUILD)/attention/partial_attention.o \
		$$(CUDA_HOST_OBJS) $(FAIL_OBJS)
	@mkdir -p $(dir $@)
	$(CXX) $(CUDA_HOST_CXXFLAGS) $^ $(LDLIBS) -o $@

# The mutant of the dQ ordering test (tests/test_attention_order.sh): the bf16 backward with the
# semaphore wait removed (-DFLASH_BWD_UNORDERED), so its dQ adds land in the schedule's order.
TEST_PROGS += $(BUILD)/tests/cuda/test_attention_cuda_unordered
.SECONDARY: $(BUILD)/cuda-host-unordered/attention/partial_attention.o
$(BUILD)/cuda-host-unordered/%.o: %.cu
	@mkdir -p $(dir $@)
	$(CXX) $(CUDA_HOST_CXXFLAGS) -DFLASH_BWD_UNORDERED -MMD -MP -x c++ -c $< -o $@

$(BUILD)/tests/cuda/test_attention_cuda_unordered: $(BUILD)/cuda-host/tests/cuda/test_attention_cuda.o \
		$(BUILD)/cuda-host-unordered/attention/partial_attention.o $(BUILD)/attention/partial_attention.o \
		$$(CUDA_HOST_OBJS) $(FAIL_OBJS)
	@mkdir -p $(dir $@)
	$(CXX) $(CUDA_HOST_CXXFLAGS) $^ $(LDLIBS) -o $@
