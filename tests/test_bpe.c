// Tests of the GPT-2 BPE tokenizer (data/bpe.c, data/bpe_vocab.c), llm.c tokenizer files
// (data/tokenizer_file.c) and the tokenize tool. Run from the repository root:
//
//   test_bpe known | roundtrip | reference | tokenizer_file | vocab_errors | fuzz   unit tests
//   test_bpe synth OUT                  writes synthetic UTF-8 text (scripts, emoji, spaces)
//   test_bpe tiny_vocab DIR             writes a small vocabulary whose merges exercise the
//                                       JS encoder's tie, alias and ordering rules, plus text
//   test_bpe compare [--vocab-dir D] TEXT IDS   C ids for TEXT == ids printed by
//                                       tests/bpe_node_encode.js (gpt-3-encoder), or for a
//                                       tokenizer.json D by tests/hf_tokenizer_node_encode.js
//   test_bpe tool TOKENIZE_PROGRAM      runs the tokenize tool (three threads) and checks its shards
//   test_bpe bench FILE                 encoding speed (a measurement, not a test)
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "comm/fail.h"
#include "data/bpe.h"
#include "data/bpe_vocab.h"
#include "data/shard.h"
#include "data/tokenizer_file.h"
#include "tests/tokenizer_test_util.h"

#define VOCAB_DIR BPE_DEFAULT_VOCAB_DIR

// ---------------------------------------------------------------------------------------------
// known: ids that gpt-3-encoder gives for short strings

typedef struct Known {
    const char* text;
    uint32_t ids[32];
    size_t n;
} Known;

static const Known known_cases[] = {
    {"Hello world", {15496, 995}, 2},
    {"It's a test. I'm here, we'll see; they've done it, you're right, he'd go.",
     {1026, 338, 257, 1332, 13, 314, 1101, 994, 11, 356, 1183, 766, 26, 484, 1053, 1760, 340,
      11, 345, 821, 826, 11, 339, 1549, 467, 13}, 26},
    {"   leading and trailing   ", {220, 220, 3756, 290, 25462, 220, 220, 220}, 8},
    {"line1\n\n\nline2\r\n\ttab", {1370, 16, 628, 198, 1370, 17, 201, 198, 197, 8658}, 10},
    {"12345 3.14159 1,000,000", {10163, 2231, 513, 13, 1415, 19707, 352, 11, 830, 11, 830}, 11},
    {"na\xc3\xafve caf\xc3\xa9 \xe6\x97\xa5\xe6\x9c\xac\xe8\xaa\x9e \xf0\x9f\x98\x80 "
     "\xd0\x9f\xd1\x80\xd0\xb8\xd0\xb2\xd0\xb5\xd1\x82",
     {2616, 38776, 40304, 10545, 245, 98, 17312, 105, 45739, 252, 30325, 222, 12466, 253,
      21169, 18849, 38857, 16843, 20375}, 19},
    {"<|endoftext|>", {27, 91, 437, 1659, 5239, 91, 29}, 7},
    {"'S 'T 're've'm'll'd", {6, 50, 705, 51, 705, 260, 1053, 1101, 1183, 1549}, 10},
    // NBSP and U+FEFF are JavaScript whitespace, U+0085 is not (PCRE2's \s would say otherwise).
    {"a\xc2\xa0" "b\xc2\x85" "c\xef\xbb\xbf" "d", {64, 1849, 65, 126, 227, 66, 171, 119, 123, 67},
     10},
};

static int test_known(void) {
    BpeEncoder* enc = load_encoder(VOCAB_DIR);
    const TokenTable* t = bpe_encoder_tokens(enc);
    EXPECT(t->vocab_size == 50257, "vocab size %u, expected 50257", t->vocab_size);
    EXPECT(t->eot_id == 50256, "end-of-text id %u, expected 50256", t->eot_id);
    for (size_t c = 0; c < sizeof known_cases / sizeof known_cases[0]; c++) {
        const Known* k = &known_cases[c];
        TokenBuf ids = encode(enc, k->text, strlen(k->text));
        int same = ids.n == k->n && memcmp(ids.ids, k->ids, k->n * sizeof k->ids[0]) == 0;
        EXPECT(same, "encode(\"%s\"): got %zu ids, expected %zu (first difference at %zu)",
               k->text, ids.n, k->n, ids.n < k->n ? ids.n : k->n);
        expect_roundtrip(enc, (const uint8_t*)k->text, strlen(k->text), k->text);
        token_buf_free(&ids);
    }
    // Empty input: no ids.
    TokenBuf none = encode(enc, "", 0);
    EXPECT(none.n == 0, "encode(\"\") gave %zu ids", none.n);
    token_buf_free(&none);
    // Decoding rejects ids outside the vocabulary.
    uint32_t bad[] = {15496, 50257};
    uint8_t* out;
    size_t out_len;
    char err[ERR_LEN] = "";
    EXPECT(bpe_decode(t, bad, 2, &out, &out_len, err, sizeof err) != 0 &&
           strstr(err, "token 1: id: expected < 50257, found 50257"),
           "decode of an out-of-range id: \"%s\"", err);
    size_t len;
    EXPECT(bpe_token_bytes(t, 50256, &len) && len == 13, "end-of-text bytes");
    EXPECT(!bpe_token_bytes(t, 50257, &len), "bytes of an out-of-range id");
    bpe_encoder_free(enc);
    printf("known: %s\n", failures ? "FAILED" : "ok");
    return failures != 0;
}

// ---------------------------------------------------------------------------------------------
// roundtrip: arbitrary bytes, invalid UTF-8 included; cutting at bpe_chunk_end changes nothing

static int test_roundtrip(void) {
    BpeEncoder* enc = load_encoder(VOCAB_DIR);
    uint64_t rng = 12345;
    Bytes b = {0};
    for (int i = 0; i < 3000 && !failures; i++) {
        random_text(&rng, &b, rng_below(&rng, i < 2000 ? 64 : 2000));
        // Surrogate code points from put_utf8 are invalid UTF-8 too: fine, any bytes must work.
        char what[64];
        snprintf(what, sizeof what, "random text %d (%zu bytes)", i, b.n);
        expect_roundtrip(enc, b.p, b.n, what);
    }
    // Every single byte value alone and all pairs of bytes.
    for (int x = 0; x < 256 && !failures; x++)
        for (int y = 0; y < 256; y++) {
            uint8_t two[2] = {(uint8_t)x, (uint8_t)y};
            expect_roundtrip(enc, two, 1 + (y > 0), "byte pair");
        }
    // Long pieces: runs of one letter, of spaces, of random letters, and of invalid bytes.
    size_t big = 300000;
    uint8_t* run = xmalloc(big, "long run");
    memset(run, 'a', big);
    expect_roundtrip(enc, run, big, "300000 x 'a'");
    memset(run, ' ', big);
    expect_roundtrip(enc, run, big, "300000 spaces");
    memset(run, '\n', big);
    expect_roundtrip(enc, run, big, "300000 newlines");
    memset(run, 0xFF, big);
    expect_roundtrip(enc, run, big, "300000 x 0xFF");
    for (size_t i = 0; i < big; i++) run[i] = (uint8_t)('a' + rng_below(&rng, 26));
    expect_roundtrip(enc, run, big, "300000 random letters");
    free(run);

    expect_chunks_equal_whole(enc, &rng, 300);
    free(b.p);
    BpeStats st = bpe_encoder_stats(enc);
    EXPECT(st.invalid_bytes > 0, "invalid bytes were counted");
    bpe_encoder_free(enc);
    printf("roundtrip: %s\n", failures ? "FAILED" : "ok");
    return failures != 0;
}

