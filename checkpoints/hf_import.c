#include "checkpoints/hf_import.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "checkpoints/hf_layout.h"
#include "checkpoints/hf_llama_config.h"
#include "checkpoints/json_read.h"
#include "checkpoints/safetensors.h"
#include "comm/fail.h"
#include "model/gpt.h"

enum { MAX_CONFIG = 1 << 20 };

// The whole of a small text file, NUL-terminated; NULL with err set.
static char* read_text(const char* path, size_t max, char* err, size_t errlen) {
    FILE* f = fopen(path, "rb");
    if (!f) return set_err(err, errlen, "%s: cannot open: %s", path, strerror(errno)), NULL;
    char* text = malloc(max + 1);
    const size_t n = text ? fread(text, 1, max + 1, f) : 0;
    fclose(f);
    if (!text || n > max) {
        free(text);
        return set_err(err, errlen, "%s: expected at most %zu bytes", path, max), NULL;
    }
    text[n] = 0;
    if (strlen(text) != n) {
        free(text);
        return set_err(err, errlen, "%s: expected JSON text, found a NUL byte", path), NULL;
    }
    return text;
}

// What config.json says of the file's tensors besides the shape.
typedef struct {
    int llama;       // model_type "llama", "mistral", "qwen2" or "qwen3": Llama's names (hf_layout_llama)
    HfLlamaForm l;   // its biases and tie_word_embeddings
} HfForm;

// A GPT-2 config.json (text): the sizes, and every setting this model cannot follow refused.
static int read_gpt2_config(const char* text, const char* path, GPTConfig* cfg, char* err,
                            size_t errlen) {
    JsonCursor c;
    json_init(&c, text);
    unsigned long long C = 0, L = 0, NH = 0, T = 0, ctx = 0, V = 0, inner = 0;
    int more = json_object_begin(&c), flag, rc = 0, tied = 1;   // GPT2Config's default: tied
    double eps = 1e-5;                                           // and layer_norm_epsilon's
    char key[64], str[64] = "";
    while (rc == 0 && more == 0 && (more = json_object_next(&c, key, sizeof key)) == 1) {
        unsigned long long* count = !strcmp(key, "n_embd") ? &C : !strcmp(key, "n_layer") ? &L
            : !strcmp(key, "n_head") ? &NH : !strcmp(key, "n_positions") ? &T
            : !strcmp(key, "n_ctx") ? &ctx : !strcmp(key, "vocab_size") ? &V : NULL;
        if (count) {
            more = json_count(&c, 1u << 30, count);
        } else if (!strcmp(key, "model_type") || !strcmp(key, "activation_function")) {
            more = json_string(&c, str, sizeof str);
            for (char* q = str; *q; q++)   // printed below: one line, whatever the file holds
                if ((unsigned char)*q < 0x20 || *q == 0x7f) *q = '?';
            if (more == 0 && !strcmp(key, "model_type") && strcmp(str, "gpt2"))
                rc = set_err(err, errlen, "%s: model_type: expected \"gpt2\", found \"%s\"", path, str);
            // transformers' gelu_new and gelu_pytorch_tanh are both the tanh form llm.c trains.
            if (more == 0 && !strcmp(key, "activation_function") && strcmp(str, "gelu_new") &&
                strcmp(str, "gelu_pytorch_tanh"))
                rc = set_err(err, errlen, "%s: activation_function: expected \"gelu_new\" or "
                             "\"gelu_pytorch_tanh\" (the tanh GELU), found \"%s\"", path, str);
        } else if (!strcmp(key, "layer_norm_epsilon")) {
            more = json_number(&c, &eps);
        } else if (!strcmp(key, "n_inner")) {
            const char* at = c.p;
            more = json_literal(&c, &flag);
            if (more == 0 && flag != -1) more = -1;
            if (more != 0) c.p = at, c.err[0] = 0, more = json_count(&c, 1u << 30, &inner);
        } else if (!strcmp(key, "tie_word_embeddings")) {   // false: lm_head.weight, untied
            more = json_literal(&c, &flag);
            if (more == 0 && flag < 0)
                rc = set_err(err, errlen, "%s: %s: expected true or false, found null", path, key);
            tied = flag;
        } else if (!strcmp(key, "scale_attn_weights") ||
                   !strcmp(key, "scale_attn_by_inverse_layer_idx")) {
            more = json_literal(&c, &flag);
            const int want = strcmp(key, "scale_attn_by_inverse_layer_idx") ? 1 : 0;
            if (more == 0 && flag != want)
                rc = set_err(err, errlen, "%s: %s: expected %s, found %s", path, key,
                             want ? "true" : "false", flag == 1 ? "true" : flag ? "null" : "false");
        } else {
            more = json_skip(&c);
        }
    }
    if (rc == 0 && (more < 0 || json_end(&c) != 0))
        rc = set_err(err, errlen, "%s: %s", path, c.err);
    if (rc != 0) return -1;
    if (!T) T = ctx;
    const char* missing = !C ? "n_embd" : !L ? "n_layer" : !NH ? "n_head" : !T ? "n_positions"
                        : !V ? "vocab_size" : NULL;
    if (missing) return set_err(err, errlen, "%s: expected a positive %s, found none", path, missing);
    if (inner && inner != 4 * C)
        return set_err(err, errlen, "%s: n_inner: expected null or 4 x n_embd = %llu, found %llu",
                       path, 4 * C, inner);
    *cfg = (GPTConfig){.max_T = (int)T, .V = (int)V, .Vp = gpt_padded_vocab((int)V), .L = (int)L,
                       .NH = (int)NH, .C = (int)C, .untied_classifier = !tied};
    char why[ERR_LEN];
    if (gpt_norm_eps_apply(cfg, eps, "layer_norm_epsilon", why, sizeof why) != 0 ||
        gpt_config_validate(cfg, why, sizeof why) != 0)
        return set_err(err, errlen, "%s: %s", path, why);
    return 0;
}

