// llm.c tokenizer files (data/tokenizer_file.c): an accepted table is well formed, and writing
// it again gives back a version-2 input byte for byte (any version: the same table).
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "comm/fail.h"
#include "data/tokenizer_file.h"
#include "tests/fuzz/fuzz_file.h"

int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size);

static int same_table(const TokenTable* a, const TokenTable* b) {
    return a->vocab_size == b->vocab_size && a->eot_id == b->eot_id &&
           memcmp(a->offset, b->offset, (a->vocab_size + 1) * sizeof(uint32_t)) == 0 &&
           memcmp(a->bytes, b->bytes, a->offset[a->vocab_size]) == 0;
}

int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    const char* path = fuzz_file("tokenizer.bin", data, size);
    char err[ERR_LEN] = "";
    TokenTable t;
    if (tokenizer_file_read(path, &t, err, sizeof err) != 0) {
        fuzz_expect_error_line(err);
        return 0;
    }
    fuzz_expect(t.offset[0] == 0, "the first token does not start at byte 0");
    for (uint32_t i = 0; i < t.vocab_size; i++) {
        const uint32_t len = t.offset[i + 1] - t.offset[i];
        fuzz_expect(t.offset[i + 1] > t.offset[i] && len <= 255, "a token of 0 or > 255 bytes");
    }
    fuzz_expect(size == 1024 + t.vocab_size + t.offset[t.vocab_size],
                "the table does not account for every byte of the file");
    if (t.eot_id != TOKENIZER_NO_EOT) {   // version 2 needs one
        char copy[600];
        snprintf(copy, sizeof copy, "%s.copy", path);
        fuzz_expect(tokenizer_file_write(copy, &t, err, sizeof err) == 0,
                    "tokenizer_file_write refused what tokenizer_file_read accepted");
        TokenTable back;
        fuzz_expect(tokenizer_file_read(copy, &back, err, sizeof err) == 0,
                    "a written tokenizer file does not read back");
        fuzz_expect(same_table(&t, &back), "a written tokenizer file reads back another table");
        token_table_free(&back);
        uint32_t version;
        memcpy(&version, data + 4, 4);
        if (version == TOKENIZER_VERSION) {
            size_t got = 0;
            uint8_t* bytes = fuzz_read(copy, &got);
            fuzz_expect(bytes && got == size && memcmp(bytes, data, size) == 0,
                        "a version-2 file written again differs from the input");
            free(bytes);
        }
    }
    token_table_free(&t);
    return 0;
}
