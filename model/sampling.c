#include "model/sampling.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "comm/fail.h"

uint64_t splitmix64(uint64_t* state) {
    uint64_t z = (*state += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

void token_sampler_create(TokenSampler* s, int V) {
    s->V = V;
    s->probs = xmalloc(sizeof(float) * V, "sample probabilities");
    s->order = xmalloc(sizeof(int) * V, "sample order");
}

void token_sampler_free(TokenSampler* s) {
    free(s->probs);
    free(s->order);
    memset(s, 0, sizeof *s);
}

static int cmp_desc_prob(const void* a, const void* b, void* probs) {
    const float x = ((const float*)probs)[*(const int*)a], y = ((const float*)probs)[*(const int*)b];
    return (x < y) - (x > y);
}

static int argmax(const float* logits, int V) {
    int best = 0;
    for (int v = 1; v < V; v++) best = logits[v] > logits[best] ? v : best;
    return best;
}

int token_sampler_draw(TokenSampler* s, const float* logits, const SamplingConfig* cfg,
                       uint64_t* rng) {
    const int V = s->V;
    if (cfg->temperature <= 0) return argmax(logits, V);
    double maxl = -INFINITY;
    for (int v = 0; v < V; v++) maxl = logits[v] > maxl ? logits[v] : maxl;
    double sum = 0;
    for (int v = 0; v < V; v++) {
        s->probs[v] = (float)exp((logits[v] - maxl) / cfg->temperature);
        sum += s->probs[v];
    }
    int n = V;
    const int restrict_k = cfg->top_k > 0 && cfg->top_k < V, restrict_p = cfg->top_p < 1;
    if (restrict_k || restrict_p) {
        for (int v = 0; v < V; v++) s->order[v] = v;
        qsort_r(s->order, (size_t)V, sizeof(int), cmp_desc_prob, s->probs);
        if (restrict_k) {
            n = cfg->top_k;
            sum = 0;
            for (int i = 0; i < n; i++) sum += s->probs[s->order[i]];
        }
        if (restrict_p) {
            // The shortest prefix of the sorted tokens holding top_p of the remaining mass.
            const double want = cfg->top_p * sum;
            double acc = 0;
            int keep = 0;
            while (keep < n && (keep == 0 || acc < want)) acc += s->probs[s->order[keep++]];
            n = keep;
            sum = acc;
        }
    }
    const int sorted = restrict_k || restrict_p;
    const double u = (splitmix64(rng) >> 11) * 0x1.0p-53 * sum;
    double acc = 0;
    for (int i = 0; i < n; i++) {
        const int v = sorted ? s->order[i] : i;
        acc += s->probs[v];
        if (u < acc) return v;
    }
    return sorted ? s->order[n - 1] : V - 1;
}
