# `make test-sanitize`: the C programs built with AddressSanitizer and UndefinedBehaviorSanitizer
# into their own build directory (SANITIZE_BUILD, default build-sanitize), then the C suites run
# against them (tests/run_suites.sh with BUILD=$(SANITIZE_BUILD)), MPI jobs included; the
# train-schedules-2x2 line of dist-model is the short distributed training run (4 ranks, 2x2).
#
#   - every UBSan report ends the process (-fno-sanitize-recover, halt_on_error), every ASan report
#     too, with SIGABRT (abort_on_error): a sanitizer report can never pass for one of the
#     controlled failures the suites expect (tests/expect_job_failure.sh takes exit 1..123 only);
#   - leak detection stays on, MPI runs included; tests/sanitize_lsan.supp names the third-party
#     libraries whose own allocations live until exit (Open MPI, OpenBLAS, libgomp); Open MPI keeps
#     its components loaded (disable_dlclose) so that their frames have names to match;
#   - the programs of the CUDA host runtime (tests/cuda_host) are left out: its fibers switch
#     stacks under ASan's feet. They are the test programs whose path names cuda or _host.
SANITIZE_BUILD ?= build-sanitize
SANITIZE_FLAGS = -O1 -g -fno-omit-frame-pointer -fsanitize=address,undefined -fno-sanitize-recover=undefined
SANITIZE_SUITES = model shards tokenizer train timeline costmodel dist-comm dist-attention dist-launch \
	dist-model
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
		$(MAKE) --no-print-directory BUILD=$(SANITIZE_BUILD) sanitize-progs
	@$(SANITIZE_ENV) BUILD=$(SANITIZE_BUILD) bash tests/run_suites.sh $(SANITIZE_SUITES)
