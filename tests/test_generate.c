// Generation with the KV cache against generation by full recomputation on one process: random
// models, a batch of prompts of different lengths (1 token included) decoded interleaved, greedy
// and sampled. Each step's logits must agree to 1e-5 (fp32) and the token sequences must be equal.
// Also the token sampler's greedy / top-k / top-p limits.
//   test_generate                                    the checks above
//   test_generate --write-model PATH --vocab V --context T [--layers L --channels C --heads NH]
//                 [--seed S] [--bf16]                a random model file for the CLI tests
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "checkpoints/model_file.h"
#include "comm/fail.h"
#include "inference/generator.h"
#include "model/init.h"
#include "model/sampling.h"

static const double TOLERANCE = 1e-5;
static int failures = 0;

static void expect(int ok, const char* what) {
    printf("  %s  %s\n", ok ? "ok  " : "FAIL", what);
    failures += !ok;
}

// Generates max_new tokens for each prompt, interleaving the sequences step by step as
// build/generate does, with the cache (cached = 1) or by recomputation; the logits of every step
// go to logits (steps x V), the sequences to seq. Returns the number of steps.
static int run(Generator* g, int cached, int B, int* const* prompt, const int* len, int max_new,
               const SamplingConfig* sc, int** seq, float* logits) {
    const int V = g->cfg.V;
    TokenSampler s;
    token_sampler_create(&s, V);
    uint64_t rng = 42;
    int n[64], steps = 0;
    for (int b = 0; b < B; b++) {
        memcpy(seq[b], prompt[b], sizeof(int) * len[b]);
        n[b] = len[b] - 1;
    }
    if (cached) generator_prefill(g, (const int* const*)seq, n);
    for (int i = 0; i < max_new; i++) {
        for (int b = 0; b < B; b++) {
            const float* l = cached ? generator_decode(g, b, seq[b][n[b]])
                                    : generator_full_logits(g, seq[b], n[b] + 1);
            memcpy(logits + (size_t)steps++ * V, l, sizeof(float) * V);
            seq[b][++n[b]] = token_sampler_draw(&s, l, sc, &rng);
        }
    }
    token_sampler_free(&s);
    return steps;
}

static void compare(const GPTConfig* cfg, int B, const int* len, int max_new,
                    const SamplingConfig* sc, const char* what) {
    float* params = (float*)xmalloc(sizeof(float) * gpt_num_params(cfg), "params");
    gpt_init_params(cfg, 7, GPT_INIT_STD, params);
    Generator g;
    generator_create(&g, cfg, params, B, NULL, PREFILL_2D, 1, DECODE_TREE);
    int *prompt[8], *a[8], *b2[8];
    for (int b = 0; b < B; b++) {
        prompt[b] = (int*)xmalloc(sizeof(int) * len[b], "prompt");
        for (int i = 0; i < len[b]; i++) prompt[b][i] = (b * 131 + i * 17 + 5) % cfg->V;
        a[b] = (int*)xmalloc(sizeof(int) * cfg->max_T, "seq");
        b2[b] = (int*)xmalloc(sizeof(int) * cfg->max_T, "seq");
    }
    const size_t cap = (size_t)B * max_new * cfg->V;
    float* la = (float*)xmalloc(sizeof(float) * cap, "logits");
    float* lb = (float*)xmalloc(sizeof(float) * cap, "logits");
    const int steps = run(&g, 1, B, prompt, len, max_new, sc, a, la);
    run(&g, 0, B, prompt, len, max_new, sc, b2, lb);
    double err = 0, scale = 0;
    for (size_t i = 0; i < (size_t)steps * cfg->V; i++) {
        err = fmax(err, fabs((double)la[i] - lb[i]));
        scale = fmax(scale, fabs((double)lb[i]));
    }
    int same = 1;
    for (int b = 0; b < B; b++)
        same &= memcmp(a[b], b2[b], sizeof(int) * (len[b] + max_new)) == 0;
    char line[256];
    snprintf(line, sizeof line, "%s: %d steps, max |logit diff| %.3g (max |logit| %.3g) <= %g",
             what, steps, err, scale, TOLERANCE);
    expect(err <= TOLERANCE, line);
    snprintf(line, sizeof line, "%s: KV cache tokens == recomputed tokens", what);
    expect(same, line);
    for (int b = 0; b < B; b++) free(prompt[b]), free(a[b]), free(b2[b]);
    free(la), free(lb), free(params);
    generator_free(&g);
}

