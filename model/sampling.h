// Drawing the next token from a row of logits: greedy, temperature, top-k and top-p (nucleus)
// sampling with a splitmix64 stream. Shared by the trainer's sampler and build/generate.
#pragma once
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct {
    double temperature;   // <= 0: greedy (the most likely token, the lowest id on ties)
    int top_k;            // > 0: only the k most likely tokens
    double top_p;         // < 1: only the smallest set of most likely tokens whose probability
                          // reaches top_p (after top_k)
} SamplingConfig;

// Scratch for one vocabulary size.
typedef struct {
    int V;
    float* probs;   // (V)
    int* order;     // (V) token ids by falling probability
} TokenSampler;

void token_sampler_create(TokenSampler* s, int V);
void token_sampler_free(TokenSampler* s);
// The next uniform 64-bit value of a splitmix64 stream (state advanced).
uint64_t splitmix64(uint64_t* state);
// A token id below s->V drawn from logits[0 .. V); rng is advanced unless greedy.
int token_sampler_draw(TokenSampler* s, const float* logits, const SamplingConfig* cfg,
                       uint64_t* rng);

#ifdef __cplusplus
}
#endif