// ---------------------------------------------------------------------------------------------
// reference: the heap-based merge equals a direct transcription of gpt-3-encoder's bpe() loop

typedef struct RefRules {
    BpeRule* r;  // sorted by (left, right), one per pair (the last of the vocabulary's rules)
    size_t n;
} RefRules;

static int rule_cmp(const void* a, const void* b) {
    const BpeRule *x = a, *y = b;
    if (x->left != y->left) return x->left < y->left ? -1 : 1;
    if (x->right != y->right) return x->right < y->right ? -1 : 1;
    return 0;
}

static RefRules ref_rules(const BpeVocab* v) {
    RefRules rr = {xmalloc(v->nrules * sizeof(BpeRule), "rules"), 0};
    // Keep the last rule per pair: walk backwards and skip pairs already taken.
    BpeRule* all = xmalloc(v->nrules * sizeof(BpeRule), "rules");
    memcpy(all, v->rules, v->nrules * sizeof(BpeRule));
    for (size_t i = 0; i < v->nrules; i++) all[i].rank = (uint32_t)i;  // position, for "last"
    qsort(all, v->nrules, sizeof *all, rule_cmp);
    for (size_t i = 0; i < v->nrules; i++) {
        size_t j = i;
        while (j + 1 < v->nrules && rule_cmp(&all[j + 1], &all[i]) == 0) j++;
        size_t last = all[i].rank;
        for (size_t k = i; k <= j; k++) if (all[k].rank > last) last = all[k].rank;
        rr.r[rr.n++] = v->rules[last];
        i = j;
    }
    free(all);
    return rr;
}

static const BpeRule* ref_find(const RefRules* rr, uint32_t a, uint32_t b) {
    BpeRule key = {a, b, 0, 0};
    return bsearch(&key, rr->r, rr->n, sizeof key, rule_cmp);
}

// gpt-3-encoder's loop: the lowest rank wins, the last pair on ties; merge every occurrence.
static size_t ref_bpe(const RefRules* rr, const BpeVocab* v, const uint8_t* p, size_t n,
                      uint32_t* sym) {
    for (size_t i = 0; i < n; i++) sym[i] = v->byte_token[p[i]];
    while (n > 1) {
        const BpeRule* best = NULL;
        for (size_t i = 0; i + 1 < n; i++) {
            const BpeRule* r = ref_find(rr, sym[i], sym[i + 1]);
            if (r && (!best || r->rank <= best->rank)) best = r;
        }
        if (!best) break;
        size_t m = 0;
        for (size_t i = 0; i < n;) {
            if (i + 1 < n && sym[i] == best->left && sym[i + 1] == best->right) {
                sym[m++] = best->merged;
                i += 2;
            } else {
                sym[m++] = sym[i++];
            }
        }
        n = m;
    }
    return n;
}

static void compare_with_reference(BpeEncoder* enc, const BpeVocab* v, const RefRules* rr,
                                   const uint8_t* piece, size_t n, const char* what) {
    uint32_t* ref = xmalloc((n + 1) * sizeof *ref, "reference ids");
    size_t m = ref_bpe(rr, v, piece, n, ref);
    uint64_t pieces_before = bpe_encoder_stats(enc).pieces;
    TokenBuf got = encode(enc, piece, n);
    EXPECT(bpe_encoder_stats(enc).pieces - pieces_before == 1, "%s: expected one piece", what);
    EXPECT(got.n == m && memcmp(got.ids, ref, m * sizeof *ref) == 0,
           "%s (%zu bytes): %zu ids, reference %zu", what, n, got.n, m);
    token_buf_free(&got);
    free(ref);
}

static int test_reference(void) {
    BpeEncoder* enc = load_encoder(VOCAB_DIR);
    char err[ERR_LEN];
    BpeVocab v;
    CHECK(bpe_vocab_load(VOCAB_DIR, &v, err, sizeof err) == 0, "", "%s", err);
    EXPECT(v.alias_rules == 11, "GPT-2 has 11 \"A,B\" alias pairs, found %zu", v.alias_rules);
    RefRules rr = ref_rules(&v);
    uint64_t rng = 777;
    // Single pieces the pattern keeps whole: a letter run after a space, a digit run, a run of
    // punctuation (with the commas and quotes of the alias pairs).
    static const char* alphabets[] = {"etaoinshrdlu", "abc", "0123456789", "\",]}).'[",
                                      "-=_*#~", "eeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeex"};
    Bytes b = {0};
    for (int i = 0; i < 4000 && !failures; i++) {
        const char* alpha = alphabets[i % 6];
        size_t len = 1 + rng_below(&rng, i < 3900 ? 40 : 2500);
        b.n = 0;
        if (i % 2 && alpha[0] != '0') bytes_str(&b, " ");
        for (size_t k = 0; k < len; k++) bytes_add(&b, &alpha[rng_below(&rng, strlen(alpha))], 1);
        char what[64];
        snprintf(what, sizeof what, "piece %d", i);
        compare_with_reference(enc, &v, &rr, b.p, b.n, what);
    }
    // Real words from the fortunes, whole lines of letters joined (long pieces).
    static const char* words[] = {
        " Supercalifragilisticexpialidocious", " antidisestablishmentarianism",
        " pneumonoultramicroscopicsilicovolcanoconiosis", " \xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9"};
    for (size_t i = 0; i < sizeof words / sizeof words[0]; i++)
        compare_with_reference(enc, &v, &rr, (const uint8_t*)words[i], strlen(words[i]), words[i]);
    free(b.p);
    free(rr.r);
    bpe_vocab_free(&v);
    bpe_encoder_free(enc);
    printf("reference: %s\n", failures ? "FAILED" : "ok");
    return failures != 0;
}

// ---------------------------------------------------------------------------------------------
// tokenizer_file: write/read round trip and rejection of malformed files

static void expect_read_error(const char* path, const char* needle, const char* what) {
    TokenTable t;
    char err[ERR_LEN] = "";
    int rc = tokenizer_file_read(path, &t, err, sizeof err);
    EXPECT(rc != 0, "%s: malformed file was accepted", what);
    EXPECT(strncmp(err, path, strlen(path)) == 0 && strstr(err, needle),
           "%s: message \"%s\" should start with the path and contain \"%s\"", what, err, needle);
    EXPECT(!strchr(err, '\n'), "%s: message is one line", what);
    if (rc == 0) token_table_free(&t);
}

// Writes a copy of `good` with one change applied, for the rejection tests.
static void write_variant(const char* path, const uint8_t* good, size_t len, size_t offset,
                          const void* patch, size_t patch_len, size_t new_len) {
    uint8_t* buf = xcalloc(new_len + 1, 1, "variant");
    memcpy(buf, good, len < new_len ? len : new_len);
    if (patch) memcpy(buf + offset, patch, patch_len);
    write_file(path, buf, new_len);
    free(buf);
}

