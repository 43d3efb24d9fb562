#include "checkpoints/hf_llama_config.h"

#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "checkpoints/json_read.h"
#include "comm/fail.h"
#include "model/gpt.h"

// A string value made printable on one line, whatever the file holds.
static void printable(char* s) {
    for (; *s; s++)
        if ((unsigned char)*s < 0x20 || *s == 0x7f) *s = '?';
}

// null, or what read reads (json_count, json_number): *given 0 for null.
static int null_or_count(JsonCursor* c, unsigned long long* out, int* given) {
    const char* at = c->p;
    int flag;
    if (json_literal(c, &flag) == 0 && flag == -1) return *given = 0, 0;
    c->p = at, c->err[0] = 0, *given = 1;
    return json_count(c, 1u << 30, out);
}

static int null_or_number(JsonCursor* c, double* out, int* given) {
    const char* at = c->p;
    int flag;
    if (json_literal(c, &flag) == 0 && flag == -1) return *given = 0, 0;
    c->p = at, c->err[0] = 0, *given = 1;
    return json_number(c, out);
}

// rope_scaling (or transformers' newer rope_parameters, which also holds rope_theta) as read.
typedef struct {
    int given;                  // an object, not null or absent
    char type[32];              // rope_type or type; "" when neither
    double factor, attention_factor, theta;
    int has_factor, has_attention_factor, has_theta, has_low, has_high, has_original;
    unsigned long long original;   // original_max_position_embeddings
} Rope;

// The object at c into *r; the values this model fixes (Llama 3.1's frequency factors, YaRN's
// betas) checked here. Returns 0, or -1 with err set (the JSON's errors too).
static int read_rope(JsonCursor* c, const char* path, const char* name, Rope* r, char* err,
                     size_t errlen) {
    char key[64];
    int more = json_object_begin(c), given;
    while (more == 0 && (more = json_object_next(c, key, sizeof key)) == 1) {
        double v = 0;
        if (!strcmp(key, "rope_type") || !strcmp(key, "type")) {
            char s[32];
            more = json_string(c, s, sizeof s);
            if (more != 0) break;
            printable(s);
            if (r->type[0] && strcmp(r->type, s))
                return set_err(err, errlen, "%s: %s: expected rope_type and type to agree, found "
                               "\"%s\" and \"%s\"", path, name, r->type, s);
            snprintf(r->type, sizeof r->type, "%s", s);
        } else if (!strcmp(key, "factor")) {
            more = null_or_number(c, &r->factor, &r->has_factor);
        } else if (!strcmp(key, "original_max_position_embeddings")) {
            more = null_or_count(c, &r->original, &r->has_original);
        } else if (!strcmp(key, "attention_factor")) {
            more = null_or_number(c, &r->attention_factor, &r->has_attention_factor);
        } else if (!strcmp(key, "rope_theta")) {
            more = json_number(c, &r->theta);
            r->has_theta = 1;
        } else if (!strcmp(key, "low_freq_factor") || !strcmp(key, "high_freq_factor") ||
                   !strcmp(key, "beta_fast") || !strcmp(key, "beta_slow")) {
            // Llama 3.1's band edges and YaRN's rotation counts are this model's fixed ones.
            const double want = !strcmp(key, "low_freq_factor") ? 1 : !strcmp(key, "high_freq_factor")
                              ? 4 : !strcmp(key, "beta_fast") ? 32 : 1;
            more = null_or_number(c, &v, &given);
            if (more == 0 && given && v != want)
                return set_err(err, errlen, "%s: %s: %s: expected %g (this model's fixed value), "
                               "found %g", path, name, key, want, v);
            if (!strcmp(key, "low_freq_factor")) r->has_low = given;
            if (!strcmp(key, "high_freq_factor")) r->has_high = given;
        } else if (!strcmp(key, "truncate")) {
            int flag;
            more = json_literal(c, &flag);
            if (more == 0 && flag == 0)
                return set_err(err, errlen, "%s: %s: truncate: expected true (YaRN's band edges "
                               "rounded outwards, as this model's), found false", path, name);
        } else {
            // mscale, mscale_all_dim (DeepSeek's YaRN amplitude), longrope's factor lists, ...
            char k[64];
            snprintf(k, sizeof k, "%s", key);
            printable(k);
            return set_err(err, errlen, "%s: %s: expected only rope_type, factor, "
                           "original_max_position_embeddings, low_freq_factor, high_freq_factor, "
                           "beta_fast, beta_slow, attention_factor and truncate, found \"%s\"",
                           path, name, k);
        }
    }
    if (more < 0) return set_err(err, errlen, "%s: %s", path, c->err);
    r->given = 1;
    return 0;
}

