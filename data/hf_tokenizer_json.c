// tokenizer.json -> HfTokenizerFile: the JSON cursor over the whole file, key by key.
#include "data/hf_tokenizer_json.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "checkpoints/json_read.h"
#include "comm/fail.h"
#include "data/tokenizer_file.h"
#include "data/whole_file.h"

#define MAX_TOKENIZER_FILE_BYTES (256u << 20)
// One token's JSON string, a pattern.
#define MAX_TOKEN_JSON 4096
#define MAX_PATTERN 8192

typedef struct Parse {
    const char* path;
    JsonCursor c;
    HfTokenizerFile* f;
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

// A token's text s appended to the file's text.
static int store_text(Parse* ps, const char* where, const char* s, HfText* t) {
    HfTokenizerFile* f = ps->f;
    const size_t n = strlen(s);
    if (n == 0)
        return set_err(ps->err, ps->errlen, "%s: %s: expected a non-empty token, found \"\"",
                       ps->path, where);
    f->text = grow_array(f->text, &f->text_cap, f->text_len + n, 1, "token text");
    memcpy(f->text + f->text_len, s, n);
    t->off = (uint32_t)f->text_len;
    t->len = (uint32_t)n;
    f->text_len += n;
    return 0;
}

static int read_string(Parse* ps, const char* where, char* out, size_t n) {
    return json_string(&ps->c, out, n) == 0 ? 0 : jfail(ps, where);
}

// true, false or null into *out (1, 0, -1).
static int read_literal(Parse* ps, const char* where, int* out) {
    return json_literal(&ps->c, out) == 0 ? 0 : jfail(ps, where);
}

// A whole number of at most 2^20 (Strip's start and stop).
static int read_small_count(Parse* ps, const char* where, int* out) {
    unsigned long long v;
    if (json_count(&ps->c, 1u << 20, &v) != 0) return jfail(ps, where);
    *out = (int)v;
    return 0;
}

static int parse_vocab(Parse* ps) {
    HfTokenizerFile* f = ps->f;
    int more;
    if (json_object_begin(&ps->c) != 0) return jfail(ps, "model.vocab");
    while ((more = json_object_next(&ps->c, ps->buf, sizeof ps->buf)) == 1) {
        HfEntry e = {0};
        unsigned long long id;
        if (store_text(ps, "model.vocab", ps->buf, &e.text) != 0) return -1;
        if (json_count(&ps->c, TOKENIZER_MAX_VOCAB - 1, &id) != 0)
            return jfail(ps, "model.vocab");
        e.id = (uint32_t)id;
        f->vocab = grow_array(f->vocab, &f->vocab_cap, f->nvocab + 1, sizeof *f->vocab,
                              "vocabulary entries");
        f->vocab[f->nvocab++] = e;
    }
    return more == 0 ? 0 : jfail(ps, "model.vocab");
}

// One merge: "A B" (the library's older form) or ["A", "B"].
static int parse_merge(Parse* ps, HfMerge* m) {
    char where[48];
    snprintf(where, sizeof where, "model.merges[%zu]", ps->f->nmerges);
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
        return store_text(ps, where, ps->buf, &m->left) != 0 ||
               store_text(ps, where, second, &m->right) != 0 ? -1 : 0;
    }
    if (read_string(ps, where, ps->buf, sizeof ps->buf) != 0) return -1;
    char* space = strchr(ps->buf, ' ');
    if (!space || strchr(space + 1, ' '))
        return set_err(ps->err, ps->errlen, "%s: %s: expected \"A B\" (two tokens and one "
                       "space), found \"%.40s\"", ps->path, where, ps->buf);
    *space = 0;
    return store_text(ps, where, ps->buf, &m->left) != 0 ||
           store_text(ps, where, space + 1, &m->right) != 0 ? -1 : 0;
}

static int parse_merges(Parse* ps) {
    HfTokenizerFile* f = ps->f;
    int more;
    if (json_array_begin(&ps->c) != 0) return jfail(ps, "model.merges");
    while ((more = json_array_next(&ps->c)) == 1) {
        f->merges = grow_array(f->merges, &f->merges_cap, f->nmerges + 1, sizeof *f->merges,
                               "merges");
        if (parse_merge(ps, &f->merges[f->nmerges]) != 0) return -1;
        f->nmerges++;
    }
    return more == 0 ? 0 : jfail(ps, "model.merges");
}

