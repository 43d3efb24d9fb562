# CUDA partial attention (attention/partial_attention.cu and the Hopper launchers, CUDA_ATTENTION_SRCS
# of attention/attention.mk): its test against the CPU twin, built
# for the host runtime (tests/cuda_host) in both storage precisions: bf16 (the default) and fp32
# (-DGPT_CUDA_FP32, objects under $(BUILD)/cuda-host-fp32-attn/). nvcc compiles the same sources
# in `make cuda-compile-check`.
#
# This fragment is read before tests/cuda_host/module.mk (fragments are included in sorted order),
# where CUDA_HOST_OBJS is defined with `:=`: the link prerequisites that name it are expanded a
# second time, after every makefile has been read (.SECONDEXPANSION, `$$(...)`).
CUDA_ATTN_TESTS := $(BUILD)/tests/cuda/test_attention_cuda $(BUILD)/tests/cuda/test_attention_cuda_fp32
TEST_PROGS += $(CUDA_ATTN_TESTS)
SUITES_cuda += cuda-attention
SUITES_sweep += cuda-attention-sweep
.SECONDARY: $(BUILD)/cuda-host/tests/cuda/test_attention_cuda.o $(CUDA_ATTENTION_HOST_OBJS) \
            $(BUILD)/cuda-host-fp32-attn/tests/cuda/test_attention_cuda.o $(CUDA_ATTENTION_HOST_OBJS_FP32)

# The same .cu sources with fp32 storage.
$(BUILD)/cuda-host-fp32-attn/%.o: %.cu
	@mkdir -p $(dir $@)
	$(CXX) $(CUDA_HOST_CXXFLAGS) -DGPT_CUDA_FP32 -MMD -MP -x c++ -c $< -o $@

.SECONDEXPANSION:
$(BUILD)/tests/cuda/test_attention_cuda: $(BUILD)/cuda-host/tests/cuda/test_attention_cuda.o \
		$(CUDA_ATTENTION_HOST_OBJS) $(BUILD)/attention/partial_attention.o $(BUILD)/model/documents.o \
		$$(CUDA_HOST_OBJS) $(FAIL_OBJS)
	@mkdir -p $(dir $@)
	$(CXX) $(CUDA_HOST_CXXFLAGS) $^ $(LDLIBS) -o $@

$(BUILD)/tests/cuda/test_attention_cuda_fp32: $(BUILD)/cuda-host-fp32-attn/tests/cuda/test_attention_cuda.o \
		$(CUDA_ATTENTION_HOST_OBJS_FP32) $(BUILD)/attention/partial_attention.o $(BUILD)/model/documents.o \
		$$(CUDA_HOST_OBJS) $(FAIL_OBJS)
	@mkdir -p $(dir $@)
	$(CXX) $(CUDA_HOST_CXXFLAGS) $^ $(LDLIBS) -o $@

# The mutant of the dQ ordering test (tests/test_attention_order.sh): the bf16 backward with the
# semaphore wait removed (-DFLASH_BWD_UNORDERED), so its dQ adds land in the schedule's order: both
# backwards (flash_backward.cuh's wait serves the Hopper one too), the real forward.
TEST_PROGS += $(BUILD)/tests/cuda/test_attention_cuda_unordered
CUDA_ATTENTION_UNORDERED_OBJS = $(BUILD)/cuda-host-unordered/attention/partial_attention.o \
	$(BUILD)/cuda-host/attention/hopper_forward.o $(BUILD)/cuda-host-unordered/attention/hopper_backward.o
.SECONDARY: $(CUDA_ATTENTION_UNORDERED_OBJS)
$(BUILD)/cuda-host-unordered/%.o: %.cu
	@mkdir -p $(dir $@)
	$(CXX) $(CUDA_HOST_CXXFLAGS) -DFLASH_BWD_UNORDERED -MMD -MP -x c++ -c $< -o $@

$(BUILD)/tests/cuda/test_attention_cuda_unordered: $(BUILD)/cuda-host/tests/cuda/test_attention_cuda.o \
		$(CUDA_ATTENTION_UNORDERED_OBJS) $(BUILD)/attention/partial_attention.o $(BUILD)/model/documents.o \
		$$(CUDA_HOST_OBJS) $(FAIL_OBJS)
	@mkdir -p $(dir $@)
	$(CXX) $(CUDA_HOST_CXXFLAGS) $^ $(LDLIBS) -o $@

