#include "train/sampler.h"

#include <stdlib.h>
#include <string.h>

#include "comm/fail.h"
#include "model/backend.h"

void sampler_create(Sampler* s, const GPT* trainer_model, int max_len) {
    memset(s, 0, sizeof *s);
    const int V = trainer_model->cfg.V;
    s->max_len = max_len < trainer_model->cfg.max_T ? max_len : trainer_model->cfg.max_T;
    const GPTConfig* cfg = &trainer_model->cfg;
    s->attention = attention_local_create(1, s->max_len, cfg->NH, gpt_kv_heads(cfg), cfg->C / cfg->NH);
    gpt_create_shared(&s->model, trainer_model, 1, s->max_len, s->attention);
    s->tokens = xmalloc(sizeof(int) * s->max_len, "sample tokens");
    s->logits = xmalloc(sizeof(float) * V, "sample logits");
    token_sampler_create(&s->draw, V);
}

void sampler_free(Sampler* s) {
    gpt_free(&s->model);
    attention_layer_free(s->attention);
    free(s->tokens);
    free(s->logits);
    token_sampler_free(&s->draw);
    memset(s, 0, sizeof *s);
}

int sampler_generate(Sampler* s, const int* prompt, int nprompt, int length, double temperature,
                     int top_k, uint64_t* rng, int* out) {
    const SamplingConfig cfg = {temperature, top_k, 1.0};
    int n = nprompt < s->max_len ? nprompt : s->max_len;
    memcpy(s->tokens, prompt, sizeof(int) * n);
    int generated = 0;
    while (generated < length && n < s->max_len) {
        // Causal: the logits at position n-1 depend on tokens 0..n-1 only.
        s->model.T = n;
        gpt_forward(&s->model, s->tokens, NULL);
        gpt_logits_row_to_host(&s->model, n - 1, s->logits);   // backend memory -> host
        const int tok = token_sampler_draw(&s->draw, s->logits, &cfg, rng);
        s->tokens[n++] = tok;
        out[generated++] = tok;
    }
    s->model.T = s->max_len;
    return generated;
}
