// A tokenizer.json's added tokens in text (BpeVocab.added), found as the tokenizers library finds
// them before normalization and pre-tokenization (AddedVocabulary's find_matches): the leftmost
// match, the longest one there, then the search goes on after it. A special token's match is
// skipped and its text stays ordinary text: the library's encode_special_tokens (transformers'
// split_special_tokens), the rule of tiktoken's encode_ordinary and of llm.c's data scripts. A
// token with lstrip (rstrip) takes the White_Space before (after) its match into it, not back
// past the end of the previous match. The text between matches is encoded as a text of its own.
#pragma once
#include <stddef.h>
#include <stdint.h>

#include "data/bpe_vocab.h"

typedef struct BpeAddedMatch {
    size_t start, end;  // what the token takes, white space stripped into it included
    size_t next;        // where the search goes on: the end of the token's own text
    uint32_t id;
} BpeAddedMatch;

// The first match of a token that is not special, searching text[from .. len); floor: the end
// of the previous match (0 for none), which lstrip does not reach back past. Returns 1 and *m,
// or 0 when there is none.
int bpe_added_find(const BpeVocab* v, const uint8_t* text, size_t len, size_t from,
                   size_t floor, BpeAddedMatch* m);

// Whether text may be cut at `at` without changing any match: no added token's text spans the
// cut and none with rstrip ends at it (text[at] is white space it would take).
int bpe_added_cut_ok(const BpeVocab* v, const uint8_t* text, size_t len, size_t at);

// Copies the texts of v->added (each token's off into `text`) back to back into v->added_text,
// indexes them (v->added_index, v->added_lengths) and fills v->added_first. Returns -1, or the
// index in v->added of a token whose text an earlier one has too (the index then incomplete).
long bpe_added_index(BpeVocab* v, const uint8_t* text);

// Whether p[0 .. n) begins or ends with a White_Space character.
int bpe_added_space_at_ends(const uint8_t* p, size_t n);
