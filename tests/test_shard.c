// Token shard tests: round trips of both variants, atomic writes, and one clear error message per
// kind of bad input. Usage: test_shard [roundtrip|atomic|errors] (no argument: all).
#include "comm/fail.h"
#include "data/shard.h"

#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "tests/test_expect.h"

static char tmpdir[256];

static void path_in_tmp(char* out, size_t len, const char* name) {
    snprintf(out, len, "%s/%s", tmpdir, name);
}

static long long file_size(const char* path) {
    struct stat st;
    return stat(path, &st) == 0 ? (long long)st.st_size : -1;
}

// Writes a raw file: a header with the given fields, then `body` bytes of a token pattern.
static void write_raw(const char* path, int magic, int version, int ntok, const void* body,
                      size_t body_bytes) {
    int32_t hdr[SHARD_HEADER_INTS] = {magic, version, ntok};
    FILE* f = fopen(path, "wb");
    if (!f || fwrite(hdr, sizeof hdr, 1, f) != 1 ||
        (body_bytes && fwrite(body, 1, body_bytes, f) != body_bytes) || fclose(f) != 0) {
        fprintf(stderr, "test setup: cannot write %s: %s\n", path, strerror(errno));
        exit(2);
    }
}

// Checks that a token array survives shard_write + shard_read + shard_map + shard_probe.
static void check_roundtrip(const char* name, const uint32_t* tok, size_t n, int wide,
                            int expect_width) {
    char path[512], err[ERR_LEN] = "";
    path_in_tmp(path, sizeof path, name);
    int rc = shard_write(path, tok, n, wide, err, sizeof err);
    EXPECT(rc == 0, "%s: write %zu tokens (wide=%d) %s", name, n, wide, rc ? err : "");
    size_t pn = 0;
    int width = 0;
    rc = shard_probe(path, &pn, &width, err, sizeof err);
    EXPECT(rc == 0 && pn == n && width == expect_width, "%s: probe says %zu tokens x %d bytes "
           "(expected %zu x %d) %s", name, pn, width, n, expect_width, rc ? err : "");
    EXPECT(file_size(path) == 1024 + (long long)n * expect_width,
           "%s: file size %lld == 1024 + %zu x %d", name, file_size(path), n, expect_width);
    uint32_t* back = NULL;
    size_t bn = 0;
    rc = shard_read(path, 0, &back, &bn, err, sizeof err);
    EXPECT(rc == 0 && bn == n && (n == 0 || memcmp(back, tok, n * sizeof *tok) == 0),
           "%s: shard_read returns the same %zu tokens %s", name, n, rc ? err : "");
    free(back);
    ShardView v;
    rc = shard_map(path, 0, &v, err, sizeof err);
    int same = rc == 0 && v.ntok == n;
    for (size_t i = 0; same && i < n; i++) same = shard_token(&v, i) == tok[i];
    EXPECT(same, "%s: shard_map returns the same %zu tokens %s", name, n, rc ? err : "");
    shard_unmap(&v);
    unlink(path);
}

static void test_roundtrip(void) {
    printf("round trips\n");
    enum { N = 10007 };
    uint32_t* tok = malloc(N * sizeof *tok);
    if (!tok) exit(2);
    uint64_t x = 12345;
    for (int i = 0; i < N; i++) {
        x = x * 6364136223846793005ull + 1442695040888963407ull;
        tok[i] = (uint32_t)(x >> 33) % 50257;
    }
    tok[0] = 50256;
    tok[N - 1] = 65535;  // the largest id the uint16 variant holds
    check_roundtrip("u16.bin", tok, N, 0, 2);
    check_roundtrip("u16_forced_wide.bin", tok, N, 1, 4);
    tok[17] = 65536;  // one id over 65535 switches to the uint32 variant
    tok[18] = 200000;
    check_roundtrip("u32.bin", tok, N, 0, 4);
    check_roundtrip("empty.bin", tok, 0, 0, 2);
    // The vocabulary check accepts ids below the vocabulary size.
    char path[512], err[ERR_LEN] = "";
    path_in_tmp(path, sizeof path, "vocab.bin");
    uint32_t small[3] = {0, 5, 9};
    uint32_t* back = NULL;
    size_t bn = 0;
    int rc = shard_write(path, small, 3, 0, err, sizeof err);
    if (rc == 0) rc = shard_read(path, 10, &back, &bn, err, sizeof err);
    EXPECT(rc == 0 && bn == 3, "ids 0..9 pass the check against vocab size 10 %s", rc ? err : "");
    free(back);
    unlink(path);
    free(tok);
}

// Counts directory entries other than . and .. (and reports them).
static int count_entries(const char* dir) {
    DIR* d = opendir(dir);
    if (!d) return -1;
    int n = 0;
    struct dirent* e;
    while ((e = readdir(d)))
        if (strcmp(e->d_name, ".") && strcmp(e->d_name, "..")) {
            printf("        entry: %s\n", e->d_name);
            n++;
        }
    closedir(d);
    return n;
}

