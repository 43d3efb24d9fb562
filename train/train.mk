# The trainer program and `make train`: setup, build, default data, a short run that learns.
TRAIN_SRCS = train/train.c train/options.c train/sampler.c train/run_log.c train/peak_flops.c \
	checkpoints/checkpoint_dir.c checkpoints/train_state.c
TRAIN_OBJS = $(TRAIN_SRCS:%.c=$(BUILD)/%.o) $(MODEL_OBJS) $(CHECKPOINT_OBJS) $(DATA_OBJS) \
	$(TOKENIZER_OBJS) $(COMM_OBJS) $(DIST_ATTENTION_OBJS)

PROGRAMS += $(BUILD)/train_gpt
TEST_PROGS += $(BUILD)/train_gpt

$(BUILD)/train_gpt: $(TRAIN_OBJS)
	$(MPICC) $(CFLAGS) $^ -o $@ $(TOKENIZER_LIBS) $(LDLIBS)
