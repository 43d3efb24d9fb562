// tokenizer.json (and tokenizer_config.json's document token) -> BpeVocab.
#include "data/hf_tokenizer.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "checkpoints/json_read.h"
#include "comm/fail.h"
#include "data/whole_file.h"

#define MAX_TOKENIZER_FILE_BYTES (256u << 20)
// One token's JSON string (its UTF-8, twice its bytes at most in the byte alphabet), a pattern.
#define MAX_TOKEN_JSON 4096
#define MAX_PATTERN 8192
#define MAX_SEQUENCE 4

// Unicode's White_Space, which \s is in Oniguruma (the tokenizers library) and in Rust's regex.
#define WHITE_SPACE "\\t\\n\\x{0B}\\f\\r \\x{85}\\x{A0}\\x{1680}\\x{2000}-\\x{200A}\\x{2028}" \
                    "\\x{2029}\\x{202F}\\x{205F}\\x{3000}"

// The patterns whose chunk rule is known (bpe_vocab.h), as tokenizer.json spells them.
static const char gpt2_pattern[] =
    "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)|\\s+";
static const char llama3_pattern[] =
    "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+"
    "[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";

int hf_pattern_to_pcre2(const char* pattern, char** out, char* err, size_t errlen) {
    size_t cap = strlen(pattern) * (sizeof WHITE_SPACE + 4) + 1, n = 0;
    char* s = xmalloc(cap, "pattern");
    int in_class = 0;
#define EMIT(str) do { size_t l_ = strlen(str); memcpy(s + n, (str), l_); n += l_; } while (0)
    for (size_t i = 0; pattern[i];) {
        const char c = pattern[i];
        if (c == '\\') {
            const char e = pattern[i + 1];
            if (!e) { free(s); return set_err(err, errlen, "pattern: expected a character after "
                                              "the final '\\', found the end"); }
            if (e == 's') EMIT(in_class ? WHITE_SPACE : "[" WHITE_SPACE "]");
            else if (e == 'S' && !in_class) EMIT("[^" WHITE_SPACE "]");
            else if (e == 'S') {
                free(s);
                return set_err(err, errlen, "pattern: byte %zu: expected no \\S inside a "
                               "character class, found one", i);
            } else { s[n++] = c; s[n++] = e; }
            i += 2;
            continue;
        }
        if (!in_class && c == '[') {
            in_class = 1;
            s[n++] = pattern[i++];
            if (pattern[i] == '^') s[n++] = pattern[i++];
            if (pattern[i] == ']') s[n++] = pattern[i++];  // a ']' first is a member
            continue;
        }
        if (in_class && c == '[') {
            const char* close = pattern[i + 1] == ':' ? strstr(pattern + i, ":]") : NULL;
            if (!close) {
                free(s);
                return set_err(err, errlen, "pattern: byte %zu: expected no class nested in a "
                               "character class, found '['", i);
            }
            const size_t l = (size_t)(close + 2 - (pattern + i));  // [:alpha:] is PCRE2's too
            memcpy(s + n, pattern + i, l);
            n += l;
            i += l;
            continue;
        }
        if (in_class && c == ']') in_class = 0;
        s[n++] = pattern[i++];
    }
#undef EMIT
    s[n] = 0;
    *out = s;
    return 0;
}

int hf_tokenizer_locate(const char* path, char* out, size_t n) {
    struct stat st;
    if (stat(path, &st) != 0) return 0;
    if (S_ISDIR(st.st_mode)) {
        if (snprintf(out, n, "%s/tokenizer.json", path) >= (int)n) return 0;
        return stat(out, &st) == 0 && S_ISREG(st.st_mode);
    }
    const size_t len = strlen(path);
    if (!S_ISREG(st.st_mode) || len < 5 || strcmp(path + len - 5, ".json") != 0) return 0;
    return snprintf(out, n, "%s", path) < (int)n;
}

// ---------------------------------------------------------------------------------------------
// Parsing tokenizer.json

typedef struct Entry {
    uint32_t id, off, len;  // token bytes at arena[off .. off + len)
} Entry;

typedef struct MergeText {
    uint32_t left_off, left_len, right_off, right_len;
} MergeText;

typedef struct PreTokenizer {
    char type[32];
    char* regex;          // a Split's pattern.Regex (malloc'd)
    int string_pattern;   // a Split's pattern was a String
    char behavior[32];
    int invert, add_prefix_space, use_regex;  // -1 when absent
} PreTokenizer;

