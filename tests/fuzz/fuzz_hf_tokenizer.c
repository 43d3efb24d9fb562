// Hugging Face tokenizer.json files (data/hf_tokenizer.c) and the encoder built on them
// (data/bpe.c, with NFC and added tokens: data/bpe_nfc.c, data/bpe_added.c). Input:
// tokenizer.json, a NUL byte, tokenizer_config.json (none when empty), a NUL byte, then a text.
// An accepted file is a consistent vocabulary, the encoder takes it, and with it the text encodes
// and decodes back to itself (data/bpe.h; after the SentencePiece-style form's " "), unless the
// file changes text: NFC of text not in NFC, added tokens' lstrip and rstrip.
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "comm/fail.h"
#include "data/bpe.h"
#include "data/bpe_nfc.h"
#include "data/hf_tokenizer.h"
#include "tests/fuzz/fuzz_bpe_check.h"
#include "tests/fuzz/fuzz_file.h"

int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size);

// Whether the vocabulary leaves text as it is: no added token strips white space, and under NFC
// the text is NFC already.
static int keeps_text(const BpeVocab* v, const uint8_t* text, size_t len) {
    for (size_t k = 0; k < v->nadded; k++)
        if (!v->added[k].special && (v->added[k].lstrip || v->added[k].rstrip)) return 0;
    if (!v->nfc) return 1;
    char err[ERR_LEN] = "";
    BpeNfc* nfc = bpe_nfc_open(err, sizeof err);
    fuzz_expect(nfc != NULL, "ICU's NFC data did not load");
    const uint8_t* out = NULL;
    size_t out_len = 0;
    const int rc = bpe_nfc_apply(nfc, text, len, &out, &out_len, err, sizeof err);
    fuzz_expect(rc == 0, "NFC failed on a short text");
    const int same = out_len == len && memcmp(out, text, len) == 0;
    bpe_nfc_free(nfc);
    return same;
}

int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    const uint8_t* part[3];
    size_t len[3] = {0, 0, 0};
    const size_t nparts = fuzz_split(data, size, 3, part, len);
    const char* path = fuzz_file("tokenizer.json", part[0], len[0]);
    const char* config = fuzz_file("tokenizer_config.json", nparts > 1 ? part[1] : data, len[1]);
    if (len[1] == 0) unlink(config);
    char err[ERR_LEN] = "";
    BpeVocab v;
    if (hf_tokenizer_load(path, &v, err, sizeof err) != 0) {
        fuzz_expect_error_line(err);
        return 0;
    }
    fuzz_expect(v.pattern != NULL || v.sentencepiece, "no pattern");
    fuzz_check_vocab(&v);
    const uint8_t* text = nparts > 2 ? part[2] : data;
    const int exact = keeps_text(&v, text, len[2]);
    bpe_vocab_free(&v);
    BpeEncoder* enc = bpe_encoder_load(path, err, sizeof err);
    if (!enc) {  // only the pattern may still be refused, by PCRE2
        fuzz_expect(strstr(err, "pre-tokenizer pattern") != NULL,
                    "bpe_encoder_load refused a tokenizer.json hf_tokenizer_load accepted");
        fuzz_expect_error_line(err);
        return 0;
    }
    TokenBuf ids = {0};
    if (bpe_encode(enc, text, len[2], &ids, err, sizeof err) == 0) {
        uint8_t* back = NULL;
        size_t back_len = 0;
        fuzz_expect(bpe_decode(bpe_encoder_tokens(enc), ids.ids, ids.n, &back, &back_len, err,
                               sizeof err) == 0, "bpe_decode refused ids from bpe_encode");
        const char* prefix = len[2] ? bpe_encoder_decoded_prefix(enc) : "";
        const size_t np = strlen(prefix);
        fuzz_expect(!exact || (back_len == np + len[2] && memcmp(back, prefix, np) == 0 &&
                               memcmp(back + np, text, len[2]) == 0),
                    "decode(encode(text)) is not the text");
        free(back);
    } else {  // a pattern that matches the empty string, or exhausts PCRE2
        fuzz_expect_error_line(err);
    }
    token_buf_free(&ids);
    bpe_encoder_free(enc);
    return 0;
}
