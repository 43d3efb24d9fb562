# The CUDA trainer: the same trainer (train/*.c, written once against model/gpt.h and
# model/backend.h) linked with the CUDA backend instead of the CPU one.
#
#   make train-cuda-host   build/train_gpt_cuda_host (bf16) and build/train_gpt_cuda_host_fp32
#                          (-DGPT_CUDA_FP32): the CUDA sources run on the host runtime
#                          (tests/cuda_host); what the cuda-train suite tests against the CPU trainer.
#   make train-cuda        build/train_gpt_cuda and build/generate_cuda: nvcc for sm_80, sm_90 and
#                          compute_90 PTX (warnings as errors), cuBLASLt / cuBLAS / CUDA runtime; CI
#                          only compiles and links them (build/train_gpt_cuda_fp32, the trainer's
#                          fp32 twin, goes into the GPU bundle).
#
# What goes in:
#   - the C sources of the trainer, data, checkpoints, comm and the CPU distributed attention
#     schedules, compiled as C exactly as for build/train_gpt (the same objects): they see `real`
#     as float, which is fine because they only pass backend pointers to backend functions. The
#     distributed schedules must link (train.c names them) but are never called: train.c refuses a
#     world of more than one rank on a device-memory backend (gpt_backend_host_memory);
#   - model/gpt.c (the layer sequence, written once) compiled as C++/CUDA with GPT_BACKEND_CUDA
#     (real = floatX), in its own object directory;
#   - the CUDA kernels and the backend: model/backend_kernels_cuda.cu (model/layers.h),
#     model/backend_cuda.cu (model/backend.h), attention/attention_local_cuda.cu (the
#     single-device attention layer), and the kernel sources they call.
#   - NOT model/layers.c, model/backend_cpu.c, attention/attention_local.c (the CPU twins).

CUDA_BACKEND_SRCS := model/backend_kernels_cuda.cu model/backend_cuda.cu model/timeline_clock_cuda.cu \
	attention/attention_local_cuda.cu \
	attention/dist_ops_cuda.cu comm/comm_device.cu comm/comm_nccl.cu comm/comm_staged.cu
# C sources written once and compiled as CUDA C++ (real = floatX): the layer sequence and the
# distributed attention schedules.
CUDA_CXX_SRCS := model/activations.c model/gpt.c $(DIST_SCHEDULE_SRCS)
CUDA_KERNEL_SRCS := $(CUDA_LAYERS_SRCS) $(CUDA_MATMUL_SRCS) $(CUDA_ATTENTION_SRCS)

# C objects shared with the CPU trainer (everything of TRAIN_OBJS but the CPU backend).
CUDA_TRAIN_C_OBJS = $(TRAIN_SRCS:%.c=$(BUILD)/%.o) $(TRAIN_COSTMODEL_OBJS) $(BUILD)/attention/dist_cost.o \
	$(BUILD)/attention/dist_scratch.o \
	$(addprefix $(BUILD)/model/,config.o memory_budget.o init.o optimizer.o muon.o blas_kernels.o) \
	$(BUILD)/attention/partial_attention.o $(CHECKPOINT_OBJS) $(DATA_OBJS) $(TOKENIZER_OBJS) \
	$(COMM_OBJS) $(LAUNCH_OBJS) $(TRANSPORT_OBJS) $(FAIL_OBJS)

# --- Host runtime builds ---------------------------------------------------------------------------

# model/gpt.c as C++ with real = floatX (bf16 / fp32), for the host runtime.
$(BUILD)/cuda-host-cxx/%.o: %.c
	@mkdir -p $(dir $@)
	$(CXX) $(CUDA_HOST_CXXFLAGS) -DGPT_BACKEND_CUDA -MMD -MP -x c++ -c $< -o $@

$(BUILD)/cuda-host-cxx-fp32/%.o: %.c
	@mkdir -p $(dir $@)
	$(CXX) $(CUDA_HOST_CXXFLAGS) -DGPT_BACKEND_CUDA -DGPT_CUDA_FP32 -MMD -MP -x c++ -c $< -o $@

