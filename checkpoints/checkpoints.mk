# build/export_hf: a model file or checkpoint as a Hugging Face GPT-2, GPT-NeoX or Llama
# directory (checkpoints/hf_export.h, checkpoints/safetensors.h); build/import_hf: the way back
# for GPT-2 and Llama (checkpoints/hf_import.h, checkpoints/hf_llama_config.h,
# checkpoints/json_read.h). Their tests (tests/suites/export.list): the files read back by an
# independent PyTorch reader and forward (tests/check_hf_export.py), and the round trip.
# Read before data/ and model/: their object lists are expanded a second time ($$).
EXPORT_HF_OBJS = $(BUILD)/tools/export_hf.o $(BUILD)/checkpoints/hf_export.o \
	$(BUILD)/checkpoints/safetensors.o $(BUILD)/checkpoints/json_read.o \
	$(BUILD)/checkpoints/hf_layout.o $(BUILD)/checkpoints/checkpoint_dir.o

IMPORT_HF_OBJS = $(BUILD)/tools/import_hf.o $(BUILD)/checkpoints/hf_import.o \
	$(BUILD)/checkpoints/hf_llama_config.o $(BUILD)/checkpoints/hf_layout.o \
	$(BUILD)/checkpoints/safetensors.o $(BUILD)/checkpoints/json_read.o

PROGRAMS += $(BUILD)/export_hf $(BUILD)/import_hf
TEST_PROGS += $(BUILD)/export_hf $(BUILD)/import_hf $(BUILD)/tests/test_json_read
SUITES_data += export

.SECONDEXPANSION:
$(BUILD)/export_hf: $(EXPORT_HF_OBJS) $$(CHECKPOINT_OBJS) $$(MODEL_OBJS) $$(TOKENIZER_OBJS)
	$(CC) $(CFLAGS) $(sort $^) -o $@ $(TOKENIZER_LIBS) $(LDLIBS)
$(BUILD)/import_hf: $(IMPORT_HF_OBJS) $$(CHECKPOINT_OBJS) $$(MODEL_OBJS)
	$(CC) $(CFLAGS) $(sort $^) -o $@ $(LDLIBS)
$(BUILD)/tests/test_json_read: $(BUILD)/tests/test_json_read.o $(BUILD)/checkpoints/json_read.o
	$(CC) $(CFLAGS) $^ -o $@ -lm
