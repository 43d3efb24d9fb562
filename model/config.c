#include "model/config.h"

#include <stdio.h>
#include <string.h>

typedef struct {
    const char* name;
    int L, C, NH, max_T;
} Preset;

// GPT-3 paper (Brown et al. 2020, table 2.1) shapes. The paper's table is inconsistent for two
// rows: 1.3B lists d_model 2048 with 24 heads of 128 (= 3072), and 13B lists d_model 5140 with
// 40 heads of 128 (= 5120). We keep the widths and the 128-channel heads that the parameter
// counts imply: gpt3-1.3b = 16 heads of 128, gpt3-13b = C 5120 (40 heads of 128).
static const Preset presets[] = {
    {"gpt3-125m", 12, 768, 12, 2048},
    {"gpt3-350m", 24, 1024, 16, 2048},
    {"gpt3-760m", 24, 1536, 16, 2048},
    {"gpt3-1.3b", 24, 2048, 16, 2048},
    {"gpt3-2.7b", 32, 2560, 32, 2048},
    {"gpt3-6.7b", 32, 4096, 32, 2048},
    {"gpt3-13b", 40, 5120, 40, 2048},
    {"gpt3-175b", 96, 12288, 96, 2048},
    // llm.c's GPT-2 presets (d = depth): 124M, 350M, 774M, 1558M.
    {"d12", 12, 768, 12, 1024},
    {"d24", 24, 1024, 16, 1024},
    {"d36", 36, 1280, 20, 1024},
    {"d48", 48, 1600, 25, 1024},
    // Small shapes for tests and for training on two CPU cores.
    {"tiny", 2, 64, 4, 256},
    {"small", 4, 128, 4, 256},
};

int gpt_padded_vocab(int V) { return (V + 127) / 128 * 128; }

int gpt_config_preset(const char* name, int max_T, int V, GPTConfig* cfg) {
    for (size_t i = 0; i < sizeof presets / sizeof presets[0]; i++) {
        if (strcmp(presets[i].name, name) != 0) continue;
        cfg->L = presets[i].L;
        cfg->C = presets[i].C;
        cfg->NH = presets[i].NH;
        cfg->max_T = max_T > 0 ? max_T : presets[i].max_T;
        cfg->V = V > 0 ? V : GPT2_VOCAB;
        cfg->Vp = gpt_padded_vocab(cfg->V);
        cfg->window = cfg->window_every = 0;   // the presets are causal in every layer
        cfg->kv_heads = 0;                     // and have one key/value head per query head
        return 0;
    }
    return -1;
}

const char* gpt_config_preset_names(void) {
    return "gpt3-125m, gpt3-350m, gpt3-760m, gpt3-1.3b, gpt3-2.7b, gpt3-6.7b, gpt3-13b, "
           "gpt3-175b, d12, d24, d36, d48, tiny, small";
}

double gpt_flops_per_token(const GPTConfig* c, double num_params, long T) {
    double pairs = 0;   // visible (query, key) pairs per query, summed over the layers
    for (int l = 0; l < c->L; l++) {
        const double W = (double)gpt_layer_window(c, l);
        pairs += W > 0 && W < T ? W - W * W / (2.0 * T) : T / 2.0;
    }
    // An untied model's wte is only looked up: its classifier's matmul is counted once, through
    // the classifier's parameters, as a tied model's is through wte's.
    const double lookup_only = c->untied_classifier ? (double)c->Vp * c->C : 0;
    return 6.0 * (num_params - lookup_only) + 12.0 * c->C * pairs;
}

void gpt_window_text(const GPTConfig* c, char* buf, size_t n) {
    if (!c->window) snprintf(buf, n, "no attention window");
    else if (c->window_every == 1) snprintf(buf, n, "attention window %d in every layer", c->window);
    else snprintf(buf, n, "attention window %d in layers l %% %d = 0", c->window, c->window_every);
}

void gpt_position_text(const GPTConfig* c, char* buf, size_t n) {
    if (c->rope_theta > 0 && c->rope_scaling)
        snprintf(buf, n, "rotary positions (theta %d, %s x%g from %d)", c->rope_theta,
                 rope_scaling_name(c->rope_scaling), c->rope_factor, c->rope_original_T);
    else if (c->rope_theta > 0) snprintf(buf, n, "rotary positions (theta %d)", c->rope_theta);
    else snprintf(buf, n, "learned positions");
}

static const char* const rope_scaling_names[] = {"none", "linear", "yarn", "llama3"};

static const char* const norm_names[] = {"layernorm", "rmsnorm"};
static const char* const mlp_names[] = {"gelu", "swiglu"};

const char* gpt_norm_name(int norm) { return norm >= 0 && norm <= 1 ? norm_names[norm] : NULL; }
const char* gpt_mlp_name(int mlp) { return mlp >= 0 && mlp <= 1 ? mlp_names[mlp] : NULL; }

