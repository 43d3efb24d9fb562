#include "checkpoints/hf_export.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "comm/atomic_file.h"
#include "checkpoints/checkpoint_dir.h"
#include "comm/fail.h"
#include "model/gpt.h"

enum { TENSORS_PER_LAYER = 12, NAME_LEN = 64 };

// The safetensors entries of the whole model, in transformers' order: wte, wpe, the layers, ln_f.
// names holds their storage (NAME_LEN bytes each).
static int hf_tensors(const GPTConfig* cfg, const float* params, SafetensorsTensor* t, char* names) {
    ParameterTensors p;
    gpt_point_params(cfg, (float*)params, &p);
    const size_t C = (size_t)cfg->C;
    int n = 0;
    // A vector; a row-major (rows, cols) matrix as it is; the transpose of llm.c's (cols, rows).
#define NAME(...) (snprintf(names + n * NAME_LEN, NAME_LEN, __VA_ARGS__), names + n * NAME_LEN)
#define VECTOR(src_, len_, ...) \
    (t[n] = (SafetensorsTensor){NAME(__VA_ARGS__), 1, 1, len_, src_, len_, 1}, n++)
#define PLAIN(src_, rows_, cols_, ...) \
    (t[n] = (SafetensorsTensor){NAME(__VA_ARGS__), 2, rows_, cols_, src_, cols_, 1}, n++)
#define TRANSPOSED(src_, rows_, cols_, ...) \
    (t[n] = (SafetensorsTensor){NAME(__VA_ARGS__), 2, rows_, cols_, src_, 1, rows_}, n++)
    PLAIN(p.wte, (size_t)cfg->V, C, "transformer.wte.weight");
    PLAIN(p.wpe, (size_t)cfg->max_T, C, "transformer.wpe.weight");
    for (size_t l = 0; l < (size_t)cfg->L; l++) {
        VECTOR(p.ln1w + l * C, C, "transformer.h.%zu.ln_1.weight", l);
        VECTOR(p.ln1b + l * C, C, "transformer.h.%zu.ln_1.bias", l);
        TRANSPOSED(p.qkvw + l * 3 * C * C, C, 3 * C, "transformer.h.%zu.attn.c_attn.weight", l);
        VECTOR(p.qkvb + l * 3 * C, 3 * C, "transformer.h.%zu.attn.c_attn.bias", l);
        TRANSPOSED(p.attprojw + l * C * C, C, C, "transformer.h.%zu.attn.c_proj.weight", l);
        VECTOR(p.attprojb + l * C, C, "transformer.h.%zu.attn.c_proj.bias", l);
        VECTOR(p.ln2w + l * C, C, "transformer.h.%zu.ln_2.weight", l);
        VECTOR(p.ln2b + l * C, C, "transformer.h.%zu.ln_2.bias", l);
        TRANSPOSED(p.fcw + l * 4 * C * C, C, 4 * C, "transformer.h.%zu.mlp.c_fc.weight", l);
        VECTOR(p.fcb + l * 4 * C, 4 * C, "transformer.h.%zu.mlp.c_fc.bias", l);
        TRANSPOSED(p.fcprojw + l * 4 * C * C, 4 * C, C, "transformer.h.%zu.mlp.c_proj.weight", l);
        VECTOR(p.fcprojb + l * C, C, "transformer.h.%zu.mlp.c_proj.bias", l);
    }
    VECTOR(p.lnfw, C, "transformer.ln_f.weight");
    VECTOR(p.lnfb, C, "transformer.ln_f.bias");
#undef NAME
#undef VECTOR
#undef PLAIN
#undef TRANSPOSED
    return n;
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

static int write_config(const char* dir, const GPTConfig* cfg, SafetensorsDtype dtype, long eot_id,
                        char* err, size_t errlen) {
    AtomicFile af;
    if (!open_text(&af, dir, "config.json", err, errlen)) return -1;
    // Dropout 0: the trainer has none. The end-of-text id only where the vocabulary says it.
    fprintf(af.f,
            "{\n  \"architectures\": [\"GPT2LMHeadModel\"],\n  \"model_type\": \"gpt2\",\n"
            "  \"vocab_size\": %d,\n  \"n_positions\": %d,\n  \"n_embd\": %d,\n  \"n_layer\": %d,\n"
            "  \"n_head\": %d,\n  \"n_inner\": null,\n  \"activation_function\": \"gelu_new\",\n"
            "  \"layer_norm_epsilon\": 1e-05,\n  \"resid_pdrop\": 0.0,\n  \"embd_pdrop\": 0.0,\n"
            "  \"attn_pdrop\": 0.0,\n  \"scale_attn_weights\": true,\n  \"tie_word_embeddings\": true,\n"
            "  \"initializer_range\": 0.02,\n  \"use_cache\": true,\n",
            cfg->V, cfg->max_T, cfg->C, cfg->L, cfg->NH);
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
              char* err, size_t errlen) {
    char why[ERR_LEN];
    if (checkpoint_make_dir(dir, why, sizeof why) != 0) {
        snprintf(err, errlen, "--out: %s", why);
        return -1;
    }
    const int max_tensors = 4 + TENSORS_PER_LAYER * cfg->L;
    SafetensorsTensor* t = malloc(sizeof *t * (size_t)max_tensors);
    char* names = malloc((size_t)NAME_LEN * (size_t)max_tensors);
    if (!t || !names) {
        free(t), free(names);
        snprintf(err, errlen, "%s: out of memory for %d tensor names", dir, max_tensors);
        return -1;
    }
    const int n = hf_tensors(cfg, params, t, names);
    char path[4096];
    snprintf(path, sizeof path, "%s/model.safetensors", dir);
    int rc = safetensors_write(path, t, n, o->dtype, err, errlen);
    free(t);
    free(names);
    if (rc == 0) rc = write_config(dir, cfg, o->dtype, o->vocab_dir ? o->eot_id : -1, err, errlen);
    if (rc == 0 && o->vocab_dir) rc = write_tokenizer(dir, cfg, o->vocab_dir, err, errlen);
    return rc;
}
