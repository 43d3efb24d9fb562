# GPT-2 BPE tokenizer (encoder, decoder, llm.c tokenizer file) and the text-to-shards tool.
TOKENIZER_OBJS = $(BUILD)/data/bpe.o $(BUILD)/data/bpe_vocab.o $(BUILD)/data/tokenizer_file.o \
	$(BUILD)/data/whole_file.o $(BUILD)/comm/atomic_file.o
TOKENIZER_LIBS = -lpcre2-8

PROGRAMS += $(BUILD)/tokenize $(BUILD)/tokenize_mc
TEST_PROGS += $(BUILD)/tokenize $(BUILD)/tokenize_mc $(BUILD)/tests/test_bpe
SUITES_data += tokenizer

$(BUILD)/tokenize: $(BUILD)/tools/tokenize.o $(BUILD)/checkpoints/json_read.o $(TOKENIZER_OBJS) \
		$(DATA_OBJS) $(FAIL_OBJS)
	$(CC) $(CFLAGS) $^ -o $@ $(TOKENIZER_LIBS) $(LDLIBS)

$(BUILD)/tests/test_bpe: $(BUILD)/tests/test_bpe.o $(TOKENIZER_OBJS) $(DATA_OBJS) \
		$(FAIL_OBJS)
	$(CC) $(CFLAGS) $^ -o $@ $(TOKENIZER_LIBS) $(LDLIBS)

# HellaSwag's JSON lines as an llm.c multiple-choice eval file (data/mc_eval.h) for --mc-eval.
$(BUILD)/tokenize_mc: $(BUILD)/tools/tokenize_mc.o $(BUILD)/checkpoints/json_read.o \
		$(TOKENIZER_OBJS) $(DATA_OBJS) $(FAIL_OBJS)
	$(CC) $(CFLAGS) $^ -o $@ $(TOKENIZER_LIBS) $(LDLIBS)
