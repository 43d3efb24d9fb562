# GPT-2 BPE tokenizer (encoder, decoder, llm.c tokenizer file) and the text-to-shards tool.
TOKENIZER_OBJS = $(BUILD)/data/bpe.o $(BUILD)/data/bpe_vocab.o $(BUILD)/data/tokenizer_file.o \
	$(BUILD)/comm/atomic_file.o
TOKENIZER_LIBS = -lpcre2-8

PROGRAMS += $(BUILD)/tokenize
TEST_PROGS += $(BUILD)/tokenize $(BUILD)/tests/test_bpe
SUITES_data += tokenizer

$(BUILD)/tokenize: $(BUILD)/tools/tokenize.o $(TOKENIZER_OBJS) $(DATA_OBJS) $(FAIL_OBJS)
	$(CC) $(CFLAGS) $^ -o $@ $(TOKENIZER_LIBS) $(LDLIBS)

$(BUILD)/tests/test_bpe: $(BUILD)/tests/test_bpe.o $(TOKENIZER_OBJS) $(DATA_OBJS) \
		$(FAIL_OBJS)
	$(CC) $(CFLAGS) $^ -o $@ $(TOKENIZER_LIBS) $(LDLIBS)