static int test_tokenizer_file(void) {
    mkdirs(scratch(""));
    char err[ERR_LEN];
    // The GPT-2 table survives a write and a read.
    BpeEncoder* enc = load_encoder(VOCAB_DIR);
    const TokenTable* t = bpe_encoder_tokens(enc);
    const char* path = scratch("/gpt2_tokenizer.bin");
    EXPECT(tokenizer_file_write(path, t, err, sizeof err) == 0, "write: %s", err);
    TokenTable back;
    EXPECT(tokenizer_file_read(path, &back, err, sizeof err) == 0, "read: %s", err);
    EXPECT(back.vocab_size == t->vocab_size && back.eot_id == t->eot_id &&
           memcmp(back.offset, t->offset, (t->vocab_size + 1) * sizeof *t->offset) == 0 &&
           memcmp(back.bytes, t->bytes, t->offset[t->vocab_size]) == 0,
           "GPT-2 tokenizer file differs after a round trip");
    token_table_free(&back);
    struct stat st;
    EXPECT(stat(path, &st) == 0 && st.st_size == 1024 + 50257 + (off_t)t->offset[50257],
           "file size");
    bpe_encoder_free(enc);

    // A small table, then variants of its file.
    uint32_t offset[4] = {0, 1, 3, 6};
    uint8_t bytes[6] = {'a', 'b', 'c', 'd', 'e', 'f'};
    TokenTable small = {3, 2, offset, bytes, 0};
    const char* good_path = scratch("/small.bin");
    EXPECT(tokenizer_file_write(good_path, &small, err, sizeof err) == 0, "write: %s", err);
    size_t len;
    uint8_t* good = read_file(good_path, &len);
    EXPECT(len == 1024 + 3 + 6, "small file size %zu", len);
    const char* v = scratch("/variant.bin");
    uint32_t u;
    u = 20240520;
    write_variant(v, good, len, 0, &u, 4, len);
    expect_read_error(v, "header[0] (magic): expected 20240328, found 20240520", "bad magic");
    u = 3;
    write_variant(v, good, len, 4, &u, 4, len);
    expect_read_error(v, "header[1] (version): expected 1 or 2, found 3", "bad version");
    u = 0;
    write_variant(v, good, len, 8, &u, 4, len);
    expect_read_error(v, "header[2] (vocab size): expected 1..", "vocab size 0");
    u = 3;
    write_variant(v, good, len, 12, &u, 4, len);
    expect_read_error(v, "header[3] (end-of-text id): expected < vocab size 3, found 3",
                      "end-of-text id out of range");
    u = 7;
    write_variant(v, good, len, 40, &u, 4, len);
    expect_read_error(v, "header[10]: expected 0", "unused header field set");
    write_variant(v, good, len, 0, NULL, 0, 100);
    expect_read_error(v, "file size: expected at least 1024 bytes", "truncated header");
    write_variant(v, good, len, 0, NULL, 0, len - 2);
    expect_read_error(v, "token 2: expected 3 bytes at offset 1030, found only 1 (file truncated)",
                      "truncated body");
    write_variant(v, good, len, 0, NULL, 0, 1024);
    expect_read_error(v, "file size: expected at least 1030 bytes for 3 tokens", "no body");
    uint8_t zero = 0;
    write_variant(v, good, len, 1024 + 2, &zero, 1, len);
    expect_read_error(v, "token 1: length: expected 1..255, found 0", "length 0 entry");
    u = 4;
    write_variant(v, good, len, 8, &u, 4, len);
    expect_read_error(v, "token 3: expected a length byte at offset 1033, found end of file (the "
                      "file holds 3 of 4 tokens)", "count too large");
    u = 2;
    write_variant(v, good, len, 8, &u, 4, len);
    u = 1;
    FILE* f = fopen(v, "r+b");
    CHECK(f && fseek(f, 12, SEEK_SET) == 0 && fwrite(&u, 4, 1, f) == 1 && fclose(f) == 0, "",
          "patch %s", v);
    expect_read_error(v, "end of file: expected 2 tokens ending at offset 1029, found 4 more bytes",
                      "count too small");
    u = 1;
    write_variant(v, good, len, 4, &u, 4, len);  // version 1: [3] must then be 0 like the rest
    expect_read_error(v, "header[3]: expected 0 (unused in version 1), found 2", "version 1");
    expect_read_error(scratch("/no-such-file.bin"), "cannot open", "missing file");
    expect_read_error(scratch(""), "file type: expected a regular file, found a directory",
                      "directory");
    free(good);

    // The writer refuses tables it cannot represent and leaves no file behind.
    uint32_t bad_offset[4] = {0, 1, 1, 6};
    TokenTable empty_token = {3, 2, bad_offset, bytes, 0};
    const char* refused = scratch("/refused.bin");
    unlink(refused);
    EXPECT(tokenizer_file_write(refused, &empty_token, err, sizeof err) != 0 &&
           strstr(err, "token 1: length: expected 1..255 bytes, found 0"),
           "empty token: \"%s\"", err);
    EXPECT(access(refused, F_OK) != 0, "refused write left a file");
    uint8_t* long_bytes = xcalloc(300, 1, "long token");
    uint32_t long_offset[2] = {0, 300};
    TokenTable long_token = {1, 0, long_offset, long_bytes, 0};
    EXPECT(tokenizer_file_write(refused, &long_token, err, sizeof err) != 0 &&
           strstr(err, "found 300"), "300-byte token: \"%s\"", err);
    free(long_bytes);
    EXPECT(tokenizer_file_write(scratch("/no/such/dir/t.bin"), &small, err, sizeof err) != 0 &&
           strstr(err, "cannot create temporary file"), "missing directory: \"%s\"", err);
    printf("tokenizer_file: %s\n", failures ? "FAILED" : "ok");
    return failures != 0;
}

// ---------------------------------------------------------------------------------------------
// Small vocabularies written by the tests (for vocab_errors and tiny_vocab)

// GPT-2's spelling of a byte as a code point.
static uint32_t byte_code_point(int b) {
    int printable = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || b >= 0xAE;
    if (printable) return (uint32_t)b;
    int n = 0;
    for (int x = 0; x < b; x++)
        if (!((x >= '!' && x <= '~') || (x >= 0xA1 && x <= 0xAC) || x >= 0xAE)) n++;
    return 256 + (uint32_t)n;
}

// Appends raw token bytes spelled in GPT-2's alphabet: as UTF-8, or JSON-escaped.
static void spell(Bytes* out, const char* raw, size_t n, int json) {
    for (size_t i = 0; i < n; i++) {
        uint32_t cp = byte_code_point((uint8_t)raw[i]);
        if (json && (cp == '"' || cp == '\\' || cp >= 0x7F)) {
            char esc[16];
            snprintf(esc, sizeof esc, "\\u%04X", cp);
            bytes_str(out, esc);
        } else {
            put_utf8(out, cp);
        }
    }
}

// Writes DIR/encoder.json (all 256 bytes, then `extra` tokens, then <|endoftext|>) and
// DIR/vocab.bpe (`merges`: "left right" in raw bytes, one space between).
static void write_vocab(const char* dir, const char** extra, size_t nextra, const char** merges,
                        size_t nmerges) {
    mkdirs(dir);
    Bytes j = {0}, m = {0};
    bytes_str(&j, "{");
    char num[32];
    for (int b = 0; b < 256 + (int)nextra + 1; b++) {
        bytes_str(&j, b ? ", \"" : "\"");
        if (b < 256) {
            char c = (char)b;
            spell(&j, &c, 1, 1);
        } else if (b < 256 + (int)nextra) {
            spell(&j, extra[b - 256], strlen(extra[b - 256]), 1);
        } else {
            bytes_str(&j, "<|endoftext|>");
        }
        snprintf(num, sizeof num, "\": %d", b);
        bytes_str(&j, num);
    }
    bytes_str(&j, "}");
    bytes_str(&m, "#version: 0.2\n");
    for (size_t i = 0; i < nmerges; i++) {
        const char* sp = strchr(merges[i] + 1, ' ');  // the first byte may itself be a space
        spell(&m, merges[i], (size_t)(sp - merges[i]), 0);
        bytes_str(&m, " ");
        spell(&m, sp + 1, strlen(sp + 1), 0);
        bytes_str(&m, "\n");
    }
    char path[512];
    snprintf(path, sizeof path, "%s/encoder.json", dir);
    write_file(path, j.p, j.n);
    snprintf(path, sizeof path, "%s/vocab.bpe", dir);
    write_file(path, m.p, m.n);
    free(j.p);
    free(m.p);
}

