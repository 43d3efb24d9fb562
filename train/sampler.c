#include "train/sampler.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "comm/fail.h"
#include "model/backend.h"

static uint64_t splitmix64(uint64_t* state) {
    uint64_t z = (*state += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

void sampler_create(Sampler* s, const GPT* trainer_model, int max_len) {
    memset(s, 0, sizeof *s);
    const int V = trainer_model->cfg.V;
    s->max_len = max_len < trainer_model->cfg.max_T ? max_len : trainer_model->cfg.max_T;
    s->attention = attention_local_create(1, s->max_len, trainer_model->cfg.NH,
                                         trainer_model->cfg.C / trainer_model->cfg.NH);
    gpt_create_shared(&s->model, trainer_model, 1, s->max_len, s->attention);
    s->tokens = xmalloc(sizeof(int) * s->max_len, "sample tokens");
    s->probs = xmalloc(sizeof(float) * V, "sample probabilities");
    s->logits = xmalloc(sizeof(float) * V, "sample logits");
    s->order = xmalloc(sizeof(int) * V, "sample order");
}

void sampler_free(Sampler* s) {
    gpt_free(&s->model);
    attention_layer_free(s->attention);
    free(s->tokens);
    free(s->probs);
    free(s->logits);
    free(s->order);
    memset(s, 0, sizeof *s);
}

static int cmp_desc_prob(const void* a, const void* b, void* probs) {
    const float x = ((const float*)probs)[*(const int*)a], y = ((const float*)probs)[*(const int*)b];
    return (x < y) - (x > y);
}

// Draws from softmax(logits / temperature) restricted to the top_k most likely tokens.
static int draw(Sampler* s, const float* logits, int V, double temperature, int top_k,
                uint64_t* rng) {
    double maxl = -INFINITY;
    for (int v = 0; v < V; v++) maxl = logits[v] > maxl ? logits[v] : maxl;
    double sum = 0;
    for (int v = 0; v < V; v++) {
        s->probs[v] = (float)exp((logits[v] - maxl) / temperature);
        sum += s->probs[v];
    }
    int n = V;
    if (top_k > 0 && top_k < V) {
        for (int v = 0; v < V; v++) s->order[v] = v;
        qsort_r(s->order, (size_t)V, sizeof(int), cmp_desc_prob, s->probs);
        n = top_k;
        sum = 0;
        for (int i = 0; i < n; i++) sum += s->probs[s->order[i]];
    }
    const double u = (splitmix64(rng) >> 11) * 0x1.0p-53 * sum;
    double acc = 0;
    for (int i = 0; i < n; i++) {
        const int v = n == V ? i : s->order[i];
        acc += s->probs[v];
        if (u < acc) return v;
    }
    return n == V ? V - 1 : s->order[n - 1];
}

int sampler_generate(Sampler* s, const int* prompt, int nprompt, int length, double temperature,
                     int top_k, uint64_t* rng, int* out) {
    const int V = s->model.cfg.V;
    int n = nprompt < s->max_len ? nprompt : s->max_len;
    memcpy(s->tokens, prompt, sizeof(int) * n);
    int generated = 0;
    while (generated < length && n < s->max_len) {
        // Causal: the logits at position n-1 depend on tokens 0..n-1 only.
        s->model.T = n;
        gpt_forward(&s->model, s->tokens, NULL);
        gpt_logits_row_to_host(&s->model, n - 1, s->logits);   // backend memory -> host
        const int tok = draw(s, s->logits, V, temperature, top_k, rng);
        s->tokens[n++] = tok;
        out[generated++] = tok;
    }
    s->model.T = s->max_len;
    return generated;
}
