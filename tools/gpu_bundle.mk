# The GPU run kit: the programs a GPU box runs, built with nvcc, and `make gpu-bundle`, which packs
# them with their non-CUDA libraries, a little data and tools/gpu_check.sh into one folder
# (README.md, "Running on a GPU").
#
#   make gpu-programs      the nvcc-built programs under $(BUILD): build/train_gpt_cuda(_fp32),
#                          build/generate_cuda,
#                          build/gpu/test_* (the kernel tests of `make test-cuda`, same sources,
#                          compiled by nvcc; test_ptx, the PTX wrappers' known answers of
#                          tests/cuda_host), build/gpu/gpu_info, build/gpu/bench_kernels_cuda
#   make gpu-bundle        $(GPU_BUNDLE_DIR) (build/gpu-bundle): the programs of a portable build
#                          (host code for x86-64-v3, not this machine's -march=native), packed by
#                          tools/gpu_bundle.sh, then checked with `gpu_check.sh --dry-run`
#   make gpu-bundle-host   build/gpu-bundle-host: the same layout from the host-runtime builds, on
#                          which `gpu_check.sh --self-test` runs every step here, without a GPU

# --- Programs built the same way for the host runtime and for nvcc -----------------------------

# C tools (host code only).
GPU_KIT_C_PROGS := $(BUILD)/tools/compare_logs
PROGRAMS += $(GPU_KIT_C_PROGS)
$(BUILD)/tools/compare_logs: $(BUILD)/tools/compare_logs.o $(FAIL_OBJS)
	$(CC) $(CFLAGS) $^ -o $@ $(LDLIBS)

# gpu_info on the host runtime (reports the runtime's H100), for the self-test and its own test.
GPU_INFO_HOST := $(BUILD)/tools/gpu_info_host
TEST_PROGS += $(GPU_INFO_HOST) $(GPU_KIT_C_PROGS)
.SECONDARY: $(BUILD)/cuda-host/tools/gpu_info.o
.SECONDEXPANSION:
$(GPU_INFO_HOST): $(BUILD)/cuda-host/tools/gpu_info.o $(BUILD)/train/gpu_peaks.o $$(CUDA_HOST_OBJS) $(FAIL_OBJS)
	$(CXX) $(CUDA_HOST_CXXFLAGS) $^ $(LDLIBS) -o $@

# --- nvcc builds ------------------------------------------------------------------------------------

# The kernel tests: test object and kernels from nvcc, CPU twins from the C build. Each pair is
# bf16 and fp32 storage, as `make test-cuda` builds them for the host runtime.
GPU_TESTS := $(foreach t,test_attention_cuda test_layers_cuda test_matmul_loss_adamw,$(BUILD)/gpu/$(t) $(BUILD)/gpu/$(t)_fp32)
GPU_TEST_CPU_test_attention_cuda = $(BUILD)/attention/partial_attention.o $(BUILD)/model/documents.o $(FAIL_OBJS)
GPU_TEST_CPU_test_layers_cuda = $(CUDA_LAYERS_CPU_OBJS)
GPU_TEST_CPU_test_matmul_loss_adamw = $(MODEL_OBJS)
# Link line of every nvcc program: the kernel library of its precision (train/train_cuda.mk) and the
# CUDA libraries of the toolkit nvcc belongs to.
GPU_LINK = $(MPICC) $(CFLAGS) -Wl,--as-needed $^ -o $@ $(CUDA_KERNEL_LINK) $(TOKENIZER_LIBS) $(CUDA_TRAIN_LIBS) \
	$(LDLIBS) -lstdc++

# Each test program: its nvcc-compiled test source, the kernel library, the CPU twins.
define gpu_test_rules
$(BUILD)/gpu/$(1): $(NVCC_BUILD)/cuda/tests/cuda/$(1).o $(CUDA_KERNEL_LIB) $(GPU_TEST_CPU_$(1))
	$$(CUDA_LIB_CHECK)
	@mkdir -p $$(dir $$@)
	$$(GPU_LINK)
$(BUILD)/gpu/$(1)_fp32: $(NVCC_BUILD)/cuda-fp32/tests/cuda/$(1).o $(CUDA_KERNEL_LIB_FP32) $(GPU_TEST_CPU_$(1))
	$$(CUDA_LIB_CHECK)
	@mkdir -p $$(dir $$@)
	$$(GPU_LINK)
endef
$(foreach t,test_attention_cuda test_layers_cuda test_matmul_loss_adamw,$(eval $(call gpu_test_rules,$(t))))

# The known answers of model/cuda_ptx.cuh's wrappers (mma.sync, ldmatrix, cp.async, ex2, red,
# ld.acquire / red.release / nanosleep): under the host
# runtime (build/tests/cuda_host/test_ptx) against the portable twins of tests/cuda_host/ptx.cpp,
# here against the hardware, which checks the twins' fragment layouts. bf16 only; no kernel library
# and no CPU twins (its kernels are in the test, its references are host loops).
# sm_90a machine code for the Hopper wrappers (tests/cuda_host/module.mk).
$(NVCC_BUILD)/cuda/tests/cuda_host/test_ptx.o: NVCC_ARCH_FLAGS = $(NVCC_ARCH_FLAGS_SM90A)
$(BUILD)/gpu/test_ptx: $(NVCC_BUILD)/cuda/tests/cuda_host/test_ptx.o $(FAIL_OBJS)
	$(CUDA_LIB_CHECK)
	@mkdir -p $(dir $@)
	$(GPU_LINK)

