// The parts of a tokenizer.json that data/hf_tokenizer.c interprets, read as the file writes them:
// the model's vocabulary, merges and flags, the added tokens, and the normalizer, pre-tokenizer
// and decoder as steps. Token texts stay as the file spells them (UTF-8); nothing here decides
// what is supported, only whether the JSON has the shapes the tokenizers library writes.
#pragma once
#include <stddef.h>
#include <stdint.h>

#define HF_MAX_STEPS 4

typedef struct HfText {
    uint32_t off, len;  // at HfTokenizerFile.text[off .. off + len), never empty
} HfText;

typedef struct HfEntry {
    uint32_t id;
    HfText text;
    int special;  // added tokens: their "special" (-1 when absent); vocabulary entries: 0
    // Added tokens' other flags as the file has them (1, 0, or -1 when absent).
    int single_word, lstrip, rstrip, normalized;
} HfEntry;

typedef struct HfMerge {
    HfText left, right;
} HfMerge;

// One normalizer, pre-tokenizer or decoder step. Fields its object does not have stay "" or -1.
typedef struct HfStep {
    char type[32];
    char* regex;             // pattern {"Regex": ...} (malloc'd), or NULL
    char string[32];         // pattern {"String": ...}
    int has_string;
    char behavior[32], prepend[16], content[16], replacement[16], prepend_scheme[16];
    int invert, add_prefix_space, use_regex, split;
    int start, stop;         // Strip's: characters taken from each end (-1 when absent)
} HfStep;

// A normalizer, pre-tokenizer or decoder: absent (null or missing), one step, or a Sequence.
typedef struct HfComponent {
    int present;
    HfStep top;                   // the object itself (type "Sequence" for a sequence)
    HfStep steps[HF_MAX_STEPS];   // a Sequence's steps
    int nsteps;
} HfComponent;

typedef struct HfTokenizerFile {
    uint8_t* text;  // every token's text, back to back
    size_t text_len, text_cap;
    HfEntry *vocab, *added;
    size_t nvocab, vocab_cap, nadded, added_cap;
    HfMerge* merges;
    size_t nmerges, merges_cap;
    HfComponent normalizer, pre_tokenizer, decoder;
    int have_model;
    char model_type[32];
    int byte_fallback, ignore_merges;   // -1 when absent
    int dropout;                        // a value other than null
    char affix[40];                     // a non-empty continuing_subword_prefix or
                                        // end_of_word_suffix: "KEY \"VALUE\"", else ""
} HfTokenizerFile;

// Reads PATH. Returns 0, or -1 with one line in err ("PATH: KEY: ...") and nothing allocated.
int hf_tokenizer_file_read(const char* path, HfTokenizerFile* f, char* err, size_t errlen);
void hf_tokenizer_file_free(HfTokenizerFile* f);

// "NFC", "Sequence [Prepend, Replace]": what a component is, for messages.
void hf_component_describe(const HfComponent* c, char* out, size_t n);
