// Generation with a KV cache over 1 or P sequence-parallel ranks, written once against
// model/gpt.h (any backend): prefill runs the prompts through a distributed schedule (or the
// single-device layer) that also fills this rank's cache shard; each decode step runs the model on
// one token of each of up to B sequences (a model of T = 1 sharing the parameters, each row at its
// own sequence's position) whose attention layer is the decode layer of attention/kv_cache.h, so
// a token costs O(context), not a forward over the whole context.
#pragma once
#include "attention/kv_cache.h"
#include "model/gpt.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum {
    PREFILL_2D, PREFILL_2D_OVERLAP, PREFILL_STRIPED,   // the cyclic layout
    PREFILL_RING,                                      // contiguous chunks
    PREFILL_ZIGZAG,                                    // chunks r and 2P-1-r
    PREFILL_ULYSSES,                                   // the cyclic layout, heads over ranks
    PREFILL_USP,   // cyclic, rank (r, c) at c + pkv r; heads over the column, a ring on the row
} PrefillSchedule;

typedef struct {
    GPTConfig cfg;
    Comm* comm;               // NULL: one process
    int P, rank;              // SP group; rank: this rank's place in the prefill's layout
    PrefillSchedule prefill;  // the schedule over P > 1 ranks (P = 1: the single-device layer)
    int a2a_chunks;           // ulysses and usp: chunks of heads (attention_ulysses_create)
    KVCache cache;
    DecodeLayer* decode;
    GPT model;                // owns the parameters; decodes one token of up to B sequences (T = 1)
    float* logits;            // (B, V) host copy of the last decode's logits
    AttentionLayer* full_attention;   // the reference without a cache (generator_full_logits)
    GPT full;
} Generator;

// B: sequences the cache holds; params: gpt_num_params(cfg) floats on the host.
void generator_create(Generator* g, const GPTConfig* cfg, const float* params, int B, Comm* comm,
                      PrefillSchedule prefill, int a2a_chunks, DecodeAlgorithm decode);
void generator_free(Generator* g);
// Prefills sequence b with tokens[b][0 .. len[b]) (len[b] >= 0, < max_T) on every rank together;
// the cache then holds their K/V. Replaces what the cache held.
void generator_prefill(Generator* g, const int* const* tokens, const int* len);
// One decode step of n distinct sequences in one forward: feeds tokens[i] as sequence seq[i]'s
// next token (at position g->cache.len[seq[i]]), appends their K/V and returns the logits of the
// following tokens (g->logits, n rows of V floats). Every rank calls it together.
const float* generator_decode_batch(Generator* g, int n, const int* seq, const int* tokens);
// The same for one sequence b (V floats).
const float* generator_decode(Generator* g, int b, int token);
// The attention bytes SP rank g->rank must receive for decoding sequence b's token at position pos
// (attention/dist_cost.h's formulas with this backend's element sizes, all layers); a step of n
// sequences receives the sum of theirs.
long long generator_decode_bytes(const Generator* g, int b, int pos);
// The reference: logits after tokens[0 .. n) by one forward over all n tokens, no cache
// (one process only). Returns g->logits.
const float* generator_full_logits(Generator* g, const int* tokens, int n);

#ifdef __cplusplus
}
#endif
