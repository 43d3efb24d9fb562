// Writes the binary seed corpora of the fuzz targets with the project's own writers: small
// valid files and near-valid variants (truncated, wrong version, corrupted), a few KB each.
//   write_seeds DIR   -> DIR/{shard,model_file,train_state,tokenizer_file,hf_import,mc_eval}/NAME
// tests/fuzz/make_corpus.sh runs it (and adds the text-format seeds).
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "checkpoints/hf_export.h"
#include "checkpoints/model_file.h"
#include "checkpoints/train_state.h"
#include "comm/fail.h"
#include "data/mc_eval.h"
#include "data/shard.h"
#include "data/tokenizer_file.h"
#include "model/gpt.h"
#include "tests/fuzz/fuzz_file.h"

static const char* out_dir;

static const char* seed_path(const char* target, const char* name) {
    static char path[1024];
    snprintf(path, sizeof path, "%s/%s", out_dir, target);
    CHECK(mkdir(path, 0755) == 0 || errno == EEXIST, "", "cannot create %s: %s", path,
          strerror(errno));
    snprintf(path, sizeof path, "%s/%s/%s", out_dir, target, name);
    return path;
}

static void check_written(int rc, const char* err) {
    if (rc != 0) fail_msg("writing a seed: %s", err);
}

// A copy of an existing seed with `keep` bytes (<= its size) and one 32-bit word replaced
// (at byte offset `at`, when at >= 0): the near-valid variants.
static void variant(const char* target, const char* from, const char* name, size_t keep,
                    long at, uint32_t word) {
    size_t size = 0;
    uint8_t* data = fuzz_read(seed_path(target, from), &size);
    CHECK(data && keep <= size, "", "seed %s/%s: cannot read it back", target, from);
    if (at >= 0) memcpy(data + at, &word, 4);
    const char* path = seed_path(target, name);
    FILE* f = fopen(path, "wb");
    CHECK(f && fwrite(data, 1, keep, f) == keep && fclose(f) == 0, "", "cannot write %s", path);
    free(data);
}

static void shard_seeds(void) {
    char err[ERR_LEN] = "";
    uint32_t tokens[40];
    for (int i = 0; i < 40; i++) tokens[i] = (uint32_t)(i * 7919 % 50257);
    check_written(shard_write(seed_path("shard", "u16"), tokens, 40, 0, err, sizeof err), err);
    check_written(shard_write(seed_path("shard", "u32"), tokens, 20, 1, err, sizeof err), err);
    check_written(shard_write(seed_path("shard", "empty"), tokens, 0, 0, err, sizeof err), err);
    tokens[3] = 50300;   // beyond GPT-2's vocabulary
    check_written(shard_write(seed_path("shard", "u16_big_token"), tokens, 10, 0, err,
                              sizeof err), err);
    variant("shard", "u16", "u16_truncated", 1024 + 2 * 39, -1, 0);
    variant("shard", "u32", "u32_bad_version", 1024 + 4 * 20, 4, 1);
    variant("shard", "u16", "u16_negative_count", 1024 + 2 * 40, 8, 0x80000000u);
}

static GPTConfig tiny_config(void) {
    return (GPTConfig){.max_T = 4, .V = 5, .Vp = 8, .L = 1, .NH = 2, .C = 2};
}

static float* some_params(size_t n) {
    float* p = xmalloc(n * sizeof *p, "seed parameters");
    for (size_t i = 0; i < n; i++) p[i] = (float)((long)(i * 37 % 101) - 50) / 64.0f;
    return p;
}

static void model_seeds(void) {
    char err[ERR_LEN] = "";
    const GPTConfig c = tiny_config();
    const size_t n = gpt_num_params(&c);
    float* p = some_params(n);
    check_written(model_file_save(seed_path("model_file", "fp32"), &c, p, MODEL_VERSION_FP32,
                                  err, sizeof err), err);
    check_written(model_file_save(seed_path("model_file", "bf16"), &c, p, MODEL_VERSION_BF16,
                                  err, sizeof err), err);
    variant("model_file", "fp32", "fp32_truncated", 1024 + 4 * n - 4, -1, 0);
    variant("model_file", "bf16", "bf16_heads_3", 1024 + 2 * n, 5 * 4, 3);
    variant("model_file", "fp32", "fp32_nan", 1024 + 4 * n, 1024 + 4 * 7, 0x7fc00000u);
    free(p);
}

