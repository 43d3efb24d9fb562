// Model shapes: the GPT-3 paper's presets, llm.c's GPT-2 depth presets and a tiny test shape;
// what a shape implies (head and projection widths, the parameter tensors).
#pragma once
#include <stddef.h>

#include "model/rope_angles.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct {
    int max_T;   // context length (rows of the position embedding)
    int V;       // vocabulary size
    int Vp;      // vocabulary padded to a multiple of 128 (rows of wte)
    int L;       // layers
    int NH;      // attention heads
    int C;       // channels (NH * head size)
    // Sliding-window (banded) attention, as GPT-3's "locally banded" layers: 0 (the default)
    // for causal attention over every earlier position in every layer; W >= 1 for layers whose
    // queries see only the last W positions (themselves included): layer l is banded when
    // l % window_every == 0 (1: every layer; 2: layers 0, 2, 4, ... alternate with dense ones).
    int window;
    int window_every;   // 0 when window is 0
    // Grouped-query attention (Ainslie et al. 2023, Megatron-LM's --num-query-groups): 0 (the
    // default, llm.c's) for one key/value head per query head; G >= 1 dividing NH for G key/value
    // heads, each read by NH / G consecutive query heads. The qkv projection is then C + 2 G HS
    // wide (gpt_qkv_width) and every schedule moves G / NH of the K/V bytes.
    int kv_heads;
    // Position encoding: 0 (the default, llm.c's and GPT-3's) for learned absolute positions, the
    // wpe table of max_T rows added to the token embeddings; theta >= 2 for rotary embeddings
    // (RoPE, Su et al. 2021, in GPT-NeoX's and Llama's half-split layout) with base theta:
    // every query and key head's channel pairs (i, i + HS/2) are rotated by p theta^(-2i/HS) at
    // position p after the qkv projection, and the model has no wpe (0 rows). Nothing else
    // changes: every attention schedule sees rotated queries and keys at their own positions.
    int rope_theta;
    // Context extension of rotary positions (model/rope_angles.h ROPE_SCALING_*): 0 for none, else
    // the frequencies scaled by rope_factor >= 1 from a model trained at rope_original_T
    // positions (position interpolation, YaRN or Llama 3.1's); both 0 without scaling.
    int rope_scaling;
    float rope_factor;
    int rope_original_T;
    // The block's form, Llama's where they are not 0 (Touvron et al. 2023; Megatron-LM's
    // --normalization RMSNorm, --swiglu, --ffn-hidden-size). norm: GPT_NORM_LAYERNORM (0, GPT's:
    // weight and bias) or GPT_NORM_RMSNORM (x / sqrt(mean(x^2) + eps) * weight: no mean, no bias,
    // so ln1b, ln2b and lnfb have 0 elements). mlp: GPT_MLP_GELU (0, GPT's: fc, GELU, fcproj) or
    // GPT_MLP_SWIGLU (Shazeer 2020: fc is 2F wide, F gate columns then F up columns, and fcproj
    // reads silu(gate) * up). ffn_hidden: F, the MLP's hidden width (0: 4C, GPT's).
    int norm;
    int mlp;
    int ffn_hidden;
    // 1: the linear layers have no biases (Megatron-LM's --disable-bias-linear; Llama's): qkvb
    // (unless qkv_bias, below), attprojb, fcb and fcprojb have 0 elements. 0 (GPT's): every
    // linear layer has its bias.
    int no_linear_bias;
    // 1: the classifier has its own (Vp, C) matrix, the tensor `classifier` (Megatron-LM's
    // --untie-embeddings-and-output-weights; Llama's and GPT-NeoX's). 0 (GPT's, llm.c's): the
    // logits are lnf @ wte^T, and `classifier` has 0 elements.
    int untied_classifier;
    // The norms' epsilon (Megatron-LM's --norm-epsilon, transformers' rms_norm_eps and
    // layer_norm_epsilon): 0 for GPT_NORM_EPS_DEFAULT (1e-5, GPT-2's, Llama 2's and 3's, llm.c's),
    // else the value itself, as fp32 (Qwen2's and Llama 1's 1e-6).
    float norm_eps;
    // 1: the qkv projection has its bias although no_linear_bias drops the others (Megatron-LM's
    // --add-qkv-bias; Qwen2's): qkvb has L W elements, attprojb, fcb and fcprojb none. 0 otherwise
    // (only meaningful under no_linear_bias: with every bias present it would say nothing).
    int qkv_bias;
    // 1: every query and key head is normalised over its HS channels after the qkv projection and
    // before the rotary embedding (QK-norm, Megatron-LM's --qk-layernorm; OLMo's, Qwen3's, Gemma
    // 3's), by the block's norm: LayerNorm with a weight and bias of HS each, or RMSNorm with a
    // weight, one pair per layer for the queries (qnormw, qnormb) and one for the keys (knormw,
    // knormb), shared by the heads. 0 (GPT's): none, and those tensors have 0 elements.
    int qk_norm;
} GPTConfig;

