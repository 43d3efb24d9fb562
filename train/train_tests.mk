# The trainer's tests (`make test-train`): tests/suites/train.list runs tests/test_train.sh (whole
# trainer runs: resume, corrupt and killed checkpoints, signals, bad input, help, logs) and
# test_train_checkpoint (checkpoint files and directory below the trainer).
SUITES_train += train
# tests/suites/mc-eval.list: --mc-eval against an independent scorer (tests/test_mc_eval.sh).
SUITES_train += mc-eval
TEST_PROGS += $(BUILD)/tests/test_train_checkpoint

$(BUILD)/tests/test_train_checkpoint: $(BUILD)/tests/test_train_checkpoint.o \
		$(BUILD)/checkpoints/checkpoint_dir.o $(BUILD)/checkpoints/train_state.o \
		$(CHECKPOINT_OBJS) $(MODEL_OBJS)
	$(CC) $(CFLAGS) $^ -o $@ $(LDLIBS)

# The trainer on a slow disk: each checkpoint's files are written 0.1 s late
# (CHECKPOINT_TEST_WRITE_DELAY_MS), so that the steps which go on during an --async-save write are
# certain, and each checkpoint checks that it copied to the host exactly what the rank's files
# hold (CHECKPOINT_TEST_COPY_CHECK) (tests/test_train.sh async-save).
TEST_PROGS += $(BUILD)/tests/train_gpt_slow_save
$(BUILD)/tests/checkpoint_save_slow.o: train/checkpoint_save.c train/train_tests.mk
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -DCHECKPOINT_TEST_WRITE_DELAY_MS=100 -DCHECKPOINT_TEST_COPY_CHECK -MMD -MP -c $< -o $@
$(BUILD)/tests/train_gpt_slow_save: $(filter-out $(BUILD)/train/checkpoint_save.o,$(TRAIN_OBJS)) \
		$(BUILD)/tests/checkpoint_save_slow.o
	$(MPICC) $(CFLAGS) $^ -o $@ $(TOKENIZER_LIBS) $(LDLIBS)