static void state_seeds(void) {
    char err[ERR_LEN] = "";
    TrainStateInfo info = {.step = 3, .world_size = 2, .rank = 1, .dp = 2, .pq = 1, .pkv = 1,
                           .zero_stage = 1, .model = tiny_config(), .B = 1, .T = 4,
                           .accum_steps = 1, .sample_rng = 12345};
    info.loader = (LoaderState){.epoch = 0, .next_batch = 6, .seed = 1337, .shuffle = 1,
                                .nfiles = 1, .B = 1, .T = 4};
    info.num_params = gpt_num_params(&info.model);
    info.shard_begin = info.num_params / 2;
    info.shard_count = info.num_params - info.shard_begin;
    snprintf(info.config_json, sizeof info.config_json, "{\"preset\":\"tiny\",\"zero\":1}");
    float* p = some_params(info.num_params);
    check_written(train_state_save(seed_path("train_state", "zero1_rank1"), &info, p, p, p + 1,
                                   err, sizeof err), err);
    // The trainer's files now: with the loader's set positions and the weights of the file's
    // slice (version 4; one process's slice is every parameter); the one above is an earlier
    // build's (version 1, every weight).
    info.zero_stage = 0;
    info.world_size = 1;
    info.rank = 0;
    info.dp = 1;
    info.shard_begin = 0;
    info.shard_count = info.num_params;
    info.npositions = 2;
    info.positions[0] = (LoaderSetPosition){0x0123456789abcdefULL, 1337, 6};
    info.positions[1] = (LoaderSetPosition){0xfedcba9876543210ULL, 42, 100};
    check_written(train_state_save(seed_path("train_state", "zero0"), &info, p, p, p, err,
                                   sizeof err), err);
    // Rank 1 of dp 2 without ZeRO-1: the second half of the weights and moments.
    info.world_size = 2;
    info.rank = 1;
    info.dp = 2;
    info.shard_begin = info.num_params / 2;
    info.shard_count = info.num_params - info.shard_begin;
    check_written(train_state_save(seed_path("train_state", "sliced_rank1"), &info, p, p, p + 1,
                                   err, sizeof err), err);
    info.world_size = 1, info.rank = 0, info.dp = 1, info.shard_begin = 0;
    info.shard_count = info.num_params;
    struct stat st;
    CHECK(stat(seed_path("train_state", "zero0"), &st) == 0, "", "seed zero0 missing");
    variant("train_state", "zero0", "zero0_bad_checksum", (size_t)st.st_size, 50 * 4, 1);
    variant("train_state", "zero0", "zero0_truncated", (size_t)st.st_size - 8, -1, 0);
    free(p);
}

static void tokenizer_seeds(void) {
    char err[ERR_LEN] = "";
    static const char* words[] = {"a", "b", "the", " the", "<|endoftext|>", "\xff\xfe", "ing"};
    enum { NW = sizeof words / sizeof words[0] };
    uint32_t offset[NW + 1] = {0};
    uint8_t bytes[64];
    for (int i = 0; i < NW; i++) {
        memcpy(bytes + offset[i], words[i], strlen(words[i]));
        offset[i + 1] = offset[i] + (uint32_t)strlen(words[i]);
    }
    TokenTable t = {.vocab_size = NW, .eot_id = 4, .offset = offset, .bytes = bytes};
    check_written(tokenizer_file_write(seed_path("tokenizer_file", "v2"), &t, err, sizeof err),
                  err);
    const size_t size = 1024 + NW + offset[NW];
    // Version 1: no end-of-text field (header[3] must then be 0).
    variant("tokenizer_file", "v2", "v1_eot_set", size, 4, 1);
    variant("tokenizer_file", "v1_eot_set", "v1", size, 12, 0);
    variant("tokenizer_file", "v2", "v2_truncated", size - 1, -1, 0);
    variant("tokenizer_file", "v2", "v2_vocab_large", size, 8, 1u << 24);
}

