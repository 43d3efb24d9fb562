// Token shards (data/shard.c): probe, whole-file read and memory map must agree on every input,
// with and without the vocabulary check.
#include <stdlib.h>
#include <string.h>

#include "comm/fail.h"
#include "data/shard.h"
#include "tests/fuzz/fuzz_file.h"

int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size);

// Reads the shard both ways and checks they agree; returns whether it was accepted.
static int read_both_ways(const char* path, int vocab_size) {
    char err_read[ERR_LEN] = "", err_map[ERR_LEN] = "";
    uint32_t* tokens = NULL;
    size_t ntok = 0;
    ShardView view;
    const int rc_read = shard_read(path, vocab_size, &tokens, &ntok, err_read, sizeof err_read);
    const int rc_map = shard_map(path, vocab_size, &view, err_map, sizeof err_map);
    fuzz_expect(rc_read == rc_map, "shard_read and shard_map disagree on acceptance");
    if (rc_read != 0) {
        fuzz_expect_error_line(err_read);
        fuzz_expect(strcmp(err_read, err_map) == 0, "shard_read and shard_map report differently");
        fuzz_expect(view.map == NULL, "a refused shard_map left a mapping");
        return 0;
    }
    fuzz_expect(view.ntok == ntok, "shard_read and shard_map count different tokens");
    for (size_t i = 0; i < ntok; i++) {
        const uint32_t t = shard_token(&view, i);
        fuzz_expect(t == tokens[i], "shard_read and shard_map read different tokens");
        fuzz_expect(vocab_size <= 0 || t < (uint32_t)vocab_size, "a token beyond the vocabulary");
    }
    shard_unmap(&view);
    free(tokens);
    return 1;
}

int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    const char* path = fuzz_file("shard.bin", data, size);
    char err[ERR_LEN] = "";
    size_t ntok = 0;
    int width = 0;
    const int probed = shard_probe(path, &ntok, &width, err, sizeof err) == 0;
    if (!probed) fuzz_expect_error_line(err);
    else fuzz_expect((width == 2 || width == 4) && 1024 + ntok * (size_t)width == size,
                     "shard_probe accepted a header that does not match the file size");
    // Without a vocabulary only the header decides; with GPT-2's, the tokens too.
    fuzz_expect(read_both_ways(path, 0) == probed, "shard_probe and shard_read disagree");
    read_both_ways(path, 50257);
    return 0;
}
