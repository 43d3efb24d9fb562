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
    // The sizes were checked against the file length, so these allocations are bounded by it:
    // the file holds the weights of its slice (version 4) or all of them, and the slice's
    // moments. (num_params itself is bounded by the header check, 2^40.)
    const size_t np = info.num_params, ns = info.shard_count;
    const int sliced = info.version >= STATE_VERSION_SLICES;
    const size_t held = sliced ? ns : np, wb = sliced ? info.shard_begin : 0;
    fuzz_expect(held * 4 + 2 * ns * 4 + 1024 <= size, "train_state_read_info accepted sizes "
                "larger than the file");
    if (np > ((size_t)1 << 20)) return 0;   // a slice of a model larger than the fuzzer lets us hold
    float* buf = calloc(np + 2 * ns + 1, sizeof(float));
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
    float* back = calloc(np + 2 * ns + 1, sizeof(float));
    fuzz_expect(train_state_load(copy, &again, back, back + np, back + np + ns, err,
                                 sizeof err) == 0, "a saved state does not load");
    // The writer writes version 4 where there are set positions (a version 3 file comes back as
    // 4, its slice's weights alone), else the version it read.
    const int want = loaded.npositions ? STATE_VERSION_SLICES : loaded.version;
    fuzz_expect(again.version == want, "a saved state reads back another version than written");
    again.version = loaded.version;
    fuzz_expect(same_info(&loaded, &again), "a saved state reads back other header fields");
    const size_t wb2 = want >= STATE_VERSION_SLICES ? info.shard_begin : 0;
    const size_t held2 = want >= STATE_VERSION_SLICES ? ns : np;
    fuzz_expect(wb2 >= wb && wb2 + held2 <= wb + held, "a saved state holds weights it did not read");
    fuzz_expect(memcmp(buf + wb2, back + wb2, held2 * sizeof(float)) == 0 &&
                memcmp(buf + np, back + np, 2 * ns * sizeof(float)) == 0,
                "a saved state reads back other tensors");
    free(back);
    free(buf);
    return 0;
}
