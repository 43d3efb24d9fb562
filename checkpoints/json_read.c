#include "checkpoints/json_read.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { MAX_DEPTH = 64 };

void json_init(JsonCursor* c, const char* text) {
    c->text = c->p = text;
    c->err[0] = 0;
}

static void skip_ws(JsonCursor* c) {
    while (*c->p == ' ' || *c->p == '\t' || *c->p == '\n' || *c->p == '\r') c->p++;
}

// "at byte N: expected WHAT, found 'x'" (or "the end").
static int fail(JsonCursor* c, const char* what) {
    char found[16];
    if (!*c->p) snprintf(found, sizeof found, "the end");
    else if ((unsigned char)*c->p < 0x20 || (unsigned char)*c->p >= 0x7f)
        snprintf(found, sizeof found, "byte 0x%02x", (unsigned char)*c->p);
    else snprintf(found, sizeof found, "'%c'", *c->p);
    snprintf(c->err, sizeof c->err, "at byte %ld: expected %s, found %s", (long)(c->p - c->text),
             what, found);
    return -1;
}

static int expect_char(JsonCursor* c, char ch, const char* what) {
    skip_ws(c);
    if (*c->p != ch) return fail(c, what);
    c->p++;
    return 0;
}

int json_object_begin(JsonCursor* c) { return expect_char(c, '{', "'{'"); }
int json_array_begin(JsonCursor* c) { return expect_char(c, '[', "'['"); }

// After '{' or '[' (first item) or an item: 1 when another item follows (its separator read).
static int next_item(JsonCursor* c, char close, const char* what) {
    skip_ws(c);
    // The byte before the cursor, past white space, tells whether this is the first item.
    const char* q = c->p - 1;
    while (q > c->text && (*q == ' ' || *q == '\t' || *q == '\n' || *q == '\r')) q--;
    const int first = *q == (close == '}' ? '{' : '[');
    if (*c->p == close) {
        c->p++;
        return 0;
    }
    if (!first) {
        if (*c->p != ',') return fail(c, what);
        c->p++;
        skip_ws(c);
    }
    return 1;
}

int json_object_next(JsonCursor* c, char* key, size_t keylen) {
    const int more = next_item(c, '}', "',' or '}'");
    if (more != 1) return more;
    if (json_string(c, key, keylen) != 0) return -1;
    return expect_char(c, ':', "':'") == 0 ? 1 : -1;
}

int json_array_next(JsonCursor* c) { return next_item(c, ']', "',' or ']'"); }

int json_string(JsonCursor* c, char* out, size_t n) {
    if (expect_char(c, '"', "a string") != 0) return -1;
    size_t k = 0;
    for (;;) {
        unsigned char ch = (unsigned char)*c->p;
        if (!ch || ch < 0x20) return fail(c, "the rest of the string");
        c->p++;
        if (ch == '"') break;
        if (ch == '\\') {
            const char e = *c->p++;
            const char* from = "\"\\/bfnrt";
            const char* to = "\"\\/\b\f\n\r\t";
            const char* hit = e ? strchr(from, e) : NULL;
            if (hit) ch = (unsigned char)to[hit - from];
            else if (e == 'u') {
                unsigned v = 0;
                for (int i = 0; i < 4; i++) {
                    const char h = *c->p;
                    const int d = h >= '0' && h <= '9' ? h - '0' : h >= 'a' && h <= 'f' ? h - 'a' + 10
                                : h >= 'A' && h <= 'F' ? h - 'A' + 10 : -1;
                    if (d < 0) return fail(c, "four hex digits after \\u");
                    v = 16 * v + (unsigned)d;
                    c->p++;
                }
                if (v == 0 || v >= 0x80) {
                    c->p -= 6;
                    return fail(c, "a \\u escape of an ASCII character other than NUL");
                }
                ch = (unsigned char)v;
            } else {
                c->p--;
                return fail(c, "an escape (\\\" \\\\ \\/ \\b \\f \\n \\r \\t \\uXXXX)");
            }
        }
        if (!out) continue;
        if (k + 1 >= n) {
            snprintf(c->err, sizeof c->err, "at byte %ld: a string longer than %zu bytes",
                     (long)(c->p - c->text), n - 1);
            return -1;
        }
        out[k++] = (char)ch;
    }
    if (out) out[k] = 0;
    return 0;
}

