// Helpers of the tokenizer tests (tests/test_bpe.c, tests/test_hf_tokenizer.c).
#include "tests/tokenizer_test_util.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "comm/fail.h"
#include "data/bpe_tokens.h"

int failures;

uint64_t rng_next(uint64_t* s) {  // splitmix64
    uint64_t z = (*s += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

size_t rng_below(uint64_t* s, size_t n) { return (size_t)(rng_next(s) % n); }

// A path under the tests' scratch directory BUILD/test-data/tokenizer (BUILD: the environment's,
// as tests/run_suites.sh exports it; default "build"). The last 32 results stay valid, more than
// any one test holds at once.
const char* scratch(const char* rel) {
    static char paths[32][1024];
    static int next;
    const char* build = getenv("BUILD");
    char* path = paths[next++ % 32];
    snprintf(path, sizeof paths[0], "%s/test-data/tokenizer%s", build && *build ? build : "build",
             rel);
    return path;
}

void mkdirs(const char* path) {
    char buf[1024];
    snprintf(buf, sizeof buf, "%s", path);
    for (char* p = buf + 1;; p++) {
        if (*p != '/' && *p) continue;
        char c = *p;
        *p = 0;
        CHECK(mkdir(buf, 0755) == 0 || errno == EEXIST, "", "mkdir %s: %s", buf, strerror(errno));
        *p = c;
        if (!c) break;
    }
}

void write_file(const char* path, const void* data, size_t len) {
    FILE* f = fopen(path, "wb");
    CHECK(f, "", "cannot create %s: %s", path, strerror(errno));
    CHECK(fwrite(data, 1, len, f) == len && fclose(f) == 0, "", "cannot write %s", path);
}

uint8_t* read_file(const char* path, size_t* len) {
    FILE* f = fopen(path, "rb");
    CHECK(f, "", "cannot open %s: %s", path, strerror(errno));
    size_t cap = 1 << 16, n = 0;
    uint8_t* buf = xmalloc(cap + 1, "file");
    for (;;) {
        if (n == cap) {
            cap *= 2;
            buf = realloc(buf, cap + 1);
            CHECK(buf, "", "out of memory reading %s", path);
        }
        size_t r = fread(buf + n, 1, cap - n, f);
        n += r;
        if (r == 0) break;
    }
    CHECK(!ferror(f), "", "cannot read %s", path);
    fclose(f);
    buf[n] = 0;
    *len = n;
    return buf;
}

void bytes_add(Bytes* b, const void* data, size_t len) {
    if (b->n + len + 1 > b->cap) {
        size_t cap = b->cap ? b->cap : 256;
        while (cap < b->n + len + 1) cap *= 2;
        b->p = realloc(b->p, cap);
        CHECK(b->p, "", "out of memory");
        b->cap = cap;
    }
    memcpy(b->p + b->n, data, len);
    b->n += len;
    b->p[b->n] = 0;
}

void bytes_str(Bytes* b, const char* s) { bytes_add(b, s, strlen(s)); }

BpeEncoder* load_encoder(const char* dir) {
    char err[ERR_LEN];
    BpeEncoder* enc = bpe_encoder_load(dir, err, sizeof err);
    if (!enc) fail_msg("%s (hint: run `bash tools/setup.sh`)", err);
    return enc;
}

TokenBuf encode(BpeEncoder* enc, const void* text, size_t len) {
    TokenBuf out = {0};
    char err[ERR_LEN];
    if (bpe_encode(enc, text, len, &out, err, sizeof err) != 0) fail_msg("encode: %s", err);
    return out;
}

TokenBuf encode_timed(BpeEncoder* enc, const void* text, size_t len, double* seconds) {
    struct timespec a, b;
    clock_gettime(CLOCK_MONOTONIC, &a);
    TokenBuf out = encode(enc, text, len);
    clock_gettime(CLOCK_MONOTONIC, &b);
    *seconds = (double)(b.tv_sec - a.tv_sec) + 1e-9 * (double)(b.tv_nsec - a.tv_nsec);
    return out;
}

uint8_t* read_utf8_file(const char* path, size_t* len) {
    uint8_t* text = read_file(path, len);
    const size_t bad = first_invalid_utf8(text, *len);
    if (bad != *len)
        fail_msg("%s: byte offset %zu: expected valid UTF-8 (a JavaScript encoder would see "
                 "U+FFFD), found byte 0x%02X", path, bad, text[bad]);
    return text;
}

// decode(encode(text)) must give text back, byte for byte.
void expect_roundtrip(BpeEncoder* enc, const uint8_t* text, size_t len, const char* what) {
    TokenBuf ids = encode(enc, text, len);
    uint8_t* back;
    size_t back_len;
    char err[ERR_LEN];
    int rc = bpe_decode(bpe_encoder_tokens(enc), ids.ids, ids.n, &back, &back_len, err,
                        sizeof err);
    EXPECT(rc == 0, "%s: decode failed: %s", what, err);
    const char* prefix = len ? bpe_encoder_decoded_prefix(enc) : "";
    const size_t np = strlen(prefix);
    if (rc == 0) {
        EXPECT(back_len == np + len && memcmp(back, prefix, np) == 0 &&
               memcmp(back + np, text, len) == 0,
               "%s: decode(encode(x)) != \"%s\" x (%zu bytes in, %zu out)", what, prefix, len,
               back_len);
        free(back);
    }
    token_buf_free(&ids);
}

// Byte offset of the first invalid UTF-8 sequence, or len.
size_t first_invalid_utf8(const uint8_t* p, size_t len) {
    for (size_t i = 0; i < len;) {
        uint32_t cp;
        int n = bpe_utf8_decode(p + i, p + len, &cp);
        if (n == 0) return i;
        i += (size_t)n;
    }
    return len;
}

void put_utf8(Bytes* b, uint32_t cp) {
    uint8_t u[4];
    size_t n;
    if (cp < 0x80) { u[0] = (uint8_t)cp; n = 1; }
    else if (cp < 0x800) {
        u[0] = (uint8_t)(0xC0 | cp >> 6); u[1] = (uint8_t)(0x80 | (cp & 63)); n = 2;
    }
    else if (cp < 0x10000) {
        u[0] = (uint8_t)(0xE0 | cp >> 12); u[1] = (uint8_t)(0x80 | (cp >> 6 & 63));
        u[2] = (uint8_t)(0x80 | (cp & 63)); n = 3;
    } else {
        u[0] = (uint8_t)(0xF0 | cp >> 18); u[1] = (uint8_t)(0x80 | (cp >> 12 & 63));
        u[2] = (uint8_t)(0x80 | (cp >> 6 & 63)); u[3] = (uint8_t)(0x80 | (cp & 63)); n = 4;
    }
    bytes_add(b, u, n);
}

void random_text(uint64_t* rng, Bytes* b, size_t len) {
    static const char* frags[] = {
        " ", "  ", "\n", "\r\n", "\t", "'s", "'ll", " the", "word", "123", "\xc3\xa9",
        "\xe6\x97\xa5", "\xf0\x9f\x98\x80", "\xc2\xa0", ",\"", "\xe2\x80\x83", ".",
    };
    b->n = 0;
    while (b->n < len) {
        size_t kind = rng_below(rng, 10);
        if (kind < 3) {  // any byte at all
            uint8_t c = (uint8_t)rng_next(rng);
            bytes_add(b, &c, 1);
        } else if (kind < 4) {  // broken: lone continuation, truncated, overlong, surrogate
            static const char* broken[] = {"\x80", "\xc3", "\xe6\x97", "\xf0\x9f\x98", "\xc0\xaf",
                                           "\xed\xa0\x80", "\xf4\x90\x80\x80", "\xff", "\xfe"};
            bytes_str(b, broken[rng_below(rng, sizeof broken / sizeof broken[0])]);
        } else if (kind < 7) {
            bytes_str(b, frags[rng_below(rng, sizeof frags / sizeof frags[0])]);
        } else {
            put_utf8(b, (uint32_t)(1 + rng_below(rng, 0x2FFFF)) | 0);
        }
    }
}

// Encoding in chunks cut at bpe_chunk_end gives the ids of encoding the whole text (random
// texts, `texts` of them).
void expect_chunks_equal_whole(BpeEncoder* enc, uint64_t* rng, int texts) {
    Bytes b = {0};
    // Encoding in chunks cut at bpe_chunk_end gives the ids of encoding the whole text.
    for (int i = 0; i < texts && !failures; i++) {
        random_text(rng, &b, 200 + rng_below(rng, 4000));
        TokenBuf whole = encode(enc, b.p, b.n), parts = {0};
        char err[ERR_LEN];
        for (size_t pos = 0; pos < b.n;) {
            size_t end = bpe_chunk_end(enc, b.p, b.n, pos + 1 + rng_below(rng, 64));
            EXPECT(end > pos && end <= b.n, "bpe_chunk_end(%zu) = %zu", pos, end);
            if (end <= pos) break;
            CHECK(bpe_encode(enc, b.p + pos, end - pos, &parts, err, sizeof err) == 0, "", "%s",
                  err);
            pos = end;
        }
        EXPECT(whole.n == parts.n && memcmp(whole.ids, parts.ids, whole.n * 4) == 0,
               "random text %d: ids in chunks differ from the whole (%zu vs %zu ids)", i,
               parts.n, whole.n);
        token_buf_free(&whole);
        token_buf_free(&parts);
    }
    free(b.p);
}