// config.json's model_type, wherever it stands in the object: "" when it has none (GPT-2's
// older files). Returns 0, or -1 with err set.
static int model_type(const char* text, const char* path, char* type, size_t n, char* err,
                      size_t errlen) {
    JsonCursor c;
    json_init(&c, text);
    char key[64];
    int more = json_object_begin(&c);
    type[0] = 0;
    while (more == 0 && (more = json_object_next(&c, key, sizeof key)) == 1)
        more = !strcmp(key, "model_type") ? json_string(&c, type, n) : json_skip(&c);
    if (more < 0) return set_err(err, errlen, "%s: %s", path, c.err);
    for (char* q = type; *q; q++)   // printed below: one line, whatever the file holds
        if ((unsigned char)*q < 0x20 || *q == 0x7f) *q = '?';
    return 0;
}

// config.json: GPT-2's (model_type "gpt2" or none) or Llama's (checkpoints/hf_llama_config.h).
static int read_config(const char* path, GPTConfig* cfg, HfForm* form, char* err, size_t errlen) {
    char* text = read_text(path, MAX_CONFIG, err, errlen);
    if (!text) return -1;
    char type[64];
    int rc = model_type(text, path, type, sizeof type, err, errlen);
    memset(form, 0, sizeof *form);
    form->llama = rc == 0 && (!strcmp(type, "llama") || !strcmp(type, "mistral") ||
                              !strcmp(type, "qwen2") || !strcmp(type, "qwen3"));
    if (rc == 0 && form->llama)
        rc = hf_llama_config(text, path, cfg, &form->l, err, errlen);
    else if (rc == 0 && (!type[0] || !strcmp(type, "gpt2")))
        rc = read_gpt2_config(text, path, cfg, err, errlen);
    else if (rc == 0)
        rc = set_err(err, errlen, "%s: model_type: expected \"gpt2\", \"llama\", \"mistral\", "
                     "\"qwen2\" or \"qwen3\", found \"%s\"", path, type);
    free(text);
    return rc;
}

