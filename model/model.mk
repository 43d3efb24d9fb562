# The CPU model: layer kernels, the GPT layer sequence, initialisation, optimizer, model files.
MODEL_SRCS = model/config.c model/layers.c model/token_order.c model/documents.c model/activations.c model/memory_budget.c model/gpt.c model/init.c model/optimizer.c model/muon.c \
	model/blas_kernels.c model/backend_cpu.c
# The layer sequence records compute spans into a timeline (comm/timeline.h), which writes its
# trace atomically; both named directly (this fragment is read before comm/timeline.mk).
MODEL_TIMELINE_OBJS = $(BUILD)/comm/timeline.o $(BUILD)/comm/timeline_capture.o $(BUILD)/comm/timeline_trace.o \
	$(BUILD)/comm/atomic_file.o
# The memory budget sizes the distributed schedules' scratch by their formulas
# (attention/dist_scratch.c: element sizes are inputs, so one object serves every precision).
MODEL_OBJS = $(MODEL_SRCS:%.c=$(BUILD)/%.o) $(ATTENTION_OBJS) $(FAIL_OBJS) $(MODEL_TIMELINE_OBJS) \
	$(BUILD)/attention/dist_scratch.o
MODEL_OBJS_F64 = $(MODEL_SRCS:%.c=$(BUILD)/f64/%.o) $(ATTENTION_OBJS_F64) $(FAIL_OBJS) \
	$(MODEL_TIMELINE_OBJS) $(BUILD)/attention/dist_scratch.o
CHECKPOINT_OBJS = $(BUILD)/comm/atomic_file.o $(BUILD)/checkpoints/model_file.o \
	$(BUILD)/checkpoints/model_source.o $(BUILD)/checkpoints/hf_import.o \
	$(BUILD)/checkpoints/hf_llama_config.o $(BUILD)/checkpoints/hf_layout.o \
	$(BUILD)/checkpoints/safetensors.o $(BUILD)/checkpoints/json_read.o

TEST_PROGS += $(BUILD)/tests/test_gradcheck $(BUILD)/tests/test_attention \
	$(BUILD)/tests/test_model_torch $(BUILD)/tests/test_token_order $(BUILD)/tests/blas_coretype \
	$(BUILD)/tests/test_muon_share $(BUILD)/tests/test_float_round
SUITES_model += model

$(BUILD)/tests/test_gradcheck: $(BUILD)/f64/tests/test_gradcheck.o $(MODEL_OBJS_F64)
	$(CC) $(CFLAGS) $^ -o $@ $(LDLIBS)

# The OPENBLAS_CORETYPE the programs restart into here, which tests/run_suites.sh sets.
$(BUILD)/tests/blas_coretype: $(BUILD)/tests/blas_coretype.o $(BUILD)/model/blas_kernels.o
	$(CC) $(CFLAGS) $^ -o $@ $(LDLIBS)

$(BUILD)/tests/test_token_order: $(BUILD)/tests/test_token_order.o $(BUILD)/model/token_order.o $(FAIL_OBJS)
	$(CC) $(CFLAGS) $^ -o $@ $(LDLIBS)

$(BUILD)/tests/test_muon_share: $(BUILD)/tests/test_muon_share.o $(MODEL_OBJS)
	$(CC) $(CFLAGS) $^ -o $@ $(LDLIBS)

$(BUILD)/tests/test_float_round: $(BUILD)/tests/test_float_round.o
	$(CC) $(CFLAGS) $^ -o $@ -lm

$(BUILD)/tests/test_attention: $(BUILD)/tests/test_attention.o $(MODEL_OBJS)
	$(CC) $(CFLAGS) $^ -o $@ $(LDLIBS)

# fast_exp / fast_tanh against libm under UndefinedBehaviorSanitizer, every report fatal.
TEST_PROGS += $(BUILD)/tests/test_fast_math_ubsan
$(BUILD)/tests/test_fast_math_ubsan: tests/test_fast_math.c model/fast_math.h model/real.h
	$(CC) $(CFLAGS) -fsanitize=undefined -fno-sanitize-recover=all $< -o $@ -lm

$(BUILD)/tests/test_model_torch: $(BUILD)/tests/test_model_torch.o $(MODEL_OBJS) $(CHECKPOINT_OBJS)
	$(CC) $(CFLAGS) $^ -o $@ $(LDLIBS)
