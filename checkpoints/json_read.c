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

// Four hex digits at the cursor (after backslash-u), or -1 with the cursor left on the bad one.
static long hex4(JsonCursor* c) {
    long v = 0;
    for (int i = 0; i < 4; i++, c->p++) {
        const char h = *c->p;
        const int d = h >= '0' && h <= '9' ? h - '0' : h >= 'a' && h <= 'f' ? h - 'a' + 10
                    : h >= 'A' && h <= 'F' ? h - 'A' + 10 : -1;
        if (d < 0) return -1;
        v = 16 * v + d;
    }
    return v;
}

// A backslash-u escape (the cursor after the 'u'), with its low surrogate when it is a high
// one, as a code point; -1 (err set) for bad digits, a lone surrogate or NUL (the strings are C strings).
static long unicode_escape(JsonCursor* c) {
    const char* at = c->p - 2;
    long v = hex4(c);
    if (v < 0) return fail(c, "four hex digits after \\u");
    if (v >= 0xdc00 && v <= 0xdfff) {
        c->p = at;
        return fail(c, "a \\u escape that is not a lone low surrogate");
    }
    if (v >= 0xd800 && v <= 0xdbff) {
        long lo = c->p[0] == '\\' && c->p[1] == 'u' ? (c->p += 2, hex4(c)) : -1;
        if (lo < 0xdc00 || lo > 0xdfff) {
            c->p = at;
            return fail(c, "a high surrogate escape followed by a low one");
        }
        v = 0x10000 + ((v - 0xd800) << 10) + (lo - 0xdc00);
    }
    if (v == 0) {
        c->p = at;
        return fail(c, "a \\u escape other than \\u0000");
    }
    return v;
}

// Code point v as UTF-8 into u (1 to 4 bytes); returns the count.
static int utf8_encode(long v, unsigned char* u) {
    if (v < 0x80) {
        u[0] = (unsigned char)v;
        return 1;
    }
    if (v < 0x800) {
        u[0] = (unsigned char)(0xc0 | v >> 6);
        u[1] = (unsigned char)(0x80 | (v & 0x3f));
        return 2;
    }
    if (v < 0x10000) {
        u[0] = (unsigned char)(0xe0 | v >> 12);
        u[1] = (unsigned char)(0x80 | (v >> 6 & 0x3f));
        u[2] = (unsigned char)(0x80 | (v & 0x3f));
        return 3;
    }
    u[0] = (unsigned char)(0xf0 | v >> 18);
    u[1] = (unsigned char)(0x80 | (v >> 12 & 0x3f));
    u[2] = (unsigned char)(0x80 | (v >> 6 & 0x3f));
    u[3] = (unsigned char)(0x80 | (v & 0x3f));
    return 4;
}

int json_string(JsonCursor* c, char* out, size_t n) {
    if (expect_char(c, '"', "a string") != 0) return -1;
    size_t k = 0;
    for (;;) {
        unsigned char u[4];
        int len = 1;
        u[0] = (unsigned char)*c->p;
        if (!u[0] || u[0] < 0x20) return fail(c, "the rest of the string");
        c->p++;
        if (u[0] == '"') break;
        if (u[0] == '\\') {
            const char e = *c->p++;
            const char* from = "\"\\/bfnrt";
            const char* to = "\"\\/\b\f\n\r\t";
            const char* hit = e ? strchr(from, e) : NULL;
            if (hit) u[0] = (unsigned char)to[hit - from];
            else if (e == 'u') {
                const long v = unicode_escape(c);
                if (v < 0) return -1;
                len = utf8_encode(v, u);
            } else {
                c->p--;
                return fail(c, "an escape (\\\" \\\\ \\/ \\b \\f \\n \\r \\t \\uXXXX)");
            }
        }
        if (!out) continue;
        if (k + len >= n) {
            snprintf(c->err, sizeof c->err, "at byte %ld: a string longer than %zu bytes",
                     (long)(c->p - c->text), n - 1);
            return -1;
        }
        for (int i = 0; i < len; i++) out[k++] = (char)u[i];
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
