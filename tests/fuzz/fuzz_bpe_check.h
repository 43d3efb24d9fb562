// The invariants of an accepted byte-level BPE vocabulary (data/bpe_vocab.h), checked by the fuzz
// targets of its two readers (fuzz_bpe_vocab.c, fuzz_hf_tokenizer.c).
#pragma once
#include <string.h>

#include "data/bpe_vocab.h"
#include "tests/fuzz/fuzz_file.h"

// Every byte has its one-byte token and every rule joins two tokens into the token of both.
static inline void fuzz_check_vocab(const BpeVocab* v) {
    const uint32_t n = v->table.vocab_size;
    fuzz_expect(v->table.eot_id < n || v->table.eot_id == TOKENIZER_NO_EOT,
                "the end-of-text id is not a token");
    for (int b = 0; b < 256; b++) {
        const uint32_t id = v->byte_token[b];
        fuzz_expect(id < n && v->table.offset[id + 1] - v->table.offset[id] == 1 &&
                    v->table.bytes[v->table.offset[id]] == b, "a byte token is not that byte");
    }
    for (size_t i = 0; i < v->nrules; i++) {
        const BpeRule* r = &v->rules[i];
        fuzz_expect(r->left < n && r->right < n && r->merged < n, "a rule names no token");
        const uint32_t ll = v->table.offset[r->left + 1] - v->table.offset[r->left];
        const uint32_t lr = v->table.offset[r->right + 1] - v->table.offset[r->right];
        const uint32_t lm = v->table.offset[r->merged + 1] - v->table.offset[r->merged];
        fuzz_expect(ll + lr == lm, "a rule's merged token is not its two parts");
    }
    for (size_t k = 0; k < v->nadded; k++) {  // tokens that split text: their ids' texts
        const BpeAddedToken* t = &v->added[k];
        fuzz_expect(t->id < n && t->len > 0 && v->added_first[v->added_text[t->off]],
                    "an added token names no token");
        fuzz_expect(v->table.offset[t->id + 1] - v->table.offset[t->id] == t->len &&
                    memcmp(v->table.bytes + v->table.offset[t->id], v->added_text + t->off,
                           t->len) == 0, "an added token is not its id's text");
        fuzz_expect(token_index_find(&v->added_index, v->added_text + t->off, t->len) == (long)k,
                    "an added token's text does not find it in the index");
    }
}
