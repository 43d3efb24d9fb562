# CUDA backend part 1: cuBLASLt GEMMs, the fused classifier, AdamW and the global norm
# (model/matmul.cu, classifier.cu, adamw.cu, global_norm.cu), tested against their CPU twins under
# the host runtime (tests/cuda_host) in both storage precisions: bf16 (default) and fp32
# (-DGPT_CUDA_FP32, objects under $(BUILD)/cuda-matmul-fp32/).
CUDA_MATMUL_SRCS := model/matmul.cu model/classifier.cu model/adamw.cu model/muon.cu model/global_norm.cu
# Host-runtime objects of the kernels, for programs built from them.
CUDA_MATMUL_OBJS := $(CUDA_MATMUL_SRCS:%.cu=$(BUILD)/cuda-host/%.o)
CUDA_MATMUL_OBJS_FP32 := $(CUDA_MATMUL_SRCS:%.cu=$(BUILD)/cuda-matmul-fp32/%.o)
CUDA_MATMUL_TEST := $(BUILD)/tests/cuda/test_matmul_loss_adamw

TEST_PROGS += $(CUDA_MATMUL_TEST) $(CUDA_MATMUL_TEST)_fp32
SUITES_cuda += cuda-matmul

# The fp32 build of any .cu source (a distinct directory, so no clash with other fragments' rules).
$(BUILD)/cuda-matmul-fp32/%.o: %.cu
	@mkdir -p $(dir $@)
	$(CXX) $(CUDA_HOST_CXXFLAGS) -DGPT_CUDA_FP32 -MMD -MP -x c++ -c $< -o $@

# CUDA_HOST_OBJS is defined by tests/cuda_host/module.mk, which is included after this fragment:
# $$ defers it to the second expansion of the prerequisites.
.SECONDEXPANSION:
$(CUDA_MATMUL_TEST): $(BUILD)/cuda-host/tests/cuda/test_matmul_loss_adamw.o $(CUDA_MATMUL_OBJS) \
                     $$(CUDA_HOST_OBJS) $(MODEL_OBJS)
	@mkdir -p $(dir $@)
	$(CXX) $(CUDA_HOST_CXXFLAGS) $^ $(LDLIBS) -o $@

$(CUDA_MATMUL_TEST)_fp32: $(BUILD)/cuda-matmul-fp32/tests/cuda/test_matmul_loss_adamw.o \
                          $(CUDA_MATMUL_OBJS_FP32) $$(CUDA_HOST_OBJS) $(MODEL_OBJS)
	@mkdir -p $(dir $@)
	$(CXX) $(CUDA_HOST_CXXFLAGS) $^ $(LDLIBS) -o $@