int json_number(JsonCursor* c, double* out) {
    skip_ws(c);
    // JSON's grammar: -?(0|[1-9][0-9]*)(.[0-9]+)?([eE][+-]?[0-9]+)?
    const char* q = c->p;
    if (*q == '-') q++;
    if (*q == '0') q++;
    else if (*q >= '1' && *q <= '9') while (*q >= '0' && *q <= '9') q++;
    else return fail(c, "a number");
    if (*q == '.') {
        if (!(*++q >= '0' && *q <= '9')) return fail(c, "a number");
        while (*q >= '0' && *q <= '9') q++;
    }
    if (*q == 'e' || *q == 'E') {
        q++;
        if (*q == '+' || *q == '-') q++;
        if (!(*q >= '0' && *q <= '9')) return fail(c, "a number");
        while (*q >= '0' && *q <= '9') q++;
    }
    // strtod on the grammar's span alone: it would read on past it ("01", "0x1", "inf").
    char span[64];
    if (q - c->p >= (long)sizeof span) return fail(c, "a number of at most 63 characters");
    memcpy(span, c->p, (size_t)(q - c->p));
    span[q - c->p] = 0;
    const double v = strtod(span, NULL);
    if (!isfinite(v)) return fail(c, "a finite number");
    c->p = q;
    *out = v;
    return 0;
}

int json_count(JsonCursor* c, unsigned long long max, unsigned long long* out) {
    if (max > (1ull << 53)) max = 1ull << 53;   // every whole double up to here is exact
    skip_ws(c);
    const char* at = c->p;
    double v;
    if (json_number(c, &v) != 0) return -1;
    if (v < 0 || v != floor(v) || v > (double)max) {
        c->p = at;
        char what[64];
        snprintf(what, sizeof what, "a whole number in [0, %llu]", max);
        return fail(c, what);
    }
    *out = (unsigned long long)v;   // exact: max is at most 2^53
    return 0;
}

int json_literal(JsonCursor* c, int* out) {
    skip_ws(c);
    static const char* const words[] = {"null", "false", "true"};
    for (int k = 0; k < 3; k++)
        if (!strncmp(c->p, words[k], strlen(words[k]))) {
            c->p += strlen(words[k]);
            *out = k - 1;
            return 0;
        }
    return fail(c, "true, false or null");
}

static int skip_value(JsonCursor* c, int depth) {
    if (depth > MAX_DEPTH) return fail(c, "nesting at most 64 deep");
    skip_ws(c);
    int more;
    switch (*c->p) {
    case '"': return json_string(c, NULL, 0);
    case '{':
        c->p++;
        while ((more = next_item(c, '}', "',' or '}'")) == 1) {
            if (json_string(c, NULL, 0) != 0 || expect_char(c, ':', "':'") != 0 ||
                skip_value(c, depth + 1) != 0)
                return -1;
        }
        return more;
    case '[':
        c->p++;
        while ((more = next_item(c, ']', "',' or ']'")) == 1)
            if (skip_value(c, depth + 1) != 0) return -1;
        return more;
    case 't': case 'f': case 'n': {
        int v;
        return json_literal(c, &v);
    }
    default: {
        double v;
        if (*c->p != '-' && !(*c->p >= '0' && *c->p <= '9')) return fail(c, "a value");
        return json_number(c, &v);
    }
    }
}

int json_skip(JsonCursor* c) { return skip_value(c, 0); }

int json_end(JsonCursor* c) {
    skip_ws(c);
    return *c->p ? fail(c, "the end of the document") : 0;
}
