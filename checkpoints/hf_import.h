// A Hugging Face GPT-2 directory (config.json and model.safetensors, as transformers'
// save_pretrained writes them for GPT2LMHeadModel or GPT2Model, with or without the
// "transformer." prefix; what build/export_hf writes) read into llm.c's layout: the inverse of
// checkpoints/hf_export.h. The Conv1D weights are transposed back to (out, in), wte gains llm.c's
// padding rows (zero), and the buffers transformers may keep (attn.bias, attn.masked_bias) are
// skipped; layer_norm_epsilon (GPT2Config's 1e-5 when absent) becomes the model's norm epsilon.
// What this model cannot represent is refused: another activation, an epsilon outside
// (0, 0.1], an MLP width other than 4C, an lm_head that differs from wte, a tensor GPT-2 does not have, a
// value that is not finite. The file's tensors are checked against config.json's shapes before
// anything of their size is allocated.
// A Llama directory (model_type "llama": LlamaForCausalLM, or LlamaModel without the "model."
// prefix; "mistral" and "qwen2" with Llama's names) is read the same way into a model with RMSNorm, SwiGLU and rotary positions
// (checkpoints/hf_llama_config.h for its config.json): q_proj, k_proj and v_proj stacked into the
// qkv projection, gate_proj and up_proj into fc, zero biases where attention_bias or mlp_bias is
// false, older versions' rotary_emb.inv_freq buffers skipped, and an lm_head.weight (required
// when tie_word_embeddings is false) equal to embed_tokens.
#pragma once
#include <stddef.h>

#include "model/config.h"

// Fills *cfg and *params (gpt_num_params(cfg) floats, malloc'ed; the caller frees). Returns 0, or
// -1 with a one-line message naming the file in err and nothing allocated.
int hf_import(const char* dir, GPTConfig* cfg, float** params, char* err, size_t errlen);
// The two halves of hf_import, for a caller that owns the parameter buffer: the shape alone,
// from config.json, then model.safetensors into params (gpt_num_params(cfg) floats), checked
// against that shape.
int hf_import_config(const char* dir, GPTConfig* cfg, char* err, size_t errlen);
int hf_import_weights(const char* dir, const GPTConfig* cfg, float* params, char* err,
                      size_t errlen);