typedef struct Parse {
    const char* path;
    JsonCursor c;
    int16_t cp_to_byte[BPE_ALPHABET_CODE_POINTS];
    uint8_t* arena;
    size_t arena_len, arena_cap;
    Entry *vocab, *added;
    size_t nvocab, vocab_cap, nadded, added_cap;
    MergeText* merges;
    size_t nmerges, merges_cap;
    PreTokenizer pre;                    // the pre_tokenizer itself
    PreTokenizer steps[MAX_SEQUENCE];    // a Sequence's pretokenizers
    int nsteps;
    char model_type[32];
    int have_model, have_pre, have_decoder, ignore_merges;
    char* err;
    size_t errlen;
    char buf[MAX_TOKEN_JSON];
} Parse;

static void* grow_array(void* p, size_t* cap, size_t need, size_t elem, const char* what) {
    if (need <= *cap) return p;
    size_t c = *cap ? *cap : 1024;
    while (c < need) c *= 2;
    void* q = realloc(p, c * elem);
    CHECK(q, "", "out of memory for %zu %s", c, what);
    *cap = c;
    return q;
}

// The cursor's one-line reason, with the file and the key being read.
static int jfail(Parse* ps, const char* where) {
    return set_err(ps->err, ps->errlen, "%s: %s: %s", ps->path, where, ps->c.err);
}

static char peek(const Parse* ps) {
    const char* p = ps->c.p;
    while (*p == ' ' || *p == '\t' || *p == '\n' || *p == '\r') p++;
    return *p;
}

// A token's text s as raw bytes appended to the arena: each character through the byte
// alphabet (byte_level), or the text's own UTF-8.
static int token_bytes(Parse* ps, const char* where, const char* s, int byte_level,
                       uint32_t* off, uint32_t* len) {
    const size_t n = strlen(s);
    if (n == 0)
        return set_err(ps->err, ps->errlen, "%s: %s: expected a non-empty token, found \"\"",
                       ps->path, where);
    ps->arena = grow_array(ps->arena, &ps->arena_cap, ps->arena_len + n, 1, "token bytes");
    *off = (uint32_t)ps->arena_len;
    if (!byte_level) {
        memcpy(ps->arena + ps->arena_len, s, n);
        ps->arena_len += n;
    } else {
        const uint8_t *p = (const uint8_t*)s, *end = p + n;
        while (p < end) {
            uint32_t cp = 0;
            const int k = bpe_utf8_decode(p, end, &cp);
            if (k == 0 || cp >= BPE_ALPHABET_CODE_POINTS || ps->cp_to_byte[cp] < 0) {
                char found[32];
                if (k == 0) snprintf(found, sizeof found, "invalid UTF-8");
                else snprintf(found, sizeof found, "U+%04X", cp);
                return set_err(ps->err, ps->errlen, "%s: %s: token \"%.40s\": expected "
                               "characters of the byte-level alphabet (GPT-2's), found %s "
                               "(SentencePiece-style vocabularies are not supported)", ps->path,
                               where, s, found);
            }
            ps->arena[ps->arena_len++] = (uint8_t)ps->cp_to_byte[cp];
            p += k;
        }
    }
    *len = (uint32_t)(ps->arena_len - *off);
    return 0;
}

static int read_string(Parse* ps, const char* where, char* out, size_t n) {
    return json_string(&ps->c, out, n) == 0 ? 0 : jfail(ps, where);
}

// true, false or null into *out (1, 0, -1).
static int read_literal(Parse* ps, const char* where, int* out) {
    return json_literal(&ps->c, out) == 0 ? 0 : jfail(ps, where);
}

// An object's "type", the rest skipped (for naming what is refused).
static int read_type_only(Parse* ps, const char* where, char* type, size_t n) {
    char key[64];
    int more;
    snprintf(type, n, "an object without \"type\"");
    if (json_object_begin(&ps->c) != 0) return jfail(ps, where);
    while ((more = json_object_next(&ps->c, key, sizeof key)) == 1) {
        if (strcmp(key, "type") == 0) {
            if (read_string(ps, where, type, n) != 0) return -1;
        } else if (json_skip(&ps->c) != 0) {
            return jfail(ps, where);
        }
    }
    return more == 0 ? 0 : jfail(ps, where);
}

