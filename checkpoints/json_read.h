// A reader for the small JSON documents of a Hugging Face model directory (config.json, the
// header of model.safetensors): a cursor over a NUL-terminated text that takes one value at a
// time, in the order the caller expects them. Every function returns 0 (or, for the *_next
// iterators, 1 when an item follows and 0 at the end), or -1 with a one-line reason in c->err
// ("at byte N: expected ..., found ...").
#pragma once
#include <stddef.h>

typedef struct {
    const char* text;   // the whole document
    const char* p;      // the next unread byte
    char err[400];
} JsonCursor;

void json_init(JsonCursor* c, const char* text);
// '{' then, per member, json_object_next (1: its key is in key and the cursor is at its value,
// which the caller must read or skip; 0: '}' was read).
int json_object_begin(JsonCursor* c);
int json_object_next(JsonCursor* c, char* key, size_t keylen);
// '[' then, per element, json_array_next (1: the cursor is at the element; 0: ']' was read).
int json_array_begin(JsonCursor* c);
int json_array_next(JsonCursor* c);
// A string into out as UTF-8 (escapes decoded, surrogate pairs joined; \u0000 and lone
// surrogates refused: out is a C string); too long for out is an error.
// out NULL: checked and skipped, of any length.
int json_string(JsonCursor* c, char* out, size_t n);
int json_number(JsonCursor* c, double* out);
// A number that is a whole value in [0, max] (max at most 2^53; 1e3 is 1000).
int json_count(JsonCursor* c, unsigned long long max, unsigned long long* out);
// true, false or null: *out is 1, 0 or -1.
int json_literal(JsonCursor* c, int* out);
// Any value, nested to a depth of 64 at most.
int json_skip(JsonCursor* c);
// Nothing but white space left.
int json_end(JsonCursor* c);