#define GPT_NORM_EPS_DEFAULT 1e-5

// The norms' epsilon: norm_eps, or 1e-5. A double so the default stays the exact 1e-5 the
// layers have always added (a float's 1e-5 differs from it in double builds).
static inline double gpt_norm_eps(const GPTConfig* cfg) {
    return cfg->norm_eps > 0 ? (double)cfg->norm_eps : GPT_NORM_EPS_DEFAULT;
}

// Key/value heads: NH, or kv_heads under grouped-query attention.
static inline int gpt_kv_heads(const GPTConfig* cfg) {
    return cfg->kv_heads > 0 ? cfg->kv_heads : cfg->NH;
}
// Columns of the qkv projection: C of queries, then the K and V heads (3C without GQA).
static inline int gpt_qkv_width(const GPTConfig* cfg) {
    return cfg->C + 2 * gpt_kv_heads(cfg) * (cfg->C / cfg->NH);
}

enum { GPT_NORM_LAYERNORM = 0, GPT_NORM_RMSNORM = 1 };
enum { GPT_MLP_GELU = 0, GPT_MLP_SWIGLU = 1 };

// The MLP's hidden width F (ffn_hidden, or GPT's 4C), and the width of its first layer's output:
// F, or 2F under SwiGLU (gate and up).
static inline int gpt_ffn_hidden(const GPTConfig* cfg) {
    return cfg->ffn_hidden > 0 ? cfg->ffn_hidden : 4 * cfg->C;
}
static inline int gpt_fc_width(const GPTConfig* cfg) {
    return (cfg->mlp == GPT_MLP_SWIGLU ? 2 : 1) * gpt_ffn_hidden(cfg);
}
// 1 when the linear layers have biases (GPT's), 0 without (no_linear_bias).
static inline int gpt_linear_bias(const GPTConfig* cfg) { return !cfg->no_linear_bias; }
// 1 when the qkv projection has its bias: with every linear layer's, or alone under qkv_bias.
static inline int gpt_qkv_bias(const GPTConfig* cfg) {
    return gpt_linear_bias(cfg) || cfg->qkv_bias;
}
// Elements per layer of QK-norm's query (or key) weight: HS under qk_norm, else 0; and of its bias:
// HS under qk_norm with LayerNorm, else 0.
static inline int gpt_qk_norm_weight(const GPTConfig* cfg) {
    return cfg->qk_norm ? cfg->C / cfg->NH : 0;
}
static inline int gpt_qk_norm_bias(const GPTConfig* cfg) {
    return cfg->norm == GPT_NORM_RMSNORM ? 0 : gpt_qk_norm_weight(cfg);
}
// Elements of one LayerNorm's bias: C, or 0 under RMSNorm.
static inline int gpt_norm_bias(const GPTConfig* cfg) {
    return cfg->norm == GPT_NORM_RMSNORM ? 0 : cfg->C;
}
// The widest row of a layer's activations and bias gradients: the qkv projection's or the MLP's
// first layer's (4C in GPT: backward's wide scratch buffers and the CUDA bias-gradient scratch).
static inline int gpt_widest_row(const GPTConfig* cfg) {
    const int w = gpt_qkv_width(cfg), f = gpt_fc_width(cfg);
    return w > f ? w : f;
}
// Megatron-LM's default hidden width of a SwiGLU MLP: 2/3 of 4C (the same parameters as GPT's
// 4C GELU MLP), rounded down to a multiple of 64, at least 64.
static inline int gpt_swiglu_default_hidden(int C) {
    const int f = (int)(8.0 * C / 3 / 64) * 64;
    return f > 64 ? f : 64;
}