static void test_atomic(void) {
    printf("atomic writes\n");
    char path[512], err[ERR_LEN] = "";
    path_in_tmp(path, sizeof path, "atomic.bin");
    uint32_t a[4] = {1, 2, 3, 4}, b[2] = {7, 8};
    int rc = shard_write(path, a, 4, 0, err, sizeof err);
    EXPECT(rc == 0, "first write %s", err);
    EXPECT(count_entries(tmpdir) == 1, "directory holds only the shard, no temporary file");
    rc = shard_write(path, b, 2, 0, err, sizeof err);
    EXPECT(rc == 0, "overwrite %s", err);
    EXPECT(count_entries(tmpdir) == 1, "after overwrite: still only the shard");
    uint32_t* back = NULL;
    size_t n = 0;
    rc = shard_read(path, 0, &back, &n, err, sizeof err);
    EXPECT(rc == 0 && n == 2 && back[0] == 7 && back[1] == 8, "overwrite replaced the contents");
    free(back);
    unlink(path);

    char bad[600];
    snprintf(bad, sizeof bad, "%s/no_such_dir/x.bin", tmpdir);
    err[0] = '\0';
    rc = shard_write(bad, a, 4, 0, err, sizeof err);
    EXPECT(rc == -1 && strstr(err, bad) && strstr(err, "temporary file"),
           "write into a missing directory fails: \"%s\"", err);
    EXPECT(count_entries(tmpdir) == 0, "a failed write leaves nothing behind");
}

// Runs shard_read, shard_probe (unless it checks tokens) and shard_map on a bad file and checks
// that each fails with a message containing the path and every expected fragment.
static void expect_error(const char* what, const char* path, int vocab, const char* frag1,
                         const char* frag2, int probe_fails) {
    char err[ERR_LEN] = "";
    uint32_t* tok = (uint32_t*)&err;  // sentinel: must stay untouched on failure
    size_t n = 12345;
    int rc = shard_read(path, vocab, &tok, &n, err, sizeof err);
    EXPECT(rc == -1 && strstr(err, path) && strstr(err, frag1) && strstr(err, frag2) &&
           tok == (uint32_t*)&err && n == 12345, "%s: read: \"%s\"", what, err);
    err[0] = '\0';
    ShardView v;
    rc = shard_map(path, vocab, &v, err, sizeof err);
    EXPECT(rc == -1 && strstr(err, frag1) && strstr(err, frag2) && v.map == NULL,
           "%s: map: \"%s\"", what, err);
    err[0] = '\0';
    int width;
    rc = shard_probe(path, &n, &width, err, sizeof err);
    if (probe_fails)
        EXPECT(rc == -1 && strstr(err, frag1) && strstr(err, frag2), "%s: probe: \"%s\"", what,
               err);
    else
        EXPECT(rc == 0, "%s: probe (header only) passes", what);
}

static void test_errors(void) {
    printf("bad input\n");
    char path[512];
    uint16_t body16[8] = {1, 2, 3, 4, 5, 6, 7, 8};

    path_in_tmp(path, sizeof path, "magic.bin");
    write_raw(path, 12345, 1, 8, body16, sizeof body16);
    expect_error("wrong magic", path, 0, "header[0] (magic)", "found 12345", 1);

    path_in_tmp(path, sizeof path, "version.bin");
    write_raw(path, SHARD_MAGIC_U16, 7, 8, body16, sizeof body16);
    expect_error("wrong version", path, 0, "header[1] (version): expected 1", "found 7", 1);
    write_raw(path, SHARD_MAGIC_U32, 1, 4, body16, sizeof body16);
    expect_error("wrong version (u32)", path, 0, "header[1] (version): expected 7", "found 1", 1);

    path_in_tmp(path, sizeof path, "size.bin");
    write_raw(path, SHARD_MAGIC_U16, 1, 9, body16, sizeof body16);
    expect_error("size mismatch (short body)", path, 0, "file size: expected 1042 bytes",
                 "found 1040 bytes", 1);
    write_raw(path, SHARD_MAGIC_U32, 7, 8, body16, sizeof body16);
    expect_error("size mismatch (u32 header, u16 body)", path, 0, "expected 1056 bytes",
                 "found 1040 bytes", 1);
    write_raw(path, SHARD_MAGIC_U16, 1, -3, body16, sizeof body16);
    expect_error("negative token count", path, 0, "header[2] (token count)", "found -3", 1);

    path_in_tmp(path, sizeof path, "trunc.bin");
    FILE* f = fopen(path, "wb");
    if (!f || fwrite(body16, 1, 10, f) != 10 || fclose(f) != 0) exit(2);
    expect_error("truncated header", path, 0, "expected at least 1024 bytes", "found 10 bytes", 1);

    path_in_tmp(path, sizeof path, "vocab.bin");
    write_raw(path, SHARD_MAGIC_U16, 1, 8, body16, sizeof body16);
    expect_error("token out of range", path, 6, "token 5: expected id < vocab size 6",
                 "found 6", 0);

    path_in_tmp(path, sizeof path, "missing.bin");
    expect_error("missing file", path, 0, "cannot open", "No such file", 1);

    expect_error("a directory", tmpdir, 0, "expected a regular file", "found a directory", 1);
}

int main(int argc, char** argv) {
    const char* only = argc > 1 ? argv[1] : "";
    test_make_tmpdir(tmpdir, sizeof tmpdir, "test_shard");
    int ran = 0;
    if (!*only || !strcmp(only, "roundtrip")) test_roundtrip(), ran++;
    if (!*only || !strcmp(only, "atomic")) test_atomic(), ran++;
    if (!*only || !strcmp(only, "errors")) test_errors(), ran++;
    if (!ran) {
        fprintf(stderr, "usage: %s [roundtrip|atomic|errors]\n", argv[0]);
        return 2;
    }
    // Leave nothing behind: remove the files the tests made, then the directory.
    DIR* d = opendir(tmpdir);
    struct dirent* e;
    while (d && (e = readdir(d))) {
        char p[600];
        snprintf(p, sizeof p, "%s/%s", tmpdir, e->d_name);
        if (strcmp(e->d_name, ".") && strcmp(e->d_name, "..")) unlink(p);
    }
    if (d) closedir(d);
    rmdir(tmpdir);
    printf("%s: %d failure(s)\n", argv[0], failures);
    return failures ? 1 : 0;
}
