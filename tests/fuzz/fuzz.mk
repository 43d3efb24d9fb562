# Fuzzing every reader of untrusted input (tests/fuzz/fuzz_TARGET.c, one libFuzzer target each).
#
#   make fuzz   builds the targets with clang (libFuzzer, AddressSanitizer, UBSan) into
#               $(BUILD)/fuzz/ and runs each for FUZZ_SECONDS from tests/fuzz/corpus/TARGET and
#               tests/fuzz/regressions/TARGET; writes $(BUILD)/fuzz/summary.csv; fails on any
#               crash, leak, timeout or huge allocation (inputs under $(BUILD)/fuzz/artifacts/).
#
# `make test` needs no clang: the suite fuzz-replay runs the seed corpora and the regressions
# through the same targets built with gcc's sanitizers and a plain main (replay_main.c).
# Only the reader under test (and the harness) is instrumented; the rest is the usual objects.
FUZZ_CC ?= clang
# CI's short run (a longer one: make fuzz FUZZ_SECONDS=600); make test's fuzz-replay suite runs
# every seed and regression input besides.
FUZZ_SECONDS ?= 10
FUZZ_TARGETS = shard model_file train_state tokenizer_file bpe_vocab hf_tokenizer options \
	hf_import mc_eval cluster gpu_report sweep_csv blend
FUZZ_CFLAGS = -std=c11 -D_GNU_SOURCE -I. -g -O1 -fno-omit-frame-pointer -Wall -Wextra \
	-Wno-unused-parameter -fno-sanitize-recover=all
FUZZ_LIBS = $(TOKENIZER_LIBS) $(LDLIBS) -lgomp -lpthread

# Per target: the sources fuzzed (instrumented) and the plain objects they link with.
FUZZ_BASE_OBJS = $(BUILD)/comm/atomic_file.o $(FAIL_OBJS)
FUZZ_SRCS_shard = data/shard.c
FUZZ_OBJS_shard = $(FUZZ_BASE_OBJS)
FUZZ_SRCS_model_file = checkpoints/model_file.c
FUZZ_OBJS_model_file = $(MODEL_OBJS)
FUZZ_SRCS_train_state = checkpoints/train_state.c
FUZZ_OBJS_train_state = $(FUZZ_BASE_OBJS)
FUZZ_SRCS_tokenizer_file = data/tokenizer_file.c
FUZZ_OBJS_tokenizer_file = $(FUZZ_BASE_OBJS)
FUZZ_SRCS_bpe_vocab = data/bpe_vocab.c data/bpe.c data/bpe_tokens.c data/bpe_nfc.c \
	data/bpe_added.c data/hf_tokenizer.c \
	data/hf_tokenizer_json.c data/tokenizer_file.c data/whole_file.c checkpoints/json_read.c
FUZZ_OBJS_bpe_vocab = $(FUZZ_BASE_OBJS)
FUZZ_SRCS_hf_tokenizer = data/hf_tokenizer.c data/hf_tokenizer_json.c data/bpe.c data/bpe_vocab.c \
	data/bpe_tokens.c data/bpe_nfc.c data/bpe_added.c data/tokenizer_file.c data/whole_file.c \
	checkpoints/json_read.c
FUZZ_OBJS_hf_tokenizer = $(FUZZ_BASE_OBJS)
FUZZ_SRCS_blend = data/blend.c
FUZZ_OBJS_blend = $(FUZZ_BASE_OBJS)
FUZZ_SRCS_mc_eval = data/mc_eval.c data/whole_file.c
FUZZ_OBJS_mc_eval = $(FUZZ_BASE_OBJS)
FUZZ_SRCS_cluster = costmodel/cluster.c
FUZZ_OBJS_cluster = $(FUZZ_BASE_OBJS)
FUZZ_SRCS_gpu_report = costmodel/gpu_report.c
FUZZ_OBJS_gpu_report = $(FUZZ_BASE_OBJS)
FUZZ_SRCS_sweep_csv = costmodel/sweep_csv.c
FUZZ_OBJS_sweep_csv = $(COSTMODEL_OBJS) $(BUILD)/comm/atomic_file.o   # cost_algorithm_parse
FUZZ_SRCS_options = train/options.c
FUZZ_OBJS_options = $(MODEL_OBJS)   # gpt_backend_name / gpt_backend_host_memory (--help)
FUZZ_SRCS_hf_import = checkpoints/hf_import.c checkpoints/hf_llama_config.c checkpoints/hf_layout.c \
	checkpoints/safetensors.c checkpoints/json_read.c
