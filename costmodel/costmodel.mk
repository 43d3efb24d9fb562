# The cost model (costmodel/README.md): the library `--mesh auto` links (COSTMODEL_OBJS), the
# program build/costmodel, its tests (suite costmodel) and the benchmark that checks it against
# this machine (make bench-costmodel). Objects live in $(BUILD)/costmodel_obj: build/costmodel is
# the program.
COSTMODEL_OBJ_DIR = $(BUILD)/costmodel_obj
# The model and the cluster parser; a program that links the model and the distributed attention
# already (the trainer: MODEL_OBJS, DIST_ATTENTION_OBJS, COMM_OBJS) adds these and
# $(BUILD)/tools/kernel_costs.o. COSTMODEL_OBJS is everything they need, for a program alone.
COSTMODEL_CORE_OBJS = $(COSTMODEL_OBJ_DIR)/costmodel.o $(COSTMODEL_OBJ_DIR)/rank.o $(COSTMODEL_OBJ_DIR)/cluster.o
COSTMODEL_OBJS = $(COSTMODEL_CORE_OBJS) $(BUILD)/attention/dist_cost.o $(BUILD)/tools/kernel_costs.o \
	$(BUILD)/comm/mesh.o $(BUILD)/model/config.o $(BUILD)/model/activations.o \
	$(BUILD)/model/memory_budget.o $(BUILD)/model/documents.o $(BUILD)/attention/dist_scratch.o \
	$(FAIL_OBJS)
# The program adds the reports and the CPU calibration, which times the CPU kernels
# (MODEL_OBJS) against the measured FMA peak (train/peak_flops.c), and the trainer's batch
# ramp-up (train/batch_rampup.c), whose steps --train-tokens counts and prices.
COSTMODEL_PROG_OBJS = $(COSTMODEL_OBJ_DIR)/main.o $(COSTMODEL_OBJ_DIR)/reports.o \
	$(COSTMODEL_OBJ_DIR)/sweep_csv.o \
	$(COSTMODEL_OBJ_DIR)/cpu_calibrate.o $(COSTMODEL_OBJ_DIR)/gpu_report.o \
	$(COSTMODEL_OBJ_DIR)/gpu_calibrate.o $(COSTMODEL_OBJ_DIR)/gpu_validation.o $(filter-out $(FAIL_OBJS) $(BUILD)/model/config.o $(BUILD)/model/activations.o $(BUILD)/model/memory_budget.o $(BUILD)/model/documents.o $(BUILD)/attention/dist_scratch.o,$(COSTMODEL_OBJS)) \
	$(BUILD)/train/peak_flops.o $(BUILD)/train/batch_rampup.o $(MODEL_OBJS)

$(COSTMODEL_OBJ_DIR)/%.o: costmodel/%.c
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -MMD -MP -c $< -o $@

PROGRAMS += $(BUILD)/costmodel
TEST_PROGS += $(BUILD)/costmodel $(BUILD)/tests/test_costmodel
SUITES_model += costmodel

$(BUILD)/costmodel: $(COSTMODEL_PROG_OBJS)
	$(CC) $(CFLAGS) $^ -o $@ $(LDLIBS)

$(BUILD)/tests/test_costmodel: $(BUILD)/tests/test_costmodel.o $(COSTMODEL_OBJS)
	$(CC) $(CFLAGS) $^ -o $@ $(LDLIBS)

# This machine as a cluster: the collectives timed on each number of ranks in $(2)
# (tools/bench_collectives.sh into $(1)/collectives), then the CPU kernels on one thread; writes
# $(1)/cpu.cluster. Needs $(BUILD)/tools/bench_collectives and $(BUILD)/costmodel.
define calibrate_cpu_cluster
	RANKS="$(2)" bash tools/bench_collectives.sh $(1)/collectives
	OMP_NUM_THREADS=1 $(BUILD)/costmodel --calibrate --collectives $(1)/collectives/collectives.jsonl \
		--out $(1)/cpu.cluster
endef

# This machine on 2, 4, 8 and 16 ranks: build/bench/cpu.cluster, which also refreshes the
# committed costmodel/clusters/cpu-local.cluster.
COSTMODEL_RANKS ?= 2 4 8 16
.PHONY: costmodel-calibrate bench-costmodel
costmodel-calibrate: setup $(BUILD)/tools/bench_collectives $(BUILD)/costmodel
	$(call calibrate_cpu_cluster,$(BUILD)/bench,$(COSTMODEL_RANKS))
	cp $(BUILD)/bench/cpu.cluster costmodel/clusters/cpu-local.cluster

