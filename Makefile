# GNU Make only. Every build and test target of the project lives here or in the module
# fragments (*/module.mk) included below.
PYTHON ?= /usr/bin/python3
export PYTHON
CC     ?= gcc
CXX    ?= g++
NVCC   ?= nvcc
BUILD  ?= build
# -march=native: every build compiles on the machine that runs it (CI included).
ARCH   ?= -march=native
OPENBLAS_DIR ?= /usr/lib/x86_64-linux-gnu/openblas-openmp
CFLAGS ?= -O3 $(ARCH)
CFLAGS += -std=c11 -D_GNU_SOURCE -fopenmp -Wall -Wextra -Wno-unused-parameter -Werror=implicit-function-declaration -I.
CXXFLAGS ?= -O2 $(ARCH)
CXXFLAGS += -std=c++17 -fopenmp -Wall -Wextra -Wno-unused-parameter -I.
LDLIBS  = -L$(OPENBLAS_DIR) -Wl,-rpath,$(OPENBLAS_DIR) -lopenblas -lm
SETUP   = bash tools/setup.sh

.PHONY: all setup train test bench clean
# Programs are linked straight into these folders, which may hold no object file of their own.
$(shell mkdir -p $(BUILD)/tests/cuda $(BUILD)/tests/cuda_host $(BUILD)/tools $(BUILD)/tmp)
all:

setup:
	@$(SETUP)

# Module fragments (*/*.mk, tests/*/*.mk) add their programs to PROGRAMS, their test programs to
# TEST_PROGS and their suites (tests/suites/NAME.list) to SUITES_<group>.
# comm/fail.mk, attention and model come first: other fragments name their objects. The GPU kit
# comes last: it packs the programs the others build.
FIRST_FRAGMENTS = comm/fail.mk attention/attention.mk model/model.mk tests/cuda_host/module.mk
LAST_FRAGMENTS = tools/bench_kernels.mk tools/gpu_bundle.mk
include $(FIRST_FRAGMENTS)
include $(filter-out $(FIRST_FRAGMENTS) $(LAST_FRAGMENTS),$(sort $(wildcard */*.mk tests/*/*.mk)))
include $(LAST_FRAGMENTS)

# Test groups, in the order `make test` starts them (the longest first, so that the suites running
# side by side end together); `make test-<group>` runs one group. The kit
# group (the GPU bundle, its self-test and the nvcc builds: several minutes of packaging and
# compiling) runs as `make test-kit`, and the CUDA trainers' schedule sweep as `make test-sweep`,
# after `make test` in CI.
TEST_GROUPS = cuda-dist cuda dist model data train generate
.PHONY: test-progs $(addprefix test-,$(TEST_GROUPS) kit sweep)
test-progs: $(TEST_PROGS)

# make test builds its programs with one compiler per core (unless the command line sets -j) and
# runs TEST_JOBS suites at a time (one per core, at most 4: past that the longest suite, a quarter
# of the whole, sets the time, and only memory grows; TEST_JOBS=1: one after another). The kit's
# suites run one at a time: they build bundles and time steps against deadlines of their own.
NPROC := $(shell nproc)
TEST_JOBS ?= $(shell n=$(NPROC); echo $$(( n < 4 ? n : 4 )))
BUILD_JOBS = $(if $(filter -j%,$(MAKEFLAGS)),,-j$(NPROC))

test: setup
	@$(MAKE) --no-print-directory $(BUILD_JOBS) test-progs
	@TEST_JOBS=$(TEST_JOBS) bash tests/run_suites.sh $(foreach g,$(TEST_GROUPS),$(SUITES_$(g)))

$(addprefix test-,$(TEST_GROUPS) kit sweep): test-%: setup
	@$(MAKE) --no-print-directory $(BUILD_JOBS) test-progs
	@TEST_JOBS=$(if $(filter kit,$*),1,$(TEST_JOBS)) bash tests/run_suites.sh $(SUITES_$*)

all: $(PROGRAMS)

$(BUILD)/%.o: %.c
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -MMD -MP -c $< -o $@

# The same C sources compiled with double as the real type, for finite-difference checks.
$(BUILD)/f64/%.o: %.c
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -DGPT_REAL_DOUBLE -MMD -MP -c $< -o $@

clean:
	rm -rf $(BUILD)

# The nvcc objects of a sub-make for another host architecture live under NVCC_BUILD.
-include $(shell find $(sort $(BUILD) $(NVCC_BUILD)) -name '*.d' 2>/dev/null)