// Merges chosen so that gpt-3-encoder's particular rules decide the result:
// - "!,?" : ('!', ',?') is a merge, so its key "!,,?" also gives ('!,', '?') rank 0 (alias);
// - "yz y" has a lower rank than "y z", which creates "yz": a new pair may outrank the pair
//   being merged, yet every occurrence of the current pair is merged first;
// - "x x" on "xxx": occurrences do not overlap, left to right;
// - "# #,#" has the key "#,#,#", shared by ('#,#', '#') -> "#,##": in "#,#" "#" "#,#" both
//   pairs have the same rank and the last one is merged.
static const char* tiny_tokens[] = {"!,?", "!,", ",?", "yzy", "yz", "xx", "xxx", "!!", "?!",
                                    " x", ",,", ",,,", ",#", "#,#", "##,#", "#,##"};
static const char* tiny_merges[] = {"! ,?", "! ,", ", ?", "yz y", "y z", "x x", "xx x", "! !",
                                    "? !", "  x", ", ,", ",, ,", ", #", "# ,#", "# #,#"};

static int write_tiny_vocab(const char* dir) {
    write_vocab(dir, tiny_tokens, sizeof tiny_tokens / sizeof tiny_tokens[0], tiny_merges,
                sizeof tiny_merges / sizeof tiny_merges[0]);
    // Text: random runs over the merge alphabet, separated by spaces and newlines.
    static const char* parts[] = {"!", ",", "?", "x", "y", "z", "yz", "!,", ",?", "xx", " ", "\n",
                                  " x", ",,", "#", "#,#", "#,###,#"};
    uint64_t rng = 99;
    Bytes t = {0};
    while (t.n < 60000) bytes_str(&t, parts[rng_below(&rng, sizeof parts / sizeof parts[0])]);
    char path[512];
    snprintf(path, sizeof path, "%s/text.txt", dir);
    write_file(path, t.p, t.n);
    free(t.p);
    // The expected results of the three rules, checked here without JavaScript too.
    char err[ERR_LEN];
    BpeEncoder* enc = bpe_encoder_load(dir, err, sizeof err);
    EXPECT(enc, "tiny vocabulary: %s", err);
    if (enc) {
        static const struct { const char* text; uint32_t ids[4]; size_t n; } cases[] = {
            {"!,?", {256}, 1},            // ! , ? -> "!," "?" -> alias -> "!,?"
            {"yzyz", {260, 260}, 2},      // both "yz" first, then no rule for (yz, yz)
            {"xxx", {262}, 1},            // "xx" "x" -> "xxx"
            {"xxxx", {261, 261}, 2},
            {"#,###,#", {269, 270}, 2},   // "#,#" "#" "#,#": the last of the tied pairs merges
        };
        for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
            TokenBuf ids = encode(enc, cases[i].text, strlen(cases[i].text));
            EXPECT(ids.n == cases[i].n && memcmp(ids.ids, cases[i].ids, ids.n * 4) == 0,
                   "tiny vocabulary: \"%s\" gave %zu ids (first %u)", cases[i].text, ids.n,
                   ids.n ? ids.ids[0] : 0);
            token_buf_free(&ids);
        }
        bpe_encoder_free(enc);
    }
    printf("tiny_vocab: wrote %s/{encoder.json,vocab.bpe,text.txt}: %s\n", dir,
           failures ? "FAILED" : "ok");
    return failures != 0;
}

// ---------------------------------------------------------------------------------------------
// vocab_errors: malformed encoder.json and vocab.bpe are refused with a precise message

static void expect_vocab_error(const char* dir, const char* needle, const char* what) {
    char err[ERR_LEN] = "";
    BpeEncoder* enc = bpe_encoder_load(dir, err, sizeof err);
    EXPECT(!enc, "%s: malformed vocabulary was accepted", what);
    EXPECT(strstr(err, needle) && strstr(err, dir) && !strchr(err, '\n'),
           "%s: message \"%s\" should name the file and contain \"%s\"", what, err, needle);
    bpe_encoder_free(enc);
}

static void replace_file(const char* dir, const char* name, const char* text) {
    char path[512];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    write_file(path, text, strlen(text));
}

// The documented Unicode behaviour (data/bpe.h, build/tokenize --help): \p{L} follows PCRE2's
// tables. U+1371A, an Egyptian hieroglyph (a letter) assigned in Unicode 16: with older tables it
// is a symbol, so "a" U+1371A "b" pre-tokenizes into three pieces; with 16 or later, into one.
static int test_unicode(void) {
    char unicode[64], pcre2[64];
    bpe_unicode_version(unicode, sizeof unicode, pcre2, sizeof pcre2);
    const int major = atoi(unicode);
    EXPECT(major >= 10, "PCRE2 %s reports Unicode version '%s'", pcre2, unicode);
    BpeEncoder* enc = load_encoder(VOCAB_DIR);
    const char text[] = "a\xF0\x93\x9C\x9A" "b";
    const uint64_t before = bpe_encoder_stats(enc).pieces;
    TokenBuf ids = encode(enc, text, strlen(text));
    const uint64_t pieces = bpe_encoder_stats(enc).pieces - before;
    const uint64_t want = major < 16 ? 3 : 1;
    EXPECT(pieces == want, "PCRE2 %s, Unicode %s: \"a\" U+1371A \"b\" gives %llu pieces, "
           "expected %llu (U+1371A is %s in these tables)", pcre2, unicode,
           (unsigned long long)pieces, (unsigned long long)want, major < 16 ? "a symbol" : "a letter");
    printf("PCRE2 %s, Unicode %s tables: \"a\" U+1371A \"b\" -> %llu pre-tokenized pieces\n", pcre2,
           unicode, (unsigned long long)pieces);
    expect_roundtrip(enc, (const uint8_t*)text, strlen(text), "a U+1371A b");
    token_buf_free(&ids);
    bpe_encoder_free(enc);
    return failures != 0;
}