static int check_shape(const SafetensorsFile* f, const SafetensorsEntry* e, const HfTensor* w,
                       char* err, size_t errlen) {
    const int ndim = w->rows ? 2 : 1;
    if (e->ndim == ndim && (ndim == 1 ? e->shape[0] == w->cols
                                      : e->shape[0] == w->rows && e->shape[1] == w->cols))
        return 0;
    char got[96] = "";
    for (int k = 0; k < e->ndim; k++)
        snprintf(got + strlen(got), sizeof got - strlen(got), "%s%llu", k ? ", " : "", e->shape[k]);
    if (ndim == 1)
        return set_err(err, errlen, "%s: tensor '%s': shape: expected [%zu] (config.json's sizes), "
                       "found [%s]", f->path, w->name, w->cols, got);
    return set_err(err, errlen, "%s: tensor '%s': shape: expected [%zu, %zu] (config.json's sizes), "
                   "found [%s]", f->path, w->name, w->rows, w->cols, got);
}

// A tensor of the file that is not one of the wanted: transformers' buffers (GPT-2's attention
// masks, older Llama's rotary inv_freq) are skipped and a tied model's lm_head.weight is left for
// check_lm_head; anything else is refused.
static int extra_tensor(const SafetensorsFile* f, const SafetensorsEntry* e, const char* prefix,
                        const GPTConfig* cfg, const HfForm* form, char* err, size_t errlen) {
    const char* rest = !strncmp(e->name, prefix, strlen(prefix)) ? e->name + strlen(prefix) : NULL;
    static const char* const gpt2_buffers[] = {"h.%u.attn.bias%n", "h.%u.attn.masked_bias%n"};
    static const char* const llama_buffers[] = {"layers.%u.self_attn.rotary_emb.inv_freq%n"};
    const char* const* buffers = form->llama ? llama_buffers : gpt2_buffers;
    for (int k = 0; rest && k < (form->llama ? 1 : 2); k++) {
        unsigned layer;
        int end = 0;
        if (sscanf(rest, buffers[k], &layer, &end) == 1 && end && !rest[end] && layer < (unsigned)cfg->L)
            return 0;
    }
    if (!strcmp(e->name, "lm_head.weight")) return 0;
    char biases[96];
    hf_llama_bias_text(&form->l, biases, sizeof biases);
    if (form->llama)
        return set_err(err, errlen, "%s: tensor '%s': expected only Llama's tensors (with %s), "
                       "found one it does not have", f->path, e->name, biases);
    return set_err(err, errlen, "%s: tensor '%s': expected only GPT-2's tensors, found one it "
                   "does not have", f->path, e->name);
}

// A tied model (config.json's tie_word_embeddings true): an lm_head.weight, which transformers
// may write beside the embedding, must hold wte's values. An untied model reads it as a tensor.
static int check_lm_head(const SafetensorsFile* f, const GPTConfig* cfg, const HfForm* form,
                         const float* wte, char* err, size_t errlen) {
    const SafetensorsEntry* e = safetensors_find(f, "lm_head.weight");
    const char* name = form->llama ? "embed_tokens" : "wte";
    if (!e || cfg->untied_classifier) return 0;
    const size_t n = (size_t)cfg->V * (size_t)cfg->C;
    int same = e->ndim == 2 && e->shape[0] == (unsigned long long)cfg->V &&
               e->shape[1] == (unsigned long long)cfg->C;
    float* head = same ? malloc(n * sizeof *head) : NULL;
    if (same && !head) return set_err(err, errlen, "%s: out of memory for lm_head.weight", f->path);
    if (same && safetensors_read_f32(f, e, head, err, errlen) != 0) {
        free(head);
        return -1;
    }
    same = same && !memcmp(head, wte, n * sizeof *head);
    free(head);
    return same ? 0 : set_err(err, errlen, "%s: tensor 'lm_head.weight': expected it equal to %s "
                              "(%s ties the classifier to the embedding), found another tensor",
                              f->path, name, form->llama ? "this model" : "GPT-2");
}

