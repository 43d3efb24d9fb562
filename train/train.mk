# The trainer program and `make train`: setup, build, default data, a short run that learns.
TRAIN_SRCS = train/train.c train/options.c train/config_check.c train/spike.c train/grad_buckets.c train/sampler.c model/sampling.c train/run_log.c train/peak_flops.c train/gpu_peaks.c \
	train/mesh_auto.c checkpoints/checkpoint_dir.c checkpoints/train_state.c
# --mesh auto links the cost model (costmodel/costmodel.mk) and the kernel cost formulas it
# counts with.
TRAIN_COSTMODEL_OBJS = $(BUILD)/costmodel_obj/costmodel.o $(BUILD)/costmodel_obj/cluster.o \
	$(BUILD)/tools/kernel_costs.o
TRAIN_OBJS = $(TRAIN_SRCS:%.c=$(BUILD)/%.o) $(TRAIN_COSTMODEL_OBJS) $(MODEL_OBJS) $(CHECKPOINT_OBJS) $(DATA_OBJS) \
	$(TOKENIZER_OBJS) $(COMM_OBJS) $(TRAIN_COMM_OBJS) $(DIST_ATTENTION_OBJS)

PROGRAMS += $(BUILD)/train_gpt
TEST_PROGS += $(BUILD)/train_gpt

$(BUILD)/train_gpt: $(TRAIN_OBJS)
	$(MPICC) $(CFLAGS) $^ -o $@ $(TOKENIZER_LIBS) $(LDLIBS)

# The default dataset: Debian's fortunes corpus (real English text), GPT-2 BPE, 5% validation.
DATA_DIR ?= data/cache
DEFAULT_DATA = $(DATA_DIR)/fortunes_val_000000.bin
FORTUNES_DIR ?= /usr/share/games/fortunes
$(DEFAULT_DATA):
	@$(MAKE) --no-print-directory $(BUILD)/tokenize
	$(BUILD)/tokenize --out-dir $(DATA_DIR) --name fortunes --doc-sep '%\n' --val-fraction 0.05 \
		--tokenizer-out $(DATA_DIR)/gpt2_tokenizer.bin \
		$$(find $(FORTUNES_DIR) -maxdepth 1 -type f ! -name '*.dat' ! -name '*.u8' | sort)

RUN_DIR ?= runs/default
# About 3 minutes on 2 cores: the validation loss ends about 1 nat below the unigram baseline.
TRAIN_ARGS ?= --preset small --batch 8 --seq-len 128 --steps 600 --lr 3e-3 --warmup 20 \
	--eval-every 100 --eval-batches 16 --sample-every 300 --sample-length 64 --checkpoint-every 300
train: setup
	@$(MAKE) --no-print-directory $(BUILD)/train_gpt $(BUILD)/unigram_baseline $(DEFAULT_DATA)
	@baseline=$$($(BUILD)/unigram_baseline '$(DATA_DIR)/fortunes_train_*.bin' \
		'$(DATA_DIR)/fortunes_val_*.bin'); \
	echo "unigram baseline (validation): $$baseline nats/token"; \
	OMP_NUM_THREADS=$${OMP_NUM_THREADS:-2} OMP_WAIT_POLICY=PASSIVE $(BUILD)/train_gpt $(TRAIN_ARGS) \
		--train-data '$(DATA_DIR)/fortunes_train_*.bin' --val-data '$(DATA_DIR)/fortunes_val_*.bin' \
		--tokenizer $(DATA_DIR)/gpt2_tokenizer.bin --out-dir $(RUN_DIR) && \
	tools/plot_loss.sh $(RUN_DIR)/log.jsonl $(RUN_DIR)/loss.png "$(RUN_DIR): fortunes, GPT-2 BPE" \
		"$$baseline"