# hf_export writes the round trip.
FUZZ_OBJS_hf_import = $(BUILD)/checkpoints/hf_export.o $(BUILD)/checkpoints/checkpoint_dir.o \
	$(MODEL_OBJS)

# Suite lines (tests/suites/fuzz-replay.list) name these; the targets go to $(BUILD)/fuzz/.
FUZZ_REPLAYS = $(FUZZ_TARGETS:%=$(BUILD)/tests/fuzz/replay_%)
TEST_PROGS += $(FUZZ_REPLAYS)
SUITES_data += fuzz-replay

$(BUILD)/fuzz/obj/%.o: %.c
	@mkdir -p $(dir $@)
	$(FUZZ_CC) $(FUZZ_CFLAGS) -fsanitize=fuzzer-no-link,address,undefined -MMD -MP -c $< -o $@

$(BUILD)/fuzz-replay/%.o: %.c
	@mkdir -p $(dir $@)
	$(CC) $(FUZZ_CFLAGS) -fsanitize=address,undefined -MMD -MP -c $< -o $@

# $(1): target name. The fuzzer and its replay twin from the same sources.
define FUZZ_TARGET_RULES
$(BUILD)/fuzz/fuzz_$(1): $(patsubst %.c,$(BUILD)/fuzz/obj/%.o,tests/fuzz/fuzz_$(1).c \
		tests/fuzz/fuzz_file.c $(FUZZ_SRCS_$(1))) $(FUZZ_OBJS_$(1))
	$$(FUZZ_CC) $$(FUZZ_CFLAGS) -fsanitize=fuzzer,address,undefined $$^ -o $$@ $$(FUZZ_LIBS)

$(BUILD)/tests/fuzz/replay_$(1): $(patsubst %.c,$(BUILD)/fuzz-replay/%.o,tests/fuzz/fuzz_$(1).c \
		tests/fuzz/fuzz_file.c tests/fuzz/replay_main.c $(FUZZ_SRCS_$(1))) $(FUZZ_OBJS_$(1))
	@mkdir -p $$(dir $$@)
	$$(CC) $$(FUZZ_CFLAGS) -fsanitize=address,undefined $$^ -o $$@ $$(FUZZ_LIBS)
endef
$(foreach t,$(FUZZ_TARGETS),$(eval $(call FUZZ_TARGET_RULES,$(t))))

.PHONY: fuzz fuzz-build
fuzz-build: $(FUZZ_TARGETS:%=$(BUILD)/fuzz/fuzz_%)
fuzz: setup
	@$(MAKE) --no-print-directory fuzz-build
	@bash tests/fuzz/run_fuzz.sh $(BUILD) $(FUZZ_SECONDS) $(FUZZ_TARGETS)

# The binary seeds come from the project's own writers (tests/fuzz/make_corpus.sh).
TEST_PROGS += $(BUILD)/tests/fuzz/write_seeds
$(BUILD)/tests/fuzz/write_seeds: $(BUILD)/tests/fuzz/write_seeds.o $(BUILD)/tests/fuzz/fuzz_file.o \
		$(BUILD)/checkpoints/train_state.o $(CHECKPOINT_OBJS) $(DATA_OBJS) \
		$(BUILD)/data/tokenizer_file.o $(MODEL_OBJS) $(BUILD)/checkpoints/hf_export.o \
		$(BUILD)/checkpoints/safetensors.o $(BUILD)/checkpoints/json_read.o \
		$(BUILD)/checkpoints/hf_layout.o $(BUILD)/checkpoints/checkpoint_dir.o
	$(CC) $(CFLAGS) $^ -o $@ $(LDLIBS)