// Reads tensor w into the flat parameters; a non-finite value is refused.
static int read_tensor(const SafetensorsFile* f, const SafetensorsEntry* e, const HfTensor* w,
                       float* params, float* tmp, char* err, size_t errlen) {
    float* dst = params + w->offset;
    const size_t n = (w->rows ? w->rows : 1) * w->cols;
    if (safetensors_read_f32(f, e, w->transposed ? tmp : dst, err, errlen) != 0) return -1;
    const float* got = w->transposed ? tmp : dst;
    for (size_t i = 0; i < n; i++)
        if (!isfinite(got[i]))
            return set_err(err, errlen, "%s: tensor '%s': expected finite values, found %g at "
                           "element %zu", f->path, w->name, got[i], i);
    // transformers' Conv1D (in, out) = rows x cols back to llm.c's (out, in).
    for (size_t i = 0; w->transposed && i < w->rows; i++)
        for (size_t j = 0; j < w->cols; j++) dst[j * w->rows + i] = tmp[i * w->cols + j];
    return 0;
}

// model.safetensors opened and every tensor matched to config.json's shape, nothing of their
// size read or allocated yet: what hf_import checks before it allocates the parameters.
typedef struct {
    SafetensorsFile f;
    int n;                            // tensors wanted (hf_layout)
    HfTensor* w;                      // [n] where each goes in llm.c's layout
    const SafetensorsEntry** entry;   // [n] the file's tensor for each
    HfForm form;                      // config.json's model_type, Llama's biases and tie
} HfWeights;

static void weights_close(HfWeights* h) {
    free(h->w);
    free(h->entry);
    safetensors_close(&h->f);
    memset(h, 0, sizeof *h);
}

static int weights_check(const char* path, const GPTConfig* cfg, const HfForm* form, HfWeights* h,
                         char* err, size_t errlen) {
    memset(h, 0, sizeof *h);
    h->form = *form;
    SafetensorsFile* f = &h->f;
    if (safetensors_open(path, f, err, errlen) != 0) return -1;
    const int llama = form->llama;
    const char* prefix = llama ? (safetensors_find(f, "model.embed_tokens.weight") ? "model." : "")
                       : safetensors_find(f, "transformer.wte.weight") ? "transformer." : "";
    // GPT-2 has 4 + 12 L tensors, Llama 2 + 9 L and the biases: a larger layer count than the
    // file can hold is refused first (an untied model's lm_head.weight, not counted here, is
    // named below when it is missing).
    const int fixed = llama ? 2 : 4,
              per = llama ? 9 + 3 * hf_llama_qkv_bias(&form->l) + form->l.attention_bias +
                            3 * form->l.mlp_bias + 2 * form->l.qwen3 : 12;
    if (cfg->L > (f->n - fixed) / per) {
        set_err(err, errlen, "%s: expected the %d + %d x %d tensors of %s with config.json's "
                "%s = %d, found %d", path, fixed, per, cfg->L, llama ? "Llama" : "GPT-2",
                llama ? "num_hidden_layers" : "n_layer", cfg->L, f->n);
        weights_close(h);
        return -1;
    }
    const int max = llama ? HF_LAYOUT_LLAMA_TENSORS(cfg->L) : HF_LAYOUT_TENSORS(cfg->L);
    h->w = malloc(sizeof *h->w * (size_t)max);
    h->entry = malloc(sizeof *h->entry * (size_t)max);
    char* used = calloc((size_t)f->n, 1);
    int rc = (h->w && h->entry && used) ? 0 : set_err(err, errlen, "%s: out of memory", path);
    h->n = rc != 0 ? 0 : llama ? hf_layout_llama(cfg, prefix, hf_llama_qkv_bias(&form->l),
                                                 form->l.attention_bias, form->l.mlp_bias, h->w)
                               : hf_layout(cfg, prefix, h->w);
    char biases[96];
    hf_llama_bias_text(&form->l, biases, sizeof biases);
    for (int k = 0; k < h->n && rc == 0; k++) {
        h->entry[k] = safetensors_find(f, h->w[k].name);
        if (!h->entry[k] && !strcmp(h->w[k].name, "lm_head.weight"))
            rc = set_err(err, errlen, "%s: expected a tensor 'lm_head.weight' (config.json's "
                         "tie_word_embeddings is false%s: an untied classifier), found none", path,
                         llama ? " or absent, LlamaConfig's default" : "");
        else if (!h->entry[k] && llama)
            rc = set_err(err, errlen, "%s: expected a tensor '%s' (Llama with num_hidden_layers = "
                         "%d, %s), found none", path, h->w[k].name, cfg->L, biases);
        else if (!h->entry[k])
            rc = set_err(err, errlen, "%s: expected a tensor '%s' (GPT-2 with config.json's "
                         "n_layer = %d), found none", path, h->w[k].name, cfg->L);
        else
            used[h->entry[k] - f->entries] = 1, rc = check_shape(f, h->entry[k], &h->w[k], err, errlen);
    }
    for (int k = 0; k < f->n && rc == 0; k++)
        if (!used[k]) rc = extra_tensor(f, &f->entries[k], prefix, cfg, form, err, errlen);
    free(used);
    if (rc != 0) weights_close(h);
    return rc;
}