int gpt_norm_parse(const char* name) {
    for (int i = 0; i <= 1; i++)
        if (strcmp(name, norm_names[i]) == 0) return i;
    return -1;
}

int gpt_mlp_parse(const char* name) {
    for (int i = 0; i <= 1; i++)
        if (strcmp(name, mlp_names[i]) == 0) return i;
    return -1;
}

void gpt_block_text(const GPTConfig* c, char* buf, size_t n) {
    const int F = gpt_ffn_hidden(c);
    char hidden[32];
    if (F == 4 * c->C) snprintf(hidden, sizeof hidden, "4C");
    else snprintf(hidden, sizeof hidden, "%d", F);
    char eps[32] = "";
    if (c->norm_eps > 0) snprintf(eps, sizeof eps, " (eps %g)", c->norm_eps);
    snprintf(buf, n, "%s%s, %s MLP of %s%s%s%s%s",
             c->norm == GPT_NORM_RMSNORM ? "RMSNorm" : "LayerNorm", eps,
             c->mlp == GPT_MLP_SWIGLU ? "SwiGLU" : "GELU", c->mlp == GPT_MLP_SWIGLU ? "2 x " : "",
             hidden, !c->no_linear_bias ? "" : c->qkv_bias ? ", linear biases in qkv only"
                                                            : ", no linear biases",
             c->untied_classifier ? ", untied classifier" : "", c->qk_norm ? ", QK-norm" : "");
}

int gpt_norm_eps_apply(GPTConfig* c, double eps, const char* name, char* err, size_t errlen) {
    if (!(eps > 0 && eps <= 0.1) || (float)eps == 0) {
        snprintf(err, errlen, "%s: expected a number in (0, 0.1] (an fp32 above 0), found %g", name,
                 eps);
        return -1;
    }
    // The default is stored as 0, so that a model file with it stays llm.c's.
    c->norm_eps = eps == GPT_NORM_EPS_DEFAULT ? 0 : (float)eps;
    return 0;
}

int gpt_block_extras_validate(float norm_eps, int no_linear_bias, int qkv_bias, char* err,
                              size_t errlen) {
    if (norm_eps != 0 && !(norm_eps > 0 && norm_eps <= 0.1f)) {
        snprintf(err, errlen, "norm epsilon: expected 0 (1e-5) or a number in (0, 0.1], found %g",
                 norm_eps);
        return -1;
    }
    if (qkv_bias != 0 && (qkv_bias != 1 || no_linear_bias != 1)) {
        snprintf(err, errlen, "qkv bias: expected 0, or 1 with no other linear biases, found %d "
                 "(linear biases %s)", qkv_bias, no_linear_bias ? "off" : "on");
        return -1;
    }
    return 0;
}

void gpt_block_apply(GPTConfig* c, int norm, int mlp, int ffn_hidden, int no_linear_bias) {
    c->norm = norm;
    c->mlp = mlp;
    c->no_linear_bias = no_linear_bias;
    int F = ffn_hidden;
    if (F == 0 && mlp == GPT_MLP_SWIGLU) F = gpt_swiglu_default_hidden(c->C);
    c->ffn_hidden = F == 4 * c->C ? 0 : F;
}

int gpt_same_block(const GPTConfig* a, const GPTConfig* b) {
    return a->norm == b->norm && a->mlp == b->mlp && gpt_ffn_hidden(a) == gpt_ffn_hidden(b) &&
           a->no_linear_bias == b->no_linear_bias && a->untied_classifier == b->untied_classifier &&
           a->qkv_bias == b->qkv_bias && gpt_norm_eps(a) == gpt_norm_eps(b) &&
           a->qk_norm == b->qk_norm;
}

const char* rope_scaling_name(int scaling) {
    return scaling >= 0 && scaling <= ROPE_SCALING_LLAMA3 ? rope_scaling_names[scaling] : NULL;
}

int rope_scaling_parse(const char* name) {
    for (int i = 0; i <= ROPE_SCALING_LLAMA3; i++)
        if (!strcmp(name, rope_scaling_names[i])) return i;
    return -1;
}

int gpt_context_apply(GPTConfig* c, int context, const char* model, char* err, size_t errlen) {
    if (context && context != c->max_T && !c->rope_theta) {
        snprintf(err, errlen, "--context %d: %s has context %d (learned positions: a table of "
                 "that many rows)", context, model, c->max_T);
        return -1;
    }
    if (context) c->max_T = context;
    return 0;
}

