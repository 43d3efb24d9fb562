# NCCL over MPI for the host runtime (tests/cuda_host/README.md, "NCCL over MPI"): nccl.cpp
# implements host_nccl.h with MPI, so that CUDA sources calling NCCL run multi-rank under mpirun.
# It is kept out of CUDA_HOST_OBJS: the other host-runtime programs need no MPI.
#
#   # A program whose .cu sources call NCCL (comm/nccl_api.h), built for the host runtime:
#   build/foo: $(BUILD)/cuda-host/foo.o $(CUDA_HOST_NCCL_OBJS) $(CUDA_HOST_OBJS) $(FAIL_OBJS)
#   	$(CXX) $(CUDA_HOST_CXXFLAGS) $^ $(CUDA_HOST_NCCL_LDLIBS) $(LDLIBS) -o $@
#
# Only sources that include mpi.h themselves need $(CUDA_HOST_NCCL_CXXFLAGS); host_nccl.h does not.
MPICC ?= mpicc
# Open MPI's wrapper flags; recursive, so that mpicc runs only when a rule needs them.
CUDA_HOST_NCCL_CXXFLAGS = $(shell $(MPICC) --showme:compile)
CUDA_HOST_NCCL_LDLIBS = $(shell $(MPICC) --showme:link)
CUDA_HOST_NCCL_OBJS := $(BUILD)/tests/cuda_host/nccl.o

# nccl.o is built by module.mk's rule for tests/cuda_host/%.cpp, with MPI's include paths.
$(BUILD)/tests/cuda_host/nccl.o: CUDA_HOST_CXXFLAGS += $(CUDA_HOST_NCCL_CXXFLAGS)

# The test calls MPI itself (the id's broadcast), under the host runtime and under nvcc.
$(BUILD)/cuda-host/tests/cuda_host/test_nccl.o: CUDA_HOST_CXXFLAGS += $(CUDA_HOST_NCCL_CXXFLAGS)
$(BUILD)/cuda/tests/cuda_host/test_nccl.o: NVCC_TRAIN_FLAGS += $(CUDA_HOST_NCCL_CXXFLAGS)

$(BUILD)/tests/cuda_host/test_nccl: $(BUILD)/cuda-host/tests/cuda_host/test_nccl.o $(CUDA_HOST_NCCL_OBJS) \
                                    $(CUDA_HOST_OBJS) $(FAIL_OBJS)
	$(CXX) $(CUDA_HOST_CXXFLAGS) $^ $(CUDA_HOST_NCCL_LDLIBS) $(LDLIBS) -o $@

TEST_PROGS += $(BUILD)/tests/cuda_host/test_nccl
SUITES_cuda += cuda-nccl
