# CUDA kernels of the token-local layers (model/layers_cuda.cuh: encoder.cu, rope.cu, layernorm.cu
# with RMSNorm, qk_norm.cu, gelu.cu, swiglu.cu) and their test against the CPU twins, run on the host runtime
# (tests/cuda_host) in both storage precisions: bf16 (default) and fp32 (-DGPT_CUDA_FP32).
CUDA_LAYERS_SRCS := model/encoder.cu model/rope.cu model/layernorm.cu model/qk_norm.cu \
                    model/gelu.cu model/swiglu.cu
# Host-runtime objects of the kernels (bf16 and fp32 storage), for programs built from them.
CUDA_LAYERS_OBJS := $(CUDA_LAYERS_SRCS:%.cu=$(BUILD)/cuda-host/%.o)
CUDA_LAYERS_OBJS_FP32 := $(CUDA_LAYERS_SRCS:%.cu=$(BUILD)/cuda-host-fp32/%.o)
# CPU twins (C) the test compares against.
CUDA_LAYERS_CPU_OBJS := $(BUILD)/model/layers.o $(BUILD)/model/token_order.o $(FAIL_OBJS)

TEST_PROGS += $(BUILD)/tests/cuda/test_layers_cuda $(BUILD)/tests/cuda/test_layers_cuda_fp32
SUITES_cuda += cuda-layers

# Any .cu source built for the host runtime with fp32 storage: $(BUILD)/cuda-host-fp32/<path>.o
$(BUILD)/cuda-host-fp32/%.o: %.cu
	@mkdir -p $(dir $@)
	$(CXX) $(CUDA_HOST_CXXFLAGS) -DGPT_CUDA_FP32 -MMD -MP -x c++ -c $< -o $@

# This fragment is read before tests/cuda_host/module.mk defines CUDA_HOST_OBJS, so the link
# rules name it with $$ and secondary expansion (expanded when the rule is used, not when read).
.SECONDEXPANSION:
$(BUILD)/tests/cuda/test_layers_cuda: $(BUILD)/cuda-host/tests/cuda/test_layers_cuda.o $(CUDA_LAYERS_OBJS) \
                                      $(CUDA_LAYERS_CPU_OBJS) $$(CUDA_HOST_OBJS)
	@mkdir -p $(dir $@)
	$(CXX) $(CUDA_HOST_CXXFLAGS) $^ $(LDLIBS) -o $@

$(BUILD)/tests/cuda/test_layers_cuda_fp32: $(BUILD)/cuda-host-fp32/tests/cuda/test_layers_cuda.o \
                                           $(CUDA_LAYERS_OBJS_FP32) \
                                           $(CUDA_LAYERS_CPU_OBJS) $$(CUDA_HOST_OBJS)
	@mkdir -p $(dir $@)
	$(CXX) $(CUDA_HOST_CXXFLAGS) $^ $(LDLIBS) -o $@