static int parse_vocab(Parse* ps) {
    int more;
    if (json_object_begin(&ps->c) != 0) return jfail(ps, "model.vocab");
    while ((more = json_object_next(&ps->c, ps->buf, sizeof ps->buf)) == 1) {
        Entry e;
        unsigned long long id;
        if (token_bytes(ps, "model.vocab", ps->buf, 1, &e.off, &e.len) != 0) return -1;
        if (json_count(&ps->c, TOKENIZER_MAX_VOCAB - 1, &id) != 0)
            return jfail(ps, "model.vocab");
        e.id = (uint32_t)id;
        ps->vocab = grow_array(ps->vocab, &ps->vocab_cap, ps->nvocab + 1, sizeof *ps->vocab,
                               "vocabulary entries");
        ps->vocab[ps->nvocab++] = e;
    }
    return more == 0 ? 0 : jfail(ps, "model.vocab");
}

// One merge: "A B" (the library's older form) or ["A", "B"].
static int parse_merge(Parse* ps, MergeText* m) {
    char where[48];
    snprintf(where, sizeof where, "model.merges[%zu]", ps->nmerges);
    if (peek(ps) == '[') {
        char* second = ps->buf + MAX_TOKEN_JSON / 2;
        if (json_array_begin(&ps->c) != 0 || json_array_next(&ps->c) != 1 ||
            json_string(&ps->c, ps->buf, MAX_TOKEN_JSON / 2) != 0 ||
            json_array_next(&ps->c) != 1 || json_string(&ps->c, second, MAX_TOKEN_JSON / 2) != 0)
            return ps->c.err[0] ? jfail(ps, where)
                   : set_err(ps->err, ps->errlen, "%s: %s: expected two tokens, found fewer",
                             ps->path, where);
        const int more = json_array_next(&ps->c);
        if (more != 0)
            return more < 0 ? jfail(ps, where)
                   : set_err(ps->err, ps->errlen, "%s: %s: expected two tokens, found more",
                             ps->path, where);
        return token_bytes(ps, where, ps->buf, 1, &m->left_off, &m->left_len) != 0 ||
               token_bytes(ps, where, second, 1, &m->right_off, &m->right_len) != 0 ? -1 : 0;
    }
    if (read_string(ps, where, ps->buf, sizeof ps->buf) != 0) return -1;
    char* space = strchr(ps->buf, ' ');
    if (!space || strchr(space + 1, ' '))
        return set_err(ps->err, ps->errlen, "%s: %s: expected \"A B\" (two tokens and one "
                       "space), found \"%.40s\"", ps->path, where, ps->buf);
    *space = 0;
    return token_bytes(ps, where, ps->buf, 1, &m->left_off, &m->left_len) != 0 ||
           token_bytes(ps, where, space + 1, 1, &m->right_off, &m->right_len) != 0 ? -1 : 0;
}

static int parse_merges(Parse* ps) {
    int more;
    if (json_array_begin(&ps->c) != 0) return jfail(ps, "model.merges");
    while ((more = json_array_next(&ps->c)) == 1) {
        ps->merges = grow_array(ps->merges, &ps->merges_cap, ps->nmerges + 1,
                                sizeof *ps->merges, "merges");
        if (parse_merge(ps, &ps->merges[ps->nmerges]) != 0) return -1;
        ps->nmerges++;
    }
    return more == 0 ? 0 : jfail(ps, "model.merges");
}

// A key that must be null or "" (continuing_subword_prefix, end_of_word_suffix).
static int expect_no_affix(Parse* ps, const char* key) {
    char where[80], text[64];
    snprintf(where, sizeof where, "model.%s", key);
    if (peek(ps) == 'n') {
        int v;
        return read_literal(ps, where, &v);
    }
    if (read_string(ps, where, text, sizeof text) != 0) return -1;
    if (text[0])
        return set_err(ps->err, ps->errlen, "%s: %s: expected null or \"\", found \"%s\" "
                       "(word prefixes and suffixes are not supported)", ps->path, where, text);
    return 0;
}