// The rotary scaling of *r on cfg (max_T and rope_theta set). Returns 0 or -1 with err set.
static int apply_rope(const Rope* r, const char* path, const char* name, GPTConfig* cfg, char* err,
                      size_t errlen) {
    if (!r->given || !strcmp(r->type, "default")) return 0;
    if (!r->type[0])
        return set_err(err, errlen, "%s: %s: expected a rope_type (or type), found none", path, name);
    const int kind = rope_scaling_parse(r->type);
    if (kind <= ROPE_SCALING_NONE)
        return set_err(err, errlen, "%s: %s: rope_type: expected \"default\", \"linear\", \"yarn\" "
                       "or \"llama3\", found \"%s\"", path, name, r->type);
    if (!r->has_factor)
        return set_err(err, errlen, "%s: %s: expected a factor with rope_type %s, found none", path,
                       name, r->type);
    if (!(r->factor >= 1 && r->factor <= 65536))
        return set_err(err, errlen, "%s: %s: factor: expected a number from 1 to 65536, found %g",
                       path, name, r->factor);
    const float factor = (float)r->factor;
    if ((double)factor != r->factor)
        return set_err(err, errlen, "%s: %s: factor: expected an fp32 number (the model file keeps "
                       "one), found %.17g", path, name, r->factor);
    unsigned long long original = r->original;
    if (kind == ROPE_SCALING_LLAMA3 && (!r->has_original || !r->has_low || !r->has_high))
        return set_err(err, errlen, "%s: %s: expected original_max_position_embeddings, "
                       "low_freq_factor and high_freq_factor with rope_type llama3, found %s "
                       "missing", path, name, !r->has_original ? "original_max_position_embeddings"
                       : !r->has_low ? "low_freq_factor" : "high_freq_factor");
    // YaRN without it reads max_position_embeddings, as transformers does; linear scaling does not
    // depend on it: the context the factor extends, as the trainer's default factor implies.
    if (!r->has_original)
        original = kind == ROPE_SCALING_YARN ? (unsigned long long)cfg->max_T
                 : (unsigned long long)fmax(1.0, round(cfg->max_T / r->factor));
    if (original < 1)
        return set_err(err, errlen, "%s: %s: original_max_position_embeddings: expected at least 1, "
                       "found 0", path, name);
    const double amplitude = kind == ROPE_SCALING_YARN && r->factor > 1 ? 0.1 * log(r->factor) + 1 : 1;
    if (r->has_attention_factor && fabs(r->attention_factor - amplitude) > 1e-6 * amplitude)
        return set_err(err, errlen, "%s: %s: attention_factor: expected %.9g (%s), found %g", path,
                       name, amplitude, kind == ROPE_SCALING_YARN ? "YaRN's 0.1 ln(factor) + 1"
                       : "none with this rope_type", r->attention_factor);
    cfg->rope_scaling = kind;
    cfg->rope_factor = factor;
    cfg->rope_original_T = (int)original;
    return 0;
}

void hf_llama_bias_text(const HfLlamaForm* f, char* buf, size_t n) {
    if (f->qwen2) snprintf(buf, n, "Qwen2's biases in q_proj, k_proj, v_proj only");
    else if (f->qwen3)
        snprintf(buf, n, "Qwen3's q_norm and k_norm, config.json's attention_bias %s, no MLP "
                 "biases", f->attention_bias ? "true" : "false");
    else snprintf(buf, n, "config.json's attention_bias %s, mlp_bias %s",
                  f->attention_bias ? "true" : "false", f->mlp_bias ? "true" : "false");
}