int gpt_rope_scaling_apply(GPTConfig* c, const GPTConfig* file, const char* scaling,
                           double factor, int original, char* err, size_t errlen) {
    const int s = scaling ? rope_scaling_parse(scaling) : -1;
    if (scaling && s < 0) {
        snprintf(err, errlen, "--rope-scaling: expected none, linear, yarn or llama3, found '%s'",
                 scaling);
        return -1;
    }
    if (s <= ROPE_SCALING_NONE) {   // not given, or none
        if (factor > 0 || original > 0) {
            snprintf(err, errlen, "--rope-scaling-factor/--rope-original-context: expected "
                     "--rope-scaling linear, yarn or llama3 with them, found %s",
                     scaling ? "none" : "no --rope-scaling");
            return -1;
        }
        if (s == ROPE_SCALING_NONE) c->rope_scaling = 0, c->rope_factor = 0, c->rope_original_T = 0;
        return 0;
    }
    if (!c->rope_theta) {
        snprintf(err, errlen, "--rope-scaling %s: expected rotary positions (--position-embedding "
                 "rope, or a model file with them), found learned positions", scaling);
        return -1;
    }
    if (!original && file) original = file->rope_scaling ? file->rope_original_T : file->max_T;
    if (!original) {
        snprintf(err, errlen, "--rope-scaling %s: expected --rope-original-context (the context the "
                 "frequencies were trained at) without a model file, found none", scaling);
        return -1;
    }
    const int default_factor = factor == 0;
    if (default_factor) factor = (double)c->max_T / original;
    if (factor < 1) {
        snprintf(err, errlen, "--rope-scaling %s: expected a factor of at least 1, found %g (%s)",
                 scaling, factor, default_factor ? "the context / the original context"
                                                 : "--rope-scaling-factor");
        return -1;
    }
    c->rope_scaling = s;
    c->rope_factor = (float)factor;
    c->rope_original_T = original;
    if (gpt_rope_scaling_validate(c, err, errlen) == 0) return 0;
    char why[200];
    snprintf(why, sizeof why, "%s", err);
    snprintf(err, errlen, "--rope-scaling/--rope-scaling-factor/--rope-original-context: %s", why);
    return -1;
}

int gpt_rope_scaling_validate(const GPTConfig* c, char* err, size_t errlen) {
    if (c->rope_scaling != ROPE_SCALING_NONE && (!rope_scaling_name(c->rope_scaling) ||
                                                 !c->rope_theta)) {
        snprintf(err, errlen, "rope scaling: expected 0 (none)%s, found %d",
                 c->rope_theta ? " to 3 (llama3)" : " without rotary positions", c->rope_scaling);
        return -1;
    }
    if (c->rope_scaling != ROPE_SCALING_NONE &&
        (!(c->rope_factor >= 1 && c->rope_factor <= 65536) || c->rope_original_T < 1)) {
        snprintf(err, errlen, "rope scaling %s: expected a factor in [1, 65536] and an original "
                 "context of at least 1, found factor %g, original context %d",
                 rope_scaling_name(c->rope_scaling), c->rope_factor, c->rope_original_T);
        return -1;
    }
    if (c->rope_scaling == ROPE_SCALING_NONE && (c->rope_factor != 0 || c->rope_original_T != 0)) {
        snprintf(err, errlen, "rope scaling none: expected factor and original context 0, found "
                 "%g and %d", c->rope_factor, c->rope_original_T);
        return -1;
    }
    return 0;
}

