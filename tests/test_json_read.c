// checkpoints/json_read.c on known answers: the values of a config.json-like document in order,
// escapes, numbers in every JSON form, nesting, and the one-line errors for what is not JSON.
#include <stdio.h>
#include <string.h>

#include "checkpoints/json_read.h"

static int fails = 0;

static void expect(int ok, const char* what) {
    printf("  %s  %s\n", ok ? "ok  " : "FAIL", what);
    fails += !ok;
}

// Skips the whole document; returns the error ("" when it parses).
static const char* skip_all(const char* text) {
    static JsonCursor c;
    json_init(&c, text);
    if (json_skip(&c) == 0 && json_end(&c) == 0) c.err[0] = 0;
    return c.err;
}

static void values(void) {
    const char* text = " {\"n_embd\": 768, \"eps\": 1e-05, \"big\": 1E3, \"neg\": -0.5,\n"
                       "  \"s\": \"a\\\"b\\\\c\\/d\\n\\u0041\", \"t\": true, \"nul\": null,\n"
                       "  \"arr\": [1, [2, {\"x\": []}], {}], \"last\": 2} ";
    JsonCursor c;
    json_init(&c, text);
    char key[32], s[32];
    unsigned long long n;
    double x;
    int lit;
    expect(json_object_begin(&c) == 0, "object begins");
    expect(json_object_next(&c, key, sizeof key) == 1 && !strcmp(key, "n_embd") &&
           json_count(&c, 1000, &n) == 0 && n == 768, "n_embd = 768");
    expect(json_object_next(&c, key, sizeof key) == 1 && json_number(&c, &x) == 0 && x == 1e-5,
           "eps = 1e-05");
    expect(json_object_next(&c, key, sizeof key) == 1 && json_count(&c, 5000, &n) == 0 && n == 1000,
           "1E3 counts 1000");
    expect(json_object_next(&c, key, sizeof key) == 1 && json_number(&c, &x) == 0 && x == -0.5,
           "-0.5");
    expect(json_object_next(&c, key, sizeof key) == 1 && json_string(&c, s, sizeof s) == 0 &&
           !strcmp(s, "a\"b\\c/d\nA"), "escapes \\\" \\\\ \\/ \\n \\u0041 decoded");
    expect(json_object_next(&c, key, sizeof key) == 1 && json_literal(&c, &lit) == 0 && lit == 1,
           "true");
    expect(json_object_next(&c, key, sizeof key) == 1 && json_literal(&c, &lit) == 0 && lit == -1,
           "null");
    expect(json_object_next(&c, key, sizeof key) == 1 && !strcmp(key, "arr") && json_skip(&c) == 0,
           "a nested array skipped");
    expect(json_object_next(&c, key, sizeof key) == 1 && !strcmp(key, "last") &&
           json_count(&c, 10, &n) == 0 && n == 2, "the member after it");
    expect(json_object_next(&c, key, sizeof key) == 0 && json_end(&c) == 0, "the end");
}

static void errors(void) {
    static const struct { const char* text; const char* err; } cases[] = {
        {"{\"a\": 1,}", "at byte 8: expected a string, found '}'"},
        {"{\"a\" 1}", "at byte 5: expected ':', found '1'"},
        {"[1 2]", "at byte 3: expected ',' or ']', found '2'"},
        {"[01]", "at byte 2: expected ',' or ']', found '1'"},
        {"[1.]", "at byte 1: expected a number, found '1'"},
        {"{\"a\": tru}", "at byte 6: expected true, false or null, found 't'"},
        {"\"a\\qb\"", "at byte 3: expected an escape (\\\" \\\\ \\/ \\b \\f \\n \\r \\t \\uXXXX), found 'q'"},
        {"\"\\u0000\"", "at byte 1: expected a \\u escape other than \\u0000, found '\\'"},
        {"\"a\\ud800\"", "at byte 2: expected a high surrogate escape followed by a low one, found '\\'"},
        {"\"\\ud800\\u0041\"", "at byte 1: expected a high surrogate escape followed by a low one, found '\\'"},
        {"\"\\udc00\"", "at byte 1: expected a \\u escape that is not a lone low surrogate, found '\\'"},
        {"\"\\u12g4\"", "at byte 5: expected four hex digits after \\u, found 'g'"},
        {"\"a\nb\"", "at byte 2: expected the rest of the string, found byte 0x0a"},
        {"[1e999]", "at byte 1: expected a finite number, found '1'"},
        {"{} x", "at byte 3: expected the end of the document, found 'x'"},
        {"{\"a\": [", "at byte 7: expected a value, found the end"},
        {"[0x1]", "at byte 2: expected ',' or ']', found 'x'"},
        {"[inf]", "at byte 1: expected a value, found 'i'"},
    };
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        const char* err = skip_all(cases[k].text);
        char what[200];
        snprintf(what, sizeof what, "refused: %s (got: %s)", cases[k].err, err);
        expect(!strcmp(err, cases[k].err), what);
    }
    char deep[200] = "";
    for (int k = 0; k < 70; k++) strcat(deep, "[");
    expect(strstr(skip_all(deep), "expected nesting at most 64 deep") != NULL, "70 brackets refused");
    JsonCursor c;
    json_init(&c, "[3.5, -1, 2e0]");
    unsigned long long n;
    expect(json_array_begin(&c) == 0 && json_array_next(&c) == 1 && json_count(&c, 9, &n) != 0 &&
           strstr(c.err, "expected a whole number in [0, 9]"), "3.5 is no count");
    json_init(&c, "\"abcdefgh\"");
    char small[4];
    expect(json_string(&c, small, sizeof small) != 0 && strstr(c.err, "longer than 3 bytes"),
           "a string too long for its buffer");
}

// Escapes of any code point become UTF-8 (a surrogate pair one 4-byte character); UTF-8 in the
// text passes as it is; a string that fits only without its last character is refused.
static void unicode(void) {
    JsonCursor c;
    char s[16];
    json_init(&c, "\"\\u00e9\\u20AC\\ud83d\\ude00x\xc3\xa9\"");
    expect(json_string(&c, s, sizeof s) == 0 &&
           !strcmp(s, "\xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80x\xc3\xa9"),
           "\\u00e9 \\u20AC \\ud83d\\ude00 to UTF-8 (2, 3 and 4 bytes), raw UTF-8 kept");
    json_init(&c, "\"ab\\ud83d\\ude00\"");
    expect(json_string(&c, s, 6) == -1 && strstr(c.err, "a string longer than 5 bytes"),
           "a 4-byte character that does not fit: refused, not cut");
    json_init(&c, "\"ab\\ud83d\\ude00\"");
    expect(json_string(&c, s, 7) == 0 && strlen(s) == 6, "... and fits with one byte more");
}

int main(void) {
    values();
    unicode();
    errors();
    printf("json_read: %d failure(s)\n", fails);
    return fails != 0;
}