// continuing_subword_prefix or end_of_word_suffix: null and "" are no affix.
static int parse_affix(Parse* ps, const char* key) {
    char where[80], text[32];
    snprintf(where, sizeof where, "model.%s", key);
    if (peek(ps) == 'n') {
        int v;
        return read_literal(ps, where, &v);
    }
    if (read_string(ps, where, text, sizeof text) != 0) return -1;
    if (text[0] && !ps->f->affix[0])
        snprintf(ps->f->affix, sizeof ps->f->affix, "%.25s \"%.10s\"", key, text);
    return 0;
}

static int parse_model(Parse* ps) {
    HfTokenizerFile* f = ps->f;
    char key[64];
    int more;
    if (json_object_begin(&ps->c) != 0) return jfail(ps, "model");
    while ((more = json_object_next(&ps->c, key, sizeof key)) == 1) {
        int rc;
        if (strcmp(key, "type") == 0) {
            rc = read_string(ps, "model.type", f->model_type, sizeof f->model_type);
        } else if (strcmp(key, "vocab") == 0) {
            rc = parse_vocab(ps);
        } else if (strcmp(key, "merges") == 0) {
            rc = parse_merges(ps);
        } else if (strcmp(key, "ignore_merges") == 0) {
            rc = read_literal(ps, "model.ignore_merges", &f->ignore_merges);
        } else if (strcmp(key, "byte_fallback") == 0) {
            rc = read_literal(ps, "model.byte_fallback", &f->byte_fallback);
        } else if (strcmp(key, "dropout") == 0) {
            f->dropout = peek(ps) != 'n';
            rc = json_skip(&ps->c) == 0 ? 0 : jfail(ps, "model.dropout");
        } else if (strcmp(key, "continuing_subword_prefix") == 0 ||
                   strcmp(key, "end_of_word_suffix") == 0) {
            rc = parse_affix(ps, key);
        } else {  // unk_token, fuse_unk: a byte-level or byte-fallback BPE has no unknown text
            rc = json_skip(&ps->c) == 0 ? 0 : jfail(ps, "model");
        }
        if (rc != 0) return -1;
    }
    if (more != 0) return jfail(ps, "model");
    f->have_model = 1;
    return 0;
}

static int parse_added_tokens(Parse* ps) {
    HfTokenizerFile* f = ps->f;
    int more;
    if (json_array_begin(&ps->c) != 0) return jfail(ps, "added_tokens");
    while ((more = json_array_next(&ps->c)) == 1) {
        char key[64], where[48];
        snprintf(where, sizeof where, "added_tokens[%zu]", f->nadded);
        HfEntry e = {.special = -1, .single_word = -1, .lstrip = -1, .rstrip = -1,
                     .normalized = -1};
        struct { const char* key; int* out; } flags[] = {
            {"special", &e.special}, {"single_word", &e.single_word}, {"lstrip", &e.lstrip},
            {"rstrip", &e.rstrip}, {"normalized", &e.normalized},
        };
        int have_id = 0, have_content = 0, m;
        unsigned long long id = 0;
        if (json_object_begin(&ps->c) != 0) return jfail(ps, where);
        while ((m = json_object_next(&ps->c, key, sizeof key)) == 1) {
            int rc = 1;  // 1: not read yet
            for (size_t k = 0; k < sizeof flags / sizeof *flags && rc == 1; k++)
                if (strcmp(key, flags[k].key) == 0) rc = read_literal(ps, where, flags[k].out);
            if (rc == 1 && strcmp(key, "id") == 0) {
                rc = json_count(&ps->c, TOKENIZER_MAX_VOCAB - 1, &id) == 0 ? 0 : jfail(ps, where);
                have_id = 1;
            } else if (rc == 1 && strcmp(key, "content") == 0) {
                rc = read_string(ps, where, ps->buf, sizeof ps->buf) != 0 ||
                     store_text(ps, where, ps->buf, &e.text) != 0 ? -1 : 0;
                have_content = 1;
            } else if (rc == 1) {
                rc = json_skip(&ps->c) == 0 ? 0 : jfail(ps, where);
            }
            if (rc != 0) return -1;
        }
        if (m != 0) return jfail(ps, where);
        if (!have_id || !have_content)
            return set_err(ps->err, ps->errlen, "%s: %s: expected \"id\" and \"content\", "
                           "found no %s", ps->path, where, have_id ? "content" : "id");
        e.id = (uint32_t)id;
        f->added = grow_array(f->added, &f->added_cap, f->nadded + 1, sizeof *f->added,
                              "added tokens");
        f->added[f->nadded++] = e;
    }
    return more == 0 ? 0 : jfail(ps, "added_tokens");
}

