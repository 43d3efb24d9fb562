// Text generation from the model being trained: a forward-only copy of the model on one
// sequence that shares the trainer's parameters, temperature and top-k sampling.
#pragma once
#include <stdint.h>

#include "model/gpt.h"
#include "model/sampling.h"

typedef struct {
    GPT model;                 // shares the trainer's parameters
    AttentionLayer* attention;
    int max_len;
    int* tokens;               // (max_len)
    float* logits;             // (V) host copy of the logits row being sampled from
    TokenSampler draw;         // scratch of the draws
} Sampler;

// max_len: prompt plus generated tokens, at most the model's context.
void sampler_create(Sampler* s, const GPT* trainer_model, int max_len);
void sampler_free(Sampler* s);
// Generates `length` tokens after the prompt into out (length ids). rng: splitmix64 state,
// advanced. Returns the number of tokens generated (prompt + length capped at max_len).
int sampler_generate(Sampler* s, const int* prompt, int nprompt, int length, double temperature,
                     int top_k, uint64_t* rng, int* out);