static int test_vocab_errors(void) {
    const char* dir = scratch("/bad_vocab");
    static const char* tokens[] = {"ab"};
    static const char* merges[] = {"a b"};
    write_vocab(dir, tokens, 1, merges, 1);
    char err[ERR_LEN];
    BpeEncoder* enc = bpe_encoder_load(dir, err, sizeof err);
    EXPECT(enc, "a valid small vocabulary was refused: %s", err);
    bpe_encoder_free(enc);
    char path[512];
    snprintf(path, sizeof path, "%s/encoder.json", dir);
    size_t len;
    char* good_json = (char*)read_file(path, &len);

    replace_file(dir, "encoder.json", "[1, 2]");
    expect_vocab_error(dir, "byte offset 0: expected '{' opening the object, found '['",
                       "not an object");
    replace_file(dir, "encoder.json", "{\"a\": 0, \"b\" 1}");
    expect_vocab_error(dir, "byte offset 13: expected ':' after the token, found '1'",
                       "missing colon");
    replace_file(dir, "encoder.json", "{\"a\\x\": 0}");
    expect_vocab_error(dir, "expected one of", "bad escape");
    replace_file(dir, "encoder.json", "{\"a\": -1}");
    expect_vocab_error(dir, "expected a non-negative integer token id", "negative id");
    replace_file(dir, "encoder.json", "{\"a\": 0, \"b\": 0}");
    expect_vocab_error(dir, "token id 0: expected each id 0..1 exactly once, found a repeated id",
                       "repeated id");
    replace_file(dir, "encoder.json", "{\"a\": 0, \"b\": 5}");
    expect_vocab_error(dir, "token id 5: expected each id 0..1 exactly once", "id gap");
    replace_file(dir, "encoder.json", "{\"a\": 0, \"\\u00a0\": 1}");
    expect_vocab_error(dir, "expected a character of GPT-2's byte alphabet, found U+00A0",
                       "character outside the alphabet");
    replace_file(dir, "encoder.json", "{\"a\": 0, \"b\": 1}");
    expect_vocab_error(dir, "expected every single byte as a token, found none for byte 0x00",
                       "missing byte tokens");
    replace_file(dir, "encoder.json", "{\"a\": 0, \"b\": 1} x");
    expect_vocab_error(dir, "expected end of file after the object", "trailing text");
    replace_file(dir, "encoder.json", "{\"a\": 0, \"b");
    expect_vocab_error(dir, "expected '\"' closing the string, found end of file", "truncated");

    replace_file(dir, "encoder.json", good_json);
    replace_file(dir, "vocab.bpe", "a b\n");
    expect_vocab_error(dir, "line 1: expected a \"#version\" line", "no version line");
    replace_file(dir, "vocab.bpe", "#version: 0.2\na b c\n");
    expect_vocab_error(dir, "line 2: expected two symbols, found more", "three symbols");
    replace_file(dir, "vocab.bpe", "#version: 0.2\nab\n");
    expect_vocab_error(dir, "line 2: expected two symbols, found one", "one symbol");
    replace_file(dir, "vocab.bpe", "#version: 0.2\na b\nab ab\n");
    expect_vocab_error(dir, "line 3: expected the merge of 'ab' and 'ab' to be a token",
                       "merge result missing");
    replace_file(dir, "vocab.bpe", "#version: 0.2\nq \xc2\xa0\n");
    expect_vocab_error(dir, "line 2: expected characters of GPT-2's byte alphabet",
                       "symbol outside the alphabet");
    replace_file(dir, "vocab.bpe", "#version: 0.2\nabab a\n");
    expect_vocab_error(dir, "line 2: expected two tokens of encoder.json, found first symbol "
                       "'abab'", "unknown symbol");
    char long_line[400] = "#version: 0.2\n";
    memset(long_line + 14, 'a', 300);
    strcpy(long_line + 314, " b\n");
    replace_file(dir, "vocab.bpe", long_line);
    expect_vocab_error(dir, "line 2: expected symbols of at most 255 bytes", "overlong symbol");
    free(good_json);
    expect_vocab_error(scratch("/no-such-dir"), "encoder.json: cannot open", "missing files");
    printf("vocab_errors: %s\n", failures ? "FAILED" : "ok");
    return failures != 0;
}

// ---------------------------------------------------------------------------------------------
// fuzz: randomly damaged tokenizer and vocabulary files are read without crashing; each is
// either accepted or refused with one line that names the file

static void damage(uint64_t* rng, Bytes* out, const uint8_t* good, size_t len) {
    out->n = 0;
    bytes_add(out, good, len);
    int edits = 1 + (int)rng_below(rng, 4);
    for (int e = 0; e < edits && out->n > 0; e++) {
        size_t at = rng_below(rng, out->n);
        switch (rng_below(rng, 4)) {
        case 0: out->p[at] = (uint8_t)rng_next(rng); break;        // replace a byte
        case 1: out->p[at] ^= (uint8_t)(1u << rng_below(rng, 8)); break;  // flip a bit
        case 2: out->n = at; break;                                  // truncate
        default:                                                     // delete a stretch
            {
                size_t k = 1 + rng_below(rng, 16);
                if (at + k > out->n) k = out->n - at;
                memmove(out->p + at, out->p + at + k, out->n - at - k);
                out->n -= k;
            }
        }
    }
}

static int test_fuzz(void) {
    mkdirs(scratch(""));
    uint64_t rng = 31337;
    Bytes b = {0};
    char err[ERR_LEN];
    // Tokenizer files.
    uint32_t offset[6] = {0, 1, 3, 6, 7, 9};
    uint8_t bytes[9] = {'a', 'b', 'c', 'd', 'e', 'f', 0xFF, '\n', 0};
    TokenTable small = {5, 4, offset, bytes, 0};
    const char* good_path = scratch("/fuzz_good.bin");
    CHECK(tokenizer_file_write(good_path, &small, err, sizeof err) == 0, "", "%s", err);
    size_t len;
    uint8_t* good = read_file(good_path, &len);
    const char* path = scratch("/fuzz.bin");
    int accepted = 0;
    for (int i = 0; i < 3000; i++) {
        damage(&rng, &b, good, len);
        write_file(path, b.p, b.n);
        TokenTable t;
        err[0] = 0;
        if (tokenizer_file_read(path, &t, err, sizeof err) == 0) {
            accepted++;
            EXPECT(t.vocab_size >= 1 && t.offset[t.vocab_size] <= b.n, "accepted table");
            token_table_free(&t);
        } else {
            EXPECT(strncmp(err, path, strlen(path)) == 0 && !strchr(err, '\n'),
                   "tokenizer file variant %d: message \"%s\"", i, err);
        }
    }
    free(good);
    // Vocabularies: damage encoder.json or vocab.bpe of a small valid one.
    const char* dir = scratch("/fuzz_vocab");
    write_vocab(dir, tiny_tokens, sizeof tiny_tokens / sizeof tiny_tokens[0], tiny_merges,
                sizeof tiny_merges / sizeof tiny_merges[0]);
    static const char* names[2] = {"encoder.json", "vocab.bpe"};
    uint8_t* originals[2];
    size_t original_len[2];
    for (int f = 0; f < 2; f++) {
        char p[512];
        snprintf(p, sizeof p, "%s/%s", dir, names[f]);
        originals[f] = read_file(p, &original_len[f]);
    }
    int vocab_accepted = 0;
    for (int i = 0; i < 600; i++) {
        int f = i % 2;
        char p[512];
        snprintf(p, sizeof p, "%s/%s", dir, names[f]);
        damage(&rng, &b, originals[f], original_len[f]);
        write_file(p, b.p, b.n);
        err[0] = 0;
        BpeEncoder* enc = bpe_encoder_load(dir, err, sizeof err);
        if (enc) {
            vocab_accepted++;
            static const char probe[] = "!,? yzyz xxx #,###,# \xff";
            expect_roundtrip(enc, (const uint8_t*)probe, sizeof probe - 1, "fuzzed vocab");
            bpe_encoder_free(enc);
        } else {
            EXPECT(strstr(err, dir) && !strchr(err, '\n'), "vocabulary variant %d: message \"%s\"",
                   i, err);
        }
        write_file(p, originals[f], original_len[f]);
    }
    free(originals[0]);
    free(originals[1]);
    free(b.p);
    printf("fuzz: %d of 3000 damaged tokenizer files and %d of 600 damaged vocabularies were "
           "still valid; the rest were refused: %s\n", accepted, vocab_accepted,
           failures ? "FAILED" : "ok");
    return failures != 0;
}