static int parse_step(Parse* ps, const char* where, HfComponent* c, HfStep* s, int top);

// A Sequence's steps ("pretokenizers", "normalizers" or "decoders").
static int parse_steps(Parse* ps, const char* where, HfComponent* c) {
    int more;
    if (json_array_begin(&ps->c) != 0) return jfail(ps, where);
    while ((more = json_array_next(&ps->c)) == 1) {
        if (c->nsteps == HF_MAX_STEPS)
            return set_err(ps->err, ps->errlen, "%s: %s: expected at most %d steps, found more",
                           ps->path, where, HF_MAX_STEPS);
        if (parse_step(ps, where, c, &c->steps[c->nsteps++], 0) != 0) return -1;
    }
    return more == 0 ? 0 : jfail(ps, where);
}

// A step's pattern: {"Regex": ...} or {"String": ...}.
static int parse_pattern(Parse* ps, const char* where, HfStep* s) {
    char key[16];
    int more;
    if (json_object_begin(&ps->c) != 0) return jfail(ps, where);
    while ((more = json_object_next(&ps->c, key, sizeof key)) == 1) {
        if (strcmp(key, "Regex") == 0 && !s->regex) {
            s->regex = xmalloc(MAX_PATTERN, "pattern");
            if (read_string(ps, where, s->regex, MAX_PATTERN) != 0) return -1;
        } else if (strcmp(key, "String") == 0) {
            if (read_string(ps, where, s->string, sizeof s->string) != 0) return -1;
            s->has_string = 1;
        } else if (json_skip(&ps->c) != 0) {
            return jfail(ps, where);
        }
    }
    return more == 0 ? 0 : jfail(ps, where);
}

static int parse_step(Parse* ps, const char* where, HfComponent* c, HfStep* s, int top) {
    static const char* const lists[] = {"pretokenizers", "normalizers", "decoders"};
    struct { const char* key; char* out; size_t n; } strings[] = {
        {"type", s->type, sizeof s->type}, {"behavior", s->behavior, sizeof s->behavior},
        {"prepend", s->prepend, sizeof s->prepend}, {"content", s->content, sizeof s->content},
        {"replacement", s->replacement, sizeof s->replacement},
        {"prepend_scheme", s->prepend_scheme, sizeof s->prepend_scheme},
    };
    struct { const char* key; int* out; } literals[] = {
        {"invert", &s->invert}, {"add_prefix_space", &s->add_prefix_space},
        {"use_regex", &s->use_regex}, {"split", &s->split},
    };
    char key[64];
    int more;
    struct { const char* key; int* out; } counts[] = {{"start", &s->start}, {"stop", &s->stop}};
    s->invert = s->add_prefix_space = s->use_regex = s->split = s->start = s->stop = -1;
    if (json_object_begin(&ps->c) != 0) return jfail(ps, where);
    while ((more = json_object_next(&ps->c, key, sizeof key)) == 1) {
        int rc = 1;  // 1: not a key of ours
        for (size_t i = 0; i < sizeof strings / sizeof *strings && rc == 1; i++)
            if (strcmp(key, strings[i].key) == 0 && peek(ps) == '"')
                rc = read_string(ps, where, strings[i].out, strings[i].n);
        for (size_t i = 0; i < sizeof literals / sizeof *literals && rc == 1; i++)
            if (strcmp(key, literals[i].key) == 0) rc = read_literal(ps, where, literals[i].out);
        for (size_t i = 0; i < sizeof counts / sizeof *counts && rc == 1; i++)
            if (strcmp(key, counts[i].key) == 0) rc = read_small_count(ps, where, counts[i].out);
        for (size_t i = 0; i < sizeof lists / sizeof *lists && rc == 1 && top; i++)
            if (strcmp(key, lists[i]) == 0) rc = parse_steps(ps, where, c);
        if (rc == 1 && strcmp(key, "pattern") == 0) rc = parse_pattern(ps, where, s);
        if (rc == 1) rc = json_skip(&ps->c) == 0 ? 0 : jfail(ps, where);
        if (rc != 0) return -1;
    }
    return more == 0 ? 0 : jfail(ps, where);
}

