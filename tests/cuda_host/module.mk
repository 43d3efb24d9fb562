# Host runtime for CUDA sources (tests/cuda_host/README.md), its tests, and the nvcc compile check.

CUDA_HOST_SRCS := $(addprefix tests/cuda_host/,fiber.cpp block_exec.cpp runtime_api.cpp stream_sched.cpp memory.cpp \
                    gemm.cpp cublas.cpp cublaslt.cpp ptx.cpp ptx_sm90.cpp)
# The runtime, for any program built from .cu sources on the host (link with $(FAIL_OBJS) $(LDLIBS)).
CUDA_HOST_OBJS := $(CUDA_HOST_SRCS:%.cpp=$(BUILD)/%.o)
# The same runtime switching fibers with glibc's swapcontext (the fallback for CPUs other than
# x86-64), built so that the fallback is tested too.
CUDA_HOST_UCONTEXT_OBJS := $(filter-out $(BUILD)/tests/cuda_host/fiber.o,$(CUDA_HOST_OBJS)) \
                           $(BUILD)/tests/cuda_host/fiber-ucontext.o
# Compiles a .cu file with the host compiler against the runtime. Stack-clash protection makes a
# large local array touch its pages in order, so a fiber stack overflow hits the guard page.
CUDA_HOST_CXXFLAGS = $(CXXFLAGS) -DCUDA_HOST -fstack-clash-protection

$(BUILD)/tests/cuda_host/%.o: tests/cuda_host/%.cpp
	@mkdir -p $(dir $@)
	$(CXX) $(CUDA_HOST_CXXFLAGS) -MMD -MP -c $< -o $@

$(BUILD)/tests/cuda_host/fiber-ucontext.o: tests/cuda_host/fiber.cpp
	@mkdir -p $(dir $@)
	$(CXX) $(CUDA_HOST_CXXFLAGS) -DCUDA_HOST_FIBER_UCONTEXT -MMD -MP -c $< -o $@

# Any .cu source, built for the host runtime: $(BUILD)/cuda-host/<path>.o
$(BUILD)/cuda-host/%.o: %.cu
	@mkdir -p $(dir $@)
	$(CXX) $(CUDA_HOST_CXXFLAGS) -MMD -MP -x c++ -c $< -o $@

CUDA_HOST_TESTS := test_runtime test_api test_streams test_graphs test_cublas test_curand test_ptx
CUDA_HOST_TEST_PROGS := $(CUDA_HOST_TESTS:%=$(BUILD)/tests/cuda_host/%) \
                        $(BUILD)/tests/cuda_host/test_runtime_ucontext
TEST_PROGS += $(CUDA_HOST_TEST_PROGS)
.SECONDARY: $(CUDA_HOST_TESTS:%=$(BUILD)/cuda-host/tests/cuda_host/%.o)
SUITES_cuda += cuda-host

$(BUILD)/tests/cuda_host/test_%: $(BUILD)/cuda-host/tests/cuda_host/test_%.o $(CUDA_HOST_OBJS) $(FAIL_OBJS)
	$(CXX) $(CUDA_HOST_CXXFLAGS) $^ $(LDLIBS) -o $@

$(BUILD)/tests/cuda_host/test_runtime_ucontext: $(BUILD)/cuda-host/tests/cuda_host/test_runtime.o \
                                                $(CUDA_HOST_UCONTEXT_OBJS) $(FAIL_OBJS)
	$(CXX) $(CUDA_HOST_CXXFLAGS) $^ $(LDLIBS) -o $@

# --- nvcc compile check: every .cu of the project, for sm_80 and sm_90, warnings as errors -------
# Compile only (no GPU needed). Without nvcc the target says so and succeeds.
CUDA_NVCC := $(firstword $(shell command -v $(NVCC) 2>/dev/null) $(wildcard /usr/local/cuda/bin/nvcc))
# Machine code for sm_80 (A100) and sm_90 (H100, H200), and compute_90 PTX that the driver compiles
# for newer GPUs (instead of failing with "no kernel image"). --compress-mode=size: the fatbins are
# a third of the default's size (the GPU bundle has a size budget).
NVCC_ARCH_FLAGS := -gencode arch=compute_80,code=sm_80 -gencode arch=compute_90,code=sm_90 \
                   -gencode arch=compute_90,code=compute_90 --compress-mode=size
# test_ptx (the Hopper wrappers of model/cuda_ptx_sm90.cuh) and the bf16 attention with its Hopper
# kernels carry sm_90a-only instructions: their sm_90 machine code is sm_90a (an H100 or H200 runs
# it). train/train_cuda.mk and tools/gpu_bundle.mk give them these flags.
NVCC_ARCH_FLAGS_SM90A := -gencode arch=compute_80,code=sm_80 -gencode arch=compute_90a,code=sm_90a \
                         -gencode arch=compute_90,code=compute_90 --compress-mode=size
CUDA_SOURCES := $(patsubst ./%,%,$(shell find . -path ./$(BUILD) -prune -o -path ./.git -prune -o \
                  -path ./tools/node -prune -o -name '*.cu' -print 2>/dev/null))
# The objects of the nvcc builds themselves (train/train_cuda.mk's rule and flags: -Werror
# all-warnings, ptxas's spill warning an error for the attention kernels), so that the trainers and
# the GPU bundle built after the check compile nothing twice; the sources no nvcc program links
# (the host runtime's own tests) are compiled by the same rule.
NVCC_CHECK_OBJS := $(CUDA_SOURCES:%.cu=$(BUILD)/cuda/%.o)

.PHONY: cuda-compile-check
ifeq ($(CUDA_NVCC),)
cuda-compile-check:
	@echo "cuda-compile-check: SKIPPED: nvcc not found (install the CUDA toolkit or set NVCC=/path/to/nvcc)"
else
cuda-compile-check: $(NVCC_CHECK_OBJS)
	@echo "cuda-compile-check: $(words $(NVCC_CHECK_OBJS)) .cu files compile with $(CUDA_NVCC) for sm_80, sm_90 and compute_90 PTX"
endif
