// What the byte-level BPE vocabulary readers share: GPT-2's byte alphabet (every byte spelled as
// one printable code point, the alphabet of encoder.json and of byte-level tokenizer.json files),
// strict UTF-8 decoding, and an index from token bytes to id over a token table.
#pragma once
#include <stddef.h>
#include <stdint.h>

#include "data/tokenizer_file.h"

// The alphabet maps bytes to code points below 256 + 68.
#define BPE_ALPHABET_CODE_POINTS 324

// Fills code point -> byte (-1 where a code point is not in the alphabet): bytes that are
// printable Latin-1 stand for themselves, the other 68 become U+0100.. in byte order.
void bpe_alphabet_decoder(int16_t cp_to_byte[BPE_ALPHABET_CODE_POINTS]);

// Decodes one strict UTF-8 character at p (before end); returns its length, or 0 when the bytes
// are not UTF-8 (overlong forms, surrogates and values past U+10FFFF included).
int bpe_utf8_decode(const uint8_t* p, const uint8_t* end, uint32_t* cp);

// Token bytes -> id by open addressing over a token table's arrays (not the table struct, so
// the index stays valid when the struct holding the table is copied).
typedef struct TokenIndex {
    uint32_t* slot;  // id + 1, 0 = empty
    size_t mask;
    const uint32_t* offset;
    const uint8_t* bytes;
} TokenIndex;

// An empty index with room for `capacity` ids of `table`.
void token_index_init(TokenIndex* index, const TokenTable* table, size_t capacity);
// The id whose bytes are p[0 .. n), or -1.
long token_index_find(const TokenIndex* index, const uint8_t* p, size_t n);
// Adds id; returns 0, or -1 when another id already has its bytes (the index is unchanged).
int token_index_insert(TokenIndex* index, uint32_t id);
void token_index_free(TokenIndex* index);
