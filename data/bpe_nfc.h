// Unicode NFC, the tokenizers library's normalizer {"type": "NFC"} (Qwen2's tokenizer.json), by
// ICU. Text already in NFC (nearly all text; ASCII always) is recognised by Unicode's quick check
// (UAX #15) over a table that ICU's character properties fill once, so it costs a pass over its
// bytes and no call into ICU; the rest goes through ICU's normalizer (UTF-8 -> UTF-16 -> NFC ->
// UTF-8).
//
// Invalid UTF-8 (which the library never sees: its text is a Rust string) stays byte for byte:
// each maximal run of valid UTF-8 between invalid bytes is normalized on its own, so an invalid
// byte acts as a character that nothing composes across, as U+FFFD would.
//
// A normalizer owns its buffers: use one per thread.
#pragma once
#include <stddef.h>
#include <stdint.h>

typedef struct BpeNfc BpeNfc;

// NULL with one line in err when ICU's NFC data cannot be loaded.
BpeNfc* bpe_nfc_open(char* err, size_t errlen);
void bpe_nfc_free(BpeNfc* nfc);

// The NFC of text[0 .. len): *out is text itself when the text is already NFC, else the
// normalizer's buffer (valid until the next call). Returns 0, or -1 with one line in err when an
// ICU call fails (e.g. a run of valid UTF-8 beyond ICU's 2^31 code units).
int bpe_nfc_apply(BpeNfc* nfc, const uint8_t* text, size_t len, const uint8_t** out,
                  size_t* out_len, char* err, size_t errlen);

// Whether ICU's NFC has a boundary before code point c: text may be cut before c and each part
// normalized alone (for the chunk rule's argument and its test).
int bpe_nfc_boundary_before(uint32_t c);

// ICU's version and the Unicode version of its tables ("72.1", "15.0"), for the programs' help.
void bpe_nfc_versions(char* icu, size_t icu_len, char* unicode, size_t unicode_len);

// Whether c is Unicode's White_Space (what the tokenizers library strips for an added token's
// lstrip and rstrip: Rust's char::is_whitespace), by ICU.
int bpe_white_space(uint32_t c);
