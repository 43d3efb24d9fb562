// GPT-2 vocabulary files (data/bpe_vocab.c) and the encoder built on them (data/bpe.c).
// Input: encoder.json, a NUL byte, vocab.bpe, a NUL byte, then a text. An accepted vocabulary
// is consistent, and with it the text encodes and decodes back to itself (data/bpe.h).
#include <stdlib.h>
#include <string.h>

#include "comm/fail.h"
#include "data/bpe.h"
#include "data/bpe_vocab.h"
#include "tests/fuzz/fuzz_bpe_check.h"
#include "tests/fuzz/fuzz_file.h"

int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size);

static void check_encoder(const char* dir, const uint8_t* text, size_t len) {
    char err[ERR_LEN] = "";
    BpeEncoder* enc = bpe_encoder_load(dir, err, sizeof err);
    fuzz_expect(enc != NULL, "bpe_encoder_load refused a vocabulary bpe_vocab_load accepted");
    TokenBuf ids = {0};
    fuzz_expect(bpe_encode(enc, text, len, &ids, err, sizeof err) == 0, "bpe_encode failed");
    uint8_t* back = NULL;
    size_t back_len = 0;
    fuzz_expect(bpe_decode(bpe_encoder_tokens(enc), ids.ids, ids.n, &back, &back_len, err,
                           sizeof err) == 0, "bpe_decode refused ids from bpe_encode");
    fuzz_expect(back_len == len && memcmp(back, text, len) == 0,
                "decode(encode(text)) is not the text");
    free(back);
    token_buf_free(&ids);
    bpe_encoder_free(enc);
}

int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    const uint8_t* part[3];
    size_t len[3] = {0, 0, 0};
    const size_t nparts = fuzz_split(data, size, 3, part, len);
    fuzz_file("encoder.json", part[0], len[0]);
    fuzz_file("vocab.bpe", nparts > 1 ? part[1] : data, len[1]);
    char err[ERR_LEN] = "";
    BpeVocab v;
    if (bpe_vocab_load(fuzz_dir(), &v, err, sizeof err) != 0) {
        fuzz_expect_error_line(err);
        return 0;
    }
    fuzz_expect(v.table.eot_id < v.table.vocab_size, "the end-of-text id is not a token");
    fuzz_check_vocab(&v);
    bpe_vocab_free(&v);
    check_encoder(fuzz_dir(), nparts > 2 ? part[2] : data, len[2]);
    return 0;
}
