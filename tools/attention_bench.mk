# The standalone attention benchmark (tools/attention_bench.cu; README.md, "Running on a GPU"):
# variants of the causal attention timed at many shapes in one call, beside PyTorch's flash and
# cuDNN SDPA through tools/attention_bench.sh.
#
#   make attention-bench            build/attention_bench: nvcc for sm_80, sm_90 and compute_90 PTX,
#                                   the CUDA runtime only (the command line in the source's header
#                                   does the same with nvcc alone); part of `make` where nvcc is
#                                   found, and of the GPU bundle
#   build/tools/attention_bench_host   the same source on the host runtime (suite gpu-bench)
#
# NVCC_BUILD is set by train/train_cuda.mk, read after this fragment: the nvcc prerequisites are
# expanded a second time, once every makefile has been read.

ATTENTION_BENCH_SRCS = tools/attention_bench.cu tools/bench_device.cu $(CUDA_ATTENTION_SRCS)
ATTENTION_BENCH_C_OBJS = $(BUILD)/tools/kernel_costs.o $(BUILD)/model/documents.o $(BUILD)/comm/fail.o
ATTENTION_BENCH_NVCC_OBJS = $(ATTENTION_BENCH_SRCS:%.cu=$(NVCC_BUILD)/cuda/%.o)
ATTENTION_BENCH_HOST := $(BUILD)/tools/attention_bench_host
ATTENTION_BENCH_GPU := $(BUILD)/attention_bench

TEST_PROGS += $(ATTENTION_BENCH_HOST)
GPU_PROGRAMS += $(ATTENTION_BENCH_GPU)
GPU_PROGRAMS_HOST += $(ATTENTION_BENCH_HOST)
.SECONDARY: $(ATTENTION_BENCH_SRCS:%.cu=$(BUILD)/cuda-host/%.o)
.SECONDEXPANSION:
$(ATTENTION_BENCH_HOST): $(ATTENTION_BENCH_SRCS:%.cu=$(BUILD)/cuda-host/%.o) $(ATTENTION_BENCH_C_OBJS) \
		$(CUDA_HOST_OBJS) $(FAIL_OBJS)
	@mkdir -p $(dir $@)
	$(CXX) $(CUDA_HOST_CXXFLAGS) $^ $(LDLIBS) -o $@

# nvcc: its own objects of the attention source (the trainer's flags and architectures), linked with
# the static CUDA runtime: no cuBLAS, no MPI, no OpenBLAS. Linked by the host compiler: nvcc's link
# would add a device-link fat binary without the compute_90 PTX.
.PHONY: attention-bench
ifeq ($(CUDA_NVCC),)
attention-bench:
	@echo "attention-bench: nvcc not found (install the CUDA toolkit or set NVCC=/path/to/nvcc)" >&2; exit 1
else
attention-bench: $(ATTENTION_BENCH_GPU)
PROGRAMS += $(ATTENTION_BENCH_GPU)
$(ATTENTION_BENCH_GPU): $$(ATTENTION_BENCH_NVCC_OBJS) $(ATTENTION_BENCH_C_OBJS)
	@mkdir -p $(dir $@)
	$(CUDA_LIB_CHECK)
	$(CXX) $^ -o $@ -L$(CUDA_LIB_DIR) -lcudart_static -ldl -lpthread -lrt
endif