static int parse_top(Parse* ps) {
    static const char* const names[] = {"normalizer", "pre_tokenizer", "decoder"};
    HfTokenizerFile* f = ps->f;
    HfComponent* components[] = {&f->normalizer, &f->pre_tokenizer, &f->decoder};
    char key[64];
    int more;
    if (json_object_begin(&ps->c) != 0) return jfail(ps, "the top level");
    while ((more = json_object_next(&ps->c, key, sizeof key)) == 1) {
        int rc = 1;
        if (strcmp(key, "model") == 0) rc = parse_model(ps);
        else if (strcmp(key, "added_tokens") == 0) rc = parse_added_tokens(ps);
        for (int i = 0; i < 3 && rc == 1; i++)
            if (strcmp(key, names[i]) == 0 && peek(ps) == '{') {
                components[i]->present = 1;
                rc = parse_step(ps, names[i], components[i], &components[i]->top, 1);
            }
        // version, truncation, padding, post_processor; a component that is null
        if (rc == 1) rc = json_skip(&ps->c) == 0 ? 0 : jfail(ps, "the top level");
        if (rc != 0) return -1;
    }
    if (more != 0 || json_end(&ps->c) != 0) return jfail(ps, "the top level");
    return 0;
}

void hf_tokenizer_file_free(HfTokenizerFile* f) {
    HfComponent* components[] = {&f->normalizer, &f->pre_tokenizer, &f->decoder};
    for (int i = 0; i < 3; i++) {
        free(components[i]->top.regex);
        for (int k = 0; k < components[i]->nsteps; k++) free(components[i]->steps[k].regex);
    }
    free(f->text);
    free(f->vocab);
    free(f->added);
    free(f->merges);
    memset(f, 0, sizeof *f);
}

int hf_tokenizer_file_read(const char* path, HfTokenizerFile* f, char* err, size_t errlen) {
    memset(f, 0, sizeof *f);
    f->byte_fallback = f->ignore_merges = -1;
    Parse* ps = xcalloc(1, sizeof *ps, "tokenizer.json parser");
    ps->path = path;
    ps->f = f;
    ps->err = err;
    ps->errlen = errlen;
    uint8_t* text = NULL;
    size_t len = 0;
    int rc = whole_file_read(path, MAX_TOKENIZER_FILE_BYTES, "tokenizer file", &text, &len, err,
                             errlen);
    if (rc == 0) {
        json_init(&ps->c, (const char*)text);
        rc = parse_top(ps);
    }
    if (rc != 0) hf_tokenizer_file_free(f);
    free(ps);
    free(text);
    return rc;
}

void hf_component_describe(const HfComponent* c, char* out, size_t n) {
    const char* top = c->top.type[0] ? c->top.type : "an object without \"type\"";
    int k = snprintf(out, n, "%s", c->present ? top : "none");
    if (!c->present || strcmp(c->top.type, "Sequence") != 0 || k < 0 || (size_t)k >= n) return;
    k += snprintf(out + k, n - (size_t)k, " [");
    for (int i = 0; i < c->nsteps && (size_t)k < n; i++)
        k += snprintf(out + k, n - (size_t)k, "%s%s", i ? ", " : "", c->steps[i].type);
    if ((size_t)k < n) snprintf(out + k, n - (size_t)k, "]");
}