int gpt_config_validate(const GPTConfig* c, char* err, size_t errlen) {
    if (c->L < 1 || c->C < 1 || c->NH < 1 || c->max_T < 1 || c->V < 2) {
        snprintf(err, errlen, "model shape: expected positive layers, channels, heads, context "
                 "and vocabulary, found L=%d C=%d NH=%d T=%d V=%d",
                 c->L, c->C, c->NH, c->max_T, c->V);
        return -1;
    }
    if (c->C % c->NH != 0) {
        snprintf(err, errlen, "model shape: channels %d must be a multiple of heads %d",
                 c->C, c->NH);
        return -1;
    }
    if (c->Vp < c->V) {
        snprintf(err, errlen, "model shape: padded vocabulary %d smaller than vocabulary %d",
                 c->Vp, c->V);
        return -1;
    }
    if (c->window < 0 || c->window > c->max_T) {
        snprintf(err, errlen, "attention window: expected 0 (none) to the context %d, found %d",
                 c->max_T, c->window);
        return -1;
    }
    if (c->kv_heads < 0 || c->kv_heads > c->NH || (c->kv_heads > 0 && c->NH % c->kv_heads != 0)) {
        snprintf(err, errlen, "key/value heads: expected a divisor of the %d heads (0: one per "
                 "head), found %d", c->NH, c->kv_heads);
        return -1;
    }
    if (c->rope_theta < 0 || c->rope_theta == 1) {
        snprintf(err, errlen, "rope theta: expected 0 (learned positions) or at least 2, found %d",
                 c->rope_theta);
        return -1;
    }
    if (c->rope_theta > 0 && (c->C / c->NH) % 2 != 0) {
        snprintf(err, errlen, "rotary positions: expected an even head size, found %d (channels "
                 "%d over %d heads)", c->C / c->NH, c->C, c->NH);
        return -1;
    }
    if (gpt_rope_scaling_validate(c, err, errlen) != 0) return -1;
    if (!gpt_norm_name(c->norm) || !gpt_mlp_name(c->mlp)) {
        snprintf(err, errlen, "block: expected norm 0 (layernorm) or 1 (rmsnorm) and mlp 0 (gelu) "
                 "or 1 (swiglu), found norm %d, mlp %d", c->norm, c->mlp);
        return -1;
    }
    if (c->no_linear_bias != 0 && c->no_linear_bias != 1) {
        snprintf(err, errlen, "linear biases: expected 0 (biases) or 1 (none), found %d",
                 c->no_linear_bias);
        return -1;
    }
    if (c->untied_classifier != 0 && c->untied_classifier != 1) {
        snprintf(err, errlen, "classifier: expected 0 (tied to wte) or 1 (untied), found %d",
                 c->untied_classifier);
        return -1;
    }
    if (gpt_block_extras_validate(c->norm_eps, c->no_linear_bias, c->qkv_bias, err, errlen) != 0)
        return -1;
    if (c->qk_norm != 0 && c->qk_norm != 1) {
        snprintf(err, errlen, "QK-norm: expected 0 (none) or 1, found %d", c->qk_norm);
        return -1;
    }
    if (c->ffn_hidden < 0 || c->ffn_hidden > (1 << 24)) {
        snprintf(err, errlen, "MLP hidden width: expected 0 (4C) to 16777216, found %d",
                 c->ffn_hidden);
        return -1;
    }
    if (c->window > 0 ? c->window_every < 1 || c->window_every > c->L : c->window_every != 0) {
        snprintf(err, errlen, "window every: expected %s, found %d",
                 c->window > 0 ? "1 to the layer count" : "0 without a window", c->window_every);
        return -1;
    }
    return 0;
}

// --- The parameter tensors a configuration implies -------------------------------------------

static const char* const param_names[NUM_PARAM_TENSORS] = {
    "wte", "wpe", "ln1w", "ln1b", "qkvw", "qkvb", "attprojw", "attprojb",
    "ln2w", "ln2b", "fcw", "fcb", "fcprojw", "fcprojb", "lnfw", "lnfb", "classifier",
    "qnormw", "qnormb", "knormw", "knormb"};

void gpt_param_sizes(const GPTConfig* c, size_t s[NUM_PARAM_TENSORS]) {
    const size_t L = c->L, C = c->C, W = gpt_qkv_width(c);   // W = 3C without GQA
    const size_t F = gpt_ffn_hidden(c), FC = gpt_fc_width(c);  // 4C, 4C in GPT; F, 2F: SwiGLU
    const size_t NB = gpt_norm_bias(c);                       // C; 0 under RMSNorm
    const size_t LB = gpt_linear_bias(c);                     // 1; 0 without linear biases
    const size_t QB = gpt_qkv_bias(c);                        // LB, or 1 under qkv_bias
    s[0] = (size_t)c->Vp * C;
    s[1] = (size_t)gpt_position_rows(c) * C;   // 0 rows under rotary embeddings
    s[2] = L * C;
    s[3] = L * NB;
    s[4] = L * W * C;
    s[5] = L * W * QB;
    s[6] = L * C * C;
    s[7] = L * C * LB;
    s[8] = L * C;
    s[9] = L * NB;
    s[10] = L * FC * C;
    s[11] = L * FC * LB;
    s[12] = L * C * F;
    s[13] = L * C * LB;
    s[14] = C;
    s[15] = NB;
    s[16] = c->untied_classifier ? (size_t)c->Vp * C : 0;
    s[17] = L * gpt_qk_norm_weight(c);
    s[18] = L * gpt_qk_norm_bias(c);
    s[19] = L * gpt_qk_norm_weight(c);
    s[20] = L * gpt_qk_norm_bias(c);
}

const char* gpt_param_name(int tensor) { return param_names[tensor]; }

int gpt_param_decays(int tensor) {
    return tensor == 0 || tensor == 1 || tensor == 4 || tensor == 6 || tensor == 10 ||
           tensor == 12 || tensor == 16;
}

size_t gpt_num_params(const GPTConfig* cfg) {
    size_t s[NUM_PARAM_TENSORS], n = 0;
    gpt_param_sizes(cfg, s);
    for (int i = 0; i < NUM_PARAM_TENSORS; i++) n += s[i];
    return n;
}
