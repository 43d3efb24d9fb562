#include "checkpoints/hf_layout.h"

#include <stdio.h>

#include "model/gpt.h"

enum { WTE, WPE, LN1W, LN1B, QKVW, QKVB, ATTPROJW, ATTPROJB, LN2W, LN2B, FCW, FCB, FCPROJW,
       FCPROJB, LNFW, LNFB, CLASSIFIER, QNORMW, QNORMB, KNORMW, KNORMB };

// Where each of the 21 tensors begins in the flat parameters.
static void tensor_starts(const GPTConfig* cfg, size_t start[NUM_PARAM_TENSORS]) {
    size_t sizes[NUM_PARAM_TENSORS];
    gpt_param_sizes(cfg, sizes);
    for (int k = 0; k < NUM_PARAM_TENSORS; k++)
        start[k] = k ? start[k - 1] + sizes[k - 1] : 0;
}

int hf_layout(const GPTConfig* cfg, const char* prefix, HfTensor* w) {
    size_t start[NUM_PARAM_TENSORS];
    tensor_starts(cfg, start);
    const size_t C = (size_t)cfg->C;
    int n = 0;
#define WANT(tensor_, at_, rows_, cols_, tr_, ...) \
    (snprintf(w[n].name, sizeof w[n].name, __VA_ARGS__), w[n].rows = rows_, w[n].cols = cols_, \
     w[n].offset = start[tensor_] + (at_), w[n].transposed = tr_, w[n].interleave = 0, n++)
    WANT(WTE, 0, (size_t)cfg->V, C, 0, "%swte.weight", prefix);
    WANT(WPE, 0, (size_t)cfg->max_T, C, 0, "%swpe.weight", prefix);
    for (size_t l = 0; l < (size_t)cfg->L; l++) {
        WANT(LN1W, l * C, 0, C, 0, "%sh.%zu.ln_1.weight", prefix, l);
        WANT(LN1B, l * C, 0, C, 0, "%sh.%zu.ln_1.bias", prefix, l);
        WANT(QKVW, l * 3 * C * C, C, 3 * C, 1, "%sh.%zu.attn.c_attn.weight", prefix, l);
        WANT(QKVB, l * 3 * C, 0, 3 * C, 0, "%sh.%zu.attn.c_attn.bias", prefix, l);
        WANT(ATTPROJW, l * C * C, C, C, 1, "%sh.%zu.attn.c_proj.weight", prefix, l);
        WANT(ATTPROJB, l * C, 0, C, 0, "%sh.%zu.attn.c_proj.bias", prefix, l);
        WANT(LN2W, l * C, 0, C, 0, "%sh.%zu.ln_2.weight", prefix, l);
        WANT(LN2B, l * C, 0, C, 0, "%sh.%zu.ln_2.bias", prefix, l);
        WANT(FCW, l * 4 * C * C, C, 4 * C, 1, "%sh.%zu.mlp.c_fc.weight", prefix, l);
        WANT(FCB, l * 4 * C, 0, 4 * C, 0, "%sh.%zu.mlp.c_fc.bias", prefix, l);
        WANT(FCPROJW, l * 4 * C * C, 4 * C, C, 1, "%sh.%zu.mlp.c_proj.weight", prefix, l);
        WANT(FCPROJB, l * C, 0, C, 0, "%sh.%zu.mlp.c_proj.bias", prefix, l);
    }
    WANT(LNFW, 0, 0, C, 0, "%sln_f.weight", prefix);
    WANT(LNFB, 0, 0, C, 0, "%sln_f.bias", prefix);
    if (cfg->untied_classifier) WANT(CLASSIFIER, 0, (size_t)cfg->V, C, 0, "lm_head.weight");
#undef WANT
    return n;
}

int hf_layout_neox(const GPTConfig* cfg, HfTensor* w) {
    size_t start[NUM_PARAM_TENSORS];
    tensor_starts(cfg, start);
    const size_t C = (size_t)cfg->C;
    const int HS = cfg->C / cfg->NH;
    int n = 0;
#define WANT(tensor_, at_, rows_, cols_, il_, ...) \
    (snprintf(w[n].name, sizeof w[n].name, __VA_ARGS__), w[n].rows = rows_, w[n].cols = cols_, \
     w[n].offset = start[tensor_] + (at_), w[n].transposed = 0, w[n].interleave = il_, n++)
    WANT(WTE, 0, (size_t)cfg->V, C, 0, "gpt_neox.embed_in.weight");
    for (size_t l = 0; l < (size_t)cfg->L; l++) {
        const char* p = "gpt_neox.layers.";
        WANT(LN1W, l * C, 0, C, 0, "%s%zu.input_layernorm.weight", p, l);
        WANT(LN1B, l * C, 0, C, 0, "%s%zu.input_layernorm.bias", p, l);
        WANT(QKVW, l * 3 * C * C, 3 * C, C, HS, "%s%zu.attention.query_key_value.weight", p, l);
        WANT(QKVB, l * 3 * C, 0, 3 * C, HS, "%s%zu.attention.query_key_value.bias", p, l);
        WANT(ATTPROJW, l * C * C, C, C, 0, "%s%zu.attention.dense.weight", p, l);
        WANT(ATTPROJB, l * C, 0, C, 0, "%s%zu.attention.dense.bias", p, l);
        WANT(LN2W, l * C, 0, C, 0, "%s%zu.post_attention_layernorm.weight", p, l);
        WANT(LN2B, l * C, 0, C, 0, "%s%zu.post_attention_layernorm.bias", p, l);
        WANT(FCW, l * 4 * C * C, 4 * C, C, 0, "%s%zu.mlp.dense_h_to_4h.weight", p, l);
        WANT(FCB, l * 4 * C, 0, 4 * C, 0, "%s%zu.mlp.dense_h_to_4h.bias", p, l);
        WANT(FCPROJW, l * 4 * C * C, C, 4 * C, 0, "%s%zu.mlp.dense_4h_to_h.weight", p, l);
        WANT(FCPROJB, l * C, 0, C, 0, "%s%zu.mlp.dense_4h_to_h.bias", p, l);
    }
    WANT(LNFW, 0, 0, C, 0, "gpt_neox.final_layer_norm.weight");
    WANT(LNFB, 0, 0, C, 0, "gpt_neox.final_layer_norm.bias");
    WANT(cfg->untied_classifier ? CLASSIFIER : WTE, 0, (size_t)cfg->V, C, 0, "embed_out.weight");
#undef WANT
    return n;
}