// Rows of the learned position table wpe: max_T, or 0 under rotary embeddings.
static inline int gpt_position_rows(const GPTConfig* cfg) {
    return cfg->rope_theta > 0 ? 0 : cfg->max_T;
}

// The rotation of a rotary model (cfg->rope_theta > 0), for the rope layers.
static inline RopeSpec gpt_rope(const GPTConfig* cfg) {
    RopeSpec r = {cfg->rope_theta, cfg->rope_scaling, cfg->rope_factor, cfg->rope_original_T};
    return r;
}

// Whether two shapes encode positions alike: the same table, or the same rotation and scaling.
static inline int gpt_same_positions(const GPTConfig* a, const GPTConfig* b) {
    return a->rope_theta == b->rope_theta && a->rope_scaling == b->rope_scaling &&
           a->rope_factor == b->rope_factor && a->rope_original_T == b->rope_original_T;
}

// The attention window of layer l: cfg->window for a banded layer, 0 (causal) otherwise.
static inline long gpt_layer_window(const GPTConfig* cfg, int l) {
    return cfg->window > 0 && l % cfg->window_every == 0 ? cfg->window : 0;
}

#define GPT2_VOCAB 50257
#define GPT2_EOT 50256

// Fills *cfg from a preset name with the given context length and vocabulary (pass <= 0 for the
// preset's defaults: context 2048 for gpt3-*, 1024 for d*, GPT-2's 50257 tokens). Returns 0, or
// -1 if the name is unknown.
int gpt_config_preset(const char* name, int max_T, int V, GPTConfig* cfg);
// Comma-separated preset names, for help and error messages.
const char* gpt_config_preset_names(void);
// V rounded up to a multiple of 128.
int gpt_padded_vocab(int V);
// "attention window W in every layer", "... in layers l % N = 0", or "no attention window": the
// banded layers, for the programs' configuration lines.
void gpt_window_text(const GPTConfig* cfg, char* buf, size_t n);
// Training FLOPs per token at sequence length T, llm.c's count: 6 N for the parameters (less an
// untied model's wte, which is only looked up: the classifier is counted once either way), and per
// layer 12 C for each (query, key) pair the mask leaves, T/2 per query in a causal layer (llm.c's
// 6 L C T in all) and W - W^2 / (2T) in a banded one (T W - W^2 / 2 pairs; T/2 again at W = T).
// The trainer's MFU and the cost model's both use it.
double gpt_flops_per_token(const GPTConfig* cfg, double num_params, long T);
// "learned positions", "rotary positions (theta 10000)" or "rotary positions (theta 10000, yarn
// x4 from 2048)", for the configuration lines.
void gpt_position_text(const GPTConfig* cfg, char* buf, size_t n);
// The block's names: gpt_norm_name (layernorm, rmsnorm), gpt_mlp_name (gelu, swiglu), NULL for an
// unknown number; their parsers return the number of a name, or -1.
const char* gpt_norm_name(int norm);
const char* gpt_mlp_name(int mlp);
int gpt_norm_parse(const char* name);
int gpt_mlp_parse(const char* name);
// "LayerNorm, GELU MLP of 4C" or "RMSNorm (eps 1e-06), SwiGLU MLP of 2 x 5504, no linear
// biases, QK-norm", for the configuration lines.
void gpt_block_text(const GPTConfig* cfg, char* buf, size_t n);
// Room for the longest gpt_block_text ("RMSNorm (eps 1.23456e-06), SwiGLU MLP of 2 x 16777216,
// linear biases in qkv only, untied classifier, QK-norm").
enum { GPT_BLOCK_TEXT_LEN = 144 };
// The norms' epsilon on cfg: eps in (0, 0.1], stored as fp32 (1e-5, the default, as 0). Returns 0,
// or -1 with a one-line reason in err naming `name` (the flag or key that gave it).
int gpt_norm_eps_apply(GPTConfig* cfg, double eps, const char* name, char* err, size_t errlen);
// Checks norm_eps (0, or in (0, 0.1]) and qkv_bias (0, or 1 under no_linear_bias); returns 0, or
// -1 with a one-line reason in err. gpt_config_validate and the model file's reader use it.
int gpt_block_extras_validate(float norm_eps, int no_linear_bias, int qkv_bias, char* err,
                              size_t errlen);
