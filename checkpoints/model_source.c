// An llm.c model file or a Hugging Face GPT-2 or Llama directory, whichever the path is
// (checkpoints/model_source.h).
#include "checkpoints/model_source.h"

#include <stdio.h>
#include <sys/stat.h>
#include <unistd.h>

#include "checkpoints/hf_import.h"
#include "checkpoints/model_file.h"
#include "comm/fail.h"

static int is_directory(const char* path) {
    struct stat st;
    return stat(path, &st) == 0 && S_ISDIR(st.st_mode);
}

static int same_shape(const GPTConfig* a, const GPTConfig* b) {
    return a->L == b->L && a->C == b->C && a->NH == b->NH && a->V == b->V && a->Vp == b->Vp &&
           a->max_T == b->max_T && gpt_kv_heads(a) == gpt_kv_heads(b) &&
           gpt_same_positions(a, b) && gpt_same_block(a, b);
}

int model_source_config(const char* path, GPTConfig* cfg, const char** kind, char* err,
                        size_t errlen) {
    const char* k = "Hugging Face directory";
    int version, rc;
    if (is_directory(path)) {
        char config[4096];
        snprintf(config, sizeof config, "%s/config.json", path);
        if (access(config, F_OK) != 0)
            return set_err(err, errlen, "%s: directory: expected an llm.c model file or a Hugging "
                           "Face GPT-2 or Llama directory (config.json, model.safetensors), found "
                           "no config.json", path);
        rc = hf_import_config(path, cfg, err, errlen);
    } else {
        rc = model_file_read_header(path, cfg, &version, err, errlen);
        k = version == MODEL_VERSION_BF16 ? "bf16 model file" : "fp32 model file";
    }
    if (kind) *kind = k;
    return rc;
}

int model_source_load(const char* path, const GPTConfig* expect, float* params, char* err,
                      size_t errlen) {
    if (!is_directory(path)) return model_file_load(path, expect, params, err, errlen);
    GPTConfig cfg;   // read again: the directory must still hold the shape the caller sized for
    if (hf_import_config(path, &cfg, err, errlen) != 0) return -1;
    if (!same_shape(&cfg, expect))
        return set_err(err, errlen, "%s: config.json: expected the shape read before (L=%d C=%d "
                       "NH=%d V=%d context %d), found another (the directory changed?)", path,
                       expect->L, expect->C, expect->NH, expect->V, expect->max_T);
    return hf_import_weights(path, expect, params, err, errlen);
}
