// Hugging Face GPT-2 directories (checkpoints/hf_import.c, with the safetensors and JSON readers
// under it). Input: config.json, a NUL byte, then model.safetensors. An accepted directory has a
// valid shape and finite parameters, and exporting them (checkpoints/hf_export.c) and importing
// that again gives back the same parameters, bit for bit.
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "checkpoints/hf_export.h"
#include "checkpoints/hf_import.h"
#include "comm/fail.h"
#include "model/gpt.h"
#include "tests/fuzz/fuzz_file.h"

int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    const uint8_t* part[2];
    size_t len[2];
    if (fuzz_split(data, size, 2, part, len) != 2) return 0;
    fuzz_file("config.json", part[0], len[0]);
    fuzz_file("model.safetensors", part[1], len[1]);
    char err[ERR_LEN] = "", dir[512];
    snprintf(dir, sizeof dir, "%s", fuzz_dir());
    GPTConfig cfg;
    float* params = NULL;
    if (hf_import(dir, &cfg, &params, err, sizeof err) != 0) {
        fuzz_expect(params == NULL, "hf_import failed but left parameters allocated");
        fuzz_expect_error_line(err);
        return 0;
    }
    char why[ERR_LEN];
    fuzz_expect(gpt_config_validate(&cfg, why, sizeof why) == 0, "hf_import accepted an invalid shape");
    const size_t n = gpt_num_params(&cfg);
    for (size_t i = 0; i < n; i++) fuzz_expect(isfinite(params[i]), "hf_import accepted a non-finite value");
    char again[600];
    snprintf(again, sizeof again, "%s/again", dir);
    const HfExportOptions o = {SAFETENSORS_F32, NULL, -1};
    fuzz_expect(hf_export(again, &cfg, params, &o, NULL, err, sizeof err) == 0,
                "hf_export failed on what hf_import read");
    GPTConfig cfg2;
    float* params2 = NULL;
    fuzz_expect(hf_import(again, &cfg2, &params2, err, sizeof err) == 0,
                "hf_import refused what hf_export wrote");
    fuzz_expect(!memcmp(&cfg, &cfg2, sizeof cfg) && !memcmp(params, params2, n * sizeof *params),
                "an export imported again gave other parameters");
    free(params);
    free(params2);
    return 0;
}