// ---------------------------------------------------------------------------------------------
// synth: synthetic text for the comparison with gpt-3-encoder

static int write_synth(const char* path) {
    static const char* frags[] = {
        // English with contractions, capitals, quotes and numbers
        "It's", "isn't", "I'm", "we'll", "they've", "she'd", "you're", "'S", "'T", "don't",
        "rock'n'roll", "O'Neil's", "the", "The", "quick", "brown", "fox", "1999", "3.14159",
        "1,000,000", "$5.00", "50%", "#hashtag", "@user", "e-mail", "C++", "x86_64", "--",
        "...", "?!", "\"quoted\"", "(parens)", "[brackets]", "{braces}", "a/b", "http://x.org/a?b=c",
        // typographic punctuation
        "\xe2\x80\x9c" "double\xe2\x80\x9d", "\xe2\x80\x98single\xe2\x80\x99", "it\xe2\x80\x99s",
        "\xe2\x80\x94", "\xe2\x80\xa6", "\xc2\xab\xc2\xbb",
        // Latin with diacritics, combining marks
        "na\xc3\xafve", "caf\xc3\xa9", "Stra\xc3\x9f" "e", "\xc3\x85ngstr\xc3\xb6m",
        "e\xcc\x81", "a\xcc\x8a\xcc\x81",
        // Greek, Cyrillic, Armenian, Hebrew, Arabic
        "\xce\xb1\xce\xb2\xce\xb3", "\xce\x9a\xce\xb1\xce\xbb\xce\xb7\xce\xbc\xce\xad\xcf\x81\xce\xb1",
        "\xd0\x9f\xd1\x80\xd0\xb8\xd0\xb2\xd0\xb5\xd1\x82", "\xd5\xa2\xd5\xa1\xd6\x80\xd5\xa5\xd6\x82",
        "\xd7\xa9\xd7\x9c\xd7\x95\xd7\x9d", "\xd9\x85\xd8\xb1\xd8\xad\xd8\xa8\xd8\xa7",
        // Devanagari with virama (a mark, not a letter), Thai, CJK, kana, Hangul
        "\xe0\xa4\xb9\xe0\xa4\xbf\xe0\xa4\xa8\xe0\xa5\x8d\xe0\xa4\xa6\xe0\xa5\x80",
        "\xe0\xb8\xaa\xe0\xb8\xa7\xe0\xb8\xb1\xe0\xb8\xaa\xe0\xb8\x94\xe0\xb8\xb5",
        "\xe6\x97\xa5\xe6\x9c\xac\xe8\xaa\x9e", "\xe4\xb8\xad\xe6\x96\x87\xe5\xad\x97",
        "\xe3\x81\xb2\xe3\x82\x89\xe3\x81\x8c\xe3\x81\xaa", "\xe3\x82\xab\xe3\x82\xbf\xe3\x82\xab\xe3\x83\x8a",
        "\xed\x95\x9c\xea\xb5\xad\xec\x96\xb4", "\xe3\x80\x82", "\xef\xbc\x81",
        // numbers of other kinds: Arabic-Indic, fullwidth, superscript, Roman numeral, fractions
        "\xd9\xa3\xd9\xa4", "\xef\xbc\x91\xef\xbc\x92", "x\xc2\xb2", "\xe2\x85\xab", "\xc2\xbd",
        "\xe2\x91\xa0",
        // astral letters and symbols: Gothic, math bold, emoji (ZWJ, skin tone, flag), music
        "\xf0\x90\x8c\xb0\xf0\x90\x8c\xb1", "\xf0\x9d\x90\x80\xf0\x9d\x90\x81",
        "\xf0\x9f\x98\x80", "\xf0\x9f\x91\x8d\xf0\x9f\x8f\xbd",
        "\xf0\x9f\x91\xa9\xe2\x80\x8d\xf0\x9f\x92\xbb", "\xf0\x9f\x87\xab\xf0\x9f\x87\xb7",
        "\xf0\x9d\x84\x9e", "\xe2\x9c\x93",
        // control and format characters: NUL, backspace, ESC, DEL, C1, zero-width space, BOM
        "\x00", "\x08", "\x1b[0m", "\x7f", "\xc2\x85", "\xc2\x9f", "\xe2\x80\x8b", "\xef\xbb\xbf",
        "\x1c\x1d\x1e\x1f", "\xe1\xa0\x8e",
    };
    static const char* seps[] = {
        " ", " ", " ", " ", "", "  ", "   ", "\n", "\n\n", "\n\n\n", "\r\n", "\t", " \t ", "\t\t",
        "\x0b", "\x0c", "\xc2\xa0", "\xe2\x80\x83", "\xe3\x80\x80", "\xe2\x80\xa8", "\xe2\x80\xa9",
        " \n ", "    \n", "\n    ", ", ", ". ", "; ", "' ", " '",
    };
    uint64_t rng = 2024;
    Bytes t = {0};
    while (t.n < 400000) {
        const char* f = frags[rng_below(&rng, sizeof frags / sizeof frags[0])];
        bytes_add(&t, f, f[0] ? strlen(f) : 1);  // "\x00" is one NUL byte
        bytes_str(&t, seps[rng_below(&rng, sizeof seps / sizeof seps[0])]);
    }
    CHECK(first_invalid_utf8(t.p, t.n) == t.n, "", "synthetic text is not valid UTF-8");
    write_file(path, t.p, t.n);
    printf("synth: wrote %zu bytes to %s\n", t.n, path);
    free(t.p);
    return 0;
}

// ---------------------------------------------------------------------------------------------
// compare: the C encoder against ids from tests/bpe_node_encode.js (or, for a tokenizer.json,
// tests/hf_tokenizer_node_encode.js)

static uint32_t* read_ids(const char* path, size_t* n) {
    size_t len;
    uint8_t* text = read_file(path, &len);
    size_t cap = 1024, count = 0;
    uint32_t* ids = xmalloc(cap * sizeof *ids, "ids");
    for (size_t i = 0; i < len;) {
        if (text[i] == '\n' || text[i] == ' ' || text[i] == '\r') { i++; continue; }
        if (text[i] < '0' || text[i] > '9')
            fail_msg("%s: byte offset %zu: expected a token id, found '%c'", path, i, text[i]);
        uint64_t v = 0;
        while (i < len && text[i] >= '0' && text[i] <= '9') {
            v = v * 10 + (uint64_t)(text[i++] - '0');
            if (v > UINT32_MAX) fail_msg("%s: byte offset %zu: token id too large", path, i);
        }
        if (count == cap) {
            cap *= 2;
            ids = realloc(ids, cap * sizeof *ids);
            CHECK(ids, "", "out of memory");
        }
        ids[count++] = (uint32_t)v;
    }
    free(text);
    *n = count;
    return ids;
}

static void print_context(const TokenTable* t, const uint32_t* ids, size_t n, size_t at,
                          const char* who) {
    fprintf(stderr, "  %-6s", who);
    for (size_t i = at > 4 ? at - 4 : 0; i < n && i < at + 6; i++) {
        size_t len = 0;
        const uint8_t* b = bpe_token_bytes(t, ids[i], &len);
        fprintf(stderr, " %s%u\"", i == at ? ">" : "", ids[i]);
        for (size_t k = 0; b && k < len; k++)
            fprintf(stderr, b[k] >= 0x20 && b[k] < 0x7F && b[k] != '"' ? "%c" : "\\x%02x", b[k]);
        fprintf(stderr, "\"");
    }
    fprintf(stderr, "\n");
}

