#include "checkpoints/hf_export.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "comm/atomic_file.h"
#include "checkpoints/checkpoint_dir.h"
#include "checkpoints/hf_layout.h"
#include "comm/fail.h"
#include "model/gpt.h"

// GPT-NeoX's query_key_value: llm.c's 3C rows [q | k | v] of `cols` values (head h at rows
// h HS .. of each third) regrouped per head, [q_h | k_h | v_h], into out. cols 1: the bias.
static void interleave_heads(float* out, const float* in, size_t C, size_t HS, size_t cols) {
    for (size_t h = 0; h < C / HS; h++)
        for (size_t s = 0; s < 3; s++)
            memcpy(out + (h * 3 + s) * HS * cols, in + (s * C + h * HS) * cols,
                   sizeof(float) * HS * cols);
}

// Floats of the regrouped copies a layout needs (its interleaved tensors).
static size_t interleaved_floats(const HfTensor* h, int n) {
    size_t total = 0;
    for (int k = 0; k < n; k++)
        if (h[k].interleave) total += (h[k].rows ? h[k].rows : 1) * h[k].cols;
    return total;
}

// The safetensors entries of the whole model, from the layout table: a vector, a row-major
// matrix as it is, the transpose of llm.c's (cols, rows) one (a swap of the strides), or an
// interleaved copy in `copies` (interleaved_floats of them).
static void hf_tensors(const float* params, const HfTensor* h, int n, float* copies,
                       SafetensorsTensor* t) {
    for (int k = 0; k < n; k++) {
        const float* data = params + h[k].offset;
        if (h[k].interleave) {
            const size_t rows = h[k].rows ? h[k].rows : h[k].cols, cols = h[k].rows ? h[k].cols : 1;
            interleave_heads(copies, data, rows / 3, (size_t)h[k].interleave, cols);
            data = copies;
            copies += rows * cols;
        }
        t[k] = (SafetensorsTensor){h[k].name, h[k].rows ? 2 : 1, h[k].rows ? h[k].rows : 1,
                                   h[k].cols, data,
                                   h[k].transposed ? 1 : h[k].cols, h[k].transposed ? h[k].rows : 1};
    }
}

// A small text file DIR/NAME, written atomically: open_text, fprintf to af->f, commit_text.
static FILE* open_text(AtomicFile* af, const char* dir, const char* name, char* err, size_t errlen) {
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    return atomic_open(af, path, err, errlen) == 0 ? af->f : NULL;
}

static int commit_text(AtomicFile* af, char* err, size_t errlen) {
    if (ferror(af->f)) {
        snprintf(err, errlen, "%s: write failed", af->path);
        atomic_abort(af);
        return -1;
    }
    return atomic_commit(af, err, errlen);
}

// Context extension: transformers' rope_scaling under both key names it has used for the type;
// Llama 3.1's fixed low and high frequency factors written out. Nothing without a scaling.
static void write_rope_scaling(FILE* f, const GPTConfig* cfg) {
    const char* kind = rope_scaling_name(cfg->rope_scaling);
    if (cfg->rope_scaling == ROPE_SCALING_LINEAR)
        fprintf(f, "  \"rope_scaling\": {\"rope_type\": \"%s\", \"type\": \"%s\", "
                "\"factor\": %.9g},\n", kind, kind, cfg->rope_factor);
    else if (cfg->rope_scaling)
        fprintf(f, "  \"rope_scaling\": {\"rope_type\": \"%s\", \"type\": \"%s\", "
                "\"factor\": %.9g, \"original_max_position_embeddings\": %d%s},\n", kind, kind,
                cfg->rope_factor, cfg->rope_original_T,
                cfg->rope_scaling == ROPE_SCALING_LLAMA3
                    ? ", \"low_freq_factor\": 1.0, \"high_freq_factor\": 4.0" : "");
}

// The norms' epsilon in the fewest digits that read back as the model's fp32 value ("1e-05",
// "1e-06"): transformers adds it in fp32.
static void format_eps(const GPTConfig* cfg, char* buf, size_t n) {
    const float eps = (float)gpt_norm_eps(cfg);
    for (int digits = 1; digits <= 9; digits++) {
        snprintf(buf, n, "%.*g", digits, (double)eps);
        if (strtof(buf, NULL) == eps) return;
    }
}

