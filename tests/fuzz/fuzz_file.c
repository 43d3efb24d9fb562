#include "tests/fuzz/fuzz_file.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "comm/fail.h"

static char scratch_dir[256];
static char scratch_path[512];

static void remove_scratch(void) {
    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", scratch_dir);
    if (system(cmd) != 0) fprintf(stderr, "fuzz: could not remove %s\n", scratch_dir);
}

static void abort_on_fail(int exit_code) {
    (void)exit_code;
    abort();
}

const char* fuzz_dir(void) {
    if (scratch_dir[0]) return scratch_dir;
    const char* tmp = getenv("TMPDIR");
    snprintf(scratch_dir, sizeof scratch_dir, "%s/fuzz-XXXXXX", tmp && tmp[0] ? tmp : "/tmp");
    CHECK(mkdtemp(scratch_dir), "set TMPDIR to a writable directory",
          "cannot create a scratch directory %s: %s", scratch_dir, strerror(errno));
    atexit(remove_scratch);
    fail_set_hook(abort_on_fail);
    return scratch_dir;
}

const char* fuzz_file(const char* name, const uint8_t* data, size_t size) {
    snprintf(scratch_path, sizeof scratch_path, "%s/%s", fuzz_dir(), name);
    int fd = open(scratch_path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    CHECK(fd >= 0, "", "cannot create %s: %s", scratch_path, strerror(errno));
    for (size_t done = 0; done < size;) {
        ssize_t w = write(fd, data + done, size - done);
        if (w < 0 && errno == EINTR) continue;
        CHECK(w > 0, "is the scratch file system full?", "cannot write %s: %s", scratch_path,
              strerror(errno));
        done += (size_t)w;
    }
    CHECK(close(fd) == 0, "", "cannot close %s: %s", scratch_path, strerror(errno));
    return scratch_path;
}

uint8_t* fuzz_read(const char* path, size_t* size) {
    FILE* f = fopen(path, "rb");
    if (!f) return NULL;
    size_t cap = 1 << 12, n = 0;
    uint8_t* buf = xmalloc(cap, "a fuzz input");
    for (size_t got; (got = fread(buf + n, 1, cap - n, f)) > 0;) {
        n += got;
        if (n < cap) continue;
        cap *= 2;
        uint8_t* grown = realloc(buf, cap);
        CHECK(grown, "", "out of memory reading %s (%zu bytes)", path, n);
        buf = grown;
    }
    const int failed = ferror(f);
    fclose(f);
    if (failed) {
        free(buf);
        return NULL;
    }
    *size = n;
    return buf;
}

size_t fuzz_split(const uint8_t* data, size_t size, size_t max_parts, const uint8_t** part,
                  size_t* len) {
    size_t n = 0, start = 0;
    for (size_t i = 0; i < size && n + 1 < max_parts; i++) {
        if (data[i] != 0) continue;
        part[n] = data + start;
        len[n++] = i - start;
        start = i + 1;
    }
    part[n] = data + start;
    len[n++] = size - start;
    return n;
}

void fuzz_expect(int ok, const char* what) {
    if (ok) return;
    fprintf(stderr, "fuzz: %s\n", what);
    abort();
}

void fuzz_expect_error_line(const char* err) {
    fuzz_expect(err[0] != 0, "a reader failed without a message");
    fuzz_expect(strchr(err, '\n') == NULL, "a reader's error message spans several lines");
}
