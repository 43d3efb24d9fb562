// config.json of a Hugging Face Llama directory (transformers' LlamaForCausalLM or LlamaModel,
// what build/export_hf writes for a model with RMSNorm, SwiGLU and rotary positions), or Mistral's
// (MistralForCausalLM: Llama without biases, with sliding_window in every layer; MistralConfig's
// default 4096 when the key is absent, none when null), read into this model's shape: the Llama
// half of checkpoints/hf_import.h. What the model cannot follow is
// refused in one line naming the key: an activation other than silu, an RMSNorm epsilon other
// than the kernels' fixed 1e-5, a head_dim other than hidden_size / num_attention_heads, a
// rope_theta that is not a whole number, a rope type other than default, linear, yarn (beta_fast
// 32, beta_slow 1, its own attention factor) and llama3 (low and high frequency factors 1 and 4).
#pragma once
#include <stddef.h>

#include "model/config.h"

typedef struct {
    // q_proj, k_proj, v_proj and o_proj have biases; gate_proj, up_proj and down_proj have biases.
    // Both false: a model without linear biases (GPTConfig.no_linear_bias); one false: its
    // biases read as zeros.
    int attention_bias;
    int mlp_bias;
    int tied;             // tie_word_embeddings (false: untied_classifier, from lm_head.weight)
    int mistral;          // model_type "mistral"
} HfLlamaForm;

// text: the whole of config.json, path its name for the messages. Fills *cfg (checked by
// gpt_config_validate) and *form with transformers' defaults for the keys it lacks (LlamaConfig's:
// no biases, untied, theta 10000, rms_norm_eps 1e-6, so that one is refused). Returns 0, or -1
// with a one-line message naming the file and the key in err.
int hf_llama_config(const char* text, const char* path, GPTConfig* cfg, HfLlamaForm* form,
                    char* err, size_t errlen);