// The block from the programs' --normalization, --mlp, --ffn-hidden and --disable-bias-linear on
// cfg (its C set): ffn_hidden 0 is 4C, or gpt_swiglu_default_hidden under SwiGLU; GPT's 4C is
// stored as 0, so that such a model file stays llm.c's.
void gpt_block_apply(GPTConfig* cfg, int norm, int mlp, int ffn_hidden, int no_linear_bias);
// Whether two shapes have the same block: norm and its epsilon, MLP and its hidden width, linear
// biases (the qkv projection's too), the classifier tied or not, and QK-norm.
int gpt_same_block(const GPTConfig* a, const GPTConfig* b);
// The scaling's name (none, linear, yarn, llama3), or NULL for an unknown number; and the number
// of a name, or -1.
const char* rope_scaling_name(int scaling);
int rope_scaling_parse(const char* name);
// --context on a model file's shape (0: keep it): a rotary model may take another (no parameter
// depends on it), a learned table has max_T rows. Returns 0, or -1 with "--context N: MODEL has
// context T (learned positions: ...)" in err, MODEL naming the file ("the model file m.bin").
int gpt_context_apply(GPTConfig* cfg, int context, const char* model, char* err, size_t errlen);
// Context extension's scaling, as the programs' --rope-scaling, --rope-scaling-factor and
// --rope-original-context give it, on cfg (whose max_T and rope_theta are this run's): scaling
// NULL keeps cfg's (factor and original must then be 0), "none" removes it, linear, yarn or
// llama3 set it with the factor (0: max_T / the original context) and the original context (0:
// file's context, or its own original one when it is already scaled; file NULL: none, an error).
// Returns 0, or -1 with a one-line reason naming the flags in err.
int gpt_rope_scaling_apply(GPTConfig* cfg, const GPTConfig* file, const char* scaling,
                           double factor, int original, char* err, size_t errlen);
// Checks the rotary scaling fields (rope_scaling, rope_factor, rope_original_T); returns 0, or -1
// with a one-line reason in err.
int gpt_rope_scaling_validate(const GPTConfig* cfg, char* err, size_t errlen);
// Checks a shape; returns 0, or -1 with a one-line reason in err.
int gpt_config_validate(const GPTConfig* cfg, char* err, size_t errlen);

// The parameter tensors of a configuration, in llm.c's file order, then the untied classifier and
// the QK-norm weights (model/gpt.h points them into one buffer): element counts of the 21
// tensors, their names ("wte", ...), and whether AdamW decays them (the 2-D matrices, the
// embeddings and the classifier).
enum { NUM_PARAM_TENSORS = 21 };
void gpt_param_sizes(const GPTConfig* cfg, size_t sizes[NUM_PARAM_TENSORS]);
const char* gpt_param_name(int tensor);
int gpt_param_decays(int tensor);
size_t gpt_num_params(const GPTConfig* cfg);

#ifdef __cplusplus
}
#endif