static int write_config(const char* dir, const GPTConfig* cfg, SafetensorsDtype dtype, long eot_id,
                        char* err, size_t errlen) {
    AtomicFile af;
    if (!open_text(&af, dir, "config.json", err, errlen)) return -1;
    const char* tied = cfg->untied_classifier ? "false" : "true";
    char eps[32];
    format_eps(cfg, eps, sizeof eps);
    // Dropout 0: the trainer has none. The end-of-text id only where the vocabulary says it.
    if (cfg->norm == GPT_NORM_RMSNORM) {
        // Llama with the trainer's block: RMSNorm with its epsilon, SwiGLU (silu) of F, grouped
        // key/value heads, rotary positions (half-split, as rotate_half), biases on every linear
        // layer or none (attention_bias, mlp_bias), the classifier tied to embed_tokens or not.
        // With a sliding window in every layer (and no biases) it is Mistral: the same names,
        // and sliding_window (a query sees the keys q - W < k <= q, as --attention-window). With
        // the qkv projection's bias alone it is Qwen2 (no window: use_sliding_window false); with
        // QK-norm (and no biases) Qwen3: q_norm and k_norm, attention_bias false.
        const int mistral = cfg->window > 0, qwen2 = !gpt_linear_bias(cfg) && gpt_qkv_bias(cfg);
        const int qwen3 = cfg->qk_norm;
        fprintf(af.f, "{\n  \"architectures\": [\"%s\"],\n  \"model_type\": \"%s\",\n",
                mistral ? "MistralForCausalLM" : qwen2 ? "Qwen2ForCausalLM"
                : qwen3 ? "Qwen3ForCausalLM" : "LlamaForCausalLM",
                mistral ? "mistral" : qwen2 ? "qwen2" : qwen3 ? "qwen3" : "llama");
        if (mistral) fprintf(af.f, "  \"sliding_window\": %d,\n", cfg->window);
        if (qwen2 || qwen3) fprintf(af.f, "  \"use_sliding_window\": false,\n");
        if (qwen3) fprintf(af.f, "  \"attention_bias\": false,\n");
        fprintf(af.f,
                "  \"vocab_size\": %d,\n  \"max_position_embeddings\": %d,\n  \"hidden_size\": %d,\n"
                "  \"intermediate_size\": %d,\n  \"num_hidden_layers\": %d,\n"
                "  \"num_attention_heads\": %d,\n  \"num_key_value_heads\": %d,\n  \"head_dim\": %d,\n"
                "  \"hidden_act\": \"silu\",\n  \"rms_norm_eps\": %s,\n  \"rope_theta\": %d,\n",
                cfg->V, cfg->max_T, cfg->C, gpt_ffn_hidden(cfg), cfg->L, cfg->NH,
                gpt_kv_heads(cfg), cfg->C / cfg->NH, eps, cfg->rope_theta);
        write_rope_scaling(af.f, cfg);
        const char* bias = gpt_linear_bias(cfg) ? "true" : "false";
        if (!mistral && !qwen2 && !qwen3)  // Mistral's, Qwen2's and Qwen3's keys say it
            fprintf(af.f, "  \"attention_bias\": %s,\n  \"mlp_bias\": %s,\n", bias, bias);
        fprintf(af.f,
                "  \"attention_dropout\": 0.0,\n  \"tie_word_embeddings\": %s,\n"
                "  \"initializer_range\": 0.02,\n  \"use_cache\": true,\n", tied);
    } else if (cfg->rope_theta) {
        // GPT-NeoX with the trainer's block: rotary on every channel of a head (rotary_pct 1),
        // the residual adds in sequence (no parallel residual), GPT-2's tanh GELU, biases, an
        // untied output matrix (the classifier, or a copy of wte for a tied model). theta under
        // both names transformers has used for it.
        fprintf(af.f,
                "{\n  \"architectures\": [\"GPTNeoXForCausalLM\"],\n  \"model_type\": \"gpt_neox\",\n"
                "  \"vocab_size\": %d,\n  \"max_position_embeddings\": %d,\n  \"hidden_size\": %d,\n"
                "  \"num_hidden_layers\": %d,\n  \"num_attention_heads\": %d,\n"
                "  \"intermediate_size\": %d,\n  \"hidden_act\": \"gelu_new\",\n"
                "  \"rotary_pct\": 1.0,\n  \"rotary_emb_base\": %d,\n  \"rope_theta\": %d,\n"
                "  \"use_parallel_residual\": false,\n  \"attention_bias\": true,\n"
                "  \"layer_norm_eps\": %s,\n  \"attention_dropout\": 0.0,\n  \"hidden_dropout\": 0.0,\n"
                "  \"tie_word_embeddings\": false,\n  \"initializer_range\": 0.02,\n  \"use_cache\": true,\n",
                cfg->V, cfg->max_T, cfg->C, cfg->L, cfg->NH, 4 * cfg->C, cfg->rope_theta,
                cfg->rope_theta, eps);
        write_rope_scaling(af.f, cfg);
    } else {
        fprintf(af.f,
                "{\n  \"architectures\": [\"GPT2LMHeadModel\"],\n  \"model_type\": \"gpt2\",\n"
                "  \"vocab_size\": %d,\n  \"n_positions\": %d,\n  \"n_embd\": %d,\n  \"n_layer\": %d,\n"
                "  \"n_head\": %d,\n  \"n_inner\": null,\n  \"activation_function\": \"gelu_new\",\n"
                "  \"layer_norm_epsilon\": %s,\n  \"resid_pdrop\": 0.0,\n  \"embd_pdrop\": 0.0,\n"
                "  \"attn_pdrop\": 0.0,\n  \"scale_attn_weights\": true,\n  \"tie_word_embeddings\": %s,\n"
                "  \"initializer_range\": 0.02,\n  \"use_cache\": true,\n",
                cfg->V, cfg->max_T, cfg->C, cfg->L, cfg->NH, eps, tied);
    }
    if (eot_id >= 0) fprintf(af.f, "  \"bos_token_id\": %ld,\n  \"eos_token_id\": %ld,\n", eot_id, eot_id);
    fprintf(af.f, "  \"torch_dtype\": \"%s\"\n}\n", dtype == SAFETENSORS_BF16 ? "bfloat16" : "float32");
    return commit_text(&af, err, errlen);
}