static int compare(const char* vocab_dir, const char* text_path, const char* ids_path) {
    size_t len, nref;
    uint8_t* text = read_utf8_file(text_path, &len);
    uint32_t* ref = read_ids(ids_path, &nref);
    BpeEncoder* enc = load_encoder(vocab_dir);
    double secs;
    TokenBuf got = encode_timed(enc, text, len, &secs);
    size_t i = 0;
    while (i < got.n && i < nref && got.ids[i] == ref[i]) i++;
    if (i == got.n && i == nref) {
        printf("compare: %s: %zu bytes, %zu tokens: identical to the reference "
               "(C encoder %.1f MB/s)\n", text_path, len, nref, (double)len / 1e6 / secs);
    } else {
        failures++;
        fprintf(stderr, "compare: %s: first difference at token %zu (C %zu tokens, "
                "reference %zu)\n", text_path, i, got.n, nref);
        print_context(bpe_encoder_tokens(enc), got.ids, got.n, i, "C");
        print_context(bpe_encoder_tokens(enc), ref, nref, i, "ref");
    }
    expect_roundtrip(enc, text, len, text_path);
    token_buf_free(&got);
    bpe_encoder_free(enc);
    free(ref);
    free(text);
    return failures != 0;
}

// ---------------------------------------------------------------------------------------------
// tool: the tokenize program on files with known documents

typedef struct Doc {
    const uint8_t* p;
    size_t n;
} Doc;

// Fortune-style files: documents separated by lines holding only "%". Lines such as "100%" or
// "%%" inside a document are text.
static void write_fortune_file(const char* path, uint64_t* rng, int ndocs, int trailing_sep,
                               Bytes* all_docs, size_t* doc_ends, size_t* ndoc_total) {
    static const char* lines[] = {
        "Q: How many programmers does it take?\n", "A: None, that's a hardware problem.\n",
        "\t\t-- Anonymous\n", "100%\n", "%%\n", "It's 50% off!\n", "  indented  line  \n",
        "\xe6\x97\xa5\xe6\x9c\xac\xe8\xaa\x9e \xf0\x9f\x98\x80 caf\xc3\xa9\n", "\n",
        "Numbers: 1 22 333 4444 55555\n", "% not a separator\n",
    };
    Bytes f = {0};
    for (int d = 0; d < ndocs; d++) {
        size_t start = all_docs->n;
        int nl = 1 + (int)rng_below(rng, 5);
        for (int k = 0; k < nl; k++) {
            const char* l = lines[rng_below(rng, sizeof lines / sizeof lines[0])];
            if (k == 0 && l[0] == '\n') l = lines[0];  // no document is just a blank line
            bytes_str(&f, l);
            bytes_str(all_docs, l);
        }
        if (all_docs->n > start) doc_ends[(*ndoc_total)++] = all_docs->n;
        if (d + 1 < ndocs || trailing_sep) bytes_str(&f, "%\n");
        if (d == 3) bytes_str(&f, "%\n");  // an empty document, which is skipped
    }
    write_file(path, f.p, f.n);
    free(f.p);
}

static void run_ok(const char* cmd) {
    printf("+ %s\n", cmd);
    fflush(stdout);
    int rc = system(cmd);
    EXPECT(rc == 0, "command failed (status %d): %s", rc, cmd);
}

static void run_fails(const char* cmd, const char* log, const char* needle) {
    char full[2048];
    snprintf(full, sizeof full, "%s > %s 2>&1", cmd, log);
    int rc = system(full);
    EXPECT(rc != 0, "command should fail: %s", cmd);
    size_t len;
    char* out = (char*)read_file(log, &len);
    EXPECT(strstr(out, needle), "output of `%s` should contain \"%s\", found \"%s\"", cmd, needle,
           out);
    free(out);
}

// Reads OUT/NAME_train_000001.bin, ... and checks each shard's size.
static TokenBuf read_train_shards(const char* dir, const char* name, size_t per_shard,
                                  int* nshards) {
    TokenBuf all = {0};
    char path[512], err[ERR_LEN];
    size_t previous = per_shard;
    for (*nshards = 0;; (*nshards)++) {
        snprintf(path, sizeof path, "%s/%s_train_%06d.bin", dir, name, *nshards + 1);
        if (access(path, F_OK) != 0) break;
        uint32_t* ids;
        size_t n;
        EXPECT(shard_read(path, 50257, &ids, &n, err, sizeof err) == 0, "%s", err);
        if (failures) break;
        EXPECT(previous == per_shard && n <= per_shard && n > 0,
               "%s: %zu tokens after a shard of %zu (expected %zu per shard, the last fewer)",
               path, n, previous, per_shard);
        previous = n;
        token_buf_reserve(&all, n);
        memcpy(all.ids + all.n, ids, n * sizeof *ids);
        all.n += n;
        free(ids);
    }
    return all;
}

static void clean_dir(const char* dir) {
    char cmd[600];
    snprintf(cmd, sizeof cmd, "rm -rf '%s' && mkdir -p '%s'", dir, dir);
    CHECK(system(cmd) == 0, "", "cannot reset %s", dir);
}

