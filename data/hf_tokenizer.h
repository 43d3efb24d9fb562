// Hugging Face's tokenizer.json (the file of the `tokenizers` library, as transformers saves it
// next to a model) for BPE, in its two forms:
//   byte-level (GPT-2's, Llama 3's, Qwen2's): the pre-tokenizer ByteLevel (use_regex true,
//     add_prefix_space false: GPT-2's pattern), or Sequence [Split (a Regex, Isolated), ByteLevel
//     (use_regex false)] (Llama 3's, Qwen2's and others' own pattern); the normalizer null or NFC
//     (Qwen2's: data/bpe_nfc.h); the decoder ByteLevel;
//   SentencePiece-style (Llama 2's, Mistral 7B's): the normalizer Sequence [Prepend "\u2581",
//     Replace " " with "\u2581"] and no pre-tokenizer, or the pre-tokenizer Metaspace ("\u2581",
//     split false); byte_fallback with the 256 <0xXX> tokens; the decoder Sequence [Replace
//     "\u2581" with " ", ByteFallback, Fuse (, Strip)] or Metaspace.
// Read: the model (vocab, merges in either of the library's two forms, ignore_merges) and the
// added tokens. Special ones decode to their text and, as with tiktoken's encode_ordinary, text
// that spells one is encoded as ordinary text; the text is split around the others, as the
// library does (data/bpe_added.h: lstrip, rstrip; normalized false). Refused, each with one line
// naming the file and key: other normalizers, pre-tokenizers and decoders, BPE dropout, word
// prefixes or suffixes, added tokens that are not special with single_word or normalized true
// (transformers.js, the reference, cannot check them) or in the SentencePiece-style form. The
// JSON itself is read by data/hf_tokenizer_json.c.
//
// The pattern's \s and \S are Unicode's White_Space, as in the library's regular expression
// engine (Oniguruma) and in tiktoken; JavaScript's \s differs at U+0085 and U+FEFF.
#pragma once
#include <stddef.h>

#include "data/bpe_vocab.h"

// When path is a directory holding tokenizer.json, or a file whose name ends in ".json", puts
// the file's path in out and returns 1; otherwise returns 0.
int hf_tokenizer_locate(const char* path, char* out, size_t n);

// Reads a tokenizer.json into *vocab (free with bpe_vocab_free). The document token
// (table.eot_id, the token written before every document) is tokenizer_config.json's bos_token
// when the file's directory has one (Llama 3: <|begin_of_text|>), else its eos_token, else
// "<|endoftext|>" (GPT-2), else none (TOKENIZER_NO_EOT). Returns 0, or -1 with one line in err
// and nothing allocated.
int hf_tokenizer_load(const char* path, BpeVocab* vocab, char* err, size_t errlen);

// A tokenizer.json pattern as PCRE2 compiles it: \s and \S become White_Space classes (inside a
// class \s becomes its members; \S there is refused, as is a nested class). *out is malloc'd.
// Returns 0, or -1 with err set.
int hf_pattern_to_pcre2(const char* pattern, char** out, char* err, size_t errlen);
