# Benchmarks: figures, not tests (`make bench`).
PROGRAMS += $(BUILD)/bench_cpu
.PHONY: bench-cpu
bench: bench-cpu

$(BUILD)/bench_cpu: $(BUILD)/tools/bench_cpu.o $(BUILD)/train/peak_flops.o $(MODEL_OBJS)
	$(CC) $(CFLAGS) $^ -o $@ $(LDLIBS)

bench-cpu: setup $(BUILD)/bench_cpu
	bash tools/bench_cpu.sh $(BUILD)/bench_cpu gpt3-125m 4 1024 2

PROGRAMS += $(BUILD)/unigram_baseline
$(BUILD)/unigram_baseline: $(BUILD)/tools/unigram_baseline.o $(DATA_OBJS) $(FAIL_OBJS)
	$(CC) $(CFLAGS) $^ -o $@ $(LDLIBS)

# llm.c's plain-C CPU trainer beside ours, from a checkout you provide (not run by `make bench`):
#   make bench-llmc LLMC=/path/to/llm.c [BENCH_LLMC_T="64 256 1024"]
BENCH_LLMC_T ?= 64 256
.PHONY: bench-llmc
bench-llmc: setup $(BUILD)/bench_cpu $(BUILD)/train_gpt
	@test -n "$(LLMC)" || { echo "bench-llmc: set LLMC=/path/to/a/checkout/of/karpathy/llm.c" >&2; exit 2; }
	@$(MAKE) --no-print-directory $(DEFAULT_DATA)
	bash tools/bench_llmc.sh $(LLMC) 4 $(BENCH_LLMC_T)

# Plain vs overlapped communication (tools/bench_overlap.sh): the CPU trainer on 4 and 16 MPI
# ranks, 2d, 2d-overlap, ring and striped with --overlap 0 and 1, step time and the timeline's
# exposed-communication fraction; CSV, JSONL, PNG and a Chrome trace per P in build/bench/overlap.
.PHONY: bench-overlap
bench: bench-overlap
bench-overlap: setup $(BUILD)/train_gpt
	bash tools/bench_overlap.sh $(BUILD)/bench/overlap

# Latency and bandwidth of the collectives on this machine's transport against message size, and
# their alpha-beta fits (tools/bench_collectives.sh): CSV, JSONL, PNG in build/bench/collectives.
.PHONY: bench-collectives
bench: bench-collectives
bench-collectives: setup $(BUILD)/tools/bench_collectives
	bash tools/bench_collectives.sh $(BUILD)/bench/collectives

# Benchmark sweeps (tools/bench_sweep.sh): the real trainer for a few steps per point over model
# shape, sequence length, mesh (dp x pq x pkv) and algorithm (2d, 2d-overlap, ring, striped,
# zigzag); tokens/s, step time split into compute / exposed communication / waiting, bytes per
# rank, MFU; sweep.csv, sweep.jsonl and PNGs (against P per algorithm, and a per-rank timeline).
#   make bench-quick   smoke test for CI (tools/sweeps/quick.points, about 15 s on 2 cores) in
#                      build/bench/quick, then checked: every point, finite positive numbers, PNGs
#   make bench-sweep   the full CPU sweep (tools/sweeps/cpu.points, about 13 minutes on 2 cores)
#                      into results/sweep-cpu, committed (results/README.md: command and machine)
.PHONY: bench-quick bench-sweep
bench: bench-sweep
# bench-quick also puts its points through the cost model (--validate), with a cluster file
# calibrated here first on the ranks its points use (2 and 4; about 30 s on 2 cores: the
# committed cpu-local.cluster describes the machine that last ran make bench-costmodel), and
# writes the paper table into build/bench/quick, so both reports are exercised on every CI run
# (figures not checked).
bench-quick: setup $(BUILD)/train_gpt $(BUILD)/costmodel $(BUILD)/tools/bench_collectives
	bash tools/bench_sweep.sh --out $(BUILD)/bench/quick --points tools/sweeps/quick.points --steps 4
	$(PYTHON) tools/bench_sweep.py check $(BUILD)/bench/quick --points tools/sweeps/quick.points
	$(call calibrate_cpu_cluster,$(BUILD)/bench/quick,2 4)
	$(BUILD)/costmodel --validate $(BUILD)/bench/quick/sweep.csv \
	  --cluster $(BUILD)/bench/quick/cpu.cluster --out-dir $(BUILD)/bench/quick
	$(BUILD)/costmodel --paper --out-dir $(BUILD)/bench/quick
	@for f in cpu_validation.md cpu_validation.png bytes_per_rank.png paper_comparison.csv; do \
	  test -s $(BUILD)/bench/quick/$$f || { echo "error: bench-quick: $$f missing or empty" >&2; exit 1; }; done

bench-sweep: setup $(BUILD)/train_gpt
	bash tools/bench_sweep.sh --out results/sweep-cpu --work $(BUILD)/bench/sweep-cpu \
	  --points tools/sweeps/cpu.points --steps 6
	$(PYTHON) tools/bench_sweep.py check results/sweep-cpu --points tools/sweeps/cpu.points

# The collectives benchmark on the CPU backend (host buffers, --comm mpi); the CUDA backend's
# build, tools/bench_collectives_cuda(_host), is in train/train_cuda.mk.
BENCH_COLLECTIVES_C_OBJS = $(BUILD)/tools/bench_collectives.o $(COMM_OBJS) $(TRANSPORT_OBJS) $(LAUNCH_OBJS)
$(BUILD)/tools/bench_collectives: $(BENCH_COLLECTIVES_C_OBJS) $(DIST_OPS_CPU_OBJS) $(BUILD)/comm/comm_device_none.o \
		$(filter-out $(BENCH_COLLECTIVES_C_OBJS),$(MODEL_OBJS))
	$(MPICC) $(CFLAGS) $^ -o $@ $(LDLIBS)

# GPT's block against Llama's (tools/bench_block.sh): one small model trained on the fortunes
# corpus with each change in turn (rotary positions, RMSNorm, SwiGLU, no linear biases, grouped-
# query attention); parameters, validation loss and tokens/s. CSV, table and PNG in results/block
# (committed; about 10 minutes on 2 cores).
.PHONY: bench-block
bench: bench-block
bench-block: setup $(BUILD)/train_gpt
	@$(MAKE) --no-print-directory $(DEFAULT_DATA)
	bash tools/bench_block.sh results/block

# Context extension (tools/bench_context_extension.sh): a small rotary model pretrained on the
# fortunes corpus at 64 tokens, run at 256 with each --rope-scaling, as pretrained and after 40
# steps there; the validation loss by position (--eval-positions). CSV, table and PNG in
# results/context-extension (committed; about 3 minutes on 2 cores).
.PHONY: bench-context-extension
bench: bench-context-extension
bench-context-extension: setup $(BUILD)/train_gpt
	@$(MAKE) --no-print-directory $(DEFAULT_DATA)
	bash tools/bench_context_extension.sh results/context-extension
