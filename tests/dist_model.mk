# Distributed training equals single-process training: the whole model's loss and gradients
# on many meshes and schedules (tests/test_dist_model.c), and the trainer under mpirun against
# the single-process trainer: loss curves, ZeRO-1, resume on another mesh, failures
# (tests/test_dist_train.sh). Linked with $(MPICC), as every program that links COMM_OBJS.
# The trainer, $(BUILD)/train_gpt, is in TEST_PROGS already (train/train.mk).
TEST_PROGS += $(BUILD)/tests/test_dist_model
SUITES_dist += dist-model

$(BUILD)/tests/test_dist_model: $(BUILD)/tests/test_dist_model.o $(MODEL_OBJS) \
		$(DIST_ATTENTION_OBJS) $(COMM_OBJS) $(DATA_OBJS) $(CHECKPOINT_OBJS) $(FAIL_OBJS)
	$(MPICC) $(CFLAGS) $^ -o $@ $(LDLIBS)
