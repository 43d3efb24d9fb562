# The distributed schedules and the trainer on the CUDA backend, their CUDA sources executed on the
# host runtime (tests/cuda_host) under mpirun, over the nccl transport (NCCL's API on MPI,
# tests/cuda_host/nccl.cpp) and the mpi-staged one. `make test-cuda-dist` runs these suites only.
#   test_dist_attention_cuda[_fp32]  tests/test_dist_attention.c compiled as CUDA C++: every
#                                    schedule against the single-rank CUDA run, and the counters
#                                    against the closed forms in the backend's element sizes
#   tests/test_cuda_dist_train.sh    the CUDA trainers under mpirun against the CPU trainer
CUDA_DIST_TESTS := $(BUILD)/tests/test_dist_attention_cuda $(BUILD)/tests/test_dist_attention_cuda_fp32
TEST_PROGS += $(CUDA_DIST_TESTS)
SUITES_cuda-dist += cuda-dist-attention cuda-dist-train
# The schedule sweep: make test-sweep (CI runs it after make test).
SUITES_sweep += cuda-dist-sweep
.SECONDARY: $(BUILD)/cuda-host-cxx/tests/test_dist_attention.o $(BUILD)/cuda-host-cxx-fp32/tests/test_dist_attention.o

# What the CUDA objects of the trainer need from the C side, the trainer itself excepted.
CUDA_DIST_TEST_C_OBJS = $(BUILD)/attention/dist_cost.o $(BUILD)/attention/dist_scratch.o \
	$(BUILD)/attention/partial_attention.o \
	$(addprefix $(BUILD)/model/,config.o init.o optimizer.o muon.o blas_kernels.o) $(BUILD)/train/gpu_peaks.o \
	$(COMM_OBJS) $(LAUNCH_OBJS) $(FAIL_OBJS)

.SECONDEXPANSION:
$(BUILD)/tests/test_dist_attention_cuda: $(BUILD)/cuda-host-cxx/tests/test_dist_attention.o \
		$$(CUDA_TRAIN_HOST_OBJS) $$(CUDA_HOST_OBJS) $(CUDA_DIST_TEST_C_OBJS)
	$(MPICC) $(CFLAGS) $^ -o $@ $(LDLIBS) -lstdc++
$(BUILD)/tests/test_dist_attention_cuda_fp32: $(BUILD)/cuda-host-cxx-fp32/tests/test_dist_attention.o \
		$$(CUDA_TRAIN_HOST_OBJS_FP32) $$(CUDA_HOST_OBJS) $(CUDA_DIST_TEST_C_OBJS)
	$(MPICC) $(CFLAGS) $^ -o $@ $(LDLIBS) -lstdc++

# The mutation test of the host runtime's stream interleaving (tests/test_mutant_wait.sh): a copy
# of the ring schedule whose forward no longer waits for the arriving K|V block before computing
# with it (one comm_wait, i.e. one cudaStreamWaitEvent on the nccl transport, removed), linked
# into the fp32 distributed attention test in place of the real one. Under some seed of the random
# stream interleaving it must compute with a block that has not arrived.
MUTANT_RING := $(BUILD)/mutants/attention/ring.c
$(MUTANT_RING): attention/ring.c
	@mkdir -p $(dir $@)
	sed '/^static void ring_forward/,/^}/{/comm_wait(comm, req);/d}' $< > $@
	@! cmp -s $< $@ || { echo "error: $@: nothing removed (the wait it removes has changed)" >&2; exit 1; }
TEST_PROGS += $(BUILD)/tests/test_dist_attention_cuda_mutant
$(BUILD)/tests/test_dist_attention_cuda_mutant: $(BUILD)/cuda-host-cxx-fp32/tests/test_dist_attention.o \
		$$(filter-out $(BUILD)/cuda-host-cxx-fp32/attention/ring.o,$$(CUDA_TRAIN_HOST_OBJS_FP32)) \
		$(BUILD)/cuda-host-cxx-fp32/$(MUTANT_RING:.c=.o) $$(CUDA_HOST_OBJS) $(CUDA_DIST_TEST_C_OBJS)
	$(MPICC) $(CFLAGS) $^ -o $@ $(LDLIBS) -lstdc++
