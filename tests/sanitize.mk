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
# dist-model: every line but four of the six train-schedules meshes (about 2 minutes under the
# sanitizers); 2x2, the short distributed training run, and dp2-2x2 stay.
SANITIZE_DIST_MODEL = mesh-* train-curves train-banded train-resume train-blend train-refuse train-kill train-mesh \
	train-schedules-2x2 train-schedules-dp2-2x2 mesh-auto
sanitize_space := $() $()
sanitize_comma := ,
# The longest first (TEST_JOBS of them run at a time).
SANITIZE_SUITES = dist-model:$(subst $(sanitize_space),$(sanitize_comma),$(strip $(SANITIZE_DIST_MODEL))) \
	train mc-eval:reference,mesh,training,errors,tokenize model shards tokenizer export timeline \
	costmodel dist-comm dist-attention dist-launch \
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