static void sampler_limits(void) {
    const int V = 6;
    const float logits[6] = {0.1f, 2.0f, 1.9f, -1.0f, 1.95f, 0.0f};
    TokenSampler s;
    token_sampler_create(&s, V);
    uint64_t rng = 1;
    int greedy = 1, topk1 = 1, topp = 1, topk3 = 1, seen[6] = {0};
    for (int i = 0; i < 200; i++) {
        SamplingConfig g0 = {0, 0, 1}, k1 = {1.0, 1, 1}, p0 = {1.0, 0, 1e-6}, k3 = {1.0, 3, 1};
        greedy &= token_sampler_draw(&s, logits, &g0, &rng) == 1;
        topk1 &= token_sampler_draw(&s, logits, &k1, &rng) == 1;
        topp &= token_sampler_draw(&s, logits, &p0, &rng) == 1;
        const int t = token_sampler_draw(&s, logits, &k3, &rng);
        topk3 &= t == 1 || t == 2 || t == 4;
        seen[t]++;
    }
    expect(greedy, "sampler: temperature 0 is the argmax");
    expect(topk1, "sampler: top-k 1 is the argmax");
    expect(topp, "sampler: top-p 1e-6 is the argmax");
    expect(topk3 && seen[1] && seen[2] && seen[4], "sampler: top-k 3 draws all and only the top 3");
    token_sampler_free(&s);
}

// A test shape: context, vocabulary (padded), layers, heads, channels, window and its layers,
// key/value heads (0: one per head), rope theta (0: learned positions).
static GPTConfig shape(int max_T, int V, int L, int NH, int C, int window, int every, int kv,
                       int theta) {
    const GPTConfig c = {max_T, V, gpt_padded_vocab(V), L, NH, C, window, every, kv, theta,
                         0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0};
    return c;   // (every field: this file is C++ in the CUDA build too)
}

static int write_model(int argc, char** argv) {
    const char* path = NULL;
    GPTConfig cfg = shape(64, 512, 2, 4, 64, 0, 0, 0, 0);
    int seed = 1, version = MODEL_VERSION_FP32;
    for (int i = 1; i < argc; i++) {
        const char* a = argv[i];
        const char* v = i + 1 < argc ? argv[i + 1] : "";
        if (!strcmp(a, "--write-model")) path = v, i++;
        else if (!strcmp(a, "--vocab")) cfg.V = atoi(v), i++;
        else if (!strcmp(a, "--context")) cfg.max_T = atoi(v), i++;
        else if (!strcmp(a, "--layers")) cfg.L = atoi(v), i++;
        else if (!strcmp(a, "--channels")) cfg.C = atoi(v), i++;
        else if (!strcmp(a, "--heads")) cfg.NH = atoi(v), i++;
        else if (!strcmp(a, "--kv-heads")) cfg.kv_heads = atoi(v), i++;
        else if (!strcmp(a, "--rope-theta")) cfg.rope_theta = atoi(v), i++;
        else if (!strcmp(a, "--rope-yarn")) {   // FACTOR:ORIGINAL_CONTEXT
            cfg.rope_scaling = ROPE_SCALING_YARN;
            if (sscanf(v, "%f:%d", &cfg.rope_factor, &cfg.rope_original_T) != 2)
                fail_msg("--rope-yarn: expected FACTOR:ORIGINAL_CONTEXT, found '%s'", v);
            i++;
        } else if (!strcmp(a, "--seed")) seed = atoi(v), i++;
        else if (!strcmp(a, "--bf16")) version = MODEL_VERSION_BF16;
        else fail_msg("%s: unknown option", a);
    }
    cfg.Vp = gpt_padded_vocab(cfg.V);
    char err[ERR_LEN];
    if (gpt_config_validate(&cfg, err, sizeof err) != 0) fail_msg("%s", err);
    float* params = (float*)xmalloc(sizeof(float) * gpt_num_params(&cfg), "params");
    gpt_init_params(&cfg, (uint64_t)seed, GPT_INIT_STD, params);
    if (model_file_save(path, &cfg, params, version, err, sizeof err) != 0) fail_msg("%s", err);
    free(params);
    return 0;
}

