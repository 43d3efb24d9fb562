// Replays inputs through a fuzz target without libFuzzer: `replay_TARGET PATH...` calls
// LLVMFuzzerTestOneInput once per file (a directory: every file in it, by name). Linked with
// gcc's sanitizers, so `make test` re-checks the seed corpora and every input that once failed.
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "comm/fail.h"
#include "tests/fuzz/fuzz_file.h"

int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size);
const char* __asan_default_options(void);

// As `make fuzz` runs libFuzzer (-malloc_limit_mb=64): an input of a few KB that makes a reader
// allocate more is a finding here too, and so is a leak.
const char* __asan_default_options(void) { return "max_allocation_size_mb=64:detect_leaks=1"; }

static int replay_file(const char* path) {
    size_t size = 0;
    uint8_t* data = fuzz_read(path, &size);
    if (!data) fail_msg("%s: cannot read the input", path);
    fprintf(stderr, "replay: %s (%zu bytes)\n", path, size);
    LLVMFuzzerTestOneInput(data, size);
    free(data);
    return 1;
}

static int by_name(const struct dirent** a, const struct dirent** b) {
    return strcmp((*a)->d_name, (*b)->d_name);
}

static int replay_dir(const char* dir) {
    struct dirent** names;
    const int n = scandir(dir, &names, NULL, by_name);
    CHECK(n >= 0, "", "cannot list %s", dir);
    int count = 0;
    for (int i = 0; i < n; i++) {
        char path[4096];
        snprintf(path, sizeof path, "%s/%s", dir, names[i]->d_name);
        struct stat st;
        if (names[i]->d_name[0] != '.' && stat(path, &st) == 0 && S_ISREG(st.st_mode))
            count += replay_file(path);
        free(names[i]);
    }
    free(names);
    return count;
}

int main(int argc, char** argv) {
    if (argc < 2) fail_msg("usage: %s FILE_OR_DIR...", argv[0]);
    int count = 0;
    for (int i = 1; i < argc; i++) {
        struct stat st;
        if (stat(argv[i], &st) != 0) fail_msg("%s: no such file or directory", argv[i]);
        count += S_ISDIR(st.st_mode) ? replay_dir(argv[i]) : replay_file(argv[i]);
    }
    if (count == 0) fail_msg("no inputs under %s ...: expected at least one file", argv[1]);
    printf("replayed %d inputs\n", count);
    return 0;
}