# Mutants of the Hopper kernels (attention/hopper_forward.cuh, attention/hopper_backward.cuh), each
# a copy of one of them with one line removed, compiled into the launchers that include it (a
# backward mutant: hopper_backward.cu; a forward one: hopper_forward.cu and hopper_backward.cu, whose
# kernel uses the forward's helpers) in place of the real one (its include path first), linked with
# the real objects of the other files, and run by the cuda-attention suite with
# ATTENTION_FWD_KERNEL=sm90 or ATTENTION_BWD_KERNEL=sm90, where the host runtime must catch them.
# Forward: no-pv-fence, the overlapped S and P V issued on P and the rescaled O without a
# wgmma.fence after they were written; no-v-wait, P V reading the V tile without waiting on its
# mbarrier; no-s-wait, the softmax reading S while its wgmmas are in flight (only P V's wait left);
# no-first-turn, the last consumer never letting consumer 0 take the first turn (a deadlock);
# persistent-no-q-wait, the persistent grid's producer loading the next Q tile without waiting for
# the consumers to be done with this one (q_empty). Backward:
# bwd-no-kv-wait, the GEMMs reading K and V without waiting on their mbarrier; bwd-no-dq-wait, the
# dQ reduction never waited for (the turn passed on before the add has landed); bwd-register-split,
# the consumers asking for 240 registers beside the producer's 32 (more than the launch's 168 x 3:
# the hang an H200 showed, results/gpu/h200-2026-11-27T1222-517964c; a line changed, not removed);
# bwd-overlap-no-dp-wait, the overlapped backward computing dS^T without waiting for dP^T;
# bwd-early-no-s-wait, the early schedule computing P^T before the S^T issued at the end of the
# previous query tile has landed; bwd-pingpong-no-first-turn, the pingpong schedule's consumer 1
# never opening the first turn (a deadlock);
# bwd-regs-layout, the regs schedule's K and V fragments with rows and column halves swapped;
# pv80-lbo, the HS 80 P V (m64n80k16) reading V's columns 64..79 2 KiB past column 0 instead of in
# the next panel, and bwd-hs80-lbo the same for dV and dK's dO and Q (lines changed);
# bwd-q128-panel, the q128 form's consumers both reading dS^T's first 64 queries for dQ (a line
# changed); bwd-ds2-one-buffer, the ds2 schedule writing every tile's dS^T into its first buffer
# (without the barrier that one buffer needs: a line changed). Under a sliding window or a document
# mask (the LOWER instances): lower-mask, the forward's masked tiles without the rows' lower edges;
# bwd-query-end, the backward's P^T without the keys' query ends (both lines changed).
HOPPER_MUTANTS := no-pv-fence no-v-wait no-s-wait no-first-turn bwd-no-kv-wait bwd-no-dq-wait bwd-register-split \
                  bwd-overlap-no-dp-wait bwd-early-no-s-wait bwd-pingpong-no-first-turn bwd-regs-layout pv80-lbo \
                  bwd-hs80-lbo persistent-no-q-wait bwd-q128-panel bwd-ds2-one-buffer bwd-no-dq-empty-wait \
                  lower-mask bwd-query-end
