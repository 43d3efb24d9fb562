// GPT-2's byte alphabet, strict UTF-8 decoding and the token bytes -> id index.
#include "data/bpe_tokens.h"

#include <stdlib.h>
#include <string.h>

#include "comm/fail.h"

void bpe_alphabet_decoder(int16_t cp_to_byte[BPE_ALPHABET_CODE_POINTS]) {
    for (int i = 0; i < BPE_ALPHABET_CODE_POINTS; i++) cp_to_byte[i] = -1;
    int extra = 0;
    for (int b = 0; b < 256; b++) {
        int printable = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE);
        cp_to_byte[printable ? b : 256 + extra++] = (int16_t)b;
    }
}

int bpe_utf8_decode(const uint8_t* p, const uint8_t* end, uint32_t* cp) {
    if (p >= end) return 0;
    uint8_t c = p[0];
    if (c < 0x80) { *cp = c; return 1; }
    int n = c >= 0xF0 ? 4 : c >= 0xE0 ? 3 : c >= 0xC2 ? 2 : 0;
    if (n == 0 || c > 0xF4 || end - p < n) return 0;
    uint32_t v = c & (0x7F >> n);
    for (int i = 1; i < n; i++) {
        if ((p[i] & 0xC0) != 0x80) return 0;
        v = (v << 6) | (p[i] & 0x3F);
    }
    static const uint32_t min_cp[5] = {0, 0, 0x80, 0x800, 0x10000};
    if (v < min_cp[n] || v > 0x10FFFF || (v >= 0xD800 && v <= 0xDFFF)) return 0;
    *cp = v;
    return n;
}

static uint64_t hash_bytes(const uint8_t* p, size_t n) {
    uint64_t h = 1469598103934665603ull;
    for (size_t i = 0; i < n; i++) h = (h ^ p[i]) * 1099511628211ull;
    return h ^ (h >> 29);
}

void token_index_init(TokenIndex* index, const TokenTable* table, size_t capacity) {
    size_t slots = 1;
    while (slots < 2 * capacity + 2) slots <<= 1;  // load factor at most 1/2
    index->slot = xcalloc(slots, sizeof *index->slot, "token lookup table");
    index->mask = slots - 1;
    index->offset = table->offset;
    index->bytes = table->bytes;
}

long token_index_find(const TokenIndex* index, const uint8_t* p, size_t n) {
    for (size_t i = hash_bytes(p, n) & index->mask;; i = (i + 1) & index->mask) {
        uint32_t s = index->slot[i];
        if (s == 0) return -1;
        uint32_t id = s - 1, off = index->offset[id];
        if (index->offset[id + 1] - off == n && memcmp(index->bytes + off, p, n) == 0) return id;
    }
}

int token_index_insert(TokenIndex* index, uint32_t id) {
    const uint8_t* p = index->bytes + index->offset[id];
    size_t n = index->offset[id + 1] - index->offset[id];
    if (token_index_find(index, p, n) >= 0) return -1;
    size_t i = hash_bytes(p, n) & index->mask;
    while (index->slot[i] != 0) i = (i + 1) & index->mask;
    index->slot[i] = id + 1;
    return 0;
}

void token_index_free(TokenIndex* index) {
    free(index->slot);
    memset(index, 0, sizeof *index);
}