# The .cu objects come from the host-runtime pattern rules of the other fragments
# ($(BUILD)/cuda-host/%.o for bf16; $(BUILD)/cuda-host-fp32/%.o, $(BUILD)/cuda-matmul-fp32/%.o and
# $(BUILD)/cuda-host-fp32-attn/%.o for fp32 -- all the same flags).
CUDA_TRAIN_HOST_OBJS = $(CUDA_CXX_SRCS:%.c=$(BUILD)/cuda-host-cxx/%.o) \
	$(CUDA_BACKEND_SRCS:%.cu=$(BUILD)/cuda-host/%.o) $(CUDA_LAYERS_OBJS) $(CUDA_MATMUL_OBJS) \
	$(CUDA_ATTENTION_HOST_OBJS) $(CUDA_HOST_NCCL_OBJS) $(BUILD)/model/token_order.o $(BUILD)/model/documents.o
CUDA_TRAIN_HOST_OBJS_FP32 = $(CUDA_CXX_SRCS:%.c=$(BUILD)/cuda-host-cxx-fp32/%.o) \
	$(CUDA_BACKEND_SRCS:%.cu=$(BUILD)/cuda-host-fp32/%.o) $(CUDA_LAYERS_OBJS_FP32) \
	$(CUDA_MATMUL_OBJS_FP32) $(CUDA_ATTENTION_HOST_OBJS_FP32) \
	$(CUDA_HOST_NCCL_OBJS) $(BUILD)/model/token_order.o $(BUILD)/model/documents.o
.SECONDARY: $(CUDA_TRAIN_HOST_OBJS) $(CUDA_TRAIN_HOST_OBJS_FP32)

CUDA_TRAIN_HOST_PROGS := $(BUILD)/train_gpt_cuda_host $(BUILD)/train_gpt_cuda_host_fp32
TEST_PROGS += $(CUDA_TRAIN_HOST_PROGS)
SUITES_cuda += cuda-train cuda-memory

$(BUILD)/train_gpt_cuda_host: $(CUDA_TRAIN_C_OBJS) $(CUDA_TRAIN_HOST_OBJS) $(CUDA_HOST_OBJS)
	$(MPICC) $(CFLAGS) $^ -o $@ $(TOKENIZER_LIBS) $(LDLIBS) -lstdc++

$(BUILD)/train_gpt_cuda_host_fp32: $(CUDA_TRAIN_C_OBJS) $(CUDA_TRAIN_HOST_OBJS_FP32) $(CUDA_HOST_OBJS)
	$(MPICC) $(CFLAGS) $^ -o $@ $(TOKENIZER_LIBS) $(LDLIBS) -lstdc++

.PHONY: train-cuda-host
train-cuda-host: $(CUDA_TRAIN_HOST_PROGS)

# The bf16 one with build/tests/train_gpt_slow_save's checkpoint writing (train/train_tests.mk):
# every checkpoint checks that each rank copied to the host exactly what its files hold, here the
# ZeRO-1 master weights gathered in pieces (tests/test_cuda_train.sh resume-async-bf16-zero).
TEST_PROGS += $(BUILD)/tests/train_gpt_cuda_host_slow_save
$(BUILD)/tests/train_gpt_cuda_host_slow_save: \
		$(filter-out $(BUILD)/train/checkpoint_save.o,$(CUDA_TRAIN_C_OBJS)) \
		$(BUILD)/tests/checkpoint_save_slow.o $(CUDA_TRAIN_HOST_OBJS) $(CUDA_HOST_OBJS)
	$(MPICC) $(CFLAGS) $^ -o $@ $(TOKENIZER_LIBS) $(LDLIBS) -lstdc++

# The collectives benchmark (tools/bench_collectives.c) on the CUDA backend: device buffers, the
# device transports (--comm nccl, mpi-staged). The trainer's C objects but its program.
BENCH_COLLECTIVES_CUDA_C_OBJS = $(BUILD)/tools/bench_collectives.o \
	$(filter-out $(TRAIN_PROGRAM_OBJS),$(CUDA_TRAIN_C_OBJS))
TEST_PROGS += $(BUILD)/tools/bench_collectives_cuda_host
$(BUILD)/tools/bench_collectives_cuda_host: $(BENCH_COLLECTIVES_CUDA_C_OBJS) $(CUDA_TRAIN_HOST_OBJS) $(CUDA_HOST_OBJS)
	$(MPICC) $(CFLAGS) $^ -o $@ $(TOKENIZER_LIBS) $(LDLIBS) -lstdc++

# --- nvcc build ------------------------------------------------------------------------------------

