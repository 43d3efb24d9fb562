// Helpers of the tokenizer tests (tests/test_bpe.c, tests/test_hf_tokenizer.c): failure
// counting, a seeded generator, scratch files, growing byte strings, encoding with checks.
#pragma once
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "data/bpe.h"

extern int failures;

#define EXPECT(cond, ...)                                                  \
    do {                                                                   \
        if (!(cond)) {                                                     \
            failures++;                                                    \
            fprintf(stderr, "FAIL %s:%d: ", __FILE__, __LINE__);           \
            fprintf(stderr, __VA_ARGS__);                                  \
            fputc('\n', stderr);                                           \
        }                                                                  \
    } while (0)

uint64_t rng_next(uint64_t* s);  // splitmix64
size_t rng_below(uint64_t* s, size_t n);
// A path under the tests' scratch directory BUILD/test-data/tokenizer (BUILD: the environment's,
// as tests/run_suites.sh exports it; default "build"). The last 32 results stay valid.
const char* scratch(const char* rel);
void mkdirs(const char* path);
void write_file(const char* path, const void* data, size_t len);
uint8_t* read_file(const char* path, size_t* len);  // NUL-terminated; caller frees

// A growing byte string.
typedef struct Bytes {
    uint8_t* p;
    size_t n, cap;
} Bytes;

void bytes_add(Bytes* b, const void* data, size_t len);
void bytes_str(Bytes* b, const char* s);
void put_utf8(Bytes* b, uint32_t cp);

BpeEncoder* load_encoder(const char* source);  // fails the test with the loader's line
TokenBuf encode(BpeEncoder* enc, const void* text, size_t len);
// decode(encode(text)) must give text back, byte for byte (after bpe_encoder_decoded_prefix).
void expect_roundtrip(BpeEncoder* enc, const uint8_t* text, size_t len, const char* what);
// Byte offset of the first invalid UTF-8 sequence, or len.
size_t first_invalid_utf8(const uint8_t* p, size_t len);
// A reference comparison's text: the file's bytes (NUL-terminated; caller frees), failing the
// test where they are not valid UTF-8 (a JavaScript encoder would read U+FFFD there).
uint8_t* read_utf8_file(const char* path, size_t* len);
// encode(), and the seconds it took in *seconds (for the comparisons' MB/s lines).
TokenBuf encode_timed(BpeEncoder* enc, const void* text, size_t len, double* seconds);
// Random bytes, broken UTF-8, text fragments and code points; len bytes at least.
void random_text(uint64_t* rng, Bytes* b, size_t len);
// Encoding in chunks cut at bpe_chunk_end gives the ids of the whole (`texts` random texts).
void expect_chunks_equal_whole(BpeEncoder* enc, uint64_t* rng, int texts);