# The model against this machine and against the paper: calibrate, run the validation sweep
# (costmodel/validation.points through tools/bench_sweep.sh), predict every point, and write
# costmodel/cpu_validation.{md,csv,png}, costmodel/bytes_per_rank.png and
# costmodel/paper_comparison.{md,csv}.
COSTMODEL_SWEEP_DIR ?= $(BUILD)/bench/validation
COSTMODEL_SWEEP_CSV ?= $(COSTMODEL_SWEEP_DIR)/sweep.csv
# Steps per point: 30 (the first 2 untimed) keep each run at about 2-8 s here and average out
# the scheduler's noise.
COSTMODEL_SWEEP_STEPS ?= 30
bench: bench-costmodel
bench-costmodel: costmodel-calibrate $(BUILD)/train_gpt
	bash tools/bench_sweep.sh --out $(COSTMODEL_SWEEP_DIR) --points costmodel/validation.points --steps $(COSTMODEL_SWEEP_STEPS)
	$(BUILD)/costmodel --validate $(COSTMODEL_SWEEP_CSV) --cluster $(BUILD)/bench/cpu.cluster --out-dir costmodel
	$(BUILD)/costmodel --paper --out-dir costmodel

# GPU clusters calibrated from the newest GPU kit report under results/gpu/ whose checks all passed
# (folders GPU-DATE-COMMIT or GPU-DATETHHMM-COMMIT, UTC; the newest date and time wins; a report
# with a failed check may hold wrong kernels, so it calibrates nothing): the compute side measured
# (build/costmodel --calibrate-gpu), the rest from the datasheet files (*-datasheet.cluster); the
# FA2 variant takes the attention of PyTorch's flash SDPA measured beside ours. Then the validation
# against the report's trainer runs and the paper table. `make` regenerates them whenever the
# report, a datasheet file or the cost model changes.
GPU_REPORT ?= $(patsubst %/,%,$(addprefix results/gpu/,$(lastword $(shell cd results/gpu 2> /dev/null && \
	grep -l '"type":"verdict","passed":[0-9]*,"failed":0,' */gpu_report.jsonl | cut -d/ -f1 | \
	sed -nE 's/^(.*-)?([0-9]{4}-[0-9]{2}-[0-9]{2}(T[0-9]{4})?)(-.*)?$$/\2 &/p' | sort | cut -d' ' -f2))))
GPU_REPORT_FILES = $(wildcard $(GPU_REPORT)/*.jsonl)
GPU_CLUSTERS = costmodel/clusters/h100-8pernode.cluster costmodel/clusters/h100-1pernode-ndr.cluster \
	costmodel/clusters/h100-1pernode-ndr-fa2.cluster
.PHONY: costmodel-gpu
all: costmodel-gpu
costmodel-gpu: $(GPU_CLUSTERS) costmodel/gpu_validation.md costmodel/paper_comparison.md
costmodel/clusters/h100-8pernode.cluster costmodel/clusters/h100-1pernode-ndr.cluster: costmodel/clusters/%.cluster: \
		costmodel/clusters/%-datasheet.cluster $(GPU_REPORT_FILES) $(BUILD)/costmodel
	$(BUILD)/costmodel --calibrate-gpu $(GPU_REPORT) --base $< --out $@
costmodel/clusters/h100-1pernode-ndr-fa2.cluster: costmodel/clusters/h100-1pernode-ndr-datasheet.cluster \
		$(GPU_REPORT_FILES) $(BUILD)/costmodel
	$(BUILD)/costmodel --calibrate-gpu $(GPU_REPORT) --base $< --attention-source sdpa --out $@
costmodel/gpu_validation.md: costmodel/clusters/h100-8pernode.cluster $(GPU_REPORT_FILES) $(BUILD)/costmodel
	$(BUILD)/costmodel --validate-gpu $(GPU_REPORT) --cluster $< --out-dir costmodel
costmodel/paper_comparison.md: costmodel/clusters/a100-4pernode-hdr.cluster $(GPU_CLUSTERS) $(BUILD)/costmodel
	$(BUILD)/costmodel --paper --out-dir costmodel
