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
