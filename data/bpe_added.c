// Added tokens in text: leftmost-longest matches, special ones skipped, lstrip and rstrip.
#include "data/bpe_added.h"

#include <stdlib.h>
#include <string.h>

#include "comm/fail.h"
#include "data/bpe_nfc.h"
#include "data/bpe_tokens.h"

static const uint8_t* text_of(const BpeVocab* v, const BpeAddedToken* t) {
    return v->added_text + t->off;
}

// The longest token whose text begins at text[i], or NULL: one look-up per distinct length,
// longest first, however many tokens there are.
static const BpeAddedToken* longest_at(const BpeVocab* v, const uint8_t* text, size_t len,
                                       size_t i) {
    for (size_t k = 0; k < v->nadded_lengths; k++) {
        const size_t n = v->added_lengths[k];
        const long at = n <= len - i ? token_index_find(&v->added_index, text + i, n) : -1;
        if (at >= 0) return &v->added[at];
    }
    return NULL;
}

// The length of the White_Space character at p (before end), or 0.
static size_t space_at(const uint8_t* p, const uint8_t* end) {
    uint32_t c;
    const int k = bpe_utf8_decode(p, end, &c);
    return k > 0 && bpe_white_space(c) ? (size_t)k : 0;
}

// The length of the White_Space character that ends at text[at] (not before floor), or 0.
static size_t space_before(const uint8_t* text, size_t floor, size_t at) {
    size_t j = at;
    while (j > floor && at - j < 4) {
        j--;
        if ((text[j] & 0xC0) != 0x80) break;  // the first byte of the character
    }
    return j < at && space_at(text + j, text + at) == at - j ? at - j : 0;
}

int bpe_added_find(const BpeVocab* v, const uint8_t* text, size_t len, size_t from,
                   size_t floor, BpeAddedMatch* m) {
    for (size_t i = from; i < len; i++) {
        if (!v->added_first[text[i]]) continue;
        const BpeAddedToken* t = longest_at(v, text, len, i);
        if (!t) continue;
        if (t->special) {  // its text stays text; the search goes on after it
            i += t->len - 1;
            continue;
        }
        size_t start = i, end = i + t->len, k;
        while (t->lstrip && (k = space_before(text, floor, start)) > 0) start -= k;
        while (t->rstrip && (k = space_at(text + end, text + len)) > 0) end += k;
        *m = (BpeAddedMatch){start, end, i + t->len, t->id};
        return 1;
    }
    return 0;
}

int bpe_added_cut_ok(const BpeVocab* v, const uint8_t* text, size_t len, size_t at) {
    for (size_t k = 0; k < v->nadded; k++) {
        const BpeAddedToken* t = &v->added[k];
        const uint8_t* s = text_of(v, t);
        for (size_t i = at >= t->len ? at - t->len + 1 : 0; i < at; i++)
            if (i + t->len <= len && memcmp(text + i, s, t->len) == 0) return 0;
        if (t->rstrip && !t->special && at >= t->len && memcmp(text + at - t->len, s, t->len) == 0)
            return 0;
    }
    return 1;
}

static int longer_first(const void* a, const void* b) {
    const uint32_t x = *(const uint32_t*)a, y = *(const uint32_t*)b;
    return (x < y) - (x > y);
}

long bpe_added_index(BpeVocab* v, const uint8_t* text) {
    // Texts back to back in added[] order, so that index k of the table is added[k].
    size_t total = 0;
    for (size_t k = 0; k < v->nadded; k++) total += v->added[k].len;
    v->added_text = xmalloc(total + 1, "added token text");
    v->added_offset = xmalloc((v->nadded + 1) * sizeof *v->added_offset, "added token offsets");
    v->added_lengths = xmalloc((v->nadded + 1) * sizeof *v->added_lengths, "added token lengths");
    uint32_t at = 0;
    for (size_t k = 0; k < v->nadded; k++) {
        BpeAddedToken* t = &v->added[k];
        memcpy(v->added_text + at, text + t->off, t->len);
        v->added_offset[k] = at;
        t->off = at;
        at += t->len;
        v->added_lengths[k] = t->len;
    }
    v->added_offset[v->nadded] = at;
    const TokenTable texts = {(uint32_t)v->nadded, TOKENIZER_NO_EOT, v->added_offset,
                              v->added_text, 0};
    token_index_init(&v->added_index, &texts, v->nadded);
    for (size_t k = 0; k < v->nadded; k++)
        if (token_index_insert(&v->added_index, (uint32_t)k) != 0) return (long)k;
    qsort(v->added_lengths, v->nadded, sizeof *v->added_lengths, longer_first);
    size_t distinct = 0;
    for (size_t k = 0; k < v->nadded; k++)
        if (distinct == 0 || v->added_lengths[distinct - 1] != v->added_lengths[k])
            v->added_lengths[distinct++] = v->added_lengths[k];
    v->nadded_lengths = distinct;
    memset(v->added_first, 0, sizeof v->added_first);
    for (size_t k = 0; k < v->nadded; k++) v->added_first[text_of(v, &v->added[k])[0]] = 1;
    return -1;
}

int bpe_added_space_at_ends(const uint8_t* p, size_t n) {
    return n > 0 && (space_at(p, p + n) > 0 || space_before(p, 0, n) > 0);
}
