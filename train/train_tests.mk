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