static int parse_model(Parse* ps) {
    char key[64];
    int more;
    if (json_object_begin(&ps->c) != 0) return jfail(ps, "model");
    while ((more = json_object_next(&ps->c, key, sizeof key)) == 1) {
        int v = 0;
        if (strcmp(key, "type") == 0) {
            if (read_string(ps, "model.type", ps->model_type, sizeof ps->model_type) != 0)
                return -1;
        } else if (strcmp(key, "vocab") == 0) {
            if (parse_vocab(ps) != 0) return -1;
        } else if (strcmp(key, "merges") == 0) {
            if (parse_merges(ps) != 0) return -1;
        } else if (strcmp(key, "ignore_merges") == 0) {
            if (read_literal(ps, "model.ignore_merges", &v) != 0) return -1;
            ps->ignore_merges = v == 1;
        } else if (strcmp(key, "byte_fallback") == 0) {
            if (read_literal(ps, "model.byte_fallback", &v) != 0) return -1;
            if (v == 1)
                return set_err(ps->err, ps->errlen, "%s: model.byte_fallback: expected false, "
                               "found true (SentencePiece-style vocabularies with byte "
                               "fallback, e.g. Llama 2's, are not supported)", ps->path);
        } else if (strcmp(key, "dropout") == 0) {
            if (peek(ps) != 'n')
                return set_err(ps->err, ps->errlen, "%s: model.dropout: expected null, found "
                               "a value (BPE dropout is not supported)", ps->path);
            if (read_literal(ps, "model.dropout", &v) != 0) return -1;
        } else if (strcmp(key, "continuing_subword_prefix") == 0 ||
                   strcmp(key, "end_of_word_suffix") == 0) {
            if (expect_no_affix(ps, key) != 0) return -1;
        } else if (json_skip(&ps->c) != 0) {  // unk_token, fuse_unk: a byte-level BPE has no
            return jfail(ps, "model");       // unknown text
        }
    }
    if (more != 0) return jfail(ps, "model");
    if (strcmp(ps->model_type, "BPE") != 0)
        return set_err(ps->err, ps->errlen, "%s: model.type: expected \"BPE\", found \"%s\"",
                       ps->path, ps->model_type[0] ? ps->model_type : "none");
    ps->have_model = 1;
    return 0;
}

static int parse_added_tokens(Parse* ps) {
    int more;
    if (json_array_begin(&ps->c) != 0) return jfail(ps, "added_tokens");
    while ((more = json_array_next(&ps->c)) == 1) {
        char key[64], where[48];
        snprintf(where, sizeof where, "added_tokens[%zu]", ps->nadded);
        Entry e = {0};
        int have_id = 0, have_content = 0, special = -1, m;
        unsigned long long id = 0;
        if (json_object_begin(&ps->c) != 0) return jfail(ps, where);
        while ((m = json_object_next(&ps->c, key, sizeof key)) == 1) {
            if (strcmp(key, "id") == 0) {
                if (json_count(&ps->c, TOKENIZER_MAX_VOCAB - 1, &id) != 0)
                    return jfail(ps, where);
                have_id = 1;
            } else if (strcmp(key, "content") == 0) {
                if (read_string(ps, where, ps->buf, sizeof ps->buf) != 0 ||
                    token_bytes(ps, where, ps->buf, 0, &e.off, &e.len) != 0)
                    return -1;
                have_content = 1;
            } else if (strcmp(key, "special") == 0) {
                if (read_literal(ps, where, &special) != 0) return -1;
            } else if (json_skip(&ps->c) != 0) {
                return jfail(ps, where);
            }
        }
        if (m != 0) return jfail(ps, where);
        if (!have_id || !have_content)
            return set_err(ps->err, ps->errlen, "%s: %s: expected \"id\" and \"content\", "
                           "found no %s", ps->path, where, have_id ? "content" : "id");
        if (special != 1)
            return set_err(ps->err, ps->errlen, "%s: %s \"%.*s\": special: expected true, "
                           "found %s (added tokens that split text are not supported)",
                           ps->path, where, (int)e.len, (const char*)ps->arena + e.off,
                           special == 0 ? "false" : "none");
        e.id = (uint32_t)id;
        ps->added = grow_array(ps->added, &ps->added_cap, ps->nadded + 1, sizeof *ps->added,
                               "added tokens");
        ps->added[ps->nadded++] = e;
    }
    return more == 0 ? 0 : jfail(ps, "added_tokens");
}

static int parse_pre_object(Parse* ps, PreTokenizer* t, int top);

static int parse_sequence(Parse* ps) {
    int more;
    if (json_array_begin(&ps->c) != 0) return jfail(ps, "pre_tokenizer.pretokenizers");
    while ((more = json_array_next(&ps->c)) == 1) {
        if (ps->nsteps == MAX_SEQUENCE)
            return set_err(ps->err, ps->errlen, "%s: pre_tokenizer.pretokenizers: expected at "
                           "most %d, found more", ps->path, MAX_SEQUENCE);
        if (parse_pre_object(ps, &ps->steps[ps->nsteps++], 0) != 0) return -1;
    }
    return more == 0 ? 0 : jfail(ps, "pre_tokenizer.pretokenizers");
}

