# The trainer program and `make train`: setup, build, default data, a short run that learns.
# The trainer program (train/trainer.h says which file holds which part of a run), and what it
# shares with other programs (build/generate links these, not the program's own files).
TRAIN_PROGRAM_SRCS = train/train.c train/run_end.c train/run_setup.c train/train_step.c \
	train/train_loop.c train/checkpoint_save.c train/checkpoint_resume.c train/run_report.c \
	train/evaluate.c
TRAIN_PROGRAM_OBJS = $(TRAIN_PROGRAM_SRCS:%.c=$(BUILD)/%.o)
TRAIN_SRCS = $(TRAIN_PROGRAM_SRCS) train/options.c train/config_check.c train/spike.c train/grad_buckets.c \
	train/batch_rampup.c \
	train/sampler.c model/sampling.c train/run_log.c train/peak_flops.c train/gpu_peaks.c \
	train/mesh_auto.c checkpoints/checkpoint_dir.c checkpoints/train_state.c
# --mesh auto links the cost model (costmodel/costmodel.mk) and the kernel cost formulas it
# counts with.
TRAIN_COSTMODEL_OBJS = $(BUILD)/costmodel_obj/costmodel.o $(BUILD)/costmodel_obj/rank.o $(BUILD)/costmodel_obj/cluster.o \
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
# On a GPU (tools/train_backend.sh decides): GPT-3 Small in bf16, 400 steps of 16 x 512 tokens,
# about 5 passes over the 0.7M-token corpus (a model this size overfits it after that, which the
# validation loss shows); about a minute of an H100 by the measured 321k tokens/s at T = 1024.
TRAIN_ARGS_CUDA ?= --preset gpt3-125m --batch 16 --seq-len 512 --steps 400 --lr 6e-4 --warmup 40 \
	--eval-every 100 --eval-batches 8 --sample-every 200 --sample-length 64 --checkpoint-every 200
# TRAIN_DRY_RUN=1: say which trainer and command would run, build and run nothing.
train: setup
	@choice=$$(bash tools/train_backend.sh '$(CUDA_NVCC)'); backend=$${choice%% *}; \
	if [ "$$backend" = cuda ]; then prog=$(BUILD)/train_gpt_cuda; args='$(TRAIN_ARGS_CUDA)'; \
	else prog=$(BUILD)/train_gpt; args='$(TRAIN_ARGS)'; fi; \
	echo "make train: the $$backend trainer, $$prog: $${choice#* } (TRAIN_BACKEND=cpu|cuda to choose)"; \
	cmd="$$prog $$args --train-data '$(DATA_DIR)/fortunes_train_*.bin' --val-data '$(DATA_DIR)/fortunes_val_*.bin' --tokenizer $(DATA_DIR)/gpt2_tokenizer.bin --out-dir $(RUN_DIR)"; \
	echo "make train: $$cmd"; \
	[ -z "$(TRAIN_DRY_RUN)" ] || exit 0; \
	$(MAKE) --no-print-directory $$prog $(BUILD)/unigram_baseline $(DEFAULT_DATA) || exit 1; \
	baseline=$$($(BUILD)/unigram_baseline '$(DATA_DIR)/fortunes_train_*.bin' \
		'$(DATA_DIR)/fortunes_val_*.bin'); \
	echo "unigram baseline (validation): $$baseline nats/token"; \
	OMP_NUM_THREADS=$${OMP_NUM_THREADS:-2} OMP_WAIT_POLICY=PASSIVE eval "$$cmd" && \
	tools/plot_loss.sh $(RUN_DIR)/log.jsonl $(RUN_DIR)/loss.png "$(RUN_DIR): fortunes, GPT-2 BPE" \
		"$$baseline"