static int test_tool(const char* program) {
    const char* dir = scratch("/tool");
    clean_dir(dir);
    BpeEncoder* enc = load_encoder(VOCAB_DIR);
    uint64_t rng = 4242;
    Bytes docs = {0};
    size_t ends[1000], ndocs = 0;
    write_fortune_file(scratch("/tool/a.txt"), &rng, 120, 1, &docs, ends, &ndocs);
    write_fortune_file(scratch("/tool/b.txt"), &rng, 80, 0, &docs, ends, &ndocs);
    // A third file with invalid UTF-8: bytes still round-trip.
    const char c_text[] = "broken \xff\xfe bytes \xc3 here\n";
    write_file(scratch("/tool/c.txt"), c_text, sizeof c_text - 1);
    bytes_add(&docs, c_text, sizeof c_text - 1);
    ends[ndocs++] = docs.n;

    // 1. Documents split at "%" lines, 10% validation, 1000-token shards.
    char cmd[2048];
    // Three encoders at once: the stream is still one encoder's, in document order.
    snprintf(cmd, sizeof cmd, "%s --out-dir %s/out --name t --doc-sep '%%\\n' --val-fraction 0.1 "
             "--shard-tokens 1000 --threads 3 --tokenizer-out %s/out/tok.bin %s/a.txt %s/b.txt "
             "%s/c.txt", program, dir, dir, dir, dir, dir);
    run_ok(cmd);
    TokenBuf want_train = {0}, want_val = {0};
    for (size_t d = 0; d < ndocs; d++) {
        size_t start = d ? ends[d - 1] : 0;
        int val = floor((double)(d + 1) * 0.1) > floor((double)d * 0.1);
        TokenBuf* w = val ? &want_val : &want_train;
        token_buf_push(w, 50256);
        char err[ERR_LEN];
        CHECK(bpe_encode(enc, docs.p + start, ends[d] - start, w, err, sizeof err) == 0, "", "%s",
              err);
    }
    int nshards;
    char out_dir[512];
    snprintf(out_dir, sizeof out_dir, "%s/out", dir);
    TokenBuf train = read_train_shards(out_dir, "t", 1000, &nshards);
    EXPECT(nshards == (int)((want_train.n + 999) / 1000), "%d train shards for %zu tokens",
           nshards, want_train.n);
    EXPECT(train.n == want_train.n && memcmp(train.ids, want_train.ids, train.n * 4) == 0,
           "train tokens differ (%zu vs %zu expected)", train.n, want_train.n);
    uint32_t* val;
    size_t nval;
    char err[ERR_LEN], path[1024];
    snprintf(path, sizeof path, "%s/t_val_000000.bin", out_dir);
    EXPECT(shard_read(path, 50257, &val, &nval, err, sizeof err) == 0, "%s", err);
    if (!failures) {
        EXPECT(nval == want_val.n && memcmp(val, want_val.ids, nval * 4) == 0,
               "val tokens differ (%zu vs %zu expected)", nval, want_val.n);
        free(val);
    }
    TokenTable tok;
    snprintf(path, sizeof path, "%s/tok.bin", out_dir);
    EXPECT(tokenizer_file_read(path, &tok, err, sizeof err) == 0, "%s", err);
    if (!failures) {
        EXPECT(tok.vocab_size == 50257 && tok.eot_id == 50256, "tokenizer file header");
        token_table_free(&tok);
    }
    printf("tool: %zu documents, %zu train tokens in %d shards, %zu val tokens\n", ndocs,
           train.n, nshards, want_val.n);
    token_buf_free(&train);
    token_buf_free(&want_train);
    token_buf_free(&want_val);

    // 2. One document per file, no validation; the train stream is EOT + file, per file.
    snprintf(cmd, sizeof cmd, "%s --out-dir %s/out2 --name w --val-fraction 0 %s/a.txt %s/c.txt",
             program, dir, dir, dir);
    run_ok(cmd);
    snprintf(out_dir, sizeof out_dir, "%s/out2", dir);
    train = read_train_shards(out_dir, "w", 100000000, &nshards);
    const char* files[] = {scratch("/tool/a.txt"), scratch("/tool/c.txt")};
    TokenBuf want = {0};
    for (int i = 0; i < 2; i++) {
        size_t len;
        uint8_t* text = read_file(files[i], &len);
        token_buf_push(&want, 50256);
        CHECK(bpe_encode(enc, text, len, &want, err, sizeof err) == 0, "", "%s", err);
        free(text);
    }
    EXPECT(nshards == 1 && train.n == want.n && memcmp(train.ids, want.ids, want.n * 4) == 0,
           "one document per file: %d shards, %zu tokens (expected %zu)", nshards, train.n,
           want.n);
    snprintf(path, sizeof path, "%s/w_val_000000.bin", out_dir);
    EXPECT(access(path, F_OK) != 0, "no validation shard without validation documents");
    token_buf_free(&train);
    token_buf_free(&want);

    // 3. Bad invocations fail with a message naming the problem.
    char log[512];
    snprintf(log, sizeof log, "%s/log.txt", dir);
    snprintf(cmd, sizeof cmd, "%s --out-dir %s/out3 %s/missing.txt", program, dir, dir);
    run_fails(cmd, log, "missing.txt: cannot open");
    snprintf(cmd, sizeof cmd, "%s --val-fraction 1.5 %s/a.txt", program, dir);
    run_fails(cmd, log, "--val-fraction: expected a number in 0..1, found \"1.5\"");
    snprintf(cmd, sizeof cmd, "%s --shard-tokens 0 %s/a.txt", program, dir);
    run_fails(cmd, log, "--shard-tokens: expected an integer in 1..");
    snprintf(cmd, sizeof cmd, "%s --threads 0 %s/a.txt", program, dir);
    run_fails(cmd, log, "--threads: expected an integer in 1..256, found \"0\"");
    snprintf(cmd, sizeof cmd, "%s --doc-sep '\\q' %s/a.txt", program, dir);
    run_fails(cmd, log, "--doc-sep: escape");
    snprintf(cmd, sizeof cmd, "%s --vocab-dir %s/nowhere %s/a.txt", program, dir, dir);
    run_fails(cmd, log, "encoder.json: cannot open");
    snprintf(cmd, sizeof cmd, "%s", program);
    run_fails(cmd, log, "no input files");
    snprintf(cmd, sizeof cmd, "%s --help", program);
    run_ok(cmd);

    free(docs.p);
    bpe_encoder_free(enc);
    printf("tool: %s\n", failures ? "FAILED" : "ok");
    return failures != 0;
}

// ---------------------------------------------------------------------------------------------
// bench: encoding speed on one core (cold cache: a fresh encoder per pass)

static int bench(const char* path, int passes) {
    size_t len;
    uint8_t* text = read_file(path, &len);
    for (int p = 0; p < passes; p++) {
        BpeEncoder* enc = load_encoder(VOCAB_DIR);
        struct timespec a, b;
        clock_gettime(CLOCK_MONOTONIC, &a);
        TokenBuf ids = encode(enc, text, len);
        clock_gettime(CLOCK_MONOTONIC, &b);
        double cold = (double)(b.tv_sec - a.tv_sec) + 1e-9 * (double)(b.tv_nsec - a.tv_nsec);
        size_t n = ids.n;
        ids.n = 0;
        clock_gettime(CLOCK_MONOTONIC, &a);
        char err[ERR_LEN];
        CHECK(bpe_encode(enc, text, len, &ids, err, sizeof err) == 0, "", "%s", err);
        clock_gettime(CLOCK_MONOTONIC, &b);
        double warm = (double)(b.tv_sec - a.tv_sec) + 1e-9 * (double)(b.tv_nsec - a.tv_nsec);
        printf("bench: %s: %.2f MB, %zu tokens: cold cache %.1f MB/s (%.2f M tokens/s), warm "
               "cache %.1f MB/s\n", path, (double)len / 1e6, n, (double)len / 1e6 / cold,
               (double)n / 1e6 / cold, (double)len / 1e6 / warm);
        token_buf_free(&ids);
        bpe_encoder_free(enc);
    }
    free(text);
    return 0;
}

int main(int argc, char** argv) {
    const char* cmd = argc > 1 ? argv[1] : "";
    if (!strcmp(cmd, "known")) return test_known();
    if (!strcmp(cmd, "roundtrip")) return test_roundtrip();
    if (!strcmp(cmd, "reference")) return test_reference();
    if (!strcmp(cmd, "tokenizer_file")) return test_tokenizer_file();
    if (!strcmp(cmd, "vocab_errors")) return test_vocab_errors();
    if (!strcmp(cmd, "unicode")) return test_unicode();
    if (!strcmp(cmd, "fuzz")) return test_fuzz();
    if (!strcmp(cmd, "synth") && argc == 3) return write_synth(argv[2]);
    if (!strcmp(cmd, "tiny_vocab") && argc == 3) return write_tiny_vocab(argv[2]);
    if (!strcmp(cmd, "compare") && argc == 4) return compare(VOCAB_DIR, argv[2], argv[3]);
    if (!strcmp(cmd, "compare") && argc == 6 && !strcmp(argv[2], "--vocab-dir"))
        return compare(argv[3], argv[4], argv[5]);
    if (!strcmp(cmd, "tool") && argc == 3) return test_tool(argv[2]);
    if (!strcmp(cmd, "bench") && (argc == 3 || argc == 4))
        return bench(argv[2], argc == 4 ? atoi(argv[3]) : 3);
    fprintf(stderr,
            "usage: test_bpe known|roundtrip|reference|tokenizer_file|vocab_errors|unicode|fuzz\n"
            "       test_bpe synth OUT | tiny_vocab DIR | tool TOKENIZE_PROGRAM | bench FILE [N]\n"
            "       test_bpe compare [--vocab-dir DIR] TEXT IDS\n");
    return 2;
}