# Stream capture and CUDA graphs (tests/cuda_host/test_graphs.cu): what the host runtime's twin
# (tests/cuda_host/stream_sched.cpp) models, here on the hardware: replays, forks and joins, the
# capture errors CUDA returns.
$(BUILD)/gpu/test_graphs: $(NVCC_BUILD)/cuda/tests/cuda_host/test_graphs.o $(FAIL_OBJS)
	$(CUDA_LIB_CHECK)
	@mkdir -p $(dir $@)
	$(GPU_LINK)

# cuBLAS's FAST_16BF and FAST_TF32 compute types on fp32 inputs (tests/cuda_host/test_cublas.cu,
# `--only fast-inputs`): the host runtime rounds the inputs to nearest even as Muon's
# --muon-fp32-matmul-prec assumes; known answers that tell that from truncation and from fp32.
$(BUILD)/gpu/test_cublas: $(NVCC_BUILD)/cuda/tests/cuda_host/test_cublas.o $(FAIL_OBJS)
	$(CUDA_LIB_CHECK)
	@mkdir -p $(dir $@)
	$(GPU_LINK)

$(BUILD)/gpu/gpu_info: $(NVCC_BUILD)/cuda/tools/gpu_info.o $(BUILD)/train/gpu_peaks.o $(FAIL_OBJS)
	$(CUDA_LIB_CHECK)
	@mkdir -p $(dir $@)
	$(GPU_LINK)

# Every program of the bundle (the kernel benchmark adds itself in tools/bench_kernels.mk).
GPU_PROGRAMS += $(BUILD)/train_gpt $(BUILD)/train_gpt_cuda $(BUILD)/train_gpt_cuda_fp32 $(BUILD)/generate_cuda \
	$(BUILD)/tools/bench_collectives_cuda $(GPU_TESTS) \
	$(BUILD)/gpu/test_ptx $(BUILD)/gpu/test_graphs $(BUILD)/gpu/test_cublas $(BUILD)/gpu/gpu_info \
	$(GPU_KIT_C_PROGS)
# The same programs built for the host runtime (the self-test's bundle), in the same order.
GPU_PROGRAMS_HOST += $(BUILD)/train_gpt $(BUILD)/train_gpt_cuda_host $(BUILD)/train_gpt_cuda_host_fp32 \
	$(BUILD)/generate_cuda_host $(BUILD)/tools/bench_collectives_cuda_host \
	$(foreach t,test_attention_cuda test_layers_cuda test_matmul_loss_adamw,$(BUILD)/tests/cuda/$(t) $(BUILD)/tests/cuda/$(t)_fp32) \
	$(BUILD)/tests/cuda_host/test_ptx $(BUILD)/tests/cuda_host/test_graphs \
	$(BUILD)/tests/cuda_host/test_cublas $(GPU_INFO_HOST) $(GPU_KIT_C_PROGS)

.PHONY: gpu-programs gpu-bundle gpu-bundle-host
ifeq ($(CUDA_NVCC),)
gpu-programs gpu-bundle:
	@echo "$@: nvcc not found (install the CUDA toolkit or set NVCC=/path/to/nvcc)" >&2; exit 1
else
gpu-programs: $(GPU_PROGRAMS)
endif

# --- The bundle -------------------------------------------------------------------------------------

GPU_BUNDLE_DIR ?= $(BUILD)/gpu-bundle
# Host code of the bundle's programs: x86-64-v3 (AVX2, FMA), which every x86 GPU server of the
# last decade has; the CPU trainer's vector kernels need AVX2 and FMA.
GPU_BUNDLE_ARCH ?= -march=x86-64-v3 -mtune=generic
GPU_BUNDLE_BUILD = $(BUILD)/portable

ifneq ($(CUDA_NVCC),)
gpu-bundle: setup $(DEFAULT_DATA)
	@$(MAKE) --no-print-directory BUILD=$(GPU_BUNDLE_BUILD) NVCC_BUILD=$(BUILD) \
		ARCH='$(GPU_BUNDLE_ARCH)' gpu-programs
	bash tools/gpu_bundle.sh --out $(GPU_BUNDLE_DIR) --flavor nvcc --data $(DATA_DIR) \
		$(patsubst $(BUILD)/%,$(GPU_BUNDLE_BUILD)/%,$(GPU_PROGRAMS))
	bash $(GPU_BUNDLE_DIR)/tools/gpu_check.sh --dry-run
endif

gpu-bundle-host: setup $(DEFAULT_DATA) $(GPU_PROGRAMS_HOST)
	bash tools/gpu_bundle.sh --out $(BUILD)/gpu-bundle-host --flavor host --data $(DATA_DIR) \
		$(GPU_PROGRAMS_HOST)

# --- Tests (tests/suites/gpu-kit.list) ---------------------------------------------------------------
# The kit and the nvcc builds: a group of their own (make test-kit; CI runs it after make test),
# which keeps make test to the behaviour of the code (under 20 minutes on 2 cores).
SUITES_kit += gpu-kit nvcc
TEST_PROGS += $(BUILD)/tests/test_gpu_peaks
$(BUILD)/tests/test_gpu_peaks: $(BUILD)/tests/test_gpu_peaks.o $(BUILD)/train/gpu_peaks.o $(FAIL_OBJS)
	$(CC) $(CFLAGS) $^ -o $@ $(LDLIBS)