int hf_layout_llama(const GPTConfig* cfg, const char* prefix, int qkv_bias, int o_bias,
                    int mlp_bias, HfTensor* w) {
    size_t start[NUM_PARAM_TENSORS];
    tensor_starts(cfg, start);
    const size_t C = (size_t)cfg->C, KV = (size_t)gpt_kv_heads(cfg) * (size_t)(cfg->C / cfg->NH),
                 W = (size_t)gpt_qkv_width(cfg), F = (size_t)gpt_ffn_hidden(cfg);
    int n = 0;
#define WANT(tensor_, at_, rows_, cols_, ...) \
    (snprintf(w[n].name, sizeof w[n].name, __VA_ARGS__), w[n].rows = rows_, w[n].cols = cols_, \
     w[n].offset = start[tensor_] + (at_), w[n].transposed = 0, w[n].interleave = 0, n++)
    WANT(WTE, 0, (size_t)cfg->V, C, "%sembed_tokens.weight", prefix);
    for (size_t l = 0; l < (size_t)cfg->L; l++) {
        WANT(LN1W, l * C, 0, C, "%slayers.%zu.input_layernorm.weight", prefix, l);
        // llm.c's qkv rows [q (C) | k (KV) | v (KV)], and their biases
        static const char* const qkv[] = {"q_proj", "k_proj", "v_proj"};
        const size_t first[] = {0, C, C + KV}, rows[] = {C, KV, KV};
        for (int s = 0; s < 3; s++) {
            WANT(QKVW, (l * W + first[s]) * C, rows[s], C, "%slayers.%zu.self_attn.%s.weight",
                 prefix, l, qkv[s]);
            if (qkv_bias)
                WANT(QKVB, l * W + first[s], 0, rows[s], "%slayers.%zu.self_attn.%s.bias", prefix,
                     l, qkv[s]);
        }
        if (cfg->qk_norm) {   // Qwen3's q_norm and k_norm: RMSNorm weights of head_dim
            const size_t HS = (size_t)(cfg->C / cfg->NH);
            WANT(QNORMW, l * HS, 0, HS, "%slayers.%zu.self_attn.q_norm.weight", prefix, l);
            WANT(KNORMW, l * HS, 0, HS, "%slayers.%zu.self_attn.k_norm.weight", prefix, l);
        }
        WANT(ATTPROJW, l * C * C, C, C, "%slayers.%zu.self_attn.o_proj.weight", prefix, l);
        if (o_bias)
            WANT(ATTPROJB, l * C, 0, C, "%slayers.%zu.self_attn.o_proj.bias", prefix, l);
        WANT(LN2W, l * C, 0, C, "%slayers.%zu.post_attention_layernorm.weight", prefix, l);
        // fc's rows [gate (F) | up (F)]
        static const char* const fc[] = {"gate_proj", "up_proj"};
        for (size_t s = 0; s < 2; s++) {
            WANT(FCW, (l * 2 + s) * F * C, F, C, "%slayers.%zu.mlp.%s.weight", prefix, l, fc[s]);
            if (mlp_bias)
                WANT(FCB, (l * 2 + s) * F, 0, F, "%slayers.%zu.mlp.%s.bias", prefix, l, fc[s]);
        }
        WANT(FCPROJW, l * C * F, C, F, "%slayers.%zu.mlp.down_proj.weight", prefix, l);
        if (mlp_bias) WANT(FCPROJB, l * C, 0, C, "%slayers.%zu.mlp.down_proj.bias", prefix, l);
    }
    WANT(LNFW, 0, 0, C, "%snorm.weight", prefix);
    if (cfg->untied_classifier) WANT(CLASSIFIER, 0, (size_t)cfg->V, C, "lm_head.weight");
#undef WANT
    return n;
}
