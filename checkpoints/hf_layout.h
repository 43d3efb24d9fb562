// GPT-2's tensors as transformers names them, and where each lives in llm.c's flat parameters:
// the one table the Hugging Face export and import both read; GPT-NeoX's, which the export
// writes for a model with rotary positions; and Llama's, which both read for a model with
// RMSNorm, SwiGLU and rotary positions.
#pragma once
#include <stddef.h>

#include "model/config.h"

typedef struct {
    char name[96];       // prefix + transformers' name, e.g. "transformer.h.0.attn.c_attn.weight"
    size_t rows, cols;   // its shape in transformers; rows 0: a vector of cols
    size_t offset;       // of llm.c's tensor in the flat parameters
    int transposed;      // a Conv1D weight: llm.c keeps it as (cols, rows)
    int interleave;      // HS: llm.c's rows [q | k | v] (C each) regrouped per head, [q_h k_h v_h]
                         // (GPT-NeoX's query_key_value); 0: the rows as they are
} HfTensor;

// The 4 + 12 L tensors of GPT-2 (wte, wpe, the layers, ln_f) into t, and lm_head.weight (no
// prefix: GPT2LMHeadModel's) for an untied classifier; returns how many. wte and lm_head have V
// rows: llm.c's padding rows (Vp - V) are not a tensor of transformers.
int hf_layout(const GPTConfig* cfg, const char* prefix, HfTensor* t);
#define HF_LAYOUT_TENSORS(L) (5 + 12 * (L))
// GPT-NeoX's 4 + 12 L tensors (GPTNeoXForCausalLM: embed_in, the layers, final_layer_norm,
// embed_out) of a model with rotary positions: nn.Linear weights (out, in) as llm.c keeps them,
// query_key_value's rows and bias interleaved per head, embed_out the untied classifier's V rows,
// or a second copy of wte's for a tied model (GPT-NeoX's config unties them by default).
int hf_layout_neox(const GPTConfig* cfg, HfTensor* t);
// Llama's 2 + 16 L tensors (LlamaForCausalLM: embed_tokens, the layers, norm) of a model with
// RMSNorm, SwiGLU and rotary positions, after prefix ("model."; "" for LlamaModel): nn.Linear
// weights (out, in) as llm.c keeps them, q_proj, k_proj and v_proj the three row blocks of llm.c's
// qkv projection (C, NKV HS, NKV HS rows), gate_proj and up_proj the two halves of fc (F gate
// rows, then F up rows); lm_head.weight (no prefix) for an untied classifier, none for a tied
// one. qkv_bias, o_bias, mlp_bias 0: without the biases of q/k/v_proj, o_proj or
// gate/up/down_proj (transformers' attention_bias false: the first two; Qwen2: o_proj's alone;
// mlp_bias false: the MLP's), 9 + 3 + 1 + 3 tensors a layer with all; under QK-norm (Qwen3's
// block, RMSNorm) also self_attn.q_norm and self_attn.k_norm, head_dim each.
int hf_layout_llama(const GPTConfig* cfg, const char* prefix, int qkv_bias, int o_bias,
                    int mlp_bias, HfTensor* t);
#define HF_LAYOUT_LLAMA_TENSORS(L) (3 + 18 * (L))
