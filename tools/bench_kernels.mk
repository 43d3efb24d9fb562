# The kernel benchmark of the GPU run kit (tools/bench_kernels_cuda.cu): every CUDA launcher of the
# training step timed with CUDA events at the gpt3-125m and gpt3-2.7b shapes, against floors from
# tools/kernel_costs.c (the cost notes' formulas) and the peak table (train/gpu_peaks.c); and our
# attention against PyTorch's flash SDPA (tools/sdpa_bench.py, then --attention-vs).
#
#   build/gpu/bench_kernels_cuda          nvcc build (bf16), part of `make gpu-programs` and the bundle
#   build/tools/bench_kernels_cuda_host   the same source on the host runtime (tests, the self-test
#                                         bundle); `--tiny` runs in seconds there
#   build/tests/test_kernel_costs         the cost formulas against the notes' tables
#
# Included just before tools/gpu_bundle.mk, after every other fragment: CUDA_HOST_OBJS, the kernel
# objects and CUDA_KERNEL_SRCS are defined by now; GPU_LINK (gpu_bundle.mk) is only named in a
# recipe, which make expands when it runs.

BENCH_KERNELS_HOST := $(BUILD)/tools/bench_kernels_cuda_host
BENCH_KERNELS_GPU := $(BUILD)/gpu/bench_kernels_cuda
# Host-side C objects of both builds: costs, peak table, presets, error reporting.
BENCH_KERNELS_C_OBJS = $(BUILD)/tools/kernel_costs.o $(BUILD)/train/gpu_peaks.o $(BUILD)/model/config.o \
	$(BUILD)/model/token_order.o $(FAIL_OBJS)

TEST_PROGS += $(BENCH_KERNELS_HOST) $(BUILD)/tests/test_kernel_costs
SUITES_cuda += gpu-bench

$(BUILD)/tests/test_kernel_costs: $(BUILD)/tests/test_kernel_costs.o $(BUILD)/tools/kernel_costs.o
	$(CC) $(CFLAGS) $^ -o $@ -lm

# Host runtime: the bf16 kernel objects of the other fragments' host-runtime rules.
# The benchmark's files (tools/bench_kernels.h) and the fills and timing it shares with the attention
# benchmark (tools/bench_device.cuh).
BENCH_KERNELS_SRCS = tools/bench_kernels_cuda.cu tools/bench_kernel_cases.cu tools/bench_timing.cu \
	tools/bench_device.cu
.SECONDARY: $(BENCH_KERNELS_SRCS:%.cu=$(BUILD)/cuda-host/%.o)
$(BENCH_KERNELS_HOST): $(BENCH_KERNELS_SRCS:%.cu=$(BUILD)/cuda-host/%.o) $(CUDA_LAYERS_OBJS) $(CUDA_MATMUL_OBJS) \
		$(CUDA_ATTENTION_HOST_OBJS) $(BENCH_KERNELS_C_OBJS) $(CUDA_HOST_OBJS)
	@mkdir -p $(dir $@)
	$(CXX) $(CUDA_HOST_CXXFLAGS) $^ $(LDLIBS) -o $@

# nvcc: the bf16 kernel library the trainer links (train/train_cuda.mk).
$(BENCH_KERNELS_GPU): $(BENCH_KERNELS_SRCS:%.cu=$(NVCC_BUILD)/cuda/%.o) $(CUDA_KERNEL_LIB) $(BENCH_KERNELS_C_OBJS)
	$(CUDA_LIB_CHECK)
	@mkdir -p $(dir $@)
	$(GPU_LINK)

GPU_PROGRAMS += $(BENCH_KERNELS_GPU)
GPU_PROGRAMS_HOST += $(BENCH_KERNELS_HOST)
