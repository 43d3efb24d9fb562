// Model files (checkpoints/model_file.c): an accepted header matches the file size, the
// parameters load, and saving them again in the file's precision gives back the same bytes.
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "checkpoints/model_file.h"
#include "comm/fail.h"
#include "model/gpt.h"
#include "tests/fuzz/fuzz_file.h"

int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size);

// The saved copy must equal the input, but for header fields 8..255 (unused, written as 0).
static void expect_same_file(const char* path, const uint8_t* data, size_t size) {
    size_t got = 0;
    uint8_t* copy = fuzz_read(path, &got);
    fuzz_expect(copy && got == size, "model_file_save wrote a file of another size");
    fuzz_expect(memcmp(copy, data, 8 * 4) == 0, "model_file_save wrote another header");
    fuzz_expect(memcmp(copy + 1024, data + 1024, size - 1024) == 0,
                "model_file_save wrote other parameters than were read");
    free(copy);
}

int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    const char* path = fuzz_file("model.bin", data, size);
    char err[ERR_LEN] = "";
    GPTConfig cfg;
    int version = 0;
    if (model_file_read_header(path, &cfg, &version, err, sizeof err) != 0) {
        fuzz_expect_error_line(err);
        return 0;
    }
    const size_t n = gpt_num_params(&cfg);
    fuzz_expect(1024 + n * (version == MODEL_VERSION_FP32 ? 4 : 2) == size,
                "model_file_read_header accepted a header that does not match the file size");
    float* params = malloc(n * sizeof(float));
    if (model_file_load(path, &cfg, params, err, sizeof err) != 0) {
        fuzz_expect_error_line(err);   // non-finite parameters
    } else {
        char copy[600];
        snprintf(copy, sizeof copy, "%s.copy", path);
        fuzz_expect(model_file_save(copy, &cfg, params, version, err, sizeof err) == 0,
                    "model_file_save failed on what model_file_load read");
        expect_same_file(copy, data, size);
    }
    free(params);
    return 0;
}
