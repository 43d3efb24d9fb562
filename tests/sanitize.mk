# `make test-sanitize`: the C programs built with AddressSanitizer and UndefinedBehaviorSanitizer
# into their own build directory (SANITIZE_BUILD, default build-sanitize), then the C suites run
# against them (tests/run_suites.sh with BUILD=$(SANITIZE_BUILD)), MPI jobs included; the
# train-schedules-2x2 line of dist-model is the short distributed training run (4 ranks, 2x2:
# every schedule for 20 steps of a tiny model, against the single-process run).
#
#   - every UBSan report ends the process (-fno-sanitize-recover, halt_on_error), every ASan report
#     too, with SIGABRT (abort_on_error): a sanitizer report can never pass for one of the
#     controlled failures the suites expect (tests/expect_job_failure.sh takes exit 1..123 only);
#   - leak detection stays on, MPI runs included; tests/sanitize_lsan.supp names the third-party
#     libraries whose own allocations live until exit (Open MPI, OpenBLAS, libgomp); Open MPI keeps
#     its components loaded (disable_dlclose) so that their frames have names to match;
#   - the programs of the CUDA host runtime (tests/cuda_host) are left out: its fibers switch
#     stacks under ASan's feet. They are the test programs whose path names cuda or _host; the
#     C programs of the GPU kit's suites run (gpu-kit and gpu-bench, their C lines).
SANITIZE_BUILD ?= build-sanitize
# float-cast-overflow (a double converted to an integer type that cannot hold it) is undefined
# behaviour that GCC's -fsanitize=undefined leaves out.
SANITIZE_FLAGS = -O1 -g -fno-omit-frame-pointer -fsanitize=address,undefined,float-cast-overflow \
	-fno-sanitize-recover=undefined,float-cast-overflow
# What runs under the sanitizers: every C program, and in each what memory errors hide in most
# (file reading and writing, checkpoints, resume, kills and signals, the distributed schedules on
# every mesh shape up to 8 ranks and on 4x4), not every setting of each: 16 minutes on 2 cores,
# build included, instead of 35 (CI has 90 in all). Left out are lines that run code the kept
# lines run already, at other settings: the CLI's flag combinations (train:flags; the options
# fuzzer parses flags under the same sanitizers), the schedules of learning rate, batch, tokens
# and data phases, init-std, params-norm, val-sets and eval-positions (arithmetic and evaluations
# over the same loop; eval-only stays), the timing checks exit-minutes-room and log-interval
# (exit-minutes and log stay), the architecture variants of whole training runs and exports
# (their kernels run in model's torch-* lines, their files in the lines kept),
# mesh-auto (mesh-auto-recompute runs the chooser), mc-eval on a mesh, the 16-rank repeats of the
# 4x4 mesh (mesh-4x4 of dist-attention stays), the JavaScript tokenizers' corpora (hf_llama3,
# hf_qwen2 and the fuzzers keep the readers), and test_muon_share (the Muon split's bookkeeping
# over 40 rank counts, 40 times slower here; the dist-muon run stays). mc-eval:cuda is a
# host-runtime program.
# Each suite's patterns for tests/run_suites.sh (SUITE:PATTERN,...): !NAME leaves a line out; the
# dist-model patterns select its mesh lines but the 4x4 and mesh-auto, and five of its training
# runs (the 2x2 schedules, resume, refusals, a killed rank, the mesh flags).
SANITIZE_PATTERNS_train = !flags !batch-rampup !data-phase !lr-schedules !lr-tokens !train-tokens \
	!untied !resume-untied !muon !rope !rope-scaling !resume-rope !z-loss !qk-norm !resume-qk-norm \
	!qwen2 !resume-qwen2 !resume-gqa !val-sets !eval-positions !init-std !params-norm \
	!exit-minutes-room !log-interval
SANITIZE_PATTERNS_dist-model = mesh-* !mesh-4x4* !mesh-auto train-schedules-2x2 train-resume \
	train-refuse train-kill train-mesh
SANITIZE_PATTERNS_dist-attention = !zigzag-steps !ulysses-4x4 !zigzag-4x4 !usp-4x4
SANITIZE_PATTERNS_export = !qwen2 !qwen3 !untied !init-from-hf
SANITIZE_PATTERNS_tokenizer = !hf_js_llama3 !hf_js_qwen2
SANITIZE_PATTERNS_model = !muon-share
SANITIZE_PATTERNS_mc-eval = !cuda !mesh
sanitize_space := $() $()
sanitize_comma := ,
sanitize_suite = $(1)$(if $(SANITIZE_PATTERNS_$(1)),:$(subst $(sanitize_space),$(sanitize_comma),$\
	$(strip $(SANITIZE_PATTERNS_$(1)))))
# The longest first (TEST_JOBS of them run at a time).
SANITIZE_SUITES = $(foreach s,dist-model train mc-eval model shards tokenizer export timeline costmodel \
	dist-comm dist-attention dist-launch,$(call sanitize_suite,$(s))) \
	gpu-kit:compare-logs,gpu-peaks gpu-bench:kernel-costs
sanitize_left_out = $(or $(findstring cuda,$(1)),$(filter %_host,$(1)))
SANITIZE_PROGS = $(foreach p,$(TEST_PROGS),$(if $(call sanitize_left_out,$(p:$(BUILD)/%=%)),,$(p)))
SANITIZE_ENV = ASAN_OPTIONS=abort_on_error=1:detect_leaks=1 \
	UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1 \
	LSAN_OPTIONS=suppressions=$(CURDIR)/tests/sanitize_lsan.supp:print_suppressions=0:fast_unwind_on_malloc=0 \
	OMPI_MCA_mca_base_component_disable_dlclose=1

.PHONY: test-sanitize sanitize-progs
# Built by a make of its own whose CFLAGS and CXXFLAGS come from the environment: the Makefile's
# `?=` keeps them and its `+=` adds the language flags (a command-line CFLAGS would drop those).
# Fragments read after this one add to TEST_PROGS: $$ defers it to the second expansion.
.SECONDEXPANSION:
sanitize-progs: $$(SANITIZE_PROGS)

test-sanitize: setup
	@CFLAGS='$(SANITIZE_FLAGS) $(ARCH)' CXXFLAGS='$(SANITIZE_FLAGS) $(ARCH)' \
		$(MAKE) --no-print-directory $(BUILD_JOBS) BUILD=$(SANITIZE_BUILD) sanitize-progs
	@$(SANITIZE_ENV) BUILD=$(SANITIZE_BUILD) TEST_JOBS=$(TEST_JOBS) bash tests/run_suites.sh $(SANITIZE_SUITES)

.PHONY: clean-sanitize
clean: clean-sanitize
clean-sanitize:
	rm -rf $(SANITIZE_BUILD)