int main(int argc, char** argv) {
    if (argc > 1) return write_model(argc, argv);
    GPTConfig cfg = shape(48, 300, 2, 2, 32, 0, 0, 0, 0);   // head size 16 (CUDA tiles)
    const int len3[3] = {1, 6, 17};
    const SamplingConfig greedy = {0, 0, 1}, sampled = {0.9, 40, 0.95};
    compare(&cfg, 3, len3, 12, &greedy, "greedy, prompts of 1, 6, 17 tokens");
    compare(&cfg, 3, len3, 12, &sampled, "temperature 0.9 top-k 40 top-p 0.95");
    const int len1[1] = {40};
    compare(&cfg, 1, len1, 7, &greedy, "greedy up to the context (48)");
    GPTConfig deep = shape(40, 200, 3, 2, 64, 0, 0, 0, 0);
    const int len2[2] = {9, 2};
    compare(&deep, 2, len2, 10, &greedy, "3 layers, 2 heads of 32");
    // Grouped-query attention: a cache of 2 key/value heads for 4 query heads of 16, and
    // multi-query attention under a window of 5 in every second layer.
    GPTConfig gqa = shape(48, 300, 2, 4, 64, 0, 0, 2, 0);
    compare(&gqa, 3, len3, 12, &greedy, "grouped-query: 4 heads, 2 key/value heads");
    GPTConfig mqa = shape(48, 300, 3, 4, 64, 5, 2, 1, 0);
    compare(&mqa, 2, len2, 10, &greedy, "multi-query, window 5 in layers 0 and 2");
    // Rotary positions: the cache holds rotated keys, each decoded token is rotated at its own
    // position (the decoding layer's row positions), and a batch of prompts of different lengths
    // decodes at different positions per row.
    GPTConfig rope = shape(48, 300, 2, 4, 64, 0, 0, 0, 10000);
    compare(&rope, 3, len3, 12, &greedy, "rotary positions, theta 10000");
    GPTConfig rope_gqa = shape(48, 300, 2, 4, 64, 5, 2, 2, 500000);
    compare(&rope_gqa, 3, len3, 12, &sampled, "rotary positions, 2 key/value heads, window 5");
    // YaRN's context extension from 12 positions: scaled frequencies and amplitude on every
    // decoded row too.
    GPTConfig yarn = shape(48, 300, 2, 4, 64, 0, 0, 0, 10000);
    yarn.rope_scaling = ROPE_SCALING_YARN, yarn.rope_factor = 4, yarn.rope_original_T = 12;
    compare(&yarn, 3, len3, 12, &greedy, "rotary positions, yarn x4 from 12");
    // QK-norm: each decoded token's query and key heads normalised before the rotation and the
    // cache, as the prefill's were: GPT's block (LayerNorm), and Qwen3's (RMSNorm, SwiGLU, no
    // linear biases, 2 key/value heads).
    GPTConfig qk = shape(48, 300, 2, 4, 64, 0, 0, 0, 10000);
    qk.qk_norm = 1;
    compare(&qk, 3, len3, 12, &greedy, "QK-norm, layernorm");
    GPTConfig qwen3 = shape(48, 300, 2, 4, 64, 0, 0, 2, 1000000);
    qwen3.norm = GPT_NORM_RMSNORM, qwen3.mlp = GPT_MLP_SWIGLU, qwen3.no_linear_bias = 1;
    qwen3.qk_norm = 1;
    compare(&qwen3, 3, len3, 12, &sampled, "QK-norm, Qwen3's block");
    sampler_limits();
    printf("%s\n", failures ? "FAILED" : "passed");
    return failures != 0;
}
