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
# test_ptx also checks the Hopper wrappers (model/cuda_ptx_sm90.cuh), which are sm_90a-only
# instructions: its sm_90 machine code is sm_90a (an H100 or H200 runs it; elsewhere its sm_90a
# tests skip). The GPU kit's build of it (tools/gpu_bundle.mk) uses the same flags.
NVCC_ARCH_FLAGS_SM90A := -gencode arch=compute_80,code=sm_80 -gencode arch=compute_90a,code=sm_90a \
                         -gencode arch=compute_90,code=compute_90 --compress-mode=size
$(BUILD)/nvcc-check/tests/cuda_host/test_ptx.o: NVCC_ARCH_FLAGS = $(NVCC_ARCH_FLAGS_SM90A)
# So is the bf16 attention with its Hopper kernels (attention/hopper_forward.cu, hopper_backward.cu;
# train/train_cuda.mk). Its kernels must not spill: ptxas's spill warning, an error here, names the kernel.
$(CUDA_ATTENTION_SRCS:%.cu=$(BUILD)/nvcc-check/%.o): NVCC_ARCH_FLAGS = $(NVCC_ARCH_FLAGS_SM90A) -DATTENTION_SM90A \
                                                   -Xptxas -warn-spills
# `+=`: a module whose .cu files need more (e.g. MPI include paths) may add to it.
NVCC_CHECK_FLAGS += -std=c++17 -O2 $(NVCC_ARCH_FLAGS) -Werror all-warnings \
                    -Xcompiler -Wall,-Wextra,-Wno-unused-parameter,-Werror -I.
CUDA_SOURCES := $(patsubst ./%,%,$(shell find . -path ./$(BUILD) -prune -o -path ./.git -prune -o \
                  -path ./tools/node -prune -o -name '*.cu' -print 2>/dev/null))
NVCC_CHECK_OBJS := $(CUDA_SOURCES:%.cu=$(BUILD)/nvcc-check/%.o)

.PHONY: cuda-compile-check
ifeq ($(CUDA_NVCC),)
cuda-compile-check:
	@echo "cuda-compile-check: SKIPPED: nvcc not found (install the CUDA toolkit or set NVCC=/path/to/nvcc)"
else
cuda-compile-check: $(NVCC_CHECK_OBJS)
	@echo "cuda-compile-check: $(words $(NVCC_CHECK_OBJS)) .cu files compile with $(CUDA_NVCC) for sm_80, sm_90 and compute_90 PTX"
endif

$(BUILD)/nvcc-check/%.o: %.cu
	@mkdir -p $(dir $@)
	$(CUDA_NVCC) $(NVCC_CHECK_FLAGS) -MMD -MP -c $< -o $@
