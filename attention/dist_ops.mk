# The schedules' backend operations (attention/dist_ops.h), one implementation per backend:
#   DIST_OPS_CPU_OBJS(_F64)         host loops (attention/dist_ops_cpu.c), real = float (double)
#   DIST_OPS_CUDA_HOST_OBJS(_FP32)  kernels on the backend stream (attention/dist_ops_cuda.cu) for
#                                   the host runtime, bf16 (fp32) storage; they call
#                                   cuda_backend_stream(), so a program links the CUDA backend too.
# The two define the same names: a program links one of them.
DIST_OPS_CPU_OBJS = $(BUILD)/attention/dist_ops_cpu.o
DIST_OPS_CPU_OBJS_F64 = $(BUILD)/f64/attention/dist_ops_cpu.o
DIST_OPS_CUDA_HOST_OBJS = $(BUILD)/cuda-host/attention/dist_ops_cuda.o
DIST_OPS_CUDA_HOST_OBJS_FP32 = $(BUILD)/cuda-host-fp32-attn/attention/dist_ops_cuda.o

# tests/cuda/test_dist_ops_cuda.cu: the CUDA ops against host loops, in both storage precisions.
# Besides the ops it links the backend context (model/backend_kernels_cuda.cu: the stream), which
# drags in the layer and matmul kernels it forwards to, and the partial-attention kernels.
DIST_OPS_CUDA_TESTS := $(BUILD)/tests/cuda/test_dist_ops_cuda $(BUILD)/tests/cuda/test_dist_ops_cuda_fp32
TEST_PROGS += $(DIST_OPS_CUDA_TESTS)
SUITES_cuda += cuda-dist-ops
.SECONDARY: $(BUILD)/cuda-host/tests/cuda/test_dist_ops_cuda.o \
            $(BUILD)/cuda-host-fp32-attn/tests/cuda/test_dist_ops_cuda.o

# The kernel fragments (model/cuda_*.mk) are read after this one: $$ defers their variables to the
# second expansion of the prerequisites.
.SECONDEXPANSION:
$(BUILD)/tests/cuda/test_dist_ops_cuda: $(BUILD)/cuda-host/tests/cuda/test_dist_ops_cuda.o \
		$(DIST_OPS_CUDA_HOST_OBJS) $(CUDA_ATTENTION_HOST_OBJS) \
		$(BUILD)/cuda-host/model/backend_kernels_cuda.o $$(CUDA_LAYERS_OBJS) $$(CUDA_MATMUL_OBJS) \
		$$(CUDA_HOST_OBJS) $(FAIL_OBJS)
	@mkdir -p $(dir $@)
	$(CXX) $(CUDA_HOST_CXXFLAGS) $^ $(LDLIBS) -o $@

$(BUILD)/tests/cuda/test_dist_ops_cuda_fp32: $(BUILD)/cuda-host-fp32-attn/tests/cuda/test_dist_ops_cuda.o \
		$(DIST_OPS_CUDA_HOST_OBJS_FP32) $(CUDA_ATTENTION_HOST_OBJS_FP32) \
		$(BUILD)/cuda-host-fp32/model/backend_kernels_cuda.o $$(CUDA_LAYERS_OBJS_FP32) \
		$$(CUDA_MATMUL_OBJS_FP32) $$(CUDA_HOST_OBJS) $(FAIL_OBJS)
	@mkdir -p $(dir $@)
	$(CXX) $(CUDA_HOST_CXXFLAGS) $^ $(LDLIBS) -o $@
