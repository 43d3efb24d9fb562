// Deterministic initialisation from a seed, GPT-2's scheme (Megatron-LM's with
// --init-method-std): weights ~ N(0, std^2) (std 0.02 in GPT-2), residual output projections
// (attprojw, fcprojw) ~ N(0, (std / sqrt(2L))^2), biases 0, LayerNorm weights 1.
// Every element is a pure function of (seed, tensor, element index) through a counter-based
// generator, so any rank can produce any tensor or any slice of it without generating the rest.
#pragma once
#include <stddef.h>
#include <stdint.h>

#include "model/config.h"
#include "model/real.h"

#ifdef __cplusplus
extern "C" {
#endif

// GPT-2's std of the weights (the trainer's --init-std default).
#define GPT_INIT_STD 0.02

// Fills out[0..count) with elements [start, start + count) of parameter tensor `tensor`
// (0..15 in llm.c's order, 16 the untied classifier, 17..20 QK-norm's: weights 1, biases 0). Rows V..Vp-1 of wte and of the classifier
// are zero; the classifier is drawn as wte is (N(0, std^2)), from its own stream. The same seed
// and another std give the same draws scaled by std.
void gpt_init_slice(const GPTConfig* cfg, uint64_t seed, double std, int tensor, size_t start,
                    size_t count, real* out);
// Fills a flat parameter buffer (all 21 tensors).
void gpt_init_params(const GPTConfig* cfg, uint64_t seed, double std, real* flat);
// The standard normal value, and 64 uniform bits, of counter `index` in stream `stream`.
double counter_normal(uint64_t seed, uint64_t stream, uint64_t index);
uint64_t counter_bits(uint64_t seed, uint64_t stream, uint64_t index);

#ifdef __cplusplus
}
#endif
