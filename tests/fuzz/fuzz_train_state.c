// Training state files (checkpoints/train_state.c): read_info and load agree, and what loads
// saves and reads back unchanged. (The checksum keeps most mutations at the header checks; the
// seeds are files our writer made.)
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "checkpoints/train_state.h"
#include "comm/fail.h"
#include "tests/fuzz/fuzz_file.h"

int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size);

static int same_info(const TrainStateInfo* a, const TrainStateInfo* b) {
    return memcmp(a, b, offsetof(TrainStateInfo, config_json)) == 0 &&
           strcmp(a->config_json, b->config_json) == 0;
}

int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    const char* path = fuzz_file("state.bin", data, size);
    char err[ERR_LEN] = "";
    TrainStateInfo info, loaded, again;
    if (train_state_read_info(path, &info, err, sizeof err) != 0) {
        fuzz_expect_error_line(err);
        return 0;
    }
    // The sizes were checked against the file length, so these allocations are bounded by it.
    const size_t np = info.num_params, ns = info.shard_count;
    fuzz_expect(np * 4 + 2 * ns * 4 + 1024 <= size, "train_state_read_info accepted sizes "
                "larger than the file");
    float* buf = malloc((np + 2 * ns + 1) * sizeof(float));
    float *params = buf, *m = buf + np, *v = buf + np + ns;
    if (train_state_load(path, &loaded, params, m, v, err, sizeof err) != 0) {
        fuzz_expect_error_line(err);   // non-finite values
        free(buf);
        return 0;
    }
    fuzz_expect(same_info(&info, &loaded), "train_state_read_info and train_state_load differ");
    char copy[600];
    snprintf(copy, sizeof copy, "%s.copy", path);
    fuzz_expect(train_state_save(copy, &loaded, params, m, v, err, sizeof err) == 0,
                "train_state_save failed on what train_state_load read");
    float* back = malloc((np + 2 * ns + 1) * sizeof(float));
    fuzz_expect(train_state_load(copy, &again, back, back + np, back + np + ns, err,
                                 sizeof err) == 0, "a saved state does not load");
    fuzz_expect(same_info(&loaded, &again), "a saved state reads back other header fields");
    fuzz_expect(memcmp(buf, back, (np + 2 * ns) * sizeof(float)) == 0,
                "a saved state reads back other tensors");
    free(back);
    free(buf);
    return 0;
}
