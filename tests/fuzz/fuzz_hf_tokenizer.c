// Hugging Face tokenizer.json files (data/hf_tokenizer.c) and the encoder built on them
// (data/bpe.c). Input: tokenizer.json, a NUL byte, tokenizer_config.json (none when empty), a NUL
// byte, then a text. An accepted file is a consistent vocabulary, the encoder takes it, and with
// it the text encodes and decodes back to itself (data/bpe.h).
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "comm/fail.h"
#include "data/bpe.h"
#include "data/hf_tokenizer.h"
#include "tests/fuzz/fuzz_bpe_check.h"
#include "tests/fuzz/fuzz_file.h"

int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size);

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
    fuzz_expect(v.pattern != NULL, "no pattern");
    fuzz_check_vocab(&v);
    bpe_vocab_free(&v);
    BpeEncoder* enc = bpe_encoder_load(path, err, sizeof err);
    if (!enc) {  // only the pattern may still be refused, by PCRE2
        fuzz_expect(strstr(err, "pre-tokenizer pattern") != NULL,
                    "bpe_encoder_load refused a tokenizer.json hf_tokenizer_load accepted");
        fuzz_expect_error_line(err);
        return 0;
    }
    const uint8_t* text = nparts > 2 ? part[2] : data;
    TokenBuf ids = {0};
    if (bpe_encode(enc, text, len[2], &ids, err, sizeof err) == 0) {
        uint8_t* back = NULL;
        size_t back_len = 0;
        fuzz_expect(bpe_decode(bpe_encoder_tokens(enc), ids.ids, ids.n, &back, &back_len, err,
                               sizeof err) == 0, "bpe_decode refused ids from bpe_encode");
        fuzz_expect(back_len == len[2] && memcmp(back, text, len[2]) == 0,
                    "decode(encode(text)) is not the text");
        free(back);
    } else {  // a pattern that matches the empty string, or exhausts PCRE2
        fuzz_expect_error_line(err);
    }
    token_buf_free(&ids);
    bpe_encoder_free(enc);
    return 0;
}