# sm_80, sm_90 and compute_90 PTX, warnings as errors, as the compile check; -O3 for the host side.
# The host code is compiled for the baseline x86-64 (no -march): the same objects serve this
# machine's build/train_gpt_cuda and the portable GPU bundle (tools/gpu_bundle.mk).
NVCC_TRAIN_FLAGS = -std=c++17 -O3 $(NVCC_ARCH_FLAGS) -Werror all-warnings \
	-Xcompiler -Wall,-Wextra,-Wno-unused-parameter,-Werror,-fPIC -I.
# The toolkit's libraries, found by asking nvcc where its toolkit is (TOP in its dry run): nvcc
# may be a wrapper script outside the toolkit (/usr/local/bin/nvcc), and CUDA_HOME or
# LIBRARY_PATH may be unset. Expanded only when the link runs.
CUDA_TOOLKIT_DIR ?= $(shell $(CUDA_NVCC) --dryrun -c -x cu /dev/null -o /dev/null 2>&1 | \
	sed -n 's/^\#\$$ TOP=//p' | head -n 1)
# lib64 in the usual layout; targets/<arch>/lib where a toolkit has no lib64 link.
CUDA_LIB_DIR ?= $(abspath $(firstword $(dir $(wildcard $(CUDA_TOOLKIT_DIR)/lib64/libcudart.so \
	$(CUDA_TOOLKIT_DIR)/targets/*/lib/libcudart.so)) $(CUDA_TOOLKIT_DIR)/lib64))
CUDA_TRAIN_LIBS = -L$(CUDA_LIB_DIR) -Wl,-rpath,$(CUDA_LIB_DIR) -lcublasLt -lcublas -lcudart
CUDA_LIB_CHECK = @test -e $(CUDA_LIB_DIR)/libcudart.so || { echo "$@: no libcudart.so in '$(CUDA_LIB_DIR)' (set CUDA_LIB_DIR=/path/to/cuda/lib64)" >&2; exit 1; }

# nvcc objects live under NVCC_BUILD, which a sub-make for another host architecture (the GPU
# bundle's portable build) points back at this build: nvcc compiles each source once per precision.
NVCC_BUILD ?= $(BUILD)
# The bf16 attention kernels carry the Hopper kernels (attention/hopper_forward.cu, hopper_backward.cu),
# sm_90a code: their sm_90 machine code is sm_90a (tests/cuda_host/module.mk), ATTENTION_SM90A tells
# the launchers (all three files, so that they agree). Their kernels must not spill: ptxas's spill
# warning, an error here, names the kernel.
$(CUDA_ATTENTION_SRCS:%.cu=$(NVCC_BUILD)/cuda/%.o): NVCC_ARCH_FLAGS = $(NVCC_ARCH_FLAGS_SM90A) -DATTENTION_SM90A \
                                                      -Xptxas -warn-spills
# bf16 (default) and fp32 (-DGPT_CUDA_FP32) objects of any .cu source.
$(NVCC_BUILD)/cuda/%.o: %.cu
	@mkdir -p $(dir $@)
	$(CUDA_NVCC) $(NVCC_TRAIN_FLAGS) -MMD -MP -c $< -o $@
$(NVCC_BUILD)/cuda-fp32/%.o: %.cu
	@mkdir -p $(dir $@)
	$(CUDA_NVCC) $(NVCC_TRAIN_FLAGS) -DGPT_CUDA_FP32 -MMD -MP -c $< -o $@

# The C sources written once (CUDA_CXX_SRCS) as CUDA C++: real = floatX needs the CUDA headers.
$(NVCC_BUILD)/cuda/%.o: %.c
	@mkdir -p $(dir $@)
	$(CUDA_NVCC) $(NVCC_TRAIN_FLAGS) -DGPT_BACKEND_CUDA -MMD -MP -x cu -c $< -o $@
$(NVCC_BUILD)/cuda-fp32/%.o: %.c
	@mkdir -p $(dir $@)
	$(CUDA_NVCC) $(NVCC_TRAIN_FLAGS) -DGPT_BACKEND_CUDA -DGPT_CUDA_FP32 -MMD -MP -x cu -c $< -o $@

# The kernels of each precision as one shared library (position-independent objects, -fPIC
# above): every nvcc program (the trainers, the kernel tests, the benchmark) loads the same copy,
# which keeps the GPU bundle small. Their launchers have C++ names only, so nothing in a program
# (the CPU twins included) can clash with them; what they call of ours (comm/fail.c) comes from the
# program. RPATH $ORIGIN/../lib: the programs find them in build/lib and in the bundle.
CUDA_KERNEL_LIB = $(BUILD)/lib/libgpt_kernels.so
CUDA_KERNEL_LIB_FP32 = $(BUILD)/lib/libgpt_kernels_fp32.so
$(CUDA_KERNEL_LIB): $(patsubst %.cu,$(NVCC_BUILD)/cuda/%.o,$(CUDA_KERNEL_SRCS))
	$(CUDA_LIB_CHECK)
	@mkdir -p $(dir $@)
	$(CXX) -shared -Wl,-soname,$(notdir $@) $^ -o $@ -L$(CUDA_LIB_DIR) -Wl,-rpath,$(CUDA_LIB_DIR) -lcublasLt -lcudart
$(CUDA_KERNEL_LIB_FP32): $(patsubst %.cu,$(NVCC_BUILD)/cuda-fp32/%.o,$(CUDA_KERNEL_SRCS))
	$(CUDA_LIB_CHECK)
	@mkdir -p $(dir $@)
	$(CXX) -shared -Wl,-soname,$(notdir $@) $^ -o $@ -L$(CUDA_LIB_DIR) -Wl,-rpath,$(CUDA_LIB_DIR) -lcublasLt -lcudart
# Linking against them: the programs sit in build/ or build/gpu/, the libraries in build/lib/.
CUDA_KERNEL_LINK = -Wl,-rpath,'$$ORIGIN/lib' -Wl,-rpath,'$$ORIGIN/../lib'

# The backend of each precision, and its kernels.
CUDA_TRAIN_NVCC_OBJS = $(CUDA_CXX_SRCS:%.c=$(NVCC_BUILD)/cuda/%.o) \
	$(patsubst %.cu,$(NVCC_BUILD)/cuda/%.o,$(CUDA_BACKEND_SRCS)) $(CUDA_KERNEL_LIB) $(BUILD)/model/token_order.o $(BUILD)/model/documents.o
CUDA_TRAIN_NVCC_OBJS_FP32 = $(CUDA_CXX_SRCS:%.c=$(NVCC_BUILD)/cuda-fp32/%.o) \
	$(patsubst %.cu,$(NVCC_BUILD)/cuda-fp32/%.o,$(CUDA_BACKEND_SRCS)) $(CUDA_KERNEL_LIB_FP32) \
	$(BUILD)/model/token_order.o $(BUILD)/model/documents.o

.PHONY: train-cuda
ifeq ($(CUDA_NVCC),)
train-cuda:
	@echo "train-cuda: nvcc not found (install the CUDA toolkit or set NVCC=/path/to/nvcc)" >&2; exit 1
else
# build/generate_cuda (inference/inference.mk) too: the same backend, compiled the same way.
train-cuda: $(BUILD)/train_gpt_cuda $(BUILD)/generate_cuda

# bf16 (the production build) and fp32 (for comparisons with the CPU trainer on a GPU).
$(BUILD)/train_gpt_cuda: $(CUDA_TRAIN_C_OBJS) $(CUDA_TRAIN_NVCC_OBJS)
	$(CUDA_LIB_CHECK)
	$(MPICC) $(CFLAGS) $^ -o $@ $(CUDA_KERNEL_LINK) $(TOKENIZER_LIBS) $(CUDA_TRAIN_LIBS) $(LDLIBS) -lstdc++
$(BUILD)/train_gpt_cuda_fp32: $(CUDA_TRAIN_C_OBJS) $(CUDA_TRAIN_NVCC_OBJS_FP32)
	$(CUDA_LIB_CHECK)
	$(MPICC) $(CFLAGS) $^ -o $@ $(CUDA_KERNEL_LINK) $(TOKENIZER_LIBS) $(CUDA_TRAIN_LIBS) $(LDLIBS) -lstdc++
$(BUILD)/tools/bench_collectives_cuda: $(BENCH_COLLECTIVES_CUDA_C_OBJS) $(CUDA_TRAIN_NVCC_OBJS)
	$(CUDA_LIB_CHECK)
	$(MPICC) $(CFLAGS) $^ -o $@ $(CUDA_KERNEL_LINK) $(TOKENIZER_LIBS) $(CUDA_TRAIN_LIBS) $(LDLIBS) -lstdc++

# The compile check covers the C sources written once as CUDA C++ too (it globs the .cu files only).
cuda-compile-check: $(CUDA_CXX_SRCS:%.c=$(NVCC_BUILD)/cuda/%.o)
endif