static int parse_pre_object(Parse* ps, PreTokenizer* t, int top) {
    const char* where = top ? "pre_tokenizer" : "pre_tokenizer.pretokenizers";
    char key[64];
    int more;
    t->invert = t->add_prefix_space = t->use_regex = -1;
    if (json_object_begin(&ps->c) != 0) return jfail(ps, where);
    while ((more = json_object_next(&ps->c, key, sizeof key)) == 1) {
        if (strcmp(key, "type") == 0) {
            if (read_string(ps, where, t->type, sizeof t->type) != 0) return -1;
        } else if (strcmp(key, "behavior") == 0) {
            if (read_string(ps, where, t->behavior, sizeof t->behavior) != 0) return -1;
        } else if (strcmp(key, "invert") == 0) {
            if (read_literal(ps, where, &t->invert) != 0) return -1;
        } else if (strcmp(key, "add_prefix_space") == 0) {
            if (read_literal(ps, where, &t->add_prefix_space) != 0) return -1;
        } else if (strcmp(key, "use_regex") == 0) {
            if (read_literal(ps, where, &t->use_regex) != 0) return -1;
        } else if (strcmp(key, "pretokenizers") == 0 && top) {
            if (parse_sequence(ps) != 0) return -1;
        } else if (strcmp(key, "pattern") == 0) {
            char pkey[16];
            int m;
            if (json_object_begin(&ps->c) != 0) return jfail(ps, where);
            while ((m = json_object_next(&ps->c, pkey, sizeof pkey)) == 1) {
                if (strcmp(pkey, "Regex") == 0 && !t->regex) {
                    char* text = xmalloc(MAX_PATTERN, "pattern");
                    if (read_string(ps, where, text, MAX_PATTERN) != 0) { free(text); return -1; }
                    t->regex = text;
                } else {
                    t->string_pattern |= strcmp(pkey, "String") == 0;
                    if (json_skip(&ps->c) != 0) return jfail(ps, where);
                }
            }
            if (m != 0) return jfail(ps, where);
        } else if (json_skip(&ps->c) != 0) {
            return jfail(ps, where);
        }
    }
    return more == 0 ? 0 : jfail(ps, where);
}

static int is_byte_level(const PreTokenizer* t, int use_regex) {
    return strcmp(t->type, "ByteLevel") == 0 && t->add_prefix_space != 1 &&
           (use_regex ? t->use_regex != 0 : t->use_regex == 0);
}

// The pre-tokenizer's pattern (tokenizer.json's spelling), or NULL with err set.
static const char* pre_tokenizer_pattern(Parse* ps) {
    if (!ps->have_pre) {
        set_err(ps->err, ps->errlen, "%s: pre_tokenizer: expected a ByteLevel pre-tokenizer, "
                "found none", ps->path);
        return NULL;
    }
    if (is_byte_level(&ps->pre, 1)) return gpt2_pattern;
    const PreTokenizer* split = &ps->steps[0];
    if (strcmp(ps->pre.type, "Sequence") == 0 && ps->nsteps == 2 &&
        strcmp(split->type, "Split") == 0 && split->regex && !split->string_pattern &&
        strcmp(split->behavior, "Isolated") == 0 && split->invert != 1 &&
        is_byte_level(&ps->steps[1], 0))
        return split->regex;
    char found[160];
    if (strcmp(ps->pre.type, "Sequence") == 0) {
        int n = snprintf(found, sizeof found, "Sequence [");
        for (int i = 0; i < ps->nsteps && n < (int)sizeof found; i++)
            n += snprintf(found + n, sizeof found - (size_t)n, "%s%s", i ? ", " : "",
                          ps->steps[i].type);
        if (n < (int)sizeof found) snprintf(found + n, sizeof found - (size_t)n, "]");
    } else {
        snprintf(found, sizeof found, "%s", ps->pre.type);
    }
    set_err(ps->err, ps->errlen, "%s: pre_tokenizer: expected ByteLevel (use_regex true, "
            "add_prefix_space false), or a Sequence of a Split by a Regex (Isolated) and "
            "ByteLevel (use_regex false, add_prefix_space false), found %s", ps->path, found);
    return NULL;
}