HOPPER_MUTANT_SED_no-pv-fence := /P and the rescaled O, ready for the asynchronous MMA/d
HOPPER_MUTANT_SED_no-v-wait := /hop_wait(F::v_full(bar, pst), pph);/d
HOPPER_MUTANT_SED_no-s-wait := /S has landed; P V may still be in flight/d
HOPPER_MUTANT_SED_no-first-turn := /if (c == NC - 1) hop_turn_pass<NC>(c);/d
HOPPER_MUTANT_SED_persistent-no-q-wait := /if (n > 0) hop_wait(F::q_empty(bar)/d
HOPPER_MUTANT_SED_bwd-no-kv-wait := /if (qt0 < nqt) hop_wait(kv_full, 0);/d
HOPPER_MUTANT_SED_bwd-no-dq-wait := /bulk_wait<0>();/d
HOPPER_MUTANT_SED_bwd-register-split := s/setmaxnreg_inc<232>/setmaxnreg_inc<240>/
HOPPER_MUTANT_SED_bwd-overlap-no-dp-wait := /if (OVERLAP) wgmma_wait<0>();   \/\/ dP^T/d
HOPPER_MUTANT_SED_bwd-early-no-s-wait := /after the last tile: nothing in flight/d
HOPPER_MUTANT_SED_bwd-pingpong-no-first-turn := /if (TURNS && c == 1 && qt0 < nqt) hop_turn_pass<2>(c);/d
HOPPER_MUTANT_SED_bwd-hs80-lbo := s/const unsigned lbo = F::TQ::PANEL \* sizeof(floatX);/const unsigned lbo = 2048;/
HOPPER_MUTANT_SED_pv80-lbo := s/F::TK::PANEL \* sizeof(floatX), 1024, 128)/2048, 1024, 128)/
HOPPER_MUTANT_SED_bwd-q128-panel := s/hop_desc(dST + qpanel \* F::TS::PANEL + kr0 \* 64)/hop_desc(dST + kr0 * 64)/
HOPPER_MUTANT_SED_bwd-no-dq-empty-wait := /if (i >= 2) named_barrier_sync(HOP_BWD_DQ_EMPTY + i % 2, HOP_BWD_DQ_THREADS);/d
HOPPER_MUTANT_SED_bwd-ds2-one-buffer := s/dSTs + (i % F::DS_STAGES) \* F::TS::ELEMS;/dSTs;/
HOPPER_MUTANT_SED_lower-mask := s/ || (LOWER \&\& j < lo\[hi\])//
HOPPER_MUTANT_SED_bwd-query-end := s/q >= qe_lo)/q >= a.Tq)/;s/q >= qe_hi)/q >= a.Tq)/
HOPPER_MUTANT_SED_bwd-regs-layout := s/chunk(kr + 8 \* (e & 1), 2 \* kk + (e >> 1))/chunk(kr + 8 * (e >> 1), 2 * kk + (e \& 1))/
hopper_mutant_file = $(if $(filter bwd-%,$(1)),hopper_backward.cuh,hopper_forward.cuh)
# The attention objects of mutant $(1): the launchers that include its file rebuilt, the others real.
hopper_mutant_objs = $(BUILD)/cuda-host/attention/partial_attention.o \
	$(if $(filter bwd-%,$(1)),$(BUILD)/cuda-host/attention/hopper_forward.o,$(BUILD)/cuda-host-hopper-$(1)/attention/hopper_forward.o) \
	$(BUILD)/cuda-host-hopper-$(1)/attention/hopper_backward.o
TEST_PROGS += $(HOPPER_MUTANTS:%=$(BUILD)/tests/cuda/test_attention_cuda_hopper_%)
.SECONDARY: $(foreach m,$(HOPPER_MUTANTS),$(call hopper_mutant_objs,$(m))) \
            $(HOPPER_MUTANTS:%=$(BUILD)/mutants/hopper-%/.stamp)
$(BUILD)/mutants/hopper-%/.stamp: attention/hopper_forward.cuh attention/hopper_backward.cuh attention/cuda_attention.mk
	@mkdir -p $(dir $@)attention
	sed '$(HOPPER_MUTANT_SED_$*)' attention/$(call hopper_mutant_file,$*) > $(dir $@)attention/$(call hopper_mutant_file,$*).tmp
	@! cmp -s attention/$(call hopper_mutant_file,$*) $(dir $@)attention/$(call hopper_mutant_file,$*).tmp || \
		{ echo "error: $(dir $@)attention/$(call hopper_mutant_file,$*): nothing removed (the line it removes has changed)" >&2; exit 1; }
	mv $(dir $@)attention/$(call hopper_mutant_file,$*).tmp $(dir $@)attention/$(call hopper_mutant_file,$*)
	touch $@
HOPPER_MUTANT_COMPILE = $(CXX) -I$(BUILD)/mutants/hopper-$* $(CUDA_HOST_CXXFLAGS) -MMD -MP -x c++ -c $< -o $@
$(BUILD)/cuda-host-hopper-%/attention/hopper_forward.o: attention/hopper_forward.cu $(BUILD)/mutants/hopper-%/.stamp
	@mkdir -p $(dir $@)
	$(HOPPER_MUTANT_COMPILE)
$(BUILD)/cuda-host-hopper-%/attention/hopper_backward.o: attention/hopper_backward.cu $(BUILD)/mutants/hopper-%/.stamp
	@mkdir -p $(dir $@)
	$(HOPPER_MUTANT_COMPILE)
$(BUILD)/tests/cuda/test_attention_cuda_hopper_%: $(BUILD)/cuda-host/tests/cuda/test_attention_cuda.o \
		$$(call hopper_mutant_objs,$$*) $(BUILD)/attention/partial_attention.o $(BUILD)/model/documents.o $$(CUDA_HOST_OBJS) $(FAIL_OBJS)
	@mkdir -p $(dir $@)
	$(CXX) $(CUDA_HOST_CXXFLAGS) $^ $(LDLIBS) -o $@
