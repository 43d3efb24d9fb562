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

// The safetensors entries of the whole model, from the layout table: a vector, a row-major
// matrix as it is, or the transpose of llm.c's (cols, rows) one (a swap of the strides).
static void hf_tensors(const float* params, const HfTensor* h, int n, SafetensorsTensor* t) {
    for (int k = 0; k < n; k++)
        t[k] = (SafetensorsTensor){h[k].name, h[k].rows ? 2 : 1, h[k].rows ? h[k].rows : 1,
                                   h[k].cols, params + h[k].offset,
                                   h[k].transposed ? 1 : h[k].cols, h[k].transposed ? h[k].rows : 1};
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
    const int max_tensors = HF_LAYOUT_TENSORS(cfg->L);
    HfTensor* layout = malloc(sizeof *layout * (size_t)max_tensors);
    SafetensorsTensor* t = malloc(sizeof *t * (size_t)max_tensors);
    if (!layout || !t) {
        free(layout), free(t);
        snprintf(err, errlen, "%s: out of memory for %d tensor names", dir, max_tensors);
        return -1;
    }
    const int n = hf_layout(cfg, "transformer.", layout);
    hf_tensors(params, layout, n, t);
    char path[4096];
    snprintf(path, sizeof path, "%s/model.safetensors", dir);
    int rc = safetensors_write(path, t, n, o->dtype, err, errlen);
    free(t);
    free(layout);
    if (rc == 0) rc = write_config(dir, cfg, o->dtype, o->vocab_dir ? o->eot_id : -1, err, errlen);
    if (rc == 0 && o->vocab_dir) rc = write_tokenizer(dir, cfg, o->vocab_dir, err, errlen);
    return rc;
}