static int parse_top(Parse* ps) {
    char key[64], type[64];
    int more;
    if (json_object_begin(&ps->c) != 0) return jfail(ps, "the top level");
    while ((more = json_object_next(&ps->c, key, sizeof key)) == 1) {
        if (strcmp(key, "model") == 0) {
            if (parse_model(ps) != 0) return -1;
        } else if (strcmp(key, "added_tokens") == 0) {
            if (parse_added_tokens(ps) != 0) return -1;
        } else if (strcmp(key, "pre_tokenizer") == 0 && peek(ps) == '{') {
            if (parse_pre_object(ps, &ps->pre, 1) != 0) return -1;
            ps->have_pre = 1;
        } else if ((strcmp(key, "normalizer") == 0 || strcmp(key, "decoder") == 0) &&
                   peek(ps) == '{') {
            if (read_type_only(ps, key, type, sizeof type) != 0) return -1;
            if (strcmp(key, "normalizer") == 0)
                return set_err(ps->err, ps->errlen, "%s: normalizer: expected null, found %s "
                               "(tokenizers that normalize text first, e.g. Llama 2's "
                               "SentencePiece-style or Qwen2's NFC, are not supported)",
                               ps->path, type);
            if (strcmp(type, "ByteLevel") != 0)
                return set_err(ps->err, ps->errlen, "%s: decoder: expected ByteLevel, found "
                               "%s", ps->path, type);
            ps->have_decoder = 1;
        } else if (json_skip(&ps->c) != 0) {  // version, truncation, padding, post_processor
            return jfail(ps, "the top level");
        }
    }
    if (more != 0 || json_end(&ps->c) != 0) return jfail(ps, "the top level");
    if (!ps->have_model)
        return set_err(ps->err, ps->errlen, "%s: model: expected a BPE model, found none",
                       ps->path);
    if (!ps->have_decoder)
        return set_err(ps->err, ps->errlen, "%s: decoder: expected ByteLevel, found none",
                       ps->path);
    return 0;
}

// ---------------------------------------------------------------------------------------------
// The vocabulary from the parsed entries

static int build_table(Parse* ps, BpeVocab* v) {
    uint32_t V = 0;
    for (size_t i = 0; i < ps->nvocab; i++) V = ps->vocab[i].id + 1 > V ? ps->vocab[i].id + 1 : V;
    for (size_t i = 0; i < ps->nadded; i++) V = ps->added[i].id + 1 > V ? ps->added[i].id + 1 : V;
    if (ps->nvocab == 0)
        return set_err(ps->err, ps->errlen, "%s: model.vocab: expected tokens, found none",
                       ps->path);
    if (V > ps->nvocab + ps->nadded)  // a gap, found before anything of V's size is allocated
        return set_err(ps->err, ps->errlen, "%s: model.vocab and added_tokens: expected the ids "
                       "0..%zu of their %zu tokens, found id %u", ps->path,
                       ps->nvocab + ps->nadded - 1, ps->nvocab + ps->nadded, V - 1);
    const Entry** of = xcalloc(V, sizeof *of, "token id index");
    uint8_t* added = xcalloc(V, 1, "added token flags");
    int rc = 0;
    for (size_t i = 0; i < ps->nvocab && rc == 0; i++) {
        const Entry* e = &ps->vocab[i];
        if (of[e->id])
            rc = set_err(ps->err, ps->errlen, "%s: model.vocab: id %u: expected each id once, "
                         "found it twice", ps->path, e->id);
        of[e->id] = e;
    }
    for (size_t i = 0; i < ps->nadded && rc == 0; i++) {  // the vocabulary's own token, or new
        const Entry* e = &ps->added[i];
        const Entry* had = of[e->id];
        if (had && (added[e->id] || had->len != e->len ||
                    memcmp(ps->arena + had->off, ps->arena + e->off, e->len) != 0))
            rc = set_err(ps->err, ps->errlen, "%s: added_tokens: id %u \"%.*s\": expected a "
                         "new id or the vocabulary's token of that id, found another", ps->path,
                         e->id, (int)e->len, (const char*)ps->arena + e->off);
        if (!had) of[e->id] = e;
        added[e->id] = 1;
    }
    for (uint32_t id = 0; id < V && rc == 0; id++)
        if (!of[id])
            rc = set_err(ps->err, ps->errlen, "%s: model.vocab and added_tokens: expected every "
                         "id 0..%u, found none for %u", ps->path, V - 1, id);
    if (rc == 0) {
        TokenTable* t = &v->table;
        t->vocab_size = V;
        t->eot_id = TOKENIZER_NO_EOT;
        t->offset = xmalloc(((size_t)V + 1) * sizeof *t->offset, "token offsets");
        t->bytes = xmalloc(ps->arena_len + 1, "token bytes");
        size_t pos = 0;
        for (uint32_t id = 0; id < V; id++) {
            memcpy(t->bytes + pos, ps->arena + of[id]->off, of[id]->len);
            t->offset[id] = (uint32_t)pos;
            pos += of[id]->len;
        }
        t->offset[V] = (uint32_t)pos;
        token_index_init(&v->index, t, ps->nvocab);
        for (size_t i = 0; i < ps->nvocab && rc == 0; i++)
            if (token_index_insert(&v->index, ps->vocab[i].id) != 0)
                rc = set_err(ps->err, ps->errlen, "%s: model.vocab: token id %u: expected each "
                             "token once, found a repeat", ps->path, ps->vocab[i].id);
    }
    free(of);
    free(added);
    for (int b = 0; b < 256 && rc == 0; b++) {
        const uint8_t byte = (uint8_t)b;
        const long id = token_index_find(&v->index, &byte, 1);
        if (id < 0)
            rc = set_err(ps->err, ps->errlen, "%s: model.vocab: expected every single byte as a "
                         "token, found none for byte 0x%02X", ps->path, b);
        else v->byte_token[b] = (uint32_t)id;
    }
    return rc;
}