// hf_import: config.json, NUL, model.safetensors, as build/export_hf writes them: GPT-2's, and
// Llama's (RMSNorm, SwiGLU, rotary positions with YaRN, a key/value head for 2 heads).
static void hf_seed(const char* name, const GPTConfig* c, SafetensorsDtype dtype) {
    char err[ERR_LEN] = "", dir[600], path[700];
    float* p = some_params(gpt_num_params(c));
    snprintf(dir, sizeof dir, "%s/hf_%s", fuzz_dir(), name);
    const HfExportOptions o = {dtype, NULL, -1};
    check_written(hf_export(dir, c, p, &o, NULL, err, sizeof err), err);
    size_t nc = 0, nm = 0;
    snprintf(path, sizeof path, "%s/config.json", dir);
    uint8_t* config = fuzz_read(path, &nc);
    snprintf(path, sizeof path, "%s/model.safetensors", dir);
    uint8_t* model = fuzz_read(path, &nm);
    CHECK(config && model, "", "cannot read back %s", dir);
    const char* seed = seed_path("hf_import", name);
    FILE* f = fopen(seed, "wb");
    CHECK(f && fwrite(config, 1, nc, f) == nc && fputc(0, f) == 0 && fwrite(model, 1, nm, f) == nm &&
          fclose(f) == 0, "", "cannot write %s", seed);
    free(config);
    free(model);
    free(p);
}

static void hf_seeds(void) {
    const GPTConfig gpt2 = tiny_config();
    GPTConfig llama = {.max_T = 4, .V = 5, .Vp = 8, .L = 1, .NH = 2, .C = 4, .kv_heads = 1,
                       .rope_theta = 10000, .rope_scaling = ROPE_SCALING_YARN, .rope_factor = 2,
                       .rope_original_T = 2};
    gpt_block_apply(&llama, GPT_NORM_RMSNORM, GPT_MLP_SWIGLU, 6, 0);
    hf_seed("f32", &gpt2, SAFETENSORS_F32);
    hf_seed("bf16", &gpt2, SAFETENSORS_BF16);
    hf_seed("llama", &llama, SAFETENSORS_F32);
    size_t size = 0;
    uint8_t* data = fuzz_read(seed_path("hf_import", "f32"), &size);
    CHECK(data, "", "cannot read the f32 seed back");
    free(data);
    variant("hf_import", "f32", "f32_truncated", size - 1, -1, 0);
}

// Multiple-choice eval files: three examples of 4, 2 and 3 completions, and near misses.
static void mc_eval_seeds(void) {
    McEvalSet s;
    memset(&s, 0, sizeof s);
    const int32_t ctx[] = {464, 3797, 3332, 319, 257, 50256}, a[] = {2603, 13}, b[] = {9}, c[] = {1, 2, 3};
    const int32_t* comp[] = {a, b, c, a};
    const int len[] = {2, 1, 3, 2};
    mc_eval_append(&s, 3, ctx, 6, 4, comp, len);
    mc_eval_append(&s, 0, ctx + 2, 1, 2, comp + 1, len + 1);
    mc_eval_append(&s, 1, ctx, 3, 3, comp, len);
    char err[ERR_LEN];
    check_written(mc_eval_write(seed_path("mc_eval", "three"), &s, err, sizeof err), err);
    size_t size = 0;
    uint8_t* data = fuzz_read(seed_path("mc_eval", "three"), &size);
    CHECK(data, "", "cannot read the mc_eval seed back");
    free(data);
    variant("mc_eval", "three", "truncated", size - 2, -1, 0);
    variant("mc_eval", "three", "bad_version", size, 4, 2);
    variant("mc_eval", "three", "more_examples", size, 8, 4);
    variant("mc_eval", "three", "label_past_end", size, 1024 + 6, 0x00040004u);   // label 4, 4 completions
    mc_eval_free(&s);
}

int main(int argc, char** argv) {
    if (argc != 2) fail_msg("usage: write_seeds DIR");
    out_dir = argv[1];
    shard_seeds();
    model_seeds();
    state_seeds();
    tokenizer_seeds();
    hf_seeds();
    mc_eval_seeds();
    return 0;
}