// Fills params (gpt_num_params(cfg) floats) from a checked file, wte's padding rows zero (and
// the biases a Llama file leaves out). Every tensor is in the file with config.json's shape: the
// sizes are the file's, no larger.
static int weights_read(const HfWeights* h, const GPTConfig* cfg, float* params, char* err,
                        size_t errlen) {
    memset(params, 0, sizeof *params * gpt_num_params(cfg));   // wte's padding rows
    size_t most = 0;   // the largest transposed tensor (GPT-2's Conv1D: 4C x C)
    for (int k = 0; k < h->n; k++)
        if (h->w[k].transposed && h->w[k].rows * h->w[k].cols > most) most = h->w[k].rows * h->w[k].cols;
    float* tmp = most ? malloc(sizeof *tmp * most) : NULL;
    int rc = tmp || !most ? 0 : set_err(err, errlen, "%s: out of memory for a %d x %d tensor",
                                        h->f.path, 4 * cfg->C, cfg->C);
    for (int k = 0; k < h->n && rc == 0; k++)
        rc = read_tensor(&h->f, h->entry[k], &h->w[k], params, tmp, err, errlen);
    if (rc == 0) rc = check_lm_head(&h->f, cfg, &h->form, params, err, errlen);
    free(tmp);
    return rc;
}

static void weights_path(const char* dir, char* path, size_t len) {
    snprintf(path, len, "%s/model.safetensors", dir);
}

static int config_form(const char* dir, GPTConfig* cfg, HfForm* form, char* err, size_t errlen) {
    char path[4096];
    snprintf(path, sizeof path, "%s/config.json", dir);
    return read_config(path, cfg, form, err, errlen);
}

int hf_import_config(const char* dir, GPTConfig* cfg, char* err, size_t errlen) {
    HfForm form;
    return config_form(dir, cfg, &form, err, errlen);
}

int hf_import_weights(const char* dir, const GPTConfig* cfg, float* params, char* err,
                      size_t errlen) {
    // The form again (the caller has the shape): which names, biases and lm_head to expect.
    GPTConfig again;
    HfForm form;
    if (config_form(dir, &again, &form, err, errlen) != 0) return -1;
    char path[4096];
    weights_path(dir, path, sizeof path);
    HfWeights h;
    if (weights_check(path, cfg, &form, &h, err, errlen) != 0) return -1;
    const int rc = weights_read(&h, cfg, params, err, errlen);
    weights_close(&h);
    return rc;
}

int hf_import(const char* dir, GPTConfig* cfg, float** params, char* err, size_t errlen) {
    *params = NULL;
    HfForm form;
    if (config_form(dir, cfg, &form, err, errlen) != 0) return -1;
    // The parameters are allocated only once the file is known to hold them: config.json alone
    // may name any size gpt_config_validate accepts.
    char path[4096];
    weights_path(dir, path, sizeof path);
    HfWeights h;
    if (weights_check(path, cfg, &form, &h, err, errlen) != 0) return -1;
    float* p = malloc(sizeof *p * gpt_num_params(cfg));
    int rc = p ? weights_read(&h, cfg, p, err, errlen)
               : set_err(err, errlen, "%s: out of memory for %zu parameters", dir, gpt_num_params(cfg));
    weights_close(&h);
    if (rc != 0) free(p);
    else *params = p;
    return rc;
}
