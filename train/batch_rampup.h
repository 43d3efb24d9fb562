// Batch-size ramp-up (--rampup-batch-tokens 'START INCREMENT TOKENS'), as the GPT-3 paper trains
// ("the batch size increased linearly from a small value (32k tokens) to the full value over the
// first 4-12 billion tokens") and Megatron-LM's --rampup-batch-size START INCREMENT SAMPLES
// counts it, in tokens: a step's batch is START + k INCREMENT tokens, k = floor(trained n /
// TOKENS) for the tokens trained before the step (n = (--total-batch-tokens - START) /
// INCREMENT increments, one after each n-th of TOKENS), --total-batch-tokens from TOKENS trained
// tokens on. What a step trains depends only on the tokens trained before it, which the data
// loader's position holds: a resumed run goes on with the batch the uninterrupted one would take.
#pragma once
#include <stddef.h>
#include <stdint.h>

// Bounds on the value: TOKENS, so that sums of steps stay far from int64's limit; the increments,
// so that walking the ramp's batches (once per step, for the ETA) stays cheap.
#define RAMPUP_MAX_TOKENS 1000000000000000000LL
#define RAMPUP_MAX_INCREMENTS 1000000

typedef struct {
    int64_t start, increment, tokens;   // START, INCREMENT, TOKENS; tokens 0: no ramp-up
    int64_t total;                      // --total-batch-tokens: the batch after the ramp
    int64_t increments;                 // n = (total - start) / increment
} BatchRampup;

// Reads --rampup-batch-tokens' value ("" or NULL: no ramp-up, every step `total` tokens) for
// micro-batches of `micro` tokens over all data-parallel ranks (batch x seq-len x dp) and steps of
// `total` tokens (total_given 0: --total-batch-tokens took its default, one micro-batch). Returns
// 0, or -1 with a one-line message in err naming the flag, what was expected and what was found.
int batch_rampup_parse(const char* value, int64_t micro, int64_t total, int total_given,
                       BatchRampup* r, char* err, size_t errlen);
// 1 when the batch ramps up.
static inline int batch_rampup_on(const BatchRampup* r) { return r->tokens > 0; }
// The tokens of the step that begins after `trained` tokens of training.
int64_t batch_rampup_step_tokens(const BatchRampup* r, int64_t trained);
// The tokens that `steps` steps beginning after `trained` tokens train in all (INT64_MAX when
// more).
int64_t batch_rampup_tokens_of_steps(const BatchRampup* r, int64_t trained, int64_t steps);
// The steps of a run from its start that train fewer tokens than --total-batch-tokens (0: none).
int64_t batch_rampup_steps(const BatchRampup* r);
// The fewest steps from a run's start that train at least `tokens` (> 0) tokens (--train-tokens).
int64_t batch_rampup_steps_for_tokens(const BatchRampup* r, int64_t tokens);