static int build_rules(Parse* ps, BpeVocab* v) {
    v->rules = xmalloc((ps->nmerges ? ps->nmerges : 1) * sizeof *v->rules, "merge rules");
    uint8_t* joined = xmalloc(2 * MAX_TOKEN_JSON, "merged token");
    int rc = 0;
    for (size_t r = 0; r < ps->nmerges && rc == 0; r++) {
        const MergeText* m = &ps->merges[r];
        const uint8_t *a = ps->arena + m->left_off, *b = ps->arena + m->right_off;
        const long left = token_index_find(&v->index, a, m->left_len);
        const long right = token_index_find(&v->index, b, m->right_len);
        memcpy(joined, a, m->left_len);
        memcpy(joined + m->left_len, b, m->right_len);
        const long merged = token_index_find(&v->index, joined, m->left_len + m->right_len);
        if (left < 0 || right < 0 || merged < 0)
            rc = set_err(ps->err, ps->errlen, "%s: model.merges[%zu]: expected %s of the "
                         "vocabulary, found \"%.*s\" that is not one", ps->path, r,
                         merged < 0 && left >= 0 && right >= 0 ? "the merge to be a token"
                                                               : "two tokens",
                         (int)(left < 0 ? m->left_len : right < 0 ? m->right_len
                                                       : m->left_len + m->right_len),
                         (const char*)(left < 0 ? a : right < 0 ? b : joined));
        else v->rules[v->nrules++] = (BpeRule){(uint32_t)left, (uint32_t)right,
                                               (uint32_t)merged, (uint32_t)r};
    }
    free(joined);
    return rc;
}

// ---------------------------------------------------------------------------------------------
// tokenizer_config.json: the document token

static long find_text(const TokenTable* t, const char* s) {
    const size_t n = strlen(s);
    for (uint32_t id = 0; id < t->vocab_size; id++)
        if (t->offset[id + 1] - t->offset[id] == n && memcmp(t->bytes + t->offset[id], s, n) == 0)
            return id;
    return -1;
}

// A special token entry: a string, {"content": ...} (older files' AddedToken) or null ("").
static int read_token_name(JsonCursor* c, char* out, size_t n) {
    out[0] = 0;
    const char* p = c->p;
    while (*p == ' ' || *p == '\t' || *p == '\n' || *p == '\r') p++;
    if (*p == '"') return json_string(c, out, n);
    if (*p == '{') {
        char key[32];
        int more;
        if (json_object_begin(c) != 0) return -1;
        while ((more = json_object_next(c, key, sizeof key)) == 1)
            if ((strcmp(key, "content") == 0 ? json_string(c, out, n) : json_skip(c)) != 0)
                return -1;
        return more == 0 ? 0 : -1;
    }
    int v;
    return json_literal(c, &v);
}

