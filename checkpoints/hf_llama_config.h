// config.json of a Hugging Face Llama directory (transformers' LlamaForCausalLM or LlamaModel,
// what build/export_hf writes for a model with RMSNorm, SwiGLU and rotary positions), Mistral's
// (MistralForCausalLM: Llama without biases, with sliding_window in every layer; MistralConfig's
// default 4096 when the key is absent, none when null) or Qwen2's (Qwen2ForCausalLM: Llama with
// biases in q_proj, k_proj and v_proj only; no sliding window) or Qwen3's (Qwen3ForCausalLM: Llama
// with RMSNorm on every query and key head, q_norm and k_norm, before the rotation: QK-norm; the
// attention's biases per attention_bias, none in the MLP), read into this model's shape: the
// Llama half of checkpoints/hf_import.h. rms_norm_eps becomes the model's norm epsilon (as fp32,
// the width transformers adds it in). What the model cannot follow is refused in one line naming
// the key: an activation other than silu, an epsilon outside (0, 0.1], a head_dim other than
// hidden_size / num_attention_heads, a rope_theta that is not a whole number, a rope type other
// than default, linear, yarn (beta_fast 32, beta_slow 1, its own attention factor) and llama3 (low
// and high frequency factors 1 and 4), Qwen2's use_sliding_window true (windows in the layers from
// max_window_layers on, a pattern the model's --window-every cannot express).
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
    int qwen2;            // model_type "qwen2": q_proj, k_proj, v_proj biases, whatever the above
    int qwen3;            // model_type "qwen3": QK-norm (q_norm, k_norm), no MLP biases
} HfLlamaForm;

// Whether q_proj, k_proj and v_proj have biases: attention_bias's, or Qwen2's always.
static inline int hf_llama_qkv_bias(const HfLlamaForm* f) { return f->attention_bias || f->qwen2; }
// "attention_bias true, mlp_bias false" or "Qwen2's biases in q_proj, k_proj, v_proj only", for
// messages about the tensors a file should hold.
void hf_llama_bias_text(const HfLlamaForm* f, char* buf, size_t n);

// text: the whole of config.json, path its name for the messages. Fills *cfg (checked by
// gpt_config_validate) and *form with transformers' defaults for the keys it lacks (LlamaConfig's
// and Qwen2Config's: no biases, untied, theta 10000, rms_norm_eps 1e-6). Returns 0, or -1 with a
// one-line message naming the file and the key in err.
int hf_llama_config(const char* text, const char* path, GPTConfig* cfg, HfLlamaForm* form,
                    char* err, size_t errlen);