// Copies src to dir/name byte for byte, atomically.
static int copy_file(const char* src, const char* dir, const char* name, char* err, size_t errlen) {
    FILE* f = fopen(src, "rb");
    if (!f) {
        snprintf(err, errlen, "%s: cannot open: %s", src, strerror(errno));
        return -1;
    }
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    AtomicFile af;
    int rc = atomic_open(&af, path, err, errlen);
    char buf[1 << 16];
    for (size_t k; rc == 0 && (k = fread(buf, 1, sizeof buf, f)) > 0;)
        rc = atomic_write(&af, buf, k, err, errlen);
    if (rc == 0 && ferror(f)) {
        atomic_abort(&af);
        snprintf(err, errlen, "%s: read failed", src);
        rc = -1;
    }
    fclose(f);
    return rc == 0 ? atomic_commit(&af, err, errlen) : rc;
}

static int write_tokenizer(const char* dir, const GPTConfig* cfg, const char* vocab_dir,
                           char* err, size_t errlen) {
    char src[4096];
    snprintf(src, sizeof src, "%s/encoder.json", vocab_dir);
    if (copy_file(src, dir, "vocab.json", err, errlen) != 0) return -1;
    snprintf(src, sizeof src, "%s/vocab.bpe", vocab_dir);
    if (copy_file(src, dir, "merges.txt", err, errlen) != 0) return -1;
    AtomicFile af;
    if (!open_text(&af, dir, "tokenizer_config.json", err, errlen)) return -1;
    fprintf(af.f,
            "{\n  \"tokenizer_class\": \"GPT2Tokenizer\",\n  \"model_max_length\": %d,\n"
            "  \"add_prefix_space\": false,\n  \"bos_token\": \"<|endoftext|>\",\n"
            "  \"eos_token\": \"<|endoftext|>\",\n  \"unk_token\": \"<|endoftext|>\"\n}\n",
            cfg->max_T);
    return commit_text(&af, err, errlen);
}

int hf_export(const char* dir, const GPTConfig* cfg, const float* params, const HfExportOptions* o,
              size_t* values, char* err, size_t errlen) {
    char why[ERR_LEN];
    if (checkpoint_make_dir(dir, why, sizeof why) != 0) {
        snprintf(err, errlen, "--out: %s", why);
        return -1;
    }
    const int llama = cfg->norm == GPT_NORM_RMSNORM;
    const int max_tensors = llama ? HF_LAYOUT_LLAMA_TENSORS(cfg->L) : HF_LAYOUT_TENSORS(cfg->L);
    HfTensor* layout = malloc(sizeof *layout * (size_t)max_tensors);
    SafetensorsTensor* t = malloc(sizeof *t * (size_t)max_tensors);
    if (!layout || !t) {
        free(layout), free(t);
        snprintf(err, errlen, "%s: out of memory for %d tensor names", dir, max_tensors);
        return -1;
    }
    const int n = llama ? hf_layout_llama(cfg, "model.", gpt_qkv_bias(cfg), gpt_linear_bias(cfg),
                                          gpt_linear_bias(cfg), layout)
                : cfg->rope_theta ? hf_layout_neox(cfg, layout) : hf_layout(cfg, "transformer.", layout);
    float* copies = malloc(sizeof(float) * (interleaved_floats(layout, n) + 1));
    if (!copies) {
        free(layout), free(t);
        snprintf(err, errlen, "%s: out of memory for the regrouped query_key_value tensors", dir);
        return -1;
    }
    hf_tensors(params, layout, n, copies, t);
    size_t written = 0;
    for (int k = 0; k < n; k++) written += (layout[k].rows ? layout[k].rows : 1) * layout[k].cols;
    if (values) *values = written;
    char path[4096];
    snprintf(path, sizeof path, "%s/model.safetensors", dir);
    int rc = safetensors_write(path, t, n, o->dtype, err, errlen);
    free(copies);
    free(t);
    free(layout);
    if (rc == 0) rc = write_config(dir, cfg, o->dtype, o->vocab_dir ? o->eot_id : -1, err, errlen);
    if (rc == 0 && o->vocab_dir) rc = write_tokenizer(dir, cfg, o->vocab_dir, err, errlen);
    return rc;
}