int hf_llama_config(const char* text, const char* path, GPTConfig* cfg, HfLlamaForm* form,
                    char* err, size_t errlen) {
    JsonCursor c;
    json_init(&c, text);
    unsigned long long C = 0, L = 0, NH = 0, KV = 0, T = 0, V = 0, F = 0, HD = 0;
    unsigned long long window = 4096;   // MistralConfig's default sliding_window
    double eps = 1e-6, theta = 10000;   // LlamaConfig's (and MistralConfig's, Qwen2Config's)
    int has_theta = 0, has_kv = 0, has_hd = 0, has_window = 1, flag;
    int sliding = 0;   // Qwen2's use_sliding_window
    Rope rope = {0};
    const char* rope_key = "rope_scaling";
    *form = (HfLlamaForm){0, 0, 0, 0, 0, 0};   // LlamaConfig's: no biases, untied
    char key[64], str[64];
    int more = json_object_begin(&c);
    while (more == 0 && (more = json_object_next(&c, key, sizeof key)) == 1) {
        unsigned long long* count = !strcmp(key, "hidden_size") ? &C
            : !strcmp(key, "num_hidden_layers") ? &L : !strcmp(key, "num_attention_heads") ? &NH
            : !strcmp(key, "max_position_embeddings") ? &T : !strcmp(key, "vocab_size") ? &V
            : !strcmp(key, "intermediate_size") ? &F : NULL;
        int* flag_of = !strcmp(key, "attention_bias") ? &form->attention_bias
            : !strcmp(key, "mlp_bias") ? &form->mlp_bias
            : !strcmp(key, "tie_word_embeddings") ? &form->tied : NULL;
        if (count) {
            more = json_count(&c, 1u << 30, count);
        } else if (!strcmp(key, "num_key_value_heads")) {
            more = null_or_count(&c, &KV, &has_kv);
        } else if (!strcmp(key, "head_dim")) {
            more = null_or_count(&c, &HD, &has_hd);
        } else if (!strcmp(key, "sliding_window")) {   // Mistral's (null: none)
            more = null_or_count(&c, &window, &has_window);
        } else if (!strcmp(key, "use_sliding_window")) {   // Qwen2's (false: no window)
            more = json_literal(&c, &flag);
            sliding = more == 0 && flag == 1;
        } else if (flag_of) {
            more = json_literal(&c, &flag);
            if (more == 0 && flag < 0)
                return set_err(err, errlen, "%s: %s: expected true or false, found null", path, key);
            *flag_of = flag;
        } else if (!strcmp(key, "model_type") || !strcmp(key, "hidden_act")) {
            more = json_string(&c, str, sizeof str);
            if (more != 0) break;
            printable(str);
            const int type = !strcmp(key, "model_type");
            if (type)
                form->mistral = !strcmp(str, "mistral"), form->qwen2 = !strcmp(str, "qwen2"),
                form->qwen3 = !strcmp(str, "qwen3");
            if (type ? strcmp(str, "llama") && !form->mistral && !form->qwen2 && !form->qwen3
                     : strcmp(str, "silu") != 0)
                return set_err(err, errlen, "%s: %s: expected %s, found \"%s\"", path, key,
                               type ? "\"llama\", \"mistral\", \"qwen2\" or \"qwen3\""
                                    : "\"silu\" (SwiGLU's gate)", str);
        } else if (!strcmp(key, "rms_norm_eps")) {
            more = json_number(&c, &eps);   // absent: transformers' default 1e-6
        } else if (!strcmp(key, "rope_theta")) {
            more = json_number(&c, &theta);
            has_theta = 1;
        } else if (!strcmp(key, "rope_scaling") || !strcmp(key, "rope_parameters")) {
            const char* at = c.p;
            if (json_literal(&c, &flag) == 0 && flag == -1) {   // null: none
                more = 0;
                continue;
            }
            c.p = at, c.err[0] = 0;
            rope_key = !strcmp(key, "rope_scaling") ? "rope_scaling" : "rope_parameters";
            if (rope.given)
                return set_err(err, errlen, "%s: rope_parameters: expected it or rope_scaling, "
                               "found both", path);
            if (read_rope(&c, path, rope_key, &rope, err, errlen) != 0) return -1;
            more = 0;
        } else {
            more = json_skip(&c);
        }
    }
    if (more < 0 || json_end(&c) != 0) return set_err(err, errlen, "%s: %s", path, c.err);
    const char* missing = !C ? "hidden_size" : !L ? "num_hidden_layers" : !NH ? "num_attention_heads"
                        : !T ? "max_position_embeddings" : !V ? "vocab_size"
                        : !F ? "intermediate_size" : NULL;
    if (missing) return set_err(err, errlen, "%s: expected a positive %s, found none", path, missing);
    if (has_kv && (KV == 0 || KV > NH))
        return set_err(err, errlen, "%s: num_key_value_heads: expected a divisor of "
                       "num_attention_heads = %llu, found %llu", path, NH, KV);
    if ((form->qwen2 || form->qwen3) && sliding)
        return set_err(err, errlen, "%s: use_sliding_window: expected false (%s's windows cover "
                       "the layers from max_window_layers on, which --window-every cannot "
                       "express), found true", path, form->qwen2 ? "Qwen2" : "Qwen3");
    if (rope.has_theta) {
        if (has_theta && theta != rope.theta)
            return set_err(err, errlen, "%s: rope_theta: expected %s's rope_theta %g, found %g",
                           path, rope_key, rope.theta, theta);
        theta = rope.theta;
    }
    if (!(theta >= 2 && theta <= INT_MAX) || theta != floor(theta))
        return set_err(err, errlen, "%s: rope_theta: expected a whole number from 2 to %d (the "
                       "model file keeps an integer), found %g", path, INT_MAX, theta);
    // MistralAttention and MistralMLP have no biases, Qwen2's q_proj, k_proj and v_proj theirs
    // and nothing else, whatever config.json says.
    if (form->mistral || form->qwen2) form->attention_bias = form->mlp_bias = 0;
    if (form->qwen3) form->mlp_bias = 0;   // Qwen3MLP has none; its attention per attention_bias
    if (form->mistral && has_window && (window == 0 || window > INT_MAX))
        return set_err(err, errlen, "%s: sliding_window: expected null or 1 to %d, found %llu", path,
                       INT_MAX, window);
    *cfg = (GPTConfig){.max_T = (int)T, .V = (int)V, .Vp = gpt_padded_vocab((int)V), .L = (int)L,
                       .NH = (int)NH, .C = (int)C, .rope_theta = (int)theta,
                       .kv_heads = has_kv && KV != NH ? (int)KV : 0};
    if (form->mistral && has_window && window < T) {   // every layer, a query seeing q - W < k <= q;
        cfg->window = (int)window;                       // a window of the context or more bounds
        cfg->window_every = 1;                           // nothing: causal attention
    }
    // Neither kind of bias: a model without linear biases (Llama's own); one kind: the other's
    // biases read as zeros.
    gpt_block_apply(cfg, GPT_NORM_RMSNORM, GPT_MLP_SWIGLU, (int)F,
                    !form->attention_bias && !form->mlp_bias);
    cfg->qkv_bias = form->qwen2;
    cfg->qk_norm = form->qwen3;
    cfg->untied_classifier = !form->tied;
    char why[ERR_LEN];
    if (gpt_norm_eps_apply(cfg, eps, "rms_norm_eps", why, sizeof why) != 0)
        return set_err(err, errlen, "%s: %s", path, why);
    if (gpt_config_validate(cfg, why, sizeof why) != 0)
        return set_err(err, errlen, "%s: %s", path, why);
    if (has_hd && HD != C / NH)
        return set_err(err, errlen, "%s: head_dim: expected hidden_size / num_attention_heads = %llu, "
                       "found %llu", path, C / NH, HD);
    if (apply_rope(&rope, path, rope_key, cfg, err, errlen) != 0) return -1;
    if (gpt_config_validate(cfg, why, sizeof why) != 0)
        return set_err(err, errlen, "%s: %s", path, why);
    return 0;
}