static int document_token(const char* path, TokenTable* t, char* err, size_t errlen) {
    char config[4096];
    const char* slash = strrchr(path, '/');
    const int dir_len = slash ? (int)(slash - path) : 1;
    snprintf(config, sizeof config, "%.*s/tokenizer_config.json", dir_len, slash ? path : ".");
    char bos[512] = "", eos[512] = "";
    struct stat st;
    if (stat(config, &st) == 0) {
        uint8_t* text = NULL;
        size_t len = 0;
        if (whole_file_read(config, MAX_TOKENIZER_FILE_BYTES, "tokenizer config", &text, &len,
                            err, errlen) != 0)
            return -1;
        JsonCursor c;
        char key[64];
        int more, rc = 0;
        json_init(&c, (const char*)text);
        if (json_object_begin(&c) != 0) rc = -1;
        while (rc == 0 && (more = json_object_next(&c, key, sizeof key)) == 1)
            rc = strcmp(key, "bos_token") == 0 ? read_token_name(&c, bos, sizeof bos)
               : strcmp(key, "eos_token") == 0 ? read_token_name(&c, eos, sizeof eos)
               : json_skip(&c);
        if (rc == 0 && (more != 0 || json_end(&c) != 0)) rc = -1;
        free(text);
        if (rc != 0) return set_err(err, errlen, "%s: %s", config, c.err);
        const char* name = bos[0] ? bos : eos;
        if (name[0]) {
            const long id = find_text(t, name);
            if (id < 0)
                return set_err(err, errlen, "%s: %s \"%s\": expected a token of %s, found none",
                               config, bos[0] ? "bos_token" : "eos_token", name, path);
            t->eot_id = (uint32_t)id;
            return 0;
        }
    }
    const long id = find_text(t, "<|endoftext|>");
    t->eot_id = id < 0 ? TOKENIZER_NO_EOT : (uint32_t)id;
    return 0;
}

// ---------------------------------------------------------------------------------------------

static void parse_free(Parse* ps) {
    free(ps->arena);
    free(ps->vocab);
    free(ps->added);
    free(ps->merges);
    free(ps->pre.regex);
    for (int i = 0; i < ps->nsteps; i++) free(ps->steps[i].regex);
}

int hf_tokenizer_load(const char* path, BpeVocab* vocab, char* err, size_t errlen) {
    memset(vocab, 0, sizeof *vocab);
    Parse* ps = xcalloc(1, sizeof *ps, "tokenizer.json parser");
    ps->path = path;
    ps->err = err;
    ps->errlen = errlen;
    bpe_alphabet_decoder(ps->cp_to_byte);
    BpeVocab v = {0};
    uint8_t* text = NULL;
    size_t len = 0;
    int rc = whole_file_read(path, MAX_TOKENIZER_FILE_BYTES, "tokenizer file", &text, &len, err,
                             errlen);
    if (rc == 0) {
        json_init(&ps->c, (const char*)text);
        rc = parse_top(ps);
    }
    const char* pattern = rc == 0 ? pre_tokenizer_pattern(ps) : NULL;
    if (rc == 0 && !pattern) rc = -1;
    if (rc == 0 && hf_pattern_to_pcre2(pattern, &v.pattern, err, errlen) != 0) {
        char reason[256];
        snprintf(reason, sizeof reason, "%s", err);
        rc = set_err(err, errlen, "%s: pre_tokenizer: %s", path, reason);
    }
    if (rc == 0) rc = build_table(ps, &v);
    if (rc == 0) rc = build_rules(ps, &v);
    if (rc == 0) rc = document_token(path, &v.table, err, errlen);
    if (rc == 0) {
        v.merge_one_at_a_time = 1;
        v.ignore_merges = ps->ignore_merges;
        const int gpt2 = strcmp(pattern, gpt2_pattern) == 0;
        const int llama3 = strcmp(pattern, llama3_pattern) == 0;
        v.chunk_rule = gpt2 ? BPE_CHUNK_GPT2 : llama3 ? BPE_CHUNK_LLAMA3 : BPE_CHUNK_NONE;
        snprintf(v.description, sizeof v.description, "tokenizer.json, byte-level BPE, %s "
                 "pattern", gpt2 ? "GPT-2's" : llama3 ? "Llama 3's" : "its own");
        *vocab = v;
    } else {
        bpe_vocab_free(&v);
    }
    parse_free(ps);
    free(ps);
    free(text);
    return rc;
}
